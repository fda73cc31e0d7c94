#!/usr/bin/env python3
"""A hostile file costs no more than a valid one of the same size (issue 38): time and peak
memory of what piflash does with a file before any probe is touched.

For each kind, a valid file and a hostile one of the same byte size are made in a temporary
folder and read by a child process each (``load_image`` given the target's flash, and the fit
against it, as ``piflash flash -t TARGET`` does first; ``load_profile`` for a profile). Runs are interleaved
valid, hostile, valid, hostile...; the verdict is the median of the per-pair ratios
hostile/valid, for the wall time of the child's work (``time.perf_counter`` around it) and its
peak RSS (``ru_maxrss``; the imports, done before the clock starts, are in both).

Kinds (each hostile file is one that earlier rounds of the issue found expensive or fatal):

- ``uf2``: 4,096 RP2040 blocks (2 MiB of UF2) in order, against the same blocks each claiming a
  block count of 0xFFFFFFFF and addresses spread 4 MiB apart, past the Pico's flash.
- ``hex``: an Intel HEX of 256 KiB of data at 0x0, against the same records each behind an
  extended linear address record 64 KiB further (a sparse image spanning 4 GiB).
- ``yaml``: a profile with a 256-entry ``pack:`` list, against a YAML alias bomb of the same size
  under ``pack:`` (nine levels of ten aliases: 10^9 values once expanded).

    .venv/bin/python benchmarks/hostile_files.py --pairs 11

Prints, per kind: the outcome of each side (loaded, or the exit code), the median time and peak
RSS of each, and the median ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

#: UF2 magic numbers and the RP2040 family ID (Microsoft's UF2 specification, uf2.h; pico-sdk's
#: ``boot/uf2.h`` RP2040_FAMILY_ID).
UF2_MAGIC0, UF2_MAGIC1, UF2_END, UF2_FAMILY = 0x0A324655, 0x9E5D5157, 0x0AB16F30, 0xE48BFF56

CHILD = r"""
import json, resource, sys, time
kind, path = sys.argv[1], sys.argv[2]
from piflash.errors import PiflashError
from piflash.firmware.image import check_fits, load_image
from piflash.profiles import load_profile
from piflash.targets.catalog import builtin_flash_regions
target = "rp2040" if kind == "uf2" else "nrf52840"
regions = builtin_flash_regions(target)          # pyOCD's target class imported before the clock starts
start = time.perf_counter()
try:
    if kind == "yaml":
        load_profile(path)
    else:
        check_fits(load_image(path, flash_regions=regions, target=target), regions, target)  # as flash -t does
    outcome = "loaded"
except PiflashError as exc:
    outcome = "exit %d" % int(exc.exit_code)
