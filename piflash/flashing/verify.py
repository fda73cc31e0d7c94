"""Read-back verify: prove that every programmed byte is in the target's flash.

pyOCD programs but never checks the result (``flash/loader.py``: ``#TODO: Verify code``).
piflash verifies in two steps, per flash page the image touches:

1. Pages the image fills completely are checked with pyOCD's CRC32 analyzer,
   which runs on the target (``Flash.compute_crcs`` in ``pyocd/flash/flash.py``)
   and returns one CRC per page (per block of pages where a page's index is too
   large for the analyzer, see below); the host computes ``binascii.crc32`` of the
   expected bytes. This costs a few bytes of SWD traffic per page instead of the page.
2. Pages whose CRC differs, pages the image covers only in part, and all pages
   of flash without an analyzer are read back over the debug port and compared
   byte by byte, over exactly the bytes the image programs.

CRC-32 detects every single-bit and every burst error up to 32 bits, so one
flipped bit anywhere is always caught; a differing page is then read back to
report the first failing address and the number of differing bytes.
"""

from __future__ import annotations

import binascii
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Dict, List, Optional, Tuple

from piflash.errors import VerifyError
from piflash.firmware.image import FirmwareImage
from piflash.progress import Phase, ProgressSink

if TYPE_CHECKING:
    from pyocd.core.memory_map import MemoryMap, MemoryRegion
    from pyocd.core.session import Session
    from pyocd.flash.flash import Flash

    from piflash.flashing.flashcheck import FlashCheck

LOG = logging.getLogger(__name__)

# The analyzer takes each block as one 32-bit word, ``(addr // size) << 16 | log2(size)``
# (``Flash.compute_crcs`` in pyocd/flash/flash.py), so only a block index below 2**16 reaches
# the target intact. Above it the index is truncated on the wire and the CRC is computed over
# other memory (an alias, or nothing related: nRF UICR at 0x10001000 becomes 0x1000; STM32 flash
# at 0x08000000 in 2 KiB pages becomes the boot alias at 0, which is flash only when BOOT0
# selects it). A verify must not depend on a boot pin: such pages are checked in larger blocks
# whose index fits (STM32: 4 KiB, index 0x8000; :func:`piflash.flashing.plan.crc_unit`) when the
# image fills every page of the block, and read back otherwise (the nRF UICR always).
MAX_CRC_PAGE_INDEX = 0xFFFF  #: the same limit as :data:`piflash.flashing.plan.MAX_CRC_INDEX`

#: Blocks per analyzer call in :func:`blank_check`. compute_crcs() writes one word per block into
#: the algorithm's first page buffer and reads the CRCs back from it, so this stays well below the
#: smallest page buffer of a builtin algorithm (256 bytes = 64 words).
CRC_BATCH_PAGES = 64

#: Bytes read back per debug-port block read (pyOCD splits further as the probe needs).
READBACK_BLOCK = 16 * 1024


@dataclass
class _Page:
    address: int
    size: int
    region: MemoryRegion
    chunks: List[Tuple[int, bytes]] = field(default_factory=list)
    crc_failed: bool = False  # already counted in progress by the CRC pass

    @property
    def covered(self) -> int:
        return sum(len(d) for _, d in self.chunks)

    def expected(self) -> bytes:
        """The whole page's expected contents; only meaningful when fully covered."""
        buf = bytearray(self.size)
        for addr, data in self.chunks:
            buf[addr - self.address : addr - self.address + len(data)] = data
        return bytes(buf)


@dataclass
class VerifyStats:
    """What a verify did.

    :ivar verified_bytes: image bytes proven to match (int).
    :ivar crc_pages: pages checked on the target (int): by CRC32, or, in the proof of an
        unchanged re-flash, by the blank check for a page the image leaves blank.
    :ivar readback_bytes: bytes read back over the debug port (int).
    :ivar mismatched_bytes: bytes that differ (0 on success).
    :ivar first_mismatch: lowest differing address (int) or None.
    """

    verified_bytes: int = 0
    crc_pages: int = 0
    readback_bytes: int = 0
    mismatched_bytes: int = 0
    first_mismatch: Optional[int] = None


def _pages_of(image: FirmwareImage, memory_map: MemoryMap) -> List[_Page]:
    pages: Dict[int, _Page] = {}
    for seg in image.segments:
        addr = seg.address
        while addr < seg.end:
            region = memory_map.get_region_for_address(addr)
            if region is None:
                raise VerifyError(f"no memory at {addr:#010x} to verify", addr, seg.end - addr)
            flash = getattr(region, "flash", None) if region.is_flash else None
            if flash is not None:
                info = flash.get_page_info(addr)
                start, size = info.base_addr, info.size
            else:
                start, size = addr, min(seg.end, region.end + 1) - addr
            stop = min(seg.end, start + size, region.end + 1)
            page = pages.setdefault(start, _Page(start, size, region))
            page.chunks.append((addr, seg.data[addr - seg.address : stop - seg.address]))
            addr = stop
    return [pages[a] for a in sorted(pages)]


