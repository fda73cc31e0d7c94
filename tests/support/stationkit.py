"""Helpers for the station tests: write a profile and config, run ``piflash station run`` as a
real subprocess, read its history with sqlite3, wait on conditions with deadlines; the fixtures
``store`` and ``stations`` the station and ledger tests share (through tests/conftest.py)."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Iterator, List, Optional

import pytest

#: DAP transfers after which ``remove_after`` pulls an nRF52840 board in the middle of its
#: program phase with the 12.7 KB test firmware (measured: connect ends at ~160 transfers, the
#: quick pre-check ~350 more, erase ~1,350, program runs from ~1,850 to ~6,200).
MID_PROGRAM_TRANSFERS = 3500


def wait_for(condition: Callable[[], object], what: str, deadline: float = 60.0, step: float = 0.05):
    """Poll ``condition`` until it returns something true; fail with ``what`` after ``deadline`` s."""
    end = time.monotonic() + deadline
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {deadline} s waiting for {what}")
        time.sleep(step)


def write_profile(directory: Path, firmware: Path, name: str = "board", **extra) -> Path:
    lines = [f"target: {extra.pop('target', 'nrf52840')}", f"firmware: {firmware}"]
    lines += [f"{k}: {v}" for k, v in extra.items()]
    path = directory / f"{name}.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def write_config(directory: Path, profile: Path, probes, history: Path, name: str = "station.yaml",
                 **extra) -> Path:
    probe_text = probes if probes == "any" else "[" + ", ".join(f'"{p}"' for p in probes) + "]"
    lines = ["station: test-line", f"profile: {profile}", f"probes: {probe_text}",
             f"poll_interval: {extra.pop('poll_interval', 0.1)}", f"history: {history}"]
    lines += [f"{k}: {v}" for k, v in extra.items()]
    path = directory / name
    path.write_text("\n".join(lines) + "\n")
    return path


class StationProcess:
    """``python -m piflash station run --plain --config FILE`` with output in a file.

    ``prefix`` runs it under another command (e.g. ``["timeout", "600"]``); :meth:`signal`
    then goes to that command, as a user's signal would."""

    def __init__(self, config: Path, log: Path, env: Optional[dict] = None,
                 prefix: List[str] = ()) -> None:
        self.log = log
        self.prefix = list(prefix)
        self._out = open(log, "w")
        self.proc = subprocess.Popen([*prefix, sys.executable, "-m", "piflash", "station", "run", "--plain",
                                      "--config", str(config)], stdout=self._out,
                                     stderr=subprocess.STDOUT, env=env or os.environ.copy())

    def output(self) -> str:
        return self.log.read_text()

    def wait_output(self, text: str, deadline: float = 60.0, count: int = 1) -> None:
        wait_for(lambda: self.output().count(text) >= count or self._died(),
                 f"{text!r} in the station's output", deadline)
        assert self.proc.poll() is None or self.output().count(text) >= count, self.output()

    def _died(self) -> bool:
        return self.proc.poll() is not None

    def signal(self, sig=signal.SIGTERM) -> None:
        self.proc.send_signal(sig)

    def wait(self, deadline: float = 60.0) -> int:
        """Wait for the station to exit by itself (after :meth:`signal`); returns the exit code."""
        try:
            return self.proc.wait(deadline)
        finally:
            self._out.close()

    def stop(self, deadline: float = 60.0) -> int:
        """SIGTERM (unless it has exited) and wait; returns the exit code. Not for a station that
        was already signalled to stop: this SIGTERM would be a second stop request."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(deadline)
        finally:
            self._out.close()

    def kill(self) -> None:
        if self.prefix and self.proc.poll() is None:
            try:  # the station under the prefix command too (timeout makes its own process group)
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self._out.close()


@pytest.fixture
def store(sim_dir):
    """The simulated boards' store of this test (``sim_dir``: its own folder)."""
    from piflash.sim import SimStore

    return SimStore()


@pytest.fixture
def stations() -> Iterator[Callable[..., StationProcess]]:
    """``start(config, log, env=None)``: a :class:`StationProcess`; every station started is
    killed when the test ends, passed or failed."""
    started: List[StationProcess] = []

    def start(config: Path, log: Path, env: Optional[dict] = None) -> StationProcess:
        st = StationProcess(config, log, env)
        started.append(st)
        return st

    yield start
    for st in started:
        st.kill()


def rows(history: Path, with_open: bool = False) -> List[dict]:
    """The finished history rows, oldest first (a plain sqlite3 reader, as any tool would be);
    ``with_open``: also the rows still open (a board being flashed, or a process that died)."""
    if not history.exists():
        return []
    db = sqlite3.connect(f"file:{history}?mode=ro", uri=True, timeout=30)
    try:
        db.row_factory = sqlite3.Row
        try:
            where = "" if with_open else " WHERE outcome != 'open'"
            return [dict(r) for r in db.execute(f"SELECT * FROM operations{where} ORDER BY id")]
        except sqlite3.OperationalError as exc:       # table not created yet
            if "no such table" in str(exc):
                return []
            raise
    finally:
        db.close()


def serial_numbers(path: Path, columns: str = "n, state") -> List[tuple]:
    """The ``columns`` of a serial database's numbers (``piflash.production.serials``), by number
    (a plain sqlite3 reader)."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return db.execute(f"SELECT {columns} FROM numbers ORDER BY n").fetchall()
    finally:
        db.close()


def wait_rows(history: Path, n: int, station: Optional[StationProcess] = None, deadline: float = 60.0):
    def enough():
        if station is not None and station.proc.poll() is not None:
            raise AssertionError("station exited:\n" + station.output())
        got = rows(history)
        return got if len(got) >= n else None
    return wait_for(enough, f"{n} history rows", deadline)


def samples(path: Path) -> dict:
    """{(name, sorted labels): value} of a textfile, read by prometheus-client's parser."""
    from prometheus_client.parser import text_string_to_metric_families

    out = {}
    for family in text_string_to_metric_families(path.read_text()):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out
