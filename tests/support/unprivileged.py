"""Running piflash and its scripts as an unprivileged user from tests that run as root.

Permission checks (the kernel's, install.sh's refusal of root) need a real non-root user, so
tests use ``setpriv`` to become ``nobody``. But a checkout may sit where ``nobody`` cannot read
it: CI clones into a private ``mktemp -d`` folder, and the venv's interpreter may live under
``/root``. :func:`runtime` therefore makes, once per test session, a world-readable copy of the
checkout (without .git and .venv) and of the venv's site-packages, and finds an interpreter of
the same Python version that ``nobody`` can execute.
"""

from __future__ import annotations

import atexit
import compileall
import functools
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List

NOBODY = 65534
REPO = Path(__file__).resolve().parents[2]
_SKIP = shutil.ignore_patterns(".git", ".venv", "venv", "__pycache__", "*.egg-info", ".pytest_cache",
                               "build", "dist")


@dataclass(frozen=True)
class Runtime:
    """A world-readable copy of the checkout and of its dependencies.

    :ivar repo: the checkout's copy (scripts/, piflash/, pyproject.toml, ...).
    :ivar python: an interpreter ``nobody`` can run, of this interpreter's version.
    :ivar pythonpath: ``PYTHONPATH`` that finds piflash (the copy) and its dependencies.
    """

    repo: Path
    python: str
    pythonpath: str

    def env(self, base: Dict[str, str]) -> Dict[str, str]:
        """``base`` plus the PYTHONPATH of this runtime."""
        return dict(base, PYTHONPATH=self.pythonpath, PYTHONDONTWRITEBYTECODE="1")

    def piflash(self) -> List[str]:
        """The command line that runs piflash from this runtime."""
        return [self.python, "-m", "piflash"]


def as_nobody(cmd: List[str], groups: List[int] = ()) -> List[str]:
    """``cmd`` run as nobody (gid nogroup) with exactly ``groups`` as supplementary groups."""
    ids = ["--groups=" + ",".join(map(str, groups))] if groups else ["--clear-groups"]
    return ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", *ids, "--", *cmd]


def _runs_as_nobody(python: str) -> bool:
    want = "%d.%d" % sys.version_info[:2]
    try:
        # Through a shell already running as nobody: setpriv's own exec of a path under a
        # directory nobody cannot enter (/root/.pyenv) may succeed where a later exec fails.
        code = "import sys; print('%d.%d' % sys.version_info[:2])"
        proc = subprocess.run(as_nobody(["/bin/sh", "-c", '"$0" -c "$1"', python, code]),
                              capture_output=True, text=True, timeout=30)
    except OSError:
        return False
    return proc.returncode == 0 and proc.stdout.strip() == want


def _link_or_copy(src: str, dst: str) -> None:
    """A hard link to ``src`` when anyone may read it already, else (or across file systems) a copy:
    the venv's site-packages are thousands of files and hundreds of MB (46 s to copy on a loaded
    2-core machine, 2.6 s to link); only the folders on the way were closed to nobody."""
    if os.stat(src).st_mode & 0o004:
        try:
            os.link(src, dst)
            return
        except OSError:
            pass
    shutil.copy2(src, dst)


@functools.lru_cache(maxsize=None)
def runtime() -> Runtime:
    """The session's :class:`Runtime` (made on first use, removed at exit).

    :raises RuntimeError: no interpreter of this Python version can be run by nobody.
    """
    base = Path(tempfile.mkdtemp(prefix="piflash-nobody-", dir="/var/tmp"))
    atexit.register(shutil.rmtree, base, True)
    os.chmod(base, 0o755)
    repo = base / "repo"
    shutil.copytree(REPO, repo, ignore=_SKIP, symlinks=True)
    # its bytecode, which nobody cannot write (PYTHONDONTWRITEBYTECODE below): without it each
    # piflash run as nobody compiled every module it imports again
    compileall.compile_dir(repo / "piflash", quiet=1)
    site = base / "site"
    purelib = next(p for p in sys.path if p.endswith("site-packages") and p.startswith(sys.prefix))
    # piflash itself comes from the copy; its dist-info stays, for the entry points (pyOCD
    # finds the 'sim' probe type through them).
    shutil.copytree(purelib, site, ignore=shutil.ignore_patterns("__editable__*", "*.pth", "piflash"),
                    symlinks=True, copy_function=_link_or_copy)
    for path in (base, *base.rglob("*")):
        if path.is_symlink():
            continue
        mode = os.stat(path).st_mode
        if path.is_dir() or not mode & 0o004:   # a world-readable file may be a link to the venv's: left as is
            os.chmod(path, mode | (0o755 if path.is_dir() else 0o644))
    candidates = [os.path.realpath(sys.executable), shutil.which("python3") or "",
                  f"/usr/bin/python{sys.version_info[0]}.{sys.version_info[1]}", "/usr/bin/python3"]
    python = next((p for p in candidates if p and _runs_as_nobody(p)), None)
    if python is None:
        raise RuntimeError(f"no Python {sys.version_info[0]}.{sys.version_info[1]} that user nobody "
                           f"can run (tried {', '.join(filter(None, candidates))})")
    return Runtime(repo, python, f"{repo}{os.pathsep}{site}")
