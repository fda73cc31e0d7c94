"""Words that were wrong (issue 19, item 18), each through the real CLI where it is printed:
help texts, hints that pointed elsewhere, a search that said nothing, a summary that counted what
is not a board, a version without pyOCD's, a script that died with a traceback."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from piflash.errors import ExitCode

REPO = Path(__file__).resolve().parents[2]


def test_erase_auto_is_not_called_the_faster(cli):
    out = cli("flash", "--help", check=0).stdout
    assert "faster of the two" not in out
    assert "never a chip erase" in " ".join(out.split())


def test_targets_that_match_nothing_say_so(cli):
    proc = cli("targets", "pico", check=0)
    assert proc.stdout == ""
    assert "no target type matches 'pico'" in proc.stderr and "rp2040, rp2350" in proc.stderr
    assert "close names: stm32f103rc" in cli("targets", "stm32f13", check=0).stderr
    assert json.loads(cli("targets", "pico", "--json", check=0).stdout)["targets"] == []


def test_version_names_pyocd(cli):
    from importlib.metadata import version

    out = cli("--version", check=0).stdout
    assert out.startswith("piflash ") and f"pyOCD {version('pyocd')}" in out and "Python 3." in out


def test_profile_list_shows_the_description(cli, tmp_path):
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "dk.yaml").write_text("target: nrf52840\nfirmware: app.hex\ndescription: nRF52 DK on bench 3\n")
    out = cli("profile", "list", check=0).stdout
    assert "dk" in out and "nRF52 DK on bench 3" in out
    rows = json.loads(cli("profile", "list", "--json", check=0).stdout)["profiles"]
    assert rows[0]["description"] == "nRF52 DK on bench 3"


def _row(db, op, outcome, uid, start, end):
    db.execute("INSERT INTO operations (started_at, ended_at, operation, target_uid, outcome, exit_code) "
               "VALUES (?, ?, ?, ?, ?, ?)", (start, end, op, uid, outcome, 0 if outcome == "pass" else 12))


def test_history_summary_counts_boards_made(cli, tmp_path):
    """boards/hour counts passed flashes only; one board is "1 board"."""
    from piflash.record.history import History

    History().close()                                   # the schema
    path = Path(os.environ["PIFLASH_HISTORY"])
    with sqlite3.connect(str(path)) as db:
        for i in range(3):
            _row(db, "flash", "fail", "aa", 1000.0 + 10 * i, 1005.0 + 10 * i)
        _row(db, "protect-status", "pass", "aa", 1040.0, 1041.0)
    line = cli("history", check=0).stdout.splitlines()[-1]
    assert line == "1 passed, 3 failed, 0 skipped, 1 board", line
    with sqlite3.connect(str(path)) as db:
        _row(db, "flash", "pass", "bb", 1100.0, 1105.0)
        _row(db, "flash", "pass", "cc", 1105.0, 1110.0)
    summary = json.loads(cli("history", "--json", check=0).stdout)["summary"]
    assert summary["boards"] == 3 and summary["boards_per_hour"] == 720.0     # 2 boards in 10 s


def test_a_corrupt_history_is_not_told_to_check_the_folder(cli, tmp_path, app_hex_path):
    path = Path(os.environ["PIFLASH_HISTORY"])
    path.write_bytes(b"not a database at all, " * 100)
    proc = cli("history", check=int(ExitCode.HISTORY))
    assert "is damaged or not a piflash history: move it aside" in proc.stderr
    assert "folder this user may write" not in proc.stderr


@pytest.fixture
def app_hex_path(firmware_dir):
    return firmware_dir / "nrf52840" / "firmware.hex"


def test_doctor_mentions_the_simulator(cli):
    data = json.loads(cli("doctor", "--json").stdout)
    sim = next(c for c in data["checks"] if c["name"] == "simulator")
    assert sim["status"] == "ok"
    assert "sim:" in sim["detail"]


def test_setup_permissions_is_proposed_only_when_it_has_something_to_change(tmp_path):
    from piflash.probe import probetable, usbscan
    from piflash.probe.permissions import RULES_DIR

    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    (root / "etc" / "group").write_text(f"{probetable.GROUP}:x:{os.getegid()}:\n")
    assert "setup permissions" in usbscan._open_refused_fix(str(root))          # no rules yet
    rules = root / RULES_DIR / probetable.RULES_NAME
    rules.parent.mkdir(parents=True)
    rules.write_text("# rules\n")
    fix = usbscan._open_refused_fix(str(root))
    assert "setup permissions" not in fix and "unplug and replug" in fix


def test_capped_run_tells_a_normal_user_to_use_sudo():
    import tempfile

    script = REPO / "scripts" / "capped-run.py"
    if os.geteuid() == 0:            # act as nobody: the script (stdlib only) where nobody can read it
        runuser, python = shutil.which("runuser"), shutil.which("python3", path="/usr/bin:/bin")
        if runuser is None or python is None:
            pytest.skip("as root this needs runuser (util-linux) and /usr/bin/python3 to act as a normal user")
        where = Path(tempfile.mkdtemp(prefix="piflash-capped-", dir="/var/tmp"))
        os.chmod(where, 0o755)
        shutil.copy(script, where / script.name)
        os.chmod(where / script.name, 0o644)
        cmd = [runuser, "-u", "nobody", "--", python, str(where / script.name), "--limit-mib", "60", "--", "true"]
    else:
        where = None
        cmd = [sys.executable, str(script), "--limit-mib", "60", "--", "true"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    finally:
        if where is not None:
            shutil.rmtree(where, ignore_errors=True)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "needs root: sudo python3" in proc.stderr


def test_real_probe_says_what_to_install_without_the_microbit_firmware(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("real_probe_words", REPO / "benchmarks" / "real_probe.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "MICROPYTHON_HEX", tmp_path / "missing.hex")
    with pytest.raises(SystemExit) as exc:
        module.make_image("nrf51", tmp_path)
    assert "apt-get install firmware-microbit-micropython" in str(exc.value)
