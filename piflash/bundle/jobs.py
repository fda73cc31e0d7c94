"""Jobs published to the line: a verified bundle stored in the ledger, taken by the stations.

``piflash ledger publish JOB.pfb`` verifies the bundle as a flash would (:func:`publish`) and stores
its bytes in the ledger for its line (:meth:`piflash.record.ledger.Ledger.publish_bundle`: only a
version newer than the line's newest). A station with ``job: ledger:LINE`` fetches the newest
(:func:`fetch_job`) into a file of its own and verifies it through
:func:`piflash.bundle.loader.open_bundle` like any bundle: the ledger is storage, never trust.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Optional, Tuple, Union

from piflash.bundle.archive import read_file
from piflash.bundle.manifest import check_line
from piflash.errors import BundleError

PathLike = Union[str, "os.PathLike[str]"]

#: How a station config names a job published to the line: ``job: ledger:LINE``.
JOB_PREFIX = "ledger:"


def parse_job(value: object) -> str:
    """The line of a config's ``job:`` value ``ledger:LINE``.

    :raises ValueError: not of that form, or a line name a bundle cannot carry (the message says which)."""
    if not isinstance(value, str) or not value.startswith(JOB_PREFIX):
        raise ValueError(f"expected 'ledger:LINE' (a job published to the line), got {value!r}")
    line = value[len(JOB_PREFIX) :]
    check_line(line)
    return line


def publish(path: PathLike, allowed_signers: Optional[PathLike], url: str, state: Optional[PathLike] = None):
    """Verify the bundle ``path`` (signature, files; :func:`~piflash.bundle.loader.open_bundle`
    without loading or accepting it) and store its bytes in the ledger ``url`` for its line.

    :returns: the verified :class:`~piflash.bundle.loader.Bundle` (no profile loaded).
    :raises BundleError: (exit 28) unverifiable, changed while read, or not newer than the line's
        newest published version.
    :raises LedgerError: (exit 27) the ledger cannot be reached or written."""
    from piflash.bundle.loader import open_bundle
    from piflash.record.ledger import Ledger

    bundle = open_bundle(path, allowed_signers, ledger=url, state=state, accept=False, load=False)
    if bundle.count is not None:
        bundle.count.close()
    raw = read_file(path)
    if hashlib.sha256(raw).hexdigest() != bundle.sha256:
        raise BundleError(f"{os.fspath(path)}: the file changed while it was verified: not published")
    with Ledger(url) as db:
        db.publish_bundle(bundle.manifest.line, bundle.manifest.version, bundle.sha256, bundle.signer, raw)
    return bundle


def newest_job(url: str, line: str, db=None) -> Optional[Tuple[int, str]]:
    """(version, bundle_sha256) of the newest job published for ``line``, or None: one small
    query (``db`` an open :class:`~piflash.record.ledger.Ledger`, else one is opened for it).

    :raises LedgerError:"""
    from piflash.record.ledger import Ledger

    if db is None:
        with Ledger(url) as own:
            return newest_job(url, line, own)
    got = db.newest_bundle(line, data=False)
    return (int(got["version"]), str(got["bundle_sha256"])) if got else None


def fetch_job(url: str, line: str, directory: PathLike) -> Path:
    """Write the newest job published for ``line`` into ``directory`` (``LINE-vN.pfb``, written
    to a temporary name and renamed, so a reader never sees half a file) and return its path. Not
    verified here: the caller opens it with :func:`~piflash.bundle.loader.open_bundle`.

    :raises BundleError: (exit 28) no job is published for ``line``, or the stored bytes are not
        the SHA-256 stored with them, or the file cannot be written.
    :raises LedgerError: (exit 27) the ledger cannot be reached."""
    from piflash.record.ledger import Ledger, safe_url

    with Ledger(url) as db:
        got = db.newest_bundle(line)
    if got is None:
        raise BundleError(
            f"no job is published for line {line} in the ledger {safe_url(url)}",
            hint="piflash ledger publish JOB.pfb --allowed-signers FILE",
        )
    data = got["data"]
    if hashlib.sha256(data).hexdigest() != got["bundle_sha256"]:
        raise BundleError(f"line {line} version {got['version']} in the ledger: its bytes are not its SHA-256")
    out = Path(directory) / f"{line}-v{got['version']}.pfb"
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(f".{out.name}.{os.getpid()}")
        tmp.write_bytes(data)
        os.replace(tmp, out)
    except OSError as exc:
        raise BundleError(f"cannot write the job of line {line} to {out}: {exc.strerror or exc}") from None
    return out
