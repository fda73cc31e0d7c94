"""Issue 19, item 14: ``piflash history`` on a terminal chooses its columns by the terminal's
width (a Pi's console is 80 columns) and always keeps the result; piped, it prints a plain form
whose lines do not depend on any width and carry no padding, unless COLUMNS gives one.

The table is read as a user sees it: the real CLI on a pseudo-terminal of 80 and 120 columns
(the window size and ``COLUMNS``, as a shell sets them), and through a pipe.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import sqlite3
import struct
import subprocess
import sys
import termios
import time

import pytest
from conftest import Cli

from piflash.errors import ExitCode

NRF = ("-t", "nrf52840", "-u", "sim:nrf52840")
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def on_terminal(args, columns: int, timeout: float = 60.0) -> str:
    """Run ``piflash ARGS`` with stdout on a pseudo-terminal ``columns`` wide; its text, ANSI
    sequences removed."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    env = dict(os.environ, COLUMNS=str(columns), TERM="xterm-256color")
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen([sys.executable, "-m", "piflash", *args], stdin=subprocess.DEVNULL,
                            stdout=slave, stderr=subprocess.PIPE, env=env)
    os.close(slave)
    out, deadline = b"", time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 1.0)
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError:            # EIO: the child closed the terminal
                break
            if not chunk:
                break
            out += chunk
    finally:
        os.close(master)
        proc.wait(timeout=10)
    assert proc.returncode == 0, proc.stderr.read()
    return ANSI.sub("", out.decode()).replace("\r\n", "\n")


@pytest.fixture(scope="module")
def _made_history(tmp_path_factory, firmware_dir):
    """Three rows: a pass, a verify failure with a long error, and a reset; made once for the
    module (six CLI runs) in a folder of its own. Returns the history's path and its rows."""
    d = tmp_path_factory.mktemp("history-table")
    env = dict(os.environ, PIFLASH_SIM_DIR=str(d / "sim"), PIFLASH_HISTORY=str(d / "history.sqlite3"),
               PIFLASH_PROFILE_PATH=str(d / "profiles"))
    fw = firmware_dir / "nrf52840" / "firmware.hex"
    cli = Cli()
    cli("sim", "create", "nrf52840", "-t", "nrf52840", check=0, env=env)
    cli("flash", fw, *NRF, "-q", check=0, env=env)
    cli("sim", "fault", "nrf52840", "--bit-flip", "0x1235:3", check=0, env=env)
    cli("flash", fw, *NRF, "-q", "--erase", "chip", check=ExitCode.VERIFY, env=env)
    cli("reset", *NRF, check=0, env=env)
    return d / "history.sqlite3", cli.json("history", env=env)["operations"]


@pytest.fixture
def history(_made_history):
    """The module's history, copied to this test's ``PIFLASH_HISTORY`` (tests/conftest.py); its rows."""
    path, rows = _made_history
    src, dst = sqlite3.connect(path), sqlite3.connect(os.environ["PIFLASH_HISTORY"])
    try:
        src.backup(dst)
    finally:
        src.close()
        dst.close()
    return rows


def _table(text: str):
    lines = [line for line in text.splitlines() if line.strip()]
    while lines[0].startswith(("every row:", "  ")):   # the values the same on every row, said once
        lines.pop(0)
    header, rows, summary = lines[0], lines[1:-1], lines[-1]
    return header.split(), rows, summary


@pytest.mark.parametrize("columns", [80, 120])
def test_terminal_table_fits_and_keeps_what_matters(history, columns):
    text = on_terminal(["history"], columns)
    lines = text.splitlines()
    assert all(len(line) <= columns for line in lines), "\n".join(lines)
    header, rows, summary = _table(text)
    # the op, firmware, result and error columns stay, whole, at 80 columns too; the target, the
    # board and the probe, the same on every row, are said once above the table (issue 41)
    for name in ("#", "op", "firmware", "result", "error"):
        assert name in header, text
    assert text.startswith(f"every row: probe sim:nrf52840, target nrf52840, target UID {history[0]['target_uid']}")
    assert "target" not in header and "probe" not in header
    assert len(rows) == 3 and "2 passed, 1 failed" in summary
    assert [r.split()[0] for r in rows] == ["1", "2", "3"]
    for row, want in zip(rows, ("PASS", "FAIL", "PASS")):
        assert f" {want}" in row, text
    assert "firmware.hex" in rows[0] and "flash" in rows[0] and "reset" in rows[2]
    assert "verify failed: 1 byte(s)" in rows[1]


def test_piped_output_is_plain_and_width_independent(cli, history):
    # no COLUMNS (a pipe says no width): every column; COLUMNS=80 fits it (tests/system/test_one_style.py)
    narrow = subprocess.run([sys.executable, "-m", "piflash", "history"], capture_output=True, text=True,
                            env={k: v for k, v in os.environ.items() if k != "COLUMNS"}, check=True).stdout
    wide = subprocess.run([sys.executable, "-m", "piflash", "history"], capture_output=True, text=True,
                          env=dict(os.environ, COLUMNS="300"), check=True).stdout
    assert narrow == wide                                   # no width in it
    assert "\x1b[" not in narrow
    lines = narrow.splitlines()
    assert all(line == line.rstrip() for line in lines), "padded lines"
    header, rows, _ = _table(narrow)
    assert header[:4] == ["#", "started", "station", "probe"] and header[-1] == "error"
    assert max(map(len, lines)) < 200
    # every column, the error whole
    assert history[1]["error"] in rows[1] and history[0]["target_uid"] in rows[0]
    assert "firmware.hex" in rows[0] and " FAIL " in rows[1]
