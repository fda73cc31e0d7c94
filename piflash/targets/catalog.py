"""What piflash knows about target types: pyOCD's list, their flash regions, their unique IDs
(these from the target's family, :mod:`piflash.targets.families`).

A target type is either builtin (a class in pyOCD's ``BUILTIN_TARGETS`` table) or a part
described by a CMSIS pack: one the user names with pyOCD's ``pack`` session option
(``-O pack=FILE.pack``, or a profile's ``pack``), or one installed with ``pyocd pack install``.
As in pyOCD (``pyocd/board/board.py``), a builtin type wins over a pack part of the same name.

Nothing here opens a probe. pyOCD is imported inside the functions (its import
costs about 0.35 s on a PC, several times that on a Pi Zero 2W).
"""

from __future__ import annotations

import difflib
import functools
import gc
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Tuple, Union

from piflash.errors import PackError, TargetRequiredError, UnknownTargetError  # noqa: F401  (raised here)

if TYPE_CHECKING:  # the families are imported when first asked: not at ``piflash --help``
    from pyocd.core.memory_map import MemoryMap, MemoryRegion
    from pyocd.target.pack.cmsis_pack import CmsisPack, CmsisPackDevice

    from piflash.targets.families.base import TargetUidLocation


def erase_sector_timeout(target_type: Optional[str]) -> Optional[float]:
    """Seconds piflash allows one sector erase of ``target_type``, or None to keep pyOCD's default:
    its family's :attr:`~piflash.targets.families.base.Family.erase_sector_timeout` (ten times the
    datasheet maximum or more, so that a controller that will never finish, a protected or locked
    page, is reported in about a second instead of pyOCD's default 10 s)."""
    from piflash.targets.families import family_for

    return family_for(target_type).erase_sector_timeout


def erase_chip_timeout(target_type: Optional[str]) -> Optional[float]:
    """Seconds piflash allows a chip (mass) erase of ``target_type``, or None to keep pyOCD's
    default (240 s): its family's :attr:`~piflash.targets.families.base.Family.erase_chip_timeout`,
    ten times the datasheet's maximum mass-erase time."""
    from piflash.targets.families import family_for

    return family_for(target_type).erase_chip_timeout


def uid_location(target_type: str) -> Optional[TargetUidLocation]:
    """The :class:`TargetUidLocation` for a pyOCD target type (its family's
    :attr:`~piflash.targets.families.base.Family.uid_location`), or None if piflash does not know it."""
    from piflash.targets.families import family_for

    return family_for(target_type).uid_location


def known_targets() -> Dict[str, type]:
    """pyOCD's builtin target types: a dict of name (str) -> target class.

    Read from ``BUILTIN_TARGETS``, not from ``TARGET``: a session opened with a pack adds the
    pack's parts to ``TARGET`` for the rest of the process (``pyocd/board/board.py``), and a
    long-running caller (the station) must not take them for builtin types afterwards.
    """
    from pyocd.target.builtin import BUILTIN_TARGETS

    return dict(BUILTIN_TARGETS)


#: What pyOCD's ``pack`` option takes: one path (str or path-like) or a list of them, or None.
Packs = Union[None, str, "os.PathLike[str]", Sequence[Union[str, "os.PathLike[str]"]]]

#: Pack part names listed in a hint at most.
_HINT_PARTS = 8


@dataclass(frozen=True)
class TargetType:
    """A target type piflash has checked, with its flash layout when known before connecting.

    :ivar name: the normalised pyOCD target type name (str), what ``target_override`` gets.
    :ivar pack: path of the CMSIS pack that describes it (str), or None for a builtin type.
    :ivar part_number: the part number as the pack writes it (str), or None for a builtin type.
    :ivar flash_regions: flash regions as (start, end_exclusive, name) triples in bytes, from the
        builtin class's ``MEMORY_MAP`` or the pack's memory map; None when the builtin class has
        no static memory map.
    :ivar vendor: the pack's vendor name for the part (str), or None for a builtin type.
    """

    name: str
    pack: Optional[str] = None
    part_number: Optional[str] = None
    flash_regions: Optional[List[Tuple[int, int, str]]] = None
    vendor: Optional[str] = None


def normalise_target_name(name: str) -> str:
    """A target type name as pyOCD normalises it: lower case, each run of characters other than
    ASCII letters and digits one underscore (``PIFLASH-NRF52840-PACK`` -> ``piflash_nrf52840_pack``;
    ``normalise_target_type_name`` in pyocd/target/__init__.py)."""
    from pyocd.target import normalise_target_type_name

    return normalise_target_type_name(name.strip())


def pack_paths(packs: Packs) -> List[str]:
    """The value of pyOCD's ``pack`` option as a list of path strings (empty for None)."""
    if packs is None:
        return []
    if isinstance(packs, (str, os.PathLike)):
        packs = [packs]
    return [os.fspath(p) for p in packs]


