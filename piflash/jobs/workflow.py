"""The flashing workflow: connect, erase, program, read-back verify, reset.

Plain functions over a pyOCD session, usable without the CLI:

- :func:`flash_firmware`, :func:`verify_firmware`, :func:`erase_target`, :func:`reset_board`
  do a whole job from a probe unique ID and return a :class:`~piflash.record.result.OperationResult`,
  timing each phase (connect, erase, program, verify, reset);
- :func:`flash_session`, :func:`verify_session`, :func:`describe_session`, :func:`phase` and
  :func:`tracking` are the same jobs on a session the caller opened: the one code path that
  both the one-shot functions above and long-running callers such as the station
  (:mod:`piflash.station`) use, one imported pyOCD serving many boards. The pieces below them
  live in :mod:`piflash.flashing.program` and :mod:`piflash.flashing.verify`.

Every failure is raised as a :class:`~piflash.errors.PiflashError` subclass; the
partial result is set as its ``result`` (declared on :class:`~piflash.errors.PiflashError`).

The one-shot functions take ``on_connected``, a callable ``on_connected(result)`` called once when the
operation first reaches the board: the probe is open and the connect to the target either
succeeded (the board identified, nothing written yet) or failed after it began talking to the
target. It is not called for refusals that never reach the board (bad firmware or target type,
an image that does not fit, no probe, several probes, no permission). The CLI opens the board's
history row there (:mod:`piflash.record.history`).
"""

from __future__ import annotations

import contextlib
import time
from typing import Callable, Iterator, Optional, Sequence, Tuple, Union

from piflash.errors import (
    BootCheckError,
    ConnectError,
    ExitCode,
    NoProbeError,
    OperationInterrupted,
    PiflashError,
    ProbePermissionError,
    ProbeTimeoutError,
    ProtectedError,
    ProtectError,
    SeveralProbesError,
)
from piflash.firmware.image import FirmwareImage, check_fits
from piflash.flashing.program import (
    ERASE_MODES,
    ImageProgrammer,
    erase_flash,
    reset_target,
)
from piflash.flashing.verify import verify_image
from piflash.jobs.options import FlashOptions
from piflash.probe.pyocd_errors import translate_error
from piflash.production.bootcheck import arm_boot_check, run_boot_check
from piflash.production.serials import checkpoint
from piflash.progress import Phase, ProgressSink
from piflash.record.result import OperationResult
from piflash.targets.catalog import flash_regions, resolve_target
from piflash.targets.connect import check_session_options, open_session, read_target_uid

#: The post-verify lock's phase name (not a progress.Phase: it has no progress and no duration
#: column of its own in the history).
LOCK_PHASE = "lock"

#: The boot check's phase name (like the lock, not a progress.Phase: its seconds are in the
#: result's ``boot_check`` object and the history's ``boot_check`` column).
BOOT_CHECK_PHASE = "boot_check"

#: What an interruption in each phase leaves on the board, for the message.
_STATE_AFTER_INTERRUPT = {
    Phase.CONNECT: "the board was not changed",
    Phase.ERASE: "the flash is partly erased: flash again before using the board",
    Phase.PROGRAM: "the flash is partly programmed: flash again before using the board",
    Phase.VERIFY: "the flash was fully programmed but not verified: run 'piflash verify'",
    Phase.RESET: "the flash was programmed and verified; the target was not reset",
    LOCK_PHASE: "the flash was programmed and verified; read-out protection may or may not be set: "
    "run 'piflash protect status'",
    BOOT_CHECK_PHASE: "the flash was programmed and verified and the board reset; its boot check did not finish",
}


