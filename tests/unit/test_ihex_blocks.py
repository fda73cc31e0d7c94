"""The block reader of piflash.firmware.ihex gives what the line-by-line parse gives (issue 42).

``load_hex`` reads runs of 16-byte data records a block at a time (strided checks, no Python
step per record) and any other line one by one. These tests hold it to the line-by-line parse
(:class:`piflash.firmware.ihex._Records` fed every line): the same runs, the same calls of
``inside``, and for a damaged file the same error with the same line number.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from piflash.errors import FirmwareError
from piflash.firmware.ihex import _LINE, _Records, dump_hex, load_hex

MICROBIT_HEX = Path("/usr/share/firmware-microbit-micropython/firmware.hex")


def line_by_line(raw: bytes, calls: list):
    """The line-by-line parse of ``raw``: its runs, or its error's message."""
    records = _Records("f.hex", lambda address, line: calls.append((address, line)))
    try:
        for number, match in enumerate(_LINE.finditer(raw), 1):
            records.line(number, match.group(1) if match.group(1) is not None else match.group(2))
        return records.finish()
    except FirmwareError as exc:
        return str(exc)


def blocks(raw: bytes, calls: list):
    """``load_hex`` of ``raw``: its runs, or its error's message."""
    try:
        return load_hex("f.hex", raw, lambda address, line: calls.append((address, line)))
    except FirmwareError as exc:
        return str(exc)


def same(raw: bytes):
    slow_calls: list = []
    fast_calls: list = []
    expected = line_by_line(raw, slow_calls)
    assert blocks(raw, fast_calls) == expected
    assert fast_calls == slow_calls
    return expected


chunks = st.lists(
    st.tuples(st.integers(0, 0x3FFFF), st.binary(min_size=1, max_size=700)), min_size=1, max_size=5
).map(lambda cs: sorted(cs))


def _disjoint(cs):
    out, end = [], -1
    for address, data in cs:
        if address >= end:
            out.append((address, data))
            end = address + len(data)
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chunks, st.booleans())
def test_well_formed_files_read_the_same(cs, lf):
    cs = _disjoint(cs)
    raw = dump_hex(cs)
    if lf:
        raw = raw.replace(b"\r\n", b"\n")
    result = same(raw)
    joined = b"".join(bytes(d) for _, d in result)
    assert joined == b"".join(d for _, d in cs)  # dump_hex joins nothing it was not given


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    chunks,
    st.lists(st.tuples(st.integers(0, 10**6), st.sampled_from(list(b"0123456789ABCDEFa:\r\n \x00Z"))), max_size=3),
    st.lists(st.integers(0, 10**6), max_size=2),
    st.booleans(),
)
def test_damaged_files_fail_the_same(cs, edits, dropped, lf):
    raw = bytearray(dump_hex(_disjoint(cs)))
    if lf:
        raw = bytearray(raw.replace(b"\r\n", b"\n"))
    for where, char in edits:
        raw[where % len(raw)] = char
    lines = bytes(raw).split(b"\n")
    for where in dropped:
        if len(lines) > 1:
            del lines[where % len(lines)]
    raw = b"\n".join(lines)
    assume(raw.strip())  # an empty file is refused before either reader runs
    same(raw)


def test_reordered_and_repeated_records_read_the_same():
    """Records out of order, a record given twice, records that skip an address: the blocks
    that fail their address check go line by line (the overlap error is the same)."""
    raw = dump_hex([(0x1000, bytes(range(256)) * 4)])
    lines = raw.split(b"\r\n")
    swapped = lines[:3] + [lines[5], lines[4], lines[3]] + lines[6:]
    assert isinstance(same(b"\r\n".join(swapped)), list)
    repeated = lines[:10] + [lines[9]] + lines[10:]
    assert "overlap" in same(b"\r\n".join(repeated))
    skipped = lines[:10] + lines[11:]
    assert len(same(b"\r\n".join(skipped))) == 2


def test_a_bad_checksum_in_a_block_names_its_line():
    raw = bytearray(dump_hex([(0, bytes(4096))]))
    line = 100
    start = sum(len(x) + 2 for x in bytes(raw).split(b"\r\n")[: line - 1])
    raw[start + 9] = ord("1")  # a data digit of line 100: the checksum no longer matches
    message = same(bytes(raw))
    assert f"line {line}: bad checksum" in message


@pytest.mark.skipif(not MICROBIT_HEX.exists(), reason="apt-get install firmware-microbit-micropython")
def test_micropython_reads_the_same():
    result = same(MICROBIT_HEX.read_bytes())
    assert sum(len(d) for _, d in result) == 243880
