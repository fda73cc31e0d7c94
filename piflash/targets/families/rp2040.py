"""The RP2040 family (pyOCD target types ``rp2040``, ``rp2040_core0``, ``rp2040_core1``).

- **Identity**: the session reaches the chip by TARGETSEL 0x01002927 (RP2040 datasheet 2.3.4.2),
  which only an RP2040's core 0 DP answers on the multi-drop wire: that is its identity, and the
  chip is only reached through pyOCD's rp2040 connect sequence (:attr:`needs_target_init`).
- **Unique ID**: the RP2040 has none of its own; pico-sdk's ``pico_get_unique_board_id`` reads
  the boot flash's (:func:`piflash.targets.families.rp2.read_flash_unique_id`), which halts the
  core, so it is read only where piflash reprograms or checks the board anyway.
- **Read-out protection**: none, and no debug lock (RP2040 datasheet: neither section 2.3.4
  "Debug" nor 2.8 "Bootrom" has one).
- **Flash speed-ups**: :mod:`piflash.targets.families.rp2_flash` (pyOCD's RP2 algorithm).
- **UF2**: ``RP2040`` (0xE48BFF56) and the RP2xxx absolute family (0xE48BFF57), Microsoft's
  ``utils/uf2families.json`` and pico-sdk ``boot/uf2.h``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, ClassVar, Dict, Optional, Tuple

from piflash.errors import ProtectError
from piflash.targets.families.base import ChipIdentity, Family, FlashSpeedups, Port, ProtectionStatus, names_pattern
from piflash.targets.families.rp2_flash import speedups_for

if TYPE_CHECKING:
    from pyocd.core.session import Session
    from pyocd.flash.flash import Flash

__all__ = ["Rp2040Family", "FAMILY", "TARGETSEL"]

LOG = logging.getLogger(__name__)

#: TARGETSEL of the RP2040's core 0 DP (RP2040 datasheet 2.3.4.2).
TARGETSEL = 0x01002927


class Rp2040Family(Family):
    """The RP2040 family (see the module docstring)."""

    name = "rp2040"
    title = "RP2040"
    names = names_pattern(r"rp2040(_core[01])?")  # pyocd/target/builtin/__init__.py
    needs_target_init = True
    uid_halts_core = True
    #: No fixed sleep after a reset: the RP2040's own AIRCR description (datasheet section 2.4.8,
    #: M0PLUS AIRCR; pico-sdk RP2040.svd) says SYSRESETREQ resets "all major components except
    #: for debug ... The debugger does not lose contact with the device"; pyOCD's polls of
    #: CTRL/STAT and DHCSR.S_RESET_ST wait for the core (Family.reset_post_delay).
    reset_post_delay = 0.0
    #: Raspberry Pi Pico (the board's own pages).
    boards: ClassVar[Dict[str, str]] = {"pico": "rp2040"}
    uf2_ids: ClassVar[Dict[str, Tuple[int, ...]]] = {"rp2040": (0xE48BFF56, 0xE48BFF57)}

    def read_uid(self, session: Session, strict: bool = False, intrusive: bool = False) -> Optional[str]:
        """The boot flash's unique ID, only when ``intrusive`` (the read halts the core)."""
        if not intrusive:
            return None
        from piflash.targets.families.rp2 import read_flash_unique_id

        try:
            return read_flash_unique_id(session).hex()
        except Exception:
            if strict:
                raise
            LOG.debug("could not read the RP2040 flash unique ID", exc_info=True)
            return None

    def protection_status(
        self, port: Port, target: Optional[str], named_by: Optional[str] = None, chip: Optional[ChipIdentity] = None
    ) -> ProtectionStatus:
        """Always open: the chip has no protection (its identity: the TARGETSEL it answered)."""
        return self.read_protection(port, "RP2040")

    def read_protection(self, port: Port, chip: Optional[str]) -> ProtectionStatus:
        """Open, with nothing read (there is no register to read)."""
        return ProtectionStatus(
            self.name,
            False,
            False,
            "RP2040 (answered TARGETSEL %#010x): this chip has no read-out protection or debug lock" % TARGETSEL,
            "RP2040",
        )

    def check_lock(self, target: str) -> None:
        """:raises ProtectError: always: there is nothing to set."""
        raise ProtectError(
            "the RP2040 has no read-out protection to set",
            hint="its flash is readable by any debugger or by BOOTSEL mode; an RP2350 has OTP-based secure boot",
        )

    def flash_speedups(self, flash: Flash) -> Optional[FlashSpeedups]:
        """:data:`piflash.targets.families.rp2_flash.SPEEDUPS` for pyOCD's RP2 algorithm."""
        return speedups_for(flash)


FAMILY = Rp2040Family()
