"""Probe workers in processes of their own (``workers: processes`` in the station config), so that
N probes use N cores: the station's threads share one GIL, and on a Zero 2W the host's CPU per
USB transfer bounds a board (docs/benchmarks.md, "Host cost").

The station (the supervisor) keeps what must stay single: the history (one writer, one hash
chain), the status board and its outputs, systemd, the signals. Each worker process is a
:func:`os.fork` of the station after it loaded the config, the firmware and pyOCD, so those pages
are shared copy-on-write; it runs the same :class:`~piflash.station.worker.ProbeWorker` loop as a
thread would, against :class:`ChildStation`, which forwards status changes, heartbeats and the
history calls (open, complete, note a serial) over a pipe to the station and waits for the
answer of each call. The serial allocator is per process, as for several stations: the serial
database hands out leases under its own lock (:mod:`piflash.production.serials`), and a worker
process returns its lease's unused numbers when it ends.

A worker process that dies (killed, crashed) is seen by its pipe closing: the station seals its
open row as interrupted (:meth:`piflash.record.history.History.reap`, which recognises the
dead process by its pid), checks memory (:func:`piflash.station.loop.memory_guard`) and starts
a new one for the probe, unless the station is stopping.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import threading
import time
from typing import Optional

LOG = logging.getLogger(__name__)

__all__ = ["ProcessWorker", "ChildStation", "WORKER_MODES", "fork_context"]

#: The station config's ``workers:`` values.
WORKER_MODES = ("threads", "processes")
#: Seconds between two heartbeats a worker process sends while it shows no other sign of life.
BEAT_INTERVAL = 1.0


def fork_context():
    """multiprocessing's ``fork`` context: the children share the station's imported pyOCD and
    loaded firmware pages (``spawn`` would import everything again in every worker)."""
    return multiprocessing.get_context("fork")


class _ChildStatus:
    """The status board as a worker process sees it: every change goes to the station."""

    def __init__(self, send) -> None:
        self._send = send

    def set(self, probe, state, text, target_uid=None, percent=0, serial=None, **detail) -> None:
        self._send(("status", (probe, state, text, target_uid, percent, serial), detail))


class ChildStation:
    """What a :class:`~piflash.station.worker.ProbeWorker` needs of the station, inside a worker
    process: the loaded config (a fork-time copy), the station's stop and abort events (shared
    process-wide events), and the history calls, made by the station and answered over ``conn``.

    :param loaded: the station's :class:`~piflash.station.config.LoadedStation`.
    :param stop: / abort: multiprocessing events set by the station.
    :param conn: this worker's end of the pipe.
    """

    def __init__(self, loaded, stop, abort, conn, uid: str = "") -> None:
        self.loaded = loaded
        #: Who holds this process's serial leases: ``STATION/PROBE``. One holder per process, as
        #: for two stations: a worker's allocator, when it starts, closes its holder's leases as
        #: a crash left them (serials.py), which must never be a live sibling's. The worker that
        #: replaces a dead one (same probe) recovers the dead one's lease.
        self.serial_holder = f"{loaded.config.station}/{uid}"
        self.stop = stop
        self.abort = abort
        self.gpio = None  # 'workers: processes' refuses a gpio section
        self._conn = conn
        self._lock = threading.Lock()
        self.status = _ChildStatus(self._send)

    def _send(self, message) -> None:
        with self._lock:
            self._conn.send(message)

    def _call(self, name: str, *args):
        with self._lock:
            self._conn.send(("call", name, args))
            kind, value = self._conn.recv()
        if kind == "error":
            raise value
        return value

    def open_row(self, result, slot: str) -> Optional[int]:
        """:meth:`piflash.station.loop.Station.open_row`, made by the station."""
        return self._call("open_row", result, slot, os.getpid())

    def complete_row(self, row: int, result, outcome: str) -> Optional[int]:
        """:meth:`piflash.station.loop.Station.complete_row`, made by the station."""
        return self._call("complete_row", row, result, outcome)

    def note_serial(self, row: int, serial: int) -> None:
        """:meth:`piflash.station.loop.Station.note_serial`, made by the station.

        :raises HistoryError: as the station's raised it.
        """
        self._call("note_serial", row, serial)

    def note_patch(self, row: int, patch: dict) -> None:
        """:meth:`piflash.station.loop.Station.note_patch`, made by the station."""
        self._call("note_patch", row, patch)

    def list_used_up(self, message: str) -> None:
        """:meth:`piflash.station.loop.Station.list_used_up`, made by the station."""
        self._call("list_used_up", message)


def _child_main(loaded, stop, abort, wake, retired, uid: str, conn) -> None:
    """A worker process: the ProbeWorker loop in this process's main thread. It ignores SIGINT,
    SIGTERM and SIGHUP: a Ctrl-C reaches every process of the terminal's process group and
    systemd's stop the whole cgroup, and the station alone decides (its stop event, shared)."""
    import signal

    from piflash.station.bootsel import worker_class
    from piflash.station.worker import release_allocators

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)

    station = ChildStation(loaded, stop, abort, conn, uid)
    worker = worker_class(uid)(station, uid)
    worker._wake = wake  # the station's wake() and retire() reach this process
    worker.retired = retired
    done = threading.Event()

    def beats() -> None:
        last = None
        while not done.wait(BEAT_INTERVAL / 2):
            if worker.beat != last:
                last = worker.beat
                try:
                    station._send(("beat",))
                except OSError:
                    return

    threading.Thread(target=beats, name="beats", daemon=True).start()
    try:
        worker.run()
    finally:
        done.set()
        release_allocators()  # this process's lease goes back to the counter
        conn.close()


