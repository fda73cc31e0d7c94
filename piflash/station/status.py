"""What the station shows: one state per probe, fanned out to the log, systemd, a rich view, GPIO.

:class:`StatusBoard` keeps the state of every probe and passes each change to its outputs:

- :class:`LogOutput`: one plain line per state change (journald under systemd, a pipe, a file);
- :class:`RichOutput`: a rich ``Live`` table when stdout is a terminal (rich imported lazily);
- :class:`NotifyOutput`: systemd's ``STATUS=`` line (:mod:`piflash.station.sdnotify`);
- :class:`GpioOutput`: LEDs, a buzzer and a start button through gpiozero (optional extra
  ``gpio``; imported only when the config has a ``gpio`` section).

The status texts (docs/station.md): ``waiting for probe``, ``waiting for board``,
``waiting for start button``, ``flashing 42%``, ``PASS <target unique ID> #<history row>``,
``SKIP <target unique ID> #<row>`` (already carried the firmware), ``FAIL <target unique ID>
<reason>``, ``stopping``. A board that gets a serial number shows it: ``flashing <target unique
ID> serial <n>`` in the log, ``PASS <uid> #<row> serial <n>``, ``FAIL <uid> serial <n> <reason>``,
and a "serial" column in the rich view. With one probe the systemd STATUS line is that text; with several it
is ``<probe>: <text>`` for each, joined by `` | ``.

Each probe also keeps its *last result* (the PASS / SKIP / FAIL text with its reason) until its
next board starts, so a board pulled mid-flash leaves "FAIL <uid> board removed during program:
..." on the operator's screen, not a FAIL that lasts until the next poll. Once the station is
stopping (:meth:`StatusBoard.begin_stop`), no probe leaves ``stopping`` again: a board still being
finished shows ``stopping: flashing 42%``, and its result goes to the last result.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, TextIO

from piflash.redact import scrub

LOG = logging.getLogger(__name__)

#: The status file's name, in ``$RUNTIME_DIRECTORY`` under systemd, else beside the history.
STATUS_FILE = "status.json"
#: Where the unit's ``RuntimeDirectory=piflash`` puts ``$RUNTIME_DIRECTORY`` (systemd.exec(5):
#: ``/run/`` + the name, for a system service): where ``station status`` looks outside the unit.
UNIT_RUNTIME_DIRECTORY = Path("/run/piflash")
#: Seconds between two writes of the status file for progress alone (a state change or a result
#: is written at once): two a second keeps a reader's percentage live without an fsync per step.
PROGRESS_INTERVAL = 0.5


def _now_iso() -> str:
    """Now as ISO 8601 local time with its UTC offset, to the millisecond (docs/result.md)."""
    from datetime import datetime

    return datetime.now().astimezone().isoformat(timespec="milliseconds")


def _scrubbed(error: Optional[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """A result's error dict (``kind``, ``message``, ``exit_code``, ``hint``) with passwords
    masked (:func:`piflash.redact.scrub`), or None."""
    if not error:
        return None
    return {
        "kind": str(error.get("kind") or "PiflashError"),
        "message": scrub(str(error.get("message") or "")),
        "exit_code": int(error.get("exit_code") or 1),
        "hint": scrub(error["hint"]) if error.get("hint") else None,
    }


#: States a probe can be in (``ProbeState.state``).
STATES = ("waiting_probe", "waiting", "button", "flashing", "pass", "skip", "fail", "stopping")


@dataclass
class ProbeState:
    """One probe's current state.

    :ivar probe: probe unique ID; :ivar state: one of :data:`STATES`; :ivar text: the status
    text; :ivar target_uid: the board's target unique ID (or None); :ivar percent: 0..100 while
    flashing; :ivar serial: the board's serial number (str) once one is taken, else None.
    """

    probe: str
    state: str = "waiting_probe"
    text: str = "waiting for probe"
    target_uid: Optional[str] = None
    percent: int = 0
    serial: Optional[str] = None
    last: str = ""  #: the last board's result text ("PASS ..." / "FAIL ... reason"), until the next board
    last_state: str = ""  #: its state: "pass", "skip", "fail", or "" before the first board
    asked: str = "waiting_probe"  #: the state last asked for (shown as "stopping" once the station stops)
    phase: Optional[str] = None  #: while flashing, the :class:`piflash.progress.Phase` value running
    #: The last board's result for the status file, until the next board: ``outcome`` ("pass",
    #: "skip", "fail"), ``text``, ``target_uid``, ``serial``, ``error`` (the result's error dict,
    #: ``kind``/``message``/``exit_code``/``hint``, or None), ``history_id`` (its row, or None),
    #: ``ended_at`` (ISO 8601). None before the first board.
    last_result: Optional[Dict[str, object]] = None


class StatusBoard:
    """The state of every probe, and the outputs that show it. Thread-safe.

    :param outputs: objects with ``update(board, probe_state, new_state: bool)`` and ``close()``.
    :ivar counts: outcomes so far: ``{"pass": n, "fail": n, "skip": n}``.
    """

    def __init__(self, outputs: Optional[List[object]] = None) -> None:
        self.outputs = list(outputs or [])
        self.probes: Dict[str, ProbeState] = {}
        self.counts = {"pass": 0, "fail": 0, "skip": 0}
        #: True once the station stops: no probe leaves "stopping" again.
        self.stopping = False
        self._lock = threading.RLock()

    def begin_stop(self) -> None:
        """The station is stopping: every probe shows ``stopping`` from now on (a board being
        finished as ``stopping: flashing 42%``); results still count and become last results."""
        with self._lock:
            self.stopping = True
            for probe in list(self.probes):
                cur = self.probes[probe]
                self.set(probe, "stopping", f"stopping: {cur.text}" if cur.state == "flashing" else "stopping")

    def set(
        self,
        probe: str,
        state: str,
        text: str,
        target_uid: Optional[str] = None,
        percent: int = 0,
        serial: Optional[str] = None,
        phase: Optional[str] = None,
        error: Optional[Dict[str, object]] = None,
        row: Optional[int] = None,
    ) -> None:
        """Change ``probe``'s state; outputs hear of it unless nothing changed. ``serial`` is kept
        until the probe waits for a new board. ``phase``: the phase running while flashing;
        ``error`` (the result's error dict) and ``row`` (its history row id): a result's details."""
        with self._lock:
            cur = self.probes.setdefault(probe, ProbeState(probe))
            entered = cur.asked != state  # the state the worker asked for, before "stopping"
            cur.asked = state
            cur.phase = phase if state == "flashing" else None
            if state in ("pass", "skip", "fail"):
                cur.last, cur.last_state = text, state
                cur.last_result = {
                    "outcome": state,
                    "text": scrub(text),
                    "target_uid": target_uid if target_uid is not None else cur.target_uid,
                    "serial": serial if serial is not None else cur.serial,
                    "error": _scrubbed(error),
                    "history_id": row,
                    "ended_at": _now_iso(),
                }
                if entered:
                    self.counts[state] += 1
                if self.stopping:  # the result is the last result; the probe stays "stopping"
                    state, text = "stopping", "stopping"
            elif state == "flashing" and cur.state != "flashing" and not self.stopping:
                cur.last, cur.last_state = "", ""  # the next board: its own result comes
                cur.last_result = None
            if self.stopping and state in ("flashing", "waiting", "waiting_probe", "button"):
                text = f"stopping: {text}" if state == "flashing" else "stopping"
                state = "stopping"
            new_state = cur.state != state
            if not new_state and cur.text == text and (serial is None or serial == cur.serial):
                if entered:  # a result while stopping: the text shows nothing new, the counts do
                    self._tell(cur, False, every=True)
                return
            cur.state, cur.text, cur.percent = state, text, percent
            if target_uid is not None or state in ("waiting", "waiting_probe"):
                cur.target_uid = target_uid
            if serial is not None or state in ("waiting", "waiting_probe"):
                cur.serial = serial
            self._tell(cur, new_state)

    def _tell(self, cur: ProbeState, new_state: bool, every: bool = False) -> None:
        """Pass a change to the outputs (``every``: only those that hear every change, as
        :class:`StatusFile`, whose ``every_change`` is True)."""
        for out in self.outputs:
            if every and not getattr(out, "every_change", False):
                continue
            try:
                out.update(self, cur, new_state)
            except Exception:  # a broken LED must not stop the station
                LOG.exception("status output %s failed", type(out).__name__)

    def forget(self, probe: str) -> None:
        """Stop showing ``probe`` (its worker retired after a reload)."""
        with self._lock:
            self.probes.pop(probe, None)

    def line(self) -> str:
        """The one-line summary systemd shows (see the module docstring)."""
        with self._lock:
            states = list(self.probes.values())
        if len(states) == 1:
            return states[0].text
        return " | ".join(f"{s.probe}: {s.text}" for s in states) or "starting"

    def summary(self) -> str:
        """``"N passed, N failed, N skipped"`` (each board's result counted once)."""
        c = self.counts
        return f"{c['pass']} passed, {c['fail']} failed, {c['skip']} skipped"

    def close(self) -> None:
        """Close every output (stops the rich view, releases GPIO pins)."""
        for out in self.outputs:
            try:
                out.close()
            except Exception:
                LOG.exception("closing status output %s failed", type(out).__name__)


class LogOutput:
    """A plain line per state change (progress percentages are not logged)."""

    def __init__(self, stream: TextIO = sys.stdout) -> None:
        self._stream = stream
        self._serial: Dict[str, Optional[str]] = {}  # serial last shown per probe

    def update(self, board: StatusBoard, st: ProbeState, new_state: bool) -> None:
        # While flashing, only the start is logged, and again once the board's serial is known
        # (the skip check runs before a number is taken).
        if st.state == "flashing" and not new_state and self._serial.get(st.probe) == st.serial:
            return
        self._serial[st.probe] = st.serial
        text = f"flashing {st.target_uid or 'board'}" if st.state == "flashing" else st.text
        if st.state == "flashing" and st.serial is not None:
            text += f" serial {st.serial}"
        print(f"{st.probe}: {scrub(text)}", file=self._stream, flush=True)

    def close(self) -> None:
        pass


class NotifyOutput:
    """systemd's STATUS line, sent when it changes."""

    def __init__(self, notifier) -> None:
        self._notifier = notifier
        self._last = None

    def update(self, board: StatusBoard, st: ProbeState, new_state: bool) -> None:
        line = board.line()
        if line != self._last:
            self._last = line
            self._notifier.status(line)

    def close(self) -> None:
        pass


_STYLES = {"pass": "bold green", "skip": "green", "fail": "bold red", "flashing": "yellow"}


class RichOutput:
    """A live table, one row per probe, with the totals below (for an interactive terminal)."""

    def __init__(self, board: StatusBoard, station: str) -> None:
        from rich.live import Live

        self._board, self._station = board, station
        self._live = Live(get_renderable=self._render, refresh_per_second=4, transient=False)
        self._live.start()

    def _render(self):
        from rich.table import Table

        table = Table(title=f"piflash station {self._station}", caption=self._board.summary(), expand=False)
        from rich.text import Text

        states = list(self._board.probes.values())
        serials = any(st.serial is not None for st in states)
        for name in ("probe", "board") + (("serial",) if serials else ()) + ("state",):
            table.add_column(name, overflow="fold")
        table.add_column("last result", overflow="fold")
        for st in states:
            cells = (st.probe, st.target_uid or "-") + ((st.serial or "-",) if serials else ()) + (st.text,)
            table.add_row(
                *cells, Text(st.last or "-", style=_STYLES.get(st.last_state, "")), style=_STYLES.get(st.state, "")
            )
        return table

    def update(self, board: StatusBoard, st: ProbeState, new_state: bool) -> None:
        pass  # the Live view redraws from the board itself

    def close(self) -> None:
        self._live.stop()


class GpioOutput:
    """LEDs, a buzzer and a start button on the Pi's GPIO header, through gpiozero.

    ``busy_led`` is lit while a board is being flashed, ``pass_led`` / ``fail_led`` show the last
    result until that board is removed, the ``buzzer`` beeps once (0.1 s) for a pass and three
    times for a failure. With a ``button``, a board found on the fixture waits for a press
    (:meth:`wait_for_press`) before it is flashed.

    :param pins: role -> BCM pin (see :data:`piflash.station.config.GPIO_ROLES`).
    :raises ExtraMissingError: gpiozero is not installed (``pip install 'piflash[gpio]'``).
    """

    def __init__(self, pins: Dict[str, int]) -> None:
        try:
            import gpiozero
        except ImportError:
            from piflash.errors import extra_missing

            exc = extra_missing("gpio")
            exc.hint += ", or remove 'gpio' from the station config"
            raise exc from None
        self._devices = {}
        for role, pin in pins.items():
            if role == "button":
                self._devices[role] = gpiozero.Button(pin)
            elif role == "buzzer":
                self._devices[role] = gpiozero.Buzzer(pin)
            else:
                self._devices[role] = gpiozero.LED(pin)
        self._presses = 0
        self._pressed = threading.Condition()
        if "button" in self._devices:
            self._devices["button"].when_pressed = self._on_press

    @property
    def has_button(self) -> bool:
        """Whether a start button is configured."""
        return "button" in self._devices

    def _on_press(self, *args) -> None:
        with self._pressed:
            self._presses += 1
            self._pressed.notify_all()

    def presses(self) -> int:
        """How many times the button has been pressed so far."""
        return self._presses

    def wait_for_press(self, after: int, stop: threading.Event, poll: float = 0.1) -> bool:
        """Wait until the button has been pressed more than ``after`` times in all, or ``stop``
        is set. Returns True for a press."""
        with self._pressed:
            while self._presses <= after:
                if stop.is_set():
                    return False
                self._pressed.wait(poll)
        return True

    def _led(self, role: str, on: bool) -> None:
        dev = self._devices.get(role)
        if dev is not None:
            dev.on() if on else dev.off()

    def update(self, board: StatusBoard, st: ProbeState, new_state: bool) -> None:
        if not new_state:
            return
        self._led("busy_led", st.state == "flashing")
        if st.state in ("pass", "skip", "fail"):
            self._led("pass_led", st.state != "fail")
            self._led("fail_led", st.state == "fail")
            buzzer = self._devices.get("buzzer")
            if buzzer is not None:
                n = 3 if st.state == "fail" else 1
                buzzer.beep(on_time=0.1, off_time=0.1, n=n, background=True)
        elif st.state in ("waiting", "waiting_probe", "stopping"):
            self._led("pass_led", False)
            self._led("fail_led", False)

    def close(self) -> None:
        for dev in self._devices.values():
            dev.close()


def status_path(history: Optional[Path]) -> Path:
    """Where the station writes :data:`STATUS_FILE`: ``$RUNTIME_DIRECTORY`` (systemd's
    ``RuntimeDirectory=``) when set, else the folder of ``history`` (the history database's path).

    :raises HistoryError: (exit 18) neither is known (``PIFLASH_HISTORY=off`` and no ``history:``).
    """
    from piflash import settings

    runtime = settings.RUNTIME_DIRECTORY.value()
    if runtime:
        return Path(runtime) / STATUS_FILE
    if history is None:
        from piflash.errors import HistoryError

        raise HistoryError("the station has no history, so no folder for its status file")
    return Path(history).parent / STATUS_FILE


def status_candidates(history: Optional[Path]) -> List[Path]:
    """Where ``piflash station status`` looks, in order (the first that exists is read): the
    station's own :func:`status_path` as this environment gives it, the systemd unit's
    :data:`UNIT_RUNTIME_DIRECTORY`, then beside ``history``."""
    found: List[Path] = []
    try:
        found.append(status_path(history))
    except Exception:  # noqa: BLE001 - no history: the other places still count
        pass
    for path in (UNIT_RUNTIME_DIRECTORY / STATUS_FILE, Path(history).parent / STATUS_FILE if history else None):
        if path is not None and path not in found:
            found.append(path)
    return found


def write_atomically(path: Path, text: str, mode: int = 0o644) -> None:
    """Replace ``path`` by a file holding ``text`` so that no reader ever sees half of it: a
    temporary file in the same folder, written, fsync'd, given ``mode``, then ``os.replace``d
    over ``path`` (a rename within one file system is atomic, rename(2)).

    :raises OSError: the folder cannot be written (the temporary file is removed).
    """
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
            os.fchmod(out.fileno(), mode)  # mkstemp makes 0600; the file holds no secret
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


class StatusFile:
    """The station's live state in one JSON file (:data:`STATUS_FILE`), replaced atomically
    (:func:`write_atomically`, mode 0644) at each change: at once for a new state or a result,
    at most every :data:`PROGRESS_INTERVAL` seconds for progress alone (a timer writes the last
    one). ``piflash station status``, the metrics and the operator's page read it; its schema
    is ``station_status`` in docs/result.schema.json (docs/station.md "station status").

    :param path: the file (its folder must exist).
    :param board: the :class:`StatusBoard` whose slots and counts it shows.
    :param header: ``header() -> dict``: the station's fields of the moment (``station``,
        ``config``, ``history``, ``profile``, ``target``, ``firmware`` ``{path, sha256}``,
        ``bundle_version``, ``ledger`` ``{url, reached, queued}`` or None), called at each write.
    :param interval: seconds between progress-only writes.
    """

    every_change = True  #: hears results that change no text (while stopping): the counts change

    def __init__(
        self, path: Path, board: StatusBoard, header: Callable[[], Dict[str, Any]], interval: float = PROGRESS_INTERVAL
    ) -> None:
        from piflash.record.history import process_identity

        self.path, self._board, self._header, self._interval = Path(path), board, header, interval
        self.pid, self.host, self.process_start = os.getpid(), socket.gethostname(), process_identity()
        self.started_at = _now_iso()
        self.stopped_at: Optional[str] = None
        self._first_start: Optional[float] = None  # time.time() the first board started
        self._last_end: Optional[float] = None  # ... and the last result came
        self._done = 0  # results seen
        self._written = 0.0  # time.monotonic() of the last write
        self._timer: Optional[threading.Timer] = None
        self._failing = False  # the last write failed (logged once)
        self._lock = threading.RLock()
        self.write()

    def document(self) -> Dict[str, Any]:
        """The file's object (see the class docstring and docs/result.md)."""
        from piflash.probe.selector import kind_of
        from piflash.record.result import SCHEMA_VERSION

        with self._board._lock:
            states = list(self._board.probes.values())
            counts = dict(self._board.counts)
            slots = [
                {
                    "probe_id": st.probe,
                    "probe_kind": kind_of(st.probe).name,
                    "state": st.state,
                    "text": scrub(st.text),
                    "phase": st.phase,
                    "progress": round(st.percent / 100, 2) if st.state == "flashing" or st.phase else None,
                    "target_uid": st.target_uid,
                    "serial": st.serial,
                    "last_result": dict(st.last_result) if st.last_result else None,
                }
                for st in states
            ]
        passed, failed, skipped = counts["pass"], counts["fail"], counts["skip"]
        boards = passed + failed + skipped
        rate = None
        if passed >= 2 and self._first_start is not None and self._last_end is not None:
            hours = (self._last_end - self._first_start) / 3600
            rate = round(passed / hours, 1) if hours > 0 else None
        doc: Dict[str, Any] = {"schema_version": SCHEMA_VERSION}
        doc.update(self._header())
        doc.update(
            pid=self.pid,
            host=self.host,
            process_start=self.process_start,
            started_at=self.started_at,
            updated_at=_now_iso(),
            stopped_at=self.stopped_at,
            slots=slots,
            counters={
                "passed": passed,
                "failed": failed,
                "skipped": skipped,
                "yield": round((passed + skipped) / boards, 4) if boards else None,
                "boards_per_hour": rate,
            },
        )
        return doc

    def write(self) -> None:
        """Write the file now (a failure is logged: the status file never stops a station).
        Locks the board, then this file, as :meth:`StatusBoard.set` does: the timer's write can
        neither deadlock with a worker's nor put an older state over a newer one."""
        with self._board._lock, self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            self._written = time.monotonic()
            try:
                write_atomically(self.path, json.dumps(self.document(), indent=2) + "\n")
                self._failing = False
            except OSError as exc:
                if not self._failing:  # said once per outage, not twice a second
                    LOG.error("status file %s not written: %s", self.path, exc)
                self._failing = True

    def update(self, board: StatusBoard, st: ProbeState, new_state: bool) -> None:
        with self._lock:
            now = time.time()
            if st.state == "flashing" and self._first_start is None:
                self._first_start = now
            done = sum(board.counts.values())
            result = done != self._done
            if result:
                self._done, self._last_end = done, now
            if new_state or result or st.state != "flashing":
                self.write()
                return
            wait = self._interval - (time.monotonic() - self._written)
            if wait <= 0:
                self.write()
            elif self._timer is None:  # the last progress is written when the interval is up
                self._timer = threading.Timer(wait, self.write)
                self._timer.daemon = True
                self._timer.start()

    def close(self) -> None:
        """The station stopped: write the last state with ``stopped_at``."""
        with self._board._lock, self._lock:
            self.stopped_at = _now_iso()
            self.write()


def read_status(path: Path) -> Dict[str, Any]:
    """The status file at ``path`` (the object :class:`StatusFile` writes).

    :raises StationDownError: (exit 29) no file there, or it is not a station status file.
    """
    from piflash.errors import StationDownError

    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise StationDownError(
            f"no station status file at {path}: the station is not running",
            hint="start it: piflash station run --config FILE (or systemctl start piflash-station)",
        ) from None
    except OSError as exc:
        raise StationDownError(f"cannot read the station status file {path}: {exc.strerror or exc}") from None
    try:
        doc = json.loads(text)
        if not isinstance(doc, dict) or not isinstance(doc.get("slots"), list):
            raise ValueError("no slots")
    except ValueError as exc:
        raise StationDownError(f"{path} is not a station status file: {exc}") from None
    return doc


def station_alive(doc: Dict[str, Any]) -> Optional[bool]:
    """Whether the station that wrote ``doc`` still runs (its pid and process start, by
    :func:`piflash.record.history.process_alive`): False once it stopped or died, None when the
    file comes from another host."""
    from piflash.record.history import process_alive

    if doc.get("stopped_at"):
        return False
    return process_alive(doc.get("host"), doc.get("pid"), doc.get("process_start"))


__all__ = [
    "StatusBoard",
    "ProbeState",
    "LogOutput",
    "NotifyOutput",
    "RichOutput",
    "GpioOutput",
    "StatusFile",
    "STATES",
    "STATUS_FILE",
    "status_path",
    "status_candidates",
    "write_atomically",
    "read_status",
    "station_alive",
]
