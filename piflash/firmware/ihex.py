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

Most lines of most files are data records of 16 bytes at addresses that follow each other (what
objcopy, intelhex and :func:`dump_hex` write). Those are read a block at a time
(:func:`_blocks`): the lines' shape, their checksums and their addresses are checked from
strided views of the whole block and the data gathered by strided copies, with no Python step
per record; any other line, and a block that fails a check, goes through the line-by-line parse,
so what is refused, and the line named, are the same (tests/unit/test_ihex_blocks.py).
MicroPython's 670,788-byte .hex for the micro:bit: 4.1 ms, where line by line took 37.7 ms
(x86, issue 42; benchmarks/hex_parse.py).
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
    records = _Records(path, inside)
    eol = _block_line_end(raw)
    if eol is None:
        for number, match in enumerate(_LINE.finditer(raw), 1):
            records.line(number, match.group(1) if match.group(1) is not None else match.group(2))
    else:
        _blocks(raw, eol, records)
    return records.finish()


class _Records:
    """The state of one file's parse: the runs so far, the address base, the end-of-file record.

    :meth:`line` checks and places one line (any record, any fault, the error with its line
    number); :meth:`block` places a block of 16-byte data records that :func:`_blocks` has
    checked whole. Both lead to the same runs."""

    def __init__(self, path, inside: Optional[Callable[[int, int], None]]) -> None:
        self.path = path
        self.inside = inside
        self.runs: List[Tuple[int, bytearray]] = []  # contiguous records joined as they come
        self.run_end = -1
        self.base = 0  # from the last type 02 or 04 record
        self.end: Optional[int] = None  # line of the end-of-file record
        self.kinds: Dict[int, int] = {}  # 0x02 / 0x04 -> the first line that used it

    def line(self, number: int, line: bytes) -> None:
        """Check and place line ``number`` (1-based; ``line`` without its end).

        :raises FirmwareError: see :func:`load_hex`.
        """
        path = self.path
        line = line.strip()
        if not line:
            return
        if not line.startswith(b":") or line[1:].translate(None, _HEX_DIGITS):
            what = (
                "does not start with ':'" if not line.startswith(b":") else "holds characters that are not hex digits"
            )
            raise FirmwareError(
                f"{path}: not an Intel HEX file: line {number} {what}",
                hint="is it a .bin or .elf named .hex? Give it its right extension (a .bin also needs --base-address)",
            )
        if self.end is not None:
            raise FirmwareError(
                f"{path}: line {number}: a record after the end-of-file record of line {self.end}",
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
            if count:
                self._place(self.base + (fields[1] << 8 | fields[2]), fields[4:-1], number)
        elif kind == 0x01:
            self.end = number
        elif kind in (0x02, 0x04):
            kinds = self.kinds
            kinds.setdefault(kind, number)
            if len(kinds) == 2:
                raise FirmwareError(
                    f"{path}: line {number}: both segment (type 02, line {kinds[0x02]}) and linear "
                    f"(type 04, line {kinds[0x04]}) address records: tools place such data "
                    f"differently",
                    hint="rebuild the file with one kind of address record",
                )
            value = fields[4] << 8 | fields[5]
            self.base = value << 4 if kind == 0x02 else value << 16

    def _place(self, address: int, data: "bytes | bytearray", number: int) -> None:
        """Join ``data`` (at ``address``, from line ``number`` on) to the run it follows, or
        start a run (after asking ``inside``)."""
        if address == self.run_end:
            self.runs[-1][1].extend(data)
        else:
            if self.inside is not None:
                self.inside(address, number)
            self.runs.append((address, bytearray(data)))
        self.run_end = address + len(data)

    def block(self, number: int, offset: int, data: bytearray) -> None:
        """Place the data of consecutive 16-byte data records, the first at 16-bit address
        ``offset`` on line ``number``, checked whole by :func:`_blocks` (their lines, counts,
        types, checksums, and addresses that follow each other)."""
        self._place(self.base + offset, data, number)

    def finish(self) -> List[Tuple[int, bytes]]:
        """The runs in address order.

        :raises FirmwareError: no end-of-file record; two runs that overlap.
        """
        if self.end is None:
            raise FirmwareError(
                f"{self.path}: Intel HEX file is truncated (no end-of-file record)",
                hint="the file was cut short: copy or download it again",
            )
        runs = self.runs
        runs.sort(key=lambda run: run[0])
        for (address, data), (after, _) in zip(runs, runs[1:]):
            if after < address + len(data):
                raise _overlap(self.path, after)
        return [(address, bytes(data)) for address, data in runs]


#: The bytes an Intel HEX file holds when :func:`_blocks` can read it: hex digits, ``:`` and
#: line ends (anything else, a space or a tab, goes line by line).
_BLOCK_CHARS = _HEX_DIGITS + b":\r\n"
#: The line of a data record of 16 bytes, without its end: ``:10AAAA00`` + 32 data digits + 2
#: checksum digits. objcopy, the GNU and IAR linkers, intelhex and piflash's :func:`dump_hex`
#: write 16 bytes per data record, so most lines of most files are this one.
_LINE16 = 43
#: Lines of 16-byte data records read as one block at most (64 KiB of data: one 16-bit segment).
_BLOCK_LINES = 4096
#: Fewer lines than this go line by line: a block's fixed cost (37 strided copies) is that of
#: about four lines read one by one (a sparse file has blocks of one line).
_MIN_BLOCK = 8
#: The 16-bit addresses of a whole segment's 16-byte records, high and low bytes (record k at 16k).
_HI16 = bytes((k * 16) >> 8 for k in range(_BLOCK_LINES))
_LO16 = bytes((k * 16) & 0xFF for k in range(_BLOCK_LINES))


def _block_line_end(raw: bytes) -> Optional[bytes]:
    """The line end of a file :func:`_blocks` can read (``b"\\r\\n"`` or ``b"\\n"``, the same on
    every line, nothing but :data:`_BLOCK_CHARS`), else None (the line-by-line parse)."""
    if raw.translate(None, _BLOCK_CHARS):
        return None
    cr = raw.count(b"\r")
    if not cr:
        return b"\n"
    return b"\r\n" if raw.count(b"\r\n") == cr == raw.count(b"\n") else None


def _leading(column: bytes, value: int) -> int:
    """How many bytes at the start of ``column`` are ``value``."""
    return len(column) - len(column.lstrip(bytes((value,))))


def _blocks(raw: bytes, eol: bytes, records: _Records) -> None:
    """Parse ``raw`` (lines ended by ``eol``) a block of 16-byte data records at a time, any other
    line one by one (:meth:`_Records.line`).

    A block is the longest run of lines from here whose every line is ``:10`` + 4 address digits +
    ``00`` + 34 digits + ``eol``, found from strided views of the text (every line's start,
    count, type and end at once). Its records are then checked together: their checksums (each
    record's 21 bytes summed in 16-bit lanes of one integer: a sum of 21 bytes is at most
    5,355), and addresses that follow each other by 16 within the segment. A block that fails a
    check is parsed line by line, so the error and its line number are the line-by-line parse's.
    The data are then gathered by strided copies. Costs no Python step per record; memory is one
    block (at most :data:`_BLOCK_LINES` lines).
    """
    size = len(raw)
    width = _LINE16 + len(eol)
    number = 1  # the line at pos
    pos = 0
    while pos < size:
        lines = 0
        if records.end is None and raw.startswith(b":10", pos) and raw.startswith(b"00", pos + 7):
            stop = min(size, pos + _BLOCK_LINES * width)
            lines = min(
                _leading(raw[pos:stop:width], 0x3A),  # ':'
                _leading(raw[pos + 1 : stop : width], 0x31),  # '1'
                _leading(raw[pos + 2 : stop : width], 0x30),  # '0'
                _leading(raw[pos + 7 : stop : width], 0x30),  # '0' of the type
                _leading(raw[pos + 8 : stop : width], 0x30),
                _leading(raw[pos + _LINE16 : stop : width], eol[0]),
                _leading(raw[pos + width - 1 : stop : width], 0x0A),
            )
        if lines >= _MIN_BLOCK and _block(raw, pos, lines, width, number, records):
            pos += lines * width
            number += lines
            continue
        for _ in range(max(lines, 1)):  # one line that is not a 16-byte data record, or a block that failed
            after = raw.find(b"\n", pos)
            after = size if after < 0 else after + 1
            records.line(number, raw[pos:after].rstrip(b"\r\n"))
            pos = after
            number += 1


def _block(raw: bytes, pos: int, lines: int, width: int, number: int, records: _Records) -> bool:
    """Check and place the block of ``lines`` 16-byte data record lines at ``pos``; False if a
    check fails (nothing placed)."""
    text = raw[pos : pos + lines * width]
    if text.count(b":") != lines or text.count(b"\n") != lines:  # no line shorter or longer than it looks
        return False
    binary = bytes.fromhex(text.translate(None, b":").decode("ascii"))  # 21 bytes per record
    lanes = 0
    wide = bytearray(2 * lines)
    for column in range(21):
        wide[0::2] = binary[column::21]
        lanes += int.from_bytes(wide, "little")
    if lanes.to_bytes(2 * lines, "little")[0::2].count(0) != lines:
        return False  # a bad checksum
    offset = binary[1] << 8 | binary[2]
    first = offset >> 4
    if offset & 0xF or first + lines > _BLOCK_LINES:
        return False
    if binary[1::21] != _HI16[first : first + lines] or binary[2::21] != _LO16[first : first + lines]:
        return False  # records that do not follow each other
    data = bytearray(16 * lines)
    for column in range(16):
        data[column::16] = binary[4 + column :: 21]
    records.block(number, offset, data)
    return True


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
