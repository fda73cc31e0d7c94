"""Issue 41, item 5: the station's live state in one status file, and ``piflash station status``.

A real station process on simulated probes writes ``status.json`` (beside its history, or in
``$RUNTIME_DIRECTORY``); a reader polls it the whole time and never sees half a file; the file
and ``station status --json`` are validated against docs/result.schema.json; a station that
stopped, or died under ``kill -9``, is "not running" (exit 29), and no file says how to start one.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import fastjsonschema
import pytest

pytest.importorskip("unicorn")

from support.stationkit import wait_for, wait_rows, write_config, write_profile  # noqa: E402

from piflash.errors import ExitCode  # noqa: E402

SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "docs" / "result.schema.json").read_text())
#: --json outputs (the whole schema) and the file itself (its definition, no "command").
CLI_SCHEMA = fastjsonschema.compile(SCHEMA)
FILE_SCHEMA = fastjsonschema.compile(dict(SCHEMA, required=["schema_version"],
                                          anyOf=[{"$ref": "#/definitions/station_status"}]))


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if k != "RUNTIME_DIRECTORY"}
    env.update(extra)
    return env


def _status(config: Path, *args, env=None):
    return subprocess.run([sys.executable, "-m", "piflash", "station", "status", "--config", str(config), *args],
                          capture_output=True, text=True, env=env or _env(), timeout=120)


class Reader(threading.Thread):
    """Reads the status file in a loop, as any tool would, and keeps what it saw."""

    def __init__(self, path: Path) -> None:
        super().__init__(daemon=True)
        self.path, self.reads, self.torn, self.docs = path, 0, [], []
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            try:
                text = self.path.read_text()
            except FileNotFoundError:
                continue
            self.reads += 1
            try:
                doc = json.loads(text)
            except ValueError:
                self.torn.append(text)
                continue
            if not self.docs or doc != self.docs[-1]:
                self.docs.append(doc)


def test_status_file_during_and_after_a_run(tmp_path, store, firmware_dir, stations):
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(64 * 1024))                # long enough to be seen mid-program
    history = tmp_path / "history.sqlite3"
    profile = write_profile(tmp_path, big, base_address="0x0")
    config = write_config(tmp_path, profile, ["sim:bay"], history)
    path = tmp_path / "status.json"
    reader = Reader(path)
    reader.start()
    first = store.create("bay", "nrf52840")
    station = stations(config, tmp_path / "station.log", _env())
    try:
        (row,) = wait_rows(history, 1, station)
        bad = store.swap("bay", faults={"write_protect": [0x1000]})
        wait_rows(history, 2, station)
        wait_for(lambda: json.loads(path.read_text())["counters"]["failed"] == 1, "the FAIL in the status file")
    finally:
        reader.done.set()
        reader.join()
    assert reader.reads > 50 and reader.torn == []           # never half a file
    for doc in reader.docs:
        FILE_SCHEMA(doc)
    slots = [d["slots"][0] for d in reader.docs if d["slots"]]
    flashing = [s for s in slots if s["state"] == "flashing"]
    assert flashing and {s["phase"] for s in flashing} <= {"connect", "erase", "program", "verify", "reset"}
    assert all(0 <= s["progress"] <= 1 for s in flashing)
    assert any(0 < s["progress"] < 1 for s in flashing), [s["progress"] for s in flashing]
    assert any(s["state"] == "waiting" for s in slots)

    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".status.json.")]   # no temp file left
    doc = json.loads(path.read_text())
    FILE_SCHEMA(doc)
    assert doc["station"] == "test-line" and doc["pid"] == station.proc.pid
    assert doc["history"] == str(history) and doc["firmware"]["path"] == str(big)
    assert doc["bundle_version"] is None and doc["ledger"] is None and doc["stopped_at"] is None
    passed = [d["slots"][0]["last_result"] for d in reader.docs
              if d["slots"] and (d["slots"][0]["last_result"] or {}).get("outcome") == "pass"]
    assert passed[0]["history_id"] == row["id"] and passed[0]["target_uid"] == first.target_uid.lower()
    (slot,) = doc["slots"]
    assert (slot["probe_id"], slot["probe_kind"]) == ("sim:bay", "sim")
    last = slot["last_result"]
    assert last["outcome"] == "fail" and last["target_uid"] == bad.target_uid.lower()
    assert last["error"]["exit_code"] == ExitCode.VERIFY and last["error"]["kind"] == "VerifyError", last
    assert last["history_id"] == row["id"] + 1
    assert doc["counters"] == {"passed": 1, "failed": 1, "skipped": 0, "yield": 0.5, "boards_per_hour": None}
    recent = doc["recent"]                                   # the history's rows, newest first (issue 44)
    assert [(r["id"], r["outcome"], r["target_uid"]) for r in recent] == \
        [(row["id"] + 1, "fail", bad.target_uid.lower()), (row["id"], "pass", first.target_uid.lower())]
    assert recent[0]["error_kind"] == "VerifyError" and recent[1]["duration"] > 0

    out = _status(config, "--json")
    assert out.returncode == 0, out.stderr
    shown = json.loads(out.stdout)
    CLI_SCHEMA(shown)
    assert shown["command"] == "station status" and shown["running"] is True
    assert shown["status_file"] == str(path) and shown["slots"] == doc["slots"]
    text = _status(config)
    assert text.returncode == 0, text.stderr
    assert "station test-line: running" in text.stdout and "sim:bay" in text.stdout
    assert "1 passed, 1 failed, 0 skipped; yield 50.0 %" in text.stdout
    assert max(len(line) for line in text.stdout.splitlines()) <= 80, text.stdout

    station.signal(signal.SIGTERM)
    assert station.wait() == 0
    doc = json.loads(path.read_text())
    FILE_SCHEMA(doc)
    assert doc["stopped_at"] and doc["slots"][0]["state"] == "stopping"
    out = _status(config, "--json")
    assert out.returncode == ExitCode.STATION_DOWN
    shown = json.loads(out.stdout)
    CLI_SCHEMA(shown)
    assert shown["running"] is False and shown["ok"] is False and shown["error"]["exit_code"] == 29
    assert "is not running" in out.stderr and "stopped at" in out.stderr


def test_a_killed_station_is_not_running_and_runtime_directory_is_used(tmp_path, store, firmware_dir, stations):
    history = tmp_path / "history.sqlite3"
    profile = write_profile(tmp_path, firmware_dir / "nrf52840" / "firmware.hex")
    config = write_config(tmp_path, profile, ["sim:bay"], history)
    run = tmp_path / "run"
    run.mkdir()
    env = _env(RUNTIME_DIRECTORY=f"{run}:{tmp_path / 'other'}")      # systemd's list: the first is ours
    store.create("bay", "nrf52840")
    station = stations(config, tmp_path / "station.log", env)
    wait_rows(history, 1, station)
    path = run / "status.json"
    wait_for(lambda: path.exists() and json.loads(path.read_text())["counters"]["passed"] == 1, "the PASS")
    assert not (tmp_path / "status.json").exists()
    assert _status(config, env=env).returncode == 0
    station.proc.send_signal(signal.SIGKILL)                       # no clean stop: the file stays as it was
    station.proc.wait()
    doc = json.loads(path.read_text())
    assert doc["stopped_at"] is None and doc["pid"] == station.proc.pid
    out = _status(config, env=env)
    assert out.returncode == ExitCode.STATION_DOWN, out.stdout + out.stderr
    assert f"station test-line is not running: its process {doc['pid']} has ended" in out.stderr
    assert "NOT RUNNING" in out.stdout and "1 passed" in out.stdout     # the last state is still shown
    shown = json.loads(_status(config, "--json", env=env).stdout)
    CLI_SCHEMA(shown)
    assert shown["running"] is False and shown["error"]["kind"] == "StationDownError"


def test_no_status_file_says_how_to_start_the_station(tmp_path):
    config = tmp_path / "station.yaml"
    config.write_text(f"profile: p.yaml\nhistory: {tmp_path / 'history.sqlite3'}\n")
    out = _status(config)
    assert out.returncode == ExitCode.STATION_DOWN
    assert f"no station status file ({tmp_path / 'status.json'} or /run/piflash/status.json)" in out.stderr
    assert f"hint: start it: piflash station run --config {config}" in out.stderr
    shown = json.loads(_status(config, "--json").stdout)
    CLI_SCHEMA(shown)
    assert shown["ok"] is False and shown["error"]["exit_code"] == 29


def test_progress_is_written_at_most_every_interval_and_results_at_once(tmp_path, monkeypatch):
    from piflash.station import status

    writes = []
    real = status.write_atomically

    def counting(path, text, mode=0o644):
        writes.append(json.loads(text))
        real(path, text, mode)

    monkeypatch.setattr(status, "write_atomically", counting)
    board = status.StatusBoard()
    header = {"station": "s", "config": "c", "history": "h", "profile": "p", "target": "nrf52840",
              "firmware": {"path": "f", "sha256": "0" * 64}, "bundle_version": None, "ledger": None, "recent": []}
    sfile = status.StatusFile(tmp_path / "status.json", board, lambda: dict(header), interval=0.3)
    board.outputs = [sfile]
    board.set("sim:a", "waiting", "waiting for board")
    assert len(writes) == 2                                   # at start, and the new state at once
    for pct in range(0, 101):
        board.set("sim:a", "flashing", f"flashing {pct}%", "ab" * 8, pct, phase="program")
    assert len(writes) == 3 and writes[-1]["slots"][0]["progress"] == 0.0    # the first, then held back
    wait_for(lambda: len(writes) == 4, "the held-back progress", deadline=5)
    assert writes[-1]["slots"][0]["progress"] == 1.0                         # the last one, by the timer
    board.set("sim:a", "fail", "FAIL abab verify failed", "ab" * 8,
              error={"kind": "VerifyError", "message": "verify failed, postgresql://u:secret@h/db",
                     "exit_code": 12, "hint": None}, row=7)
    assert len(writes) == 5                                    # a result at once
    last = writes[-1]["slots"][0]["last_result"]
    assert last["history_id"] == 7 and last["error"]["exit_code"] == 12
    assert "secret" not in json.dumps(writes[-1])             # a password never reaches the file
    FILE_SCHEMA(writes[-1])
    time.sleep(0.4)
    assert len(writes) == 5                                    # nothing pending
    sfile.close()
    assert writes[-1]["stopped_at"]
