"""The flashing workflow: connect, erase, program, read-back verify, reset.

Plain functions over a pyOCD session, usable without the CLI:

- :func:`program_image`, :func:`erase`, :func:`reset_target` work on an open session
  (from :func:`piflash.connect.open_session`), so a long-running process such as the
  station can reuse one imported pyOCD for many boards;
- :func:`flash_firmware`, :func:`verify_firmware`, :func:`erase_target` do the whole job
  from a unique ID and return a :class:`~piflash.result.OperationResult`.

Every failure is raised as a :class:`~piflash.errors.PiflashError` subclass; the
partial result is attached to it as ``exc.result``.
"""

from __future__ import annotations

import contextlib
import time
from typing import Iterator, List, Optional, Sequence, Tuple

from piflash.connect import open_session, read_target_uid, translate_error
from piflash.errors import ConnectError, FlashError, OperationInterrupted, PiflashError
from piflash.image import FirmwareImage, check_fits
from piflash.progress import ProgressSink, fraction_callback
from piflash.result import OperationResult, ProgramStats
from piflash.target import builtin_flash_regions, check_target, flash_regions
from piflash.verify import verify_image

#: Accepted values of the erase mode: pyOCD's ``chip_erase`` option (pyocd/core/options.py).
ERASE_MODES = ("auto", "sector", "chip")

#: What an interruption in each phase leaves on the board, for the message.
_STATE_AFTER_INTERRUPT = {
    "connect": "the board was not changed",
    "erase": "the flash is partly erased: flash again before using the board",
    "program": "the flash is partly programmed: flash again before using the board",
    "verify": "the flash was fully programmed but not verified: run 'piflash verify'",
    "reset": "the flash was programmed and verified; the target was not reset",
}


def _flash_builders(session, image: FirmwareImage) -> List[Tuple[object, object]]:
    """One (region, FlashBuilder) per flash region the image touches, with its data added."""
    memory_map = session.target.memory_map
    builders = {}
    for seg in image.segments:
        addr = seg.address
        while addr < seg.end:
            region = memory_map.get_region_for_address(addr)
            if region is None or not region.is_flash or region.flash is None:
                raise FlashError(f"no flash algorithm for address {addr:#010x}", address=addr)
            stop = min(seg.end, region.end + 1)
            if region.start not in builders:
                builder = region.flash.get_flash_builder()
                builder.log_performance = False
                builders[region.start] = (region, builder)
            builders[region.start][1].add_data(addr, seg.data[addr - seg.address: stop - seg.address])
            addr = stop
    return [builders[k] for k in sorted(builders)]


def program_image(session, image: FirmwareImage, erase: str = "auto", smart_flash: bool = True,
                  progress: Optional[ProgressSink] = None) -> ProgramStats:
    """Erase what the image needs and program it, skipping pages that already hold it.

    :param session: an open pyOCD ``Session``.
    :param erase: ``"auto"`` (pyOCD picks the faster), ``"sector"`` or ``"chip"``.
    :param smart_flash: compare before writing and skip identical pages (pyOCD's smart flash).
    :param progress: receives the ``"erase"`` then ``"program"`` phases, in image bytes.
    :returns: :class:`~piflash.result.ProgramStats` summed over the flash regions.
    :raises ValueError: for an unknown erase mode.
    :raises pyocd.core.exceptions.Error: from pyOCD (translate with ``translate_error``).
    """
    if erase not in ERASE_MODES:
        raise ValueError(f"erase mode must be one of {ERASE_MODES}, not {erase!r}")
    sink = progress or ProgressSink()
    builders = _flash_builders(session, image)
    stats = ProgramStats()
    total = image.size

    def run_phase(phase: str, action) -> float:
        start = time.monotonic()
        sink.phase_start(phase, total)
        offset = 0
        for i, (_, builder) in enumerate(builders):
            part = builder.buffered_data_size
            action(i, builder, fraction_callback(_Offset(sink, offset), phase, part))
            offset += part
        return time.monotonic() - start

    def do_erase(i, builder, cb):
        # Chip erase once at most: the first region erases the chip, later ones use sectors.
        mode = erase if (erase != "chip" or i == 0) else "sector"
        builder.erase(chip_erase=mode, progress_cb=cb, smart_flash=smart_flash, keep_unwritten=True)

    def do_program(i, builder, cb):
        info = builder.program(progress_cb=cb, smart_flash=smart_flash, keep_unwritten=True)
        stats.add(info)

    stats.erase_seconds = run_phase("erase", do_erase)
    sink.phase_end("erase", "chip erase" if any(b.last_erase_was_chip for _, b in builders)
                   else "sector erase")
    stats.program_seconds = run_phase("program", do_program)
    sink.phase_end("program", f"{stats.programmed_bytes:,} B written, {stats.skipped_bytes:,} B unchanged")
    return stats