@contextlib.contextmanager
def phase(result: OperationResult, sink: ProgressSink, name: Union[Phase, str]) -> Iterator[None]:
    """Time phase ``name`` into ``result.durations`` (seconds) and set ``result.phase``.

    :raises OperationInterrupted: on KeyboardInterrupt inside the phase, saying what state the
        board is left in.
    :raises PiflashError: any other failure, pyOCD's translated by
        :func:`piflash.probe.pyocd_errors.translate_error`.
    """
    start = time.monotonic()
    result.phase = name
    try:
        yield
    except KeyboardInterrupt:
        raise OperationInterrupted(
            f"interrupted during {name}: {_STATE_AFTER_INTERRUPT.get(name, '')}",
            hint="run the same command again to finish the job",
        ) from None
    except PiflashError:
        raise
    except Exception as exc:
        raise translate_error(exc, name) from exc
    finally:
        result.durations[name] = round(time.monotonic() - start, 4)


def _prepare(image: Optional[FirmwareImage], target: Optional[str], options: Optional[dict]) -> Optional[str]:
    """Validate the target type (builtin, or a part of the packs in ``options["pack"]``) and,
    where its memory map is known without connecting, the image's place, before any probe is opened."""
    if not target:
        return None
    checked = resolve_target(target, (options or {}).get("pack"))
    if image is not None and checked.flash_regions is not None:
        check_fits(image, checked.flash_regions, checked.name)
    return checked.name


@contextlib.contextmanager
def tracking(result: OperationResult) -> Iterator[OperationResult]:
    """Run one operation's phases: on success ``result.ok`` becomes True; a PiflashError is
    recorded in ``result.error``, attached to the exception as ``exc.result`` and re-raised;
    either way the total duration is stamped."""
    try:
        yield result
        result.ok = True
    except PiflashError as exc:
        result.fail(exc)
        exc.result = result  # declared on PiflashError (None until a job fails)
        raise
    finally:
        result.finish()


def describe_session(session, result: OperationResult, image: Optional[FirmwareImage] = None) -> None:
    """Fill ``result``'s probe, target type and target unique ID from an open session, and check
    that ``image`` (if given) fits the connected target's flash.

    :raises ImageRangeError: part of the image is outside the target's flash regions.
    """
    result.probe_id = session.probe.unique_id
    from piflash.targets.corrected import user_name

    result.target = user_name(session.options.get("target_override") or session.target.part_number)
    result.target_uid = read_target_uid(session, intrusive=True)  # the board is reprogrammed or checked next
    if image is not None:
        from piflash.targets.families.rp2 import reported_flash_regions

        # The memory map's regions, cut to the size the flash reports where it was read (an
        # RP2040's JEDEC ID, read with its unique ID): nothing is erased past the real flash.
        check_fits(
            image, reported_flash_regions(session.target, flash_regions(session.target.memory_map)), result.target
        )


#: Type of the ``on_connected`` hook: called with the running result when the board is first reached.
ConnectedHook = Optional[Callable[[OperationResult], None]]


def _reached_board(exc: BaseException) -> bool:
    """Whether a failure of :func:`~piflash.targets.connect.open_session` came after the probe was opened
    and the connect began talking to the target (not a refusal before it)."""
    if isinstance(exc, (NoProbeError, SeveralProbesError, ProbePermissionError)):
        return False
    if isinstance(exc, ProbeTimeoutError) and exc.reached_target is False:
        return False  # a probe server silent before any SWD transfer
    return not (isinstance(exc, PiflashError) and exc.exit_code == ExitCode.USAGE)


