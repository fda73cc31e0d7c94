"""Flash a Pico in USB BOOTSEL mode, no debug probe: the same phases and result as over SWD.

:func:`flash_bootsel` runs connect, erase, program, verify and reset through the boot ROM's
PICOBOOT interface (:mod:`piflash.probe.picoboot`), and returns the
:class:`~piflash.record.result.OperationResult` the SWD path returns, with the probe ID
``picoboot:PORT-PATH`` and the flash's unique ID as ``target_uid`` (as over SWD:
:mod:`piflash.targets.families.rp2`).

The plan. The boot ROM erases by 4 KiB sectors and programs 256-byte pages (RP2040 datasheet
2.8.5.4.3-5) and has no checksum command, so piflash runs a helper of its own on the chip by
EXEC (targetcode/picoboot_ops.c, loaded into SRAM once per session): it sets the SPI clock to
clk_sys / 2, computes a CRC-32 per flash page (``binascii.crc32``'s), reads the flash's unique ID,
and erases through the ROM's ``flash_range_erase`` with 64 KiB block erases where whole blocks
go (FLASH_ERASE erases sector by sector). From the CRCs of the pages the image touches: a page
that already holds its bytes is left alone, a blank one is programmed without an erase, and a
sector with any other page is erased and programmed again with the bytes outside the image put
back (read first, so a partly covered sector loses nothing). A page the image covers only in
part is read to build its new contents. Pages that end up all 0xFF are not written. Consecutive
pages go in one WRITE of up to :data:`WRITE_CHUNK` bytes. The verify compares the chip's CRC of
every page written with the host's, and reads back a page that differs to name the first
address. The reset is PICOBOOT REBOOT into the flash: the device leaves the bus and the new
firmware starts.

An RP2350's ROM runs no code for the host (EXEC is refused there; RP2350 datasheet 5.6.4): the
same plan is made from CRCs computed here over a READ of the pages (64 KiB per command), the
erases are FLASH_ERASE's (by sectors: the ROM takes the 64 KiB path only for sizes the USB code
never passes), the verify reads back, the board's ID is the chip's OTP ID from GET_INFO, and the
reset is REBOOT2 type NORMAL. Its BOOTSEL serial number is that ID, so ``-u picoboot:SERIAL``
names one board.

Errors are piflash's: exit 3/4 for an image that is not for this chip or does not fit (before
anything is sent), 7/8/9 for finding the device, 11 for a command the ROM refuses (its status
named), 12 for a verify mismatch, 13 when the device leaves the bus, 23 when it stops answering,
24 when another program holds it.
"""

from __future__ import annotations

import binascii
import contextlib
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

from piflash.errors import (
    PicobootError,
    PiflashError,
    ProbeLostError,
    ProbeTimeoutError,
    VerifyError,
    WrongTargetError,
)
from piflash.firmware.image import FirmwareImage
from piflash.flashing.verify import VerifyStats
from piflash.jobs.options import FlashOptions
from piflash.jobs.transports import PICOBOOT, flash_needs, flash_transport, require
from piflash.jobs.workflow import _prepare, phase, tracking
from piflash.probe import picoboot
from piflash.probe.picoboot import PAGE, SECTOR
from piflash.progress import Phase, ProgressSink
from piflash.record.result import OperationResult

__all__ = [
    "flash_bootsel",
    "verify_bootsel",
    "reset_bootsel",
    "bootsel_session",
    "flash_bootsel_session",
    "bootsel_image",
    "plan_sectors",
    "SectorPlan",
    "WRITE_CHUNK",
    "reached_board",
    "wants_bootsel",
]

#: Bytes per WRITE command: large enough that the host's work per command (three USB transfers)
#: is small beside the data's, small enough for a progress update every ~0.2 s (64 KiB take
#: 0.18 s to cross full-speed USB and be programmed).
WRITE_CHUNK = 64 * 1024


#: CRC-32 of an erased page.
BLANK_CRC = binascii.crc32(b"\xff" * PAGE)


