#!/usr/bin/env python3
"""Intel HEX parse: piflash's block reader against its line-by-line reader (issue 42).

``piflash.firmware.ihex.load_hex`` reads runs of 16-byte data records a block at a time and any
other line one by one; the line-by-line reader is the same module's ``_Records`` fed every line,
what ``load_hex`` did before. Both parse the same file, interleaved A B A B, CPU time
(``time.process_time``) per parse; prints the best and the median of each and the median of
the per-pair ratios (block / line by line).

    .venv/bin/python benchmarks/hex_parse.py [FILE] [--pairs 9]

FILE defaults to Debian's MicroPython for the micro:bit (firmware-microbit-micropython).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

MICROBIT_HEX = Path("/usr/share/firmware-microbit-micropython/firmware.hex")


def line_by_line(path: str, raw: bytes):
    """The line-by-line reader: every line through ``_Records.line``."""
    from piflash.firmware.ihex import _LINE, _Records

    records = _Records(path, None)
    for number, match in enumerate(_LINE.finditer(raw), 1):
        records.line(number, match.group(1) if match.group(1) is not None else match.group(2))
    return records.finish()


def _cpu(fn, path: str, raw: bytes) -> float:
    start = time.process_time()
    fn(path, raw)
    return time.process_time() - start


def main(argv=None) -> int:
    from piflash.firmware.ihex import load_hex

    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("file", nargs="?", default=str(MICROBIT_HEX))
    parser.add_argument("--pairs", type=int, default=9)
    args = parser.parse_args(argv)
    raw = Path(args.file).read_bytes()
    if load_hex(args.file, raw) != line_by_line(args.file, raw):
        raise SystemExit("the two readers disagree on %s" % args.file)
    block, lines = [], []
    for _ in range(args.pairs):
        block.append(_cpu(load_hex, args.file, raw))
        lines.append(_cpu(line_by_line, args.file, raw))
    ratios = [a / b for a, b in zip(block, lines)]
    print("%s, %d bytes, %d pairs" % (args.file, len(raw), args.pairs))
    print("block reader:  best %.2f ms, median %.2f ms" % (min(block) * 1e3, statistics.median(block) * 1e3))
    print("line by line:  best %.2f ms, median %.2f ms" % (min(lines) * 1e3, statistics.median(lines) * 1e3))
    print("block / line by line, median of the pairs: %.3f" % statistics.median(ratios))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
