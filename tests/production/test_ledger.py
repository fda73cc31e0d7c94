"""The central ledger on a real PostgreSQL server (issue 24): stations sharing a serial counter
never issue a number twice, every sealed row reaches the ledger exactly once with each station's
chain intact, a station cut off from the database keeps flashing and uploads its queue when the
database is back, and a row edited in the ledger is named with its station. Debian's postgresql,
started by the test in a temporary folder as a normal user (tests/support/pgserver.py)."""

from __future__ import annotations

import signal
import socket

import pytest

pytest.importorskip("unicorn")
pytest.importorskip("psycopg")

from support.pgserver import PgServer  # noqa: E402
from support.stationkit import (  # noqa: E402
    StationProcess,
    rows,
    samples,
    wait_for,
    wait_rows,
    write_config,
    write_profile,
)

from piflash.errors import ExitCode  # noqa: E402
from piflash.sim import SimStore  # noqa: E402


@pytest.fixture
def pg():
    server = PgServer()
    yield server
    server.close()


def _station(tmp_path, firmware_dir, name, probe, url, block=4, **extra):
    d = tmp_path / name
    d.mkdir()
    profile = write_profile(d, firmware_dir / "nrf52840" / "firmware.hex", name="numbered",
                            serial="{uicr_customer: 0, encoding: u32, start: 1000}")
    config = write_config(d, profile, [probe], d / "history.sqlite3", ledger=url,
                          serials=d / "serials.sqlite3", serial_block=block, poll_interval=0.05, **extra)
    config.write_text(config.read_text().replace("station: test-line", f"station: {name}"))
    return d, config


def _ledger_rows(url):
    from piflash.record.ledger import Ledger

    with Ledger(url) as db:
        return db.rows()


def _age_leases(url, seconds):
    """Time passes for the ledger's leases: their ``leased_at`` and ``expires_at`` move ``seconds``
    back, as a wait of that long would leave them (the ledger compares ``expires_at`` with the clock),
    without the wait."""
    from piflash.record.ledger import Ledger

    with Ledger(url) as db:
        db.connection.execute("UPDATE ledger_leases SET leased_at = leased_at - %s, expires_at = expires_at - %s",
                              (seconds, seconds))


def test_two_stations_one_counter_one_record(tmp_path, firmware_dir, pg, cli):
    store = SimStore()
    stations = []
    for name in ("line-a", "line-b"):
        store.create(f"{name}-bay", "nrf52840")
        d, config = _station(tmp_path, firmware_dir, name, f"sim:{name}-bay", pg.url)
        stations.append((name, d, StationProcess(config, d / "station.log")))
    try:
        for n in range(1, 6):                           # five boards on each station
            for name, d, st in stations:
                wait_rows(d / "history.sqlite3", n, st)
                if n < 5:
                    store.swap(f"{name}-bay")
        wait_for(lambda: len(_ledger_rows(pg.url)) == 10, "every row in the ledger", deadline=60)
    finally:
        for _, _, st in stations:
            st.signal(signal.SIGTERM)
            assert st.wait() == 0, st.output()
    central = _ledger_rows(pg.url)
    serials = [r["serial"] for r in central]
    assert len(serials) == len(set(serials)) == 10                   # no number twice
    for name, d, _ in stations:
        local = rows(d / "history.sqlite3")
        mine = [r for r in central if r["origin"] == name]
        assert [(r["id"], r["row_hash"]) for r in mine] == [(r["id"], r["row_hash"]) for r in local]
    assert cli("ledger", "verify-chain", "--ledger", pg.url, check=0).stdout.count("intact") == 2
    report = cli.json("ledger", "report", "--ledger", pg.url)["report"]
    assert {(r["station"], r["boards"], r["passed"]) for r in report} == {("line-a", 5, 5), ("line-b", 5, 5)}
    assert all(r["yield"] == 1.0 and r["first_pass_yield"] == 1.0 for r in report)