class SectorPlan:
    """What one 4 KiB sector needs.

    :ivar address: the sector's address (int). :ivar want: its 4096 bytes after the flash.
    :ivar erase: whether it must be erased first. :ivar pages: offsets (int) of the pages to write.
    :ivar image_pages: offsets (int) of the pages holding image bytes: those not in ``pages`` are
        the image's pages the chip already holds ("unchanged", as pyOCD's ``ProgrammingInfo``
        counts ``skipped_page_count`` and :meth:`piflash.flashing.plan.RegionPlan.stats` does).
    """

    def __init__(
        self, address: int, want: bytes, erase: bool, pages: List[int], image_pages: Optional[List[int]] = None
    ) -> None:
        self.address, self.want, self.erase, self.pages = address, want, erase, pages
        self.image_pages = list(pages) if image_pages is None else image_pages


def _sectors_of(image: FirmwareImage) -> Dict[int, List[Tuple[int, bytes]]]:
    """{sector address: [(offset in sector, bytes)]} of the image's data."""
    out: Dict[int, List[Tuple[int, bytes]]] = {}
    for seg in image.segments:
        addr, data = seg.address, bytes(seg.data)
        pos = 0
        while pos < len(data):
            sector = (addr + pos) & ~(SECTOR - 1)
            off = addr + pos - sector
            n = min(SECTOR - off, len(data) - pos)
            out.setdefault(sector, []).append((off, data[pos : pos + n]))
            pos += n
    return out


def plan_sectors(
    image: FirmwareImage, crcs, read, parts: Optional[Dict[int, List[Tuple[int, bytes]]]] = None
) -> Tuple[List[SectorPlan], int]:
    """The plan of every sector the image touches.

    :param crcs: ``crcs(addr, pages) -> [int]``: the chip's CRC-32 of each page (called once per
        run of consecutive sectors).
    :param read: ``read(addr, size) -> bytes``: flash bytes, for what the CRCs cannot tell (a
        page the image covers in part; the rest of a sector that must be erased).
    :param parts: the image cut into sectors, if the caller has it already.
    :returns: (the plans, the bytes read).
    """
    parts = parts if parts is not None else _sectors_of(image)
    plans: List[SectorPlan] = []
    read_bytes = 0
    per_sector = SECTOR // PAGE
    for start, count in _runs(sorted(parts), SECTOR):
        have_crcs = crcs(start, count * per_sector)
        for i in range(count):
            sector = start + i * SECTOR
            want = bytearray(b"\xff" * SECTOR)
            covered = bytearray(SECTOR)
            for off, data in parts[sector]:
                want[off : off + len(data)] = data
                covered[off : off + len(data)] = b"\x01" * len(data)
            have = have_crcs[i * per_sector : (i + 1) * per_sector]
            known: Dict[int, bytes] = {}  # page offset -> bytes read from the chip
            for p in range(per_sector):
                page = covered[p * PAGE : (p + 1) * PAGE]
                if any(page) and not all(page) and have[p] != BLANK_CRC:
                    known[p] = read(sector + p * PAGE, PAGE)
                    read_bytes += PAGE
                    for k in range(PAGE):
                        if not page[k]:
                            want[p * PAGE + k] = known[p][k]
            states = []
            for p in range(per_sector):
                page = covered[p * PAGE : (p + 1) * PAGE]
                new = bytes(want[p * PAGE : (p + 1) * PAGE])
                if not any(page):
                    states.append("outside")
                elif binascii.crc32(new) == have[p]:
                    states.append("same")
                elif have[p] == BLANK_CRC:
                    states.append("blank")
                else:
                    states.append("other")
            erase = "other" in states
            if erase:  # the pages outside the image come back after the erase
                for p, state in enumerate(states):
                    if state == "outside" and have[p] != BLANK_CRC:
                        got = known.get(p) or read(sector + p * PAGE, PAGE)
                        read_bytes += PAGE if p not in known else 0
                        want[p * PAGE : (p + 1) * PAGE] = got
            pages = [
                p * PAGE
                for p, state in enumerate(states)
                if (erase and bytes(want[p * PAGE : (p + 1) * PAGE]) != b"\xff" * PAGE)
                or (not erase and state == "blank" and bytes(want[p * PAGE : (p + 1) * PAGE]) != b"\xff" * PAGE)
            ]
            image_pages = [p * PAGE for p, state in enumerate(states) if state != "outside"]
            plans.append(SectorPlan(sector, bytes(want), erase, pages, image_pages))
    return plans, read_bytes


