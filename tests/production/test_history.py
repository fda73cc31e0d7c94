"""The history: every CLI operation recorded, filters and exports, and a database that survives kill -9."""

from __future__ import annotations

import csv
import io
import os
import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time

import pytest

from piflash.cli.history import export_columns
from piflash.errors import ExitCode
from piflash.record.history import History, summarize
from piflash.record.result import OperationResult

NRF = ["-t", "nrf52840", "-u", "sim:nrf52840"]


@pytest.fixture
def app_hex(firmware_dir):
    return firmware_dir / "nrf52840" / "firmware.hex"


def test_cli_operations_are_recorded(cli, app_hex, tmp_path):
    cli("sim", "create", "nrf52840", "-t", "nrf52840", check=0)
    ok = cli.json("flash", app_hex, *NRF, "-q")
    cli.json("verify", app_hex, *NRF, "-q")
    cli("reset", *NRF, check=0)
    cli("sim", "fault", "nrf52840", "--bit-flip", "0x1235:3", check=0)
    bad = cli.json("flash", app_hex, *NRF, "-q", "--erase", "chip", check=ExitCode.VERIFY)

    out = cli.json("history")
    rows = out["operations"]
    assert [(r["operation"], r["outcome"]) for r in rows] == [
        ("flash", "pass"), ("verify", "pass"), ("reset", "pass"), ("flash", "fail")]
    first, last = rows[0], rows[-1]
    assert first["target_uid"] == ok["target_uid"] and first["probe_id"] == "sim:nrf52840"
    assert first["firmware"] == str(app_hex.resolve()) and first["firmware_sha256"] == ok["firmware_sha256"]
    assert first["image_bytes"] == ok["image_bytes"] and first["exit_code"] == 0
    assert first["programmed_bytes"] == ok["program"]["programmed_bytes"] > 0
    for phase in ("connect", "erase", "program", "verify", "reset"):
        assert first["durations"][phase] == ok["durations"][phase]
    assert first["started_at"] <= first["ended_at"] <= last["started_at"]
    assert last["exit_code"] == ExitCode.VERIFY and last["error_kind"] == "VerifyError"
    assert last["error"] == bad["error"]["message"] and last["durations"]["verify"] is not None
    # one passed flash: boards/hour needs two (a verify, a reset, a failed flash make no board)
    assert out["summary"] == {"passed": 3, "failed": 1, "skipped": 0, "interrupted": 0, "open": 0,
                              "boards": 1, "boards_per_hour": None}

    assert [r["id"] for r in cli.json("history", "--failed")["operations"]] == [last["id"]]
    assert len(cli.json("history", "--board", ok["target_uid"].upper())["operations"]) == 4
    assert cli.json("history", "--board", "0123")["operations"] == []
    assert len(cli.json("history", "--since", "1h")["operations"]) == 4
    assert cli.json("history", "--since", "2099-01-01")["operations"] == []
    assert [r["id"] for r in cli.json("history", "-n", "2")["operations"]] == [3, 4]

    # the group keeps the plain command line working beside its verify-chain subcommand
    assert [r["id"] for r in csv.DictReader(io.StringIO(
        cli("history", "--since", "8h", "--failed", "--csv", check=0).stdout))] == [str(last["id"])]
    table = cli("history", check=0).stdout
    assert "FAIL" in table and "PASS" in table
    assert table.strip().splitlines()[-1] == "3 passed, 1 failed, 0 skipped, 1 board"
    parsed = list(csv.DictReader(io.StringIO(cli("history", "--csv", check=0).stdout)))
    assert tuple(parsed[0]) == export_columns() and len(parsed) == 4
    assert parsed[3]["outcome"] == "fail"


def test_history_bad_arguments(cli, tmp_path):
    assert "neither a date" in cli("history", "--since", "yesterday", check=2).stderr
    assert "exclude each other" in cli("history", "--csv", "--json", check=2).stderr
    (tmp_path / "not-a-db").write_text("hello, this is not SQLite " * 100)
    proc = cli("history", "--file", tmp_path / "not-a-db", check=ExitCode.HISTORY)
    assert "cannot open the history database" in proc.stderr
    assert "is damaged or not a piflash history: move it aside" in proc.stderr      # not "is the folder writable?"


def test_unwritable_history_warns_but_flashes(cli, app_hex, tmp_path, monkeypatch):
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("PIFLASH_HISTORY", str(tmp_path / "file" / "history.sqlite3"))
    cli("sim", "create", "nrf52840", "-t", "nrf52840", check=0)
    proc = cli("flash", app_hex, *NRF, "-q", check=0)
    assert "warning: history not written" in proc.stderr
    monkeypatch.setenv("PIFLASH_HISTORY", "off")
    assert cli("flash", app_hex, *NRF, "-q", check=0).stderr == ""


def _result(i: int) -> OperationResult:
    res = OperationResult(operation="flash", probe_id=f"sim:b{i}", target="nrf52840",
                          target_uid=f"{i:016x}", firmware="/fw.hex", firmware_sha256="ab" * 32,
                          image_bytes=65536, ok=i % 5 != 0, started_at=1_700_000_000.0 + 10 * i,
                          duration=2.0, durations={"connect": 0.1, "program": 1.5})
    if not res.ok:
        res.error = {"kind": "VerifyError", "message": "1 byte(s) differ", "exit_code": 12}
    return res