def test_a_station_cut_off_keeps_flashing_and_uploads_its_queue_once(tmp_path, firmware_dir, pg, cli):
    store = SimStore()
    store.create("bay", "nrf52840")
    prom = tmp_path / "line-c.prom"
    d, config = _station(tmp_path, firmware_dir, "line-c", "sim:bay", pg.url, block=16, metrics=prom)
    history = d / "history.sqlite3"
    queue = ("piflash_ledger_queue_rows", (("station", "line-c"),))
    st = StationProcess(config, d / "station.log")
    try:
        wait_rows(history, 1, st)
        wait_for(lambda: len(_ledger_rows(pg.url)) == 1, "the first row in the ledger")
        pg.stop()                                        # the network cut: the database is gone
        for n in (2, 3):
            store.swap("bay")
            wait_rows(history, n, st)                    # still flashing, numbers from its lease
        st.wait_output("ledger not reached")
        assert samples(prom)[queue] == 2                # the metric says what waits
        pg.start()
        wait_for(lambda: len(_ledger_rows(pg.url)) == 3, "the queue uploaded", deadline=30)
        status = cli("ledger", "status", "--ledger", pg.url, "--file", history, "--station", "line-c", check=0)
        assert "0 queued" in status.stdout
    finally:
        st.signal(signal.SIGTERM)
        assert st.wait() == 0, st.output()
    central = _ledger_rows(pg.url)
    assert [r["seq"] for r in central] == [1, 2, 3]           # each once
    assert samples(prom)[queue] == 0
    assert [r["outcome"] for r in central] == ["pass"] * 3


def test_unreachable_ledger_and_an_edited_row(tmp_path, firmware_dir, pg, cli):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free = s.getsockname()[1]
    proc = cli("ledger", "verify-chain", "--ledger", f"postgresql://nobody@127.0.0.1:{free}/postgres",
               check=int(ExitCode.LEDGER))
    assert "cannot use the ledger" in proc.stderr and "Traceback" not in proc.stderr
    store = SimStore()
    store.create("bay", "nrf52840")
    d, config = _station(tmp_path, firmware_dir, "line-d", "sim:bay", pg.url)
    st = StationProcess(config, d / "station.log")
    try:
        wait_rows(d / "history.sqlite3", 1, st)
        wait_for(lambda: len(_ledger_rows(pg.url)) == 1, "the row in the ledger")
    finally:
        st.signal(signal.SIGTERM)
        assert st.wait() == 0
    import psycopg

    with psycopg.connect(pg.url, autocommit=True) as db:
        db.execute("UPDATE ledger_operations SET serial = '9999' WHERE origin = 'line-d'")
    proc = cli("ledger", "verify-chain", "--ledger", pg.url, check=int(ExitCode.HISTORY_CHAIN))
    assert "station line-d: row #1 (seq 1) no longer matches its row_hash" in proc.stderr


def test_station_config_refuses_a_url_that_is_not_postgresql(tmp_path, firmware_dir, cli):
    d, config = _station(tmp_path, firmware_dir, "line-e", "sim:x", "mysql://somewhere/db")
    proc = cli("station", "run", "--plain", "--config", config, check=int(ExitCode.PROFILE))
    assert "key 'ledger': expected a PostgreSQL URL" in proc.stderr


def test_a_station_killed_mid_board_loses_no_row_and_issues_no_number_twice(tmp_path, firmware_dir, pg, cli):
    """One of two stations is SIGKILLed right after programming a board (the serial module's
    test-only kill point), then started again: its interrupted row reaches the ledger once, its
    lease is marked lost there, and no number is issued twice across the line."""
    import os as _os

    store = SimStore()
    made = {}
    for name in ("line-k", "line-m"):
        store.create(f"{name}-bay", "nrf52840")
        made[name] = _station(tmp_path, firmware_dir, name, f"sim:{name}-bay", pg.url)
    k_dir, k_config = made["line-k"]
    m_dir, m_config = made["line-m"]
    k = StationProcess(k_config, k_dir / "k1.log", env=dict(_os.environ, PIFLASH_TEST_KILL_AT="programmed"))
    m = StationProcess(m_config, m_dir / "m.log")
    try:
        wait_rows(m_dir / "history.sqlite3", 1, m)
        assert k.proc.wait(60) == -signal.SIGKILL        # killed itself mid-board
        k = StationProcess(k_config, k_dir / "k2.log")   # the operator starts it again
        wait_rows(k_dir / "history.sqlite3", 2, k)       # the interrupted row, then the board: programmed, so skipped
        store.swap("line-k-bay")                         # the next board takes a number: the lease is recovered
        wait_rows(k_dir / "history.sqlite3", 3, k)
        store.swap("line-m-bay")
        wait_rows(m_dir / "history.sqlite3", 2, m)
        wait_for(lambda: len(_ledger_rows(pg.url)) == 5, "every row in the ledger", deadline=60)
    finally:
        for st in (k, m):
            if st.proc.poll() is None:
                st.signal(signal.SIGTERM)
                st.wait()
    central = _ledger_rows(pg.url)
    assert sorted(r["outcome"] for r in central) == ["interrupted", "pass", "pass", "pass", "skip"]
    serials = [r["serial"] for r in central if r["serial"]]
    assert len(serials) == len(set(serials)) == 4       # the interrupted board keeps its number
    out = cli("ledger", "status", "--ledger", pg.url, "--file", k_dir / "history.sqlite3",
              "--station", "line-k", check=0, env={"COLUMNS": "200"}).stdout
    assert "1 lost by stations that crashed" in out and "0 queued" in out
    assert cli("ledger", "verify-chain", "--ledger", pg.url, check=0).stdout.count("intact") == 2


