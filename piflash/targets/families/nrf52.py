"""The nRF52 family (nRF52832, nRF52833, nRF52840...; pyOCD's ``nrf52`` is the nRF52832).

- **Identity**: AP1 IDR (offset 0xFC of APSEL 1; ADIv5.2) is the CTRL-AP's, 0x02880000 with its
  version in bits [31:28] (nRF52840 Product Specification v1.7 section 4.6.1, "CTRL-AP
  registers", IDR; pyOCD ``pyocd/target/family/target_nRF52.py`` ``CTRL_IDR_EXPECTED`` and
  ``CTRL_IDR_VERSION_MASK``); no nRF51 or STM32F1 has an AP there. Then FICR INFO.PART at
  0x10000100 (PS v1.7 section 4.4; pyOCD ``check_part_info`` reads the same word), e.g. 0x52840.
  A locked nRF52 cuts its AHB-AP off, so the part number is hidden then; the CTRL-AP IDR still
  proves the family, which is all the verdict (CTRL-AP APPROTECTSTATUS) and a recover (CTRL-AP
  ERASEALL) depend on.
- **Unique ID**: FICR DEVICEID[0..1] at 0x10000060 (PS v1.7 section 4.4.1.2).
- **Sector erase**: t_ERASEPAGE 85 ms at most (PS v1.7 section 4.3.9): 1 s allowed.
- **Chip erase**: t_ERASEALL 169 ms at most (PS v1.7 section 4.3.9): 1.69 s allowed.
- **Read-out protection**: the setting is UICR.APPROTECT at 0x10001208 (section 4.5; PALL 0x00 =
  enabled, 0xFF = disabled), written through the NVMC and taken into effect at the next reset.
  The state is CTRL-AP APPROTECTSTATUS (0x00C), 0 while protected. While protected the AHB-AP is
  cut off; recover writes ERASEALL (0x004) = 1, polls ERASEALLSTATUS (0x008) until 0, then pulses
  RESET (0x000): flash, RAM and UICR are erased and the part opens.
- **UF2**: Microsoft's ``utils/uf2families.json`` entries for the nRF52 parts.
"""

from __future__ import annotations

import re
from typing import ClassVar, Dict, FrozenSet, Optional, Tuple

from piflash.targets.families.base import (
    ChipIdentity,
    IdEvidence,
    Port,
    ProtectionStatus,
    ReadOutProtectedFamily,
    TargetUidLocation,
    names_pattern,
    wait_until,
)
from piflash.targets.families.nrf import UICR_CUSTOMER, nvmc_write

__all__ = ["Nrf52Family", "FAMILY", "CTRL_AP"]

#: The CTRL-AP's APSEL, IDR and its version mask (see the module docstring).
CTRL_AP = 1
_CTRL_AP_IDR, _CTRL_IDR_VERSION_MASK = 0x02880000, 0xF0000000
_CTRL_RESET, _CTRL_ERASEALL, _CTRL_ERASEALLSTATUS, _CTRL_APPROTECTSTATUS = 0x000, 0x004, 0x008, 0x00C
_FICR_INFO_PART = 0x10000100
_APPROTECT = 0x10001208
_APPROTECT_ENABLE = 0xFFFFFF00  # PALL = 0x00: enabled (nRF52840 PS v1.7 4.5)
#: The pyOCD built-in target type of a part found (``pyocd list --targets``).
_BUILTIN = {0x52832: "nrf52832", 0x52833: "nrf52833", 0x52840: "nrf52840"}


