"""``flash --serial N`` never gives a number twice by accident (issue 19, item 5), through the real
CLI and a real station: a number the counter or an earlier one-off already gave (pass, fail or
interrupted) is refused with exit 25 before any probe is opened, naming the board and the history
row; ``--force-serial`` re-issues it on purpose and the serial database records the re-issue."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from piflash.errors import ExitCode

pytest.importorskip("unicorn")

from support.stationkit import StationProcess, rows, wait_rows, write_config  # noqa: E402

from piflash.sim import SimStore  # noqa: E402


@pytest.fixture
def store(sim_dir):
    return SimStore()


@pytest.fixture
def profile(tmp_path, firmware_dir) -> Path:
    """Profile "numbered": the serial in UICR CUSTOMER[0], from counter "numbered" at 5000."""
    path = tmp_path / "profiles" / "numbered.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"target: nrf52840\nfirmware: {firmware_dir / 'nrf52840' / 'firmware.hex'}\n"
                    "serial:\n  uicr_customer: 0\n  encoding: u32\n  start: 5000\n")
    return path


def history() -> Path:
    return Path(os.environ["PIFLASH_HISTORY"])


def one_offs(tmp_path):
    with sqlite3.connect(tmp_path / "serials.sqlite3") as db:
        return db.execute("SELECT n, reissue, state, target_uid FROM one_offs ORDER BY id").fetchall()


def row_of(n):
    """The one history row that carries serial ``n``."""
    (row,) = [r for r in rows(history(), with_open=True) if r["serial"] == str(n)]
    return row


def uicr_serial(store, name):
    return int.from_bytes(store.read_nvm(name, "uicr")[0x80:0x84], "little")


def refused(cli, board, n, state, row, uid):
    """``flash -p numbered --serial n`` on ``board`` must be refused, and touch nothing."""
    before = len(rows(history(), with_open=True))
    proc = cli("flash", "-p", "numbered", "-u", f"sim:{board}", "--serial", n, check=ExitCode.SERIAL_ISSUED)
    assert f"serial {n} was already issued: board {uid} has it; history row {row}: flash {state}" \
        in proc.stderr, proc.stderr
    assert "--force-serial" in proc.stderr and f"piflash history --board {n}" in proc.stderr
    assert len(rows(history(), with_open=True)) == before             # refused before the probe opened
    return proc


def test_number_the_station_gave_is_refused_then_forced(tmp_path, store, profile, cli):
    config = write_config(tmp_path, profile, ["sim:line"], history(), serials=tmp_path / "serials.sqlite3")
    first = store.create("line", "nrf52840")
    station = StationProcess(config, tmp_path / "station.log")
    try:
        wait_rows(history(), 1, station)
    finally:
        assert station.stop() == 0
    given = rows(history())[0]
    assert (given["serial"], given["outcome"]) == ("5000", "pass")
    bench = store.create("bench", "nrf52840")
    blank = store.read_nvm("bench", "uicr")

    refused(cli, "bench", 5000, "PASS", given["id"], first.target_uid.lower())
    assert store.read_nvm("bench", "uicr") == blank    # the old code wrote 5000 into a second board

    out = cli("flash", "-p", "numbered", "-u", "sim:bench", "--serial", 5000, "--force-serial", check=0)
    assert "serial 5000 (RE-ISSUED with --force-serial)" in out.stdout
    assert uicr_serial(store, "bench") == 5000
    assert one_offs(tmp_path) == [(5000, 1, "pass", bench.target_uid.lower())]
    assert [r["target_uid"] for r in rows(history()) if r["serial"] == "5000"] == \
        [first.target_uid.lower(), bench.target_uid.lower()]


def test_one_off_numbers_that_passed_failed_or_died_are_refused(tmp_path, store, profile, cli):
    a = store.create("a", "nrf52840")
    b = store.create("b", "nrf52840")
    cli("flash", "-p", "numbered", "-u", "sim:a", "--serial", 7000, "-q", check=0)
    assert one_offs(tmp_path) == [(7000, 0, "pass", a.target_uid.lower())]
    refused(cli, "b", 7000, "PASS", row_of(7000)["id"], a.target_uid.lower())

    # fail: a board whose verify finds a flipped bit keeps its number.
    cli("sim", "fault", "b", "--bit-flip", "0x100:3", check=0)
    cli("flash", "-p", "numbered", "-u", "sim:b", "--serial", 7001, check=ExitCode.VERIFY)
    cli("sim", "fault", "b", "--clear", check=0)
    assert row_of(7001)["outcome"] == "fail"
    refused(cli, "a", 7001, "FAIL", row_of(7001)["id"], b.target_uid.lower())

    # interrupted: the process is killed after programming (the test-only kill hook).
    env = dict(os.environ, PIFLASH_TEST_KILL_AT="programmed")
    proc = subprocess.run([sys.executable, "-m", "piflash", "flash", "-p", "numbered", "-u", "sim:a",
                           "--serial", "7002", "-q"], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert (7002, 0, "taken", a.target_uid.lower()) in one_offs(tmp_path)
    refused(cli, "b", 7002, "INTERRUPTED", row_of(7002)["id"], a.target_uid.lower())

    # A number nobody has is given without a question.
    cli("flash", "-p", "numbered", "-u", "sim:a", "--serial", 7003, "-q", check=0)


def test_force_serial_needs_a_number(cli, profile):
    proc = cli("flash", "-p", "numbered", "-u", "sim:x", "--force-serial", check=ExitCode.USAGE)
    assert "--force-serial re-issues the number given with --serial N" in proc.stderr


def test_station_skips_a_number_a_one_off_gave(tmp_path, store, profile, cli):
    bench = store.create("bench", "nrf52840")
    cli("flash", "-p", "numbered", "-u", "sim:bench", "--serial", 5000, "-q", check=0)   # the counter's first
    config = write_config(tmp_path, profile, ["sim:line"], history(), serials=tmp_path / "serials.sqlite3")
    line = store.create("line", "nrf52840")
    station = StationProcess(config, tmp_path / "station.log")
    try:
        wait_rows(history(), 2, station)
    finally:
        assert station.stop() == 0
    by_board = {r["target_uid"]: r["serial"] for r in rows(history())}
    assert by_board == {bench.target_uid.lower(): "5000", line.target_uid.lower(): "5001"}
