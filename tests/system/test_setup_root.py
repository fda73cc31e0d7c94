"""The permissions setup against a throwaway Debian bookworm root (debootstrap, --root).

scripts/make-root.sh builds the root once per machine (cached); each test works on a copy
(cp -a, under a second). The setup runs through scripts/setup-probe-permissions.sh with the
system python3 and piflash not installed (PYTHONPATH only), and through `piflash setup
permissions`; the real groupadd/gpasswd/groupdel act on the copy's files.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support import unprivileged

from piflash.errors import ExitCode
from piflash.probe import probetable

#: Heavy: debootstrap of a Debian root (cached after the first run). Deselect with -m "not slow".
#: One worker runs the whole module (pytest-xdist --dist loadgroup): its fixture is built once.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("debian-root")]

REPO = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("PIFLASH_CACHE_DIR", Path.home() / ".cache" / "piflash"))
ROOT_NAME = "bookworm-amd64-minbase"
RULES = Path("etc/udev/rules.d") / probetable.RULES_NAME
STATE = Path("var/lib/piflash/permissions.json")
#: The system's tools only: the script must not need the venv.
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@pytest.fixture(scope="session")
def debian_root():
    if os.geteuid() != 0:
        pytest.skip("needs root (debootstrap, and groupadd --root on the copy)")
    root = CACHE / "roots" / ROOT_NAME
    proc = subprocess.run(["bash", str(REPO / "scripts/make-root.sh"), str(root)],
                          capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        if shutil.which("debootstrap") is None:
            pytest.skip(f"debootstrap is not installed and could not be: {proc.stderr.strip()[-300:]}")
        pytest.fail(f"scripts/make-root.sh failed:\n{proc.stderr[-2000:]}")
    return root


@pytest.fixture
def root(debian_root, tmp_path):
    copy = tmp_path / "root"
    subprocess.run(["cp", "-a", str(debian_root), str(copy)], check=True)
    subprocess.run(["useradd", "--root", str(copy), "--no-create-home", "--shell", "/bin/bash", "alice"],
                   check=True)
    return copy


def snapshot(root: Path) -> dict:
    """Contents of the files the setup may touch (None when absent)."""
    out = {}
    for rel in ("etc/group", "etc/gshadow", RULES, STATE):
        path = root / rel
        out[str(rel)] = path.read_text() if path.exists() else None
    rules_dir = root / "etc/udev/rules.d"
    out["rules dir"] = sorted(os.listdir(rules_dir)) if rules_dir.is_dir() else None
    out["etc/udev exists"] = (root / "etc/udev").exists()
    out["var/lib/piflash exists"] = (root / "var/lib/piflash").exists()
    return out


def script(*args, env_extra=None):
    env = {"PATH": SYSTEM_PATH, "LC_ALL": "C.UTF-8", **(env_extra or {})}
    return subprocess.run(["bash", str(REPO / "scripts/setup-probe-permissions.sh"), *map(str, args)],
                          capture_output=True, text=True, env=env, timeout=120)


def cli(*args):
    return subprocess.run([sys.executable, "-m", "piflash", "setup", "permissions", *map(str, args)],
                          capture_output=True, text=True, timeout=120)


def group_line(root: Path, name="plugdev"):
    return next((line for line in (root / "etc/group").read_text().splitlines()
                 if line.startswith(name + ":")), None)


def test_setup_is_idempotent_and_uninstall_restores(root):
    # Start from a system without the group (as on distributions other than Debian/Raspberry Pi OS).
    subprocess.run(["groupdel", "--root", str(root), "plugdev"], check=True)
    original = snapshot(root)
    assert original["etc/udev exists"] is False and group_line(root) is None

    dry = script("--root", root, "--dry-run", env_extra={"SUDO_USER": "alice"})
    assert dry.returncode == 0, dry.stderr
    assert "would create group plugdev  [groupadd --system --root" in dry.stdout
    assert "would add user alice to plugdev" in dry.stdout and "would install rules" in dry.stdout
    assert snapshot(root) == original

    first = script("--root", root, env_extra={"SUDO_USER": "alice"})  # the user comes from $SUDO_USER
    assert first.returncode == 0, first.stderr
    assert "udev reload skipped" in first.stdout and "log out and back in" in first.stdout
    assert group_line(root).endswith(":alice")
    assert any(line.startswith("plugdev:") for line in (root / "etc/gshadow").read_text().splitlines())
    assert (root / RULES).read_text() == probetable.packaged_rules_path().read_text()
    assert oct((root / RULES).stat().st_mode & 0o777) == "0o644"
    state = json.loads((root / STATE).read_text())
    assert state["groups_created"] == ["plugdev", "spi", "gpio"]  # plain Debian has no spi, gpio
    assert state["members_added"] == {"plugdev": ["alice"], "spi": ["alice"], "gpio": ["alice"]}
    assert group_line(root, "spi").endswith(":alice") and group_line(root, "gpio").endswith(":alice")
    assert state["rules"] == {"path": "/" + str(RULES), "created": True, "previous": None}
    after_first = snapshot(root)

    second = cli("--root", root, "--user", "alice")  # the CLI runs the same code
    assert second.returncode == 0, second.stderr
    assert "nothing to change" in second.stdout and "already in plugdev, spi, gpio" in second.stdout
    assert snapshot(root) == after_first

    undo = cli("--root", root, "--uninstall")
    assert undo.returncode == 0, undo.stderr
    assert "removed user alice from plugdev" in undo.stdout and "deleted group plugdev" in undo.stdout
    assert "deleted group spi" in undo.stdout and "deleted group gpio" in undo.stdout
    assert snapshot(root) == original

    again = script("--root", root, "--uninstall")
    assert again.returncode == 0 and "nothing to undo" in again.stdout
    assert snapshot(root) == original


def test_existing_group_and_older_rules_are_kept(root):
    """Debian's plugdev (gid 46) exists with a member; an older rules file is in place."""
    subprocess.run(["gpasswd", "--add", "alice", "--root", str(root), "plugdev"], check=True,
                   capture_output=True)
    subprocess.run(["useradd", "--root", str(root), "--no-create-home", "bob"], check=True)
    old_rules = '# an older piflash\nATTRS{idVendor}=="0d28", ATTRS{idProduct}=="0204", MODE="0660"\n'
    (root / RULES).parent.mkdir(parents=True)
    (root / RULES).write_text(old_rules)
    original = snapshot(root)

    proc = script("--root", root, "--user", "bob")
    assert proc.returncode == 0, proc.stderr
    assert "group plugdev exists" in proc.stdout and "updated rules" in proc.stdout
    assert "created group spi" in proc.stdout and "added user bob to gpio" in proc.stdout
    assert group_line(root) == "plugdev:x:46:alice,bob"
    assert (root / RULES).read_text() == probetable.packaged_rules_path().read_text()

    undo = script("--root", root, "--uninstall")
    assert undo.returncode == 0, undo.stderr
    assert "deleted group plugdev" not in undo.stdout  # it was not ours
    assert "deleted group spi" in undo.stdout  # these were
    assert snapshot(root) == original


def test_unknown_user_and_not_root(root):
    proc = script("--root", root, "--user", "mallory")
    assert proc.returncode == ExitCode.USAGE and "no user 'mallory'" in proc.stderr
    before = snapshot(root)
    script_copy = unprivileged.runtime().repo / "scripts/setup-probe-permissions.sh"
    as_nobody = subprocess.run(unprivileged.as_nobody(["bash", str(script_copy), "--root", str(root),
                                                       "--user", "alice"]),
                               capture_output=True, text=True, env={"PATH": SYSTEM_PATH})
    assert as_nobody.returncode == ExitCode.PERMISSION, as_nobody.stderr
    assert "needs root" in as_nobody.stderr
    assert f"hint: run it with sudo: sudo {script_copy} --root {root} --user alice" \
        in as_nobody.stderr
    assert snapshot(root) == before
