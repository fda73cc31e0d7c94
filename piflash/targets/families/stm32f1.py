"""The STM32F1 family (STM32F100-F107; pyOCD's built-in ``stm32f103rc``, more from ST's packs).

- **Identity**: a Cortex-M3 (CPUID PARTNO 0xC23) whose DBGMCU_IDCODE at 0xE0042000 (RM0008 rev 21
  section 31.6.1) has DEV_ID [11:0] 0x412 low-, 0x410 medium-, 0x414 high-, 0x430 XL-density,
  0x418 connectivity line; the value line (RM0041, DBGMCU_IDCODE) 0x420 low/medium-, 0x428
  high-density. The debugger reads it under RDP level 1 too (RDP closes main flash only, PM0075
  section 2.4.1). A target type names its DEV_IDs by line and flash size code (the Glossary of
  RM0008 rev 21 defines the densities by flash size; RM0041 the value line's).
- **Unique ID**: the 96-bit U_ID at 0x1FFFF7E8 (RM0008 rev 21 section 30.2).
- **Sector erase**: t_ERASE (page) 40 ms at most (STM32F103xC/D/E datasheet DS5792 table 31): 1 s.
- **Chip erase**: t_ME (mass erase) 40 ms at most (DS5792 table 31): 0.4 s allowed.
- **Read-out protection** (RM0008 rev 21 section 3.3.3 and PM0075 sections 2.4.1, 2.5, 3.4): RDP
  level 1 is any option byte RDP (0x1FFFF800) other than 0xA5. Lock unlocks FLASH_KEYR and
  FLASH_OPTKEYR (keys 0x45670123, 0xCDEF89AB), erases the option bytes (CR.OPTER), programs them
  back as they were except RDP = 0x00 (CR.OPTPG), and resets so they load. The state is FLASH_OBR
  (0x4002201C) bit 1 RDPRT: the level in effect, and the only register the verdict comes from;
  the RDP byte itself is read as information only (a part, or a simulator, whose
  option-byte block faults still flashes). Recover reads the option bytes in effect (FLASH_OBR
  USER [9:2], Data0 [17:10], Data1 [25:18], RM0008 rev 21 section 3.4.6: registers, readable
  under RDP level 1 and when the option-byte block faults), erases the option bytes (the hardware
  then mass-erases main flash, PM0075 2.4.1), programs RDP = 0xA5 and USER, Data0 and Data1 back
  as they were: a recover keeps what a lock kept. The write protection (WRP0-3) it leaves erased,
  i.e. cleared: the pages it guarded were just mass-erased, a recovered chip is one the next
  flash must be able to write, and this option erase is the only one piflash makes (PM0075
  2.4.2, "Unprotection", case 1, is this same sequence for clearing WRP).
- **UF2**: ``STM32F1`` (0x5EE21072, "ST STM32F103") in Microsoft's ``utils/uf2families.json``.
"""

from __future__ import annotations

import re
from typing import ClassVar, Dict, FrozenSet, List, Optional, Tuple

from piflash.errors import ProtectError
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

__all__ = ["Stm32f1Family", "FAMILY", "DEV_IDS", "user_option_bytes"]

_CORTEX_M3 = 0xC23
_DBGMCU_IDCODE = 0xE0042000
#: STM32F1 DEV_ID -> line and density (RM0008 rev 21 section 31.6.1; RM0041 for 0x420/0x428).
DEV_IDS = {
    0x412: "low-density",
    0x410: "medium-density",
    0x414: "high-density",
    0x430: "XL-density",
    0x418: "connectivity line",
    0x420: "value line low/medium-density",
    0x428: "value line high-density",
}
#: The pyOCD built-in target type for a DEV_ID (``pyocd list --targets``).
_BUILTIN = {0x414: "stm32f103rc"}
#: STM32F10x flash size code (the last letter-or-digit of the part number) in KiB, as the
#: STM32F103 datasheets' ordering information gives it.
_FLASH_KIB = {"4": 16, "6": 32, "8": 64, "b": 128, "c": 256, "d": 384, "e": 512, "f": 768, "g": 1024}

