"""Sign and verify a manifest with OpenSSH's ``ssh-keygen -Y`` (sshsig, namespace ``piflash-bundle``).

Why ``ssh-keygen`` and not PyPI's ``sshsig``: docs/bundles.md ("Signatures"). OpenSSH reads the
``allowed_signers`` file itself (``ssh-keygen(1)``, "ALLOWED SIGNERS"), so principals,
``namespaces="piflash-bundle"``, ``valid-after``/``valid-before`` and ``cert-authority`` mean
exactly what they mean to OpenSSH. Every call is bounded in time; a passphrase prompt can only
come from :func:`sign` (a human's command) and only on a terminal: without one, ``ssh-keygen``
runs in a session of its own with no controlling terminal, so it fails at once instead of waiting.
Key files are named in messages, never read or printed here. Standard library only.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import List, Optional, Union

from piflash.errors import BundleError

#: The sshsig namespace of a bundle's signature (issue 40); a signature made for another
#: namespace (``file``, ``git``) does not verify as a bundle's.
NAMESPACE = "piflash-bundle"
#: Seconds ``ssh-keygen -Y verify``/``find-principals`` may take: they hash a few KiB and check
#: one signature (milliseconds); a slow SD card is still far under this.
VERIFY_TIMEOUT_S = 30.0
#: Seconds ``ssh-keygen -Y sign`` may take, a passphrase typed at the prompt included.
SIGN_TIMEOUT_S = 300.0

PathLike = Union[str, "os.PathLike[str]"]


def _ssh_keygen() -> str:
    path = shutil.which("ssh-keygen")
    if path is None:
        raise BundleError(
            "ssh-keygen (OpenSSH) is not installed: bundles are signed and verified with 'ssh-keygen -Y'",
            hint="sudo apt install openssh-client",
        )
    return path


def _run(args: List[str], data: bytes, timeout: float, terminal: bool = False) -> subprocess.CompletedProcess:
    """Run ssh-keygen with ``data`` on stdin; without ``terminal`` it has no controlling terminal."""
    try:
        return subprocess.run(
            [_ssh_keygen(), *args],
            input=data,
            capture_output=True,
            timeout=timeout,
            start_new_session=not terminal,
        )
    except subprocess.TimeoutExpired:
        raise BundleError(f"ssh-keygen -Y {args[1]} did not finish within {timeout:g} s") from None
    except OSError as exc:
        raise BundleError(f"cannot run ssh-keygen: {exc.strerror or exc}") from None


def _said(proc: subprocess.CompletedProcess) -> str:
    """ssh-keygen's last line on stderr (its reason), or its exit status."""
    lines = [ln.strip() for ln in proc.stderr.decode("utf-8", "replace").splitlines() if ln.strip()]
    return lines[-1][:300] if lines else f"exit status {proc.returncode}"


def sign(data: bytes, key: PathLike) -> bytes:
    """The sshsig signature (armored text, bytes) of ``data`` by the OpenSSH private key ``key``.

    A passphrase-protected key is asked for on the terminal when there is one; with no terminal
    (a script, a service) the signing fails at once (use ``ssh-agent``: give the public key file).

    :raises BundleError: (exit 28) no ssh-keygen, the key file missing or unusable (wrong
        passphrase, not a private key), or ssh-keygen failed or took more than :data:`SIGN_TIMEOUT_S`.
    """
    if not Path(key).is_file():
        raise BundleError(f"key file {key} does not exist or is not a file")
    terminal = sys.stdin.isatty()
    proc = _run(["-q", "-Y", "sign", "-f", os.fspath(key), "-n", NAMESPACE], data, SIGN_TIMEOUT_S, terminal=terminal)
    if proc.returncode != 0 or b"BEGIN SSH SIGNATURE" not in proc.stdout:
        raise BundleError(
            f"ssh-keygen could not sign with key {key}: {_said(proc)}",
            hint=None if terminal else "a passphrase-protected key needs a terminal, or ssh-agent holding the key",
        )
    return proc.stdout


def verify(data: bytes, signature: bytes, allowed_signers: PathLike, where: str) -> str:
    """Check ``signature`` (sshsig, armored) over ``data`` against the OpenSSH ``allowed_signers`` file.

    :returns: the principal (str) the signing key is allowed as.
    :raises BundleError: (exit 28) the allowed signers file missing, the key not in it (or not
        for namespace ``piflash-bundle``, or outside its validity), the signature not over these
        bytes (changed after signing) or for another namespace, or ssh-keygen missing or failing.
    """
    allowed = Path(allowed_signers)
    if not allowed.is_file():
        raise BundleError(f"allowed signers file {allowed} does not exist or is not a file")
    with tempfile.TemporaryDirectory(prefix="piflash-sig-") as tmp:
        sig = Path(tmp) / "manifest.json.sig"
        sig.write_bytes(signature)
        found = _run(["-Y", "find-principals", "-s", str(sig), "-f", str(allowed)], b"", VERIFY_TIMEOUT_S)
        principals = found.stdout.decode("utf-8", "replace").split()
        if found.returncode != 0 or not principals:
            raise BundleError(
                f"{where}: signed by a key that is not in the allowed signers {allowed} ({_said(found)})",
                hint='sign it with a key listed there, or add the signer\'s public key with namespaces="piflash-bundle"',
            )
        checked: Optional[subprocess.CompletedProcess] = None
        for principal in principals:
            checked = _run(
                ["-Y", "verify", "-f", str(allowed), "-I", principal, "-n", NAMESPACE, "-s", str(sig)],
                data,
                VERIFY_TIMEOUT_S,
            )
            if checked.returncode == 0:
                return principal
    reason = _said(checked) if checked is not None else "no principal"
    raise BundleError(
        f"{where}: the signature does not verify for the allowed signers {allowed}: {reason} "
        "(the manifest changed after signing, or the key is not allowed for namespace piflash-bundle)"
    )
