"""The station with a worker process per probe (issue 20, deliverable 3: ``workers: processes``):
boards on two probes flashed by two processes, one history and one chain; a worker process
killed mid-board is replaced and its board's row sealed as interrupted; SIGTERM stops them all.
Through the real CLI and pyOCD on simulated boards."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

pytest.importorskip("unicorn")

from support.stationkit import (  # noqa: E402
    StationProcess,
    rows,
    wait_for,
    wait_rows,
    write_config,
    write_profile,
)

from piflash.errors import ExitCode  # noqa: E402
from piflash.sim import SimStore  # noqa: E402


def _children(pid: int):
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(p) for p in text.split()]


@pytest.fixture
def station_of(tmp_path, firmware_dir):
    made = []

    def start(probes, firmware=None, **extra):
        profile = write_profile(tmp_path, firmware or firmware_dir / "nrf52840" / "firmware.hex",
                                **({"base_address": "0x0"} if firmware and str(firmware).endswith(".bin") else {}))
        config = write_config(tmp_path, profile, probes, tmp_path / "history.sqlite3", workers="processes",
                              poll_interval=0.05, **extra)
        station = StationProcess(config, tmp_path / f"station{len(made)}.log")
        made.append(station)
        return station

    yield start
    for station in made:
        if station.proc.poll() is None:
            station.kill()


def test_two_probes_two_processes_one_history(tmp_path, station_of):
    store = SimStore()
    for name in ("p1", "p2"):
        store.create(name, "nrf52840")
    station = station_of(["sim:p1", "sim:p2"])
    got = wait_rows(tmp_path / "history.sqlite3", 2, station)
    workers = _children(station.proc.pid)
    assert len(workers) == 2, station.output()
    assert sorted(r["pid"] for r in got) == sorted(workers)          # each row names its worker process
    assert {r["slot"] for r in got} == {"sim:p1", "sim:p2"} and {r["outcome"] for r in got} == {"pass"}
    assert "a process per probe" in station.output()
    station.signal(signal.SIGTERM)
    assert station.wait() == 0, station.output()
    assert "station stopped: 2 passed, 0 failed, 0 skipped" in station.output()
    assert not any(Path(f"/proc/{p}").exists() for p in workers)     # no worker left behind
    from piflash.record.history import History

    assert not History(tmp_path / "history.sqlite3").verify_chain().problems


def test_a_killed_worker_process_is_replaced_and_its_board_recorded(tmp_path, station_of):
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(512 * 1024))
    store = SimStore()
    store.create("bay", "nrf52840")
    station = station_of(["sim:bay"], firmware=big)
    history = tmp_path / "history.sqlite3"
    wait_for(lambda: rows(history, with_open=True), "the board's open row")
    (worker,) = _children(station.proc.pid)
    os.kill(worker, signal.SIGKILL)
    got = wait_rows(history, 1, station)
    assert (got[0]["outcome"], got[0]["pid"]) == ("interrupted", worker)
    station.wait_output("worker process restarted")
    new = wait_for(lambda: [p for p in _children(station.proc.pid) if p != worker], "a new worker process")
    store.swap("bay")                                         # the operator puts the next board on
    got = wait_rows(history, 2, station, deadline=120)
    assert got[1]["outcome"] == "pass" and got[1]["pid"] in new
    station.signal(signal.SIGTERM)
    assert station.wait() == 0, station.output()


@pytest.mark.parametrize("extra,message", [
    ({"workers": "fibers"}, "key 'workers': must be one of threads, processes"),
    ({"workers": "processes", "gpio": "{pass_led: 17}"}, "worker processes do not drive GPIO yet"),
])
def test_config_errors(tmp_path, firmware_dir, cli, extra, message):
    profile = write_profile(tmp_path, firmware_dir / "nrf52840" / "firmware.hex")
    config = write_config(tmp_path, profile, ["sim:x"], tmp_path / "h.sqlite3", **extra)
    proc = cli("station", "run", "--plain", "--config", config, check=int(ExitCode.PROFILE))
    assert message in proc.stderr


def test_worker_processes_hold_their_own_serial_leases(tmp_path, firmware_dir):
    """Two worker processes numbering boards from one counter: each holds its own lease
    (``STATION/PROBE``), so one starting its allocator never closes a live sibling's lease as
    if a crash had left it (that read 'left unused' and cost a lease per board)."""
    import sqlite3

    store = SimStore()
    for name in ("s1", "s2"):
        store.create(name, "nrf52840")
    profile = write_profile(tmp_path, firmware_dir / "nrf52840" / "firmware.hex",
                            serial="{uicr_customer: 0, encoding: u32, start: 100}")
    history, serials = tmp_path / "history.sqlite3", tmp_path / "serials.sqlite3"
    config = write_config(tmp_path, profile, ["sim:s1", "sim:s2"], history, workers="processes",
                          poll_interval=0.05, serials=serials, serial_block=8)
    station = StationProcess(config, tmp_path / "station.log")
    try:
        wait_rows(history, 2, station)
        for i in range(2):
            for name in ("s1", "s2"):
                store.swap(name)
            wait_rows(history, 2 * (i + 2), station)
    finally:
        station.signal(signal.SIGTERM)
        assert station.wait() == 0, station.output()
    assert "left unused" not in station.output()
    db = sqlite3.connect(serials)
    try:
        leases = db.execute("SELECT holder, count FROM leases ORDER BY holder").fetchall()
        numbers = db.execute("SELECT n, state FROM numbers ORDER BY n").fetchall()
    finally:
        db.close()
    # one lease per process, closed on the clean stop with the 3 numbers it used
    assert leases == [("test-line/sim:s1", 3), ("test-line/sim:s2", 3)]
    assert {s for _, s in numbers} == {"pass"} and len(numbers) == 6
