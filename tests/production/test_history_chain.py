"""The history's hash chain: intact on a real history, broken (and which row, how) after an edit,
a deletion or an insertion; never forked by parallel writers; a schema-1 database migrated."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
import time

import pytest

from piflash.errors import ExitCode
from piflash.record.chain import GENESIS, row_hash
from piflash.record.history import SCHEMA_VERSION, V1_COLUMNS, History
from piflash.record.result import OperationResult

NRF = ["-t", "nrf52840", "-u", "sim:nrf52840"]


#: One worker runs the whole module (pytest-xdist --dist loadgroup): its history is built once.
pytestmark = pytest.mark.xdist_group("history-chain")

@pytest.fixture(scope="module")
def real_history(tmp_path_factory, firmware_dir):
    """A history of four real CLI operations on the simulated board (one failed verify)."""
    import os

    d = tmp_path_factory.mktemp("chain")
    env = dict(os.environ, PIFLASH_SIM_DIR=str(d / "sim"), PIFLASH_HISTORY=str(d / "history.sqlite3"),
               PIFLASH_PROFILE_PATH=str(d / "profiles"))
    fw = firmware_dir / "nrf52840" / "firmware.hex"

    def run(*args, check=0):
        proc = subprocess.run([sys.executable, "-m", "piflash", *map(str, args)], env=env,
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == check, proc.stderr
    run("sim", "create", "nrf52840", "-t", "nrf52840")
    run("flash", fw, *NRF, "-q")
    run("verify", fw, *NRF, "-q")
    run("sim", "fault", "nrf52840", "--bit-flip", "0x1235:3")
    run("flash", fw, *NRF, "-q", "--erase", "chip", check=ExitCode.VERIFY)
    run("reset", *NRF)
    return d / "history.sqlite3"


def _copy(src, tmp_path, change=None):
    dst = tmp_path / "copy.sqlite3"
    with sqlite3.connect(str(src)) as a, sqlite3.connect(str(dst)) as b:
        a.backup(b)
    if change:
        db = sqlite3.connect(str(dst), isolation_level=None)
        db.execute(change)
        db.close()
    return dst


def test_verify_chain_passes_on_a_real_history(cli, real_history, tmp_path):
    path = _copy(real_history, tmp_path)
    proc = cli("history", "verify-chain", "--file", path, check=0)
    assert proc.stdout.startswith("chain intact: 4 sealed rows, head seq 4 row_hash ")
    head = proc.stdout.split()[-1]
    report = cli.json("history", "verify-chain", "--file", path, "--anchor", head)
    assert report["ok"] and report["head_hash"] == head and report["anchor_found"] is True
    rows = cli.json("history", "--file", path)["operations"]
    assert [r["seq"] for r in rows] == [1, 2, 3, 4] and rows[0]["prev_hash"] == GENESIS
    assert all(b["prev_hash"] == a["row_hash"] for a, b in zip(rows, rows[1:]))
    assert {r["pyocd_version"] for r in rows} == {"0.46.0"} and {r["piflash_version"] for r in rows} == {"0.1.0"}
    cli("history", "verify-chain", "--file", path, "--anchor", "ab" * 32, check=ExitCode.HISTORY_CHAIN)


@pytest.mark.parametrize("change, row_id, kind", [
    ("UPDATE operations SET outcome = 'pass', exit_code = 0 WHERE id = 3", 3, "edited"),
    ("UPDATE operations SET firmware_sha256 = upper(firmware_sha256) WHERE id = 1", 1, "edited"),
    ("DELETE FROM operations WHERE id = 2", 2, "deleted"),             # named with its seq: row #2 (seq 2)
    ("DELETE FROM operations WHERE id = 4", 4, "deleted"),              # the newest: only its id is missed
    ("INSERT INTO operations (started_at, operation, outcome, exit_code) VALUES (1, 'flash', 'pass', 0)",
     5, "inserted"),                                                     # outside the chain
    ("INSERT INTO operations (id, seq, started_at, operation, outcome, prev_hash, row_hash) "
     "SELECT 99, 2.5, started_at, 'flash', 'pass', row_hash, row_hash FROM operations WHERE id = 2",
     99, "inserted"),                                                    # between seq 2 and 3
])
def test_verify_chain_names_the_row_and_what_happened(cli, real_history, tmp_path, change, row_id, kind):
    path = _copy(real_history, tmp_path, change)
    proc = cli("history", "verify-chain", "--file", path, check=ExitCode.HISTORY_CHAIN)
    name = f"row #{row_id} (seq 2)" if change == "DELETE FROM operations WHERE id = 2" else f"row #{row_id}"
    assert f"error: the history chain is broken: {name} was {kind}" in proc.stderr, proc.stderr
    assert f"row #{row_id}: {kind}: " in proc.stdout


def test_an_edit_with_a_recomputed_hash_breaks_the_next_link(cli, real_history, tmp_path):
    path = _copy(real_history, tmp_path)
    db = sqlite3.connect(str(path), isolation_level=None)
    db.row_factory = sqlite3.Row
    row = dict(db.execute("SELECT * FROM operations WHERE id = 3").fetchone())
    row.update(outcome="pass", exit_code=0, error=None, error_kind=None)
    db.execute("UPDATE operations SET outcome = 'pass', exit_code = 0, error = NULL, error_kind = NULL, "
               "row_hash = ? WHERE id = 3", (row_hash(row),))
    db.close()
    proc = cli("history", "verify-chain", "--file", path, check=ExitCode.HISTORY_CHAIN)
    assert "row #3 was edited" in proc.stderr and "row #4 links to another hash" in proc.stdout


def test_rows_complete_out_of_order_and_chain_in_completion_order(tmp_path):
    with History(tmp_path / "h.sqlite3") as db:
        a = db.open(OperationResult(operation="flash", probe_id="sim:a", started_at=1.0))
        b = db.open(OperationResult(operation="flash", probe_id="sim:b", started_at=2.0))
        db.complete(b, OperationResult(operation="flash", probe_id="sim:b", ok=True, started_at=2.0))
        db.complete(a, OperationResult(operation="flash", probe_id="sim:a", ok=False, started_at=1.0,
                                       error={"kind": "VerifyError", "message": "x", "exit_code": 12}))
        rows = {r["id"]: r for r in db.query()}
        assert (rows[b]["seq"], rows[a]["seq"]) == (1, 2) and rows[a]["prev_hash"] == rows[b]["row_hash"]
        assert db.verify_chain().ok
        with pytest.raises(Exception, match="already complete"):
            db.complete(a, OperationResult(operation="flash", ok=True))


WRITER = textwrap.dedent("""
    import sys, threading
    from piflash.record.history import History
    from piflash.record.result import OperationResult
    db = History(sys.argv[1])
    def work(t):
        for i in range(int(sys.argv[2])):
            r = OperationResult(operation="flash", probe_id=f"sim:{t}", target_uid=f"{t}-{i}",
                                ok=True, started_at=float(i), duration=0.1)
            row = db.open(r)
            db.complete(row, r)
    threads = [threading.Thread(target=work, args=(f"{sys.argv[3]}{t}",)) for t in range(2)]
    [t.start() for t in threads]
    [t.join() for t in threads]
