"""Intel HEX files: every record checked and placed by piflash.

The format is Intel's "Hexadecimal Object File Format Specification", revision A, 1988: ``:``
count, address, type, data, checksum; types 00 data, 01 end of file, 02 extended segment address,
03 start segment address, 04 extended linear address, 05 start linear address. :func:`load_hex`
reads every record against it and refuses what would load ambiguously, with the line at fault:
both type 02 and type 04 address records in one file (the format's readers, intelhex and
srec_cat, take the last one given; bincopy added the two together), anything after the
end-of-file record, an address record of the wrong length, two records that write the same
address.

Each data record's absolute address is its 16-bit offset plus the current base (type 02:
segment x 16; type 04: upper 16 bits x 65536), as intelhex and bincopy place it. The records are
joined while they follow each other, the runs sorted once and checked for overlaps, so a
file's cost is linear in its size plus one sort, however its records are spread: bincopy, which
this module used to hand the checked records to, inserted every non-adjacent record by a linear
scan of the segments before it, and a sparse file of 16,384 records 64 KiB apart (1 MB) took
6 s where a contiguous file of 1.4 MB took 0.3 s (issue 38; benchmarks/hostile_files.py).
"""

from __future__ import annotations

import os
import re
from typing import Callable, Dict, List, Optional, Tuple

from piflash.errors import FirmwareError

__all__ = ["load_hex", "dump_hex"]

_HEX_DIGITS = b"0123456789abcdefABCDEF"
#: Record type -> the byte count it must carry (None: any; data records).
_COUNTS = {0x00: None, 0x01: 0, 0x02: 2, 0x03: 4, 0x04: 2, 0x05: 4}
_DAMAGED = "the file is damaged: rebuild or download it again"
#: One line, ended as ``bytes.splitlines`` ends lines (CR LF, CR or LF), or the last
#: line without an end: the lines one at a time, not a list of them all (a 46 MB file has a
#: million lines).
_LINE = re.compile(rb"([^\r\n]*)(?:\r\n|\r|\n)|([^\r\n]+)\Z")


