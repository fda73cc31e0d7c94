"""A real PostgreSQL server for the ledger's tests: Debian's ``postgresql`` package, started in a
temporary folder as a normal user (``initdb``, ``pg_ctl``; as root the server runs as ``nobody``,
since PostgreSQL refuses to run as root), listening on 127.0.0.1 on a free port, trust
authentication (a throwaway cluster nobody else reaches). Tests skip with the reason when the
binaries are missing (``apt-get install postgresql``; ``scripts/dev-setup.sh test`` installs it).
"""

from __future__ import annotations

import atexit
import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pytest

#: (bindir, encoding, user) -> a data folder initdb made in this process (PgServer._template).
_TEMPLATES: Dict[Tuple[str, str, str], Path] = {}


def pg_bin() -> Optional[Path]:
    """The newest ``/usr/lib/postgresql/N/bin`` with initdb and pg_ctl, or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                   key=lambda p: int(Path(p).parent.parent.name) if Path(p).parent.parent.name.isdigit() else 0)
    return Path(found[-1]).parent if found else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def pg():
    """A :class:`PgServer` of this test's own, stopped and removed when it ends (shared by tests/conftest.py)."""
    server = PgServer()
    yield server
    server.close()


class PgServer:
    """One running cluster. :ivar url: ``postgresql://USER@127.0.0.1:PORT/postgres``.

    :param encoding: the cluster's encoding (``initdb -E``), so its ``postgres`` database's:
        ``UTF8`` (the default), or e.g. ``SQL_ASCII``, what ``initdb`` gives under a C/POSIX locale
        when no ``-E`` is given. Any encoding but UTF8 is made with ``--locale=C`` (the only locale
        that goes with every encoding)."""

    def __init__(self, encoding: str = "UTF8") -> None:
        bindir = pg_bin()
        if bindir is None:
            pytest.skip("PostgreSQL is not installed (apt-get install postgresql): the ledger's "
                        "tests start a real server")
        self.bindir = bindir
        self.base = Path(tempfile.mkdtemp(prefix="piflash-pg-", dir="/var/tmp" if os.geteuid() == 0 else None))
        self.data = self.base / "data"
        self.port = _free_port()
        self.as_user: List[str] = []
        user = os.environ.get("USER") or "postgres"
        if os.geteuid() == 0:
            runuser = shutil.which("runuser")
            if runuser is None:
                pytest.skip("as root the test server needs runuser (util-linux) to run as nobody")
            self.as_user = [runuser, "-u", "nobody", "--"]
            os.chmod(self.base, 0o755)
            shutil.chown(self.base, "nobody")
            user = "nobody"
        else:
            import pwd

            user = pwd.getpwuid(os.geteuid()).pw_name
        self.user = user
        self.encoding = encoding
        # A copy of a cluster this process made once: initdb costs seconds (it starts a server in
        # bootstrap mode to fill the catalogs), a copy of its 40 MB a fraction of one.
        subprocess.run(["cp", "-a", str(self._template(bindir, encoding, user, self.as_user)), str(self.data)],
                       check=True, capture_output=True, timeout=120)
        self.start()
        self.url = f"postgresql://{user}@127.0.0.1:{self.port}/postgres"

    @staticmethod
    def _template(bindir: Path, encoding: str, user: str, as_user: List[str]) -> Path:
        """The data folder ``initdb`` made in this process for ``encoding`` and ``user`` (made on
        first use, never started, removed when the process exits)."""
        key = (str(bindir), encoding, user)
        if key not in _TEMPLATES:
            base = Path(tempfile.mkdtemp(prefix="piflash-pg-template-",
                                         dir="/var/tmp" if os.geteuid() == 0 else None))
            atexit.register(shutil.rmtree, base, True)
            if as_user:
                os.chmod(base, 0o755)
                shutil.chown(base, user)
            locale = [] if encoding == "UTF8" else ["--locale=C"]
            proc = subprocess.run([*as_user, str(bindir / "initdb"), "-D", str(base / "data"), "-A", "trust",
                                   "-U", user, "--no-sync", "-E", encoding, *locale],
                                  capture_output=True, text=True, timeout=120)
            if proc.returncode != 0:
                raise RuntimeError(f"initdb failed: {proc.stderr or proc.stdout}")
            _TEMPLATES[key] = base / "data"
        return _TEMPLATES[key]

    def _run(self, tool: str, *args: str) -> None:
        proc = subprocess.run([*self.as_user, str(self.bindir / tool), *args], capture_output=True, text=True,
                              timeout=120)
        if proc.returncode != 0:
            raise RuntimeError(f"{tool} failed: {proc.stderr or proc.stdout}")

    def start(self) -> None:
        """Start (or start again) the server and wait until it accepts connections."""
        self._run("pg_ctl", "-D", str(self.data), "-w", "-t", "60", "-l", str(self.base / "log"), "-o",
                  f"-p {self.port} -k {self.base} -c listen_addresses=127.0.0.1 -c fsync=off", "start")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), 1).close()
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("PostgreSQL did not start listening")

    def stop(self) -> None:
        """Stop the server (fast shutdown: clients are disconnected)."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def close(self) -> None:
        try:
            self.stop()
        except Exception:          # noqa: BLE001 - already stopped
            pass
        shutil.rmtree(self.base, ignore_errors=True)
