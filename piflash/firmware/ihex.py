"""Intel HEX files: every record checked by piflash, the image assembled by bincopy.

bincopy (pure Python) keeps each run of contiguous records as one ``bytearray``: on MicroPython's
670 KB .hex it takes about a quarter of the CPU intelhex takes, and intelhex keeps a dict entry
per data byte (docs/benchmarks.md, "Host cost" and "Peak memory"). But bincopy trusts its input
where piflash must not: it adds a type 02 (segment) and a type 04 (linear) offset together where
the format's readers (intelhex, srec_cat) take the last one given; it reads on after the end-of-file
record; a record that covers an earlier record across a gap replaces that record's bytes without
an error; it does not check the lengths of the address records. So :func:`check_records` reads
every record first, against the format (Intel, "Hexadecimal Object File Format Specification",
revision A, 1988: ``:`` count, address, type, data, checksum; types 00 data, 01 end of file, 02
extended segment address, 03 start segment address, 04 extended linear address, 05 start linear
address), and refuses what would load ambiguously, with the line at fault. Only a file that passes
goes to bincopy, and the bytes it assembles must add up to the data records' bytes (else two
records wrote the same address).
"""

from __future__ import annotations

import os
from typing import Dict, List, Tuple

from piflash.errors import FirmwareError

__all__ = ["check_records", "load_hex"]

_HEX_DIGITS = b"0123456789abcdefABCDEF"
#: Record type -> the byte count it must carry (None: any; data records).
_COUNTS = {0x00: None, 0x01: 0, 0x02: 2, 0x03: 4, 0x04: 2, 0x05: 4}
_DAMAGED = "the file is damaged: rebuild or download it again"


def check_records(path: "os.PathLike[str] | str", raw: bytes) -> Tuple[str, int]:
    """Check every record of the Intel HEX file ``raw`` (its bytes) named ``path``.

    :returns: ``(text, data_bytes)``: the records one per line (``\\n``, whatever line ends the
        file used), and the number of data bytes the type 00 records carry.
    :raises FirmwareError: with the line number: a line that is not a record (``:`` and an odd
        number of hex digits), a byte count that does not match the record's length, a bad
        checksum, an unknown record type, an address record of the wrong length or with a
        non-zero address field, an end-of-file record with data, both type 02 and type 04
        address records in one file, anything after the end-of-file record, or no end-of-file
        record at all (a truncated file).
    """
    if not raw.strip():
        raise FirmwareError(
            f"{path}: the file is empty ({len(raw)} bytes)" if raw else f"{path}: the file is empty",
            hint="check the build: the output is empty",
        )
    records: List[bytes] = []
    data_bytes = 0
    end = None  # line of the end-of-file record
    kinds: Dict[int, int] = {}  # 0x02 / 0x04 -> the first line that used it
    for number, line in enumerate(raw.splitlines(), 1):
        line = line.strip()
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
            data_bytes += count
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
        records.append(line)
    if end is None:
        raise FirmwareError(
            f"{path}: Intel HEX file is truncated (no end-of-file record)",
            hint="the file was cut short: copy or download it again",
        )
    return b"\n".join(records).decode("ascii"), data_bytes


def load_hex(path: "os.PathLike[str] | str", raw: bytes) -> List[Tuple[int, bytes]]:
    """The data of the Intel HEX file ``raw`` (its bytes) named ``path``: ``[(address, bytes)]``,
    one per run of contiguous records, in address order.

    :raises FirmwareError: what :func:`check_records` raises; two records that write the same
        address.
    """
    import bincopy

    text, data_bytes = check_records(path, raw)
    hexfile = bincopy.BinFile()
    try:
        hexfile.add_ihex(text)
    except bincopy.AddDataError as exc:  # bincopy's text names neither record nor address
        raise _overlap(path) from exc
    except bincopy.Error as exc:  # not expected after check_records
        raise FirmwareError(f"{path}: corrupt Intel HEX file: {exc}", hint=_DAMAGED) from exc
    chunks = [(segment.minimum_address, bytes(segment.data)) for segment in hexfile.segments]
    if sum(len(data) for _, data in chunks) != data_bytes:
        raise _overlap(path)
    return chunks


def _overlap(path) -> FirmwareError:
    return FirmwareError(
        f"{path}: Intel HEX records overlap: two records write the same address",
        hint="the file is damaged or two images were joined: rebuild it",
    )
