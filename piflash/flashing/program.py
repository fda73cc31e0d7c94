"""Session-level building blocks: program an image, erase, reset.

Each works on an open pyOCD ``Session`` (from :func:`piflash.targets.connect.open_session`) and raises
pyOCD's own exceptions, which the caller translates with
:func:`piflash.probe.pyocd_errors.translate_error`. :mod:`piflash.jobs.workflow` strings them into whole jobs;
a long-running caller such as the station can use them directly.
"""

from __future__ import annotations

import contextlib
import time
from typing import TYPE_CHECKING, Callable, Dict, Iterator, List, Optional, Sequence, Set, Tuple

from piflash.errors import FlashError, ImageRangeError
from piflash.firmware.image import FirmwareImage
from piflash.progress import Phase, ProgressSink, fraction_callback
from piflash.record.result import ProgramStats
from piflash.targets.catalog import flash_regions

if TYPE_CHECKING:
    from pyocd.core.session import Session
    from pyocd.core.soc_target import SoCTarget
    from pyocd.flash.flash import Flash

    from piflash.flashing.plan import RegionProgrammer
    from piflash.flashing.verify import VerifyStats

#: What ``ImageProgrammer._each`` runs for each region: (index, region, progress callback).
_RegionAction = Callable[[int, "RegionProgrammer", Callable[[float], None]], None]


def _soc(session: Session) -> SoCTarget:
    """``session.target`` of an open session: pyOCD types it Optional (None until the session is
    opened), and every function here takes an open one."""
    target = session.target
    assert target is not None, "the pyOCD session is not open"
    return target


#: Accepted values of the erase mode: pyOCD's ``chip_erase`` option (pyocd/core/options.py).
ERASE_MODES = ("auto", "sector", "chip")


class _Offset(ProgressSink):
    """Shifts a region's byte counts by the bytes of the regions before it."""

    def __init__(self, sink: ProgressSink, offset: int) -> None:
        self._sink, self._offset = sink, offset

    def phase_update(self, phase: "Phase | str", done: int) -> None:
        self._sink.phase_update(phase, self._offset + done)