def _run(
    operation: str,
    image: Optional[FirmwareImage],
    probe: Optional[str],
    target: Optional[str],
    frequency: Optional[int],
    progress: Optional[ProgressSink],
    body,
    options: Optional[dict] = None,
    on_connected: ConnectedHook = None,
) -> OperationResult:
    sink = progress or ProgressSink()
    result = OperationResult.start(operation, image, probe, target)
    touch = on_connected or (lambda r: None)
    with tracking(result):
        check_session_options(options or {})  # first: _prepare reads the 'pack' option
        target = _prepare(image, target, options)
        with contextlib.ExitStack() as stack:  # the session outlives the connect phase
            try:
                with phase(result, sink, Phase.CONNECT):
                    sink.phase_start(Phase.CONNECT, 0)
                    try:
                        session = stack.enter_context(open_session(probe, target, frequency, options))
                    except BaseException as exc:
                        if _reached_board(exc):
                            touch(result)
                        raise
                    describe_session(session, result, image)
                    touch(result)
                    sink.phase_end(Phase.CONNECT, f"{result.target} on {result.probe_id}")
            except ConnectError:
                _explain_connect_error(probe, target, frequency, result)
                raise
            body(session, result, sink)
    return result


def _explain_connect_error(probe, target, frequency, result: OperationResult) -> None:
    """Say why the connect failed when the chip's ID registers tell it: a chip other than the one
    named (exit 10, naming it) or a locked nRF52, which does not let pyOCD initialise it (exit 20),
    with or without ``--target`` (see :func:`piflash.production.protect.explain_connect_error`)."""
    from piflash.production.protect import explain_connect_error

    err = explain_connect_error(probe, target, frequency)
    if isinstance(err, ProtectedError):
        result.protection = "locked"
    if err is not None:
        raise err


def check_protection(session, result: OperationResult) -> None:
    """Before touching flash: prove the chip is the one named (:mod:`piflash.targets.identify`), then read
    its read-out protection into ``result.protection``.

    :raises WrongTargetError: the chip is another one (exit code 10, naming it).
    :raises ProtectedError: the chip is locked (exit code 20, with a 'recover' hint).
    """
    from piflash.production.protect import check_open

    try:  # a few register reads: not a phase of its own (no duration column)
        status = check_open(session, result.target or "")
    except PiflashError:
        raise
    except KeyboardInterrupt:
        raise OperationInterrupted(
            "interrupted while reading the protection state: the board was not changed",
            hint="run the same command again",
        ) from None
    except Exception as exc:
        raise translate_error(exc, "protection check") from exc
    result.protection = status.state if status is not None else None


def patched_image(session, result: OperationResult, image: FirmwareImage, plan, serial: Optional[int]) -> FirmwareImage:
    """``image`` with this board's serial / patch bytes (``plan``: a :class:`piflash.firmware.patch.PatchPlan`)
    laid over it, checked against the connected target's flash map; the values go into
    ``result.serial`` / ``result.patch``.

    :raises SerialError: a value the encoding cannot hold. :raises ImageRangeError: a patch
        outside the target's flash.
    """
    patched, values = plan.apply(image, serial, result.target_uid)
    result.serial = str(serial) if serial is not None else None
    if serial is None and plan.serial_from_list:  # a printed serial string from the list
        result.serial = values["serial"]["value"]
    result.patch = values
    check_fits(patched, flash_regions(session.target.memory_map), result.target or "the target")
    return patched


def _verify_and_reset(
    session,
    result: OperationResult,
    sink: ProgressSink,
    image: Optional[FirmwareImage],
    reset: bool,
    quick: bool = False,
    proof=None,
    boot_check=None,
) -> None:
    """The tail of flash and verify: verify ``image`` (if given), then reset or leave halted, then
    the boot check (``boot_check``, a :class:`piflash.production.bootcheck.BootCheck`; needs
    ``reset``). ``proof`` (VerifyStats) is the flash's own complete check when it wrote nothing
    (:meth:`~piflash.flashing.program.ImageProgrammer.unchanged_proof`): it stands as the verify."""
    if boot_check is not None and not reset:
        raise ValueError("a boot check needs the reset that starts the firmware")
    if image is not None:
        with phase(result, sink, Phase.VERIFY):
            if proof is not None:
                sink.phase_start(Phase.VERIFY, proof.verified_bytes)
                sink.phase_update(Phase.VERIFY, proof.verified_bytes)
                sink.phase_end(
                    Phase.VERIFY,
                    f"all match: nothing written, {proof.crc_pages} pages by CRC32 "
                    f"and {proof.readback_bytes:,} B read back before programming",
                )
                result.verify = proof
            else:
                result.verify = verify_image(session, image, sink, quick=quick)
    catch_before = None
    if reset:
        with phase(result, sink, Phase.RESET):
            if boot_check is not None:  # set before the reset: a fault at the first instruction counts
                catch_before = arm_boot_check(session, boot_check, _path(image))
            reset_target(session, progress=sink)
            result.reset = True
    else:
        session.options["resume_on_disconnect"] = False
    if boot_check is not None:
        _boot_check(session, result, sink, boot_check, image, catch_before)