def load_hex(
    path: "os.PathLike[str] | str", raw: bytes, inside: Optional[Callable[[int, int], None]] = None
) -> List[Tuple[int, bytes]]:
    """The data of the Intel HEX file ``raw`` (its bytes) named ``path``: ``[(address, bytes)]``,
    one per run of records that follow each other in the file and in memory, in address order
    (runs that meet are joined later, by :func:`piflash.firmware.image.merge_segments`).

    :param inside: called as ``inside(address, line)`` with the first address of every run of
        records and the run's first line; it raises (an ``ImageRangeError``) to stop the parse
        there, for an address outside the target's flash.

    Time is linear in ``len(raw)`` plus one sort of the runs of contiguous records; memory is
    one ``bytearray`` per run, joined as the records come.

    :raises FirmwareError: with the line number: a line that is not a record (``:`` and an odd
        number of hex digits), a byte count that does not match the record's length, a bad
        checksum, an unknown record type, an address record of the wrong length or with a
        non-zero address field, an end-of-file record with data, both type 02 and type 04
        address records in one file, anything after the end-of-file record, no end-of-file
        record at all (a truncated file), an empty file; two records that write the same
        address.
    """
    if not raw.strip():
        raise FirmwareError(
            f"{path}: the file is empty ({len(raw)} bytes)" if raw else f"{path}: the file is empty",
            hint="check the build: the output is empty",
        )
    runs: List[Tuple[int, bytearray]] = []  # contiguous records joined as they come
    run_end = -1
    base = 0  # from the last type 02 or 04 record
    end = None  # line of the end-of-file record
    kinds: Dict[int, int] = {}  # 0x02 / 0x04 -> the first line that used it
    for number, match in enumerate(_LINE.finditer(raw), 1):
        line = (match.group(1) if match.group(1) is not None else match.group(2)).strip()
        if not line:
            continue
        if not line.startswith(b":") or line[1:].translate(None, _HEX_DIGITS):
            what = (
                "does not start with ':'" if not line.startswith(b":") else "holds characters that are not hex digits"
            )
            raise FirmwareError(
                f"{path}: not an Intel HEX file: line {number} {what}",
                hint="is it a .bin or .elf named .hex? Give it its right extension (a .bin also needs --base-address)",
            )
        if end is not None:
            raise FirmwareError(
                f"{path}: line {number}: a record after the end-of-file record of line {end}",
                hint="two files were joined into one (cat a.hex b.hex): merge them with a "
                "tool that drops the first end-of-file record, or flash them one by one",
            )
        fields = bytes.fromhex(line[1:].decode("ascii")) if len(line) % 2 else b""
        if len(fields) < 5 or fields[0] != len(fields) - 5:
            raise FirmwareError(
                f"{path}: corrupt Intel HEX file: line {number}: the record's length does not match its byte count",
                hint=_DAMAGED,
            )
        if sum(fields) & 0xFF:
            raise FirmwareError(
                f"{path}: corrupt Intel HEX file: line {number}: bad checksum "
                f"(the record's bytes sum to {sum(fields) & 0xFF:#04x}, not 0)",
                hint=_DAMAGED,
            )
        count, kind = fields[0], fields[3]
        if kind not in _COUNTS:
            raise FirmwareError(
                f"{path}: corrupt Intel HEX file: line {number}: record type {kind:#04x} "
                f"(Intel HEX has types 0x00-0x05)",
                hint=_DAMAGED,
            )
        if _COUNTS[kind] is not None and (count != _COUNTS[kind] or (kind != 0x01 and fields[1:3] != b"\0\0")):
            raise FirmwareError(
                f"{path}: corrupt Intel HEX file: line {number}: a type {kind:#04x} record must "
                f"carry {_COUNTS[kind]} bytes at address 0000",
                hint=_DAMAGED,
            )
        if kind == 0x00:
            address = base + (fields[1] << 8 | fields[2])
            if count and address == run_end:
                runs[-1][1].extend(fields[4:-1])
            elif count:
                if inside is not None:
                    inside(address, number)
                runs.append((address, bytearray(fields[4:-1])))
            run_end = address + count if count else run_end
        elif kind == 0x01:
            end = number
        elif kind in (0x02, 0x04):
            kinds.setdefault(kind, number)
            if len(kinds) == 2:
                raise FirmwareError(
                    f"{path}: line {number}: both segment (type 02, line {kinds[0x02]}) and linear "
                    f"(type 04, line {kinds[0x04]}) address records: tools place such data "
                    f"differently",
                    hint="rebuild the file with one kind of address record",
                )
            value = fields[4] << 8 | fields[5]
            base = value << 4 if kind == 0x02 else value << 16
    if end is None:
        raise FirmwareError(
            f"{path}: Intel HEX file is truncated (no end-of-file record)",
            hint="the file was cut short: copy or download it again",
        )
    runs.sort(key=lambda run: run[0])
    for (address, data), (after, _) in zip(runs, runs[1:]):
        if after < address + len(data):
            raise _overlap(path, after)
    return [(address, bytes(data)) for address, data in runs]


def _overlap(path, address: int) -> FirmwareError:
    return FirmwareError(
        f"{path}: Intel HEX records overlap: two records write the same address ({address:#010x})",
        hint="the file is damaged or two images were joined: rebuild it",
    )


def dump_hex(chunks: "List[Tuple[int, bytes]]", row: int = 16) -> bytes:
    """Intel HEX text of ``chunks`` (``[(address, bytes)]``, addresses below 2**32): 16 data
    bytes per record (``row``), a type 04 record wherever the upper 16 address bits change, an
    end-of-file record; CR LF line ends, as the format's writers (intelhex, objcopy) give them.
    :func:`load_hex` reads it back to the same bytes.

    :raises ValueError: data past 0xFFFFFFFF.
    """
    out: List[bytes] = []
    upper = -1
    for address, data in chunks:
        if address + len(data) > 1 << 32:
            raise ValueError(f"data at {address:#x} runs past the 32-bit address space")
        offset = 0
        while offset < len(data):
            at = address + offset
            if at >> 16 != upper:
                upper = at >> 16
                out.append(_record(0x04, 0, upper.to_bytes(2, "big")))
            size = min(row, len(data) - offset, 0x10000 - (at & 0xFFFF))  # never across 64 KiB
            out.append(_record(0x00, at & 0xFFFF, data[offset : offset + size]))
            offset += size
    out.append(_record(0x01, 0, b""))
    return b"".join(out)


def _record(kind: int, address: int, data: bytes) -> bytes:
    body = bytes((len(data), address >> 8, address & 0xFF, kind)) + data
    return b":" + (body + bytes(((-sum(body)) & 0xFF,))).hex().upper().encode("ascii") + b"\r\n"
