"""Targets piflash registers with pyOCD where pyOCD's builtin one is wrong.

pyOCD keeps its target types in ``pyocd.target.TARGET``, a table that "at runtime ... may be
extended with additional targets from CMSIS DFPs or other sources" (``pyocd/target/__init__.py``;
pyOCD's pack support adds to it the same way). piflash adds a corrected class under a name of
its own and opens sessions with it when the user names the builtin type
(:func:`pyocd_name`); results, history and messages keep the user's name (:func:`user_name`).
Nothing of pyOCD is changed: the builtin class stays as it is under its own name.

``rp2350``: pyOCD 0.46's ``RP2350`` inherits the RP2040's memory map (``target_rp2.py``
``RP2Base``): a 16 KiB ROM, 264 KiB of SRAM in two regions plus a 0x21000000 alias, XIP aliases
at 0x11-0x13000000 and USB RAM at 0x51000000, none of which is the RP2350's. The fix in pyOCD is
unmerged (pyOCD PR #1916). :class:`RP2350Datasheet` has the map of the RP2350 datasheet section
2.2: a 32 KiB boot ROM; XIP at 0x10000000 (chip select 0's 16 MiB window, pyOCD's RP2 algorithm
for it) with its no-cache (0x14000000) and no-translate (0x1C000000) aliases; SRAM0-7 (512 KiB,
striped) at 0x20000000 and SRAM8-9 (8 KiB) at 0x20080000. Everything else (the Secure state,
ACCESSCTRL, the algorithm) is pyOCD's ``RP2350``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict, Type

if TYPE_CHECKING:
    from pyocd.coresight.coresight_target import CoreSightTarget

__all__ = ["CORRECTED", "pyocd_name", "user_name", "register"]

#: The user's target type name -> the name piflash registers its corrected class under.
CORRECTED: Dict[str, str] = {"rp2350": "rp2350_datasheet"}
_BY_PYOCD_NAME = {v: k for k, v in CORRECTED.items()}


def _classes() -> Dict[str, Type[CoreSightTarget]]:
    from pyocd.core.memory_map import FlashRegion, MemoryMap, RamRegion, RomRegion
    from pyocd.target.family.target_rp2 import FLASH_ALGO, RP2350

    class RP2350Datasheet(RP2350):
        """pyOCD's ``RP2350`` with the RP2350 datasheet's memory map (section 2.2)."""

        PART_NUMBER = "RP2350"
        MEMORY_MAP = MemoryMap(
            RomRegion(start=0x00000000, length=0x8000, name="bootrom"),
            FlashRegion(
                start=0x10000000,
                length=0x1000000,
                name="xip",
                sector_size=4096,
                page_size=256,
                algo=FLASH_ALGO,
                is_boot_memory=True,
            ),
            RomRegion(start=0x14000000, length=0x1000000, name="xip_nocache_noalloc", alias="xip"),
            RomRegion(start=0x1C000000, length=0x1000000, name="xip_nocache_noalloc_notranslate", alias="xip"),
            RamRegion(start=0x20000000, length=0x80000, name="sram0_7"),
            RamRegion(start=0x20080000, length=0x2000, name="sram8_9"),
        )

    return {"rp2350_datasheet": RP2350Datasheet}


def register() -> None:
    """Add piflash's corrected classes to pyOCD's target table (once; existing names are kept)."""
    from pyocd.target import TARGET

    if all(name in TARGET for name in _BY_PYOCD_NAME):
        return
    for name, cls in _classes().items():
        TARGET.setdefault(name, cls)


def pyocd_name(target: str) -> str:
    """The pyOCD target type to open a session with for the user's ``target`` (registering
    piflash's class when it corrects that type)."""
    name = CORRECTED.get((target or "").lower())
    if name is None:
        return target
    register()
    return name


def user_name(pyocd_target: str) -> str:
    """The user's name for a pyOCD target type (the inverse of :func:`pyocd_name`)."""
    return _BY_PYOCD_NAME.get((pyocd_target or "").lower(), pyocd_target)