def _pack_key(packs: Packs) -> Tuple[Tuple[str, int, int], ...]:
    """(absolute path, size, mtime in ns) of each pack: cheap, and changes when a pack does.

    :raises PackError: a pack path does not exist.
    """
    key = []
    for path in pack_paths(packs):
        full = os.path.abspath(os.path.expanduser(path))
        try:
            st = os.stat(full)
        except OSError as exc:
            raise PackError(
                f"cannot read CMSIS pack '{path}': {exc.strerror or exc}",
                hint="give the path of a .pack file (or of an unpacked pack directory) "
                "with -O pack=FILE, or in the profile's 'pack'",
            ) from None
        key.append((full, st.st_size, st.st_mtime_ns))
    return tuple(key)


def _open_pack(path: str) -> CmsisPack:
    """pyOCD's ``CmsisPack`` for one pack (zip or directory), its devices parsed.

    :raises PackError: not a zip or pack directory, no .pdsc, or a .pdsc pyOCD cannot parse.
    """
    import zipfile
    from xml.etree.ElementTree import ParseError

    from pyocd.target.pack.cmsis_pack import CmsisPack, MalformedCmsisPackError

    reason = None
    try:
        if os.path.isdir(path):
            if not any(name.endswith(".pdsc") for name in os.listdir(path)):
                reason = "the directory holds no .pdsc file"
        elif not zipfile.is_zipfile(path):
            reason = "it is neither a zip file (.pack) nor an unpacked pack directory"
        else:
            with zipfile.ZipFile(path) as z:
                if not any(name.endswith(".pdsc") for name in z.namelist()):
                    reason = "the zip holds no .pdsc file"
        if reason is None:
            return CmsisPack(path)
    except MalformedCmsisPackError as exc:
        reason = str(exc)
    except ParseError as exc:
        reason = f"its .pdsc is not well-formed XML ({exc})"
    except KeyError as exc:  # pyOCD indexes required attributes, e.g. <family Dvendor=...>
        reason = f"its .pdsc lacks the required attribute {exc} on a <family> or <subFamily>"
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
    raise PackError(
        f"cannot read CMSIS pack '{path}': {reason}",
        hint="a pack is a zip (.pack) or a directory holding one .pdsc file (Open-CMSIS-Pack format)",
    )


def _device_target(norm: str, dev: CmsisPackDevice, pack: str) -> TargetType:
    """The :class:`TargetType` of pyOCD's ``CmsisPackDevice`` ``dev`` from ``pack`` (a path).

    :raises PackError: the pack lacks the part's flash algorithm, or it cannot be read.
    """
    from pyocd.core.exceptions import Error as PyocdError

    try:
        regions = flash_regions(dev.memory_map)  # reads the part's FLM files
    except KeyError as exc:  # zipfile: "There is no item named ... in the archive"
        raise PackError(
            f"CMSIS pack '{pack}' lacks a file that part {dev.part_number} needs: {exc.args[0] if exc.args else exc}",
            hint="the pack is incomplete: download it again",
        ) from None
    except (OSError, PyocdError) as exc:  # e.g. FlashAlgoException: a broken FLM
        raise PackError(
            f"CMSIS pack '{pack}': cannot read the flash algorithm of part {dev.part_number}: {exc}",
            hint="the pack is broken or incomplete: download it again",
        ) from None
    return TargetType(norm, pack, dev.part_number, regions, dev.vendor)


@functools.lru_cache(maxsize=8)
def _resolve(norm: str, key: Tuple[Tuple[str, int, int], ...]) -> Union[TargetType, Tuple[str, ...]]:
    """The :class:`TargetType` for ``norm`` from the packs in ``key``, or, when no pack
    describes it, the sorted pack part names (for the hint). Cached: a profile load, the
    flasher and the info command each ask, and a vendor pack's .pdsc can be megabytes."""
    names = set()
    for path, _, _ in key:
        for dev in _open_pack(path).devices:
            part = normalise_target_name(dev.part_number)
            if part == norm:
                return _device_target(norm, dev, path)
            names.add(part)
    return tuple(sorted(names))


def pack_parts(packs: Packs) -> List[TargetType]:
    """Every part of ``packs`` as a :class:`TargetType`, in pack and .pdsc order (each part's
    flash algorithms are read for its flash regions).

    :raises PackError: a pack is missing, cannot be parsed or lacks a part's flash algorithm.
    """
    parts = [
        _device_target(normalise_target_name(dev.part_number), dev, path)
        for path, _, _ in _pack_key(packs)
        for dev in _open_pack(path).devices
    ]
    gc.collect()  # see resolve_target
    return parts


def _managed_target(norm: str) -> Optional[TargetType]:
    """``norm`` from the packs installed with ``pyocd pack install`` (cmsis-pack-manager, the
    ``full`` install profile), which pyOCD also looks in when a name is neither builtin nor in
    the given packs (``ManagedPacks.populate_target``, pyocd/target/pack/pack_target.py).
    Without cmsis-pack-manager pyOCD's stub lists no packs and this returns None.

    :raises PackError: an installed pack lacks the part's flash algorithm.
    """
    from pyocd.target.pack.pack_target import ManagedPacks

    try:
        devices = ManagedPacks.get_installed_targets()
    except Exception:  # an unreadable pack cache: pyOCD meets (and reports) the same at connect
        return None
    for dev in devices:
        if normalise_target_name(dev.part_number) == norm:
            return _device_target(norm, dev, dev.pack_path)
    return None


