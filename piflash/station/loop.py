"""The station: load the config, run a worker per probe, reload on SIGHUP, stop cleanly.

:class:`Station` is usable without the CLI::

    from piflash.station.loop import Station
    Station("station.yaml").run()        # returns 0 after SIGTERM/SIGINT

Signals (installed by :meth:`Station.run`, which must run in the main thread):

- SIGTERM / SIGINT: take no new board; a board being flashed is finished and recorded; then
  exit 0. A second SIGTERM/SIGINT aborts that board at its next progress step (recorded as
  ``fail``, "station stopped during program"), but only when it comes at least
  :data:`REPEAT_WINDOW` seconds after the first: one user action often delivers the signal
  twice at once (Ctrl-C reaches every process of the terminal's foreground process group;
  GNU ``timeout`` signals its child and then its own process group, see ``cleanup()`` in
  coreutils' ``src/timeout.c``), and one action must count once.
- SIGHUP: reload the config. The new one is validated first (profile, firmware, checksum); if
  it is broken the error is logged and the old config stays. A board being flashed finishes
  with the config it started with.

With ``job: ledger:LINE`` the main loop asks the ledger for the line's newest job every
:data:`JOB_POLL` seconds (one small query); a newer one is taken as a reload takes a config
(fetched, verified, switched between boards); one refused (unverifiable, or older than the one
running) is logged once and the station keeps what it has.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
import time
from typing import Dict, Optional, TextIO

from piflash.redact import scrub
from piflash.station.config import LoadedStation, load_station
from piflash.station.sdnotify import Notifier
from piflash.station.status import LogOutput, NotifyOutput, StatusBoard

LOG = logging.getLogger(__name__)

#: Seconds between two looks at the ledger for a newer job (``job: ledger:LINE``): one indexed
#: query of a few bytes (no bundle bytes), so a line of stations costs the database little, and a
#: job published reaches every station within this time (a board being flashed then finishes with
#: the job it started with). piflash's own choice: shorter than taking a board off and placing the next.
JOB_POLL = 1.0

#: Seconds after a first SIGTERM/SIGINT during which another one is taken for the same request
#: (a duplicate delivery), not for "abort the board". A person pressing Ctrl-C again on purpose
#: takes longer; duplicate deliveries arrive within milliseconds.
REPEAT_WINDOW = 1.0

#: History rows the status file carries (``recent``), for the operator's page (issue 44: "the
#: last 20 history rows").
RECENT_ROWS = 20


def _recent_row(row: dict) -> dict:
    """A history row as the status file's ``recent`` gives it: times as ISO 8601 (local, with the
    offset, as docs/result.md), ``duration`` in seconds, the error scrubbed of secrets."""
    from datetime import datetime

    def iso(t):
        return datetime.fromtimestamp(t).astimezone().isoformat(timespec="milliseconds") if t is not None else None

    started, ended = row.get("started_at"), row.get("ended_at")
    return {
        "id": row["id"],
        "started_at": iso(started),
        "ended_at": iso(ended),
        "duration": round(ended - started, 3) if started is not None and ended is not None else None,
        "probe_id": row.get("probe_id"),
        "target_uid": row.get("target_uid"),
        "serial": row.get("serial"),
        "outcome": row.get("outcome"),
        "exit_code": row.get("exit_code"),
        "error_kind": row.get("error_kind"),
        "error": scrub(row["error"]) if row.get("error") else None,
    }


def slot_of(result) -> str:
    """A result's probe for the metrics' label (its probe ID; "unknown" before the probe was named)."""
    return result.probe_id or "unknown"


def _safe_url(url: str) -> str:
    from piflash.record.ledger import safe_url

    return safe_url(url)


def memory_guard(config_path, force: bool = False) -> None:
    """Run piflash's memory guard for the station before pyOCD is imported.

    Reads the config and its profile without checking the target type (that needs pyOCD), then
    :func:`piflash.profiles.check_job` with the profile's firmware and ``memory_guard`` key; for a
    ``bundle:``, with the bundle file's size (not verified here: :func:`load_station` does, once).

    :raises MemoryGuardError: (exit 14) the station would not fit in memory plus swap.
    :raises ProfileError: (exit 5) the config or its profile is broken.
    """
    from piflash.profiles import check_job
    from piflash.station.config import bundle_path, has_job, load_config

    bundle = bundle_path(config_path)
    if bundle is not None:  # its verification is paid once, by load_station: sized by its file here
        check_job("station", firmware=bundle, force=force, warn=LOG.warning)
        return
    if has_job(config_path):  # fetched from the ledger by load_station (at most
        return  # piflash.limits.BUNDLE_MAX_BYTES), not twice per start
    config = load_config(config_path)
    check_job("station", profile=str(config.profile.path), force=force, warn=LOG.warning)


class Station:
    """A running flashing station.

    :param config_path: the station config (YAML, see :mod:`piflash.station.config`).
    :param interactive: draw a rich live view (default: stdout is a terminal and we do not run
        under systemd); otherwise plain log lines on ``stream``.
    :param notifier: systemd notifier (default: from the environment; a no-op outside systemd).
    :param stream: where plain status lines go (default stdout).
    :ivar stop: set when the station stops taking boards. :ivar abort: set to abort boards
        being flashed. :ivar loaded: the current :class:`LoadedStation`.
    """

    def __init__(
        self,
        config_path,
        interactive: Optional[bool] = None,
        notifier: Optional[Notifier] = None,
        stream: TextIO = sys.stdout,
        force: bool = False,
    ) -> None:
        self.config_path = config_path
        self.force = force
        self.notifier = notifier or Notifier()
        if interactive is None:
            interactive = stream.isatty() and not self.notifier.enabled
        self.interactive = interactive
        self.stream = stream
        self.stop = threading.Event()
        self.abort = threading.Event()
        self.loaded: Optional[LoadedStation] = None
        self.status = StatusBoard()
        self.gpio = None
        self.workers: Dict[str, object] = {}
        self._retired: list = []  # workers finishing a board after a reload
        self._history = None
        self._history_lock = threading.Lock()
        self._wake = threading.Event()
        self._reload_requested = False
        self._first_stop: Optional[float] = None  # time.monotonic() of the first stop request
        self._dead: list = []  # probes whose worker process died (restarted by run())
        self._uploader = None  # the ledger's uploader (piflash.record.ledger), if any
        self.metrics = None  # the Prometheus textfile (piflash.station.metrics), if any
        self.status_file = None  # the live state for 'piflash station status' (piflash.station.status)
        self.web = None  # the operator's page (piflash.station.web.WebServer), with web_port:
        self._recent: Optional[list] = None  # the history's last rows for the status file, until a row changes
        self.exit_code = 0  # what run() returns: 22 once the profile's list is used up
        self._job_db = None  # the ledger connection a job: ledger:LINE is followed on
        self._job_checked = 0.0  # time.monotonic() of the last look at the ledger for a newer job
        self._job_kept: Optional[tuple] = None  # (version, sha256) of a job refused: said once
        self._job_down = False

    # -- start-up -----------------------------------------------------------------------------
    def start(self) -> None:
        """Load the config and firmware, open the history, start the workers, send READY=1.

        :raises ProfileError: (exit 5) a broken config or profile; FirmwareError (3),
            ChecksumError (6), ImageRangeError (4); HistoryError (18) when the history cannot be
            opened or written: a station whose boards would not be recorded does not start.
        """
        memory_guard(self.config_path, self.force)
        self.loaded = load_station(self.config_path)  # imports pyOCD (target check)
        cfg = self.loaded.config
        if cfg.workers == "processes":
            self._use_process_events()
        self._open_history()
        if cfg.profile.unit_list is not None:  # a used-up list stops here, before any board
            from piflash.station.worker import check_list_left

            check_list_left(cfg)
        outputs = [NotifyOutput(self.notifier)]
        if self.interactive:
            from piflash.station.status import RichOutput

            outputs.append(RichOutput(self.status, cfg.station))
        else:
            outputs.append(LogOutput(self.stream))
        if cfg.gpio:
            from piflash.station.status import GpioOutput

            self.gpio = GpioOutput(cfg.gpio)
            outputs.append(self.gpio)
        self.status.outputs = outputs
        self._start_status_file()
        self._log(
            f"station {cfg.station}: profile {cfg.profile.name} ({cfg.profile.target}, "
            f"{cfg.profile.firmware.name}, {self.loaded.image.size:,} bytes), probes "
            f"{', '.join(cfg.probes) if cfg.probes else 'any'}, on same firmware: "
            f"{cfg.on_same_firmware}, history {self._history.path}"
            + (", a process per probe" if cfg.workers == "processes" else "")
            + (", ledger " + _safe_url(cfg.ledger) if cfg.ledger else "")
        )
        self._start_uploader()
        self._start_metrics()
        self._start_web()
        self._reconcile_workers()
        self.notifier.ready(self.status.line())

    def _start_status_file(self) -> None:
        """The status file (:class:`piflash.station.status.StatusFile`), in ``$RUNTIME_DIRECTORY``
        or beside the history; moved there when a reload changes the history."""
        from piflash.station.status import StatusFile, status_path

        path = status_path(self._history.path)
        if self.status_file is None:
            self.status_file = StatusFile(path, self.status, self._status_header)
            self.status.outputs.append(self.status_file)
        elif self.status_file.path != path:
            self.status_file.path = path
            self.status_file.write()

    def _status_header(self) -> dict:
        """The station's fields of the status file (see :class:`piflash.station.status.StatusFile`)."""
        cfg, loaded, uploader = self.loaded.config, self.loaded, self._uploader
        ledger = None
        if cfg.ledger:
            reached = uploader.reached if uploader is not None else None
            queued = uploader.queued() if uploader is not None else None
            ledger = {"url": _safe_url(cfg.ledger), "reached": reached, "queued": queued}
        return {
            "station": cfg.station,
            "config": str(cfg.path),
            "history": str(self._history.path),
            "profile": cfg.profile.name,
            "target": cfg.profile.target,
            "firmware": {"path": str(cfg.profile.firmware), "sha256": loaded.image.sha256},
            "bundle_version": cfg.bundle.manifest.version if cfg.bundle is not None else None,
            "ledger": ledger,
            "recent": self._recent_rows(),
        }

    def _recent_rows(self) -> list:
        """This station's last :data:`RECENT_ROWS` history rows, newest first, as the status file
        gives them (``recent`` in docs/result.md): read once after each row opened or completed,
        not at every progress write. A history that cannot be read gives [] (logged)."""
        from piflash.record.history import HistoryError

        if self._recent is None:
            try:
                with self._history_lock:
                    rows = self._history.query(station=self.loaded.config.station, limit=RECENT_ROWS)
            except HistoryError as exc:
                LOG.error("the status file's recent rows: %s", exc.message)
                return []
            self._recent = [_recent_row(r) for r in reversed(rows)]
        return self._recent

    def _start_web(self) -> None:
        """With ``web_port:``, the operator's page (:class:`piflash.station.web.WebServer`), kept
        over a reload that keeps its port, address and token.

        :raises ProfileError: (exit 5) the port cannot be served (in use, or not this machine's address).
        :raises ExtraMissingError: (exit 17) Starlette or uvicorn is missing (the ``web`` extra).
        """
        cfg = self.loaded.config
        want = (cfg.web_port, cfg.web_bind, cfg.web_token) if cfg.web_port is not None else None
        old = self.web
        if old is not None and want == (old.wanted_port, old.bind, old.token):
            return
        if old is not None:
            old.close()
        self.web = None
        if want is None:
            return
        from piflash.errors import ProfileError, extra_missing

        try:
            from piflash.station.web import WebServer
        except ImportError as exc:  # pragma: no cover - the module imports nothing of the extra
            raise extra_missing("web", str(exc)) from None
        try:
            self.web = WebServer(lambda: self.status_file.path, cfg.web_port, cfg.web_bind, cfg.web_token)
        except ImportError as exc:
            raise extra_missing("web", str(exc)) from None
        except OSError as exc:
            raise ProfileError(
                f"{cfg.path}: key 'web_port': cannot serve the operator's page on {cfg.web_bind} port "
                f"{cfg.web_port}: {exc.strerror or exc}",
                hint="another program (or station) uses the port, or web_bind is not an address of this machine",
            ) from None
        self._log(f"operator's page: {self.web.url}" + (" (with its token)" if cfg.web_token else ""))

    def _start_metrics(self) -> None:
        """With ``metrics:`` and/or ``metrics_port:``, the Prometheus metrics (kept over a reload
        that keeps both). :raises ProfileError: the port cannot be served (in use)."""
        cfg = self.loaded.config
        path = str(cfg.metrics) if cfg.metrics is not None else None
        old = self.metrics
        if old is not None and (old.path, old.port) == (path, cfg.metrics_port):
            return
        if old is not None:
            old.close()
        self.metrics = None
        if path is None and cfg.metrics_port is None:
            return
        from piflash.errors import ProfileError
        from piflash.station.metrics import StationMetrics

        try:
            self.metrics = StationMetrics(
                cfg.metrics,
                cfg.station,
                port=cfg.metrics_port,
                queue=lambda: self._uploader.queued() if self._uploader else None,
            )
        except OSError as exc:
            raise ProfileError(
                f"{cfg.path}: key 'metrics_port': cannot serve the metrics on port "
                f"{cfg.metrics_port}: {exc.strerror or exc}",
                hint="another program (or station) uses it: pick a free port",
            ) from None

    def _start_uploader(self) -> None:
        """With a ledger (``ledger:``), copy sealed rows to it in the background (a new uploader
        after a reload that changed the ledger or the history)."""
        cfg = self.loaded.config
        old = self._uploader
        if old is not None and (old.url, old.history) == (cfg.ledger, self._history):
            return
        if old is not None:
            old.stop(final=True)
            self._uploader = None
        if cfg.ledger:
            from piflash.record.ledger import Uploader

            self._uploader = Uploader(
                self._history, cfg.station, cfg.ledger, self._log, interval=max(1.0, cfg.poll_interval * 4)
            )
            self._uploader.start()

    def _open_history(self) -> None:
        from piflash.record.history import History, HistoryError

        path = self.loaded.config.history
        if self._history is not None and (path is None or path == self._history.path):
            return
        if path is not None and not path.parent.exists():
            # A mistyped folder would start a new, empty history with a chain of its own, and the
            # boards of this shift would be missing from the real one: refuse, naming the path.
            raise HistoryError(
                f"the history folder {path.parent} does not exist (the 'history:' key of "
                f"{self.config_path} names {path})",
                hint="correct the path, or create the folder for a new history "
                "(the station only creates the file, not its folder)",
            )
        try:
            new = History(path)
            try:
                new.check_writable()  # a read-only history would fail every board, not the start
                new.check_sound()  # so would one damaged past its first pages
            except BaseException:
                new.close()
                raise
        except HistoryError as exc:
            raise HistoryError(
                exc.message,
                hint=f"{exc.hint}; the station records every board, so it "
                f"does not start without a history (the 'history:' key of "
                f"{self.config_path}, see docs/station.md)",
            ) from exc
        try:
            new.reap()  # rows left open by a station that died: interrupted
        except BaseException:
            new.close()
            raise
        with self._history_lock:
            old, self._history = self._history, new
            self._recent = None
        if old is not None:
            old.close()

    def _use_process_events(self) -> None:
        """Stop and abort as events the worker processes see (created before any fork; a stop
        already requested carries over)."""
        from piflash.station.procs import fork_context

        ctx = fork_context()
        for name in ("stop", "abort"):
            old, new = getattr(self, name), ctx.Event()
            if old.is_set():
                new.set()
            setattr(self, name, new)

    def _new_worker(self, uid: str):
        """A worker for probe ``uid``: a thread, or a process (``workers: processes``)."""
        if self.loaded.config.workers == "processes":
            from piflash.station.procs import ProcessWorker

            return ProcessWorker(self, uid, on_exit=self._worker_died)
        from piflash.station.bootsel import worker_class

        return worker_class(uid)(self, uid)

    def _worker_died(self, worker) -> None:
        """A worker process ended by itself (killed, crashed): restart it from the main loop."""
        self._dead.append(worker.uid)
        self._wake.set()

    def _restart_dead(self) -> None:
        """Seal the rows the dead worker processes left open (interrupted), check memory, start new
        workers for their probes."""
        from piflash.errors import PiflashError

        dead, self._dead = self._dead, []
        with self._history_lock:
            sealed = self._history.reap()
            self._recent = None
        if sealed:
            self._log(
                f"history rows {', '.join(f'#{r}' for r in sealed)} sealed as interrupted (their worker process died)"
            )
        for uid in dead:
            if self.stop.is_set() or uid not in self.workers:
                continue
            try:
                memory_guard(self.config_path, self.force)
            except PiflashError as exc:
                self._log(f"{uid}: worker not restarted: {exc.message}")
                self.status.set(uid, "waiting_probe", f"not restarted: {exc.message}")
                continue
            worker = self._new_worker(uid)
            self.workers[uid] = worker
            worker.start()
            self._log(f"{uid}: worker process restarted")

    def _log(self, text: str) -> None:
        text = scrub(text) or ""
        if not self.interactive:
            print(text, file=self.stream, flush=True)
        LOG.info("%s", text)

    # -- workers ------------------------------------------------------------------------------
    def _reconcile_workers(self) -> None:
        """Start a worker for each configured (or, with ``probes: any``, listed) probe that has
        none; retire those no longer configured."""
        wanted = self.loaded.config.probes
        if wanted is None:
            wanted = tuple(self.workers) + tuple(u for u in self._listed_probes() if u not in self.workers)
        for uid, worker in list(self.workers.items()):
            if uid not in wanted:
                worker.retire()
                self._retired.append(worker)
                del self.workers[uid]
                self.status.forget(uid)
                self._log(f"{uid}: no longer served")
        for uid in wanted:
            if uid not in self.workers:
                worker = self._new_worker(uid)
                self.workers[uid] = worker
                self.status.set(uid, "waiting_probe", "waiting for probe")
                worker.start()
        self._retired = [w for w in self._retired if w.is_alive()]

    def _listed_probes(self):
        from piflash.errors import PiflashError
        from piflash.probe.discovery import list_probes
        from piflash.probe.picoboot import list_devices

        try:
            found = [p.unique_id for p in list_probes()]
        except PiflashError as exc:
            LOG.debug("listing probes failed: %s", exc.message)
            found = []
        try:  # USB ports with a Pico in BOOTSEL mode
            found += [d.probe_id for d in list_devices()]
        except Exception as exc:
            LOG.debug("listing BOOTSEL devices failed: %s", exc)
        return found

    def healthy(self) -> bool:
        """Whether every worker thread is alive and showed life within the watchdog interval
        (or 60 s without a watchdog)."""
        limit = self.notifier.watchdog_interval or 60.0
        now = time.monotonic()
        return all(w.is_alive() and now - w.beat < limit for w in self.workers.values())

    def open_row(self, result, slot: str, pid: Optional[int] = None) -> Optional[int]:
        """Open the history row of a board about to be flashed (see
        :meth:`piflash.record.history.History.open`); returns its id, or None (logged) if it cannot be
        written: the worker then leaves the board alone. ``pid``: the worker process serving the
        board (``workers: processes``), whose death seals the row as interrupted."""
        from piflash.record.history import HistoryError

        cfg = self.loaded.config
        try:
            with self._history_lock:
                self._recent = None
                return self._history.open(result, station=cfg.station, slot=slot, profile=cfg.profile.name, pid=pid)
        except HistoryError as exc:
            LOG.error("board %s not flashed: cannot record it: %s", result.target_uid, exc.message)
            return None

    def complete_row(self, row: int, result, outcome: str) -> Optional[int]:
        """Complete and seal row ``row`` with the board's result; returns the id, or None (logged)
        if it could not be written (the row stays open until a later start seals it as
        interrupted)."""
        from piflash.record.history import HistoryError

        try:
            with self._history_lock:
                self._recent = None
                done = self._history.complete(
                    row, result, outcome=outcome, protection=result.protection, serial=result.serial, patch=result.patch
                )
            if self._uploader is not None:
                self._uploader.kick()
            if self.metrics is not None:
                self.metrics.board(slot_of(result), outcome, result.duration or 0.0, result.serial)
            return done
        except HistoryError as exc:
            LOG.error("board %s: history row #%s not completed: %s", result.target_uid, row, exc.message)
            return None

    def note_serial(self, row: int, serial: int) -> None:
        """Write the serial number just taken for a board into its open row ``row`` (see
        :meth:`piflash.record.history.History.annotate`).

        :raises HistoryError: (exit 18) the row cannot be written: the board is not flashed.
        """
        with self._history_lock:
            self._history.annotate(row, serial=str(serial))

    def note_patch(self, row: int, patch: dict) -> None:
        """Write which list row a board took (``{entry: {list, list_sha256, row, line}}``, no
        value) into its open row ``row`` when programming starts, so a board cut off later still
        names it. :raises HistoryError: (exit 18) the row cannot be written: the board is not flashed."""
        with self._history_lock:
            self._history.annotate(row, patch=patch)

    def list_used_up(self, message: str) -> None:
        """The profile's list has no row left: stop taking boards, exit 22 (``SERIAL``)."""
        LOG.error("%s: the station stops", message)
        self.exit_code = 22
        self.stop.set()
        self._wake.set()

    # -- reload, signals, stop ----------------------------------------------------------------
    def reload(self) -> bool:
        """Load the config again; keep the old one if the new one is broken. Returns True if applied."""
        from piflash.errors import PiflashError
        from piflash.record.history import HistoryError

        self.notifier.reloading()
        try:
            new = load_station(self.config_path)
            old, self.loaded = self.loaded, new
            try:
                self._open_history()
            except HistoryError:
                self.loaded = old
                raise
        except PiflashError as exc:
            message = getattr(exc, "message", str(exc))
            self._log(f"reload failed, keeping the previous config: {message}")
            self.notifier.ready(self.status.line())
            return False
        if new.config.workers == "processes" and isinstance(self.stop, threading.Event):
            self._use_process_events()  # switched from threads: events the processes can see
        if old.config.workers == "processes" or new.config.workers == "processes":
            # A worker process holds a copy of the config it was forked with: new processes
            # take the new one (the old ones finish their board first).
            for uid, worker in list(self.workers.items()):
                worker.retire()
                self._retired.append(worker)
                del self.workers[uid]
        self._start_uploader()
        self._start_status_file()
        try:
            self._start_web()
        except PiflashError as exc:  # the boards go on; only the page is missing
            self._log(f"operator's page off after the reload: {exc.message}")
        try:
            self._start_metrics()
        except PiflashError as exc:  # the boards go on; only the metrics are missing
            self._log(f"metrics off after the reload: {exc.message}")
        self._reconcile_workers()
        self.status_file.write()  # the new firmware, profile, bundle version
        self._log(
            f"config reloaded: profile {new.config.profile.name}, "
            f"{new.image.size:,} bytes, sha256 {new.image.sha256[:12]}"
        )
        self.notifier.ready(self.status.line())
        return True

    def _follow_job(self) -> None:
        """With ``job: ledger:LINE``, every :data:`JOB_POLL` s: the ledger's newest job for the line;
        a newer one than the station runs is taken by :meth:`reload` (fetched, verified, switched
        between boards). A refused one (the reload's log names why) or an older one is logged once
        and the station keeps what it has; a ledger out of reach is logged once."""
        from piflash.bundle.jobs import newest_job
        from piflash.errors import PiflashError
        from piflash.record.ledger import Ledger

        now = time.monotonic()
        if now - self._job_checked < JOB_POLL:
            return
        self._job_checked = now
        cfg = self.loaded.config
        try:
            if self._job_db is None:
                self._job_db = Ledger(cfg.ledger)
            newest = newest_job(cfg.ledger, cfg.job, self._job_db)
        except PiflashError as exc:
            if self._job_db is not None:
                self._job_db.close()
                self._job_db = None
            if not self._job_down:
                self._log(f"job: the ledger is not reached ({exc.message}); keeping the job this station runs")
            self._job_down = True
            return
        self._job_down = False
        running = (cfg.bundle.manifest.version, cfg.bundle.sha256)
        if newest is None or newest == running or newest == self._job_kept:
            return
        self._job_kept = newest
        if newest[0] < running[0]:
            self._log(
                f"job: the ledger's newest job for line {cfg.job} is version {newest[0]} (sha256 {newest[1][:12]}), "
                f"older than version {running[0]} this station runs: keeping version {running[0]}"
            )
            return
        self._log(f"job: line {cfg.job} version {newest[0]} (sha256 {newest[1][:12]}) published: switching to it")
        if self.reload():
            self._log(f"job: now running line {cfg.job} version {self.loaded.config.bundle.manifest.version}")

    def request_stop(self) -> None:
        """Stop taking boards (the first call) or abort the boards being flashed (a later call,
        at least :data:`REPEAT_WINDOW` seconds after the first; one sooner is the same request)."""
        now = time.monotonic()
        if self._first_stop is None:
            self._first_stop = now
        elif now - self._first_stop >= REPEAT_WINDOW:
            if not self.abort.is_set():
                LOG.warning("second stop request: aborting the boards being flashed")
            self.abort.set()
        else:
            LOG.debug("stop request %.3f s after the first: the same request", now - self._first_stop)
        self.stop.set()
        for w in list(self.workers.values()):
            w.wake()
        self._wake.set()

    def request_reload(self) -> None:
        """Reload the config at the next turn of the main loop."""
        self._reload_requested = True
        self._wake.set()

    def _watchdog(self, interval: float) -> None:
        while not self.stop.wait(interval / 2):
            if self.healthy():
                self.notifier.watchdog()
            else:
                LOG.error("a worker is stuck or dead: not pinging the systemd watchdog")

    def run(self) -> int:
        """Start, serve until SIGTERM/SIGINT, stop cleanly. Returns the exit code (0; 22 when the
        profile's list of per-unit values ran out).

        :raises: the errors of :meth:`start` (before any board is touched).
        """
        signal.signal(signal.SIGTERM, lambda *a: self.request_stop())
        signal.signal(signal.SIGINT, lambda *a: self.request_stop())
        signal.signal(signal.SIGHUP, lambda *a: self.request_reload())
        self.start()
        if self.notifier.watchdog_interval:
            threading.Thread(
                target=self._watchdog, args=(self.notifier.watchdog_interval,), name="watchdog", daemon=True
            ).start()
        try:
            while not self.stop.is_set():
                self._wake.wait(self.loaded.config.poll_interval)
                self._wake.clear()
                if self._dead and not self.stop.is_set():
                    self._restart_dead()
                if self._reload_requested:
                    self._reload_requested = False
                    self.reload()
                elif self.loaded.config.probes is None and not self.stop.is_set():
                    self._reconcile_workers()
                if self.loaded.config.job is not None and not self.stop.is_set():
                    self._follow_job()
        finally:
            self.shutdown()
        return self.exit_code

    def shutdown(self) -> None:
        """Stop: wait for every worker to finish its board, then close the history and outputs."""
        self.stop.set()
        self.notifier.stopping("stopping")
        self.status.begin_stop()
        for w in list(self.workers.values()) + self._retired:
            w.wake()
            while w.is_alive():
                w.join(0.5)
        from piflash.station.worker import release_allocators

        release_allocators()  # the lease's unused numbers go back to the counter
        if self._uploader is not None:
            self._uploader.stop(final=True)  # the last boards' rows, if the ledger is there
        if self._job_db is not None:
            self._job_db.close()
        if self.metrics is not None:
            self.metrics.write()
            self.metrics.close()
        summary = f"station stopped: {self.status.summary()}"
        self._log(summary)
        self.status.close()  # the status file's last state (stopped_at) ...
        if self.web is not None:  # ... reaches the open pages before the server goes
            time.sleep(self.web.interval * 2)
            self.web.close()
        if self.interactive:  # after the live view is gone, so it stays on the screen
            print(summary, file=self.stream, flush=True)
        if self._history is not None:
            self._history.close()


__all__ = ["Station", "memory_guard"]
