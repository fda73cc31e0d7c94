"""A station's identity in the ledger (issue 39, item 1): a second station with the same name and
a history of its own had its rows taken as already uploaded (rows keyed by name and id: its row
#1 was "there"), and lost. Now a name is registered with its host and its history's identity at
the first upload; a second claimant is refused with the fix, until ``piflash ledger takeover``
moves the name, recorded; a row is taken for uploaded only when the ledger holds the same
``row_hash``; and a one-off ``--ledger`` uploads only the rows of the commands run with it.
A real PostgreSQL, started by the test (tests/support/pgserver.py)."""

from __future__ import annotations

import shutil
import socket
import time

import pytest

pytest.importorskip("psycopg")

from support.pgserver import PgServer  # noqa: E402

from piflash.errors import ExitCode, LedgerConflictError  # noqa: E402
from piflash.record.history import History  # noqa: E402
from piflash.record.result import OperationResult  # noqa: E402


def _result(uid: str, ok: bool = True) -> OperationResult:
    return OperationResult(operation="flash", probe_id="sim:bay", target="nrf52840", target_uid=uid,
                           firmware="/fw/app.hex", firmware_sha256="ab" * 32, image_bytes=65536, ok=ok,
                           started_at=time.time(), duration=1.0, durations={"connect": 0.1, "program": 0.5})


def _fill(hist: History, station: str, n: int, first_serial: int) -> None:
    for i in range(n):
        hist.record(_result(f"{station}-{first_serial + i}"), station=station, serial=str(first_serial + i))


@pytest.fixture
def pg():
    server = PgServer()
    yield server
    server.close()


def _central(url):
    from piflash.record.ledger import Ledger

    with Ledger(url) as db:
        return db.rows()


def _upload(hist, name, url):
    """One upload as a station's background uploader makes it; returns (new rows, log lines)."""
    from piflash.record.ledger import Uploader

    logged: list = []
    up = Uploader(hist, name, url, logged.append)
    new = up.upload_once()
    up.stop(final=False)
    return new, logged


def test_a_twin_name_is_refused_and_a_takeover_brings_all_rows(tmp_path, pg, cli):
    first, twin = History(tmp_path / "a.sqlite3"), History(tmp_path / "b.sqlite3")
    try:
        from piflash.record.ledger import Uploader

        _fill(first, "st-2", 3, 1000)
        _fill(twin, "st-2", 2, 1008)                       # the passed board 1008 is row #1 here
        first_log: list = []
        first_up = Uploader(first, "st-2", pg.url, first_log.append)     # the first station, running on
        assert first_up.upload_once() == 3
        new, logged = _upload(twin, "st-2", pg.url)
        assert new == 0
        assert len(logged) == 1 and "ledger refuses this station's rows: the ledger's station name 'st-2' is " \
            f"registered to {socket.gethostname()} (history {first.identity[:8]}" in logged[0]
        assert "run 'piflash ledger takeover st-2' on it" in logged[0]
        assert {r["serial"] for r in _central(pg.url)} == {"1000", "1001", "1002"}
        status = cli("ledger", "status", "--ledger", pg.url, "--file", twin.path, "--station", "st-2", check=0)
        assert "this station (st-2): 2 sealed rows, 2 queued for the ledger" in status.stdout   # not "0 queued"

        # the first station is gone; the second replaces it, on purpose
        out = cli("ledger", "takeover", "st-2", "--ledger", pg.url, "--file", twin.path, check=0).stdout
        assert out == (f"station st-2 taken over by {socket.gethostname()} (history {twin.identity[:8]}) from "
                       f"{socket.gethostname()} (history {first.identity[:8]}); recorded in ledger_takeovers\n")
        assert _upload(twin, "st-2", pg.url) == (2, [])
        central = _central(pg.url)
        assert sorted(r["serial"] for r in central) == ["1000", "1001", "1002", "1008", "1009"]   # all there
        assert {(r["history_id"], r["id"], r["row_hash"]) for r in central} == {
            (h.identity, r["id"], r["row_hash"]) for h in (first, twin) for r in h.sealed_after(0)}
        chains = cli("ledger", "verify-chain", "--ledger", pg.url, check=0).stdout
        assert f"st-2 (history {first.identity[:8]})  intact: 3 rows" in chains
        assert f"st-2 (history {twin.identity[:8]})  intact: 2 rows" in chains
        report = cli.json("ledger", "report", "--ledger", pg.url)["report"]
        assert [(r["station"], r["boards"]) for r in report] == [("st-2", 5)]

        from piflash.record.ledger import Ledger

        with Ledger(pg.url) as db:
            [took] = db.takeovers()
        assert (took["name"], took["old_history_id"], took["history_id"]) == ("st-2", first.identity, twin.identity)
        assert took["by_user"].endswith("@" + socket.gethostname()) and took["old_host"] == socket.gethostname()
        # the old station was not dead after all: its next upload is refused, its row stays queued
        _fill(first, "st-2", 1, 1003)
        assert first_up.upload_once() == 0 and f"history {twin.identity[:8]}" in first_log[-1]
        first_up.stop(final=False)
        assert "1003" not in {r["serial"] for r in _central(pg.url)}
    finally:
        first.close()
        twin.close()


