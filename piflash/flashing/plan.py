"""piflash's programming engine: plan a flash region's erase and program from one CRC pass, then do it.

pyOCD's ``FlashBuilder`` (pyocd/flash/builder.py) erases every sector that holds a page whose
contents differ from the image, even when that sector is already blank, and it confirms every page
whose on-target CRC32 matches by reading the whole page back over the debug port. On a board
fresh from the factory the first costs one sector erase per sector (85 ms each on an nRF52840,
Product Specification v1.7 section 4.3.10 ``t_ERASEPAGE``) for nothing; on a re-flash of an
unchanged image the second reads the whole image back. This module does the same job with less
work over the probe, on pyOCD's public flash API (``pyocd.flash.flash.Flash``: ``init``,
``uninit``, ``cleanup``, ``compute_crcs``, ``erase_sector``, ``erase_all``, ``program_page``,
``load_page_buffer``, ``start_program_page_with_buffer``, ``wait_for_completion``):

1. **Plan** (:func:`plan_region`). One run of pyOCD's CRC32 analyzer over every page of every
   sector the image touches (``Flash.compute_crcs``: the CRCs are computed on the target, four
   bytes per page cross the debug port) tells for each page whether it is *blank* (its CRC is
   that of ``page size`` erased bytes, :func:`erased_crc`), already holds the image (*same*), or
   neither. Pages the analyzer cannot address (see :func:`crc_unit`) and partly written pages
   whose other bytes are unknown are read back. Then per sector:

   - every image page is the same: nothing is done;
   - every page that must change is blank: those pages are programmed, nothing is erased
     (NOR flash programs an erased cell without an erase; a fresh board takes this path);
   - otherwise the sector is erased, and every page of it whose new contents are not blank is
     programmed: image pages, and the pages and bytes of the sector outside the image with the
     contents read before the erase (pyOCD's ``keep_unwritten``).
2. **Erase** (:meth:`RegionPlan.erase`) the sectors the plan names, or the chip.
3. **Program** (:meth:`RegionPlan.program`) the pages the plan names, double buffered when the
   flash algorithm has two page buffers: the next page crosses the probe while the target
   programs the current one. For the algorithms known to program across pages
   (:mod:`piflash.flashing.multipage`), runs of consecutive pages go in one algorithm call.

What is trusted: a CRC32 match, as ``piflash.flashing.verify`` trusts one (pyOCD's ``fast_verify``; two
different 4 KiB pages collide with probability 2**-32). A wrong "blank" would program over old
bits; the verify after programming compares every page with the image again and fails.

Chip erase: ``erase="chip"`` erases the chip with the algorithm's ``EraseAll`` (the user asked:
everything outside the image is lost, as with pyOCD). ``"auto"`` never chooses a chip erase:
pyOCD's ``auto`` (``FlashBuilder.erase``) chooses one for an image that starts at the start of
flash when its time estimate is lower, which also wipes data after the image (a settings page,
and on nRF the UICR, which ``ERASEALL`` clears too). Here sectors that are blank cost nothing, so
a chip erase would only pay on a board full of other data, which is exactly the data ``auto``
must not destroy without being asked. ``"sector"`` and ``"auto"`` therefore plan the same way.

Where the engine does not apply, :func:`make_region_programmer` returns pyOCD's ``FlashBuilder``
instead (:class:`BuilderRegion`): a region whose erased sectors cannot be read
(``region.are_erased_sectors_readable`` False) or which is not readable at all, a region whose
pages do not tile its sectors (a page larger than a sector, or sizes that do not divide), and
``smart_flash=False`` (every page rewritten: nothing to plan).
"""

from __future__ import annotations

import binascii
import logging
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from piflash.flashing import multipage
from piflash.targets.families import flash_speedups

if TYPE_CHECKING:
    from pyocd.core.memory_map import MemoryRegion
    from pyocd.flash.flash import Flash

    from piflash.flashing.flashcheck import FlashCheck

LOG = logging.getLogger(__name__)

#: The analyzer takes each block as one 32-bit word, ``(address // size) << 16 | log2(size)``
#: (``Flash.compute_crcs``, pyocd/flash/flash.py): a block index above 16 bits is truncated on
#: the wire and the CRC is computed over other memory.
MAX_CRC_INDEX = 0xFFFF
#: Largest CRC block, in pages, :func:`crc_unit` will use to bring block indexes under 16 bits.
MAX_UNIT_PAGES = 16

Progress = Callable[[float], None]


