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

import logging
import sys
import threading
from dataclasses import dataclass
from typing import Dict, List, Optional, TextIO

from piflash.redact import scrub

LOG = logging.getLogger(__name__)

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
    ) -> None:
        """Change ``probe``'s state; outputs hear of it unless nothing changed. ``serial`` is kept
        until the probe waits for a new board."""
        with self._lock:
            cur = self.probes.setdefault(probe, ProbeState(probe))
            entered = cur.asked != state  # the state the worker asked for, before "stopping"
            cur.asked = state
            if state in ("pass", "skip", "fail"):
                cur.last, cur.last_state = text, state
                if entered:
                    self.counts[state] += 1
                if self.stopping:  # the result is the last result; the probe stays "stopping"
                    state, text = "stopping", "stopping"
            elif state == "flashing" and cur.state != "flashing" and not self.stopping:
                cur.last, cur.last_state = "", ""  # the next board: its own result comes
            if self.stopping and state in ("flashing", "waiting", "waiting_probe", "button"):
                text = f"stopping: {text}" if state == "flashing" else "stopping"
                state = "stopping"
            new_state = cur.state != state
            if not new_state and cur.text == text and (serial is None or serial == cur.serial):
                return
            cur.state, cur.text, cur.percent = state, text, percent
            if target_uid is not None or state in ("waiting", "waiting_probe"):
                cur.target_uid = target_uid
            if serial is not None or state in ("waiting", "waiting_probe"):
                cur.serial = serial
            for out in self.outputs:
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


__all__ = ["StatusBoard", "ProbeState", "LogOutput", "NotifyOutput", "RichOutput", "GpioOutput", "STATES"]