class Nrf52Family(ReadOutProtectedFamily):
    """The nRF52 family (see the module docstring)."""

    name = "nrf52"
    title = "nRF52"
    #: nrf52 and the series' parts (Nordic's nRF52 Series: nRF52805, 52810, 52811, 52820, 52832,
    #: 52833, 52840), alone or with a pack's suffix (nrf52840_xxaa).
    names = names_pattern(r"nrf52(805|810|811|820|832|833|840)?(_\w+)?")
    identify_rank = 0  # by its CTRL-AP, before the core's CPUID is read
    uid_location = TargetUidLocation(0x10000060, 8, "nRF52840 PS v1.7 s4.4.1.2 FICR.DEVICEID")
    erase_sector_timeout = 1.0
    erase_chip_timeout = 10 * 0.169  # t_ERASEALL, PS v1.7 section 4.3.9
    #: No fixed sleep after a reset: AIRCR.SYSRESETREQ is "a large system reset of all major
    #: components except for debug" (ARMv7-M ARM B3.2.6), and the nRF52840 PS v1.7's reset
    #: behaviour table (POWER chapter) has a soft reset leave the debug logic alone; pyOCD's
    #: polls of CTRL/STAT and DHCSR.S_RESET_ST wait for the core (Family.reset_post_delay).
    reset_post_delay = 0.0
    uid_hidden_when_locked = True
    hidden_part_hint = (
        "use the nRF52 type printed on the chip (--target nrf52840, nrf52833 or nrf52832; a "
        "locked nRF52 hides its part number)"
    )
    uicr_customer = UICR_CUSTOMER
    #: BBC micro:bit v2 carries an nRF52833 (the board's own pages).
    boards: ClassVar[Dict[str, str]] = {"micro:bit": "nrf52833", "microbit": "nrf52833"}
    uf2_ids: ClassVar[Dict[str, Tuple[int, ...]]] = {
        "nrf52840": (0xADA52840, 0x1B57745F),
        "nrf52833": (0x621E937A, 0x1B57745F),
        "nrf52832": (0x72721D4E, 0x6F752678, 0x1B57745F),
        "nrf52820": (0x820D9A5F, 0x1B57745F),
        "nrf52": (0x1B57745F,),
    }

    def expected_parts(self, target: str) -> Optional[FrozenSet[int]]:
        """FICR INFO.PART from the name (pyOCD's ``nrf52`` is the nRF52832)."""
        m = re.match(r"nrf52(\d{3})?", target.lower())
        return frozenset({int("52" + (m.group(1) or "832"), 16)}) if m else None

    def identify(self, evidence: IdEvidence) -> Optional[ChipIdentity]:
        """The CTRL-AP at AP1, then FICR INFO.PART unless the chip is locked."""
        ap1 = evidence.ap1_idr
        if ap1 is None or ap1 & ~_CTRL_IDR_VERSION_MASK != _CTRL_AP_IDR:
            return None
        port = evidence.port
        evidence.note_ap1("nRF52 CTRL-AP")
        status = evidence.read(lambda: port.read_ap(CTRL_AP, _CTRL_APPROTECTSTATUS))
        part = None if not status or not status & 1 else evidence.read(lambda: port.read32(_FICR_INFO_PART))
        if part is None:
            why = "locked: FICR INFO.PART hidden" if status is not None and not status & 1 else "FICR not readable"
            return ChipIdentity(self.name, "nRF52-series chip", None, None, evidence.evidence(why), self)
        evidence.facts.append(f"FICR INFO.PART {part:#x}")
        return ChipIdentity(self.name, f"nRF{part:X}", part, _BUILTIN.get(part), evidence.evidence(), self)

    def read_protection(self, port: Port, chip: Optional[str]) -> ProtectionStatus:
        """CTRL-AP APPROTECTSTATUS; UICR.APPROTECT when open."""
        value = port.read_ap(CTRL_AP, _CTRL_APPROTECTSTATUS)
        locked = (value & 1) == 0
        configured: Optional[bool] = None
        if not locked:
            configured = port.read32(_APPROTECT) & 0xFF != 0xFF
        return ProtectionStatus(
            self.name,
            locked,
            configured if not locked else True,
            f"CTRL-AP APPROTECTSTATUS = {value:#x} ({'enabled' if locked else 'disabled'})",
            chip,
        )

    def write_lock(self, port: Port, target: str, before: ProtectionStatus, timeout: float) -> None:
        """UICR.APPROTECT = PALL 0x00."""
        nvmc_write(port, _APPROTECT, _APPROTECT_ENABLE)

    def mass_erase(self, port: Port, timeout: float) -> None:
        """CTRL-AP ERASEALL until ERASEALLSTATUS reads 0."""
        port.write_ap(CTRL_AP, _CTRL_ERASEALL, 1)
        try:
            wait_until(
                lambda: port.read_ap(CTRL_AP, _CTRL_ERASEALLSTATUS) == 0,
                timeout,
                "the CTRL-AP ERASEALL did not finish",
                port,
            )
        finally:
            port.write_ap(CTRL_AP, _CTRL_ERASEALL, 0)

    def system_reset(self, port: Port) -> None:
        """A pulse of CTRL-AP RESET (it reaches a locked chip, whose AHB-AP is cut off)."""
        port.write_ap(CTRL_AP, _CTRL_RESET, 1)
        port.write_ap(CTRL_AP, _CTRL_RESET, 0)


FAMILY = Nrf52Family()