def _no_progress(fraction: float) -> None:
    pass


@lru_cache(maxsize=32)
def erased_crc(size: int, erased_byte: int = 0xFF) -> int:
    """CRC32 (``binascii.crc32``, what pyOCD's analyzer computes) of ``size`` erased bytes.

    :param size: bytes.
    :param erased_byte: the region's ``erased_byte_value`` (0xFF for NOR flash).
    :returns: the CRC as an unsigned 32-bit int.
    """
    return binascii.crc32(bytes([erased_byte]) * size) & 0xFFFFFFFF


def crc_encodable(address: int, size: int) -> bool:
    """Whether the analyzer can address the block ``[address, address + size)``: ``size`` a power
    of two, ``address`` a multiple of it, and the block index below 2**16 (:data:`MAX_CRC_INDEX`)."""
    return size > 0 and size & (size - 1) == 0 and address % size == 0 and address // size <= MAX_CRC_INDEX


def crc_unit(flash: Flash, region: MemoryRegion, page_size: int) -> Optional[int]:
    """The CRC block size (bytes) for a region's pages: the smallest power of two >= ``page_size``
    at which every block of the region has an index below 2**16, or None when the flash has
    neither pyOCD's analyzer nor room for piflash's own routine, or no such size up to
    :data:`MAX_UNIT_PAGES` pages exists.

    STM32F1 flash at 0x08000000 with 2 KiB pages gives 4 KiB (index 0x8000); nRF UICR at
    0x10001000 gives None (no power of two both aligns with it and indexes it in 16 bits).
    """
    if page_size <= 0 or page_size & (page_size - 1):
        return None
    if not getattr(flash, "use_analyzer", False):
        # No pyOCD analyzer (pyOCD's RP2 algorithm): piflash's own CRC routine, where it fits.
        from piflash.flashing.flashcheck import FlashCheck

        if FlashCheck.for_flash(flash) is None:
            return None
        # Its blocks are (address, size) pairs: no 16-bit block index to fit, one page a block.
        return page_size if region.start % page_size == 0 else None
    unit = page_size
    while unit <= MAX_UNIT_PAGES * page_size:
        if region.start % unit == 0 and region.end // unit <= MAX_CRC_INDEX:
            return unit
        unit *= 2
    return None


