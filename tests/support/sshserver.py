"""A real OpenSSH server for the labgrid tests (issue 45): Debian's ``openssh-server``
(``/usr/sbin/sshd``), started on 127.0.0.1 on a free port with a host key and a client key made
by ``ssh-keygen`` in a temporary folder, letting in the current user by that key only.

Nothing of the machine's SSH setup is touched: the server reads its own config file
(``AuthorizedKeysFile`` an absolute path in the folder); the clients use
:attr:`SshServer.ssh_config` through an ``ssh`` on :attr:`SshServer.path_dir` that adds ``-F``
(labgrid's SSH connection manager runs ``ssh`` from the PATH with the exporter's host name, as a
lab's ``~/.ssh/config`` would map it). Tests skip with the reason when sshd or ssh-keygen is
missing or the server does not start (as a normal user sshd may refuse to run).
"""

from __future__ import annotations

import getpass
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

SSHD = "/usr/sbin/sshd"
#: Seconds to wait for the server to accept connections (it starts in well under one).
START_TIMEOUT_S = 10.0


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class SshServer:
    """One running sshd. :ivar host: the client-side host name (an alias in :attr:`ssh_config`);
    :ivar port: its port on 127.0.0.1; :ivar path_dir: a folder to put first on ``PATH`` (its
    ``ssh`` and ``scp`` use :attr:`ssh_config`)."""

    host = "piflash-exporter"

    def __init__(self) -> None:
        for tool in (SSHD, shutil.which("ssh-keygen"), shutil.which("ssh")):
            if not tool or not os.path.exists(tool):
                pytest.skip("OpenSSH is not installed (apt-get install openssh-server openssh-client): "
                            "the labgrid tests start a real sshd")
        self.dir = Path(tempfile.mkdtemp(prefix="piflash-sshd-"))
        self.port = free_port()
        self.user = getpass.getuser()
        d = self.dir
        for name in ("host_key", "client_key"):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(d / name)],
                           check=True, capture_output=True)
        (d / "authorized_keys").write_text((d / "client_key.pub").read_text())
        host_pub = (d / "host_key.pub").read_text().split()
        (d / "known_hosts").write_text(f"{self.host} {host_pub[0]} {host_pub[1]}\n")
        (d / "sshd_config").write_text(
            f"Port {self.port}\nListenAddress 127.0.0.1\nHostKey {d / 'host_key'}\nPidFile {d / 'sshd.pid'}\n"
            f"AuthorizedKeysFile {d / 'authorized_keys'}\nAllowUsers {self.user}\nStrictModes no\n"
            "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n"
            "PermitRootLogin prohibit-password\nX11Forwarding no\nPrintMotd no\nLogLevel ERROR\n"
        )
        self.ssh_config = d / "ssh_config"
        self.ssh_config.write_text(
            f"Host {self.host}\n  HostName 127.0.0.1\n  Port {self.port}\n  User {self.user}\n"
            f"  IdentityFile {d / 'client_key'}\n  IdentitiesOnly yes\n  HostKeyAlias {self.host}\n"
            f"  UserKnownHostsFile {d / 'known_hosts'}\n  StrictHostKeyChecking yes\n  BatchMode yes\n"
        )
        self.path_dir = d / "bin"
        self.path_dir.mkdir()
        for tool in ("ssh", "scp"):
            wrapper = self.path_dir / tool
            wrapper.write_text(f'#!/bin/sh\nexec {shutil.which(tool)} -F {self.ssh_config} "$@"\n')
            wrapper.chmod(0o755)
        if os.geteuid() == 0:
            # sshd's privilege separation folder, which Debian's service makes (RuntimeDirectory=sshd).
            os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
        self.log = d / "sshd.log"
        self.proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(d / "sshd_config")],
                                     stdout=subprocess.DEVNULL, stderr=open(self.log, "wb"))
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if self.proc.poll() is not None:
                why = self.log.read_text().strip()
                self.close()
                pytest.skip(f"sshd does not run here (as uid {os.geteuid()}): {why[-300:]}")
            probe = subprocess.run([str(self.path_dir / "ssh"), self.host, "true"], capture_output=True, text=True,
                                   stdin=subprocess.DEVNULL, timeout=START_TIMEOUT_S)
            if probe.returncode == 0:
                break
            if time.monotonic() > deadline:
                why = probe.stderr.strip() + " " + self.log.read_text().strip()
                self.close()
                pytest.skip(f"sshd started but lets no one in (as uid {os.geteuid()}): {why[-300:]}")
            time.sleep(0.1)

    def close(self) -> None:
        """Stop the server and remove its folder."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)