def _path(image: Optional[FirmwareImage]) -> Optional[str]:
    return str(image.path) if image is not None and image.path else None


def _boot_check(session, result: OperationResult, sink: ProgressSink, check, image, catch_before) -> None:
    """Run ``check`` (a :class:`piflash.production.bootcheck.BootCheck`) on the reset board; its
    :class:`~piflash.production.bootcheck.BootResult` goes into ``result.boot_check`` pass or fail."""
    firmware_path = _path(image)
    outcome = None
    try:
        with phase(result, sink, BOOT_CHECK_PHASE):
            outcome = run_boot_check(session, check, firmware_path, vector_catch_before=catch_before)
    except BootCheckError as exc:
        outcome = exc.boot_result
        raise
    finally:
        if outcome is not None:
            result.boot_check = outcome.to_dict()
    sink.message(f"boot check passed: {outcome.detail} ({outcome.seconds:.2f} s)")


def flash_firmware(
    image: FirmwareImage,
    probe: Optional[str] = None,
    target: Optional[str] = None,
    job: Optional[FlashOptions] = None,
    progress: Optional[ProgressSink] = None,
    on_connected: ConnectedHook = None,
) -> OperationResult:
    """Flash ``image``: connect, erase, program, read-back verify, reset, and the boot check if asked.

    :param image: from :func:`piflash.firmware.image.load_image`.
    :param probe: probe selector (:mod:`piflash.probe.selector`); None when exactly one probe is attached.
    :param target: pyOCD target type; None when the probe knows its board.
    :param job: what the flash is asked to do (:class:`~piflash.jobs.options.FlashOptions`: erase
        mode, verify, reset, SWD clock, pyOCD session options, per-board plan and serial, lock,
        boot check); default ``FlashOptions()``.
    :param progress: where the phases report (:class:`~piflash.progress.ProgressSink`), or None.
    :param on_connected: ``on_connected(result)`` when the board is first reached (see the module's docstring).
    :returns: the :class:`~piflash.record.result.OperationResult` (``ok`` True).
    :raises UnknownTargetError, PackError, ImageRangeError, NoProbeError, SeveralProbesError, ProbePermissionError,
        ConnectError, FlashError, VerifyError, ProbeLostError, OperationInterrupted, ProtectedError,
        ProtectError, SerialError, BootCheckError:
    """
    job = job or FlashOptions()

    def body(session, result, sink):
        board_image = patched_image(session, result, image, job.plan, job.serial) if job.plan is not None else image
        flash_session(session, board_image, result, sink, job)

    return _run("flash", image, probe, target, job.frequency, progress, body, job.session_options, on_connected)