class _Offset(ProgressSink):
    """Shifts a region's byte counts by the bytes of the regions before it."""

    def __init__(self, sink: ProgressSink, offset: int) -> None:
        self._sink, self._offset = sink, offset

    def phase_update(self, phase: str, done: int) -> None:
        self._sink.phase_update(phase, self._offset + done)


def reset_target(session, halt: bool = False, progress: Optional[ProgressSink] = None) -> None:
    """Reset the target (pyOCD's default reset type for it), optionally halting at the reset vector."""
    sink = progress or ProgressSink()
    sink.phase_start("reset", 0)
    if halt:
        session.target.reset_and_halt()
    else:
        session.target.reset()
    sink.phase_end("reset", "halted at the reset vector" if halt else "running")


def erase(session, mode: str = "chip", ranges: Sequence[Tuple[int, int]] = ()) -> int:
    """Erase the chip, or the sectors that cover ``ranges``.

    :param mode: ``"chip"`` or ``"sector"``.
    :param ranges: (start, end_exclusive) address pairs in bytes, for sector mode.
    :returns: bytes erased (int): the flash size for chip erase, the sectors' sizes otherwise.
    :raises piflash.errors.ImageRangeError: a range outside flash.
    :raises pyocd.core.exceptions.Error: from pyOCD.
    """
    from pyocd.flash.eraser import FlashEraser

    regions = flash_regions(session.target.memory_map)
    if mode == "chip":
        FlashEraser(session, FlashEraser.Mode.CHIP).erase()
        return sum(end - start for start, end, _ in regions)
    if mode != "sector" or not ranges:
        raise ValueError("sector erase needs at least one address range")
    from piflash.image import image_from_bytes  # reuse the range check on an empty stand-in

    erased = 0
    for start, end in ranges:
        check_fits(image_from_bytes(b"\xff" * (end - start), start), regions,
                   session.options.get("target_override") or "the target")
        region = session.target.memory_map.get_region_for_address(start)
        addr = region.flash.get_sector_info(start).base_addr
        while addr < end:
            size = region.flash.get_sector_info(addr).size
            erased += size
            addr += size
    FlashEraser(session, FlashEraser.Mode.SECTOR).erase(list(ranges))
    return erased


@contextlib.contextmanager
def _phase(result: OperationResult, sink: ProgressSink, name: str) -> Iterator[None]:
    """Time a phase into ``result.durations`` and turn its failures into PiflashErrors."""
    start = time.monotonic()
    result.phase = name
    try:
        yield
    except KeyboardInterrupt:
        raise OperationInterrupted(f"interrupted during {name}: {_STATE_AFTER_INTERRUPT.get(name, '')}",
                                   hint="run the same command again to finish the job") from None
    except PiflashError:
        raise
    except Exception as exc:
        raise translate_error(exc, name) from exc
    finally:
        result.durations[name] = round(time.monotonic() - start, 4)


def _prepare(image: Optional[FirmwareImage], target: Optional[str]) -> Optional[str]:
    """Validate the target type and, for a builtin target, the image's place before any probe is opened."""
    if not target:
        return None
    target = check_target(target)
    regions = builtin_flash_regions(target)
    if image is not None and regions is not None:
        check_fits(image, regions, target)
    return target


def _run(operation: str, image: Optional[FirmwareImage], probe: Optional[str], target: Optional[str],
         frequency: Optional[int], progress: Optional[ProgressSink], body,
         options: Optional[dict] = None) -> OperationResult:
    sink = progress or ProgressSink()
    result = OperationResult.start(operation, image, probe, target)
    try:
        target = _prepare(image, target)
        with _phase(result, sink, "connect"):
            sink.phase_start("connect", 0)
            with contextlib.ExitStack() as stack:
                session = stack.enter_context(open_session(probe, target, frequency, options))
                result.probe = session.probe.unique_id
                result.target = session.options.get("target_override") or session.target.part_number
                result.target_uid = read_target_uid(session)
                if image is not None:
                    check_fits(image, flash_regions(session.target.memory_map), result.target)
                sink.phase_end("connect", f"{result.target} on {result.probe}")
                body(session, result, sink)
        result.ok = True
    except PiflashError as exc:
        result.fail(exc)
        exc.result = result  # type: ignore[attr-defined]
        raise
    finally:
        result.finish()
    return result


