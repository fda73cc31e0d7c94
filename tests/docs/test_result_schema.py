"""Issue 19, item 15: every ``--json`` output speaks one dialect, the one docs/result.schema.json
describes (docs/result.md): each command is run through the real CLI on simulated boards, and
each object it prints is validated against the schema, then held to the rules a schema cannot
say: one name per thing, ISO 8601 times with their offset, seconds rounded to 4 places, the
same ``target_uid`` everywhere. History rows are checked as well, new and migrated old ones.

The schema is checked with fastjsonschema (pure Python, in the ``test`` extra only: piflash
itself never imports it).
"""

from __future__ import annotations

import importlib.util
import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from datetime import datetime
from pathlib import Path

import click
import fastjsonschema
import pytest

from piflash.errors import ExitCode
from piflash.record.history import V1_COLUMNS, History
from piflash.record.result import OperationResult

#: The contract of docs/result.md: schema 1, seconds to 4 places.
SCHEMA_VERSION, SECONDS_PLACES = 1, 4
SCHEMA_PATH = Path(__file__).resolve().parents[2] / "docs" / "result.schema.json"
NRF = ("-t", "nrf52840", "-u", "sim:nrf")

#: Names of things that have another, single name in schema 1 (old name -> the name to use).
RETIRED = {"unique_id": "probe_id", "probe_uid": "probe_id", "erase_seconds": "durations.erase",
           "program_seconds": "durations.program",
           **{f"{p}_s": f"durations.{p}" for p in ("connect", "erase", "program", "verify", "reset")}}
#: Floats that are not durations: the stored Unix times (the row hash covers them as stored)
#: and the summary's rate (boards per hour, one decimal).
NOT_SECONDS = {"started_at_unix", "ended_at_unix", "boards_per_hour"}


@pytest.fixture(scope="module")
def validate():
    return fastjsonschema.compile(json.loads(SCHEMA_PATH.read_text()))


def json_commands(group=None, prefix=()):
    """Every piflash command that takes --json, as "protect status", found in the click tree."""
    from piflash.cli import cli

    group = group or cli
    found = set()
    for name, cmd in group.commands.items():
        if name != cmd.name:  # an alias (piflash list): its JSON is its command's
            continue
        path = prefix + (name,)
        if any(p.name == "json_mode" for p in cmd.params):
            found.add(" ".join(path))
        if isinstance(cmd, click.Group):
            found |= json_commands(cmd, path)
    return found


class Checked:
    """Runs ``piflash ... --json`` and checks what it prints; remembers the commands seen."""

    def __init__(self, cli, validate):
        self.cli, self.validate, self.seen = cli, validate, set()

    def __call__(self, *args, check=0):
        proc = self.cli(*args, "--json", check=check)
        out = json.loads(proc.stdout)              # one object, nothing else on stdout
        try:
            self.validate(out)
        except fastjsonschema.JsonSchemaException as exc:
            raise AssertionError(f"piflash {' '.join(map(str, args))} --json: {exc.message}\n"
                                 f"{proc.stdout}") from None
        assert out["schema_version"] == SCHEMA_VERSION
        _rules(out, exempt_probe=out["command"] == "profile show")
        self.seen.add(out["command"])
        return out


def _rules(value, key=None, exempt_probe=False):
    """One name per thing, seconds rounded alike, times in ISO 8601 with an offset."""
    if isinstance(value, dict):
        for k, v in value.items():
            assert k not in RETIRED, f"'{k}' is called {RETIRED[k]} in schema {SCHEMA_VERSION}"
            assert k != "probe" or exempt_probe, "the probe is 'probe_id'"
            _rules(v, k, exempt_probe)
    elif isinstance(value, list):
        for v in value:
            _rules(v, key, exempt_probe)
    elif isinstance(value, float) and key not in NOT_SECONDS:
        assert round(value, SECONDS_PLACES) == value, f"{key}: {value} is not rounded to {SECONDS_PLACES} places"
    if key in ("started_at", "ended_at", "created") and value is not None:
        assert isinstance(value, str) and datetime.fromisoformat(value).tzinfo is not None, (key, value)
    if key == "target_uid" and value is not None:
        assert value == value.lower(), f"target_uid {value} is not lower-case hex"


