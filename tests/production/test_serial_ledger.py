"""Serial numbers are one set across a line that shares a ledger (issue 39 item 1), on a real
PostgreSQL server (tests/support/pgserver.py): a one-off ``flash --serial N`` with a ledger is
checked against the line's rows, leases and one-offs (exit 25 naming the station) and recorded so
the counter never grants it; a station whose serial database already holds numbers raises the
ledger's counter above them when it joins; a counter whose tables were dropped is made again above
the numbers the ledger's rows hold, and an allocator skips (and records) a number its own database
holds instead of failing on sqlite's UNIQUE constraint."""

from __future__ import annotations

import signal
import sqlite3

import pytest

pytest.importorskip("unicorn")
pytest.importorskip("psycopg")

from support.stationkit import StationProcess, rows, wait_for, wait_rows, write_config, write_profile  # noqa: E402

from piflash.errors import ExitCode  # noqa: E402
from piflash.firmware.patch import CounterSpec  # noqa: E402
from piflash.production.leases import PostgresLeaseSource  # noqa: E402
from piflash.production.serials import SerialAllocator  # noqa: E402

COUNTER = CounterSpec("numbered", start=1000)


@pytest.fixture
def profile(tmp_path, firmware_dir):
    """Profile "numbered" (counter "numbered" from 1000), findable by name for the CLI."""
    d = tmp_path / "profiles"
    d.mkdir(exist_ok=True)
    return write_profile(d, firmware_dir / "nrf52840" / "firmware.hex", name="numbered",
                         serial="{uicr_customer: 0, encoding: u32, start: 1000}")


def _sql(url, statement, args=()):
    import psycopg

    with psycopg.connect(url, autocommit=True) as db:
        cur = db.execute(statement, args)
        return cur.fetchall() if cur.description else None


def _ledger_rows(url):
    from piflash.record.ledger import Ledger

    with Ledger(url) as db:
        return db.rows()


def _station(tmp_path, profile, name, probe, url, block=4):
    d = tmp_path / name
    d.mkdir()
    config = write_config(d, profile, [probe], d / "history.sqlite3", ledger=url, serials=d / "serials.sqlite3",
                          serial_block=block, poll_interval=0.05)
    config.write_text(config.read_text().replace("station: test-line", f"station: {name}"))
    return d, config


def _elsewhere(monkeypatch, tmp_path, name, url):
    """Another machine: its own history and serial database, the line's ledger."""
    d = tmp_path / name
    d.mkdir()
    monkeypatch.setenv("PIFLASH_HISTORY", str(d / "history.sqlite3"))
    monkeypatch.setenv("PIFLASH_SERIALS", str(d / "serials.sqlite3"))
    monkeypatch.setenv("PIFLASH_LEDGER", url)
    monkeypatch.setenv("PIFLASH_STATION", name)
    return d


def _uicr_serial(store, name):
    return int.from_bytes(store.read_nvm(name, "uicr")[0x80:0x84], "little")