def flash_session(
    session,
    image: FirmwareImage,
    result: OperationResult,
    progress: Optional[ProgressSink] = None,
    job: Optional[FlashOptions] = None,
) -> None:
    """The erase, program, verify, reset and boot check phases of :func:`flash_firmware` on an
    open session.

    Each phase is timed into ``result`` and ``result.program`` / ``result.verify`` are filled;
    the caller opened the session (and timed its connect) and wraps this in :func:`tracking`.
    A locked chip is refused before anything is erased. With ``job.protect == "lock"`` read-out
    protection is set after the verify passed (never before, never without a verify) and read
    back into ``result.protection``; after the boot check too, when there is one (a board that
    does not start is not locked).

    :param job: the :class:`~piflash.jobs.options.FlashOptions` (its ``erase``, ``verify``,
        ``reset``, ``protect`` and ``boot_check``: the session is open, the image already patched,
        so its clock, session options, plan and serial are not read); default ``FlashOptions()``.
    :raises FlashError, VerifyError, ProbeLostError, OperationInterrupted, ProtectedError, BootCheckError:
    :raises ProtectError: the lock did not take (the chip still reads open), or a lock without a verify.
    """
    job = job or FlashOptions()
    protect, verify = job.protect, job.verify
    if protect == "lock" and not verify:
        raise ProtectError(
            "refusing to lock a board that is not verified",
            hint="locking comes after a passed verify: drop --no-verify",
        )
    sink = progress or ProgressSink()
    check_protection(session, result)
    with phase(result, sink, Phase.ERASE):
        programmer = ImageProgrammer(session, image, job.erase, progress=sink)
        result.program = programmer.stats
        programmer.erase()
    with phase(result, sink, Phase.PROGRAM):
        programmer.program()
    checkpoint("programmed")
    # A flash that wrote nothing has compared every image page with the flash already (its
    # plan's CRC pass, seconds ago, nothing written since): that check is the verify. Before a
    # lock (hard to undo) the verify runs again all the same.
    proof = programmer.unchanged_proof() if verify and protect != "lock" else None
    _verify_and_reset(
        session, result, sink, image if verify else None, job.reset, proof=proof, boot_check=job.boot_check
    )
    checkpoint("verified")
    if protect == "lock":
        from piflash.production.protect import lock, session_port

        with phase(result, sink, LOCK_PHASE):
            result.protection = lock(session_port(session), result.target or "").state


def verify_session(
    session,
    image: FirmwareImage,
    result: OperationResult,
    progress: Optional[ProgressSink] = None,
    reset: bool = True,
    quick: bool = False,
) -> None:
    """The verify (and reset) phases of :func:`verify_firmware` on an open session.

    :param quick: stop at the first page that differs, without reading it back (see
        :func:`piflash.flashing.verify.verify_image`): a cheap "does the board already carry it?".
    :raises VerifyError: and the errors of :func:`flash_session`.
    """
    sink = progress or ProgressSink()
    check_protection(session, result)
    _verify_and_reset(session, result, sink, image, reset, quick)


def verify_firmware(
    image: FirmwareImage,
    probe: Optional[str] = None,
    target: Optional[str] = None,
    frequency: Optional[int] = None,
    progress: Optional[ProgressSink] = None,
    reset: bool = True,
    options: Optional[dict] = None,
    on_connected: ConnectedHook = None,
) -> OperationResult:
    """Compare the target's flash with ``image`` without writing (the ``verify`` phase of a flash).

    The on-target CRC32 runs code on the core, so the target is reset afterwards (``reset=True``)
    to leave it running its firmware; with ``reset=False`` it stays halted.

    :raises VerifyError: and the connect errors of :func:`flash_firmware`.
    """

    def body(session, result, sink):
        verify_session(session, image, result, sink, reset)

    return _run("verify", image, probe, target, frequency, progress, body, options, on_connected)


def _say_chip_erase_bound(session, sink: ProgressSink) -> None:
    """Tell ``sink`` how long the chip erase may take: the session's ``flash.timeout.erase_all``
    where piflash set it from the family's datasheet time
    (:func:`piflash.targets.catalog.erase_chip_timeout`), so a wait on a stuck controller is not
    silent."""
    from piflash.targets.connect import session_family

    if session_family(session).erase_chip_timeout is None:
        return
    seconds = session.options.get("flash.timeout.erase_all")
    sink.message(f"Erasing the whole chip: piflash waits at most {seconds:g} s (10x the datasheet's mass-erase time)")


