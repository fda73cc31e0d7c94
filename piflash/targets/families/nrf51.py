"""The nRF51 family (nRF51822 and siblings; pyOCD target types ``nrf51``, ``nrf51822``).

- **Identity**: no CTRL-AP, a Cortex-M0 (CPUID PARTNO 0xC20), FICR CODEPAGESIZE (0x10000010) 1024
  and CONFIGID.HWID (0x1000005C, bits [15:0]) programmed (nRF51 Series Reference Manual v3.0
  section 7, FICR; the nRF52 pages are 4 KiB). Read-back protection (RBPCONF) leaves FICR and the
  core's registers readable (nRF51 RM v3.0 section 9.1).
- **Unique ID**: FICR DEVICEID[0..1] at 0x10000060 (nRF51 RM v3.0 section 7.1).
- **Sector erase**: t_ERASEPAGE 22.3 ms at most (nRF51822 PS v3.4 section 8.22): 1 s allowed.
- **Chip erase**: 0.223 s allowed, ten times 22.3 ms, taken as t_ERASEALL (nRF51822 PS v3.4
  section 8.22). Not confirmed: 22.3 ms is what Zephyr gives as the nRF51's *page* erase maximum
  (``FLASH_PAGE_ERASE_MAX_TIME_US 22300UL``, soc/nordic/nrf51/soc.h), and no public source found
  (nrfx, Zephyr, pyOCD's target_nRF51822_xxAA.py, OpenOCD's nrf5.c, Nordic's pages) states the
  nRF51's ERASEALL maximum; pyOCD and OpenOCD wait on NVMC READY with no datasheet figure. A real
  part whose ERASEALL takes longer fails here with exit 11 naming 0.223 s (docs/exit-codes.md).
- **Read-out protection**: the setting is UICR.RBPCONF at 0x10001004 (section 8.1; PALL [15:8]
  0x00 = protect all). There is no CTRL-AP: the state is read as RBPCONF plus a debugger read of
  flash address 0, which faults while protection is in effect. Recover is NVMC ERASEALL
  (section 6.1), which the debugger may still reach on a protected part, then a system reset.
- **UF2**: no UF2 family is registered for the nRF51 (Microsoft's ``utils/uf2families.json``).
"""

from __future__ import annotations

from typing import ClassVar, Dict, Optional

from piflash.targets.families.base import (
    ChipIdentity,
    IdEvidence,
    Port,
    ProtectionStatus,
    ReadOutProtectedFamily,
    TargetUidLocation,
    faults,
    names_pattern,
)
from piflash.targets.families.nrf import UICR_CUSTOMER, nvmc_erase_all, nvmc_write

__all__ = ["Nrf51Family", "FAMILY"]

_FICR_CODEPAGESIZE, _FICR_CONFIGID = 0x10000010, 0x1000005C
_CORTEX_M0 = 0xC20
_RBPCONF = 0x10001004


class Nrf51Family(ReadOutProtectedFamily):
    """The nRF51 family (see the module docstring)."""

    name = "nrf51"
    title = "nRF51"
    #: nrf51 and the series' parts (Nordic's nRF51 Series: nRF51422, 51801, 51802, 51822, 51824),
    #: alone or with a pack's suffix (nrf51822_xxaa).
    names = names_pattern(r"nrf51(422|801|802|822|824)?(_\w+)?")
    identify_rank = 2
    uid_location = TargetUidLocation(0x10000060, 8, "nRF51 RM v3.0 s7.1 FICR.DEVICEID")
    erase_sector_timeout = 1.0
    #: 10 x 22.3 ms: t_ERASEALL as PS v3.4 section 8.22 is cited for it, the same figure as the
    #: page erase maximum; unconfirmed (see the module docstring).
    erase_chip_timeout = 10 * 0.0223
    #: No fixed sleep after a reset: AIRCR.SYSRESETREQ keeps the debug logic (ARMv6-M ARM
    #: B3.2.6: "a large system reset of all major components except for debug"; the nRF51 RM
    #: v3.0's reset behaviour table, POWER chapter: a soft reset does not reset debug); pyOCD's
    #: polls of CTRL/STAT and DHCSR.S_RESET_ST wait for the core (Family.reset_post_delay).
    reset_post_delay = 0.0
    uicr_customer = UICR_CUSTOMER
    #: BBC micro:bit v1 carries an nRF51822 (the board's own pages).
    boards: ClassVar[Dict[str, str]] = {"micro:bit": "nrf51", "microbit": "nrf51"}

    def identify(self, evidence: IdEvidence) -> Optional[ChipIdentity]:
        """A Cortex-M0 with the nRF51's FICR (see the module docstring)."""
        if evidence.partno != _CORTEX_M0:
            return None
        port = evidence.port
        pagesize = evidence.read(lambda: port.read32(_FICR_CODEPAGESIZE))
        configid = evidence.read(lambda: port.read32(_FICR_CONFIGID))
        hwid = configid & 0xFFFF if configid is not None else None
        if pagesize == 1024 and hwid not in (None, 0, 0xFFFF):
            evidence.facts.append(f"FICR CODEPAGESIZE {pagesize}, CONFIGID.HWID {hwid:#06x}")
            return ChipIdentity(self.name, "nRF51", None, "nrf51", evidence.evidence(), self)
        evidence.facts.append("no nRF51 FICR")
        return None

    def read_protection(self, port: Port, chip: Optional[str]) -> ProtectionStatus:
        """UICR.RBPCONF and whether a flash read at 0 faults."""
        rbp = port.read32(_RBPCONF)
        locked = faults(lambda: port.read32(0x00000000))
        return ProtectionStatus(
            self.name,
            locked,
            (rbp >> 8) & 0xFF != 0xFF,
            f"UICR.RBPCONF = {rbp:#010x}; flash read at 0x00000000 " + ("faulted" if locked else "answered"),
            chip,
        )

    def write_lock(self, port: Port, target: str, before: ProtectionStatus, timeout: float) -> None:
        """RBPCONF.PALL = 0x00 (the other bits kept)."""
        nvmc_write(port, _RBPCONF, port.read32(_RBPCONF) & 0xFFFF00FF)

    def mass_erase(self, port: Port, timeout: float) -> None:
        """NVMC ERASEALL."""
        nvmc_erase_all(port, timeout)


FAMILY = Nrf51Family()