def test_one_off_is_checked_against_the_line_and_kept_from_its_counter(tmp_path, store, profile, pg, cli,
                                                                      monkeypatch):
    # Station line-a numbers a board from the ledger (lease 1000..1003) and dies: its lease stays open.
    store.create("bay", "nrf52840")
    d, config = _station(tmp_path, profile, "line-a", "sim:bay", pg.url)
    st = StationProcess(config, d / "station.log")
    try:
        wait_rows(d / "history.sqlite3", 1, st)
        wait_for(lambda: len(_ledger_rows(pg.url)) == 1, "line-a's row in the ledger")
    finally:
        st.signal(signal.SIGKILL)
        st.wait()
    board_a = rows(d / "history.sqlite3")[0]["target_uid"]
    # line-b numbers one board (1004) and stops cleanly: 1005..1007 go back to the ledger.
    b = SerialAllocator(COUNTER, "line-b", tmp_path / "b.sqlite3", block=4, source=PostgresLeaseSource(pg.url))
    assert b.take("b0") == 1004
    b.finish(1004, True)
    assert b.release() == 3
    b.close()

    # On another machine, with PIFLASH_LEDGER set: 1000 (line-a's board, in the ledger's rows) and
    # 1002 (line-a's open lease, never used) are the line's; the old code flashed them with exit 0.
    _elsewhere(monkeypatch, tmp_path, "bench-1", pg.url)
    bench = store.create("bench", "nrf52840")
    blank = store.read_nvm("bench", "uicr")
    proc = cli("flash", "-p", "numbered", "-u", "sim:bench", "--serial", 1000, check=ExitCode.SERIAL_ISSUED)
    assert f"serial 1000 was already issued: board {board_a} has it; ledger row #1 of station line-a: flash " \
           "PASS at" in proc.stderr, proc.stderr
    proc = cli("flash", "-p", "numbered", "-u", "sim:bench", "--serial", 1002, check=ExitCode.SERIAL_ISSUED)
    assert "serial 1002 was already issued: a board whose unique ID was not read has it; ledger lease #1 " \
           "(1000..1003, open) granted to station line-a at" in proc.stderr, proc.stderr
    assert store.read_nvm("bench", "uicr") == blank                     # refused before the probe opened
    # 1006 was given back unused: free. It is flashed and recorded in the ledger as a one-off.
    out = cli("flash", "-p", "numbered", "-u", "sim:bench", "--serial", 1006, check=0)
    assert "serial 1006" in out.stdout and _uicr_serial(store, "bench") == 1006
    assert _sql(pg.url, "SELECT n, holder, state, target_uid FROM ledger_one_offs") == \
        [(1006, "bench-1", "pass", bench.target_uid.lower())]

    # The counter never grants it: the next lease is the returned 1005..1007, 1006 skipped.
    c = SerialAllocator(COUNTER, "line-c", tmp_path / "c.sqlite3", block=4, source=PostgresLeaseSource(pg.url))
    assert [c.take(f"c{i}") for i in range(3)] == [1005, 1007, 1008]
    c.close()
    # And a third machine is told who has it.
    _elsewhere(monkeypatch, tmp_path, "bench-2", pg.url)
    proc = cli("flash", "-p", "numbered", "-u", "sim:bench", "--serial", 1006, check=ExitCode.SERIAL_ISSUED)
    assert f"serial 1006 was already issued: board {bench.target_uid.lower()} has it; ledger row #1 of origin " \
           "bench-1: flash PASS at" in proc.stderr, proc.stderr
    assert "(2 records in the history, the serial database and the ledger)" in proc.stderr   # not line-c's lease


def test_a_station_joining_a_ledger_brings_its_numbers(tmp_path, sim_dir, profile, pg, cli, monkeypatch):
    serials = tmp_path / "line-a" / "serials.sqlite3"
    serials.parent.mkdir()
    alone = SerialAllocator(COUNTER, "line-a", serials, block=4)           # before the ledger: 1000..1005
    assert [alone.take(f"u{i}") for i in range(6)] == list(range(1000, 1006))
    alone.release()
    alone.close()

    # station check is the first contact: the ledger's counter is raised above 1005, recorded.
    config = write_config(tmp_path / "line-a", profile, ["sim:bay"], tmp_path / "line-a" / "history.sqlite3",
                          ledger=pg.url, serials=serials)
    out = cli("station", "check", "--config", config, check=0).stdout
    assert "counter 'numbered' raised from 1000 to 1006 (this station's serial database holds up to 1005)" in out
    assert _sql(pg.url, "SELECT holder, old_next, new_next, reason FROM ledger_counter_raises") == \
        [("test-line", 1000, 1006, "the station's serial database holds numbers up to 1005")]
    assert "counter 'numbered' next 1006" in cli("station", "check", "--config", config, check=0).stdout
    # The numbers it brought are the line's: a one-off elsewhere is refused, naming the station.
    _elsewhere(monkeypatch, tmp_path, "bench-1", pg.url)
    proc = cli("flash", "-p", "numbered", "-u", "sim:none", "--serial", 1003, check=ExitCode.SERIAL_ISSUED)
    assert "serial 1003 was already issued: a board whose unique ID was not read has it; ledger: counter raised " \
           "past 1000..1005 for station test-line at" in proc.stderr, proc.stderr

    # Without station check, the first lease does the same (the old code failed every board with
    # sqlite's "UNIQUE constraint failed: numbers.counter, numbers.n").
    _sql(pg.url, "DELETE FROM ledger_counters")
    _sql(pg.url, "DELETE FROM ledger_counter_raises")
    joined = SerialAllocator(COUNTER, "line-a", serials, block=4, source=PostgresLeaseSource(pg.url))
    assert [joined.take(f"j{i}") for i in range(2)] == [1006, 1007]
    joined.close()
    other = SerialAllocator(COUNTER, "line-b", tmp_path / "b.sqlite3", block=4, source=PostgresLeaseSource(pg.url))
    assert other.take("b0") == 1010                                        # after line-a's lease 1006..1009
    other.close()


