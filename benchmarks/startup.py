#!/usr/bin/env python3
"""``piflash --help`` start-up time and peak memory: this checkout against another git revision.

Both run with the same interpreter and installed dependencies (this venv); only piflash's own
source differs (the other revision is exported with ``git archive`` into a temporary folder and
put first on ``PYTHONPATH``). Runs are interleaved A B A B so load drift on a shared machine
hits both alike; the verdict is the median of the per-pair ratios.

    .venv/bin/python benchmarks/startup.py --base 48dabc8 --pairs 21

Prints wall time and peak RSS (``ru_maxrss`` of the child, KiB -> MiB) for each side and the
median ratio new/base.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def run_once(source: Path) -> float:
    """Wall seconds of one ``python -m piflash --help`` with ``source`` first on the path."""
    env = dict(os.environ, PYTHONPATH=str(source), PYTHONDONTWRITEBYTECODE="1")
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "piflash", "--help"], env=env, capture_output=True)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"piflash --help failed from {source}: {proc.stderr.decode()[-500:]}")
    return elapsed


def peak_mib(source: Path) -> float:
    """Peak RSS in MiB of ``python -m piflash --help`` (a child measuring itself at exit)."""
    code = ("import resource, runpy, sys; sys.argv = ['piflash', '--help']\n"
            "try:\n    runpy.run_module('piflash', run_name='__main__')\nexcept SystemExit:\n    pass\n"
            "sys.stderr.write(str(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss))")
    env = dict(os.environ, PYTHONPATH=str(source), PYTHONDONTWRITEBYTECODE="1")
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return int(proc.stderr.strip().splitlines()[-1]) / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="git revision to compare with (e.g. a commit)")
    parser.add_argument("--pairs", type=int, default=21, help="A/B pairs to run [21]")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "base"
        base.mkdir()
        archive = subprocess.run(["git", "-C", str(REPO), "archive", args.base, "piflash"],
                                 capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(base)], input=archive, check=True)
        sides = {"base": base, "new": REPO}
        for side in sides.values():          # warm the page cache and bytecode-free imports once
            run_once(side)
        times = {"base": [], "new": []}
        for _ in range(args.pairs):
            for name in ("base", "new"):
                times[name].append(run_once(sides[name]))
        peaks = {name: max(peak_mib(path) for _ in range(3)) for name, path in sides.items()}
    ratios = [n / b for n, b in zip(times["new"], times["base"])]
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print(f"command: {' '.join(sys.argv)}")
    for name in ("base", "new"):
        print(f"{name:>4}: median {statistics.median(times[name]) * 1000:.1f} ms, "
              f"peak RSS {peaks[name]:.1f} MiB")
    print(f"median ratio new/base over {args.pairs} interleaved pairs: {statistics.median(ratios):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
