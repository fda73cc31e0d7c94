"""A Debian root booted with real systemd under ``systemd-nspawn``, for the station's unit test.

Field notes, section 5: ``systemd-nspawn --register=no --keep-unit -D DIR --boot`` boots a
debootstrapped bookworm root here, and ``nsenter -t <pid of its systemd> -a CMD`` runs CMD inside
it (every namespace, so ``systemctl`` talks to the container's systemd). Without
``--private-network`` the container shares the host's network, so a server on the host's
127.0.0.1 is reachable from inside.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Dict, Optional

#: PATH inside the container; commands run with a clean environment (the host's PIP_*,
#: PIFLASH_* and friends must not leak in).
CONTAINER_ENV = ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                 "HOME=/root", "LANG=C.UTF-8", "DEBIAN_FRONTEND=noninteractive",
                 "PIP_DISABLE_PIP_VERSION_CHECK=1"]


class BootError(Exception):
    """The container did not boot (nspawn exited, or its systemd never reached a running state)."""


def _children(pid: int):
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid ...: comm may hold spaces, so split after the last ')'.
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[1]) == pid:
            yield int(entry)


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


class Container:
    """One booted container.

    :param root: the root directory to boot (it is changed by what runs inside).
    :param log: file receiving nspawn's console output (the boot messages).
    """

    def __init__(self, root: Path, log: Path) -> None:
        self.root = root
        self.log = log
        self.nspawn: Optional[subprocess.Popen] = None
        self.pid: Optional[int] = None  #: the container's systemd, as the host sees it

    def boot(self, timeout: float = 90.0) -> None:
        """Start nspawn and wait until the container's systemd answers ``running``/``degraded``.

        :raises BootError: with the console's last lines.
        """
        with open(self.log, "wb") as out:
            self.nspawn = subprocess.Popen(
                ["systemd-nspawn", "--register=no", "--keep-unit", "--console=read-only",
                 "-D", str(self.root), "--boot"],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        state = ""
        while time.monotonic() < deadline:
            if self.nspawn.poll() is not None:
                raise BootError(f"systemd-nspawn exited with {self.nspawn.returncode}:\n"
                                f"{self.console()}")
            # nspawn forks helpers too: the container's init is the child running systemd.
            self.pid = next((pid for pid in _children(self.nspawn.pid)
                             if _comm(pid) == "systemd"), None)
            if self.pid is not None:
                proc = self.run("systemctl", "is-system-running", check=False, timeout=10)
                state = proc.stdout.strip() or proc.stderr.strip()
                if proc.stdout.strip() in ("running", "degraded"):
                    return
            time.sleep(0.3)
        raise BootError(f"the container's systemd is '{state}' after {timeout:.0f} s:\n"
                        f"{self.console()}")

    def run(self, *cmd: str, check: bool = True,
            timeout: float = 60.0) -> subprocess.CompletedProcess:
        """Run ``cmd`` inside the container (clean environment), capture its output as text."""
        assert self.pid is not None, "container not booted"
        proc = subprocess.run(["nsenter", "-t", str(self.pid), "-a", "env", "-i", *CONTAINER_ENV,
                               *cmd], capture_output=True, text=True, timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError(f"in the container: {' '.join(cmd)} exited {proc.returncode}\n"
                                 f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
        return proc

    def show(self, unit: str, *props: str) -> Dict[str, str]:
        """``systemctl show -p ...`` of ``unit`` as a dict."""
        out = self.run("systemctl", "show", unit, *(f"--property={p}" for p in props)).stdout
        return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)

    def journal(self, unit: str) -> str:
        """The unit's journal (for assertion messages); never raises."""
        try:
            return self.run("journalctl", "--no-pager", "-o", "short-monotonic", "-u", unit,
                            check=False, timeout=20).stdout
        except Exception as exc:  # noqa: BLE001  (diagnostics only)
            return f"(journalctl failed: {exc})"

    def console(self, lines: int = 40) -> str:
        """The last lines nspawn printed (boot messages)."""
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def poweroff(self, timeout: float = 30.0) -> None:
        """Power the container off; kill its systemd and nspawn if it does not stop in time."""
        if self.nspawn is None or self.nspawn.poll() is not None:
            return
        if self.pid is not None:
            try:
                self.run("systemctl", "poweroff", "--no-block", check=False, timeout=10)
            except subprocess.TimeoutExpired:
                pass
        try:
            self.nspawn.wait(timeout)
            return
        except subprocess.TimeoutExpired:
            pass
        if self.pid is not None:  # SIGKILL to a PID namespace's init ends every process in it
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.nspawn.kill()
        self.nspawn.wait(10)