def compute_crcs(flash: Flash, blocks: Sequence[Tuple[int, int]], check: Optional[FlashCheck] = None) -> List[int]:
    """The CRC32 of ``blocks`` ((address, size) pairs, each :func:`crc_encodable`), computed on
    the target: by piflash's own routine (:class:`piflash.flashing.flashcheck.FlashCheck`, about twice
    the analyzer's speed) where the algorithm leaves RAM for it, else by pyOCD's CRC32 analyzer
    in as few calls as the first page buffer allows.

    The flash algorithm must be initialised (``flash.init``): both routines run on its stack.
    ``Flash.compute_crcs`` writes one word per block into ``page_buffers[0]``, which holds at
    least one page (pyocd/flash/flash.py), so an analyzer call takes up to ``page_size // 4``
    blocks.

    :param check: a :class:`~piflash.flashing.flashcheck.FlashCheck` of ``flash`` already made (its code
        loaded once for several calls); by default one is made for this call.
    :returns: one unsigned CRC per block, in order.
    :raises pyocd.core.exceptions.Error: transfer errors, routine timeout.
    """
    from piflash.flashing.flashcheck import FlashCheck

    check = check or FlashCheck.for_flash(flash)
    if check is not None:
        return check.crc32(blocks)
    batch = max(1, flash.region.page_size // 4)
    out: List[int] = []
    for i in range(0, len(blocks), batch):
        out.extend(c & 0xFFFFFFFF for c in flash.compute_crcs(list(blocks[i : i + batch])))
    return out


def init_for_read(flash: Flash) -> None:
    """Make ``flash``'s region readable through the bus for piflash's checks (a pyOCD ``Flash``).

    For the algorithms of :data:`piflash.flashing.multipage.MEMORY_MAPPED`, when there is RAM for
    :class:`~piflash.flashing.flashcheck.FlashCheck` (pyOCD's analyzer, the fallback, runs on the
    algorithm's initialised stack), that is only a halted core: no load of the algorithm
    and no call of its Init, which on a CMSIS-DAP probe are about eight USB round trips (the
    program phase loads it when it needs it). The same where the family's speed-ups say the flash
    reads without the Init (:func:`piflash.targets.families.flash_speedups`: an RP2040 whose flash
    takes instructions with its SSI in the boot ROM's XIP set-up,
    :func:`piflash.targets.families.rp2_flash.reads_without_init`), where the SSI is then set up for
    fast reads (:func:`piflash.targets.families.rp2_flash.enable_xip`).
    Otherwise load the algorithm and call its Init for VERIFY (ERASE for algorithms that refuse
    that), as pyOCD's ``FlashBuilder._enable_read_access`` does, and put the RP2040's flash back
    in XIP (:func:`piflash.targets.families.rp2_flash.enable_xip`). A read phase ends with :func:`end_read`
    (or runs in :func:`reading`).

    :raises pyocd.core.exceptions.Error: from pyOCD.
    """
    from pyocd.core.exceptions import FlashFailure

    from piflash.flashing.flashcheck import FlashCheck

    if multipage.reads_without_init(flash) and FlashCheck.for_flash(flash) is not None:
        flash.target.halt()
        return
    speedups = flash_speedups(flash)
    if speedups.reads_without_init(flash) and FlashCheck.for_flash(flash) is not None:
        flash.target.halt()
    else:
        try:
            flash.init(flash.Operation.VERIFY)
        except FlashFailure:  # some algorithms only init for erase/program
            flash.init(flash.Operation.ERASE)
    speedups.enable_reads(flash)  # RP2040: fast XIP reads (the algorithm's Init took the flash out of XIP)


def end_read(flash: Flash) -> None:
    """End a read phase begun with :func:`init_for_read`: the RP2040's flash back to taking
    instructions, XIP as the boot ROM leaves it (:func:`piflash.targets.families.rp2_flash.end_reads`); the
    algorithm stays as it is (``Flash.cleanup`` or the next ``Flash.init`` follows).

    :raises pyocd.core.exceptions.Error: from pyOCD.
    """
    flash_speedups(flash).end_reads(flash)


@contextmanager
def _read_phase(flash: Flash) -> Iterator[None]:
    """:func:`init_for_read`, the body, :func:`end_read`; when either of the first two raises,
    :func:`end_read` is still tried (a failure of it only logged) and their error raised."""
    try:
        init_for_read(flash)
        yield
    except BaseException:
        _end_read_quietly(flash)
        raise
    end_read(flash)


@contextmanager
def reading(flash: Flash) -> Iterator[None]:
    """:func:`init_for_read`, the body, then :func:`end_read` and ``Flash.cleanup``. When either
    of the first two raises, its error is the one raised: :func:`end_read` is still tried, and a
    failure of it only logged.

    :raises pyocd.core.exceptions.Error: from pyOCD.
    """
    try:
        with _read_phase(flash):
            yield
    finally:
        flash.cleanup()


def _end_read_quietly(flash: Flash) -> None:
    """:func:`end_read` after another error, whose report this one must not replace: a failure
    is logged. (A read phase left unended is caught before the next read: see
    :func:`piflash.targets.families.rp2_flash.reads_without_init`.)"""
    try:
        end_read(flash)
    except Exception:  # noqa: BLE001 - the caller's error is the one to report
        LOG.debug("could not end the read phase", exc_info=True)


class NotApplicable(Exception):
    """The engine cannot program this region; the message says why (pyOCD's FlashBuilder does)."""


@dataclass
class PagePlan:
    """One flash page of a sector the image touches.

    :ivar address: first byte (int); :ivar size: bytes.
    :ivar pieces: (offset in page, bytes) of the image in this page; empty outside the image.
    :ivar current: the page's contents on the target (bytes), when known (blank by CRC, same by
        CRC, or read back); None when only known to differ.
    :ivar data: what the page must hold afterwards (bytes), once planned.
    :ivar write: program ``data`` into this page.
    :ivar evidence: how ``current`` became known: ``"blank"`` (the on-target blank check),
        ``"crc"`` (an on-target CRC32) or ``"read"``.
    """

    address: int
    size: int
    pieces: List[Tuple[int, bytes]] = field(default_factory=list)
    current: Optional[bytes] = None
    data: Optional[bytes] = None
    write: bool = False
    evidence: Optional[str] = None

    @property
    def covered(self) -> int:
        """Image bytes in this page."""
        return sum(len(d) for _, d in self.pieces)

    def overlay(self, base: bytes) -> bytes:
        """``base`` (the page's old contents) with the image's bytes written over it."""
        buf = bytearray(base)
        for off, data in self.pieces:
            buf[off : off + len(data)] = data
        return bytes(buf)


@dataclass
class SectorPlan:
    """One erase sector the image touches: its pages and whether it is erased."""

    address: int
    size: int
    pages: List[PagePlan]
    erase: bool = False

    @property
    def image_bytes(self) -> int:
        return sum(p.covered for p in self.pages)


@dataclass
class RegionStats:
    """What one region's erase and program did (bytes and pages)."""

    chip_erase: bool = False
    erased_bytes: int = 0
    programmed_bytes: int = 0
    programmed_pages: int = 0
    skipped_bytes: int = 0
    skipped_pages: int = 0


class RegionPlan:
    """The planned erase and program of one flash region (from :func:`plan_region`).

    :ivar sectors: the :class:`SectorPlan` list, in address order.
    :ivar chip_erase: erase with the algorithm's EraseAll instead of sectors.
    :ivar crc_blocks: CRCs the plan's pass computed (a sector checked whole, then page by page,
        counts once for the sector and once for each page); :ivar read_bytes: bytes read back.
    """

    def __init__(self, flash: Flash, sectors: List[SectorPlan], chip_erase: bool, crc_blocks: int, read_bytes: int):
        self.flash = flash
        self.sectors = sectors
        self.chip_erase = chip_erase
        #: Bytes a chip erase cleared when that is not the region's length (an RP2040's flash
        #: under pyOCD's 16 MiB window); None otherwise.
        self.chip_bytes: Optional[int] = None
        self.crc_blocks = crc_blocks
        self.read_bytes = read_bytes

    @property
    def data_size(self) -> int:
        """Image bytes in this region."""
        return sum(s.image_bytes for s in self.sectors)

    @property
    def pages_to_program(self) -> List[PagePlan]:
        return [p for s in self.sectors for p in s.pages if p.write]

    @property
    def writes_nothing(self) -> bool:
        """Nothing is erased or programmed: the plan found every image byte already in flash."""
        return not self.chip_erase and not any(s.erase for s in self.sectors) and not self.pages_to_program

    def image_pages(self) -> List[PagePlan]:
        """The pages holding image bytes."""
        return [p for s in self.sectors for p in s.pages if p.pieces]

    def stats(self) -> RegionStats:
        """Byte and page counts as pyOCD's ProgrammingInfo gives them: erased sectors' bytes (the
        region's size for a chip erase), pages programmed, image pages left alone."""
        st = RegionStats(chip_erase=self.chip_erase)
        st.erased_bytes = (
            (self.chip_bytes or self.flash.region.length)
            if self.chip_erase
            else sum(s.size for s in self.sectors if s.erase)
        )
        for page in (p for s in self.sectors for p in s.pages):
            if page.write:
                st.programmed_pages += 1
                st.programmed_bytes += page.size
            elif page.pieces:
                st.skipped_pages += 1
                st.skipped_bytes += page.size
        return st

    def erase(self, progress: Progress = _no_progress) -> None:
        """Erase what the plan says: the chip, or the sectors marked ``erase``.

        :raises pyocd.core.exceptions.FlashEraseFailure: and other pyOCD errors.
        """
        from pyocd.core.target import Target

        flash, total = self.flash, max(1, self.data_size)
        flash.target.session.notify(Target.Event.PRE_FLASH_ERASE, self)
        progress(0.0)
        todo = [s for s in self.sectors if s.erase]
        done = sum(s.image_bytes for s in self.sectors if not s.erase)
        progress(done / total)
        if self.chip_erase or (todo and flash.region.is_erasable):
            flash.init(flash.Operation.ERASE)
            speedups = flash_speedups(flash)
            if self.chip_erase and speedups.erases_chip:
                self.chip_bytes = speedups.erase_chip(flash)  # RP2: the flash's own Chip Erase
            elif self.chip_erase:
                flash.erase_all()
            else:
                if speedups.erases_blocks and all(s.size == 0x1000 for s in todo):
                    # RP2: whole 64/32 KiB blocks by the flash's block erase (piflash.targets.families.rp2_flash).
                    blocks, rest = speedups.erase_blocks(flash, [s.address for s in todo])
                    if blocks:
                        LOG.debug(
                            "%s: %d block erase(s), %d sector erase(s)", flash.region.name, len(blocks), len(rest)
                        )
                    keep = set(rest)
                    done += sum(s.image_bytes for s in todo if s.address not in keep)
                    progress(done / total)
                    todo = [s for s in todo if s.address in keep]
                for sector in todo:
                    flash.erase_sector(sector.address)
                    done += sector.image_bytes
                    progress(done / total)
            flash.uninit()
        progress(1.0)
        flash.target.session.notify(Target.Event.POST_FLASH_ERASE, self)

    def program(self, progress: Progress = _no_progress) -> RegionStats:
        """Program the pages the plan marks ``write`` (double buffered when the algorithm has two
        page buffers), then unload the algorithm (``Flash.cleanup``).

        :returns: :meth:`stats`.
        :raises pyocd.core.exceptions.FlashProgramFailure: and other pyOCD errors.
        """
        from pyocd.core.exceptions import FlashProgramFailure
        from pyocd.core.target import Target

        flash = self.flash
        flash.target.session.notify(Target.Event.PRE_FLASH_PROGRAM, self)
        pages = self.pages_to_program
        total, done = max(1, sum(p.size for p in pages)), 0
        progress(0.0)
        layout = multipage.layout_for(flash, flash.region.page_size) if pages else None
        if pages:
            flash.init(flash.Operation.PROGRAM)
            speedups = flash_speedups(flash)
            speedups.prepare_program(flash)  # RP2040/RP2350: the boot ROM's SPI clock, 3x faster
            if layout is not None:  # several pages per algorithm call (piflash.flashing.multipage)

                def run_done(nbytes: int) -> None:
                    nonlocal done
                    done += nbytes
                    progress(done / total)

                runs = multipage.group_runs(
                    [(p.address, _planned(p)) for p in pages], layout.run_size, first_run=flash.region.page_size
                )
                LOG.debug(
                    "%s: %d pages in %d calls of up to %d B (%s)",
                    flash.region.name,
                    len(pages),
                    len(runs),
                    layout.run_size,
                    layout.algorithm,
                )
                multipage.RunProgrammer(flash, layout).program(runs, run_done)
            elif flash.is_double_buffering_supported:
                timeout = flash.target.session.options.get("flash.timeout.program")
                flash.load_page_buffer(0, pages[0].address, list(_planned(pages[0])))
                buf = 0
                for i, page in enumerate(pages):
                    flash.start_program_page_with_buffer(buf, page.address)
                    if i + 1 < len(pages):  # the next page crosses the probe while this one programs
                        flash.load_page_buffer(1 - buf, pages[i + 1].address, list(_planned(pages[i + 1])))
                    result = flash.wait_for_completion(timeout=timeout)
                    if result != 0:
                        what = "timeout" if result == flash.TIMEOUT_ERROR else "failure"
                        raise FlashProgramFailure(
                            f"flash program page {what}", address=page.address, result_code=result
                        )
                    buf = 1 - buf
                    done += page.size
                    progress(done / total)
            else:
                for page in pages:
                    flash.program_page(page.address, list(_planned(page)))
                    done += page.size
                    progress(done / total)
            speedups.before_uninit(flash)  # RP2040: 03h XIP within 50 MHz after the UnInit
            flash.uninit()
        flash.cleanup()
        progress(1.0)
        flash.target.session.notify(Target.Event.POST_FLASH_PROGRAM, self)
        return self.stats()


def _planned(page: PagePlan) -> bytes:
    """``page.data`` of a page the plan writes: the plan sets it for every such page."""
    assert page.data is not None, "a page to write has its data planned"
    return page.data


def _sectors_for(flash: Flash, chunks: Sequence[Tuple[int, bytes]]) -> List[SectorPlan]:
    """Every sector the image's ``chunks`` touch, with all its pages and the image's pieces."""
    sectors: Dict[int, SectorPlan] = {}
    pages: Dict[int, PagePlan] = {}
    for addr, data in chunks:
        pos = 0
        while pos < len(data):
            at = addr + pos
            sector_info = flash.get_sector_info(at)
            page_info = flash.get_page_info(at)
            if sector_info is None or page_info is None:
                raise NotApplicable(f"no sector or page information at {at:#010x}")
            base = sector_info.base_addr
            if base not in sectors:
                sector = SectorPlan(base, sector_info.size, [])
                page_addr = base
                while page_addr < base + sector_info.size:
                    info = flash.get_page_info(page_addr)
                    if info is None or info.base_addr != page_addr or page_addr + info.size > base + sector_info.size:
                        raise NotApplicable(f"pages do not tile the sector at {base:#010x}")
                    page = PagePlan(page_addr, info.size)
                    sector.pages.append(page)
                    pages[page_addr] = page
                    page_addr += info.size
                sectors[base] = sector
            page = pages[page_info.base_addr]
            take = min(len(data) - pos, page.address + page.size - at)
            page.pieces.append((at - page.address, bytes(data[pos : pos + take])))
            pos += take
    return [sectors[a] for a in sorted(sectors)]


def _sector_crcs(
    flash: Flash, sectors: Sequence[SectorPlan], keys: List[int], unit: int, check: FlashCheck
) -> Tuple[List[int], int]:
    """The plan's CRC pass by whole sectors first, with piflash's own routine (``check``), which
    takes any (address, size): one CRC per sector whose every block is in ``keys`` (not blank),
    where an RP2040's 4 KiB sector of 256-byte blocks would need 16 CRCs and 16 result words.
    A sector that holds the image over blank has all its pages known (evidence ``"crc"``). A
    sector that does not, and is wholly the image's (each page whole, no piece missing), must
    be erased whatever its pages hold (none is blank), so its blocks are left unknown; the
    blocks of the other sectors that differ go on to the CRC per block (a page of other data
    kept beside the image's pages).

    :param keys: addresses of the ``unit``-byte blocks to learn (not blank), in order.
    :returns: (the blocks still to learn by their own CRC, in order; the sector CRCs computed).
    """
    todo = set(keys)
    whole: List[Tuple[SectorPlan, List[int]]] = []
    for sector in sectors:
        starts = list(range(sector.address, sector.address + sector.size, unit))
        if sector.size > unit and sector.size % unit == 0 and all(a in todo for a in starts):
            whole.append((sector, starts))
    if not whole:
        return keys, 0
    crcs = compute_crcs(flash, [(sector.address, sector.size) for sector, _ in whole], check)
    for (sector, starts), crc in zip(whole, crcs):
        expect = [p.overlay(bytes([flash.region.erased_byte_value]) * p.size) for p in sector.pages]
        if crc == binascii.crc32(b"".join(expect)) & 0xFFFFFFFF:
            for page, data in zip(sector.pages, expect):
                page.current, page.evidence = data, "crc"
            todo -= set(starts)
        elif all(p.covered == p.size for p in sector.pages):
            todo -= set(starts)
    return [a for a in keys if a in todo], len(whole)


def plan_region(flash: Flash, chunks: Sequence[Tuple[int, bytes]], chip_erase: bool = False) -> RegionPlan:
    """Decide what to erase and program in ``flash``'s region for the image's ``chunks``.

    Runs on the target: one CRC pass over every page of the sectors the image touches, and reads
    of the pages it cannot classify that must be known (partly written pages; pages kept in a
    sector to be erased). The reads end with :func:`end_read`; the algorithm stays as
    :func:`init_for_read` left it (loaded and initialised for reading, or, where reading needs
    neither, as it was) for the erase and program that follow.

    :param flash: the region's ``pyocd.flash.flash.Flash`` (``region.flash``).
    :param chunks: (address, bytes) of the image, all inside the region, not overlapping.
    :param chip_erase: plan for one chip erase (EraseAll) instead of sector erases.
    :returns: the :class:`RegionPlan`.
    :raises NotApplicable: the region is one the engine leaves to pyOCD's FlashBuilder.
    :raises pyocd.core.exceptions.Error: from pyOCD.
    """
    region = flash.region
    if not region.is_readable or not region.are_erased_sectors_readable:
        raise NotApplicable("the region's erased sectors cannot be read")
    if chip_erase and not flash.is_erase_all_supported and not flash_speedups(flash).erases_chip:
        chip_erase = False  # as FlashBuilder: no EraseAll in the algorithm, erase sectors
    sectors = _sectors_for(flash, chunks)
    with _read_phase(flash):
        return _plan_pages(flash, sectors, chip_erase)


def _plan_pages(flash: Flash, sectors: List[SectorPlan], chip_erase: bool) -> RegionPlan:
    """:func:`plan_region`'s reads and decisions, the region readable (:func:`init_for_read`)."""
    region = flash.region
    erased_value = region.erased_byte_value

    def blank(size: int) -> bytes:
        return bytes([erased_value]) * size

    # 1. One CRC pass: a block is blank, or holds the image written over blank, or is unknown.
    all_pages = [p for s in sectors for p in s.pages]
    by_addr = {p.address: p for p in all_pages}
    page_size = region.page_size
    unit = crc_unit(flash, region, page_size)
    blocks: Dict[int, List[PagePlan]] = {}
    if unit is not None:
        for page in all_pages:
            start = page.address - page.address % unit
            # A page of another size (a subregion) is read back instead: the block math assumes
            # the region's page size.
            if page.size == page_size and start + unit - 1 <= region.end:
                blocks.setdefault(start, []).append(page)
    keys = sorted(blocks)
    crc_block = unit or 0  # the CRC block size; keys is empty when there is none
    # A fresh board's pages are all blank: piflash's blank check tells that at about a cycle
    # per byte, and only the blocks that are not blank need the CRC.
    from piflash.flashing.flashcheck import FlashCheck

    check = FlashCheck.for_flash(flash) if keys else None
    sector_crcs = 0
    if check is not None:
        is_blank = check.blank([(a, crc_block) for a in keys], erased_value)
        for start in (a for a, b in zip(keys, is_blank) if b):
            for page in blocks[start]:
                page.current, page.evidence = blank(page.size), "blank"
        keys = [a for a, b in zip(keys, is_blank) if not b]
        keys, sector_crcs = _sector_crcs(flash, sectors, keys, crc_block, check)
    crcs = compute_crcs(flash, [(a, crc_block) for a in keys], check) if keys else []
    for start, crc in zip(keys, crcs):
        members = blocks[start]
        # Every page of the block must be one of ours to know what "image over blank" is.
        full = [by_addr.get(a) for a in range(start, start + crc_block, page_size)]
        ours = [p for p in full if p is not None and p.size == page_size]
        if crc == erased_crc(crc_block, erased_value):
            for page in members:
                page.current, page.evidence = blank(page.size), "crc"
        elif len(ours) == len(full):
            expect = [p.overlay(blank(p.size)) for p in ours]
            if crc == binascii.crc32(b"".join(expect)) & 0xFFFFFFFF:
                for page, data in zip(ours, expect):
                    page.current, page.evidence = data, "crc"

    read_bytes = [0]

    def read_back(page: PagePlan) -> None:
        if page.current is None:
            page.current = bytes(flash.target.read_memory_block8(page.address, page.size))
            page.evidence = "read"
            read_bytes[0] += page.size

    # 2. Per sector: skip, program blank pages only, or erase and program.
    for sector in sectors:
        image_pages = [p for p in sector.pages if p.pieces]
        for page in image_pages:
            if page.current is None and page.covered < page.size:
                read_back(page)  # the bytes the image does not cover must be kept
            page.data = page.overlay(page.current) if page.current is not None else page.overlay(blank(page.size))
            page.write = page.current != page.data
        changed = [p for p in image_pages if p.write]
        sector.erase = chip_erase or any(p.current != blank(p.size) for p in changed)
        if sector.erase:
            for page in sector.pages:
                if not page.pieces:
                    read_back(page)  # outside the image: restored after the erase
                    page.data = page.current
                page.write = page.data != blank(page.size)
    return RegionPlan(flash, sectors, chip_erase, sector_crcs + len(keys), read_bytes[0])


class EngineRegion:
    """One flash region programmed by this module's engine: plan and erase in :meth:`erase`,
    program in :meth:`program`.

    :param flash: the region's ``Flash``; :param chunks: (address, bytes) of the image in it.
    """

    def __init__(self, flash: Flash, chunks: Sequence[Tuple[int, bytes]]) -> None:
        self.flash = flash
        self.chunks = list(chunks)
        self.data_size = sum(len(d) for _, d in self.chunks)
        self.plan: Optional[RegionPlan] = None
        self._fallback: Optional[BuilderRegion] = None

    def erase(
        self,
        mode: str,
        progress: Progress = _no_progress,
        on_plan: Optional[Callable[[List[Tuple[int, int]]], None]] = None,
    ) -> bool:
        """Plan (one CRC pass), then erase; ``mode`` ``"chip"`` erases the chip. A region the
        plan finds the engine cannot handle (:class:`NotApplicable`) goes to FlashBuilder.
        ``on_plan`` receives the (start, end exclusive) byte ranges of the sectors about to be
        erased, before the erase starts.
        :returns: whether the chip was erased."""
        try:
            self.plan = plan_region(self.flash, self.chunks, chip_erase=(mode == "chip"))
        except NotApplicable as why:
            LOG.debug("%s: pyOCD's FlashBuilder (%s)", self.flash.region.name, why)
            self.flash.cleanup()
            self._fallback = BuilderRegion(self.flash, self.chunks)
            return self._fallback.erase(mode, progress, on_plan)
        if on_plan is not None:
            on_plan([(s.address, s.address + s.size) for s in self.plan.sectors if s.erase])
        LOG.debug(
            "plan for %s: %d CRC blocks, %d B read, erase %s, program %d pages",
            self.flash.region.name,
            self.plan.crc_blocks,
            self.plan.read_bytes,
            "chip" if self.plan.chip_erase else f"{sum(s.erase for s in self.plan.sectors)} sectors",
            len(self.plan.pages_to_program),
        )
        self.plan.erase(progress)
        return self.plan.chip_erase

    @property
    def erased_sectors(self) -> Optional[Tuple[int, int]]:
        """(sectors erased, their bytes) by :meth:`erase`; None before it, after a chip erase,
        or when FlashBuilder did the work."""
        if self._fallback is not None or self.plan is None or self.plan.chip_erase:
            return None
        erased = [s for s in self.plan.sectors if s.erase]
        return len(erased), sum(s.size for s in erased)

    @property
    def unchanged_plan(self) -> Optional[RegionPlan]:
        """The plan, when it wrote nothing (every image byte was found in flash); else None."""
        if self._fallback is None and self.plan is not None and self.plan.writes_nothing:
            return self.plan
        return None

    def program(self, progress: Progress = _no_progress) -> RegionStats:
        """Program what :meth:`erase` planned.
        :raises RuntimeError: called before :meth:`erase`."""
        if self._fallback is not None:
            return self._fallback.program(progress)
        if self.plan is None:
            raise RuntimeError("program() before erase(): nothing is planned")
        return self.plan.program(progress)


class BuilderRegion:
    """One flash region programmed by pyOCD's ``FlashBuilder`` (where the engine does not apply),
    with the same ``erase``/``program`` interface as :class:`EngineRegion`."""

    def __init__(self, flash: Flash, chunks: Sequence[Tuple[int, bytes]], smart_flash: bool = True) -> None:
        self.builder = flash.get_flash_builder()
        self.builder.log_performance = False
        self._chunks = list(chunks)
        for addr, data in chunks:
            self.builder.add_data(addr, data)
        self.data_size = self.builder.buffered_data_size
        self._smart = smart_flash

    unchanged_plan = None  #: FlashBuilder gives no per-page evidence
    erased_sectors = None  #: nor says what it erased before program()

    def erase(
        self,
        mode: str,
        progress: Progress = _no_progress,
        on_plan: Optional[Callable[[List[Tuple[int, int]]], None]] = None,
    ) -> bool:
        if on_plan is not None:  # FlashBuilder decides inside erase(): the image's ranges
            on_plan([(addr, addr + len(data)) for addr, data in self._chunks])
        self.builder.erase(chip_erase=mode, progress_cb=progress, smart_flash=self._smart, keep_unwritten=True)
        return bool(self.builder.last_erase_was_chip)

    def program(self, progress: Progress = _no_progress) -> RegionStats:
        info = self.builder.program(progress_cb=progress, smart_flash=self._smart, keep_unwritten=True)
        return RegionStats(
            chip_erase=bool(self.builder.last_erase_was_chip),
            erased_bytes=info.erase_byte_count,
            programmed_bytes=info.program_byte_count,
            programmed_pages=info.program_page_count,
            skipped_bytes=info.skipped_byte_count,
            skipped_pages=info.skipped_page_count,
        )


#: What :func:`make_region_programmer` returns: both have ``data_size`` (int), ``erase``, ``program``,
#: ``erased_sectors`` and ``unchanged_plan``.
RegionProgrammer = Union[EngineRegion, BuilderRegion]


def make_region_programmer(
    flash: Flash, chunks: Sequence[Tuple[int, bytes]], smart_flash: bool = True
) -> RegionProgrammer:
    """The engine for ``flash``'s region, or pyOCD's FlashBuilder where the engine does not apply
    (see the module docstring): an :class:`EngineRegion` or a :class:`BuilderRegion`."""
    region = flash.region
    reason = None
    if not smart_flash:
        reason = "smart flash off"
    elif not region.is_readable or not region.are_erased_sectors_readable:
        reason = "erased sectors are not readable"
    elif region.page_size > region.sector_size or region.sector_size % region.page_size:
        reason = f"pages ({region.page_size} B) do not tile sectors ({region.sector_size} B)"
    if reason is None:
        return EngineRegion(flash, chunks)
    LOG.debug("%s: pyOCD's FlashBuilder (%s)", region.name, reason)
    return BuilderRegion(flash, chunks, smart_flash)
