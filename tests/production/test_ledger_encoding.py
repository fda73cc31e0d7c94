"""The ledger on a database of any encoding (issue 39, item 1): PostgreSQL's ``initdb`` under a
C/POSIX locale makes SQL_ASCII databases, where psycopg read text as bytes and sent str as bytea:
``ledger status`` failed ("operator does not exist: text = bytea"), ``verify-chain`` showed a
traceback and ``report`` printed nothing for the rows there. With the client encoding UTF8 text
is text on a UTF8 and a SQL_ASCII server alike; a database in an encoding that converts (LATIN1)
is refused when first reached, naming the fix. Real servers, started by the test
(tests/support/pgserver.py)."""

from __future__ import annotations

import time

import pytest

pytest.importorskip("psycopg")

from support.pgserver import PgServer  # noqa: E402
from support.stationkit import wait_for  # noqa: E402

from piflash.errors import ExitCode  # noqa: E402
from piflash.record.history import History  # noqa: E402
from piflash.record.result import OperationResult  # noqa: E402

#: Text outside ASCII, as a firmware path and an error message may hold it.
FIRMWARE = "/srv/firmware/capteur-µ-été.hex"


def _result(i: int) -> OperationResult:
    return OperationResult(operation="flash", probe_id="sim:bay", target="nrf52840", target_uid=f"{i:016x}",
                           firmware=FIRMWARE, firmware_sha256="ab" * 32, image_bytes=65536, ok=True,
                           started_at=time.time(), duration=1.0, durations={"connect": 0.1, "program": 0.5})


@pytest.fixture(params=["UTF8", "SQL_ASCII"])
def pg(request):
    server = PgServer(encoding=request.param)
    yield server
    server.close()


def test_ten_rows_read_back_on_any_server_encoding(tmp_path, pg, cli):
    import psycopg

    from piflash.record.ledger import Uploader

    with psycopg.connect(pg.url) as db:
        # what psycopg does on SQL_ASCII without a client encoding: text comes back as bytes
        assert db.execute("SHOW server_encoding").fetchone()[0] in (pg.encoding, pg.encoding.encode())
    history = tmp_path / "history.sqlite3"
    logged = []
    with History(history) as hist:
        for i in range(10):
            hist.record(_result(i), station="line-e", slot="sim:bay", profile="capteur-é", serial=str(1000 + i))
        up = Uploader(hist, "line-e", pg.url, logged.append, interval=0.2)     # as a station runs it
        up.start()
        wait_for(lambda: up.uploaded == 10, "the ten rows uploaded", deadline=30)
        up.stop(final=False)
        assert not logged, logged
    status = cli("ledger", "status", "--ledger", pg.url, "--file", history, "--station", "line-e", check=0).stdout
    assert "line-e                         10 rows" in status and "10 sealed rows, 0 queued" in status, status
    chain = cli("ledger", "verify-chain", "--ledger", pg.url, check=0)
    assert chain.stdout.strip() == "line-e                   intact: 10 rows, head seq 10" and not chain.stderr
    report = cli("ledger", "report", "--ledger", pg.url, check=0, env={"COLUMNS": "80"}).stdout
    day = time.strftime("%Y-%m-%d")
    assert report.splitlines() == [
        f"{day}  line-e  capteur-é",
        "  10 boards, 10 passed, yield 100.0%, first pass 100.0%, serials 1000-1009",
        "  failures: none",
    ], report
    data = cli.json("ledger", "report", "--ledger", pg.url)["report"]
    assert [(r["station"], r["profile"], r["boards"]) for r in data] == [("line-e", "capteur-é", 10)]

    from piflash.record.ledger import Ledger

    with Ledger(pg.url) as db:
        assert {r["firmware"] for r in db.rows()} == {FIRMWARE}           # text, byte for byte


def test_a_database_whose_encoding_converts_is_refused_at_first_contact_naming_the_fix(tmp_path, pg, cli):
    import psycopg

    with psycopg.connect(pg.url, autocommit=True) as db:
        db.execute("CREATE DATABASE ledger_l1 ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0")
    url = pg.url.rsplit("/", 1)[0] + "/ledger_l1"
    for command in (["status", "--file", tmp_path / "h.sqlite3"], ["verify-chain"], ["report"]):
        proc = cli("ledger", *command, "--ledger", url, check=int(ExitCode.LEDGER))
        assert "the ledger database 'ledger_l1'" in proc.stderr and "has the encoding LATIN1" in proc.stderr
        assert "createdb -E UTF8 -T template0" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "h.sqlite3").exists()            # the ledger is reached first
    with psycopg.connect(url) as db:                        # refused before anything was made in it
        assert db.execute("SELECT count(*) FROM pg_tables WHERE tablename LIKE 'ledger_%'").fetchone()[0] == 0


def test_report_of_a_ledger_without_flash_rows_says_what_it_holds(tmp_path, pg, cli):
    from piflash.record.ledger import Ledger

    with History(tmp_path / "h.sqlite3") as hist:
        r = _result(0)
        r.operation = "verify"
        hist.record(r)
        with Ledger(pg.url) as db:
            db.upload("bench", str(hist.identity), hist.sealed_after(0))
    out = cli("ledger", "report", "--ledger", pg.url, check=0).stdout
    assert out == "no flash rows in the ledger (1 rows: verify 1)\n"


def test_report_fits_80_columns_with_long_names_and_many_causes(tmp_path, pg, cli):
    """Issue 41: ``ledger report`` was about 165 characters a line. Long station and profile names,
    a serial range and four failure causes: every line fits 80 columns and the figures stay whole."""
    from piflash.record.ledger import Ledger

    with History(tmp_path / "h.sqlite3") as hist:
        for i, kind in enumerate(["VerifyError", "ProgramError", "EraseError", "ConnectError", None, None]):
            r = _result(i)
            r.ok = kind is None
            r.error = None if kind is None else {"kind": kind, "message": f"a {kind} on this board"}
            hist.record(r, station="assembly-line-east-7", slot="sim:bay", profile="widget-rev-c-production",
                        serial=str(123456 + i))
        with Ledger(pg.url) as db:
            db.upload("assembly-line-east-7", str(hist.identity), hist.sealed_after(0))
    out = cli("ledger", "report", "--ledger", pg.url, check=0, env={"COLUMNS": "80"}).stdout
    lines = out.splitlines()
    assert max(map(len, lines)) <= 80, out
    assert lines[1:] == [
        "  6 boards, 2 passed, yield 33.3%, first pass 33.3%, serials 123456-123461",
        "  failures: ConnectError 1, EraseError 1, ProgramError 1, VerifyError 1",
    ], out
    assert lines[0].endswith("  assembly-line-east-7  widget-rev-c-production"), out