def test_a_one_off_flash_goes_to_the_ledger(tmp_path, firmware_dir, pg, cli, monkeypatch):
    SimStore().create("one", "nrf52840")
    monkeypatch.setenv("PIFLASH_STATION", "bench-7")
    fw = firmware_dir / "nrf52840" / "firmware.hex"
    cli("flash", fw, "-u", "sim:one", "-t", "nrf52840", "-q", "--ledger", pg.url, check=0)
    central = _ledger_rows(pg.url)
    assert [(r["origin"], r["operation"], r["outcome"]) for r in central] == [("bench-7", "flash", "pass")]
    # the database gone: the row waits in the history, and goes up with the next one
    pg.stop()
    proc = cli("flash", fw, "-u", "sim:one", "-t", "nrf52840", "-q", "--ledger", pg.url, check=0)
    assert "not in the ledger yet (queued in the history)" in proc.stderr
    pg.start()
    monkeypatch.setenv("PIFLASH_LEDGER", pg.url)
    cli("verify", fw, "-u", "sim:one", "-t", "nrf52840", "-q", check=0)
    assert [r["seq"] for r in _ledger_rows(pg.url)] == [1, 2, 3]


def test_a_lease_expires_by_time_and_its_holder_renews_or_closes_it(tmp_path, firmware_dir, pg, cli):
    """``lease_ttl``: a lease not heard of within its time is ``expired`` (accounted with the
    numbers the ledger's rows show used); a live station that numbers its next board renews it
    (open again, the same numbers go on); a station killed and started again marks it lost."""
    import time

    store = SimStore()
    store.create("bay-x", "nrf52840")
    # 5 s: time enough, on a loaded CI machine, between the renewal (when the second board is
    # numbered, before it is flashed) and the status read after its row (a 2 s lease expired
    # again in between there once).
    d, config = _station(tmp_path, firmware_dir, "line-x", "sim:bay-x", pg.url, block=4, lease_ttl=5)
    history = d / "history.sqlite3"

    def status():
        return cli("ledger", "status", "--ledger", pg.url, "--file", history, "--station", "line-x",
                   check=0, env={"COLUMNS": "200"}).stdout     # a line each, as the asserts read them

    st = StationProcess(config, d / "x1.log")
    try:
        wait_rows(history, 1, st)                                    # serial 1000, a lease of 4
        wait_for(lambda: len(_ledger_rows(pg.url)) == 1, "the row in the ledger")
        # idle past the lease's time (5 s): the lease aged 5.5 s; the station itself waits out
        # ttl / 4 for real, the time within which it does not renew a lease again (leases.py)
        time.sleep(1.5)
        _age_leases(pg.url, 5.5)
        assert "0 open, 0 closed, 0 lost by stations that crashed (0 numbers never issued), 1 expired " \
               "(3 numbers not seen in the ledger's rows)" in status()
        store.swap("bay-x")
        wait_rows(history, 2, st)                                    # the holder is back: renewed
        out = status()
        assert "1 open, 0 closed, 0 lost" in out and "0 expired" in out, out
        wait_for(lambda: len(_ledger_rows(pg.url)) == 2, "the second row in the ledger")
    finally:
        st.kill()                                                    # no clean stop: the lease stays open
    _age_leases(pg.url, 5.5)                                         # and its time runs out
    assert "1 expired (2 numbers not seen" in status()
    st = StationProcess(config, d / "x2.log")
    try:
        wait_rows(history, 3, st)                                    # the same board again: skipped
        store.swap("bay-x")
        wait_rows(history, 4, st)                                    # a new number: the old lease recovered
    finally:
        st.signal(signal.SIGTERM)
        assert st.wait() == 0, st.output()
    out = status()
    assert "1 lost by stations that crashed (2 numbers never issued), 0 expired" in out, out
    assert [r["serial"] for r in rows(history)] == ["1000", "1001", None, "1004"]