@pytest.fixture
def checked(cli, validate):
    return Checked(cli, validate)


def _numbered_profile(tmp_path, fw):
    path = tmp_path / "profiles" / "numbered.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(f"""\
        target: nrf52840
        firmware: {fw}
        description: a numbered board
        serial:
          uicr_customer: 0
          encoding: u32
        """))


def test_every_json_output_matches_the_schema(cli, checked, firmware_dir, tmp_path):
    fw = firmware_dir / "nrf52840" / "firmware.hex"
    _numbered_profile(tmp_path, fw)
    cli("sim", "create", "nrf", "--target", "nrf52840", check=0)

    flashed = checked("flash", fw, *NRF, "-q")
    assert flashed["command"] == "flash" and flashed["ok"] and flashed["program"]["erase_mode"] is None  # blank board
    start, end = (datetime.fromisoformat(flashed[k]) for k in ("started_at", "ended_at"))
    assert abs((end - start).total_seconds() - flashed["duration"]) < 0.002
    assert set(flashed["durations"]) == {"connect", "erase", "program", "verify", "reset"}
    uid = flashed["target_uid"]
    numbered = checked("flash", "-p", "numbered", "-u", "sim:nrf", "--serial", "7", "-q")
    assert numbered["serial"] == "7" and numbered["patch"]
    assert checked("verify", fw, *NRF, "-q")["verified"] is True
    backup = checked("read", tmp_path / "backup.hex", *NRF, "--range", "0x0+0x1000", "-q")
    assert backup["operation"] == "read" and backup["image_bytes"] == 4096 and "read" in backup["durations"]
    # erase --sector said erase_mode null and erase_seconds 0 beside durations.erase
    sector = checked("erase", "--sector", "0x1000", *NRF, "-q")
    assert sector["program"]["erase_mode"] == "sector" and sector["program"]["erased_bytes"] == 4096
    assert sector["durations"]["erase"] > 0
    chip = checked("erase", "--chip", "--yes", *NRF, "-q")
    assert chip["program"]["erase_mode"] == "chip"
    assert checked("reset", *NRF)["durations"]["reset"] >= 0

    info = checked("info", *NRF)
    assert info["probe_id"] == "sim:nrf" and info["target_uid"] == uid
    probes = checked("probes")["probes"]
    assert [p["probe_id"] for p in probes] == ["sim:nrf"]
    assert {"nrf52840"} <= {t["name"] for t in checked("targets", "nrf52")["targets"]}
    (board,) = checked("sim", "list")["boards"]
    assert board["target_uid"] == uid

    status = checked("protect", "status", *NRF)
    assert status["status"]["state"] == "open" and status["target_uid"] == uid
    assert checked("protect", "recover", "--yes", *NRF)["protection"] == "open"     # not locked: nothing erased
    assert checked("protect", "lock", *NRF)["protection"] == "locked"
    recovered = checked("protect", "recover", "--yes", *NRF)
    assert recovered["operation"] == "recover-mass-erase" and recovered["program"]["erase_mode"] == "chip"

    history = checked("history")
    rows = history["operations"]
    assert [r["operation"] for r in rows] == ["flash", "flash", "verify", "read", "erase", "erase", "reset",
                                              "protect-status", "recover", "lock", "recover-mass-erase"]
    assert {r["target_uid"] for r in rows} == {uid}
    first = rows[0]
    assert first["started_at"] == flashed["started_at"] and first["ended_at"] == flashed["ended_at"]
    assert first["durations"] == flashed["durations"] and first["duration"] == flashed["duration"]
    assert first["probe_id"] == flashed["probe_id"] == "sim:nrf"
    assert checked("history", "verify-chain")["ok"] is True
    assert checked("history", "show", str(first["id"]))["row"] == first

    assert checked("profile", "list")["profiles"][0]["name"] == "numbered"
    assert checked("profile", "show", "numbered")["target"] == "nrf52840"
    doctor = cli("doctor", "--json")
    assert doctor.returncode in (0, ExitCode.DOCTOR)
    checked.validate(json.loads(doctor.stdout))
    _rules(json.loads(doctor.stdout))
    checked.seen.add("doctor")
    pins = cli("setup", "pins", "--json")
    assert pins.returncode in (0, ExitCode.DOCTOR)
    checked.validate(json.loads(pins.stdout))
    checked.seen.add("setup pins")

    # the bundle commands, with a key made by ssh-keygen (tests/support/bundlekit.py)
    expected = json_commands()
    import shutil

    if shutil.which("ssh-keygen") is None:
        import warnings

        warnings.warn("'bundle ... --json' not checked: ssh-keygen (openssh-client) is missing here")
        expected -= {"bundle create", "bundle sign", "bundle verify", "bundle show"}
    else:
        from support.bundlekit import allowed_signers, make_key

        key = make_key(tmp_path, "owner")
        signers = allowed_signers(tmp_path / "allowed", ("owner", key, 'namespaces="piflash-bundle"'))
        job = tmp_path / "job.pfb"
        made = checked("bundle", "create", "-p", "numbered", "-o", job, "--line", "l1", "--version", "2")
        assert made["signed"] is False and made["bundle_version"] == 2
        assert checked("bundle", "sign", job, "-k", key)["signed"] is True
        assert checked("bundle", "verify", job, "--allowed-signers", signers)["signer"] == "owner"
        assert checked("bundle", "show", job)["verified"] is False

    # the ledger's report: this history's rows in a real PostgreSQL (tests/support/pgserver.py)
    from support.pgserver import PgServer, pg_bin

    if pg_bin() is None or importlib.util.find_spec("psycopg") is None:
        import warnings

        warnings.warn("'ledger report --json' not checked: PostgreSQL or psycopg is missing here "
                      "(scripts/dev-setup.sh test installs both)")
        expected.discard("ledger report")
    else:
        from piflash.record.history import History
        from piflash.record.ledger import Ledger

        server = PgServer()
        try:
            with Ledger(server.url) as ledger, History() as hist:
                ledger.upload("bench", str(hist.identity), hist.sealed_after(0))
            report = checked("ledger", "report", "--ledger", server.url)["report"]
            assert report and report[0]["station"] == "bench"
        finally:
            server.close()

    # 'station status --json' needs a running station: tests/station/test_station_status_file.py
    # validates it (and the status file) against this schema
    expected.discard("station status")
    # every command that has --json was run above
    assert checked.seen == expected


def test_failures_match_the_schema(cli, checked, firmware_dir, tmp_path):
    fw = firmware_dir / "nrf52840" / "firmware.hex"
    usage = checked("flash", "--no-such-option", check=2)
    assert usage == {"schema_version": SCHEMA_VERSION, "command": "flash", "ok": False,
                     "error": dict(usage["error"], kind="UsageError", exit_code=2)}
    assert checked("protect", "status", check=2)["command"] == "protect status"
    missing = checked("flash", tmp_path / "none.hex", *NRF, check=ExitCode.FIRMWARE)
    assert missing["error"]["kind"] == "FirmwareError" and missing["ok"] is False
    assert checked("info", "-t", "nrf52840", "-u", "0123456789abcdef", check=ExitCode.NO_PROBE)["error"]["exit_code"] == ExitCode.NO_PROBE

    cli("sim", "create", "nrf", "--target", "nrf52840", check=0)
    cli("sim", "fault", "nrf", "--bit-flip", "0x1235:3", check=0)
    bad = checked("flash", fw, *NRF, "-q", check=ExitCode.VERIFY)     # a result that got far, failed
    assert bad["phase"] == "verify" and bad["error"]["kind"] == "VerifyError" and not bad["verified"]
    assert bad["ended_at"] and bad["durations"]["verify"] >= 0

    # a broken chain: the report and the error in one object (it used to print two)
    path = Path(os.environ["PIFLASH_HISTORY"])
    with sqlite3.connect(str(path)) as db:
        db.execute("UPDATE operations SET outcome = 'pass' WHERE id = 1")
    report = checked("history", "verify-chain", check=ExitCode.HISTORY_CHAIN)
    assert report["ok"] is False and report["problems"][0]["kind"] == "edited"
    assert report["error"]["kind"] == "HistoryChainError"


def _v1_history(path: Path) -> None:
    """A history written by piflash 0.1 (schema 1: probe_uid, no chain)."""
    db = sqlite3.connect(str(path))
    db.execute(f"CREATE TABLE operations (id INTEGER PRIMARY KEY AUTOINCREMENT, "
               f"{', '.join(V1_COLUMNS[1:])})")
    db.execute("PRAGMA user_version = 1")
    db.execute(f"INSERT INTO operations ({', '.join(V1_COLUMNS[1:])}) VALUES "
               f"({', '.join('?' * (len(V1_COLUMNS) - 1))})",
               (1700000000.5, 1700000002.25, "line-1", "flash", "sim:1", "nrf52840", "00000000000000a1",
                "/fw.hex", "ab" * 32, None, "pass", 0, None, None, 4096, 4096, 0.1, 0.2, 0.3, 0.4, 0.05))
    db.commit()
    db.close()


def test_history_rows_old_and_new_match_the_schema(checked, tmp_path):
    """Rows of every kind, as stored: migrated from schema 1, from a station, skipped, and one
    whose process died (exported as interrupted); their columns are unchanged in the database."""
    path = Path(os.environ["PIFLASH_HISTORY"])
    _v1_history(path)
    res = OperationResult(operation="flash", probe_id="sim:s", target="nrf52840", target_uid="00000000000000b2",
                          ok=True, started_at=1700000100.0, duration=1.23456, durations={"connect": 0.1234})
    with History(path) as h:
        h.record(res, station="line-1", slot="sim:s", outcome="skip")
        dead = subprocess.Popen([sys.executable, "-c", "pass"])
        dead.wait()
        row = h.open(res)
        h._db.execute("UPDATE operations SET pid = ?, process_start = NULL WHERE id = ?", (dead.pid, row))
    rows = checked("history")["operations"]
    assert [(r["operation"], r["outcome"], r["probe_id"]) for r in rows] == [
        ("flash", "pass", "sim:1"), ("flash", "skip", "sim:s"), ("flash", "interrupted", "sim:s")]
    assert rows[0]["durations"] == {"connect": 0.1, "erase": 0.2, "program": 0.3, "verify": 0.4, "reset": 0.05}
    assert rows[0]["duration"] == 1.75 and rows[0]["started_at_unix"] == 1700000000.5
    assert rows[2]["duration"] is None and rows[2]["ended_at"] is None
    with sqlite3.connect(str(path)) as db:                  # stored as ever: the phase columns
        assert db.execute("SELECT connect_s, reset_s FROM operations WHERE id = 1").fetchone() == (0.1, 0.05)
    assert checked("history", "verify-chain")["ok"] is True


def test_schema_is_versioned_and_documented():
    from piflash.record import result

    assert (result.SCHEMA_VERSION, result.SECONDS_PLACES) == (SCHEMA_VERSION, SECONDS_PLACES)
    schema = json.loads(SCHEMA_PATH.read_text())
    assert schema["properties"]["schema_version"] == {"const": SCHEMA_VERSION}
    doc = (SCHEMA_PATH.parent / "result.md").read_text()
    assert f"schema_version {SCHEMA_VERSION}" in doc.replace("`", "") and "result.schema.json" in doc
    for name in sorted(json_commands()):
        assert f"`{name}`" in doc, f"docs/result.md does not name the command {name}"
