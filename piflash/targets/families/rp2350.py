"""The RP2350 family (pyOCD target type ``rp2350``).

- **Identity**: SYSINFO CHIP_ID at 0x40000000 (RP2350 datasheet 12.15.1: PART 0x0004 [27:12],
  MANUFACTURER 0x493 [11:1], bit 0; REVISION [31:28]). The chip is reached through pyOCD's
  rp2350 connect sequence (ADIv6, its root ROM table: :attr:`needs_target_init`).
- **Unique ID**: OTP rows CHIPID0-3 (rows 0-3, 16 bits each) through the ECC read alias
  OTP_DATA_BASE 0x40130000, a row per half-word (pico-sdk hardware/regs/otp_data.h,
  addressmap.h); the ID as pico-sdk's pico_get_unique_board_id gives it (pico_unique_id/unique_id.c:
  CHIPID3..0, most significant byte first) is the 8 bytes read, reversed. The Secure AHB-AP
  reads them without set-up (ACCESSCTRL_OTP resets to Secure access from any master).
- **Flash size**: where the board is reprogrammed or checked (``read_uid`` with ``intrusive``),
  the boot flash's JEDEC ID is read through the QMI's direct mode
  (:func:`piflash.targets.families.rp2.read_flash_size`), so an image past the flash's real size
  (the Pico 2's W25Q32RV: 4 MiB; pyOCD's map has the 16 MiB XIP window) is refused before
  anything is erased, as on the RP2040.
- **Protection**: no flash read-out protection (the flash is an external QSPI part; datasheet
  10.1): OTP flags that close debug (CRIT1.SECURE_DEBUG_DISABLE, DEBUG_DISABLE; datasheet
  3.5.9) and secure boot, latched at boot into OTP's CRITICAL register (datasheet 13, table
  "CRITICAL"; pico-sdk hardware/regs/otp.h: OTP_BASE + 0x148): SECURE_BOOT_ENABLE [0],
  SECURE_DEBUG_DISABLE [1], DEBUG_DISABLE [2], GLITCH_DETECTOR_ENABLE [4]. piflash reads them,
  never sets them.
- **Flash speed-ups**: :mod:`piflash.targets.families.rp2_flash` (pyOCD's RP2 algorithm).
- **UF2**: RP2350 Arm Secure, RISC-V, Arm Non-secure (0xE48BFF59-0xE48BFF5B) and the RP2xxx
  absolute family (0xE48BFF57): pico-sdk ``src/common/boot_uf2_headers/include/boot/uf2.h``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, ClassVar, Dict, Optional, Tuple

from piflash.errors import ProtectError, WrongTargetError
from piflash.targets.families.base import (
    ChipIdentity,
    Family,
    FlashSpeedups,
    Port,
    ProtectionStatus,
    TargetUidLocation,
    names_pattern,
)
from piflash.targets.families.rp2_flash import speedups_for

if TYPE_CHECKING:
    from pyocd.core.session import Session
    from pyocd.flash.flash import Flash

__all__ = ["Rp2350Family", "FAMILY"]

LOG = logging.getLogger(__name__)

_CHIP_ID, _PART = 0x40000000, 0x00004927
_CRITICAL = 0x40120148
_CRIT_SECURE_BOOT, _CRIT_SECURE_DEBUG_OFF, _CRIT_DEBUG_OFF, _CRIT_GLITCH = 1 << 0, 1 << 1, 1 << 2, 1 << 4


class Rp2350Family(Family):
    """The RP2350 family (see the module docstring)."""

    name = "rp2350"
    title = "RP2350"
    names = names_pattern(r"rp2350")  # pyocd/target/builtin/__init__.py
    needs_target_init = True
    #: reset_post_delay stays pyOCD's 0.1 s (None): that the RP2350's SYSRESETREQ keeps the debug
    #: port was not confirmed from its datasheet (section 7 "Resets": the reset goes through the
    #: chip's power-on state machine and its boot ROM), so the fixed sleep stays.
    uid_location = TargetUidLocation(
        0x40130000, 8, "RP2350 datasheet 13 OTP CHIPID0-3; pico-sdk unique_id.c", reverse=True
    )
    #: Raspberry Pi Pico 2 (the board's own pages).
    boards: ClassVar[Dict[str, str]] = {"pico": "rp2350"}
    uf2_ids: ClassVar[Dict[str, Tuple[int, ...]]] = {"rp2350": (0xE48BFF59, 0xE48BFF5A, 0xE48BFF5B, 0xE48BFF57)}

    def read_uid(self, session: Session, strict: bool = False, intrusive: bool = False) -> Optional[str]:
        """The OTP chip ID (:attr:`uid_location`); when ``intrusive`` (the board is reprogrammed or
        checked next) also the boot flash's size from its JEDEC ID, for the image's check. A size
        that cannot be read leaves the memory map's check alone (logged, never raised).
        """
        uid = super().read_uid(session, strict, intrusive)
        if intrusive:
            from piflash.targets.families.rp2 import read_flash_size

            try:
                read_flash_size(session)
            except Exception:  # noqa: BLE001  (the memory map's size still bounds the image)
                LOG.debug("could not read the RP2350 flash's JEDEC ID", exc_info=True)
        return uid

    def protection_status(
        self, port: Port, target: Optional[str], named_by: Optional[str] = None, chip: Optional[ChipIdentity] = None
    ) -> ProtectionStatus:
        """CHIP_ID (identity), then OTP CRITICAL. Read through the Secure AHB-AP, so debug is open
        now (a flag may be set and re-opened by firmware through OTP DEBUGEN: ``configured`` and
        not ``locked``).

        :raises WrongTargetError: CHIP_ID is not an RP2350's.
        """
        chip_id = port.read32(_CHIP_ID)
        if chip_id & 0x0FFFFFFF != _PART:
            raise WrongTargetError(
                f"{named_by or '--target'} says {target}, but SYSINFO CHIP_ID reads "
                f"{chip_id:#010x}, not an RP2350's (PART 0x0004, Raspberry Pi)",
                found="CHIP_ID %#010x" % chip_id,
                hint="check --target, or that the probe is wired to the board you mean",
            )
        crit = port.read32(_CRITICAL)
        flags = [
            name
            for bit, name in (
                (_CRIT_SECURE_BOOT, "secure boot"),
                (_CRIT_SECURE_DEBUG_OFF, "Secure debug off"),
                (_CRIT_DEBUG_OFF, "debug off"),
                (_CRIT_GLITCH, "glitch detector"),
            )
            if crit & bit
        ]
        return ProtectionStatus(
            self.name,
            False,
            bool(crit & (_CRIT_SECURE_DEBUG_OFF | _CRIT_DEBUG_OFF)),
            f"OTP CRITICAL = {crit:#x} ({', '.join(flags) or 'no flag set'}); read through "
            "the Secure AHB-AP, so debug is open; the flash (an external QSPI part) has "
            "no read-out protection of its own",
            "RP2350 (CHIP_ID %#010x)" % chip_id,
        )

    def read_protection(self, port: Port, chip: Optional[str]) -> ProtectionStatus:
        """As :meth:`protection_status` (CHIP_ID is read again)."""
        return self.protection_status(port, self.name)

    def check_lock(self, target: str) -> None:
        """:raises ProtectError: always: piflash does not program the OTP debug flags."""
        raise ProtectError(
            "piflash does not program the RP2350's OTP debug flags: CRIT1.SECURE_DEBUG_DISABLE "
            "and DEBUG_DISABLE are one-time bits that no erase clears",
            hint="set them with Raspberry Pi's picotool ('picotool otp'), as the RP2350 "
            "datasheet's secure boot procedure says (section 10.5); nothing was written",
        )

    def flash_speedups(self, flash: Flash) -> Optional[FlashSpeedups]:
        """:data:`piflash.targets.families.rp2_flash.SPEEDUPS` for pyOCD's RP2 algorithm."""
        return speedups_for(flash)


FAMILY = Rp2350Family()