def test_dropped_counter_tables_never_give_a_number_again(tmp_path, store, profile, pg):
    # line-a numbers two boards from the ledger (1000, 1001) and stops; its rows are uploaded.
    store.create("bay", "nrf52840")
    d, config = _station(tmp_path, profile, "line-a", "sim:bay", pg.url)
    st = StationProcess(config, d / "station.log")
    try:
        wait_rows(d / "history.sqlite3", 1, st)
        store.swap("bay")
        wait_rows(d / "history.sqlite3", 2, st)
        wait_for(lambda: len(_ledger_rows(pg.url)) == 2, "line-a's rows in the ledger")
    finally:
        st.signal(signal.SIGTERM)
        assert st.wait() == 0, st.output()
    assert sorted(r["serial"] for r in _ledger_rows(pg.url)) == ["1000", "1001"]

    # The counter tables are dropped: the next station to lease makes them again, above the rows.
    _sql(pg.url, "DROP TABLE ledger_counters, ledger_leases, ledger_returned")
    b = SerialAllocator(COUNTER, "line-b", tmp_path / "b.sqlite3", block=4, source=PostgresLeaseSource(pg.url))
    assert b.take("b0") == 1002                                            # the old code gave 1000 again
    b.close()
    assert _sql(pg.url, "SELECT holder, old_next, new_next, reason FROM ledger_counter_raises") == \
        [("line-b", None, 1002, "counter created above number 1001, the highest the ledger holds")]

    # Dropped while line-a's own database holds numbers the ledger's rows do not show (boards not
    # uploaded yet): it raises the made-again counter above them at its next lease.
    a = SerialAllocator(COUNTER, "line-a", d / "serials.sqlite3", block=4, source=PostgresLeaseSource(pg.url))
    assert [a.take(f"a{i}") for i in range(4)] == [1006, 1007, 1008, 1009]  # after line-b's 1002..1005
    _sql(pg.url, "DROP TABLE ledger_counters, ledger_leases, ledger_returned")
    assert a.take("a4") == 1010
    a.close()


def test_the_allocator_skips_and_records_a_number_its_database_holds(tmp_path, pg):
    path = tmp_path / "serials.sqlite3"
    a = SerialAllocator(COUNTER, "line-a", path, block=2, source=PostgresLeaseSource(pg.url))
    assert [a.take("a0"), a.take("a1")] == [1000, 1001]
    a.close()
    # A ledger hands 1001..1003 out again (a returned range made by hand, as after a restore).
    _sql(pg.url, "INSERT INTO ledger_returned (counter, first, count, step, lease_id, returned_at) "
                 "VALUES ('numbered', 1001, 3, 1, 0, 0)")
    a = SerialAllocator(COUNTER, "line-a", path, block=2, source=PostgresLeaseSource(pg.url))
    assert a.take("a2") == 1002                                            # the old code: sqlite's UNIQUE error
    a.close()
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT n, holder, reason FROM skipped").fetchall() == \
            [(1001, "line-a", "already in this serial database (interrupted, holder line-a)")]