class ImageProgrammer:
    """Erase then program one image, region by region, with piflash's engine (:mod:`piflash.flashing.plan`).

    Each flash region the image touches gets one CRC pass that decides which sectors to erase
    (only those holding data that must change: blank sectors are programmed without an erase)
    and which pages to program (only those that differ); regions the engine does not handle go to
    pyOCD's ``FlashBuilder`` (see :func:`piflash.flashing.plan.make_region_programmer`). Erase and
    program are separate phases with their own progress, and the statistics come back.

    :param session: an open pyOCD ``Session``.
    :param image: the image; every byte must be in a flash region with an algorithm.
    :param erase: ``"auto"`` (erase the sectors that need it; never a chip erase, see
        :mod:`piflash.flashing.plan`), ``"sector"`` (the same) or ``"chip"`` (one chip erase first:
        everything outside the image is lost).
    :param smart_flash: compare before writing and skip identical pages (pyOCD's smart flash);
        False rewrites every page, through pyOCD's FlashBuilder.
    :param progress: receives the ``"erase"`` and ``"program"`` phases, in image bytes.
    :raises ValueError: unknown erase mode.
    :raises FlashError: part of the image is in memory without a flash algorithm.
    """

    def __init__(
        self,
        session: Session,
        image: FirmwareImage,
        erase: str = "auto",
        smart_flash: bool = True,
        progress: Optional[ProgressSink] = None,
    ) -> None:
        if erase not in ERASE_MODES:
            raise ValueError(f"erase mode must be one of {ERASE_MODES}, not {erase!r}")
        self._erase_mode, self._smart = erase, smart_flash
        self._sink = progress or ProgressSink()
        self._total = image.size
        self._session, self._image = session, image
        self._regions = self._make_regions(session, image, smart_flash)
        self.stats = ProgramStats()

    @staticmethod
    def _make_regions(session: Session, image: FirmwareImage, smart_flash: bool) -> List[RegionProgrammer]:
        from piflash.flashing.plan import make_region_programmer

        memory_map = _soc(session).memory_map
        chunks: Dict[int, Tuple[Flash, List[Tuple[int, bytes]]]] = {}
        for seg in image.segments:
            addr = seg.address
            while addr < seg.end:
                region = memory_map.get_region_for_address(addr)
                flash = region.flash if region is not None and region.is_flash else None
                if region is None or flash is None:
                    raise FlashError(f"no flash algorithm for address {addr:#010x}", address=addr)
                stop = min(seg.end, region.end + 1)
                chunks.setdefault(region.start, (flash, []))[1].append(
                    (addr, seg.data[addr - seg.address : stop - seg.address])
                )
                addr = stop
        return [make_region_programmer(chunks[k][0], chunks[k][1], smart_flash) for k in sorted(chunks)]

    def _each(self, phase: Phase, action: _RegionAction) -> float:
        start = time.monotonic()
        self._sink.phase_start(phase, self._total)
        offset = 0
        for i, region in enumerate(self._regions):
            part = region.data_size
            action(i, region, fraction_callback(_Offset(self._sink, offset), phase, part))
            offset += part
        return time.monotonic() - start

    def erase(self) -> None:
        """Erase what the image needs (one CRC pass first decides which sectors must be erased).

        :raises pyocd.core.exceptions.FlashFailure: and other pyOCD errors.
        """
        chip = [False]
        spans: List[Tuple[int, int]] = []  # (start, end) of the sectors about to be erased

        def one(i: int, region: RegionProgrammer, cb: Callable[[float], None]) -> None:
            # Chip erase once at most: the first region erases the chip, later ones use sectors.
            mode = self._erase_mode if (self._erase_mode != "chip" or i == 0) else "sector"
            chip[0] = region.erase(mode, cb, on_plan=spans.extend) or chip[0]

        # A sector erase that times out is named by the first planned sector still holding data.
        with _naming_stuck_sector(self._session, spans):
            self._each(Phase.ERASE, one)
        erased = [region.erased_sectors for region in self._regions]
        counts = [c for c in erased if c is not None]
        if chip[0]:
            summary = "chip erase"
        elif len(counts) < len(erased):
            summary = "sector erase"
        elif sum(n for n, _ in counts):
            summary = (
                f"{sum(n for n, _ in counts)} sector(s) erased ({sum(b for _, b in counts):,} B); "
                "the others blank or unchanged"
            )
        else:
            summary = "nothing to erase: the sectors are blank or unchanged"
        self._sink.phase_end(Phase.ERASE, summary)

    def program(self) -> ProgramStats:
        """Program the pages that differ; call after :meth:`erase`.

        :returns: :attr:`stats`, now complete.
        :raises pyocd.core.exceptions.FlashFailure: and other pyOCD errors.
        """

        def one(i: int, region: RegionProgrammer, cb: Callable[[float], None]) -> None:
            self.stats.add(region.program(cb))

        self._each(Phase.PROGRAM, one)
        self._sink.phase_end(
            Phase.PROGRAM, f"{self.stats.programmed_bytes:,} B written, {self.stats.skipped_bytes:,} B unchanged"
        )
        return self.stats

    def unchanged_proof(self) -> Optional[VerifyStats]:
        """When the erase and program wrote nothing at all, the plan's check is a complete verify:
        every image page was compared with the image, by on-target CRC32 or by reading it back,
        in this session, and nothing has written to the flash since. Returns that check as
        :class:`piflash.flashing.verify.VerifyStats`, or None when anything was written (then the flash
        must be verified again: a misdirected erase or write could have touched any page) or a
        region went to pyOCD's FlashBuilder. Call after :meth:`program`.
        """
        from piflash.flashing.verify import VerifyStats

        plans = [getattr(region, "unchanged_plan", None) for region in self._regions]
        proven = [plan for plan in plans if plan is not None]
        if not plans or len(proven) < len(plans):
            return None
        stats = VerifyStats(verified_bytes=self._total)
        for plan in proven:
            pages = plan.image_pages()
            stats.crc_pages += sum(1 for p in pages if p.evidence in ("crc", "blank"))
            stats.readback_bytes += sum(p.covered for p in pages if p.evidence == "read")
        return stats


def reset_target(session: Session, halt: bool = False, progress: Optional[ProgressSink] = None) -> None:
    """Reset the target with pyOCD's default reset type for it.

    :param halt: stop at the reset vector instead of running the firmware.
    :param progress: receives a ``"reset"`` phase (no byte count).
    :raises pyocd.core.exceptions.Error: the target did not come out of reset.
    """
    sink = progress or ProgressSink()
    sink.phase_start(Phase.RESET, 0)
    if halt:
        _soc(session).reset_and_halt()
    else:
        _soc(session).reset()
    sink.phase_end(Phase.RESET, "halted at the reset vector" if halt else "running")


def _check_erase_range(start: int, end: int, regions: Sequence[Tuple[int, int, str]]) -> None:
    if end <= start:
        raise ValueError(f"empty erase range {start:#010x}-{end:#010x} (end is exclusive)")
    addr = start
    while addr < end:
        region = next((r for r in regions if r[0] <= addr < r[1]), None)
        if region is None:
            listing = ", ".join(f"{n} {s:#010x}-{e - 1:#010x}" for s, e, n in regions)
            raise ImageRangeError(
                f"cannot erase at {addr:#010x}: not in flash (flash: {listing})",
                address=addr,
                hint="'piflash info' shows the flash regions",
            )
        addr = region[1]