def erase_target(
    probe: Optional[str] = None,
    target: Optional[str] = None,
    mode: str = "chip",
    ranges: Sequence[Tuple[int, int]] = (),
    frequency: Optional[int] = None,
    progress: Optional[ProgressSink] = None,
    options: Optional[dict] = None,
    on_connected: ConnectedHook = None,
) -> OperationResult:
    """Erase the whole chip, or the sectors covering ``ranges``.

    :param mode: ``"chip"``, or ``"sector"`` with ``ranges``.
    :param ranges: (start, end_exclusive) byte addresses, for sector mode.
    :returns: the :class:`~piflash.record.result.OperationResult`; ``program.erased_bytes`` is set.
    :raises ValueError: bad mode, sector mode without ranges, an empty range (checked before connecting).
    :raises ImageRangeError: a range outside flash; and the errors of :func:`flash_firmware`.
    """
    if mode not in ("chip", "sector") or (mode == "sector") != bool(ranges):
        raise ValueError("erase needs mode 'chip' without ranges, or 'sector' with ranges")
    for start, end in ranges:
        if end <= start:
            raise ValueError(f"empty erase range {start:#010x}-{end:#010x} (end is exclusive)")

    def body(session, result, sink):
        check_protection(session, result)
        with phase(result, sink, Phase.ERASE):
            sink.phase_start(Phase.ERASE, 0)
            if mode == "chip":
                _say_chip_erase_bound(session, sink)
            result.program.erase_mode = mode  # as done: erase_flash never changes it
            result.program.erased_bytes = erase_flash(session, mode, ranges)
            sink.phase_end(Phase.ERASE, f"{result.program.erased_bytes:,} bytes erased")

    return _run("erase", None, probe, target, frequency, progress, body, options, on_connected)


def reset_board(
    probe: Optional[str] = None,
    target: Optional[str] = None,
    halt: bool = False,
    frequency: Optional[int] = None,
    options: Optional[dict] = None,
    on_connected: ConnectedHook = None,
) -> OperationResult:
    """Reset the target.

    :param halt: leave it halted at the reset vector instead of running.
    :returns: the :class:`~piflash.record.result.OperationResult`.
    :raises: the connect errors of :func:`flash_firmware`; FlashError if the reset fails.
    """

    def body(session, result, sink):
        with phase(result, sink, Phase.RESET):
            reset_target(session, halt)
            result.reset = True
        if halt:
            session.options["resume_on_disconnect"] = False

    return _run("reset", None, probe, target, frequency, None, body, options, on_connected)


