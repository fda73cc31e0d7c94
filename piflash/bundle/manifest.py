"""``manifest.json``: what a bundle holds, the bytes its signature covers (docs/bundles.md).

::

    {
      "files": [{"path": "app.hex", "sha256": "3a7b...", "size": 25120},
                {"path": "board.yaml", "sha256": "...", "size": 211}],
      "format": 1,
      "line": "widget-a",
      "max_boards": 500,
      "piflash_version": "0.9.0",
      "profile": "board.yaml",
      "target": "nrf52840",
      "version": 7
    }

``max_boards`` is left out when there is no count limit. Written as JSON with sorted keys and
two-space indents, one newline at the end; read strictly (every field, its type, no other
field). Standard library only.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from typing import Dict, List, Optional, Tuple

from piflash.bundle.archive import check_name
from piflash.errors import BundleError
from piflash.limits import BUNDLE_MAX_MANIFEST_BYTES

#: The manifest's member name, and its signature's.
MANIFEST = "manifest.json"
SIGNATURE = "manifest.json.sig"
#: The only format this piflash reads.
FORMAT = 1
#: A line's name: what an operator types, and a ledger key later (issue 40, item 4).
LINE_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
#: The largest version and count: PostgreSQL's bigint, where the ledger will keep them.
MAX_INT = 2**63 - 1
_FIELDS = {"format", "line", "version", "target", "profile", "files", "piflash_version", "max_boards"}


@dataclasses.dataclass(frozen=True)
class FileEntry:
    """One file of the bundle: ``path`` (a plain member name), ``size`` (bytes), ``sha256`` (64
    lower-case hex digits)."""

    path: str
    size: int
    sha256: str


@dataclasses.dataclass(frozen=True)
class Manifest:
    """A bundle's manifest.

    :ivar line: the production line's name (:data:`LINE_RE`).
    :ivar version: the job's version on its line (int, 1 to :data:`MAX_INT`); only goes up.
    :ivar target: the pyOCD target type every board must be.
    :ivar profile: the member that is the profile (one of ``files``).
    :ivar files: the :class:`FileEntry` of every member but the manifest and its signature.
    :ivar piflash_version: the piflash that made the bundle.
    :ivar max_boards: the count limit across the line (int >= 1), or None for none.
    """

    line: str
    version: int
    target: str
    profile: str
    files: Tuple[FileEntry, ...]
    piflash_version: str
    max_boards: Optional[int] = None

    def to_dict(self) -> Dict[str, object]:
        """The manifest as JSON values, ``format`` included and ``max_boards`` left out when None."""
        out: Dict[str, object] = {
            "format": FORMAT,
            "line": self.line,
            "version": self.version,
            "target": self.target,
            "profile": self.profile,
            "files": [dataclasses.asdict(f) for f in self.files],
            "piflash_version": self.piflash_version,
        }
        if self.max_boards is not None:
            out["max_boards"] = self.max_boards
        return out

    def to_bytes(self) -> bytes:
        """The exact bytes written as ``manifest.json`` (and signed)."""
        return (json.dumps(self.to_dict(), sort_keys=True, indent=2) + "\n").encode("utf-8")


def file_entry(path: str, data: bytes) -> FileEntry:
    """The :class:`FileEntry` of member ``path`` holding ``data``."""
    return FileEntry(path=path, size=len(data), sha256=hashlib.sha256(data).hexdigest())


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_INT


def check_line(line: object) -> str:
    """``line`` if it is a line name (:data:`LINE_RE`); else ValueError naming the rule."""
    if not isinstance(line, str) or not LINE_RE.fullmatch(line):
        raise ValueError(
            f"a line is named with 1-64 letters, digits, '.', '_', '-' (starting with a letter or digit), not {line!r:.80}"
        )
    return line


def parse_manifest(raw: bytes, where: str) -> Manifest:
    """Read ``manifest.json``'s bytes strictly.

    :param where: the bundle's path, for messages.
    :raises BundleError: (exit 28) too large, not JSON, another format, a field missing, of the
        wrong type or unknown, a file listed twice, or a profile that is not among the files.
    """

    def bad(message: str) -> BundleError:
        return BundleError(f"{where}: manifest.json {message}")

    if len(raw) > BUNDLE_MAX_MANIFEST_BYTES:
        raise bad(f"has more than {BUNDLE_MAX_MANIFEST_BYTES:,} bytes")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise bad(f"is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise bad("is not a JSON object")
    if data.get("format") != FORMAT:
        raise bad(f"has format {data.get('format')!r}; this piflash reads format {FORMAT}")
    unknown = sorted(set(data) - _FIELDS)
    if unknown:
        raise bad(f"has fields this piflash does not know: {', '.join(unknown)}")
    missing = sorted(_FIELDS - {"max_boards"} - set(data))
    if missing:
        raise bad(f"lacks {', '.join(missing)}")
    try:
        line = check_line(data["line"])
    except ValueError as exc:
        raise bad(f"'line': {exc}") from None
    if not _count(data["version"]):
        raise bad(f"'version' must be a whole number from 1, not {data['version']!r:.40}")
    for key in ("target", "profile", "piflash_version"):
        if not isinstance(data[key], str) or not data[key].strip():
            raise bad(f"'{key}' must be a non-empty string")
    max_boards = data.get("max_boards")
    if max_boards is not None and not _count(max_boards):
        raise bad(f"'max_boards' must be a whole number from 1, not {max_boards!r:.40}")
    files: List[FileEntry] = []
    if not isinstance(data["files"], list) or not data["files"]:
        raise bad("'files' must be a non-empty list")
    for item in data["files"]:
        if not isinstance(item, dict) or set(item) != {"path", "size", "sha256"}:
            raise bad("'files' entries must be objects with exactly path, size and sha256")
        path, size, digest = item["path"], item["size"], item["sha256"]
        if not isinstance(path, str):
            raise bad("'files' has a path that is not a string")
        check_name(path, where)
        if path in (MANIFEST, SIGNATURE):
            raise bad(f"lists {path} among its files")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise bad(f"'files': {path} has a size that is not a byte count")
        if not isinstance(digest, str) or not re.fullmatch(r"[0-9a-f]{64}", digest):
            raise bad(f"'files': {path} has a sha256 that is not 64 lower-case hex digits")
        if any(f.path == path for f in files):
            raise bad(f"lists {path} twice")
        files.append(FileEntry(path, size, digest))
    if not any(f.path == data["profile"] for f in files):
        raise bad(f"names profile {data['profile']!r}, which is not among its files")
    return Manifest(
        line=line,
        version=data["version"],
        target=data["target"],
        profile=data["profile"],
        files=tuple(files),
        piflash_version=data["piflash_version"],
        max_boards=max_boards,
    )


def check_files(manifest: Manifest, members: Dict[str, bytes], where: str) -> None:
    """Check the archive's ``members`` are exactly the manifest's files (plus the manifest and its
    signature), each of its size and SHA-256.

    :raises BundleError: (exit 28) a file missing, an extra file, or one whose size or SHA-256
        differs: the bundle changed after it was signed.
    """
    listed = {f.path for f in manifest.files}
    extra = sorted(set(members) - listed - {MANIFEST, SIGNATURE})
    if extra:
        raise BundleError(f"{where}: changed after signing: {', '.join(extra)} is not in the signed manifest")
    for f in manifest.files:
        data = members.get(f.path)
        if data is None:
            raise BundleError(f"{where}: changed after signing: {f.path}, in the signed manifest, is missing")
        if len(data) != f.size or hashlib.sha256(data).hexdigest() != f.sha256:
            raise BundleError(
                f"{where}: changed after signing: {f.path} has {len(data):,} bytes and SHA-256 "
                f"{hashlib.sha256(data).hexdigest()}, the signed manifest says {f.size:,} bytes and {f.sha256}"
            )