def test_record_query_summarize(tmp_path):
    with History(tmp_path / "h.sqlite3") as db:
        ids = [db.record(_result(i), station="line-1") for i in range(1, 11)]
        db.record(_result(11), outcome="skip", profile="p")
        rows = db.query()
        assert [r["id"] for r in rows] == ids + [11]
        assert [r["id"] for r in db.query(failed=True)] == [5, 10]
        assert len(db.query(station="line-1")) == 10
        assert [r["id"] for r in db.query(since=1_700_000_000.0 + 95)] == [10, 11]
        with pytest.raises(ValueError):
            db.record(_result(1), outcome="maybe")
    s = summarize(rows)
    # 8 passed flashes between the first one's start (t=10) and the last one's end (i=9: t=92)
    assert s == {"passed": 8, "failed": 2, "skipped": 1, "interrupted": 0, "open": 0, "boards": 11,
                 "boards_per_hour": round(8 * 3600 / 82, 1)}
    assert summarize([])["boards_per_hour"] is None


WRITER = textwrap.dedent("""
    import sys
    from piflash.record.history import History
    from piflash.record.result import OperationResult
    db = History(sys.argv[1])
    i = 0
    while True:
        i += 1
        r = OperationResult(operation="flash", probe_id="sim:k", target="nrf52840",
                            target_uid="%016x" % i, firmware="/fw.hex", image_bytes=65536,
                            ok=True, started_at=1.0 * i, duration=0.5,
                            durations={"connect": 0.1, "program": 0.3, "verify": 0.1})
        db.record(r)
        if i == 1:
            print("ready", flush=True)
""")


def test_kill_9_mid_write_leaves_a_sound_database(tmp_path):
    path = tmp_path / "h.sqlite3"
    rng = random.Random(7)
    last = 0
    for _ in range(12):
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE,
                                text=True)
        assert proc.stdout.readline() == "ready\n"
        time.sleep(rng.uniform(0.0, 0.15))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        db = sqlite3.connect(str(path))
        assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        rows = db.execute("SELECT * FROM operations").fetchall()
        db.close()
        assert len(rows) > last  # every run committed at least its first row
        last = len(rows)
    with History(path) as h:
        h.reap()                                   # the killed writers' open rows: interrupted
        for r in h.query():
            # every row whole: each column the writer sets is there, consistent with the others
            assert r["target_uid"] == "%016x" % int(r["started_at"]) and r["image_bytes"] == 65536
            if r["outcome"] == "interrupted":      # killed between opening and completing the row
                assert r["ended_at"] is None and r["error"] == "interrupted (process died)"
                continue
            assert r["ended_at"] == r["started_at"] + 0.5 and r["outcome"] == "pass"
            assert (r["connect_s"], r["program_s"], r["verify_s"]) == (0.1, 0.3, 0.1)
        report = h.verify_chain()
        assert report.ok and report.sealed == len(h.query()) and report.open_rows == []


def test_a_row_that_does_not_exist_is_a_usage_error_not_a_broken_history(cli):
    """Issue 38: 'history show 999999' was exit 18, the code of a history that cannot be opened."""
    cli("history", check=0)
    for args in (("history", "show", "999999"), ("history", "show", "999999", "--json")):
        proc = cli(*args, check=ExitCode.USAGE)
        assert "history row #999999 does not exist in " in proc.stdout + proc.stderr


@pytest.fixture
def read_only_folder(tmp_path):
    """A history of 11 rows in a folder this user can only read: a read-only bind mount as root
    (whom file modes do not stop), modes 0555/0444 otherwise."""
    src = tmp_path / "rw"
    src.mkdir()
    with History(src / "h.sqlite3") as db:
        for i in range(1, 12):
            db.record(_result(i), station="line-1")
    if os.geteuid() != 0:
        (src / "h.sqlite3").chmod(0o444)
        src.chmod(0o555)
        yield src / "h.sqlite3"
        src.chmod(0o755)
        return
    mnt = tmp_path / "ro"
    mnt.mkdir()
    if subprocess.run(["mount", "--bind", str(src), str(mnt)], capture_output=True).returncode != 0:
        pytest.skip("bind mounts are not allowed here (a container without CAP_SYS_ADMIN)")
    try:
        if subprocess.run(["mount", "-o", "remount,bind,ro", str(mnt)], capture_output=True).returncode != 0:
            pytest.skip("a bind mount cannot be made read-only here")
        yield mnt / "h.sqlite3"
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_a_history_that_can_only_be_read_is_still_read(cli, read_only_folder):
    """Issue 38: 'history' on a read-only mount was exit 18: opening the database wrote to it."""
    import json

    path = str(read_only_folder)
    proc = cli("history", "--file", path, "--json", check=0)
    doc = json.loads(proc.stdout)
    assert len(doc["operations"]) == 11 and doc["summary"]["failed"] == 2
    assert json.loads(cli("history", "show", "5", "--file", path, "--json", check=0).stdout)["row"]["id"] == 5
    assert "intact" in cli("history", "verify-chain", "--file", path, check=0).stdout
    assert not any(p.name.endswith(("-wal", "-shm")) for p in read_only_folder.parent.iterdir())
    # A command that writes rows still says the history cannot be written.
    from piflash.errors import HistoryError

    with pytest.raises(HistoryError):
        History(read_only_folder).check_writable()