def _verify_and_reset(session, result: OperationResult, sink: ProgressSink,
                      image: Optional[FirmwareImage], reset: bool) -> None:
    """The tail of flash and verify: verify ``image`` (if given), then reset or leave halted."""
    if image is not None:
        with _phase(result, sink, "verify"):
            result.verify = verify_image(session, image, sink)
    if reset:
        with _phase(result, sink, "reset"):
            reset_target(session, progress=sink)
            result.reset = True
    else:
        session.options["resume_on_disconnect"] = False


def flash_firmware(image: FirmwareImage, probe: Optional[str] = None, target: Optional[str] = None,
                   frequency: Optional[int] = None, erase: str = "auto", verify: bool = True,
                   reset: bool = True, progress: Optional[ProgressSink] = None,
                   options: Optional[dict] = None) -> OperationResult:
    """Flash ``image``: connect, erase, program, read-back verify, reset.

    :param image: from :func:`piflash.image.load_image`.
    :param probe: probe unique ID or part of one; None when exactly one probe is attached.
    :param target: pyOCD target type; None when the probe knows its board.
    :param frequency: SWD clock in Hz.
    :param erase: ``"auto"``, ``"sector"`` or ``"chip"``.
    :param verify: read back and compare every programmed byte (see :mod:`piflash.verify`).
    :param reset: reset the target afterwards so the new firmware runs; if False it stays halted.
    :param options: extra pyOCD session options (dict), e.g. ``{"flash.timeout.erase_sector": 2.0}``.
    :returns: the :class:`~piflash.result.OperationResult` (``ok`` True).
    :raises UnknownTargetError, ImageRangeError, NoProbeError, SeveralProbesError, ProbePermissionError,
        ConnectError, FlashError, VerifyError, ProbeLostError, OperationInterrupted:
    """
    if erase not in ERASE_MODES:
        raise ValueError(f"erase mode must be one of {ERASE_MODES}, not {erase!r}")

    def body(session, result, sink):
        with _phase(result, sink, "program"):
            result.program = program_image(session, image, erase, progress=sink)
        _verify_and_reset(session, result, sink, image if verify else None, reset)

    return _run("flash", image, probe, target, frequency, progress, body, options)


def verify_firmware(image: FirmwareImage, probe: Optional[str] = None, target: Optional[str] = None,
                    frequency: Optional[int] = None, progress: Optional[ProgressSink] = None,
                    reset: bool = True, options: Optional[dict] = None) -> OperationResult:
    """Compare the target's flash with ``image`` without writing (the ``verify`` phase of a flash).

    The on-target CRC32 runs code on the core, so the target is reset afterwards (``reset=True``)
    to leave it running its firmware; with ``reset=False`` it stays halted.

    :raises VerifyError: and the connect errors of :func:`flash_firmware`.
    """
    def body(session, result, sink):
        _verify_and_reset(session, result, sink, image, reset)

    return _run("verify", image, probe, target, frequency, progress, body, options)


def erase_target(probe: Optional[str] = None, target: Optional[str] = None, mode: str = "chip",
                 ranges: Sequence[Tuple[int, int]] = (), frequency: Optional[int] = None,
                 progress: Optional[ProgressSink] = None, options: Optional[dict] = None) -> OperationResult:
    """Erase the whole chip (``mode="chip"``) or the sectors covering ``ranges`` (bytes, end exclusive)."""
    def body(session, result, sink):
        with _phase(result, sink, "erase"):
            sink.phase_start("erase", 0)
            result.program.erased_bytes = erase(session, mode, ranges)
            sink.phase_end("erase", f"{result.program.erased_bytes:,} bytes erased")

    return _run("erase", None, probe, target, frequency, progress, body, options)


def reset_board(probe: Optional[str] = None, target: Optional[str] = None, halt: bool = False,
                frequency: Optional[int] = None, options: Optional[dict] = None) -> OperationResult:
    """Reset the target (and leave it halted at the reset vector if ``halt``)."""
    def body(session, result, sink):
        with _phase(result, sink, "reset"):
            reset_target(session, halt)
            result.reset = True
        if halt:
            session.options["resume_on_disconnect"] = False

    return _run("reset", None, probe, target, frequency, None, body, options)


__all__ = ["flash_firmware", "verify_firmware", "erase_target", "reset_board", "program_image",
           "erase", "reset_target", "ERASE_MODES", "ConnectError"]