def _differs(page: _Page) -> None:
    raise VerifyError(f"flash differs from the image in the page at {page.address:#010x}", page.address, page.covered)


def _crc_group(flash: Flash, page: _Page, unit: int) -> int:
    """Bytes one CRC covers where the image fills them: ``unit`` (:func:`piflash.flashing.plan.crc_unit`)
    for pyOCD's analyzer, whose blocks are numbered in 16 bits; for piflash's own routine, which
    takes any (address, size), the page's sector when that is a multiple of ``unit`` (an RP2040's
    4 KiB sector: one CRC, and one result word to read back, where 256-byte pages would need 16).
    """
    if getattr(flash, "use_analyzer", False):
        return unit
    sector = flash.get_sector_info(page.address)
    size = getattr(sector, "size", 0) if sector is not None else 0
    return size if size > unit and size % unit == 0 else unit


def _page_crcs(
    flash: Flash, check: Optional[FlashCheck], pages: List[_Page], stats: VerifyStats, todo: List[_Page], quick: bool
) -> None:
    """The pages of sectors whose one CRC differed, each by its own CRC (piflash's routine
    ``check``): those that match are verified, the others go to ``todo`` to be read back (with
    ``quick``, the first raises VerifyError naming it), so a differing byte costs a page's read
    back, not a sector's."""
    from piflash.flashing.plan import compute_crcs

    crcs = compute_crcs(flash, [(p.address, p.size) for p in pages], check)
    for page, crc in zip(pages, crcs):
        if crc == binascii.crc32(page.expected()) & 0xFFFFFFFF:
            stats.crc_pages += 1
            stats.verified_bytes += page.size
        elif quick:
            _differs(page)
        else:
            page.crc_failed = True
            todo.append(page)
    if quick:  # the sector's CRC differed but none of its pages' did: name its first page
        _differs(pages[0])


def _crc_check(
    pages: List[_Page], stats: VerifyStats, advance: Callable[[int], None], quick: bool = False
) -> List[_Page]:
    """CRC32 on the target (:func:`piflash.flashing.plan.compute_crcs`) of fully covered pages, in
    CRC blocks of one page or, where a page's index does not fit the analyzer's 16 bits, of the
    pages of one :func:`crc_unit` block; return the pages still to read back. With ``quick``,
    the first block whose CRC differs raises VerifyError at once."""
    from piflash.flashing.flashcheck import FlashCheck
    from piflash.flashing.plan import compute_crcs, crc_unit, reading

    todo: List[_Page] = []
    by_flash: Dict[int, Tuple[Flash, int, Dict[int, List[_Page]]]] = {}
    units: Dict[Tuple[int, int], Optional[int]] = {}  # (region, page size) -> crc_unit: once each
    for page in pages:
        flash: Optional[Flash] = getattr(page.region, "flash", None)
        unit = None
        if flash is not None:
            key = (id(page.region), page.size)
            if key not in units:
                units[key] = crc_unit(flash, page.region, page.size)
            unit = units[key]
        if flash is not None and unit is not None and page.covered == page.size:
            group = _crc_group(flash, page, unit)
            entry = by_flash.setdefault(id(flash), (flash, unit, {}))
            entry[2].setdefault(page.address - page.address % group, []).append(page)
        else:
            todo.append(page)
    for flash, unit, groups in by_flash.values():
        blocks: List[Tuple[int, int, List[_Page]]] = []
        for start, members in sorted(groups.items()):
            size = sum(p.size for p in members)
            if size == _crc_group(flash, members[0], unit):  # the image fills the whole block
                blocks.append((start, size, members))
            elif unit == members[0].size:  # piflash's routine: each whole page on its own
                blocks.extend((p.address, p.size, [p]) for p in members)
            else:
                todo.extend(members)
        if not blocks:
            continue
        with reading(flash):
            check = FlashCheck.for_flash(flash)
            # quick: the first block alone, then twice as many each call, so a board that does
            # not carry the image (a fresh one: the station's usual case) costs one short call.
            size, done = (1 if quick else len(blocks)), 0
            while done < len(blocks):
                part = blocks[done : done + size]
                done, size = done + len(part), 2 * size
                crcs = compute_crcs(flash, [(start, nbytes) for start, nbytes, _ in part], check)
                differ: List[_Page] = []
                for (_start, nbytes, members), crc in zip(part, crcs):
                    expected = binascii.crc32(b"".join(p.expected() for p in members)) & 0xFFFFFFFF
                    if crc == expected:
                        stats.crc_pages += len(members)
                        stats.verified_bytes += nbytes
                    elif check is not None and len(members) > 1:
                        differ.extend(members)  # a sector: which of its pages, by their CRCs
                        if quick:
                            break
                    elif quick:
                        _differs(members[0])
                    else:
                        for page in members:
                            page.crc_failed = True
                        todo.extend(members)
                    advance(nbytes)
                if differ:
                    _page_crcs(flash, check, differ, stats, todo, quick)
    return sorted(todo, key=lambda p: p.address)