def erase_flash(session: Session, mode: str = "chip", ranges: Sequence[Tuple[int, int]] = ()) -> int:
    """Erase the whole chip, or the sectors that cover ``ranges``, and prove it with a blank check.

    A flash controller that refuses an erase (write protection: the STM32F1 FPEC sets
    SR.WRPRTERR and erases nothing, RM0008 s3.3.5 / PM0075 s2.5; the nRF NVMC ignores it) does
    not always make pyOCD's flash algorithm fail, so every erased byte is checked afterwards
    (:func:`piflash.flashing.verify.blank_check`: on-target CRC32, read-back where there is no analyzer).

    :param mode: ``"chip"``, or ``"sector"`` with ``ranges``.
    :param ranges: (start, end_exclusive) address pairs in bytes, for sector mode.
    :returns: bytes erased (int): every flash region's size for chip erase, the sectors' sizes otherwise.
    :raises ValueError: unknown mode, sector mode without ranges, an empty range.
    :raises piflash.errors.ImageRangeError: a range outside flash.
    :raises piflash.errors.FlashError: the erase did not take: the first address that is not blank.
    :raises pyocd.core.exceptions.Error: from pyOCD.
    """
    from pyocd.flash.eraser import FlashEraser

    regions = flash_regions(_soc(session).memory_map)
    if mode == "chip":
        return sum(end - start for start, end in _chip_erase(session))
    if mode != "sector":
        raise ValueError(f"erase mode must be 'chip' or 'sector', not {mode!r}")
    if not ranges:
        raise ValueError("sector erase needs at least one address range")
    sectors = []
    for start, end in ranges:
        _check_erase_range(start, end, regions)
        addr = start
        while addr < end:
            region = _soc(session).memory_map.get_region_for_address(addr)
            assert region is not None, "_check_erase_range: in flash"
            sector = region.flash.get_sector_info(addr)
            if (sector.base_addr, sector.base_addr + sector.size) not in sectors:
                sectors.append((sector.base_addr, sector.base_addr + sector.size))
            addr = sector.base_addr + sector.size
    with _naming_stuck_sector(session, sectors):
        FlashEraser(session, FlashEraser.Mode.SECTOR).erase(list(ranges))
    _check_blank(session, "sector", sectors)
    return sum(end - start for start, end in sectors)


#: Flash algorithms whose ``EraseAll`` clears every flash region of the chip, keyed as
#: :data:`piflash.flashing.multipage.KNOWN_ALGORITHMS`: a chip erase runs it once, not once per region.
CHIP_WIDE_ERASE_ALL = {
    # pyOCD 0.46 nRF51822/nRF52840 algorithm: EraseAll starts NVMC ERASEALL, which erases "all
    # non-volatile memory including UICR registers" (register ERASEALL, NVMC chapter of the
    # nRF52840 PS v1.7 and the nRF51 RM v3.0).
    "43643eff0906aec4": "pyOCD nRF5x NVMC",
}


def _chip_erase(session: Session) -> List[Tuple[int, int]]:
    """Erase every flash region of the selected core, then prove it with the blank check.

    pyOCD's ``FlashEraser`` chip mode runs ``EraseAll`` once per region because it cannot know
    whether one region's chip erase clears the others (pyocd/flash/eraser.py). For the
    algorithms in :data:`CHIP_WIDE_ERASE_ALL` it does: their EraseAll runs once (on an nRF the
    UICR region's EraseAll was a second ERASEALL, 169 ms on the nRF52840). pyOCD's RP2
    algorithm has none: the flash's own Chip Erase clears the flash
    (:func:`piflash.targets.families.rp2_flash.erase_chip`), whose size, not pyOCD's 16 MiB window, is what is
    erased and checked. Any other algorithm's regions each get their own EraseAll, or sector
    erases where there is none, as in pyOCD.

    :returns: the (start, end exclusive) spans erased and checked blank.
    :raises piflash.errors.FlashError: a byte of any flash region is not blank afterwards.
    :raises pyocd.core.exceptions.Error: from pyOCD (an erase that fails or times out).
    """
    from pyocd.core.memory_map import MemoryType
    from pyocd.flash.eraser import FlashEraser

    from piflash.flashing.multipage import algorithm_digest
    from piflash.targets.families import flash_speedups  # not at import: ``piflash --help`` imports this module

    regions = [
        r
        for r in _soc(session).memory_map.iter_matching_regions(
            type=MemoryType.FLASH, pname=_soc(session).selected_core_or_raise.node_name
        )
        if r.flash is not None
    ]
    chip_wide_done: Set[Optional[str]] = set()
    spans = [(r.start, r.end + 1) for r in regions]
    for i, region in enumerate(regions):
        algo = getattr(region.flash, "flash_algo", None)
        digest = algorithm_digest(algo) if algo else None
        if digest in chip_wide_done:
            continue
        speedups = flash_speedups(region.flash)
        if speedups.erases_chip:
            region.flash.init(region.flash.Operation.ERASE)
            size = speedups.erase_chip(region.flash)
            region.flash.cleanup()
            spans[i] = (region.start, region.start + min(size, region.length))
        elif region.flash.is_erase_all_supported:
            region.flash.init(region.flash.Operation.ERASE)
            with _naming_stuck_chip_erase(session):
                region.flash.erase_all()
            region.flash.cleanup()
            if digest in CHIP_WIDE_ERASE_ALL:
                chip_wide_done.add(digest)
        else:
            FlashEraser(session, FlashEraser.Mode.SECTOR).erase([(region.start, region.end)])
    _check_blank(session, "chip", spans)
    return spans


