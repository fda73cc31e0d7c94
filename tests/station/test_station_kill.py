"""``kill -9`` of the station while it records: the history stays a sound database with whole rows.

Each round starts a real station over a fresh simulated board and kills it with SIGKILL, either
the moment its history's write-ahead log changes (a transaction being written: the kill lands
inside or just after the write) or at a random moment of the board's cycle. After every kill
``PRAGMA integrity_check`` must say ok, no row may be partial, and the row count may only grow
by the one board of that round. The board's row is opened before it is flashed, so a kill
mid-board leaves an ``open`` row, which the next round's station start seals as ``interrupted``.
"""

from __future__ import annotations

import hashlib
import os
import random
import sqlite3
import time

import pytest

pytest.importorskip("unicorn")

from support.stationkit import StationProcess, rows, write_config, write_profile  # noqa: E402

from piflash.record.history import History  # noqa: E402
from piflash.sim import SimStore  # noqa: E402

#: Kill rounds: 6 in the quick run (3 at a write, 3 at a random moment; 21.7 s -> 7.1 s alone here),
#: the 16 rounds of the stress under ``slow`` (the root leg of CI).
ROUNDS = [6, pytest.param(16, marks=pytest.mark.slow)]


def _wal_state(path):
    try:
        st = os.stat(path)
        return (st.st_size, st.st_mtime_ns)
    except FileNotFoundError:
        return None


def _kill_when_wal_changes(station, wal, deadline=60.0):
    base = _wal_state(wal)
    end = time.monotonic() + deadline
    while time.monotonic() < end and station.proc.poll() is None:
        state = _wal_state(wal)
        if state != base and state is not None:
            time.sleep(random.uniform(0, 0.002))
            break
        time.sleep(0.0005)
    station.kill()


@pytest.mark.parametrize("rounds", ROUNDS)
def test_kill_9_while_recording_leaves_whole_rows(tmp_path, sim_dir, firmware_dir, rounds):
    rng = random.Random(os.getpid())
    firmware = firmware_dir / "nrf52840" / "firmware.hex"
    sha = hashlib.sha256(firmware.read_bytes()).hexdigest()
    history = tmp_path / "history.sqlite3"
    config = write_config(tmp_path, write_profile(tmp_path, firmware), ["sim:bay"], history,
                          poll_interval=0.05)
    store = SimStore()
    uids = {store.create("bay", "nrf52840").target_uid.lower()}
    recorded_in_kill_rounds = 0
    for n in range(rounds):
        before = len(rows(history, with_open=True))
        station = StationProcess(config, tmp_path / f"station-{n}.log")
        if n % 2 == 0:
            _kill_when_wal_changes(station, str(history) + "-wal")
        else:
            time.sleep(rng.uniform(0.5, 3.0))
            station.kill()

        db = sqlite3.connect(str(history), timeout=30)
        try:
            assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        finally:
            db.close()
        got = rows(history, with_open=True)
        assert before <= len(got) <= before + 1, (n, before, len(got))
        recorded_in_kill_rounds += len(got) - before
        # at most the row of this round's board is open; earlier ones were sealed by later starts
        assert [r["id"] for r in got if r["outcome"] == "open"] in ([], [r["id"] for r in got[-1:]]), got
        for r in got:
            assert r["target_uid"] in uids and r["probe_id"] == "sim:bay"
            assert r["firmware_sha256"] == sha and r["station"] == "test-line" and r["slot"] == "sim:bay"
            if r["outcome"] in ("open", "interrupted"):
                assert r["ended_at"] is None and r["exit_code"] is None
                assert r["outcome"] == "open" or r["error"] == "interrupted (process died)"
                continue
            assert r["outcome"] in ("pass", "fail") and r["started_at"] <= r["ended_at"]
            assert r["connect_s"] is not None and r["row_hash"] is not None
            if r["outcome"] == "pass":
                assert r["exit_code"] == 0 and r["programmed_bytes"] > 0 and r["verify_s"] > 0
        uids.add(store.swap("bay").target_uid.lower())    # the next round gets a fresh board
    assert [r["id"] for r in rows(history)] == sorted(r["id"] for r in rows(history))
    with History(history) as db:                  # the next writer seals a last open row...
        db.reap()
        report = db.verify_chain()
    assert report.ok and report.open_rows == [], report   # ...and the chain holds every row
    print(f"{rounds} kills, {recorded_in_kill_rounds} rows recorded by killed stations")
