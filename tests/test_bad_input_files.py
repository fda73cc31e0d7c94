"""Firmware files that must never reach a board (issue 19, items 3 and 4), through the real CLI.

A FIFO, a device or a socket is refused at once (a FIFO used to block the read for ever); an
ELF for another architecture than Arm, or one cut short, is refused before any probe is opened
and records nothing in the history.
"""

from __future__ import annotations

import os
import resource
import shutil
import socket
import sqlite3
import struct
import subprocess
import sys
import tempfile

import pytest

from piflash.errors import ExitCode

NRF = ["-t", "nrf52840", "-u", "sim:nrf52840"]
#: Far more than the CLI needs to refuse a file (it never gets to pyOCD), far less than a test run.
QUICK = 30


def run_limited(*args, timeout=QUICK, memory=1 << 30):
    """``python -m piflash ARGS`` with its address space capped (``memory`` bytes), so a CLI that
    reads ``/dev/zero`` to its end fails fast instead of filling the machine's memory."""
    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    return subprocess.run([sys.executable, "-m", "piflash", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, env=os.environ.copy(), preexec_fn=cap)


def history_rows():
    path = os.environ["PIFLASH_HISTORY"]
    if not os.path.exists(path):
        return 0
    with sqlite3.connect(path) as db:
        return db.execute("SELECT count(*) FROM operations").fetchone()[0]


# --- item 4: not a regular file --------------------------------------------------------------

@pytest.mark.parametrize("command", ["flash", "verify"])
def test_fifo_is_refused_at_once(cli, tmp_path, command):
    fifo = tmp_path / "fw.hex"
    os.mkfifo(fifo)
    proc = cli(command, fifo, *NRF, timeout=QUICK)   # the old code blocked here for ever
    assert proc.returncode == ExitCode.FIRMWARE, proc.stderr
    assert "is a FIFO (named pipe), not a regular file" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert history_rows() == 0


@pytest.mark.parametrize("device, args", [
    ("/dev/null", []),
    ("/dev/zero", ["--base-address", "0"]),
])
def test_character_device_is_refused(tmp_path, device, args):
    if not os.path.exists(device):
        pytest.skip(f"{device} does not exist here")
    link = tmp_path / ("fw.bin" if args else "fw.hex")     # a firmware name, a device behind it
    link.symlink_to(device)
    for path in (device, link):
        proc = run_limited("flash", path, *args, *NRF)
        assert proc.returncode == ExitCode.FIRMWARE, proc.stderr
        assert "is a character device, not a regular file" in proc.stderr
        assert "Traceback" not in proc.stderr


def test_socket_is_refused(tmp_path):
    # AF_UNIX paths are limited to 108 bytes: bind in a short folder, not in tmp_path.
    folder = tempfile.mkdtemp(prefix="pf-sock-")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        path = os.path.join(folder, "fw.hex")
        sock.bind(path)
        sock.listen(1)
        proc = run_limited("flash", path, *NRF)
        assert proc.returncode == ExitCode.FIRMWARE, proc.stderr
        assert "is a socket, not a regular file" in proc.stderr
    finally:
        sock.close()
        shutil.rmtree(folder)


def test_fifo_in_a_profile_is_refused(cli, tmp_path):
    fifo = tmp_path / "fw.hex"
    os.mkfifo(fifo)
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "pipe.yaml").write_text(f"target: nrf52840\nprobe: sim:nrf52840\nfirmware: {fifo}\n")
    for args in (["flash", "-p", "pipe"], ["profile", "check", "pipe"]):
        proc = cli(*args, timeout=QUICK)
        assert proc.returncode == ExitCode.FIRMWARE, proc.stderr
        assert "FIFO" in proc.stderr