""")


def test_parallel_writers_never_fork_the_chain(tmp_path):
    """Two processes with two threads each (a station and a CLI beside it), open/complete interleaved."""
    path = tmp_path / "h.sqlite3"
    History(path).close()
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), "25", name]) for name in ("p", "q")]
    checks = 0
    with History(path) as reader:                  # verify-chain beside the writers: always intact
        while any(p.poll() is None for p in procs):
            report = reader.verify_chain()
            assert report.ok, report
            checks += 1
    assert [p.wait(120) for p in procs] == [0, 0] and checks > 0
    with History(path) as db:
        rows = db.query()
        report = db.verify_chain()
    assert len(rows) == 100 and report.ok and report.sealed == 100, report
    assert sorted(r["seq"] for r in rows) == list(range(1, 101))


def test_a_schema_1_database_is_migrated(cli, tmp_path):
    """A history made by piflash 0.1 (the schema-1 DDL, verbatim) gets probe_id and a sealed chain."""
    path = tmp_path / "old.sqlite3"
    db = sqlite3.connect(str(path), isolation_level=None)
    db.execute("""CREATE TABLE operations (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  started_at REAL NOT NULL,
  ended_at REAL NOT NULL,
  station TEXT,
  operation TEXT NOT NULL,
  probe_uid TEXT,
  target TEXT,
  target_uid TEXT,
  firmware TEXT,
  firmware_sha256 TEXT,
  profile TEXT,
  outcome TEXT NOT NULL CHECK (outcome IN ('pass', 'fail', 'skip')),
  exit_code INTEGER NOT NULL,
  error_kind TEXT,
  error TEXT,
  image_bytes INTEGER NOT NULL DEFAULT 0,
  programmed_bytes INTEGER NOT NULL DEFAULT 0,
  connect_s REAL,
  erase_s REAL,
  program_s REAL,
  verify_s REAL,
  reset_s REAL)""")
    db.execute("CREATE INDEX operations_started ON operations (started_at)")
    db.execute("CREATE INDEX operations_board ON operations (target_uid)")
    db.execute("PRAGMA user_version = 1")
    old = [(1700000000.5 + i, 1700000002.0 + i, "line-1", "flash", f"sim:{i}", "nrf52840", f"{i:016x}",
            "/fw.hex", "ab" * 32, None, "pass" if i != 2 else "fail", 0 if i != 2 else 12,
            None if i != 2 else "VerifyError", None if i != 2 else "1 byte(s) differ", 4096, 4096,
            0.1, 0.2, 0.3, 0.4, 0.05) for i in range(1, 5)]
    db.executemany(f"INSERT INTO operations ({', '.join(V1_COLUMNS[1:])}) VALUES "
                   f"({', '.join('?' * (len(V1_COLUMNS) - 1))})", old)
    db.execute("DELETE FROM operations WHERE id = 4")          # a gap made before the chain existed
    db.close()

    rows = cli.json("history", "--file", path)["operations"]
    assert [(r["id"], r["probe_id"], r["outcome"], r["seq"]) for r in rows] == [
        (1, "sim:1", "pass", 1), (2, "sim:2", "fail", 2), (3, "sim:3", "pass", 3)]
    assert "probe_uid" not in rows[0] and rows[1]["exit_code"] == 12 and rows[2]["durations"]["reset"] == 0.05
    with sqlite3.connect(str(path)) as raw:
        assert raw.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
    # the deletion made under schema 1 is still visible: ids are never reused
    proc = cli("history", "verify-chain", "--file", path, check=ExitCode.HISTORY_CHAIN)
    assert "row #4 was deleted" in proc.stderr
    with History(path) as h:                                    # and new rows chain on
        res = OperationResult(operation="flash", probe_id="sim:new", ok=True, started_at=time.time())
        assert h.record(res) == 5
        assert [r["seq"] for r in h.query()] == [1, 2, 3, 4]


def test_newer_schema_is_refused(cli, tmp_path):
    path = tmp_path / "new.sqlite3"
    with sqlite3.connect(str(path)) as db:
        db.execute("PRAGMA user_version = 99")
    proc = cli("history", "--file", path, check=ExitCode.HISTORY)
    assert "history schema 99" in proc.stderr and "newer piflash" in proc.stderr


def _out_of_order_history(path):
    """Three station rows opened as #1, #2, #3 that finish #2, #1, #3: seq 1 is row #2, seq 2
    row #1, seq 3 row #3 (parallel workers, as the station's)."""
    with History(path) as db:
        ids = [db.open(OperationResult(operation="flash", probe_id=f"sim:{n}", started_at=float(i)))
               for i, n in enumerate("abc")]
        for i in (1, 0, 2):
            db.complete(ids[i], OperationResult(operation="flash", probe_id="sim:x", ok=True, started_at=float(i)))
        assert {r["id"]: r["seq"] for r in db.query()} == {1: 2, 2: 1, 3: 3}
    return path


