"""The station with a CSV list of per-unit values (issue 39 item 2): real ``piflash station run``
subprocesses, real pyOCD, simulated nRF52840 boards; each row one board's, a board that fails
before programming gives its row back, one that fails after keeps it, a used-up list stops the
station (exit 22) with the next board untouched, and a SIGKILLed station loses no row and
reuses none."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

pytest.importorskip("unicorn")

from support.stationkit import rows, wait_for, wait_rows, write_config  # noqa: E402

from piflash.sim import SimStore  # noqa: E402

LABEL, KEY = 0x000FF000, 0x000FF100
#: DAP transfers after which a board is in its erase phase (connect ~160, the quick pre-check ~350
#: more, then the erase: support/stationkit.py's MID_PROGRAM_TRANSFERS measures the same cycle).
ERASING = 900


def write_list(directory: Path, n: int) -> Path:
    path = directory / "units.csv"
    path.write_text("label,mac,key\n" + "".join(
        f"UNIT-{i:03d},02:00:00:00:00:{i:02x},{i:032x}\n" for i in range(1, n + 1)))
    return path


def listed_profile(directory: Path, firmware_dir: Path) -> Path:
    path = directory / "listed.yaml"
    path.write_text(f"""target: nrf52840
firmware: {firmware_dir / "nrf52840" / "firmware.hex"}
serial:
  address: {LABEL:#x}
  encoding: ascii
  length: 16
  list: units.csv
  column: label
patch:
  - name: mac
    uicr_customer: 0
    encoding: hex
    length: 6
    list: units.csv
  - name: key
    address: {KEY:#x}
    encoding: hex
    length: 16
    list: units.csv
    secret: true
""")
    return path


def list_rows(path: Path):
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return {r: (s, uid) for r, s, uid in db.execute("SELECT row, state, target_uid FROM rows")}
    finally:
        db.close()


def on_board(store: SimStore, name: str):
    """(label, key bytes) the board carries."""
    flash = store.read_flash(name)
    return flash[LABEL:LABEL + 16].rstrip(b"\0").decode(), flash[KEY:KEY + 16]


def test_rows_once_give_back_before_programming_keep_after_and_stop_when_used_up(
        tmp_path, store, firmware_dir, stations):
    history, units = tmp_path / "history.sqlite3", tmp_path / "unitlists.sqlite3"
    write_list(tmp_path, 3)
    config = write_config(tmp_path, listed_profile(tmp_path, firmware_dir), ["sim:bay"], history, serial_block=2)
    boards = [store.create("bay", "nrf52840").target_uid.lower()]
    station = stations(config, tmp_path / "station.log")
    wait_rows(history, 1, station)                                   # board 0: row 1, passes
    assert on_board(store, "bay") == ("UNIT-001", bytes.fromhex(f"{1:032x}"))
    # board 1: holds other data, and is pulled off in the middle of its erase, before programming
    boards.append(store.swap("bay", flash=b"\0" * 16384, faults={"remove_after": ERASING}).target_uid.lower())
    wait_rows(history, 2, station)
    # board 2: programmed, then its verify fails: it keeps its row (its flash may hold the key)
    flip = {"bit_flip": {"address": LABEL + 1, "bit": 0}}
    boards.append(store.swap("bay", faults=flip).target_uid.lower())
    wait_rows(history, 3, station)
    boards.append(store.swap("bay").target_uid.lower())             # board 3: the last row
    wait_rows(history, 4, station)
    boards.append(store.swap("bay").target_uid.lower())             # board 4: no row left
    assert station.wait() == 22, station.output()
    assert "the list units.csv is used up: all its 3 rows are used" in station.output()
    flash = store.read_flash("bay")
    assert flash[LABEL:LABEL + 16] == flash[KEY:KEY + 16] == flash[:16] == b"\xff" * 16   # board 4 untouched

    got = rows(history)
    assert [r["outcome"] for r in got] == ["pass", "fail", "fail", "pass", "fail"]
    assert [r["serial"] for r in got] == ["UNIT-001", None, "UNIT-002", "UNIT-003", None]
    assert got[1]["phase"] == "erase" and "board removed during erase" in got[1]["error"], got[1]
    assert got[2]["error_kind"] == "VerifyError" and got[4]["error_kind"] == "ListUsedUpError"
    assert all(f"{i:032x}" not in (r["patch"] or "") for r in got for i in (1, 2, 3))
    assert list_rows(units) == {1: ("pass", boards[0]), 2: ("fail", boards[2]), 3: ("pass", boards[3])}


def test_a_sigkilled_station_loses_no_row_and_reuses_none(tmp_path, store, firmware_dir, stations):
    """Killed right after the row was taken (not programmed: it goes back) and right after the
    program phase (the board may carry it: never given again); then a clean station."""
    history, units = tmp_path / "history.sqlite3", tmp_path / "unitlists.sqlite3"
    write_list(tmp_path, 6)
    config = write_config(tmp_path, listed_profile(tmp_path, firmware_dir), ["sim:bay"], history, serial_block=4)
    first = store.create("bay", "nrf52840").target_uid.lower()
    killed = stations(config, tmp_path / "k1.log", dict(os.environ, PIFLASH_TEST_KILL_AT="taken"))
    wait_for(lambda: killed.proc.poll() is not None, "the station to kill itself after the take")
    assert killed.proc.returncode == -9
    assert store.read_flash("bay")[:16] == b"\xff" * 16             # nothing was written
    killed = stations(config, tmp_path / "k2.log", dict(os.environ, PIFLASH_TEST_KILL_AT="programmed"))
    wait_for(lambda: killed.proc.poll() is not None, "the station to kill itself after programming")
    assert "list units.csv: 4 row(s) given back and 0 board(s) cut off" in killed.output()
    assert on_board(store, "bay")[0] == "UNIT-001"                  # row 1 went back, then to this board
    second = store.swap("bay").target_uid.lower()
    clean = stations(config, tmp_path / "clean.log")
    wait_for(lambda: f"PASS {second}" in clean.output(), "the next board")
    assert "1 board(s) cut off while programming" in clean.output()
    assert clean.stop() == 0
    assert on_board(store, "bay")[0] == "UNIT-002"
    state = list_rows(units)
    assert state == {1: ("interrupted", first), 2: ("pass", second)}
    got = rows(history)
    assert [(r["outcome"], r["serial"]) for r in got] == [("interrupted", None), ("interrupted", None),
                                                         ("pass", "UNIT-002")]
    noted = json.loads(got[1]["patch"])                             # the cut-off board names its row,
    assert noted["mac"] == {"list": "units.csv", "list_sha256": noted["mac"]["list_sha256"], "row": 1, "line": 2}
    assert "value" not in noted["key"]                              # not its value
    db = sqlite3.connect(f"file:{units}?mode=ro", uri=True)
    try:
        free = db.execute("SELECT row, state FROM src_rows WHERE state NOT IN ('leased') ORDER BY row").fetchall()
    finally:
        db.close()
    assert free == [(1, "interrupted"), (2, "pass"), (3, "free"), (4, "free"), (5, "free")]   # none lost
