"""The history's ``labgrid_place`` column (issue 45): written by ``piflash flash --labgrid-place``,
added to a schema-4 history without breaking its hash chain, covered by the row hash."""

from __future__ import annotations

import json
import sqlite3

from piflash.record.history import LABGRID_COLUMNS, SCHEMA_VERSION, History
from piflash.record.result import OperationResult


def _row(history: History, place=None) -> int:
    result = OperationResult.start("flash", None, "sim:a", "nrf52840")
    result.labgrid_place = place
    result.ok = True
    row = history.open(result)
    history.complete(row, result)
    return row


def test_schema_4_history_gets_the_labgrid_column_and_keeps_its_chain(tmp_path):
    path = tmp_path / "history.sqlite3"
    with History(path) as h:
        _row(h)
    with sqlite3.connect(path) as db:  # as piflash with schema 4 left it
        for name in LABGRID_COLUMNS:
            db.execute(f"ALTER TABLE operations DROP COLUMN {name}")
        db.execute("PRAGMA user_version = 4")
    with History(path) as h:
        _row(h, "bench-1")
        report = h.verify_chain()
        assert report.ok and report.sealed == 2
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 5
        got = db.execute("SELECT labgrid_place FROM operations ORDER BY id").fetchall()
    assert got == [(None,), ("bench-1",)]


def test_the_place_is_in_the_hash(tmp_path):
    path = tmp_path / "history.sqlite3"
    with History(path) as h:
        _row(h, "bench-1")
    with sqlite3.connect(path) as db:
        db.execute("UPDATE operations SET labgrid_place = 'bench-2'")
    with History(path) as h:
        report = h.verify_chain()
    assert not report.ok and report.problems[0].kind == "edited"


def test_flash_records_the_place_in_the_row_and_the_result(cli, firmware_dir):
    fw = firmware_dir / "nrf52840" / "firmware.hex"
    out = cli.json("flash", fw, "-u", "sim:nrf52840", "--labgrid-place", "bench-7")
    assert out["labgrid_place"] == "bench-7"
    plain = cli.json("flash", fw, "-u", "sim:nrf52840")
    assert plain["labgrid_place"] is None
    rows = cli.json("history")["operations"]
    assert [r["labgrid_place"] for r in sorted(rows, key=lambda r: r["id"])] == ["bench-7", None]
    assert json.dumps(rows)  # the schema test checks the shape; here the values
