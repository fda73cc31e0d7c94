"""Real OpenSSH keys and signed job bundles for the tests (docs/bundles.md): keys made by
``ssh-keygen`` in the test's temporary folder, bundles made and signed through the real CLI."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest


def need_ssh_keygen() -> str:
    """ssh-keygen's path, or skip: CI installs openssh-client (scripts/dev-setup.sh)."""
    path = shutil.which("ssh-keygen")
    if path is None:
        pytest.skip("ssh-keygen (openssh-client) is not installed: bundles are signed with 'ssh-keygen -Y'")
    return path


def make_key(directory: Path, name: str, passphrase: str = "") -> Path:
    """A new ed25519 key pair ``directory/name`` (private) and ``name.pub``."""
    key = directory / name
    subprocess.run([need_ssh_keygen(), "-q", "-t", "ed25519", "-N", passphrase, "-C", name, "-f", str(key)],
                   check=True, stdin=subprocess.DEVNULL)
    return key


def allowed_signers(path: Path, *entries) -> Path:
    """Write an allowed_signers file: each entry ``(principal, key, options)``; options e.g.
    ``'namespaces="piflash-bundle"'``."""
    lines = []
    for principal, key, options in entries:
        pub = " ".join(Path(f"{key}.pub").read_text().split()[:2])
        lines.append(" ".join(p for p in (principal, options, pub) if p))
    path.write_text("\n".join(lines) + "\n")
    return path


def write_profile(directory: Path, firmware: Path, name: str = "board", target: str = "nrf52840") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.yaml"
    path.write_text(f"target: {target}\nfirmware: {firmware}\n")
    return path


def make_bundle(cli, profile: Path, out: Path, line: str = "widget", version: int = 1, key=None, extra=()) -> Path:
    """``piflash bundle create`` (and ``bundle sign`` with ``key``) through the CLI."""
    cli("bundle", "create", "-p", profile, "-o", out, "--line", line, "--version", version, *extra, check=0)
    if key is not None:
        cli("bundle", "sign", out, "-k", key, check=0)
    return out
