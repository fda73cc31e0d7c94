"""The ledger's password never reaches the terminal, a log, a history row or a ledger row (issue 39),
whatever form the connection string gives it in: the URI's userinfo, the URI's query
(``?password=``), libpq's keyword form (``password=``), and a libpq error that echoes the string.
A real PostgreSQL (tests/support/pgserver.py); a password-auth cluster for the passfile."""

from __future__ import annotations

import os
import signal
import socket
import sqlite3

import pytest

pytest.importorskip("psycopg")

from support.pgserver import PgServer  # noqa: E402

from piflash.errors import ExitCode  # noqa: E402

PW = "Wr0ngHorse9"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def pg():
    server = PgServer()
    yield server
    server.close()


def _forms(port: int, user: str = "nobody"):
    return {
        "userinfo": f"postgresql://{user}:{PW}@127.0.0.1:{port}/postgres",
        "query": f"postgresql://{user}@127.0.0.1:{port}/postgres?password={PW}",
        "keywords": f"host=127.0.0.1 port={port} user={user} dbname=postgres password={PW}",
        "quoted": f"host=127.0.0.1 port={port} user={user} dbname=postgres password='{PW}'",
        # libpq cannot parse it and quotes the whole URI in its error
        "echoed": f"postgresql://{user}:{PW}@[::1:{port}/postgres",
    }


@pytest.mark.parametrize("form", ["query", "keywords", "quoted", "echoed"])
def test_ledger_status_error_masks_the_password(cli, form):
    url = _forms(_free_port())[form]
    proc = cli("ledger", "status", "--ledger", url, check=int(ExitCode.LEDGER))
    assert "cannot use the ledger" in proc.stderr and "Traceback" not in proc.stderr
    assert PW not in proc.stderr + proc.stdout, proc.stderr
    assert "***" in proc.stderr


@pytest.mark.parametrize("form", ["query", "keywords"])
def test_flash_ledger_warning_masks_the_password(cli, firmware_dir, form, monkeypatch):
    pytest.importorskip("unicorn")
    from piflash.sim import SimStore

    SimStore().create("sec", "nrf52840")
    monkeypatch.setenv("PIFLASH_LEDGER", _forms(_free_port())[form])
    fw = firmware_dir / "nrf52840" / "firmware.hex"
    proc = cli("flash", fw, "-u", "sim:sec", "-t", "nrf52840", "-q", check=0)
    assert "not in the ledger yet" in proc.stderr
    assert PW not in proc.stderr + proc.stdout, proc.stderr


def test_a_url_refused_by_the_config_is_not_echoed(cli, tmp_path, firmware_dir):
    from support.stationkit import write_config, write_profile

    profile = write_profile(tmp_path, firmware_dir / "nrf52840" / "firmware.hex")
    config = write_config(tmp_path, profile, ["sim:x"], tmp_path / "h.sqlite3",
                          ledger=f"'mysql://u:{PW}@h/db'")
    proc = cli("station", "check", "--config", config, check=int(ExitCode.PROFILE))
    assert "key 'ledger'" in proc.stderr and PW not in proc.stderr, proc.stderr


@pytest.mark.parametrize("form", ["query", "keywords"])
def test_station_journal_history_and_ledger_rows_hold_no_password(tmp_path, firmware_dir, pg, cli, form):
    """The ledger down at start: the board fails to lease a number (its row's ``error`` names the
    ledger), the journal says the ledger is not reached; then the ledger is back and the row goes
    up. The password is in none of them."""
    pytest.importorskip("unicorn")
    from support.stationkit import StationProcess, rows, wait_for, wait_rows, write_config, write_profile

    from piflash.record.ledger import Ledger
    from piflash.sim import SimStore

    url = _forms(pg.port, pg.user)[form]
    store = SimStore()
    store.create("sec-bay", "nrf52840")
    profile = write_profile(tmp_path, firmware_dir / "nrf52840" / "firmware.hex", name="numbered",
                            serial="{uicr_customer: 0, encoding: u32, start: 1000}")
    config = write_config(tmp_path, profile, ["sim:sec-bay"], tmp_path / "history.sqlite3", ledger=f'"{url}"',
                          serials=tmp_path / "serials.sqlite3", serial_block=4, poll_interval=0.05)
    pg.stop()
    st = StationProcess(config, tmp_path / "station.log")
    try:
        wait_rows(tmp_path / "history.sqlite3", 1, st)
        pg.start()
        wait_for(lambda: len(Ledger(pg.url).rows()) >= 1, "the failed board's row in the ledger", deadline=60)
    finally:
        st.signal(signal.SIGTERM)
        st.wait()
    journal = st.output()
    assert "ledger" in journal and PW not in journal, journal
    local = rows(tmp_path / "history.sqlite3")
    assert local[0]["outcome"] == "fail" and "ledger" in local[0]["error"], local[0]
    with sqlite3.connect(tmp_path / "history.sqlite3") as db:
        dump = "\n".join(db.iterdump())
    assert PW not in dump
    central = Ledger(pg.url).rows()
    assert central[0]["error"] == local[0]["error"] and PW not in str(central)
    assert cli("ledger", "verify-chain", "--ledger", pg.url, check=0).stdout.count("intact") == 1


def test_a_passfile_keeps_the_password_out_of_the_url(tmp_path, pg, cli, monkeypatch):
    """docs/ledger.md's advice, on a cluster that asks for a password (scram-sha-256): the URL
    names no password, libpq finds it in $PGPASSFILE (mode 0600); without it the server refuses."""
    import psycopg

    with psycopg.connect(pg.url, autocommit=True) as db:
        db.execute(f"CREATE ROLE line LOGIN PASSWORD '{PW}'")
        db.execute("CREATE DATABASE ledger OWNER line")
    hba = pg.data / "pg_hba.conf"
    hba.write_text(f"local all all trust\nhost all {pg.user} 127.0.0.1/32 trust\n"
                   "host all line 127.0.0.1/32 scram-sha-256\n")
    pg.stop()
    pg.start()
    url = f"postgresql://line@127.0.0.1:{pg.port}/ledger"
    for name in [k for k in os.environ if k.startswith("PG")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("PGPASSFILE", str(tmp_path / "none"))
    proc = cli("ledger", "status", "--ledger", url, check=int(ExitCode.LEDGER))
    assert "password" in proc.stderr and "PGPASSFILE" in proc.stderr  # refused, the fix named
    passfile = tmp_path / "pgpass"
    passfile.write_text(f"127.0.0.1:{pg.port}:ledger:line:{PW}\n")
    passfile.chmod(0o600)
    monkeypatch.setenv("PGPASSFILE", str(passfile))
    proc = cli("ledger", "status", "--ledger", url, check=0)
    assert "queued for the ledger" in proc.stdout, proc.stdout
    assert PW not in proc.stdout + proc.stderr
