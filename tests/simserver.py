"""``piflash sim serve`` in a subprocess on a free port of 127.0.0.1, for the tests and the
benchmarks (standard library only, so a benchmark that measures its children stays small)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from typing import Dict, List, Optional


class SimServer:
    """A simulated board served over pyOCD's remote probe protocol.

    :param board: the simulated board's name (created if missing).
    :param target: its target type, e.g. ``"nrf52840"``.
    :param piflash: the command that runs piflash (default ``python -m piflash``).
    :param env: the server's environment (default this process's).
    :ivar uid: the probe unique ID clients use, ``remote:127.0.0.1:PORT``.
    :raises RuntimeError: the server did not print its address.
    """

    def __init__(self, board: str, target: str, piflash: Optional[List[str]] = None,
                 env: Optional[Dict[str, str]] = None) -> None:
        cmd = piflash or [sys.executable, "-m", "piflash"]
        self.proc = subprocess.Popen(
            [*map(str, cmd), "sim", "serve", "--board", board, "--target", target, "--port", "0"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=env if env is not None else os.environ.copy())
        line = self.proc.stdout.readline()
        m = re.search(r"127\.0\.0\.1:(\d+)", line)
        if not m:
            self.proc.kill()
            raise RuntimeError(f"sim serve did not start: {line!r} {self.proc.stderr.read()}")
        self.uid = f"remote:127.0.0.1:{m.group(1)}"

    def stop(self) -> None:
        """SIGINT (a clean stop that saves the board), then SIGKILL after 10 s."""
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