def verify_image(
    session: Session,
    image: FirmwareImage,
    progress: Optional[ProgressSink] = None,
    use_crc: bool = True,
    quick: bool = False,
) -> VerifyStats:
    """Compare the target's memory with ``image``, without writing anything.

    :param session: an open pyOCD ``Session``.
    :param image: the :class:`~piflash.firmware.image.FirmwareImage` whose bytes must be in memory.
    :param progress: receives the ``"verify"`` phase in bytes.
    :param use_crc: use the on-target CRC32 analyzer where the flash algorithm has one;
        False reads every byte back.
    :param quick: stop at the first page that differs (its CRC, or the first read-back block)
        and raise VerifyError naming that page, with ``differing_bytes`` the bytes of the image
        in it (not counted exactly): a cheap "is this image already there?" check. The CRCs
        are asked for one block first, then twice as many per call, so a board without the
        image costs one short call.
    :returns: :class:`VerifyStats` when every byte matches.
    :raises VerifyError: with the first differing address and the number of differing bytes.
    :raises pyocd.core.exceptions.Error: transfer or probe errors (the caller translates them).
    """
    sink = progress or ProgressSink()
    stats = VerifyStats()
    done = [0]

    def advance(nbytes: int) -> None:
        done[0] += nbytes
        sink.phase_update(Phase.VERIFY, done[0])

    target = session.target
    assert target is not None, "the pyOCD session is not open"
    pages = _pages_of(image, target.memory_map)
    sink.phase_start(Phase.VERIFY, sum(p.covered for p in pages))
    todo = _crc_check(pages, stats, advance, quick) if use_crc else pages
    for page in todo:
        for addr, data in page.chunks:
            for off in range(0, len(data), READBACK_BLOCK):
                want = data[off : off + READBACK_BLOCK]
                got = bytes(target.read_memory_block8(addr + off, len(want)))
                stats.readback_bytes += len(want)
                diff = [i for i in range(len(want)) if want[i] != got[i]] if got != want else []
                if diff:
                    stats.mismatched_bytes += len(diff)
                    first = addr + off + diff[0]
                    if stats.first_mismatch is None or first < stats.first_mismatch:
                        stats.first_mismatch = first
                if diff and quick:
                    _differs(page)
                stats.verified_bytes += len(want) - len(diff)
                if not page.crc_failed:
                    advance(len(want))
    if stats.mismatched_bytes:
        sink.phase_end(Phase.VERIFY, "FAILED")
        first_bad = stats.first_mismatch
        assert first_bad is not None, "set with mismatched_bytes"
        raise VerifyError(
            f"verify failed: {stats.mismatched_bytes:,} byte(s) differ, first at {first_bad:#010x}",
            first_bad,
            stats.mismatched_bytes,
            hint="flash again; if the same address fails again the flash is worn or protected",
        )
    sink.phase_end(Phase.VERIFY, f"all match: {stats.crc_pages} pages by CRC32, {stats.readback_bytes:,} B read back")
    return stats


#: Largest block one analyzer call checksums in a blank check (bytes). The analyzer runs on the
#: target's core; 64 KiB keeps one call well inside pyOCD's ``flash.timeout.analyzer`` (30 s)
#: even on a slow core, and a differing block is read back whole to find the first bad byte.
BLANK_BLOCK_MAX = 64 * 1024


@dataclass
class BlankStats:
    """What a blank check found.

    :ivar checked_bytes: bytes checked (int).
    :ivar crc_bytes: of those, bytes proven blank on the target (int): by the blank check or
        pyOCD's CRC32 analyzer.
    :ivar readback_bytes: bytes read back over the debug port (int).
    :ivar dirty_bytes: bytes that are not the erased value (0 when blank).
    :ivar first_dirty: lowest such address (int) or None.
    """

    checked_bytes: int = 0
    crc_bytes: int = 0
    readback_bytes: int = 0
    dirty_bytes: int = 0
    first_dirty: Optional[int] = None