def monitor_rtt(
    probe: Optional[str] = None,
    target: Optional[str] = None,
    frequency: Optional[int] = None,
    write: Callable[[bytes], None] = lambda data: None,
    firmware_path: Optional[str] = None,
    address: Optional[int] = None,
    reset: bool = False,
    find_timeout: float = 5.0,
    duration: Optional[float] = None,
    options: Optional[dict] = None,
    progress: Optional[ProgressSink] = None,
    until: Optional[str] = None,
) -> OperationResult:
    """Stream the target's RTT up-channel 0 to ``write(bytes)`` until Ctrl-C (KeyboardInterrupt,
    or SIGTERM made one) or ``duration`` seconds; the end by Ctrl-C is a clean end, not an error.

    :param until: a regular expression (``re``, already checked to compile): stop once the text
        read matches it (searched as a boot check's ``rtt:`` pattern is, bounded in time:
        :mod:`piflash.production.textsearch`); with ``duration``, not seeing it in time is an error.

    :param firmware_path: an ELF whose ``_SEGGER_RTT`` symbol gives the control block's address.
    :param address: the control block's address (int), over the ELF's; neither: RAM is searched.
    :param reset: reset the target first (an old firmware's control block wiped before), so the
        stream starts with what the firmware prints as it boots.
    :param find_timeout: seconds to look for the control block before giving up.
    :raises RttError: (exit 26) no control block within ``find_timeout`` seconds; ``until`` not
        matched within ``duration`` seconds, or its search stopped (it backtracks without end); the
        connect errors of :func:`flash_firmware`.
    """
    from piflash.errors import RttError
    from piflash.firmware.symbols import elf_symbol
    from piflash.targets.rtt import RTT_SYMBOL, RttUpChannel

    if address is None:
        address = elf_symbol(firmware_path, RTT_SYMBOL)

    def body(session, result, sink):
        with contextlib.ExitStack() as stack:
            _stream(session, result, sink, stack)

    def _stream(session, result, sink, stack):
        if address is not None:
            from piflash.targets.catalog import describe_regions, region_holding

            memory_map = session.target.get_memory_map()
            # SEGGER_RTT_CB: 16 ID bytes and two channel counts, then the channel descriptors.
            if region_holding(memory_map, address, 24, ram=True) is None:
                raise RttError(
                    f"no RTT control block can be at 0x{address:08x}: it is not in the target's RAM "
                    f"({describe_regions(memory_map, ram=True)})",
                    hint="give the _SEGGER_RTT symbol's address (or the ELF file), or leave "
                    "--address out to search RAM",
                )
        channel = RttUpChannel(session.target, address)
        if reset:
            with phase(result, sink, Phase.RESET):
                channel.wipe_stale()
                reset_target(session, progress=sink)
                result.reset = True
        try:
            start = time.monotonic()
            while not channel.find():
                session.target.get_state()  # a running core goes on (and a simulated one runs)
                if time.monotonic() - start >= find_timeout:
                    where = f"at 0x{address:08x}" if address is not None else "in RAM"
                    raise RttError(
                        f"no RTT control block found {where} within {find_timeout:g} s",
                        hint="the firmware must set up SEGGER RTT (and run: --reset starts it); "
                        "give the ELF file or --address for a block outside the default RAM",
                    )
                time.sleep(0.05)
            session.options["resume_on_disconnect"] = True
            search = None
            if until is not None:
                from piflash.production.textsearch import TextSearch

                search = stack.enter_context(TextSearch(until))
            while duration is None or time.monotonic() - start < duration:
                session.target.get_state()
                data = channel.read()
                if data:
                    write(data)
                    if search is not None and _seen(search, until, data):
                        return
                else:
                    time.sleep(0.02)
            if until is not None:
                raise RttError(
                    f"RTT channel 0 printed no text matching '{until}' within {duration:g} s",
                    hint="the board does not start or does not say so: check what it printed above; "
                    "--timeout SECONDS waits longer",
                )
        except KeyboardInterrupt:
            pass  # Ctrl-C: the user's way to stop streaming

    return _run("rtt", None, probe, target, frequency, progress, body, options)


def _seen(search, pattern: str, data: bytes) -> bool:
    """``data`` fed to ``search`` (a :class:`~piflash.production.textsearch.TextSearch`).

    :raises RttError: its search stopped (the pattern backtracks without end on this text).
    """
    from piflash.errors import RttError
    from piflash.production.textsearch import SearchTooSlow

    try:
        return search.feed(data.decode("utf-8", "replace"))
    except SearchTooSlow as exc:
        raise RttError(
            f"searching RTT channel 0's text for '{pattern}' stopped: {exc}",
            hint="the pattern backtracks without end on this text (a repeat inside a repeat, such as "
            "(a+)+): write it without nesting",
        ) from None


__all__ = [
    "flash_firmware",
    "verify_firmware",
    "erase_target",
    "reset_board",
    "monitor_rtt",
    "ERASE_MODES",
    "FlashOptions",
    "flash_session",
    "verify_session",
    "describe_session",
    "phase",
    "tracking",
    "check_protection",
    "patched_image",
]
