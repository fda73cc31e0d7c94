"""The history's disk fills up in the middle of a flash (issue 19, item 11): the flash still
passes (exit 0), the warning names the cause ("history not written: no space left on ..."), not
SQLite's "cannot rollback - no transaction is active", and the row says what happened -- at
once to a reader, and in the sealed row once a write finds room -- instead of "interrupted
(process died)".

The history lives on a 2 MiB tmpfs mounted in a private mount namespace (``unshare -m`` as root,
``unshare -rm`` -- a user namespace -- otherwise), so nothing outside the test sees it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

pytest.importorskip("unicorn")

DRIVER = r'''
import errno, json, os, sqlite3, subprocess, sys, time
folder, image = sys.argv[1], sys.argv[2]
history = os.path.join(folder, "history.sqlite3")
env = dict(os.environ, PIFLASH_HISTORY=history)
piflash = [sys.executable, "-m", "piflash"]
out = {}

def run(*args):
    p = subprocess.run(piflash + list(args), capture_output=True, text=True, env=env, timeout=120)
    return {"rc": p.returncode, "stdout": p.stdout, "stderr": p.stderr}

def open_rows():
    try:
        db = sqlite3.connect(f"file:{history}?mode=ro", uri=True, timeout=5)
        try:
            return db.execute("SELECT count(*) FROM operations WHERE outcome = 'open'").fetchone()[0]
        finally:
            db.close()
    except sqlite3.Error:
        return 0

flash = subprocess.Popen(piflash + ["flash", image, "-a", "0", "-t", "nrf52840", "-u", "sim:bay"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
deadline = time.monotonic() + 60
while not open_rows():                       # the board is reached: its row is open
    assert flash.poll() is None and time.monotonic() < deadline, flash.communicate()
    time.sleep(0.02)
filler = os.path.join(folder, "filler")
with open(filler, "wb") as f:                # the disk fills up while the board is programmed
    try:
        while True:
            f.write(b"\0" * 65536)
            f.flush()
    except OSError as exc:
        assert exc.errno == errno.ENOSPC, exc
out["filled_during_flash"] = flash.poll() is None
stdout, stderr = flash.communicate(timeout=120)
out["flash"] = {"rc": flash.returncode, "stdout": stdout, "stderr": stderr}
out["read_while_full"] = run("history", "--json")
os.unlink(filler)                            # room again
out["read_after"] = run("history", "--json")
out["next_write"] = run("reset", "-t", "nrf52840", "-u", "sim:bay")
db = sqlite3.connect(f"file:{history}?mode=ro", uri=True)
db.row_factory = sqlite3.Row
out["rows"] = [dict(r) for r in db.execute("SELECT id, seq, outcome, exit_code, error FROM operations ORDER BY id")]
db.close()
out["chain"] = run("history", "verify-chain")
out["left"] = sorted(os.listdir(folder))
print(json.dumps(out))
'''


def _namespace():
    """The command prefix that gives a private mount namespace where tmpfs can be mounted, or None."""
    if not shutil.which("unshare"):
        return None
    prefix = ["unshare", "-m"] if os.geteuid() == 0 else ["unshare", "-r", "-m"]
    probe = subprocess.run([*prefix, "sh", "-c", "d=$(mktemp -d) && mount -t tmpfs -o size=1m tmpfs $d "
                            "&& umount $d && rmdir $d"], capture_output=True)
    return prefix if probe.returncode == 0 else None


def test_full_disk_mid_flash_names_the_cause_and_the_row_tells_what_happened(tmp_path, sim_dir):
    prefix = _namespace()
    if prefix is None:
        pytest.skip("needs root, or unprivileged user namespaces, to mount a small tmpfs (unshare -rm)")
    from piflash.sim import SimStore

    SimStore().create("bay", "nrf52840")
    image = tmp_path / "big.bin"
    image.write_bytes(os.urandom(256 * 1024))      # seconds of programming
    folder = tmp_path / "small"
    folder.mkdir()
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    proc = subprocess.run([*prefix, "sh", "-c", 'mount -t tmpfs -o size=2m tmpfs "$1" && shift && exec "$@"',
                           "sh", str(folder), sys.executable, str(driver), str(folder), str(image)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["filled_during_flash"]

    flash = out["flash"]
    assert flash["rc"] == 0, flash                                    # a verified flash
    assert "warning: history not written: no space left on tmpfs (tmpfs mounted on" in flash["stderr"]
    assert "cannot rollback" not in flash["stderr"] and "Traceback" not in flash["stderr"]
    assert "kept in" in flash["stderr"]

    for when in ("read_while_full", "read_after"):                   # a reader sees what happened
        (row,) = json.loads(out[when]["stdout"])["operations"]
        assert (row["outcome"], row["exit_code"]) == ("pass", 0), row
        assert row["error"].startswith("written late: no space left on tmpfs"), row

    assert out["next_write"]["rc"] == 0, out["next_write"]            # the next writer seals it
    first, second = out["rows"]
    assert (first["outcome"], first["exit_code"], first["seq"]) == ("pass", 0, 1), first
    assert "interrupted" not in first["error"] and "written late: no space left on" in first["error"]
    assert second["outcome"] == "pass" and second["seq"] == 2
    assert out["chain"]["rc"] == 0, out["chain"]
    assert not [n for n in out["left"] if "pending" in n], out["left"]   # the reservation is gone


OPEN_WHEN_FULL = r'''
import json, os, sys
from pathlib import Path
from piflash.errors import HistoryError
from piflash.record.history import History
folder = Path(sys.argv[1])
History(folder / "h.sqlite3").close()          # the -shm file goes with the last connection
try:
    with open(folder / "filler", "wb") as f:
        while True:
            f.write(b"\0" * 4096)
            f.flush()
except OSError:
    pass
try:
    History(folder / "h.sqlite3").close()
    print(json.dumps({"opened": True}))
except HistoryError as exc:
    print(json.dumps({"message": exc.message, "hint": exc.hint}))
'''


def test_a_full_disk_where_the_shm_file_cannot_grow_is_named_as_a_full_disk(tmp_path):
    """Issue 38: SQLite reports a -shm file that cannot be made on a full file system as "disk
    I/O error", which the history told as a permissions problem."""
    prefix = _namespace()
    if prefix is None:
        pytest.skip("needs root, or unprivileged user namespaces, to mount a small tmpfs (unshare -rm)")
    folder = tmp_path / "small"
    folder.mkdir()
    driver = tmp_path / "driver.py"
    driver.write_text(OPEN_WHEN_FULL)
    proc = subprocess.run([*prefix, "sh", "-c", 'mount -t tmpfs -o size=512k tmpfs "$1" && shift && exec "$@"',
                           "sh", str(folder), sys.executable, str(driver), str(folder)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["message"].startswith(f"cannot open the history database {folder}/h.sqlite3: no space left on tmpfs"), out
    assert out["hint"].startswith("free space on tmpfs"), out
    assert "may write" not in out["hint"], out
