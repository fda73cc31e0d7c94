"""The bundle's archive: a POSIX ustar tar of plain files with plain names, written and read in memory.

Reading trusts nothing in the file: it is read whole (at most :data:`piflash.limits.BUNDLE_MAX_BYTES`),
and each member is checked before its bytes are taken: at most
:data:`~piflash.limits.BUNDLE_MAX_MEMBERS` members, each at most
:data:`~piflash.limits.BUNDLE_MAX_MEMBER_BYTES`; a regular file (no directory, link, device or
FIFO); a plain file name (no ``/``, so no absolute path and no ``..``); each name once. Nothing is
extracted to the file system here. Standard library only.
"""

from __future__ import annotations

import io
import os
import re
import stat
import tarfile
from pathlib import Path
from typing import Dict, Iterable, Tuple, Union

from piflash.errors import BundleError
from piflash.limits import BUNDLE_MAX_BYTES, BUNDLE_MAX_MEMBER_BYTES, BUNDLE_MAX_MEMBERS

#: A member's name: a plain file name of letters, digits, ``.``, ``_``, ``+``, ``-``, not
#: starting with a dot (so neither ``.`` nor ``..``), at most 100 characters (ustar's name field).
NAME_RE = re.compile(r"[A-Za-z0-9_+-][A-Za-z0-9._+-]{0,99}")

_TYPES = {
    tarfile.DIRTYPE: "a directory",
    tarfile.SYMTYPE: "a symbolic link",
    tarfile.LNKTYPE: "a hard link",
    tarfile.CHRTYPE: "a character device",
    tarfile.BLKTYPE: "a block device",
    tarfile.FIFOTYPE: "a FIFO",
}


def check_name(name: str, where: str) -> str:
    """``name`` if it is a plain member name (:data:`NAME_RE`).

    :param where: the bundle, for the message.
    :raises BundleError: (exit 28) an absolute path, a path with ``..``, a folder, or another character.
    """
    if NAME_RE.fullmatch(name):
        return name
    if name.startswith("/"):
        why = "an absolute path"
    elif ".." in name.split("/"):
        why = "a path that climbs out with '..'"
    elif "/" in name:
        why = "a path in a folder (a bundle holds plain file names)"
    else:
        why = "not a plain file name (letters, digits, '.', '_', '+', '-')"
    raise BundleError(f"{where}: member {name[:120]!r} is {why}: refused")


def write_archive(path: Union[str, "os.PathLike[str]"], members: Iterable[Tuple[str, bytes]]) -> bytes:
    """Write ``members`` (name, bytes), in that order, as a ustar archive at ``path`` (replaced
    atomically: written beside it, then renamed). Every member is a regular file, mode 0644,
    owner 0:0, mtime 0, so the same members give the same bytes.

    :returns: the archive's bytes.
    :raises BundleError: (exit 28) a name that is not a plain file name, a name given twice, or a
        member over the bounds :func:`read_archive` enforces.
    :raises OSError: the file cannot be written.
    """
    buf = io.BytesIO()
    seen = set()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name, data in members:
            check_name(name, str(path))
            if name in seen:
                raise BundleError(f"{path}: member {name!r} given twice")
            if len(data) > BUNDLE_MAX_MEMBER_BYTES:
                raise BundleError(
                    f"{name} has {len(data):,} bytes, more than a bundle member may ({BUNDLE_MAX_MEMBER_BYTES:,})"
                )
            seen.add(name)
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))
    raw = buf.getvalue()
    if len(raw) > BUNDLE_MAX_BYTES:
        raise BundleError(f"the bundle would have {len(raw):,} bytes, more than {BUNDLE_MAX_BYTES:,}")
    target = Path(path)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(raw)
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            tmp.unlink()
    return raw


def read_file(path: Union[str, "os.PathLike[str]"]) -> bytes:
    """The bytes of the bundle file ``path``, read at most :data:`BUNDLE_MAX_BYTES` + 1.

    :raises BundleError: (exit 28) missing, unreadable, not a regular file, or too large.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO would block a plain open
        with open(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise BundleError(f"{path}: not a regular file")
            raw = f.read(BUNDLE_MAX_BYTES + 1)
    except OSError as exc:
        raise BundleError(f"cannot read bundle {path}: {exc.strerror or exc}") from None
    if len(raw) > BUNDLE_MAX_BYTES:
        raise BundleError(f"{path} is larger than {BUNDLE_MAX_BYTES:,} bytes: not a piflash bundle")
    return raw


def read_archive(raw: bytes, where: str) -> Dict[str, bytes]:
    """The members of the ustar archive ``raw`` by name, in memory, each checked (module docstring).

    :param where: the bundle's path, for messages.
    :raises BundleError: (exit 28) not a tar archive, damaged, or a member refused (its name and why).
    """
    out: Dict[str, bytes] = {}
    try:
        with tarfile.open(fileobj=io.BytesIO(raw), mode="r:") as tar:
            count = 0
            while True:
                info = tar.next()
                if info is None:
                    break
                count += 1
                if count > BUNDLE_MAX_MEMBERS:
                    raise BundleError(f"{where}: more than {BUNDLE_MAX_MEMBERS} members: not a piflash bundle")
                kind = _TYPES.get(info.type)
                if kind is None and not info.isreg():
                    kind = f"of tar type {info.type!r}"
                if kind is not None:
                    raise BundleError(f"{where}: member {info.name[:120]!r} is {kind}, not a plain file: refused")
                name = check_name(info.name, where)
                if name in out:
                    raise BundleError(f"{where}: member {name!r} appears twice: refused")
                if info.size > BUNDLE_MAX_MEMBER_BYTES:
                    raise BundleError(
                        f"{where}: member {name!r} has {info.size:,} bytes, more than {BUNDLE_MAX_MEMBER_BYTES:,}"
                    )
                f = tar.extractfile(info)
                data = f.read(info.size + 1) if f is not None else b""
                if len(data) != info.size:
                    raise BundleError(f"{where}: member {name!r} is cut short ({len(data)} of {info.size} bytes)")
                out[name] = data
    except BundleError:
        raise
    except (tarfile.TarError, EOFError, OSError, ValueError) as exc:
        raise BundleError(f"{where}: not a readable tar archive ({exc or type(exc).__name__})") from None
    return out
