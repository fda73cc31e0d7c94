"""A board server in a child process: start a command that serves a simulated board over pyOCD's
remote probe protocol on 127.0.0.1, learn its address, stop it cleanly.

Standard library only, so a process that measures its children (a benchmark) stays small. The
command is the caller's (``piflash sim serve --port 0 ...`` is the usual one); this module only
relies on its first line of standard output naming the address as ``127.0.0.1:PORT``.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
from typing import Dict, Optional, Sequence

__all__ = ["ServedBoard"]

_ADDRESS = re.compile(r"127\.0\.0\.1:(\d+)")


class ServedBoard:
    """A board server running in a child process.

    :param argv: the command (sequence of str or path-like), e.g.
        ``["piflash", "sim", "serve", "--board", "b", "--target", "nrf52840", "--port", "0"]``.
    :param env: the child's environment (default: this process's).
    :ivar uid: the probe unique ID clients use, ``remote:127.0.0.1:PORT`` (str).
    :ivar proc: the :class:`subprocess.Popen` of the server.
    :raises RuntimeError: the first line the server printed names no address (its stderr is in
        the message).
    """

    def __init__(self, argv: Sequence, env: Optional[Dict[str, str]] = None) -> None:
        self.proc = subprocess.Popen(
            [os.fspath(a) for a in argv],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env if env is not None else os.environ.copy(),
        )
        line = self.proc.stdout.readline()
        m = _ADDRESS.search(line)
        if not m:
            self.proc.kill()
            raise RuntimeError(f"the board server did not start: {line!r} {self.proc.stderr.read()}")
        self.uid = f"remote:127.0.0.1:{m.group(1)}"

    def stop(self, timeout: float = 10.0) -> None:
        """SIGINT (a clean stop: the server saves the board), then SIGKILL after ``timeout`` seconds."""
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