# FLASH interface (RM0008 3.4) and option bytes (PM0075 2.5).
_FLASH = 0x40022000
_KEYR, _OPTKEYR, _SR, _CR, _OBR = _FLASH + 0x04, _FLASH + 0x08, _FLASH + 0x0C, _FLASH + 0x10, _FLASH + 0x1C
_KEY1, _KEY2 = 0x45670123, 0xCDEF89AB
_SR_BSY = 1 << 0
_WRPR = _FLASH + 0x20
_CR_OPTPG, _CR_OPTER, _CR_STRT, _CR_LOCK = 1 << 4, 1 << 5, 1 << 6, 1 << 7
_OBR_RDPRT = 1 << 1
#: FLASH_OBR fields (RM0008 rev 21 section 3.4.6): the option bytes loaded at reset.
_OBR_USER, _OBR_DATA0, _OBR_DATA1 = 2, 10, 18
_OPTION_BYTES, _RDP_OPEN = 0x1FFFF800, 0xA5


class Stm32f1Family(ReadOutProtectedFamily):
    """The STM32F1 family (see the module docstring)."""

    name = "stm32f1"
    title = "STM32F1"
    names = names_pattern(r"stm32f10[0-7]\w*")  # stm32f103rc, pack parts stm32f103c8...
    identify_rank = 1
    uid_location = TargetUidLocation(0x1FFFF7E8, 12, "RM0008 rev 21 s30.2 U_ID")
    erase_sector_timeout = 1.0
    erase_chip_timeout = 10 * 0.040  # t_ME, DS5792 table 31
    #: No fixed sleep after a reset: a software reset (SYSRESETREQ) drives the internal reset
    #: for the pulse generator's minimum 20 us (RM0008 section 7.1.2, figure 'Reset circuit'),
    #: less than the USB round trip before the next SWD transfer; it keeps the debug connection
    #: (ARMv7-M ARM B3.2.6) and DBGMCU_CR, which only a power-on reset clears (RM0008 section
    #: 31.16.3); pyOCD's polls of CTRL/STAT and DHCSR.S_RESET_ST wait for the core
    #: (Family.reset_post_delay).
    reset_post_delay = 0.0
    no_otp_hint = " (the STM32F1 has none: use address: in flash)"
    uf2_ids: ClassVar[Dict[str, Tuple[int, ...]]] = {"stm32f103": (0x5EE21072,)}

    def expected_parts(self, target: str) -> Optional[FrozenSet[int]]:
        """The DEV_IDs of the line and density the name gives; None when it gives none."""
        m = re.match(r"stm32f10([0-7])[a-z]([0-9a-z])", target.lower())
        if not m or m.group(2) not in _FLASH_KIB:
            return None
        line, kib = m.group(1), _FLASH_KIB[m.group(2)]
        if line in "57":
            return frozenset({0x418})
        if line == "0":
            return frozenset({0x420 if kib <= 128 else 0x428})
        return frozenset({0x412 if kib <= 32 else 0x410 if kib <= 128 else 0x414 if kib <= 512 else 0x430})

    def identify(self, evidence: IdEvidence) -> Optional[ChipIdentity]:
        """A Cortex-M3 whose DBGMCU_IDCODE has an STM32F1 DEV_ID."""
        if evidence.partno != _CORTEX_M3:
            return None
        idcode = evidence.read(lambda: evidence.port.read32(_DBGMCU_IDCODE))
        dev_id = idcode & 0xFFF if idcode is not None else None
        if dev_id in DEV_IDS:
            evidence.facts.append(f"DBGMCU_IDCODE {idcode:#010x}")
            return ChipIdentity(
                self.name, f"STM32F10x {DEV_IDS[dev_id]} part", dev_id, _BUILTIN.get(dev_id), evidence.evidence(), self
            )
        evidence.facts.append("DBGMCU_IDCODE " + (f"{idcode:#010x}" if idcode is not None else "not readable"))
        return None

    def read_protection(self, port: Port, chip: Optional[str]) -> ProtectionStatus:
        """FLASH_OBR.RDPRT; the option byte RDP as information."""
        from pyocd.core.exceptions import TransferError

        obr = port.read32(_OBR)
        locked = bool(obr & _OBR_RDPRT)
        user, data0, data1 = user_option_bytes(obr)
        detail = (
            f"FLASH_OBR = {obr:#010x} (RDPRT={int(locked)}, USER={user:#04x}, Data0={data0:#04x}, "
            f"Data1={data1:#04x}), FLASH_WRPR = {port.read32(_WRPR):#010x}"
        )
        try:  # information only: the verdict is FLASH_OBR.RDPRT, the level in effect
            rdp: Optional[int] = port.read32(_OPTION_BYTES) & 0xFF
        except TransferError:  # a fault (a part or simulator without the block): no verdict from it
            rdp = None
        if rdp is None:
            return ProtectionStatus(
                self.name, locked, None, detail + f", option byte RDP unreadable ({_OPTION_BYTES:#x})", chip
            )
        return ProtectionStatus(self.name, locked, rdp != _RDP_OPEN, detail + f", option byte RDP = {rdp:#04x}", chip)

    def write_lock(self, port: Port, target: str, before: ProtectionStatus, timeout: float) -> None:
        """The option bytes programmed back as they were, with RDP = 0x00.

        :raises ProtectError: the option bytes cannot be read (nothing is written then).
        """
        from pyocd.core.exceptions import TransferError

        try:
            words = [port.read32(_OPTION_BYTES + 4 * i) for i in range(4)]
        except TransferError as exc:  # read first: nothing is written yet
            raise ProtectError(
                f"cannot lock {target}: the option-byte block at {_OPTION_BYTES:#x} cannot be "
                f"read ({exc}), and a lock programs it back with only RDP changed",
                hint=f"nothing was written: the chip stays open ({before.detail})",
            ) from exc
        halves = [(w >> s) & 0xFF for w in words for s in (0, 16)]
        halves[0] = 0x00  # RDP: anything but 0xA5 is level 1
        _unlock(port)
        _write_options(port, halves, timeout)

    def mass_erase(self, port: Port, timeout: float) -> None:
        """The option bytes erased (main flash with them), RDP = 0xA5 and the USER, Data0 and
        Data1 bytes in effect (FLASH_OBR, read first) programmed back; WRP0-3 stay erased, so no
        page is write-protected after the reset (see the module docstring for why).

        :raises ProtectError: an erase or write did not finish within ``timeout`` (1 s a write).
        :raises pyocd.core.exceptions.TransferError: FLASH_OBR cannot be read (nothing written).
        """
        user, data0, data1 = user_option_bytes(port.read32(_OBR))
        _unlock(port)
        _write_options(port, [_RDP_OPEN, user, data0, data1] + [0xFF] * 4, timeout)


