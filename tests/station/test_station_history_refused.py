"""A station whose history cannot take rows does not start (issue 19, item 12): a read-only
history file exits 18 at start-up instead of failing every board, and a ``history:`` in a folder
that does not exist (a typo) exits 18 naming the path instead of starting a new chain."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from support.stationkit import write_config, write_profile

from piflash.errors import ExitCode
from piflash.record.history import History


def _config(tmp_path, firmware_dir, history):
    return write_config(tmp_path, write_profile(tmp_path, firmware_dir / "nrf52840" / "firmware.hex"),
                        ["sim:bay"], history)


@pytest.fixture
def read_only_history(tmp_path):
    """An existing history made read-only: immutable (chattr +i) as root, whom file modes do not
    stop; mode 0444 otherwise."""
    folder = tmp_path / "hist"
    folder.mkdir()
    path = folder / "history.sqlite3"
    History(path).close()
    if os.geteuid() == 0:
        if not shutil.which("chattr") or subprocess.run(["chattr", "+i", str(path)]).returncode != 0:
            pytest.skip("chattr +i is not available on this file system (root ignores file modes)")
        yield path
        subprocess.run(["chattr", "-i", str(path)], check=True)
    else:
        path.chmod(0o444)
        yield path


def test_read_only_history_stops_the_station_at_start(cli, tmp_path, firmware_dir, read_only_history):
    config = _config(tmp_path, firmware_dir, read_only_history)
    proc = cli("station", "run", "--plain", "--config", config, timeout=60, check=ExitCode.HISTORY)
    assert f"error: cannot write the history database {read_only_history}: it is read-only" in proc.stderr
    assert "chattr +i" in proc.stderr and "Traceback" not in proc.stderr
    assert "does not start without a history" in proc.stderr


def test_history_in_a_missing_folder_is_refused_not_started_anew(cli, tmp_path, firmware_dir):
    (tmp_path / "state").mkdir()
    typo = tmp_path / "sate" / "history.sqlite3"          # 'state' mistyped
    config = _config(tmp_path, firmware_dir, typo)
    proc = cli("station", "run", "--plain", "--config", config, timeout=60, check=ExitCode.HISTORY)
    assert f"error: the history folder {typo.parent} does not exist" in proc.stderr
    assert str(typo) in proc.stderr and "hint: correct the path" in proc.stderr
    assert not typo.parent.exists()                        # nothing was created


def test_a_damaged_history_stops_the_station_at_start(cli, tmp_path, firmware_dir):
    """Issue 38: a history damaged past its first pages opened, passed the write check and then
    failed every board. SQLite's quick_check at the start finds it: exit 18, the damage named."""
    from piflash.record.result import OperationResult

    path = tmp_path / "history.sqlite3"
    with History(path) as db:
        for i in range(300):
            db.record(OperationResult(operation="flash", probe_id="sim:bay", target="nrf52840",
                                      target_uid="%016x" % i, firmware="/fw/" + "x" * 200, ok=True,
                                      started_at=1_700_000_000.0 + i, duration=1.0))
    data = bytearray(path.read_bytes())
    page = int.from_bytes(data[16:18], "big")            # the page size, in the file's header
    for offset in range(len(data) - 3 * page, len(data) - page, 7):
        data[offset] = 0xA5                                # leaf pages of the rows, the header intact
    path.write_bytes(data)
    History(path).check_writable()                         # what the start checked before: it passes
    config = _config(tmp_path, firmware_dir, path)
    proc = cli("station", "run", "--plain", "--config", config, timeout=60, check=ExitCode.HISTORY)
    assert f"error: the history database {path} is damaged: " in proc.stderr, proc.stderr
    assert f"mv {path} {path}.bad" in proc.stderr and "Traceback" not in proc.stderr