def _runs(addresses: List[int], unit: int) -> List[Tuple[int, int]]:
    """Sorted addresses -> [(first, how many)] of consecutive ``unit``-spaced runs."""
    runs: List[Tuple[int, int]] = []
    for a in addresses:
        if runs and runs[-1][0] + runs[-1][1] * unit == a:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1)
        else:
            runs.append((a, 1))
    return runs


def wants_bootsel(probe: Optional[str]) -> bool:
    """Whether a flash with probe ID ``probe`` goes over PICOBOOT: the ID names a BOOTSEL device
    (``picoboot[:...]``), or none is given, a Pico is in BOOTSEL mode and pyOCD sees no probe
    (:func:`piflash.jobs.transports.flash_transport` decides)."""
    return flash_transport(probe) is PICOBOOT


def _check_chip(device: picoboot.BootselDevice, target: Optional[str]) -> str:
    if target and target != device.chip:
        raise WrongTargetError(
            f"{device.probe_id} is an {device.chip.upper()} in BOOTSEL mode, not {target}",
            device.chip.upper(),
            device.chip,
            hint=f"use --target {device.chip}, or leave --target out",
        )
    return device.chip


@contextlib.contextmanager
def bootsel_session(
    probe: Optional[str],
    result: OperationResult,
    sink: ProgressSink,
    on_connected=None,
    target: Optional[str] = None,
    image: Optional[FirmwareImage] = None,
    reboot_running: bool = True,
) -> Iterator[picoboot.PicobootConnection]:
    """The connect phase over PICOBOOT, as a context: find the device (a running Pico rebooted into
    BOOTSEL when ``reboot_running``), open it, take exclusive access, make the flash commands ready
    (RP2040: leave XIP, load piflash's helper, speed the SPI clock up), read the board's unique ID
    (the RP2040's flash's, the RP2350's OTP chip ID); yields the open connection and
    closes it afterwards. Fills ``result``'s ``probe_id``, ``target``, ``target_uid`` and times
    the connect; checks ``image`` (if given) against the chip's flash.

    :param on_connected: ``on_connected(result)`` once the device was opened (also when the connect then
        fails: the board was reached).
    :raises NoProbeError, SeveralProbesError, ProbePermissionError, WrongTargetError, ImageRangeError,
        PicobootError, ProbeLostError, ProbeTimeoutError, ProbeBusyError:
    """
    touch = on_connected or (lambda r: None)
    device = picoboot.select_device(probe, reboot_running)
    result.probe_id = device.probe_id
    result.target = _check_chip(device, target)
    if image is not None:
        _prepare(image, result.target, None)
    conn = picoboot.PicobootConnection(device)
    with phase(result, sink, Phase.CONNECT):
        sink.phase_start(Phase.CONNECT, 0)
        with _touched_on_error(result, touch):
            conn.__enter__()
            try:
                conn.exclusive()
                conn.prepare()
                result.target_uid = conn.board_id().hex()
                if image is not None:
                    _check_reported(conn, image, result.target)
            except BaseException:
                conn.__exit__(None, None, None)
                raise
        touch(result)
        sink.phase_end(Phase.CONNECT, f"{result.target} on {result.probe_id}")
    try:
        yield conn
    finally:
        conn.__exit__(None, None, None)


def bootsel_image(result: OperationResult, image: FirmwareImage, plan, serial: Optional[int]) -> FirmwareImage:
    """``image`` with the board's serial / patch bytes (``plan``) laid over it, checked against
    the chip's flash; the values go into ``result.serial`` / ``result.patch`` (as
    :func:`piflash.jobs.workflow.patched_image` does over SWD).

    :raises SerialError, ImageRangeError:
    """
    patched, result.patch = plan.apply(image, serial, result.target_uid)
    result.serial = str(serial) if serial is not None else None
    _prepare(patched, result.target, None)
    return patched


