"""Parsed firmware images kept on disk, so a file is parsed once per host, not once per command
("nothing parsed twice").

Parsing MicroPython's 670 KB .hex took 0.11 s of this x86 machine's CPU with ``intelhex`` and,
predicted, about 0.9 s of a Pi Zero 2W's, longer than a whole re-flash of an unchanged board there;
piflash's record checks and ``bincopy`` take a fraction of that (docs/benchmarks.md, "Host
cost"). A command that loads a file it loaded before (the same bytes: the key is the file's
SHA-256) reads the segments back instead: one read of the file (its hash is needed for the
history anyway), one read of the entry.

An entry is ``IMAGES/<sha256 of the file>-<format>.seg``: the magic ``PFSEG3\\0\\0``, the number
of UF2 family IDs and of segments (u32 each), the family IDs (u32 each), per segment its address
and length (u32 each) and its bytes, and last the SHA-256 of everything before it. An entry
whose trailer does not match (a torn write, a bad SD card sector) is parsed again and rewritten:
the image flashed and verified against is always the file's. Entries are written to a temporary
file and renamed (atomic); at most :data:`MAX_ENTRIES` and :data:`MAX_BYTES` are kept, the least
recently used are removed first. The cache never fails a command: a folder that cannot be
written is skipped.

Where (:func:`cache_dir`): ``$PIFLASH_CACHE`` (``off`` disables it), else systemd's
``$CACHE_DIRECTORY`` (the station unit's ``CacheDirectory=piflash``), else
``$XDG_CACHE_HOME/piflash``, else ``~/.cache/piflash``; entries go into its ``images/``.
"""

from __future__ import annotations

import hashlib
import os
import struct
import tempfile
from pathlib import Path
from typing import Callable, List, Optional, Sequence, Tuple

from piflash import settings

__all__ = ["cache_dir", "cached_chunks", "MAX_ENTRIES", "MAX_BYTES"]

#: Entries kept at most (least recently used removed first).
MAX_ENTRIES = 16
#: Bytes kept at most over all entries: a Pi's SD card is small and slow.
MAX_BYTES = 32 * 1024 * 1024
_MAGIC = b"PFSEG3\0\0"  # 3: Intel HEX placed by piflash itself (2: by bincopy)

Chunks = List[Tuple[int, bytes]]


def cache_dir() -> Optional[Path]:
    """The cache's folder (see the module docstring), or None when it is off."""
    env = settings.PIFLASH_CACHE.value()
    if env is not None:
        return None if env is settings.OFF else env
    systemd = settings.CACHE_DIRECTORY.value()
    if systemd:
        return Path(systemd)
    xdg = settings.XDG_CACHE_HOME.value()
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "piflash"


def _encode(chunks: Sequence[Tuple[int, bytes]], families: Sequence[int]) -> bytes:
    parts = [_MAGIC, struct.pack("<II", len(families), len(chunks))]
    parts += [struct.pack("<I", f) for f in families]
    for address, data in chunks:
        parts += [struct.pack("<II", address, len(data)), bytes(data)]
    body = b"".join(parts)
    return body + hashlib.sha256(body).digest()


def _decode(blob: bytes) -> Optional[Tuple[Chunks, Tuple[int, ...]]]:
    """The entry's (chunks, families), or None when it is damaged in any way."""
    if len(blob) < len(_MAGIC) + 8 + 32 or not blob.startswith(_MAGIC):
        return None
    body, digest = blob[:-32], blob[-32:]
    if hashlib.sha256(body).digest() != digest:
        return None
    view = memoryview(body)
    nfam, nseg = struct.unpack_from("<II", view, len(_MAGIC))
    pos = len(_MAGIC) + 8
    if pos + 4 * nfam > len(body):
        return None
    families = struct.unpack_from(f"<{nfam}I", view, pos)
    pos += 4 * nfam
    chunks: Chunks = []
    for _ in range(nseg):
        if pos + 8 > len(body):
            return None
        address, length = struct.unpack_from("<II", view, pos)
        pos += 8
        if pos + length > len(body):
            return None
        chunks.append((address, bytes(view[pos : pos + length])))
        pos += length
    return (chunks, tuple(families)) if pos == len(body) else None


def _prune(folder: Path) -> None:
    entries = []
    for p in folder.glob("*.seg"):
        try:
            st = p.stat()
        except OSError:
            continue
        entries.append((st.st_mtime, st.st_size, p))
    entries.sort(reverse=True)  # newest (most recently used) first
    total = 0
    for n, (_, size, p) in enumerate(entries):
        total += size
        if n >= MAX_ENTRIES or total > MAX_BYTES:
            try:
                p.unlink()
            except OSError:
                pass


def cached_chunks(
    sha256: str, fmt: str, parse: Callable[[], Tuple[Chunks, Tuple[int, ...]]], folder: Optional[Path] = None
) -> Tuple[Chunks, Tuple[int, ...], bool]:
    """The file's (chunks, UF2 family IDs) from the cache, or from ``parse()`` (then stored).

    :param sha256: hex SHA-256 of the file's bytes. :param fmt: its format (``hex``, ``elf``,
        ``uf2``). :param parse: parses the file; whatever it raises (a FirmwareError for a broken
        file) is raised here, and nothing is stored.
    :param folder: the cache's folder; default :func:`cache_dir`.
    :returns: ``(chunks, families, hit)``: ``hit`` is True when the cache answered.
    """
    folder = folder if folder is not None else cache_dir()
    if folder is None:
        chunks, families = parse()
        return chunks, families, False
    images = folder / "images"
    entry = images / f"{sha256}-{fmt}.seg"
    try:
        got = _decode(entry.read_bytes())
    except OSError:
        got = None
    if got is not None:
        try:
            os.utime(entry)  # recently used: pruned last
        except OSError:
            pass
        return got[0], got[1], True
    chunks, families = parse()
    try:
        images.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(dir=images, prefix=".tmp-", suffix=".seg")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(_encode(chunks, families))
            os.replace(tmp, entry)
        except BaseException:
            os.unlink(tmp)
            raise
        _prune(images)
    except OSError:
        pass  # a cache that cannot be written is skipped
    return chunks, families, False
