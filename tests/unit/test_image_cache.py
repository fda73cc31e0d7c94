"""Parsed firmware images on disk (piflash/firmware/cache.py; issue 20, deliverable 2): a file
is parsed once per host; the same bytes again are read back; a damaged entry is parsed again
(the image flashed is always the file's); the cache can be switched off and never fails a
command. With Debian's MicroPython .hex (nobody here wrote it)."""

from __future__ import annotations

import os

import pytest

from piflash.firmware import cache
from piflash.firmware.image import load_image


@pytest.fixture
def folder(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("PIFLASH_CACHE", str(d))
    return d


def _entries(folder):
    return sorted((folder / "images").glob("*.seg"))


def test_parsed_once_then_read_back(folder, microbit_hex):
    cold = load_image(microbit_hex)
    (entry,) = _entries(folder)
    assert entry.name == f"{cold.sha256}-hex.seg"
    warm = load_image(microbit_hex)
    assert warm.segments == cold.segments and warm.sha256 == cold.sha256
    # read back, not parsed: the parse is never called for a good entry
    chunks, families, hit = cache.cached_chunks(cold.sha256, "hex", lambda: pytest.fail("parsed again"))
    assert hit and [(a, len(d)) for a, d in chunks] == [(s.address, len(s.data)) for s in cold.segments]


@pytest.mark.parametrize("damage", ["flip", "truncate", "empty"])
def test_a_damaged_entry_is_parsed_again(folder, microbit_hex, damage):
    good = load_image(microbit_hex)
    (entry,) = _entries(folder)
    blob = bytearray(entry.read_bytes())
    if damage == "flip":
        blob[len(blob) // 2] ^= 0x10          # one bit of the segment data
    elif damage == "truncate":
        del blob[-100:]
    else:
        blob = bytearray()
    entry.write_bytes(bytes(blob))
    again = load_image(microbit_hex)
    assert again.segments == good.segments
    assert cache._decode(entry.read_bytes()) is not None      # rewritten whole


def test_off(tmp_path, monkeypatch, microbit_hex):
    monkeypatch.setenv("PIFLASH_CACHE", "off")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.cache_dir() is None
    load_image(microbit_hex)
    assert not (tmp_path / "xdg").exists()


def test_a_cache_that_cannot_be_written_is_skipped(tmp_path, monkeypatch, microbit_hex):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("PIFLASH_CACHE", str(blocker / "cache"))      # mkdir fails, even as root
    assert load_image(microbit_hex).segments


def test_where_it_lives(monkeypatch, tmp_path):
    monkeypatch.delenv("PIFLASH_CACHE", raising=False)
    monkeypatch.setenv("CACHE_DIRECTORY", "/var/cache/piflash")
    assert str(cache.cache_dir()) == "/var/cache/piflash"             # the station unit's CacheDirectory=
    monkeypatch.delenv("CACHE_DIRECTORY")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache.cache_dir() == tmp_path / "piflash"


def test_least_recently_used_entries_go_first(folder, monkeypatch):
    monkeypatch.setattr(cache, "MAX_ENTRIES", 3)
    for i in range(5):
        cache.cached_chunks(str(i) * 64, "hex", lambda i=i: ([(0, bytes([i]) * 16)], ()))
        os.utime(folder / "images" / f"{str(i) * 64}-hex.seg", (1000 + i, 1000 + i))
    cache.cached_chunks("f" * 64, "hex", lambda: ([(0, b"x")], ()))
    assert [p.name[0] for p in _entries(folder)] == ["3", "4", "f"]     # 0, 1 and 2 were the oldest


def test_a_broken_file_is_not_cached(folder, tmp_path):
    from piflash.errors import FirmwareError

    bad = tmp_path / "bad.hex"
    bad.write_text(":10000000FFFFFFFF\n")
    with pytest.raises(FirmwareError):
        load_image(bad)
    assert not _entries(folder)