def _check_reported(conn: picoboot.PicobootConnection, image: FirmwareImage, target: str) -> None:
    """Check ``image`` against the flash the board reports (an RP2040's JEDEC ID, through the
    helper): a QSPI flash ignores the address bits above its size, so a block past it would be
    written at the start of the flash, and read back from there as verified.

    :raises ImageRangeError: (exit 4) naming the first address outside and the flash's size.
    """
    from piflash.firmware.image import check_fits
    from piflash.targets.catalog import resolve_target
    from piflash.targets.families.rp2 import regions_of_size, size_of_jedec

    regions = resolve_target(target).flash_regions
    if regions is None:
        return
    jedec = conn.flash_jedec_id()
    size = size_of_jedec(jedec) if jedec is not None else None
    check_fits(image, regions_of_size(regions, size, jedec) if size and jedec else regions, target)


def flash_bootsel(
    image: FirmwareImage,
    probe: Optional[str] = None,
    target: Optional[str] = None,
    job: Optional[FlashOptions] = None,
    progress: Optional[ProgressSink] = None,
    on_connected=None,
) -> OperationResult:
    """Flash ``image`` into the Pico in BOOTSEL mode that ``probe`` names (see
    :func:`piflash.probe.picoboot.select_device`).

    :param image: from :func:`piflash.firmware.image.load_image` (a UF2's family was checked there).
    :param target: if given, must be the chip the device reports (``rp2040``, ``rp2350``).
    :param job: what the flash is asked to do (:class:`~piflash.jobs.options.FlashOptions`, default
        ``FlashOptions()``), the same options as through a debug probe: ``verify`` compares every
        page written; ``reset`` REBOOTs into the new firmware afterwards (the device leaves the
        bus; False leaves it in BOOTSEL mode); ``plan`` and ``serial`` lay the board's bytes over
        the image (its values in ``result.serial`` / ``result.patch``, as over SWD). ``erase``
        ``"auto"`` and ``"sector"`` are the same plan here and ``frequency`` is not used (no SWD
        clock); what PICOBOOT does not do (a chip erase, a lock, a boot check, pyOCD session
        options) is refused by :mod:`piflash.jobs.transports` before the device is opened.
    :param on_connected: ``on_connected(result)`` once the device is open and identified.
    :returns: the result (``ok`` True).
    :raises UnsupportedError: ``job`` asks what PICOBOOT does not do (exit 2).
    :raises NoProbeError, SeveralProbesError, ProbePermissionError, WrongTargetError, ImageRangeError,
        PicobootError, VerifyError, ProbeLostError, ProbeTimeoutError, ProbeBusyError, OperationInterrupted,
        SerialError:
    """
    job = job or FlashOptions()
    require(PICOBOOT, flash_needs(job))
    sink = progress or ProgressSink()
    result = OperationResult.start("flash", image, probe, target)
    with tracking(result):
        with bootsel_session(probe, result, sink, on_connected, target, image) as conn:
            board_image = bootsel_image(result, image, job.plan, job.serial) if job.plan is not None else image
            flash_bootsel_session(conn, board_image, result, sink, job)
    return result


def verify_bootsel(
    image: FirmwareImage,
    probe: Optional[str] = None,
    target: Optional[str] = None,
    reset: bool = False,
    progress: Optional[ProgressSink] = None,
    on_connected=None,
) -> OperationResult:
    """Compare the flash of the Pico in BOOTSEL mode that ``probe`` names with ``image``, nothing
    written: the chip's CRC of each page the image covers whole against the host's, a read of
    each page it covers in part; then REBOOT into the flash when ``reset``.

    :returns: the result (``ok`` True, ``verify`` filled).
    :raises VerifyError: the first differing address (exit 12); and what :func:`bootsel_session`
        raises.
    """
    sink = progress or ProgressSink()
    result = OperationResult.start("verify", image, probe, target)
    with tracking(result):
        with bootsel_session(probe, result, sink, on_connected, target, image) as conn:
            with phase(result, sink, Phase.VERIFY):
                sink.phase_start(Phase.VERIFY, image.size)
                result.verify = _compare(conn, image, sink)
                sink.phase_end(
                    Phase.VERIFY,
                    f"all match: {result.verify.crc_pages} pages by CRC32, "
                    f"{result.verify.readback_bytes:,} B read back",
                )
            if reset:
                _reboot(conn, result, sink)
    return result