def test_a_row_is_taken_for_uploaded_only_when_the_ledger_holds_the_same_row(tmp_path, pg):
    """A copied history (a cloned SD card: same identity, same name, same host) that then went its
    own way: its row with the same key and other content is refused, naming the station and the
    row, never skipped as "already there"."""
    from piflash.record.ledger import Ledger

    with History(tmp_path / "a.sqlite3") as hist:
        _fill(hist, "st-1", 2, 1000)
    shutil.copy(tmp_path / "a.sqlite3", tmp_path / "clone.sqlite3")
    original, clone = History(tmp_path / "a.sqlite3"), History(tmp_path / "clone.sqlite3")
    try:
        assert clone.identity == original.identity
        original.record(_result("board-x"), station="st-1", serial="1002")      # seq 3 on each side,
        clone.record(_result("board-y", ok=False), station="st-1", serial="1002")   # not the same row
        assert _upload(original, "st-1", pg.url)[0] == 3
        new, logged = _upload(clone, "st-1", pg.url)
        assert new == 0 and len(logged) == 1
        assert "station st-1: the ledger's last row of history" in logged[0] and "(seq 3," in logged[0]
        assert "is not this history's" in logged[0]
        with Ledger(pg.url) as db, pytest.raises(LedgerConflictError) as err:
            db.upload("st-1", clone.identity, clone.sealed_after(2))
        assert err.value.message.startswith("station st-1: row #3 (seq 3, row_hash ")
        assert "conflicts with the ledger: the ledger's row #3 is seq 3 with row_hash " in err.value.message
        assert err.value.exit_code == ExitCode.LEDGER
        assert [r["target_uid"] for r in _central(pg.url)] == ["st-1-1000", "st-1-1001", "board-x"]
    finally:
        original.close()
        clone.close()


def test_a_one_off_uploads_only_the_rows_of_commands_run_with_a_ledger(tmp_path, firmware_dir, pg, cli,
                                                                         monkeypatch):
    pytest.importorskip("unicorn")
    from piflash.sim import SimStore

    SimStore().create("one", "nrf52840")
    monkeypatch.delenv("PIFLASH_STATION", raising=False)
    monkeypatch.delenv("PIFLASH_LEDGER", raising=False)
    history = tmp_path / "personal.sqlite3"
    monkeypatch.setenv("PIFLASH_HISTORY", str(history))
    fw = firmware_dir / "nrf52840" / "firmware.hex"
    for _ in range(2):                                        # a personal history: demo runs
        cli("flash", fw, "-u", "sim:one", "-t", "nrf52840", "-q", check=0)
    cli("erase", "-u", "sim:one", "-t", "nrf52840", "--chip", "--yes", "-q", check=0)
    cli("flash", fw, "-u", "sim:one", "-t", "nrf52840", "-q", "--ledger", pg.url, check=0)
    with History(history) as hist:
        me = hist.identity
    origin = f"one-off:{socket.gethostname()}:{me[:8]}"
    central = _central(pg.url)
    assert [(r["origin"], r["seq"], r["operation"]) for r in central] == [(origin, 4, "flash")]
    assert origin != socket.gethostname()                    # never a station's default name
    assert cli("ledger", "verify-chain", "--ledger", pg.url, check=0).stdout == \
        f"{origin:<24} intact: 1 rows, head seq 4\n"
    # the whole history only when asked for
    out = cli("ledger", "upload", "--all-history", "--ledger", pg.url, "--file", history, check=0).stdout
    assert out == f"3 rows uploaded to the ledger under {origin}\n"
    assert [r["seq"] for r in _central(pg.url)] == [1, 2, 3, 4]
    assert cli("ledger", "upload", "--ledger", pg.url, "--file", history, check=0).stdout == \
        f"0 rows uploaded to the ledger under {origin}\n"
    assert cli("ledger", "verify-chain", "--ledger", pg.url, check=0).stdout == \
        f"{origin:<24} intact: 4 rows, head seq 4\n"
    # issue 41: status asked about a station name on this one-off history said "4 queued" for it
    # and nothing of the 4 rows that went up under the one-off origin
    args = ("ledger", "status", "--ledger", pg.url, "--file", history, "--station", "line-9")
    assert max(map(len, cli(*args, check=0).stdout.splitlines())) <= 80   # folded to 80 columns
    status = cli(*args, check=0, env={"COLUMNS": "200"}).stdout
    assert status.splitlines()[-3:] == [
        f"this history ({me[:8]}): 4 sealed rows, in the ledger under:",
        f"  {origin} (one-off): 4 rows, head seq 4",
        "this station (line-9): none of this history's rows; 4 would go up under line-9 only if a station "
        "named line-9 ran on this history",
    ]
    assert "4 queued for the ledger" not in status
    gone = "postgresql://piflash@127.0.0.1:1/ledger"          # a ledger not reached: the row stays queued
    assert "not in the ledger yet" in cli("flash", fw, "-u", "sim:one", "-t", "nrf52840", "-q", "--ledger", gone,
                                          check=0).stderr
    status = cli(*args, check=0, env={"COLUMNS": "200"}).stdout
    assert status.splitlines()[-1] == f"one-off rows of this history queued for the ledger under {origin}: 1 " \
        "(piflash ledger upload)"


