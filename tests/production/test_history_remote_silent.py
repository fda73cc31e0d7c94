"""A silent remote probe server (exit 23) and the history (issue 19, item 13): a server that never
reached the board is a refusal before the first touch and records nothing; one that goes silent
after SWD transfers reached the board leaves that board's FAIL row."""

from __future__ import annotations

import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time

import pytest

pytest.importorskip("unicorn")

from piflash.errors import ExitCode  # noqa: E402


def _rows(path):
    if not path.exists():
        return []
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        db.row_factory = sqlite3.Row
        return [dict(r) for r in db.execute("SELECT * FROM operations ORDER BY id")]
    except sqlite3.OperationalError:                 # no table: nothing was ever opened
        return []
    finally:
        db.close()


class _Silent:
    """Accepts TCP connections on 127.0.0.1 and never says a word."""

    def __init__(self):
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.held = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                self.held.append(self.listener.accept()[0])
            except OSError:
                return

    def close(self):
        for s in [self.listener, *self.held]:
            s.close()


def test_server_silent_from_the_start_records_nothing(cli, tmp_path, firmware_dir, monkeypatch):
    history = tmp_path / "history.sqlite3"
    server = _Silent()
    monkeypatch.setenv("PIFLASH_PROBE_TIMEOUT", "1")
    try:
        proc = cli("flash", firmware_dir / "nrf52840" / "firmware.hex", "-t", "nrf52840",
                   "-u", f"remote:127.0.0.1:{server.port}", timeout=60, check=ExitCode.PROBE_TIMEOUT)
    finally:
        server.close()
    assert "stopped answering" in proc.stderr
    assert _rows(history) == []                       # no board was reached: no FAIL row
    out = cli("history", check=0).stdout
    assert "FAIL" not in out


def test_server_silent_after_reaching_the_board_keeps_its_fail_row(cli, tmp_path, sim_server, monkeypatch):
    """The server is stopped (SIGSTOP) while it programs the board: the board was reached, so
    its row is there, completed as FAIL with exit code 23."""
    history = tmp_path / "history.sqlite3"
    image = tmp_path / "big.bin"
    image.write_bytes(bytes(range(256)) * 1024)       # 256 KiB: seconds of programming
    server = sim_server("nrf52840", "nrf52840")
    env = dict(__import__("os").environ, PIFLASH_PROBE_TIMEOUT="1")
    flash = subprocess.Popen([sys.executable, "-m", "piflash", "flash", str(image), "-a", "0", "-t", "nrf52840",
                              "-u", server.uid], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=env)
    try:
        deadline = time.monotonic() + 60
        while not any(r["outcome"] == "open" for r in _rows(history)):   # the board is reached
            assert flash.poll() is None and time.monotonic() < deadline, flash.communicate()
            time.sleep(0.05)
        server.proc.send_signal(signal.SIGSTOP)
        _, err = flash.communicate(timeout=60)
    finally:
        server.proc.send_signal(signal.SIGCONT)
    assert flash.returncode == ExitCode.PROBE_TIMEOUT, err
    rows = _rows(history)
    assert [(r["outcome"], r["exit_code"], r["error_kind"]) for r in rows] == \
        [("fail", ExitCode.PROBE_TIMEOUT, "ProbeTimeoutError")]