def reset_bootsel(probe: Optional[str] = None, on_connected=None) -> OperationResult:
    """REBOOT the Pico in BOOTSEL mode that ``probe`` names into its flash (it leaves the bus).

    :raises: what :func:`bootsel_session` raises.
    """
    sink = ProgressSink()
    result = OperationResult.start("reset", None, probe, None)
    with tracking(result):
        with bootsel_session(probe, result, sink, on_connected) as conn:
            _reboot(conn, result, sink)
    return result


#: Bytes erased per PICOBOOT command by :func:`erase_bootsel` (one progress step): a 64 KiB block,
#: the largest erase the flash has below a chip erase (W25Q16JV datasheet 8.2.33, D8h).
ERASE_STEP = 0x10000


def erase_bootsel(
    probe: Optional[str] = None,
    target: Optional[str] = None,
    mode: str = "chip",
    ranges: Sequence[Tuple[int, int]] = (),
    progress: Optional[ProgressSink] = None,
    on_connected=None,
) -> OperationResult:
    """Erase a Pico in BOOTSEL mode (``-u picoboot``): its whole flash (``mode`` ``"chip"``: the
    size its JEDEC ID gives, as :func:`piflash.jobs.readback.read_bootsel` reads it; the boot ROM
    has no chip erase command, so it is erased in :data:`ERASE_STEP` pieces, with progress) or
    the 4 KiB sectors covering ``ranges`` (``"sector"``); each piece read back and checked blank,
    as an erase over SWD is (a READ: faster than the RP2040 helper's CRC of pages that are
    compared with 0xFF anyway, and the same on an RP2350, which runs no helper).

    :param ranges: (start, end exclusive) flash addresses in bytes, for ``"sector"``.
    :returns: the :class:`OperationResult` (``program.erase_mode``, ``program.erased_bytes``).
    :raises ValueError: an unknown ``mode``, a sector erase without ranges, an empty range.
    :raises ImageRangeError: (exit 4) a range outside the flash.
    :raises FlashError: (exit 11) a page is not blank afterwards (the first address named).
    :raises: what :func:`bootsel_session` raises.
    """
    from piflash.errors import FlashError
    from piflash.flashing.program import _check_erase_range

    if mode not in ("chip", "sector") or (mode == "sector") != bool(ranges):
        raise ValueError("erase needs mode 'chip' without ranges, or 'sector' with ranges")
    sink = progress or ProgressSink()
    result = OperationResult.start("erase", None, probe, target)
    with tracking(result):
        with bootsel_session(probe, result, sink, on_connected, target) as conn:
            regions = _boot_flash(conn, result.target)
            if mode == "chip":
                spans = [(regions[0][0], regions[0][1])]
            else:
                for start, end in ranges:
                    _check_erase_range(start, end, regions)
                spans = _merged([(a // SECTOR * SECTOR, -(-b // SECTOR) * SECTOR) for a, b in ranges])
            total = sum(end - start for start, end in spans)
            with phase(result, sink, Phase.ERASE):
                sink.phase_start(Phase.ERASE, total)
                result.program.erase_mode = mode
                done = 0
                for start, end in spans:
                    at = start
                    while at < end:
                        step = min(ERASE_STEP, end - at)
                        conn.erase_range(at, step)
                        back = conn.read(at, step)
                        if back.count(0xFF) != step:
                            bad = at + next(i for i, byte in enumerate(back) if byte != 0xFF)
                            raise FlashError(
                                f"{mode} erase did not take: the byte at {bad:#010x} is not blank",
                                address=bad,
                                hint="power-cycle the board into BOOTSEL mode and erase again; the same "
                                "bytes staying programmed means worn flash",
                            )
                        at += step
                        done += step
                        result.program.erased_bytes = done
                        sink.phase_update(Phase.ERASE, done)
                sink.phase_end(Phase.ERASE, f"{total:,} bytes erased")
    return result


def _boot_flash(
    conn: picoboot.PicobootConnection, target: Optional[str], named: bool = True
) -> List[Tuple[int, int, str]]:
    """The boot flash of the chip behind ``conn`` as one (start, end exclusive, name) region: the
    ``xip`` region of ``target``'s static map cut to the size the flash's JEDEC ID gives
    (:func:`piflash.targets.families.rp2.regions_of_size`; named with that ID when ``named``),
    or the whole window when the ID gives none."""
    from piflash.targets.catalog import resolve_target
    from piflash.targets.families.rp2 import regions_of_size, size_of_jedec

    regions = list(resolve_target(target).flash_regions or []) if target else []
    jedec = conn.flash_jedec_id()
    size = size_of_jedec(jedec) if jedec is not None else None
    if size and jedec:
        cut = regions_of_size(regions, size, jedec)
        regions = cut if named else [(a, b, name) for (a, b, _), (_, _, name) in zip(cut, regions)]
    return regions[:1]


def bootsel_info(probe: Optional[str] = None, target: Optional[str] = None) -> Dict[str, object]:
    """What the boot ROM of a Pico in BOOTSEL mode (``-u picoboot``) reports, as ``piflash info``
    shows it over SWD (docs/result.schema.json ``info``): the chip (its USB product ID), the
    board's unique ID (RP2040: the flash's 64-bit unique ID, the 4Bh instruction as pico-sdk's
    ``flash_get_unique_id`` sends it; RP2350: the chip's OTP ID), the probe, and the boot flash
    cut to the size its JEDEC ID gives (4 KiB sectors, 256-byte pages: RP2040 datasheet 2.8.5.4).

    :returns: dict ``target``, ``target_uid`` (lower-case hex), ``probe_id``, ``probe_description``,
        ``regions`` (one flash region: ``name``, ``type``, ``start``, ``end`` inclusive, ``size``,
        ``sector_size``, ``page_size``).
    :raises: what :func:`bootsel_session` raises.
    """
    result = OperationResult.start("info", None, probe, target)
    with bootsel_session(probe, result, ProgressSink(), None, target, reboot_running=False) as conn:
        regions = _boot_flash(conn, result.target, named=False)
        description = f"{conn.info.chip.upper()} in BOOTSEL mode (PICOBOOT), boot ROM serial {conn.info.serial}"
    return {
        "target": result.target,
        "target_uid": result.target_uid,
        "probe_id": result.probe_id,
        "probe_description": description,
        "regions": [
            {
                "name": name,
                "type": "flash",
                "start": start,
                "end": end - 1,
                "size": end - start,
                "sector_size": SECTOR,
                "page_size": PAGE,
            }
            for start, end, name in regions
        ],
    }


def _merged(spans: List[Tuple[int, int]]) -> List[Tuple[int, int]]:
    """``spans`` ((start, end exclusive) pairs) sorted, overlapping or touching ones merged."""
    out: List[Tuple[int, int]] = []
    for start, end in sorted(spans):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def _compare(conn: picoboot.PicobootConnection, image: FirmwareImage, sink: ProgressSink) -> VerifyStats:
    stats = VerifyStats()
    pages: Dict[int, bytearray] = {}
    covered: Dict[int, bytearray] = {}
    for seg in image.segments:
        data = bytes(seg.data)
        for i, byte in enumerate(data):
            addr = seg.address + i
            page = addr & ~(PAGE - 1)
            if page not in pages:
                pages[page], covered[page] = bytearray(b"\xff" * PAGE), bytearray(PAGE)
            pages[page][addr - page], covered[page][addr - page] = byte, 1
    whole = {a: bytes(p) for a, p in pages.items() if all(covered[a])}
    done = 0
    for addr, want in _page_runs(whole, limit=None):
        for k, crc in enumerate(conn.page_crcs(addr, len(want) // PAGE)):
            if crc != binascii.crc32(want[k * PAGE : (k + 1) * PAGE]):
                back = conn.read(addr + k * PAGE, PAGE)
                stats.readback_bytes += PAGE
                _mismatch(stats, addr + k * PAGE, back, want[k * PAGE : (k + 1) * PAGE], bytes(PAGE * [1]))
        stats.crc_pages += len(want) // PAGE
        done += len(want)
        sink.phase_update(Phase.VERIFY, min(done, image.size))
    for addr in sorted(set(pages) - set(whole)):
        back = conn.read(addr, PAGE)
        stats.readback_bytes += PAGE
        _mismatch(stats, addr, back, bytes(pages[addr]), bytes(covered[addr]))
    stats.verified_bytes = image.size
    return stats


def _mismatch(stats: VerifyStats, addr: int, got: bytes, want: bytes, mask: bytes) -> None:
    diffs = [i for i in range(PAGE) if mask[i] and got[i] != want[i]]
    if diffs:
        stats.mismatched_bytes, stats.first_mismatch = len(diffs), addr + diffs[0]
        raise VerifyError(
            f"verify failed: {len(diffs)} bytes of the page at {addr:#010x} differ, the first at "
            f"{addr + diffs[0]:#010x}",
            addr + diffs[0],
            len(diffs),
            hint="flash the board again (piflash flash -u picoboot)",
        )


class _touched_on_error:
    """Call ``touch(result)`` when the connect fails after the device was opened."""

    def __init__(self, result, touch) -> None:
        self.result, self.touch = result, touch

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None and isinstance(exc, PiflashError) and reached_board(exc):
            self.touch(self.result)


def reached_board(exc: PiflashError) -> bool:
    """Whether a failure of the connect came after the device was open (the history records it)."""
    return isinstance(exc, (ProbeLostError, ProbeTimeoutError, PicobootError))


def flash_bootsel_session(
    conn: picoboot.PicobootConnection,
    image: FirmwareImage,
    result: OperationResult,
    sink: ProgressSink,
    job: Optional[FlashOptions] = None,
) -> None:
    """The erase, program, verify and reset phases of :func:`flash_bootsel` on an open
    connection (:func:`bootsel_session`), each timed into ``result``; ``result.program`` and
    ``result.verify`` are filled. The caller wraps it in :func:`piflash.jobs.workflow.tracking`.

    :param job: the :class:`~piflash.jobs.options.FlashOptions` (its ``verify`` and ``reset``:
        the image is already patched; the caller checked the rest with
        :func:`piflash.jobs.transports.require`); default ``FlashOptions()``.

    :raises ImageRangeError: ``image`` (patched or not) reaches past the flash the board reports.
    :raises PicobootError, VerifyError, ProbeLostError, ProbeTimeoutError, OperationInterrupted:
    """
    job = job or FlashOptions()
    verify, reset = job.verify, job.reset
    if result.target:
        _check_reported(conn, image, result.target)
    stats = result.program  # erase_mode stays None unless a sector is erased
    with phase(result, sink, Phase.ERASE):
        parts = _sectors_of(image)
        sink.phase_start(Phase.ERASE, len(parts) * SECTOR)
        checked = [0]

        def crcs(addr: int, pages: int) -> List[int]:
            got = conn.page_crcs(addr, pages)
            checked[0] += pages * PAGE
            sink.phase_update(Phase.ERASE, checked[0])
            return got

        plans, _ = plan_sectors(image, crcs, conn.read, parts)
        for start, count in _runs([p.address for p in plans if p.erase], SECTOR):
            stats.erase_mode = "sector"
            conn.erase_range(start, count * SECTOR)
            stats.erased_bytes += count * SECTOR
        # The phase's bytes are the sectors the image touches, each checked by CRC32: say so, and
        # how many of them were erased, as the SWD path does (piflash.flashing.program).
        erased, checked_text = stats.erased_bytes, f"{len(plans)} sector(s) ({len(plans) * SECTOR:,} B) checked"
        sink.phase_end(
            Phase.ERASE,
            f"{checked_text}, {erased // SECTOR} erased ({erased:,} B)"
            if erased
            else f"{checked_text}, nothing to erase: blank or unchanged",
        )
    pages = {p.address + off: p.want[off : off + PAGE] for p in plans for off in p.pages}
    stats.programmed_pages = len(pages)
    stats.programmed_bytes = len(pages) * PAGE
    # unchanged: the image's pages the chip already held (not the blank rest of its sectors)
    stats.skipped_pages = sum(len(set(p.image_pages) - set(p.pages)) for p in plans)
    stats.skipped_bytes = stats.skipped_pages * PAGE
    with phase(result, sink, Phase.PROGRAM):
        sink.phase_start(Phase.PROGRAM, stats.programmed_bytes)
        written = 0
        for addr, data in _page_runs(pages):
            conn.write(addr, data)
            written += len(data)
            sink.phase_update(Phase.PROGRAM, written)
        sink.phase_end(Phase.PROGRAM, f"{stats.programmed_bytes:,} B written, {stats.skipped_bytes:,} B unchanged")
    if verify:
        with phase(result, sink, Phase.VERIFY):
            sink.phase_start(Phase.VERIFY, stats.programmed_bytes)
            result.verify = _verify(conn, image, pages, plans, sink)
            v = result.verify
            sink.phase_end(
                Phase.VERIFY,
                f"all match: {v.crc_pages} pages by CRC32"
                + (f", {v.readback_bytes:,} B read back" if v.readback_bytes else ""),
            )
    if reset:
        _reboot(conn, result, sink)


def _reboot(conn: picoboot.PicobootConnection, result: OperationResult, sink: ProgressSink) -> None:
    """The reset phase over PICOBOOT: REBOOT into the flash (the device then leaves the bus)."""
    with phase(result, sink, Phase.RESET):
        sink.phase_start(Phase.RESET, 0)
        conn.reboot()
        result.reset = True
        sink.phase_end(Phase.RESET, "rebooted into the flash")


def _page_runs(pages: Dict[int, bytes], limit: Optional[int] = WRITE_CHUNK):
    """{address: 256 bytes} -> [(address, bytes)] of consecutive pages, at most ``limit`` bytes
    each (None: no limit)."""
    out: List[Tuple[int, bytes]] = []
    for addr in sorted(pages):
        if out and out[-1][0] + len(out[-1][1]) == addr and (limit is None or len(out[-1][1]) < limit):
            out[-1] = (out[-1][0], out[-1][1] + pages[addr])
        else:
            out.append((addr, pages[addr]))
    return out


def _verify(
    conn: picoboot.PicobootConnection,
    image: FirmwareImage,
    pages: Dict[int, bytes],
    plans: List[SectorPlan],
    sink: ProgressSink,
) -> VerifyStats:
    """Every page written, by the chip's CRC against the host's (a page that differs is read
    back to name its first differing byte); the pages left alone were proven by the plan's CRCs."""
    stats = VerifyStats(verified_bytes=image.size)
    done = 0
    for addr, want in _page_runs(pages, limit=None):
        n = len(want) // PAGE
        got = conn.page_crcs(addr, n)
        stats.crc_pages += n
        for k, crc in enumerate(got):
            page = want[k * PAGE : (k + 1) * PAGE]
            if crc != binascii.crc32(page):
                back = conn.read(addr + k * PAGE, PAGE)
                stats.readback_bytes += PAGE
                diffs = [i for i, (a, b) in enumerate(zip(back, page)) if a != b] or [0]
                first = addr + k * PAGE + diffs[0]
                stats.mismatched_bytes, stats.first_mismatch = len(diffs), first
                raise VerifyError(
                    f"verify failed: {len(diffs)} bytes of the page at {addr + k * PAGE:#010x} "
                    f"differ, the first at {first:#010x}",
                    first,
                    len(diffs),
                    hint="flash again; if it repeats, the board's flash may be worn or faulty",
                )
        done += len(want)
        sink.phase_update(Phase.VERIFY, done)
    return stats