def test_a_one_off_naming_a_station_of_another_machine_is_refused(tmp_path, firmware_dir, pg, cli, monkeypatch):
    pytest.importorskip("unicorn")
    from piflash.sim import SimStore

    with History(tmp_path / "station.sqlite3") as hist:
        _fill(hist, "line-1", 2, 1000)
        assert _upload(hist, "line-1", pg.url)[0] == 2
    SimStore().create("one", "nrf52840")
    monkeypatch.setenv("PIFLASH_HISTORY", str(tmp_path / "personal.sqlite3"))
    monkeypatch.setenv("PIFLASH_STATION", "line-1")
    fw = firmware_dir / "nrf52840" / "firmware.hex"
    proc = cli("flash", fw, "-u", "sim:one", "-t", "nrf52840", "-q", "--ledger", pg.url, check=0)
    assert "warning: not in the ledger yet (queued in the history): the ledger's station name 'line-1' is " \
           "registered to" in proc.stderr
    assert "hint: a second station: give it a name of its own" in proc.stderr
    assert len(_central(pg.url)) == 2


def test_a_ledger_from_before_registrations_goes_to_its_own_station_only(tmp_path, pg):
    """A ledger made by a piflash that keyed rows by name and id: its rows go to the station whose
    history has them (same row_hash at their head) at its first upload; a twin is refused."""
    import psycopg

    from piflash.record.ledger import UNREGISTERED, Ledger, _columns

    cols = [n for n, _ in _columns()]
    with psycopg.connect(pg.url, autocommit=True) as db:       # the previous schema, as it made it
        decl = ",\n  ".join(f"{n} {t}" for n, t in _columns())
        db.execute(f"CREATE TABLE ledger_operations (origin text NOT NULL, id bigint NOT NULL, {decl}, "
                   "uploaded_at double precision NOT NULL, PRIMARY KEY (origin, id))")
        db.execute("CREATE UNIQUE INDEX ledger_operations_seq ON ledger_operations (origin, seq)")
    old = History(tmp_path / "old.sqlite3")
    twin = History(tmp_path / "twin.sqlite3")
    try:
        _fill(old, "st-9", 3, 1000)
        _fill(twin, "st-9", 3, 2000)
        with psycopg.connect(pg.url, autocommit=True) as db:
            for r in old.sealed_after(0)[:2]:                  # two rows went up before the upgrade
                db.execute(f"INSERT INTO ledger_operations (origin, id, {', '.join(cols)}, uploaded_at) VALUES "
                           f"(%s, %s, {', '.join(['%s'] * len(cols))}, 0)", ["st-9", r["id"], *[r[c] for c in cols]])
        with Ledger(pg.url) as db:
            assert {r["history_id"] for r in db.rows()} == {UNREGISTERED}
        new, logged = _upload(twin, "st-9", pg.url)
        assert new == 0 and "from before stations registered, up to row #2 (seq 2)" in logged[0]
        assert _upload(old, "st-9", pg.url) == (1, [])
        central = _central(pg.url)
        assert [(r["history_id"], r["seq"], r["row_hash"]) for r in central] == [
            (old.identity, r["seq"], r["row_hash"]) for r in old.sealed_after(0)]
    finally:
        old.close()
        twin.close()
