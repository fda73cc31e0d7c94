"""The record of a bundle (issue 40, item 5): the history's ``bundle_sha256``/``bundle_version``
columns, added to an older history (schema 3) without breaking its hash chain; the ledger's table
gets them too."""

from __future__ import annotations

import sqlite3

from piflash.record.history import BUNDLE_COLUMNS, SCHEMA_VERSION, History
from piflash.record.result import OperationResult


def _row(history: History, bundle=(None, None)) -> int:
    result = OperationResult.start("flash", None, "sim:a", "nrf52840")
    result.bundle_sha256, result.bundle_version = bundle
    result.ok = True
    row = history.open(result)
    history.complete(row, result)
    return row


def test_schema_3_history_gets_the_bundle_columns_and_keeps_its_chain(tmp_path):
    path = tmp_path / "history.sqlite3"
    with History(path) as h:
        _row(h)
        _row(h)
    with sqlite3.connect(path) as db:  # as piflash with schema 3 left it
        for name in BUNDLE_COLUMNS:
            db.execute(f"ALTER TABLE operations DROP COLUMN {name}")
        db.execute("PRAGMA user_version = 3")
    with History(path) as h:
        assert h.verify_chain().ok
        _row(h, ("ab" * 32, 4))
        report = h.verify_chain()
        assert report.ok and report.sealed == 3
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 5
        got = db.execute("SELECT bundle_sha256, bundle_version FROM operations ORDER BY id").fetchall()
    assert got == [(None, None), (None, None), ("ab" * 32, 4)]


def test_bundle_columns_are_in_the_hash(tmp_path):
    path = tmp_path / "history.sqlite3"
    with History(path) as h:
        _row(h, ("cd" * 32, 2))
    with sqlite3.connect(path) as db:
        db.execute("UPDATE operations SET bundle_version = 3")
    with History(path) as h:
        report = h.verify_chain()
    assert not report.ok and report.problems[0].kind == "edited"


def test_an_old_ledger_gets_the_bundle_columns(tmp_path):
    """A ledger made before the bundle columns (real PostgreSQL) gets them when a station
    connects, and takes rows that carry them."""
    import pytest

    pytest.importorskip("psycopg")
    import psycopg
    from support.pgserver import PgServer

    from piflash.record.ledger import Ledger

    server = PgServer()
    try:
        with Ledger(server.url):
            pass
        with psycopg.connect(server.url, autocommit=True) as db:  # as a ledger of schema 3 is
            for name in BUNDLE_COLUMNS:
                db.execute(f"ALTER TABLE ledger_operations DROP COLUMN {name}")
        path = tmp_path / "history.sqlite3"
        with History(path) as h:
            _row(h, ("ef" * 32, 6))
            with Ledger(server.url) as ledger:
                ledger.upload("bay", str(h.identity), h.sealed_after(0))
                (row,) = ledger.rows()
        assert (row["bundle_sha256"], row["bundle_version"]) == ("ef" * 32, 6)
    finally:
        server.close()
