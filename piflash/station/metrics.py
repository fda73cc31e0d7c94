"""The station's metrics for Prometheus, as a node_exporter textfile (``metrics:`` in the station
config) and/or served on a port for Prometheus to scrape (``metrics_port:``).

Kept with prometheus-client (pure Python; the ``metrics`` extra). The textfile is written after
every board and at start and stop: :func:`prometheus_client.write_to_textfile` writes a
temporary file and renames it over the old one, so node_exporter's textfile collector
(``--collector.textfile.directory``) never reads half a file. The port is
:func:`prometheus_client.start_http_server` (a daemon thread answering ``GET /metrics``, on all
interfaces as node_exporter's ``:9100``), stopped with the station. Names follow Prometheus's naming rules ("Metric and label naming": base
units, ``_seconds``, ``_total`` for counters, the ``piflash_`` prefix):

==================================================  ==========  ===================================
metric                                              type        labels
==================================================  ==========  ===================================
``piflash_boards_total``                            counter     station, probe, outcome (pass,
                                                                fail, skip)
``piflash_flash_duration_seconds``                  histogram   station, probe (a board's whole
                                                                operation, connect to reset)
``piflash_serials_issued_total``                    counter     station
``piflash_ledger_queue_rows``                       gauge       station (rows not in the ledger
                                                                yet; absent without a ledger)
``piflash_last_success_timestamp_seconds``          gauge       station, probe (Unix time)
==================================================  ==========  ===================================

The counters start at 0 with each station process, as Prometheus counters do: ``rate()`` and
``increase()`` handle the reset. ``dashboards/piflash-line.json`` is a Grafana dashboard of the
line's yield and boards/hour from these.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable, Optional

LOG = logging.getLogger(__name__)

__all__ = ["StationMetrics", "DURATION_BUCKETS"]

#: Histogram buckets of a board's time, seconds: a re-flash takes under a second, a fresh 64 KiB
#: board 1-3 s on the Zero 2W preset (docs/benchmarks.md), a MicroPython image 5-15 s.
DURATION_BUCKETS = (0.5, 1.0, 2.0, 3.0, 5.0, 8.0, 13.0, 20.0, 30.0, 60.0)


class StationMetrics:
    """The station's metrics, kept in memory and written to ``path`` after each change.

    :param path: the textfile (``*.prom`` in node_exporter's textfile directory), or None.
    :param station: the station's name (the ``station`` label).
    :param queue: ``queue() -> Optional[int]``, rows waiting for the ledger (None: no ledger).
    :param port: TCP port to serve ``/metrics`` on (all interfaces), or None.
    :raises ExtraMissingError: (exit 17) prometheus-client is not installed.
    :raises OSError: the port cannot be bound (in use, or below 1024 without the privilege).
    """

    def __init__(
        self, path, station: str, queue: Optional[Callable[[], Optional[int]]] = None, port: Optional[int] = None
    ) -> None:
        try:
            from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
        except ImportError as exc:
            from piflash.errors import extra_missing

            raise extra_missing("metrics", str(exc)) from None
        self.path = str(path) if path is not None else None
        self.station, self._queue, self.port = station, queue, port
        self._server = None
        self._lock = threading.Lock()
        self.registry = CollectorRegistry()
        self.boards = Counter(
            "piflash_boards", "Boards handled, by outcome.", ["station", "probe", "outcome"], registry=self.registry
        )
        self.duration = Histogram(
            "piflash_flash_duration_seconds",
            "A board's operation, connect to reset.",
            ["station", "probe"],
            buckets=DURATION_BUCKETS,
            registry=self.registry,
        )
        self.serials = Counter(
            "piflash_serials_issued", "Serial numbers taken for boards.", ["station"], registry=self.registry
        )
        self.queue = Gauge(
            "piflash_ledger_queue_rows", "History rows not in the ledger yet.", ["station"], registry=self.registry
        )
        self.last_success = Gauge(
            "piflash_last_success_timestamp_seconds",
            "Unix time of the probe's last passed board.",
            ["station", "probe"],
            registry=self.registry,
        )
        self.serials.labels(station)  # present at 0 from the start
        if port is not None:
            from prometheus_client import start_http_server

            self._server, _ = start_http_server(port, registry=self.registry)
        self.write()

    def close(self) -> None:
        """Stop serving the port (the textfile stays, as node_exporter expects)."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def board(self, probe: str, outcome: str, seconds: float, serial: Optional[str] = None) -> None:
        """Count a finished board (``pass``, ``fail``, ``skip``) of ``probe`` and write the file."""
        with self._lock:
            self.boards.labels(self.station, probe, outcome).inc()
            self.duration.labels(self.station, probe).observe(max(0.0, seconds))
            if serial is not None:
                self.serials.labels(self.station).inc()
            if outcome in ("pass", "skip"):
                self.last_success.labels(self.station, probe).set(time.time())
        self.write()

    def write(self) -> None:
        """Bring the queue gauge up to date and write the textfile atomically, if there is one (a
        failure is logged: metrics never stop a station)."""
        from prometheus_client import write_to_textfile

        with self._lock:
            if self._queue is not None:
                queued = self._queue()
                if queued is not None:
                    self.queue.labels(self.station).set(queued)
            if self.path is None:
                return
            try:
                write_to_textfile(self.path, self.registry)
            except OSError as exc:
                LOG.error("metrics not written to %s: %s", self.path, exc)