@pytest.mark.parametrize("deleted, seq", [(2, 1), (1, 2)])
def test_verify_chain_names_a_deleted_row_of_an_out_of_order_history(cli, tmp_path, deleted, seq):
    """Deleting row #2 (seq 1) of a history whose rows finished out of order is reported as that
    row, by id and seq, once: not as "row #1 was deleted" (row #1 is there, with seq 2)."""
    path = _out_of_order_history(tmp_path / "h.sqlite3")
    db = sqlite3.connect(str(path), isolation_level=None)
    db.execute("DELETE FROM operations WHERE id = ?", (deleted,))
    db.close()
    proc = cli("history", "verify-chain", "--file", path, check=ExitCode.HISTORY_CHAIN)
    assert f"error: the history chain is broken: row #{deleted} (seq {seq}) was deleted\n" in proc.stderr, proc.stderr
    assert proc.stdout.splitlines() == [
        f"row #{deleted}: deleted: row #{deleted} (seq {seq}) is missing: ids are never reused, and the chain "
        f"goes on at row #{3 if deleted == 1 else 1} (seq {seq + 1})"]
    report = cli.json("history", "verify-chain", "--file", path, check=ExitCode.HISTORY_CHAIN)
    assert [(p["row_id"], p["seq"], p["kind"]) for p in report["problems"]] == [(deleted, seq, "deleted")]


def test_verify_chain_names_by_seq_a_deleted_row_whose_id_is_not_known(cli, tmp_path):
    """Two rows gone, one sealed (#2, seq 1) and one still open (#4): two missing ids and one
    missing seq, so which id held seq 1 is not known; the skip is named by its seq, and the ids
    on their own, none of them blaming a row that is there."""
    path = _out_of_order_history(tmp_path / "h.sqlite3")
    with History(path) as h:
        h.open(OperationResult(operation="flash", probe_id="sim:d", started_at=4.0))
    db = sqlite3.connect(str(path), isolation_level=None)
    db.execute("DELETE FROM operations WHERE id IN (2, 4)")
    db.close()
    report = cli.json("history", "verify-chain", "--file", path, check=ExitCode.HISTORY_CHAIN)
    assert [(p["row_id"], p["seq"]) for p in report["problems"]] == [(None, 1), (2, None), (4, None)]
    assert "seq 1 missing before row #1 (seq 2)" in report["problems"][0]["detail"]
    proc = cli("history", "verify-chain", "--file", path, check=ExitCode.HISTORY_CHAIN)
    assert "error: the history chain is broken: the row with seq 1 was deleted (3 problems)" in proc.stderr
    assert proc.stdout.splitlines()[0].startswith("seq 1: deleted: seq 1 missing before row #1 (seq 2)")