def user_option_bytes(obr: int) -> Tuple[int, int, int]:
    """(USER, Data0, Data1), each 0-255, from a FLASH_OBR value (RM0008 rev 21 section 3.4.6)."""
    return (obr >> _OBR_USER) & 0xFF, (obr >> _OBR_DATA0) & 0xFF, (obr >> _OBR_DATA1) & 0xFF


def _unlock(port: Port) -> None:
    port.write32(_KEYR, _KEY1)
    port.write32(_KEYR, _KEY2)
    port.write32(_OPTKEYR, _KEY1)
    port.write32(_OPTKEYR, _KEY2)


def _busy_wait(port: Port, timeout: float, what: str) -> None:
    wait_until(lambda: not port.read32(_SR) & _SR_BSY, timeout, what, port)


def _cr(port: Port, set_bits: int = 0, clear_bits: int = 0) -> None:
    # Read-modify-write: writing CR.OPTWRE as 0 would drop the option-byte unlock (RM0008 3.4.4).
    port.write32(_CR, (port.read32(_CR) & ~clear_bits) | set_bits)


def _write_options(port: Port, halves: List[int], timeout: float) -> None:
    """Erase the option bytes and program ``halves`` (8 low bytes, RDP first) back."""
    _cr(port, _CR_OPTER)
    _cr(port, _CR_STRT)
    _busy_wait(port, timeout, "the option-byte erase did not finish")
    _cr(port, _CR_OPTPG, _CR_OPTER)
    for i, byte in enumerate(halves):
        if byte != 0xFF:  # 0xFF is what the erase left
            port.write16(_OPTION_BYTES + 2 * i, byte)
            _busy_wait(port, 1.0, "an option-byte write did not finish")
    _cr(port, _CR_LOCK, _CR_OPTPG)


FAMILY = Stm32f1Family()