def _check_blank(session: Session, mode: str, ranges: Sequence[Tuple[int, int]]) -> None:
    """Raise FlashError (exit 11) if any byte of ``ranges`` is not erased after a ``mode`` erase."""
    from piflash.flashing.verify import blank_check

    stats = blank_check(session, list(ranges))
    if not stats.dirty_bytes:
        return
    raise FlashError(
        f"{mode} erase did not take: {stats.dirty_bytes:,} byte(s) are not blank, first at {stats.first_dirty:#010x}",
        address=stats.first_dirty,
        hint="the flash controller refused or skipped the erase, as it does for write-protected "
        "flash (STM32: the WRP option bytes; nRF: the NVMC protection, BPROT/ACL); remove the "
        "protection and erase again. The same bytes staying programmed without protection "
        "means worn flash",
    )


@contextlib.contextmanager
def _naming_stuck_chip_erase(session: Session) -> Iterator[None]:
    """Turn pyOCD's "flash erase all timed out" into a FlashError (exit 11) that says how long
    piflash waited (``flash.timeout.erase_all``: ten times the datasheet's mass-erase time, see
    :func:`piflash.targets.catalog.erase_chip_timeout`) and what to do."""
    from pyocd.core.exceptions import FlashEraseFailure

    try:
        yield
    except FlashEraseFailure as exc:
        if "timed out" not in str(exc):
            raise
        seconds = session.options.get("flash.timeout.erase_all")
        raise FlashError(
            f"the chip erase timed out: the flash controller did not finish within {seconds:g} s",
            hint="the flash controller is stuck or locked (nRF: APPROTECT, use 'piflash protect recover'; "
            "STM32: the RDP option byte): power-cycle the board and try again",
        ) from exc


@contextlib.contextmanager
def _naming_stuck_sector(session: Session, spans: Sequence[Tuple[int, int]]) -> Iterator[None]:
    """Turn pyOCD's address-less "flash erase sector timed out" into a FlashError naming the sector.

    Sectors are erased in ascending order, so the one the controller got stuck on is the first
    sector of ``spans`` (byte ranges, end exclusive) that still holds data; it is found by
    reading back (the algorithm's core is halted, the debug port still reads flash).
    """
    from pyocd.core.exceptions import FlashEraseFailure

    try:
        yield
    except FlashEraseFailure as exc:
        if "timed out" not in str(exc) or getattr(exc, "address", None) is not None:
            raise
        seconds = session.options.get("flash.timeout.erase_sector")
        where = _first_dirty_sector(session, spans)
        at = f" at {where:#010x}" if where is not None else ""
        raise FlashError(
            f"erasing the sector{at} timed out: the flash controller did not finish within {seconds:g} s",
            address=where,
            hint="the sector is probably write-protected (nRF: NVMC BPROT/ACL, or APPROTECT; STM32: "
            "the WRP option bytes) or the controller is locked: remove the protection, "
            "power-cycle the board and try again",
        ) from exc


def _first_dirty_sector(session: Session, spans: Sequence[Tuple[int, int]]) -> Optional[int]:
    """Base address (int) of the first sector in ``spans`` that is not all 0xFF, or None."""
    memory_map = _soc(session).memory_map
    for start, end in sorted(spans):
        addr = start
        while addr < end:
            region = memory_map.get_region_for_address(addr)
            if region is None or not region.is_flash or region.flash is None:
                break
            sector = region.flash.get_sector_info(addr)
            try:
                data = bytes(_soc(session).read_memory_block8(sector.base_addr, sector.size))
            except Exception:  # noqa: BLE001  (a diagnosis only: the timeout is reported anyway)
                return None
            if data.count(0xFF) != len(data):
                base: int = sector.base_addr
                return base
            addr = sector.base_addr + sector.size
    return None