elapsed = time.perf_counter() - start
print(json.dumps({"seconds": elapsed, "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "outcome": outcome}))
"""


def uf2_pair(folder: Path):
    blocks = 4096
    def block(n: int, address: int, total: int) -> bytes:
        head = struct.pack("<8I", UF2_MAGIC0, UF2_MAGIC1, 0x2000, address, 256, n, total, UF2_FAMILY)
        return head + bytes((n + i) & 0xFF for i in range(256)).ljust(476, b"\0") + struct.pack("<I", UF2_END)
    valid = b"".join(block(n, 0x10000000 + 256 * n, blocks) for n in range(blocks))
    hostile = b"".join(block(n, (0x10000000 + (n << 22)) & 0xFFFFFF00, 0xFFFFFFFF) for n in range(blocks))
    (folder / "valid.uf2").write_bytes(valid)
    (folder / "hostile.uf2").write_bytes(hostile)
    return folder / "valid.uf2", folder / "hostile.uf2"


def _hex_record(kind: int, address: int, data: bytes) -> str:
    body = bytes((len(data), address >> 8 & 0xFF, address & 0xFF, kind)) + data
    return ":" + (body + bytes(((-sum(body)) & 0xFF,))).hex().upper() + "\n"


def hex_pair(folder: Path):
    records = (256 * 1024) // 16
    valid, hostile = [], []
    for n in range(records):
        data = bytes((n + i) & 0xFF for i in range(16))
        address = 16 * n
        if n % 4096 == 0:
            valid.append(_hex_record(4, 0, struct.pack(">H", address >> 16)))
        valid.append(_hex_record(0, address & 0xFFFF, data))
        hostile.append(_hex_record(4, 0, struct.pack(">H", n & 0xFFFF)))
        hostile.append(_hex_record(0, 0, data))
    valid_text = "".join(valid)
    hostile_text = "".join(hostile)
    # Same size: pad the valid file with extended address records that change nothing.
    pad = _hex_record(4, 0, struct.pack(">H", 0))
    valid_text = pad * ((len(hostile_text) - len(valid_text)) // len(pad)) + valid_text
    (folder / "valid.hex").write_text(valid_text + ":00000001FF\n")
    (folder / "hostile.hex").write_text(hostile_text + ":00000001FF\n")
    return folder / "valid.hex", folder / "hostile.hex"


def yaml_pair(folder: Path):
    (folder / "fw.hex").write_text(":0400000001020304F2\n:00000001FF\n")
    bomb = ["target: nrf52840", "firmware: fw.hex", "pack:", "  - &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for level in range(1, 10):
        prev = f"*a{level - 1}"
        bomb.append(f"  - &a{level} [{', '.join([prev] * 10)}]")
    hostile = "\n".join(bomb) + "\n"
    lines = ["target: nrf52840", "firmware: fw.hex", "pack:"]
    n = 0
    while len("\n".join(lines)) + 40 < len(hostile):
        lines.append(f"  - packs/Vendor{n:04d}.DFP.pack")
        n += 1
    valid = "\n".join(lines) + "\n"
    valid = valid + "#" * (len(hostile) - len(valid) - 1) + "\n"
    (folder / "valid.yaml").write_text(valid)
    (folder / "hostile.yaml").write_text(hostile)
    return folder / "valid.yaml", folder / "hostile.yaml"


def run_child(kind: str, path: Path) -> dict:
    # No parsed-image cache: each child parses the file (with it, every run after the first read
    # the cache back, and the hex kind measured 51 ms where the parse takes seconds).
    env = dict(os.environ, PYTHONPATH=str(REPO), PIFLASH_HISTORY="off", PIFLASH_CACHE="off")
    proc = subprocess.run([sys.executable, "-c", CHILD, kind, str(path)], env=env, capture_output=True,
                          text=True, timeout=300)
    if proc.returncode != 0:
        raise SystemExit(f"{kind} {path.name}: rc {proc.returncode}: {proc.stderr[-800:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=11, help="valid/hostile pairs per kind [11]")
    parser.add_argument("--kinds", default="uf2,hex,yaml", help="comma-separated kinds [uf2,hex,yaml]")
    args = parser.parse_args()
    makers = {"uf2": uf2_pair, "hex": hex_pair, "yaml": yaml_pair}
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    with tempfile.TemporaryDirectory() as tmp:
        for kind in args.kinds.split(","):
            folder = Path(tmp) / kind
            folder.mkdir()
            valid, hostile = makers[kind](folder)
            a, b = [], []
            for _ in range(args.pairs):
                a.append(run_child(kind, valid))
                b.append(run_child(kind, hostile))
            t_ratio = statistics.median(y["seconds"] / x["seconds"] for x, y in zip(a, b))
            m_ratio = statistics.median(y["peak_mib"] / x["peak_mib"] for x, y in zip(a, b))
            print(f"{kind}: {valid.stat().st_size} vs {hostile.stat().st_size} bytes; "
                  f"valid {a[0]['outcome']}, {statistics.median(x['seconds'] for x in a) * 1000:.1f} ms, "
                  f"{statistics.median(x['peak_mib'] for x in a):.1f} MiB; "
                  f"hostile {b[0]['outcome']}, {statistics.median(y['seconds'] for y in b) * 1000:.1f} ms, "
                  f"{statistics.median(y['peak_mib'] for y in b):.1f} MiB; "
                  f"median ratio hostile/valid: time {t_ratio:.2f}, peak memory {m_ratio:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
