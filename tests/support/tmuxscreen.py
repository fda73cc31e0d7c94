"""A real terminal of a fixed size for tests: a command run in a detached tmux session, its screen
read back with ``tmux capture-pane`` (tmux(1): new-session -x/-y, capture-pane -p, send-keys)."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import time
import uuid
from typing import Callable, List, Optional

import pytest


def need_tmux() -> None:
    """Skip the test, with the reason, where tmux is not installed."""
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed (apt-get install tmux): the terminal tests need a real terminal")


class Screen:
    """``command`` running in a ``width`` x ``height`` terminal with ``env``.

    :ivar lines: every screen read so far (lists of lines), for asserting on what was ever shown.
    """

    def __init__(self, command: List[str], width: int, height: int, env: Optional[dict] = None,
                 cwd: Optional[str] = None) -> None:
        need_tmux()
        self.name = f"piflash-test-{uuid.uuid4().hex[:8]}"
        self.socket = f"piflash-test-{os.getpid()}"
        env = dict(env or os.environ)
        env.pop("TMUX", None)
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items()
                           if k.startswith(("PIFLASH", "PYTHON", "PATH", "HOME", "LANG", "XDG")))
        # The command's exit status stays on the screen: "[exit N]", and the pane stays open.
        script = f"env {exports} TERM=xterm-256color {shlex.join(command)}; echo \"[exit $?]\"; sleep 600"
        self._tmux("new-session", "-d", "-s", self.name, "-x", str(width), "-y", str(height),
                   *(["-c", cwd] if cwd else []), "bash", "-c", script)
        self.screens: List[List[str]] = []

    def _tmux(self, *args: str) -> str:
        return subprocess.run(["tmux", "-L", self.socket, *args], check=True, capture_output=True,
                              text=True).stdout

    def read(self) -> List[str]:
        """The screen now, one string per row (trailing spaces removed)."""
        lines = [ln.rstrip() for ln in self._tmux("capture-pane", "-p", "-t", self.name).splitlines()]
        self.screens.append(lines)
        return lines

    def text(self) -> str:
        return "\n".join(self.read())

    def wait(self, found: Callable[[str], bool], what: str, deadline: float = 60.0) -> str:
        """Read the screen every 0.1 s until ``found(text)``; fail with the screen after ``deadline`` s."""
        end = time.monotonic() + deadline
        while True:
            text = self.text()
            if found(text):
                return text
            if time.monotonic() > end:
                raise AssertionError(f"not on the screen after {deadline} s: {what}\n{text}")
            time.sleep(0.1)

    def keys(self, *keys: str) -> None:
        """Type ``keys`` (tmux key names: ``C-c``)."""
        self._tmux("send-keys", "-t", self.name, *keys)

    def close(self) -> None:
        """End the command and the terminal. Killing tmux only hangs up the pane (SIGHUP, which
        a station takes as "reload"): the pane's whole process group is killed first."""
        import signal

        try:
            pid = int(self._tmux("display-message", "-p", "-t", self.name, "#{pane_pid}").strip())
            os.killpg(pid, signal.SIGKILL)
        except (subprocess.CalledProcessError, ValueError, ProcessLookupError, PermissionError):
            pass
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True)