class ProcessWorker:
    """The station's handle on one worker process; what the station asks of a worker thread
    (start, is_alive, join, wake, retire, beat) it asks of this.

    :param station: the running :class:`piflash.station.loop.Station` (its ``stop`` and
        ``abort`` must be :func:`fork_context` events).
    :param uid: the probe's unique ID.
    :param on_exit: called with this worker when its process ended while the station was not
        stopping and the worker was not retired (the station restarts it).
    """

    def __init__(self, station, uid: str, on_exit=None) -> None:
        ctx = fork_context()
        self.station, self.uid = station, uid
        self.beat = time.monotonic()
        self._wake = ctx.Event()
        self.retired = ctx.Event()
        self._conn, child_conn = ctx.Pipe()
        self._on_exit = on_exit
        self.process = ctx.Process(
            target=_child_main,
            name=f"piflash worker {uid}",
            args=(station.loaded, station.stop, station.abort, self._wake, self.retired, uid, child_conn),
        )
        self._child_conn = child_conn
        self._reader = threading.Thread(target=self._serve, name=f"worker {uid} pipe", daemon=True)

    def start(self) -> None:
        """Fork the worker process and serve its pipe. The station's objects are moved to the
        collector's permanent generation first (:func:`gc.freeze`, which the Python docs advise
        before a fork): a collection in the worker then never writes to them, and their pages
        stay shared instead of being copied into every worker."""
        import gc

        gc.freeze()
        self.process.start()
        self._child_conn.close()  # the station keeps only its own end
        self._reader.start()

    def is_alive(self) -> bool:
        return self.process.is_alive() or self._reader.is_alive()

    def join(self, timeout: Optional[float] = None) -> None:
        self.process.join(timeout)
        if not self.process.is_alive():
            self._reader.join(timeout)

    def wake(self) -> None:
        """Cut the worker's current pause short."""
        self._wake.set()

    def retire(self) -> None:
        """Finish the current board, then end (the probe left the config, or a reload)."""
        self.retired.set()
        self.wake()

    @property
    def pid(self) -> Optional[int]:
        return self.process.pid

    def _serve(self) -> None:
        station = self.station
        while True:
            try:
                message = self._conn.recv()
            except (EOFError, OSError):
                break
            self.beat = time.monotonic()
            kind = message[0]
            if kind == "status":
                station.status.set(*message[1], **(message[2] if len(message) > 2 else {}))
            elif kind == "call":
                _, name, args = message
                try:
                    reply = ("ok", getattr(station, name)(*args))
                except Exception as exc:  # noqa: BLE001 - the worker raises it as its own
                    reply = ("error", exc)
                try:
                    self._conn.send(reply)
                except OSError:
                    break
        self.process.join(5)
        code = self.process.exitcode
        if not (station.stop.is_set() or self.retired.is_set()):
            LOG.error("worker process for probe %s ended (exit code %s): starting a new one", self.uid, code)
            if self._on_exit is not None:
                self._on_exit(self)
