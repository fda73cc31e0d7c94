"""The README's two commands, `bash scripts/demo.sh` and `bash scripts/test.sh`, run by root
(sudo) in a user's checkout and then by that user: root's run gives back what it made, and a
checkout left with root's files gets a clear fix instead of a bare "Permission denied".

The checkout is a copy owned by the unprivileged user ``nobody``; the venv is a stand-in (an
interpreter that can import piflash, stamps that tell scripts/dev-setup.sh it is complete), so
nothing is installed and the test takes seconds.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from support import unprivileged

REPO = Path(__file__).resolve().parents[2]
NOBODY = unprivileged.NOBODY

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"),
                                reason="needs root (to act as root and as nobody in one test) and setpriv")


@pytest.fixture
def checkout():
    """A copy of the repository owned by nobody, and a stand-in venv either user can run."""
    rt = unprivileged.runtime()
    base = Path(tempfile.mkdtemp(prefix="piflash-owner-", dir="/var/tmp"))
    os.chmod(base, 0o755)
    repo = base / "repo"
    shutil.copytree(rt.repo, repo, symlinks=True)
    venv = base / "venv"
    (venv / "bin").mkdir(parents=True)
    for name, module in (("python", None), ("piflash", "piflash")):
        script = venv / "bin" / name
        run = f'-m {module} "$@"' if module else '"$@"'
        script.write_text(f"#!/bin/sh\nPYTHONPATH={rt.pythonpath} PYTHONDONTWRITEBYTECODE=1 "
                          f"exec {rt.python} {run}\n")
        script.chmod(0o755)
    for extra in ("sim", "test"):
        (venv / f".piflash-{extra}.stamp").touch()
    for path in (repo, venv):
        subprocess.run(["chown", "-R", f"{NOBODY}:{NOBODY}", str(path)], check=True)
    yield repo, venv
    shutil.rmtree(base, ignore_errors=True)


def demo(repo: Path, venv: Path, as_nobody: bool) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIFLASH_")}
    env.update(PIFLASH_VENV=str(venv), HOME=str(repo))
    cmd = ["bash", str(repo / "scripts" / "demo.sh")]
    if as_nobody:
        cmd = unprivileged.as_nobody(cmd)
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=str(repo), timeout=300)


def root_owned(repo: Path):
    return [str(p) for p in repo.rglob("*") if p.lstat().st_uid == 0]


# Slow (minutes: the demo flashes MicroPython's 244 KB twice): it needs root, so it only ever ran
# in CI's first leg (root, the whole suite), where it still runs.
@pytest.mark.slow
def test_demo_as_root_then_as_the_user(checkout):
    repo, venv = checkout
    first = demo(repo, venv, as_nobody=False)
    assert first.returncode == 0, first.stderr
    assert "gave the" in first.stderr and "back to that user" in first.stderr, first.stderr
    assert (repo / ".sim-demo").is_dir() and root_owned(repo) == []
    again = demo(repo, venv, as_nobody=True)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "Flashed 243,880 bytes to nrf51" in again.stdout


def test_root_owned_leftovers_get_the_fix(checkout):
    """What a root run of the old script left behind: the user gets the chown to run."""
    repo, venv = checkout
    (repo / ".sim-demo").mkdir()
    (repo / ".sim-demo" / "microbit").write_text("{}")
    subprocess.run(["chown", "-R", "0:0", str(repo / ".sim-demo")], check=True)
    proc = demo(repo, venv, as_nobody=True)
    assert proc.returncode == 1
    assert "has files owned by root" in proc.stderr, proc.stderr
    assert f"sudo chown -R nobody: {repo / '.sim-demo'}" in proc.stderr
    assert "Permission denied" not in proc.stderr


def readme_command(words: str) -> str:
    """The README's shell line (comment cut off) that contains ``words``."""
    for line in (REPO / "README.md").read_text().splitlines():
        if words in line and not line.startswith(("`", "(")):
            return line.split("  #", 1)[0].strip()
    raise AssertionError(f"no README line with {words!r}")


@pytest.mark.skipif(not shutil.which("sudo"), reason="needs sudo (Debian's, with its secure_path)")
def test_documented_sudo_command_finds_a_user_install(tmp_path):
    """README's `sudo ... setup permissions` works when piflash is only in ~/.local/bin, which
    sudo's secure_path leaves out (a user install); the plain `sudo piflash` does not."""
    home_bin = tmp_path / "home" / ".local" / "bin"
    home_bin.mkdir(parents=True)
    (home_bin / "piflash").symlink_to(Path(sys.executable).parent / "piflash")
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    (root / "etc/passwd").write_text("root:x:0:0::/root:/bin/bash\n")
    (root / "etc/group").write_text("root:x:0:\nplugdev:x:46:\n")
    env = dict(os.environ, PATH=f"{home_bin}:/usr/local/bin:/usr/bin:/bin")
    command = readme_command("setup permissions")
    assert command.startswith("sudo ") and "setup permissions" in command
    documented = subprocess.run(["bash", "-c", f"{command} --dry-run --root {root}"], env=env,
                                capture_output=True, text=True, timeout=60)
    assert documented.returncode == 0, documented.stderr
    assert "would install rules" in documented.stdout
    plain = subprocess.run(["bash", "-c", f"sudo piflash setup permissions --dry-run --root {root}"], env=env,
                           capture_output=True, text=True, timeout=60)
    assert plain.returncode != 0 and "command not found" in plain.stderr, plain
