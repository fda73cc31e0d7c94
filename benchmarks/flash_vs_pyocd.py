#!/usr/bin/env python3
"""piflash vs pyOCD on the same simulated board, side by side in one run.

For a 256 KiB image on a simulated nRF52840 (fresh, erased board each run):
``piflash flash`` (with its read-back verify) against ``pyocd flash``; and
``piflash --help`` against ``pyocd --help``. Each figure is the median of N runs
(default 5): wall time, and peak RSS of the command's process (from wait4's rusage).

    python benchmarks/flash_vs_pyocd.py [--runs 5] [--size 262144]

Targets (issue #2): flash time <= 1.15x pyOCD's, peak RSS <= 1.10x, piflash --help < 0.2x pyocd --help.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent


def run(cmd, env):
    """Run cmd; return (wall seconds, peak RSS in MiB). Fails loudly on a non-zero exit."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    out, err = proc.communicate()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"failed: {' '.join(map(str, cmd))}\n{out.decode()}\n{err.decode()}")
    return wall, usage.ru_maxrss / 1024


def fresh_board(env, name):
    subprocess.run([BIN / "piflash", "sim", "delete", name], env=env, capture_output=True)
    subprocess.run([BIN / "piflash", "sim", "create", name, "--target", "nrf52840"], env=env,
                   check=True, capture_output=True)


def median_of(runs, cmd, env, before=None):
    walls, rss = [], []
    for _ in range(runs):
        if before:
            before()
        w, r = run(cmd, env)
        walls.append(w)
        rss.append(r)
    return statistics.median(walls), statistics.median(rss)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--size", type=int, default=256 * 1024, help="image size in bytes")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, PIFLASH_SIM_DIR=str(Path(tmp) / "sim"))
        image = Path(tmp) / "image.bin"
        image.write_bytes(random.Random(42).randbytes(args.size))
        common = [image, "--target", "nrf52840"]
        rows = {
            "flash: piflash (with verify)": median_of(
                args.runs, [BIN / "piflash", "flash", *common, "-a", "0", "-u", "sim:bench-a", "-q"],
                env, lambda: fresh_board(env, "bench-a")),
            "flash: pyocd": median_of(
                args.runs, [BIN / "pyocd", "flash", *common, "--base-address", "0", "-u", "sim:bench-b"],
                env, lambda: fresh_board(env, "bench-b")),
            "--help: piflash": median_of(args.runs, [BIN / "piflash", "--help"], env),
            "--help: pyocd": median_of(args.runs, [BIN / "pyocd", "--help"], env),
        }

    import pyocd
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, {platform.platform()}, "
          f"Python {platform.python_version()}, pyOCD {pyocd.__version__}")
    print(f"image: {args.size:,} bytes, nrf52840 simulated board, median of {args.runs} runs\n")
    print(f"{'command':<30} {'wall (s)':>9} {'peak RSS (MiB)':>15}")
    for name, (wall, rss) in rows.items():
        print(f"{name:<30} {wall:>9.3f} {rss:>15.1f}")
    fw, fr = rows["flash: piflash (with verify)"]
    pw, pr = rows["flash: pyocd"]
    hw, _ = rows["--help: piflash"]
    ph, _ = rows["--help: pyocd"]
    checks = [("flash time ratio", fw / pw, "<=", 1.15), ("flash peak RSS ratio", fr / pr, "<=", 1.10),
              ("--help time ratio", hw / ph, "<", 0.2)]
    print()
    for name, ratio, op, goal in checks:
        met = ratio <= goal if op == "<=" else ratio < goal
        print(f"{name:<22} {ratio:6.3f}  (goal {op} {goal}) {'ok' if met else 'MISSED'}")


if __name__ == "__main__":
    main()
