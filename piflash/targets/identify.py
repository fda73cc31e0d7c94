"""Which chip is behind the debug port, from its ID registers: proved before any protection verdict.

A wrong ``--target`` must never be read as read-out protection (issue 19): the protection
registers of one family mean nothing on another (an nRF51 has no CTRL-AP, so its absent AP reads
0, which is "APPROTECT enabled" on an nRF52). So every verdict first calls :func:`confirm`, which
reads these registers (reads only; a read that faults means "not there") and raises
:class:`~piflash.errors.WrongTargetError` (exit 10) when the chip is not the family and part the
target type names:

- **AP1 IDR** (offset 0xFC of APSEL 1; ADIv5.2, the AP Identification Register: an AP that is
  not implemented reads 0).
  The nRF52's CTRL-AP reads 0x02880000, its version in bits [31:28] (nRF52840 Product
  Specification v1.7 section 4.6.1, "CTRL-AP registers", IDR; pyOCD
  ``pyocd/target/family/target_nRF52.py`` ``CTRL_IDR_EXPECTED`` and ``CTRL_IDR_VERSION_MASK``).
  No nRF51 or STM32F1 has an AP there.
- **nRF52 FICR INFO.PART** at 0x10000100 (nRF52840 PS v1.7 section 4.4, FICR register table;
  pyOCD ``target_nRF52.py`` ``check_part_info`` reads the same word), e.g. 0x52840. A locked nRF52
  cuts its AHB-AP off, so the part number is hidden then; the CTRL-AP IDR still proves the
  family, which is all the verdict (CTRL-AP APPROTECTSTATUS) and a recover (CTRL-AP ERASEALL)
  depend on.
- **CPUID** at 0xE000ED00 (ARMv7-M ARM B3.2.3, the same register in ARMv6-M): PARTNO [15:4] names the core,
  0xC20 Cortex-M0, 0xC23 Cortex-M3 (pyOCD ``pyocd/coresight/core_ids.py`` ``CORE_TYPE_NAME``).
- **STM32F1 DBGMCU_IDCODE** at 0xE0042000 (RM0008 rev 21 section 31.6.1, on a Cortex-M3): DEV_ID
  [11:0] 0x412 low-, 0x410 medium-, 0x414 high-, 0x430 XL-density, 0x418 connectivity line; the
  value line (RM0041, DBGMCU_IDCODE) 0x420 low/medium-, 0x428 high-density. The debugger reads it
  under RDP level 1 too (RDP closes main flash only, PM0075 section 2.4.1).
- **nRF51**: no CTRL-AP, a Cortex-M0, FICR CODEPAGESIZE (0x10000010) 1024 and CONFIGID.HWID
  (0x1000005C, bits [15:0]) programmed (nRF51 Series Reference Manual v3.0 section 7, FICR; the
  nRF52 pages are 4 KiB). Read-back protection (RBPCONF) leaves FICR and the core's registers
  readable (nRF51 RM v3.0 section 9.1).

DPIDR (ADIv5.2, the DP Identification Register) is quoted as evidence only: the same SW-DP sits in many chips.
No click, no rich; pyOCD is imported lazily.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, FrozenSet, Optional

from piflash.errors import WrongTargetError

__all__ = ["ChipIdentity", "family_of", "identify", "confirm", "expected_parts", "wrong_target_error"]

_AP_IDR = 0xFC
_CTRL_AP, _CTRL_AP_IDR, _CTRL_IDR_VERSION_MASK = 1, 0x02880000, 0xF0000000
_CTRL_APPROTECTSTATUS = 0x00C
_FICR_INFO_PART = 0x10000100
_FICR_CODEPAGESIZE, _FICR_CONFIGID = 0x10000010, 0x1000005C
_CPUID = 0xE000ED00
_DBGMCU_IDCODE = 0xE0042000
_CORTEX_M0, _CORTEX_M3 = 0xC20, 0xC23

#: STM32F1 DEV_ID -> line and density (RM0008 rev 21 section 31.6.1; RM0041 for 0x420/0x428).
STM32F1_DEV_IDS = {0x412: "low-density", 0x410: "medium-density", 0x414: "high-density",
                   0x430: "XL-density", 0x418: "connectivity line", 0x420: "value line low/medium-density",
                   0x428: "value line high-density"}
#: The pyOCD built-in target type for a part found (``pyocd list --targets``); parts without one
#: are named by their number and need a pack's type.
_BUILTIN = {("nrf52", 0x52832): "nrf52832", ("nrf52", 0x52833): "nrf52833",
            ("nrf52", 0x52840): "nrf52840", ("stm32f1", 0x414): "stm32f103rc"}
#: STM32F10x flash size code (the last letter-or-digit of the part number) in KiB, as the
#: STM32F103 datasheets' ordering information gives it.
_STM32_FLASH_KIB = {"4": 16, "6": 32, "8": 64, "b": 128, "c": 256, "d": 384, "e": 512, "f": 768, "g": 1024}


def family_of(target: Optional[str]) -> Optional[str]:
    """The protection family of a pyOCD target type: ``"nrf52"``, ``"nrf51"``, ``"stm32f1"``, or
    None when piflash cannot protect (or identify) that part. :mod:`piflash.production.protect` re-exports it."""
    name = (target or "").lower()
    for prefix in ("nrf52", "nrf51", "stm32f1"):
        if name.startswith(prefix):
            return prefix
    return None


@dataclass(frozen=True)
class ChipIdentity:
    """What a chip's ID registers say it is.

    :ivar family: ``"nrf52"``, ``"nrf51"``, ``"stm32f1"`` (as :func:`family_of`),
        or None for a chip piflash cannot identify.
    :ivar name: e.g. "nRF52840", "nRF52-series chip" (part number hidden while locked), "nRF51",
        "STM32F10x high-density part", or "Cortex-M4" for an unidentified chip.
    :ivar part: nRF52 FICR INFO.PART or STM32F1 DEV_ID (int), None when not read.
    :ivar target: the pyOCD target type to use for it (str), None when piflash cannot tell.
    :ivar evidence: the registers read and their values, for messages.
    """

    family: Optional[str]
    name: str
    part: Optional[int]
    target: Optional[str]
    evidence: str

    @property
    def described(self) -> str:
        """The chip in a sentence: "an nRF52840 (AP1 IDR ...)"."""
        what = f"an {self.name}" if self.family else f"a {self.name} chip that piflash does not identify"
        return f"{what} ({self.evidence})"

    def matches(self, target: str) -> bool:
        """Whether this chip is one ``target`` (a pyOCD target type) may name: the same family and,
        where both are known, the same part."""
        if self.family is None or family_of(target) != self.family:
            return False
        parts = expected_parts(target)
        return parts is None or self.part is None or self.part in parts


def expected_parts(target: str) -> Optional[FrozenSet[int]]:
    """The part numbers a target type allows: nRF52 FICR INFO.PART from the name (pyOCD's ``nrf52``
    is the nRF52832), STM32F10x DEV_IDs from line and flash size code (the Glossary of RM0008 rev 21
    defines the densities by flash size; RM0041 the value line's); None when the name does not fix one
    (nRF51: no part register to compare)."""
    name = target.lower()
    m = re.match(r"nrf52(\d{3})?", name)
    if m:
        return frozenset({int("52" + (m.group(1) or "832"), 16)})
    m = re.match(r"stm32f10([0-7])[a-z]([0-9a-z])", name)
    if not m or m.group(2) not in _STM32_FLASH_KIB:
        return None
    line, kib = m.group(1), _STM32_FLASH_KIB[m.group(2)]
    if line in "57":
        return frozenset({0x418})
    if line == "0":
        return frozenset({0x420 if kib <= 128 else 0x428})
    return frozenset({0x412 if kib <= 32 else 0x410 if kib <= 128 else 0x414 if kib <= 512 else 0x430})


def _try(read: Callable[[], int]) -> Optional[int]:
    """``read()``, or None when the access faults (the register is not there or not readable)."""
    from pyocd.core.exceptions import TransferFaultError

    try:
        return read()
    except TransferFaultError:
        return None


def identify(port) -> ChipIdentity:
    """Read the chip's ID registers (see the module docstring) and say what it is. Reads only.

    :param port: a :class:`piflash.production.protect.Port`.
    :raises pyocd.core.exceptions.TransferError: the debug port itself stops answering (a
        single register that faults is taken as "not there").
    """
    facts = []
    dpidr = getattr(getattr(port.dp, "dpidr", None), "idr", None)
    if dpidr:
        facts.append(f"DPIDR {dpidr:#010x}")
    ap1 = _try(lambda: port.read_ap(_CTRL_AP, _AP_IDR))
    if ap1 is not None and ap1 & ~_CTRL_IDR_VERSION_MASK == _CTRL_AP_IDR:
        facts.append(f"AP1 IDR {ap1:#010x}: nRF52 CTRL-AP")
        status = _try(lambda: port.read_ap(_CTRL_AP, _CTRL_APPROTECTSTATUS))
        part = None if not status or not status & 1 else _try(lambda: port.read32(_FICR_INFO_PART))
        if part is None:
            why = "locked: FICR INFO.PART hidden" if status is not None and not status & 1 else "FICR not readable"
            return ChipIdentity("nrf52", "nRF52-series chip", None, None, ", ".join(facts + [why]))
        facts.append(f"FICR INFO.PART {part:#x}")
        return ChipIdentity("nrf52", f"nRF{part:X}", part, _BUILTIN.get(("nrf52", part)), ", ".join(facts))
    facts.append(f"AP1 IDR {ap1:#010x}" if ap1 is not None else "no AP1")
    cpuid = _try(lambda: port.read32(_CPUID))
    if cpuid is None:
        return ChipIdentity(None, "Cortex-M", None, None, ", ".join(facts + ["CPUID not readable"]))
    partno = (cpuid >> 4) & 0xFFF
    facts.append(f"CPUID {cpuid:#010x}")
    if partno == _CORTEX_M3:
        idcode = _try(lambda: port.read32(_DBGMCU_IDCODE))
        dev_id = idcode & 0xFFF if idcode is not None else None
        if dev_id in STM32F1_DEV_IDS:
            facts.append(f"DBGMCU_IDCODE {idcode:#010x}")
            return ChipIdentity("stm32f1", f"STM32F10x {STM32F1_DEV_IDS[dev_id]} part",
                                dev_id, _BUILTIN.get(("stm32f1", dev_id)), ", ".join(facts))
        facts.append("DBGMCU_IDCODE " + (f"{idcode:#010x}" if idcode is not None else "not readable"))
    if partno == _CORTEX_M0:
        pagesize = _try(lambda: port.read32(_FICR_CODEPAGESIZE))
        configid = _try(lambda: port.read32(_FICR_CONFIGID))
        hwid = configid & 0xFFFF if configid is not None else None
        if pagesize == 1024 and hwid not in (None, 0, 0xFFFF):
            facts.append(f"FICR CODEPAGESIZE {pagesize}, CONFIGID.HWID {hwid:#06x}")
            return ChipIdentity("nrf51", "nRF51", None, "nrf51", ", ".join(facts))
        facts.append("no nRF51 FICR")
    return ChipIdentity(None, _core_name(cpuid), None, None, ", ".join(facts))


def _core_name(cpuid: int) -> str:
    from pyocd.coresight.core_ids import CORE_TYPE_NAME

    return CORE_TYPE_NAME.get(((cpuid >> 24) & 0xFF, (cpuid >> 4) & 0xFFF), "Cortex-M")


def wrong_target_error(chip: ChipIdentity, target: str, named_by: Optional[str] = None) -> WrongTargetError:
    """The error for ``chip`` found where ``target`` was named.

    :param named_by: who named the target, e.g. "the probe's board type" (default: ``--target``).
    """
    named_by = named_by or "--target"
    untouched = "nothing was read as protection, erased or programmed"
    if chip.target:
        hint = f"use --target {chip.target} (or 'target:' in the profile); {untouched}"
    elif chip.family == "nrf52":
        hint = (f"use the nRF52 type printed on the chip (--target nrf52840, nrf52833 or nrf52832; a "
                f"locked nRF52 hides its part number); {untouched}")
    elif chip.family:
        hint = (f"give the target type printed on the chip ('piflash targets PATTERN' lists them, a "
                f"CMSIS pack adds more); {untouched}")
    else:
        hint = (f"check the chip's marking and give its target type ('piflash targets PATTERN' lists "
                f"them); {untouched}")
    return WrongTargetError(f"the chip is not what {named_by} {target} names: it is {chip.described}",
                            found=chip.name, suggested=chip.target, hint=hint)


def confirm(port, target: str, named_by: Optional[str] = None) -> ChipIdentity:
    """Prove that the chip on ``port`` is the one ``target`` names.

    :returns: the :class:`ChipIdentity` read.
    :raises WrongTargetError: it is another chip (exit 10, naming the chip and the type to use).
    :raises pyocd.core.exceptions.TransferError: the debug port stops answering.
    """
    chip = identify(port)
    if not chip.matches(target):
        raise wrong_target_error(chip, target, named_by)
    return chip
