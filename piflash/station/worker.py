"""One worker thread per probe: wait for a board, flash it, record it, wait until it is removed.

The loop of :class:`ProbeWorker`, for probe ``P`` and the station's current config:

1. **wait for a board**: every ``poll_interval`` seconds open a pyOCD session on ``P``
   (:func:`piflash.targets.connect.open_session`). No probe: "waiting for probe". The probe answers but
   the target does not (connect error): "waiting for board". A session opens: a board is there;
   the connect phase is timed into its result and its target unique ID read.
2. **flash**: with ``on_same_firmware: skip`` a quick verify first (on-target CRC32, stopping at
   the first page that differs); if the board already carries the image it is recorded as
   ``skip``. Otherwise, if the profile numbers its boards, a serial number is taken from the
   counter (committed before anything is written, :mod:`piflash.production.serials`) and laid into the
   image with the other ``patch:`` bytes; :func:`piflash.jobs.workflow.flash_session` erases,
   programs, verifies and resets that patched image per the profile (the same code path as
   ``piflash flash``), and locks the chip after the verify when the config says so. The number
   is then marked pass or fail: a failed board keeps its number.
3. **record** it: the board's history row is opened before anything is written to it (if the
   history cannot be written the board is left alone and shown as FAIL) and completed with the
   result (serial, patch values and protection state with it); show PASS / SKIP / FAIL.
4. **wait for removal**, the session kept open: every ``poll_interval`` read the DP's DPIDR and
   the target unique ID; the board is gone when two reads in a row (10 ms apart) fail or the
   ID changes. A
   board left on the fixture is therefore flashed once, not in a loop. If the probe itself is
   lost, removal cannot be seen: a board found later with the same target unique ID is taken
   for the same board and not flashed again (remove it while the probe is connected).

Every failure of a board (write protection, verify mismatch, board pulled or probe unplugged
mid-flash) is recorded as ``fail`` and the loop carries on; an unexpected exception is logged
and the worker starts over after a pause, so one probe's fault never stops the others.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import threading
import time
from typing import Optional, Tuple

from piflash.errors import (
    ConnectError,
    ImageRangeError,
    ListUsedUpError,
    NoProbeError,
    OperationInterrupted,
    PiflashError,
    ProbeLostError,
    ProbePermissionError,
    SerialError,
    SeveralProbesError,
    VerifyError,
)
from piflash.jobs.options import FlashOptions
from piflash.jobs.workflow import (
    describe_session,
    flash_session,
    patched_image,
    phase,
    tracking,
    verify_session,
)
from piflash.production.serials import SerialAllocator, checkpoint
from piflash.production.unitlist import (
    PostgresRowSource,
    ProgrammingMark,
    RowAllocator,
    forget_row,
    state_path,
)
from piflash.progress import Phase, ProgressSink
from piflash.record.result import OperationResult
from piflash.targets.connect import open_session, read_target_uid

LOG = logging.getLogger(__name__)

#: Failed presence reads in a row before a board counts as removed (one failed read can be a
#: glitch on a long SWD cable); the confirming reads follow the first after CONFIRM_DELAY seconds,
#: not a whole poll interval later.
REMOVAL_READS = 2
CONFIRM_DELAY = 0.01

#: One serial allocator per (database, counter, station), shared by the station's workers.
_ALLOCATORS: dict = {}
#: One list row allocator per (database, list, station), shared the same way.
_ROW_ALLOCATORS: dict = {}
_ALLOCATORS_LOCK = threading.Lock()


def flash_options(config, serial: Optional[int] = None, plan=None) -> FlashOptions:
    """What the station's flash of one board is asked to do, the same for every transport: the
    profile's erase mode, verify, reset, SWD clock, patch plan and boot check, the config's lock
    (:attr:`piflash.station.config.StationConfig.protect`, the profile's or the station's policy)
    and the board's ``serial`` (int) when it has one; ``plan``: the profile's plan bound to the
    board's list row (:meth:`piflash.firmware.patch.PatchPlan.with_row`), default the profile's.

    The session options (a profile's ``pack``) are not in it: the probe workers open their
    sessions with them themselves (the one session serves many boards), and PICOBOOT takes none.

    :param config: the loaded :class:`piflash.station.config.StationConfig`.
    :raises ValueError: a combination FlashOptions refuses (the config check refused it first).
    """
    prof = config.profile
    return FlashOptions(
        erase=prof.erase,
        verify=prof.verify,
        reset=prof.reset,
        frequency=prof.frequency,
        protect=config.protect,
        boot_check=prof.boot_check,
        plan=plan if plan is not None else prof.patch_plan,
        serial=serial,
    )


def serial_allocator(config, holder: Optional[str] = None) -> SerialAllocator:
    """The station's allocator for its profile's counter (opened once; a new one after a reload
    that changes the database or the counter). ``holder``: who holds the leases (default the
    station's name; a worker process has its own, see
    :attr:`piflash.station.procs.ChildStation.serial_holder`). :raises SerialError:"""
    counter = config.profile.patch_plan.counter
    holder = holder or config.station
    key = (str(config.serials_path), counter, holder, config.serial_block, config.ledger, config.lease_ttl)
    with _ALLOCATORS_LOCK:
        if key not in _ALLOCATORS:
            source = None
            if config.ledger:  # the stations of a line share the ledger's counter
                from piflash.production.leases import PostgresLeaseSource

                source = PostgresLeaseSource(config.ledger, config.lease_ttl)
            alloc = SerialAllocator(counter, holder, config.serials_path, config.serial_block, source=source)
            if any(alloc.lost.values()):
                LOG.warning(
                    "serial counter %s: %d leased number(s) left unused and %d board(s) "
                    "unfinished by the last run (never given again)",
                    counter.name,
                    alloc.lost["unused"],
                    alloc.lost["interrupted"],
                )
            _ALLOCATORS[key] = alloc
        return _ALLOCATORS[key]


def row_allocator(config, holder: Optional[str] = None) -> RowAllocator:
    """The station's allocator of its profile's list rows (opened once per database, list,
    holder and ledger), beside the serial database; through the ledger when the config has one.
    What a crash of the last run left is accounted for here (logged). :raises SerialError:"""
    ulist = config.profile.unit_list
    holder = holder or config.station
    key = (str(config.serials_path), ulist.sha256, holder, config.serial_block, config.ledger)
    with _ALLOCATORS_LOCK:
        if key not in _ROW_ALLOCATORS:
            source = PostgresRowSource(config.ledger) if config.ledger else None
            alloc = RowAllocator(ulist, holder, state_path(config.serials_path), config.serial_block, source=source)
            _log_recovered(alloc)
            _ROW_ALLOCATORS[key] = alloc
        return _ROW_ALLOCATORS[key]


def _log_recovered(alloc: RowAllocator) -> None:
    if any(alloc.recovered.values()):
        LOG.warning(
            "list %s: %d row(s) given back and %d board(s) cut off while programming by the last run "
            "(their rows never given again)",
            alloc.ulist.name,
            alloc.recovered["back"],
            alloc.recovered["interrupted"],
        )


def check_list_left(config) -> None:
    """At the station's start: refuse a profile whose list has no row left, before any board is
    touched. The allocator is opened and closed here (a worker process opens its own).

    :raises ListUsedUpError: (exit 22) no row is left. :raises SerialError: the rows cannot be counted.
    """
    ulist = config.profile.unit_list
    source = PostgresRowSource(config.ledger) if config.ledger else None
    alloc = RowAllocator(ulist, config.station, state_path(config.serials_path), config.serial_block, source=source)
    _log_recovered(alloc)  # what the last run of this station left
    try:
        if alloc.remaining() == 0:
            raise ListUsedUpError(
                f"the list {ulist.name} is used up: all its {len(ulist):,} rows are used or held by other stations",
                hint="add a new list (a new file, named in the profile's list:) and start the station again",
            )
    finally:
        alloc.release()
        alloc.close()


def release_allocators() -> None:
    """On a clean stop, once no worker numbers a board any more: give the unused rest of every
    allocator's lease back to the counter (logged), and close the allocators. A crash skips this,
    and the next start reports the rest as left unused."""
    with _ALLOCATORS_LOCK:
        allocators = list(_ALLOCATORS.values())
        _ALLOCATORS.clear()
        row_allocators = list(_ROW_ALLOCATORS.values())
        _ROW_ALLOCATORS.clear()
    for rows in row_allocators:
        try:
            back = rows.release()
            if back:
                LOG.info("list %s: %d unused row(s) of the lease given back", rows.ulist.name, back)
        except SerialError as exc:
            LOG.error("list %s: unused rows not given back yet: %s", rows.ulist.name, exc.message)
        finally:
            rows.close()
    for alloc in allocators:
        try:
            back = alloc.release()
            if back:
                LOG.info("serial counter %s: %d unused number(s) of the lease given back", alloc.counter.name, back)
        except SerialError as exc:
            LOG.error("serial counter %s: unused numbers not given back: %s", alloc.counter.name, exc.message)
        finally:
            alloc.close()


class StationSink(ProgressSink):
    """Turns one board's phase progress into the probe's status ("flashing 42%") and heartbeats.

    With a ``label`` other than "flashing" (the skip check: "checking firmware") the label is
    shown alone.

    The percentage covers the whole job: erase 0-20 %, program 20-85 %, verify 85-98 %,
    reset 98-100 % (rough shares of the time each takes on an nRF52840 with a 64 KiB image).
    When the station is asked to abort (a second SIGTERM/SIGINT), the next progress update
    raises :class:`~piflash.errors.OperationInterrupted`.
    """

    SPANS = {
        Phase.CONNECT: (0, 0),
        Phase.ERASE: (0, 20),
        Phase.PROGRAM: (20, 85),
        Phase.VERIFY: (85, 98),
        Phase.RESET: (98, 100),
    }

    def __init__(
        self, worker: "ProbeWorker", target_uid: Optional[str], label: str = "flashing", serial: Optional[str] = None
    ) -> None:
        self.worker, self.target_uid, self.label, self.serial = worker, target_uid, label, serial
        self._total = 0
        self._last = -1

    def _show(self, phase: str, done: int) -> None:
        self.worker.beat = time.monotonic()
        if self.worker.station.abort.is_set():
            raise OperationInterrupted(f"station stopped during {phase}", hint="flash the board again")
        lo, hi = self.SPANS.get(phase, (0, 100))
        pct = lo + (hi - lo) * done // self._total if self._total else lo
        if pct != self._last:
            self._last = pct
            text = f"{self.label} {pct}%" if self.label == "flashing" else self.label
            self.worker.station.status.set(
                self.worker.uid, "flashing", text, self.target_uid, pct, self.serial, phase=phase
            )

    def phase_start(self, phase: str, total: int) -> None:
        self._total = total
        self._show(phase, 0)

    def phase_update(self, phase: str, done: int) -> None:
        self._show(phase, done)


class _ContactLost(Exception):
    """The probe went away while we watched a board: its removal cannot be observed."""


class ProbeWorker(threading.Thread):
    """Serves one probe until the station stops or the worker is retired.

    :param station: the running :class:`piflash.station.loop.Station` (config, status, history,
        stop and abort events).
    :param uid: the probe's unique ID (str).
    :ivar beat: ``time.monotonic()`` of the last sign of life (for the systemd watchdog).
    """

    def __init__(self, station, uid: str) -> None:
        super().__init__(name=f"probe {uid}", daemon=True)
        self.station, self.uid = station, uid
        self.beat = time.monotonic()
        self.retired = threading.Event()
        self._wake = threading.Event()
        self._last_uid: Optional[str] = None  # the last board handled on this probe
        self._unobserved = False  # ...and we lost contact before it was removed
        self._locked_target: Optional[str] = None  # ...and its target type, when we locked it and its
        #                                        family then hides its unique ID (see _answers)

    # -- control ------------------------------------------------------------------------------
    def stopping(self) -> bool:
        """Whether to take no new board (the station stops, or this worker was retired)."""
        return self.station.stop.is_set() or self.retired.is_set()

    def retire(self) -> None:
        """Finish the current board, then end (the probe left the config on a reload)."""
        self.retired.set()
        self.wake()

    def wake(self) -> None:
        """Cut the current pause short (to notice a stop or retirement at once)."""
        self._wake.set()

    def _sleep(self, seconds: float) -> None:
        self._wake.wait(seconds)
        self._wake.clear()
        self.beat = time.monotonic()

    def _set(self, state: str, text: str, target_uid: Optional[str] = None, **detail) -> None:
        """Show ``state``/``text``; ``detail``: a result's ``error`` and ``row`` (:meth:`StatusBoard.set`)."""
        self.station.status.set(self.uid, state, text, target_uid, **detail)

    # -- the loop -----------------------------------------------------------------------------
    def run(self) -> None:
        self._open_serials()
        while not self.stopping():
            self.beat = time.monotonic()
            try:
                self._one_board()
            except Exception:  # a bug must not end this probe's service
                LOG.exception("probe %s: unexpected error; starting over", self.uid)
                self._sleep(max(1.0, self.station.loaded.config.poll_interval))

    def _open_serials(self) -> None:
        """Open the serial allocator before the first board when the profile numbers its boards:
        what a crash of the last run left (open leases, unfinished numbers) is accounted for at
        once, here and in the ledger, not only when the next board takes a number. A failure is
        logged; the first numbered board meets it again and fails with its cause."""
        cfg = self.station.loaded.config
        plan = cfg.profile.patch_plan
        if cfg.profile.unit_list is not None:
            try:
                row_allocator(cfg, getattr(self.station, "serial_holder", None))
            except SerialError as exc:
                LOG.error("list %s: %s", cfg.profile.unit_list.name, exc.message)
        if plan is None or not plan.uses_serial:
            return
        try:
            serial_allocator(cfg, getattr(self.station, "serial_holder", None))
        except SerialError as exc:
            LOG.error("serial counter %s: %s", plan.counter.name, exc.message)

    def _one_board(self) -> None:
        loaded = self.station.loaded  # one config for the whole board, even over a reload
        with contextlib.ExitStack() as stack:
            found = self._wait_for_board(stack, loaded)
            if found is None:
                return
            session, result, error = found
            uid = result.target_uid
            if uid is not None and uid == self._last_uid and self._unobserved and error is None:
                LOG.info("probe %s: board %s is the one handled before the probe was lost", self.uid, uid)
            else:
                if not self._wait_for_button(uid):
                    return
                self._serve(session, result, loaded, error)
            self._last_uid = uid
            # Closed sessions leave reference cycles (pyOCD's target graph, exception tracebacks)
            # holding few Python objects but much native memory (USB buffers; the simulator's
            # emulator); CPython's collector counts objects, not bytes, and would reach them late.
            # Collected here, while the operator takes the board off (~40 ms on a PC).
            gc.collect()
            self._unobserved = not self._wait_for_removal(session, uid, loaded)
        if not self.stopping():
            self._set("waiting", "waiting for board")

    def _wait_for_board(
        self, stack: contextlib.ExitStack, loaded
    ) -> Optional[Tuple[object, OperationResult, Optional[PiflashError]]]:
        prof = loaded.config.profile
        while not self.stopping():
            if self.station.loaded is not loaded:  # reloaded (a new job): the next board takes the new config
                return None
            self.beat = time.monotonic()
            result = OperationResult.start("flash", loaded.image, self.uid, prof.target)
            try:
                with phase(result, ProgressSink(), Phase.CONNECT):
                    session = stack.enter_context(
                        open_session(self.uid, prof.target, prof.frequency, prof.session_options())
                    )
                    try:
                        describe_session(session, result, loaded.image)
                    except ImageRangeError as exc:  # a board is there, but the image cannot go on it
                        return session, result, exc
                return session, result, None
            except (NoProbeError, ProbeLostError, SeveralProbesError) as exc:
                self._set("waiting_probe", "waiting for probe")
                LOG.debug("probe %s: %s", self.uid, exc.message)
            except ProbePermissionError as exc:
                self._set("waiting_probe", f"probe not accessible: {exc.message}")
            except ConnectError:
                self._set("waiting", "waiting for board")
            except PiflashError as exc:  # e.g. a transfer fault while connecting
                LOG.debug("probe %s: connect failed: %s", self.uid, exc.message)
                self._set("waiting", "waiting for board")
            self._sleep(loaded.config.poll_interval)
        return None

    def _wait_for_button(self, target_uid: Optional[str]) -> bool:
        gpio = self.station.gpio
        if gpio is None or not gpio.has_button:
            return True
        presses = gpio.presses()
        self._set("button", "waiting for start button", target_uid)
        return gpio.wait_for_press(presses, self._stop_event())

    def _stop_event(self) -> threading.Event:
        return self.retired if self.retired.is_set() else self.station.stop

    def _serve(self, session, result: OperationResult, loaded, error: Optional[PiflashError]) -> None:
        uid = result.target_uid
        row = self.station.open_row(result, self.uid)  # before anything is written to the board
        if row is None:
            self._set("fail", f"FAIL {uid or 'unknown'} not flashed: the history cannot be written", uid)
            return
        outcome = "fail"
        try:
            outcome = self._flash(session, result, loaded, error, row)
        finally:  # even a bug here completes the row: a board is never left without its record
            if result.error is None and outcome == "fail":
                result.error = {
                    "kind": "InternalError",
                    "message": "internal error in the station (see its log)",
                    "exit_code": 1,
                }
            done = self.station.complete_row(row, result, outcome)
        checkpoint("recorded")
        from piflash.targets.families import family_for

        hides_uid = result.protection == "locked" and family_for(result.target).uid_hidden_when_locked
        self._locked_target = result.target if hides_uid else None
        number = f"#{done}" if done is not None else "(not recorded)"
        shown = uid or "unknown"
        tag = f" serial {result.serial}" if result.serial is not None else ""
        if outcome == "fail":
            reason = " ".join(str(result.error.get("message", "")).split())
            self._set("fail", f"FAIL {shown}{tag} {reason}", uid, error=result.error, row=done)
        else:
            self._set(outcome, f"{outcome.upper()} {shown} {number}{tag}", uid, row=done)

    def _flash(self, session, result: OperationResult, loaded, error: Optional[PiflashError], row: int) -> str:
        """The board's job (skip check, flash) on its open session and history row ``row``;
        returns the outcome."""
        cfg, image = loaded.config, loaded.image
        prof = cfg.profile
        plan = prof.patch_plan
        uid = result.target_uid
        outcome, precheck_s = "fail", 0.0
        serial: Optional[int] = None
        taken: list = []  # the number taken, even when writing it into the row failed
        alloc = None
        rows = None  # the list's allocator, and the row taken (piflash.production.unitlist)
        got = None
        count = getattr(cfg.bundle, "count", None)  # the bundle's count limit (max_boards), or None
        turn: Optional[int] = None
        try:
            with tracking(result):
                if error is not None:
                    raise error
                if cfg.on_same_firmware == "skip":
                    try:
                        verify_session(
                            session,
                            image,
                            result,
                            StationSink(self, uid, "checking firmware"),
                            reset=prof.reset,
                            quick=True,
                        )
                        outcome = "skip"
                    except VerifyError:  # not there yet: flash it
                        precheck_s = result.durations.pop(Phase.VERIFY, 0.0)
                        result.verify = None
                if outcome != "skip":
                    board_image = image
                    sink: ProgressSink = StationSink(self, uid)
                    if count is not None:  # the board's turn in the ledger, before a number or a byte is
                        turn = count.take(uid)
                    if plan is not None:
                        if plan.uses_serial:
                            alloc = serial_allocator(cfg, getattr(self.station, "serial_holder", None))
                            # committed before anything is written, and into the row at once
                            serial = alloc.take(uid, lambda n: (taken.append(n), self.station.note_serial(row, n)))
                        if prof.unit_list is not None:  # the board's row of the list, committed as taken
                            rows = row_allocator(cfg, getattr(self.station, "serial_holder", None))
                            got = rows.take(uid)
                            plan = plan.with_row(got.values, got.source)
                        board_image = patched_image(session, result, image, plan, serial)
                    sink = StationSink(self, uid, serial=result.serial)
                    if got is not None:
                        sink = ProgrammingMark(sink, lambda: self._programming(rows, got, plan, row))
                    try:
                        flash_session(session, board_image, result, sink, flash_options(cfg, serial, plan))
                    finally:
                        if precheck_s:
                            result.durations[Phase.VERIFY] = round(
                                result.durations.get(Phase.VERIFY, 0.0) + precheck_s, 4
                            )
                    outcome = "pass"
        except PiflashError as exc:
            outcome = "fail"
            if isinstance(exc, ListUsedUpError):  # nothing was written to this board
                self.station.list_used_up(exc.message)
            if (
                not isinstance(exc, (ProbeLostError, OperationInterrupted, ImageRangeError, SerialError))
                and self._answers(session, uid) is False
            ):
                result.error["message"] = f"board removed during {result.phase}: {exc.message}"
        if got is not None and rows is not None:
            try:
                if rows.finish(got.row, outcome == "pass", uid) == "leased":
                    forget_row(result, plan)
                    LOG.info(
                        "list %s: row %d given back (board %s failed before programming)", rows.ulist.name, got.row, uid
                    )
            except SerialError as exc:  # the row stays taken or used: never given to another board
                LOG.error("list %s row %d of board %s not marked: %s", rows.ulist.name, got.row, uid, exc.message)
        if turn is not None:
            try:
                count.settle(turn, outcome == "pass")
            except PiflashError as exc:  # the turn expires in the ledger (piflash.record.ledger.TURN_TTL)
                LOG.error("board %s's turn under the bundle's count limit not settled: %s", uid, exc.message)
        if taken and alloc is not None:
            serial = taken[0]
            try:
                alloc.finish(serial, outcome == "pass", uid)
            except SerialError as exc:  # the number stays 'taken': still never reused
                LOG.error("serial %s of board %s not marked %s: %s", serial, uid, outcome, exc.message)
        return outcome

    def _programming(self, rows: RowAllocator, got, plan, row: int) -> None:
        """Programming starts: the board's list row becomes its own for good (committed), and
        its open history row names the list row (no value), before the first byte is written."""
        rows.programming(got.row)
        self.station.note_patch(row, {e.name: got.source for e in plan.entries if e.list is not None})

    def _answers(self, session, uid: Optional[str], locked: Optional[str] = None) -> Optional[bool]:
        """Whether the board ``uid`` still answers on the open session (True), does not or was
        replaced (False); None when the probe itself is gone. ``locked``: the target type of a
        board this station just locked, whose family hides its unique ID then (an nRF52: its
        AHB-AP is cut off): it counts as there while the debug port answers and its protection
        (the nRF52's CTRL-AP) still reads locked (an open board in its place is another board)."""
        from pyocd.core.exceptions import ProbeDisconnected

        try:
            session.probe.read_dp(0)  # DPIDR: the debug port answers
            if locked:
                from piflash.production.protect import read_status, session_port

                return read_status(session_port(session), locked).locked
            now = read_target_uid(session, strict=True)
            if now is None:  # no known ID location: the boot memory answers
                session.target.read32(session.target.memory_map.get_boot_memory().start)
                return True
            return now == uid
        except ProbeDisconnected:
            return None
        except Exception:
            return False

    def _wait_for_removal(self, session, uid: Optional[str], loaded) -> bool:
        """Poll until the board is removed (True) or the probe is lost or we stop (False)."""
        misses = 0
        while not self.stopping():
            self._sleep(CONFIRM_DELAY if misses else loaded.config.poll_interval)
            answer = self._answers(session, uid, self._locked_target)
            if answer is None:
                LOG.info("probe %s lost while board %s was on the fixture", self.uid, uid)
                return False
            misses = 0 if answer else misses + 1
            if misses >= REMOVAL_READS:
                LOG.debug("probe %s: board %s removed", self.uid, uid)
                return True
        return False


__all__ = [
    "ProbeWorker",
    "StationSink",
    "REMOVAL_READS",
    "release_allocators",
    "flash_options",
    "row_allocator",
    "check_list_left",
]