def _blank_blocks(start: int, end: int) -> List[Tuple[int, int, bool]]:
    """Split [start, end) into (address, size, crc_ok) blocks: power-of-two sized and aligned
    blocks whose index fits the analyzer's 16-bit field (see :data:`MAX_CRC_PAGE_INDEX`) have
    ``crc_ok``; what is left is read back."""
    out: List[Tuple[int, int, bool]] = []
    addr = start
    while addr < end:
        size = BLANK_BLOCK_MAX
        while size >= 4 and (addr % size or addr + size > end or addr // size > MAX_CRC_PAGE_INDEX):
            size //= 2
        if size >= 4:
            out.append((addr, size, True))
            addr += size
        else:  # read back up to where a block could start (e.g. nRF UICR at 0x10001000 is read whole)
            stop = min(end, (addr // BLANK_BLOCK_MAX + 1) * BLANK_BLOCK_MAX)
            out.append((addr, stop - addr, False))
            addr = stop
    return out


def blank_check(session: Session, ranges: List[Tuple[int, int]]) -> BlankStats:
    """Prove that flash in ``ranges`` reads as erased, cheaply: on the target, per block of up
    to :data:`BLANK_BLOCK_MAX` bytes, piflash's blank check (:class:`piflash.flashing.flashcheck.FlashCheck`)
    or, where the algorithm leaves no RAM for it, pyOCD's CRC32 analyzer (``Flash.compute_crcs``,
    compared with the CRC32 of the same number of erased bytes); reading back only blocks that
    are not blank, to find the first dirty byte, and flash without an analyzer.

    :param ranges: (start, end_exclusive) byte addresses inside flash regions.
    :returns: :class:`BlankStats`; ``dirty_bytes`` > 0 when something is not erased.
    :raises pyocd.core.exceptions.Error: transfer or probe errors (the caller translates them).
    """
    from piflash.flashing.flashcheck import FlashCheck
    from piflash.flashing.plan import reading

    target = session.target
    assert target is not None, "the pyOCD session is not open"
    stats = BlankStats()
    by_flash: Dict[int, Tuple[Flash, int, List[Tuple[int, int]]]] = {}
    readback: List[Tuple[int, int, int]] = []
    for start, end in ranges:
        addr = start
        while addr < end:
            region = target.memory_map.get_region_for_address(addr)
            assert region is not None, "blank_check: the ranges are in flash"
            stop = min(end, region.end + 1)
            erased = getattr(region, "erased_byte_value", 0xFF)
            flash: Optional[Flash] = getattr(region, "flash", None)
            analyzer = flash is not None and getattr(flash, "use_analyzer", False)
            for baddr, bsize, crc_ok in _blank_blocks(addr, stop):
                stats.checked_bytes += bsize
                if analyzer and crc_ok and flash is not None:
                    by_flash.setdefault(id(flash), (flash, erased, []))[2].append((baddr, bsize))
                else:
                    readback.append((baddr, bsize, erased))
            addr = stop
    for flash, erased, blocks in by_flash.values():
        with reading(flash):
            check = FlashCheck.for_flash(flash)
            if check is not None:  # piflash's blank check: a cycle per byte, not ~15
                for (baddr, bsize), blank in zip(blocks, check.blank(blocks, erased)):
                    if blank:
                        stats.crc_bytes += bsize
                    else:
                        readback.append((baddr, bsize, erased))
                blocks = []
            for i in range(0, len(blocks), CRC_BATCH_PAGES):
                batch = blocks[i : i + CRC_BATCH_PAGES]
                for (baddr, bsize), crc in zip(batch, flash.compute_crcs(batch)):
                    if (crc & 0xFFFFFFFF) == binascii.crc32(bytes([erased]) * bsize):
                        stats.crc_bytes += bsize
                    else:
                        readback.append((baddr, bsize, erased))
    for baddr, bsize, erased in sorted(readback):
        for off in range(0, bsize, READBACK_BLOCK):
            n = min(READBACK_BLOCK, bsize - off)
            got = bytes(target.read_memory_block8(baddr + off, n))
            stats.readback_bytes += n
            dirty = [i for i, b in enumerate(got) if b != erased]
            if dirty:
                stats.dirty_bytes += len(dirty)
                first = baddr + off + dirty[0]
                if stats.first_dirty is None or first < stats.first_dirty:
                    stats.first_dirty = first
    return stats
