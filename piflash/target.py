"""What piflash knows about target types: pyOCD's list, their flash regions, their unique IDs.

Nothing here opens a probe. pyOCD is imported inside the functions (its import
costs about 0.35 s on a PC, several times that on a Pi Zero 2W).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from piflash.errors import TargetRequiredError, UnknownTargetError  # noqa: F401  (raised here)


@dataclass(frozen=True)
class TargetUidLocation:
    """Where a target type keeps its factory-programmed unique ID.

    :ivar address: first byte of the ID in the target's address space.
    :ivar size: length of the ID in bytes.
    :ivar source: the datasheet section the address comes from.
    """

    address: int
    size: int
    source: str


#: Factory unique ID locations, by pyOCD target type prefix.
TARGET_UID_LOCATIONS: Dict[str, TargetUidLocation] = {
    # FICR DEVICEID[0..1]: nRF51 Series Reference Manual v3.0, section 7.1 (FICR), offset 0x060.
    "nrf51": TargetUidLocation(0x10000060, 8, "nRF51 RM v3.0 s7.1 FICR.DEVICEID"),
    # FICR DEVICEID[0..1]: nRF52840 Product Specification v1.7, section 4.4.1.2, offset 0x060.
    "nrf52": TargetUidLocation(0x10000060, 8, "nRF52840 PS v1.7 s4.4.1.2 FICR.DEVICEID"),
    # 96-bit unique device ID: STM32F10xxx RM0008 rev 21, section 30.2 (U_ID at 0x1FFFF7E8).
    "stm32f1": TargetUidLocation(0x1FFFF7E8, 12, "RM0008 rev 21 s30.2 U_ID"),
}


#: pyOCD's ``flash.timeout.erase_sector`` for target types whose page erase time piflash knows,
#: seconds: ten times the datasheet maximum or more, so that a controller that will never
#: finish (a protected or locked page) is reported in about a second instead of pyOCD's
#: default 10 s. Datasheet maxima: nRF51 Series RM v3.0 / nRF51822 PS v3.4 s8.22 t_ERASEPAGE
#: 22.3 ms; nRF52840 PS v1.7 s4.3.9 t_ERASEPAGE 85 ms; STM32F103xC/D/E datasheet DS5792 table
#: 31 t_ERASE (page) 40 ms.
ERASE_SECTOR_TIMEOUTS: Dict[str, float] = {"nrf51": 1.0, "nrf52": 1.0, "stm32f1": 1.0}


def erase_sector_timeout(target_type: Optional[str]) -> Optional[float]:
    """Seconds piflash allows one sector erase of ``target_type`` (see :data:`ERASE_SECTOR_TIMEOUTS`),
    or None to keep pyOCD's default."""
    for prefix, seconds in ERASE_SECTOR_TIMEOUTS.items():
        if (target_type or "").lower().startswith(prefix):
            return seconds
    return None


def uid_location(target_type: str) -> Optional[TargetUidLocation]:
    """The :class:`TargetUidLocation` for a pyOCD target type, or None if piflash does not know it."""
    for prefix, loc in TARGET_UID_LOCATIONS.items():
        if target_type.lower().startswith(prefix):
            return loc
    return None


def known_targets() -> Dict[str, type]:
    """pyOCD's builtin target types: a dict of name (str) -> target class."""
    from pyocd.target import TARGET

    return dict(TARGET)


def check_target(name: str) -> str:
    """Return the normalised (lower-case) target type, or raise if pyOCD does not know it.

    Only builtin targets are checked; a name that is not builtin is accepted when
    pyOCD's pack support has it installed (checked later, at connect).

    :raises UnknownTargetError: with close matches as the hint.
    """
    norm = name.lower().replace("-", "_")
    targets = known_targets()
    if norm in targets:
        return norm
    close = difflib.get_close_matches(norm, targets, n=4, cutoff=0.6)
    hint = ("did you mean " + ", ".join(close) + "?") if close else "'piflash targets' lists the known target types"
    raise UnknownTargetError(f"unknown target type '{name}'", hint=hint)


def flash_regions(memory_map) -> List[Tuple[int, int, str]]:
    """Flash regions of a pyOCD ``MemoryMap`` as (start, end_exclusive, name) triples, bytes."""
    return [(r.start, r.end + 1, r.name or "flash") for r in memory_map.regions if r.is_flash]


def builtin_flash_regions(target_type: str) -> Optional[List[Tuple[int, int, str]]]:
    """Flash regions of a builtin target type, read from its class's MEMORY_MAP without connecting.

    :returns: None when the target has no static memory map (pack targets).
    """
    cls = known_targets().get(target_type)
    memory_map = getattr(cls, "MEMORY_MAP", None)
    return flash_regions(memory_map) if memory_map is not None else None