def resolve_target(name: str, packs: Packs = None) -> TargetType:
    """Check a target type name against pyOCD's builtin types, then the parts of ``packs``,
    then the packs installed with ``pyocd pack install`` (in pyOCD's order, pyocd/board/board.py).

    A builtin name wins; the packs must exist even then, but are not parsed. For a pack part
    the pack's memory map gives the flash regions (its flash algorithms are read, as pyOCD
    reads them, but nothing runs).

    :param name: target type as typed (``nrf52840``, ``PIFLASH-NRF52840-PACK``...).
    :param packs: pyOCD's ``pack`` option value: a path or a list of paths, or None.
    :returns: the :class:`TargetType`.
    :raises UnknownTargetError: not found anywhere; the hint lists close matches (builtin and
        pack names), else the packs' parts, else how to name a pack.
    :raises PackError: a pack is missing or cannot be parsed.
    """
    norm = normalise_target_name(name)
    targets = known_targets()
    key = _pack_key(packs)
    if norm in targets:
        return TargetType(norm, flash_regions=builtin_flash_regions(norm))
    found: Union[None, TargetType, Tuple[str, ...]] = ()
    if key:
        parsed = _resolve.cache_info().misses
        found = _resolve(norm, key)
        if _resolve.cache_info().misses != parsed:
            # pyOCD's pack objects refer to each other (pack <-> devices), so the parsed .pdsc
            # lingers until the cycle collector runs: free it now, before the session parses the
            # pack again (measured: 9 MiB less peak RSS with a 2.3 MB .pdsc, docs/benchmarks.md).
            gc.collect()
    if isinstance(found, TargetType):
        return found
    managed = _managed_target(norm)
    if managed is not None:
        return managed
    close = difflib.get_close_matches(norm, list(targets) + list(found or ()), n=4, cutoff=0.6)
    if close:
        hint = "did you mean " + ", ".join(close) + "?"
    elif found:
        more = f" and {len(found) - _HINT_PARTS} more" if len(found) > _HINT_PARTS else ""
        hint = "the pack(s) given describe " + ", ".join(found[:_HINT_PARTS]) + more
    elif key:
        hint = "the pack(s) given describe no parts; 'piflash targets' lists the builtin target types"
    else:
        hint = (
            "'piflash targets' lists the builtin target types; a part described by a CMSIS "
            "pack needs the pack: -O pack=FILE.pack (or 'pack:' in a profile)"
        )
    raise UnknownTargetError(f"unknown target type '{name}'", hint=hint)


def check_target(name: str, packs: Packs = None) -> str:
    """Return the normalised target type, or raise if it is neither builtin nor in ``packs``.

    :param packs: pyOCD's ``pack`` option value (see :func:`resolve_target`).
    :raises UnknownTargetError: with close matches as the hint.
    :raises PackError: a pack is missing or cannot be parsed.
    """
    return resolve_target(name, packs).name


def flash_regions(memory_map: MemoryMap) -> List[Tuple[int, int, str]]:
    """Flash regions of a pyOCD ``MemoryMap`` as (start, end_exclusive, name) triples, bytes."""
    return [(r.start, r.end + 1, r.name or "flash") for r in memory_map.regions if r.is_flash]


def region_holding(memory_map: MemoryMap, address: int, size: int = 4, ram: bool = False) -> Optional[MemoryRegion]:
    """The region of a pyOCD ``MemoryMap`` that holds all of ``[address, address + size)``
    (``ram``: a RAM region only), or None: an address past a region's end, above 32 bits or in no
    region at all is one the probe would fault on (pyOCD's TransferFaultError)."""
    if address < 0 or address + size > 1 << 32:
        return None
    region = memory_map.get_region_for_address(address)
    if region is None or address + size - 1 > region.end or (ram and not region.is_ram):
        return None
    return region


def describe_regions(memory_map: MemoryMap, ram: bool = False) -> str:
    """The map's regions (``ram``: RAM only) as ``"name 0x20000000-0x2003ffff, ..."`` for messages."""
    return (
        ", ".join(
            f"{r.name or r.type.name.lower()} {r.start:#010x}-{r.end:#010x}"
            for r in memory_map.regions
            if r.is_ram or not ram
        )
        or "none"
    )


def builtin_flash_regions(target_type: str) -> Optional[List[Tuple[int, int, str]]]:
    """Flash regions of a builtin target type, read from its class's MEMORY_MAP without connecting.

    :returns: None when the name is not builtin or its class has no static memory map (a pack
        part's regions come from :func:`resolve_target`).
    """
    cls = known_targets().get(target_type)
    memory_map = getattr(cls, "MEMORY_MAP", None)
    return flash_regions(memory_map) if memory_map is not None else None
