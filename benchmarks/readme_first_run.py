#!/usr/bin/env python3
"""From a fresh clone to a flashed, verified simulated Pico and nRF52840 by following only the README.

Goal (issue 41): under 5 minutes on this machine with the package caches warm (pip's cache,
Debian's packages already installed: what the README's first command would install is there).

Clones this checkout's HEAD (``git clone``, so only what is committed) into a temporary folder and
runs the README's commands there in order, as a reader would, each timed:

1. ``bash scripts/demo.sh`` (dev-setup: the venv and ``pip install -e .[sim]``; then MicroPython
   into a simulated micro:bit, twice);
2. ``source .venv/bin/activate`` (the README's line after the demo): ``piflash`` on the PATH;
3. ``bash scripts/build-test-firmware.sh`` (README, "Using it": the files the examples flash);
4. in ``tests/firmware/build/examples``: ``piflash sim create pico --target rp2040`` and
   ``piflash flash blink.uf2 -t rp2040 -u sim:pico`` (the simulated Pico, README "The RP2040");
5. ``piflash sim create bench --target nrf52840`` and ``piflash flash app.hex -t nrf52840 -u
   sim:bench`` (README, "The simulated board"). Both flashes verify by read-back.

    .venv/bin/python benchmarks/readme_first_run.py            # --json for the figures as JSON

Prints the machine (architecture, cores, load average), the seconds per step and the total
against the goal; exit 1 if a step fails (its output is printed).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
GOAL_S = 300.0

#: (step name, shell command, run in the examples folder). One bash runs them all, so the
#: ``source`` of step 2 holds for the later steps, as in a reader's terminal.
STEPS = [
    ("demo", "bash scripts/demo.sh", False),
    ("activate", "source .venv/bin/activate && command -v piflash", False),
    ("build firmware", "bash scripts/build-test-firmware.sh", False),
    ("sim create pico", "piflash sim create pico --target rp2040", True),
    ("flash pico", "piflash flash blink.uf2 -t rp2040 -u sim:pico", True),
    ("sim create bench", "piflash sim create bench --target nrf52840", True),
    ("flash nrf52840", "piflash flash app.hex -t nrf52840 -u sim:bench", True),
]


def machine() -> str:
    """One line: architecture, cores, 1-minute load average, Python."""
    return (f"{platform.machine()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}, "
            f"Python {platform.python_version()}")


def run(clone: Path, env: dict) -> list:
    """The steps in one bash in ``clone``; ``[(name, seconds, exit status, output)]``."""
    script = ["set +e", f"cd {clone}"]
    for n, (_, command, in_examples) in enumerate(STEPS):
        where = "cd tests/firmware/build/examples && " if in_examples else ""
        script.append(f"s=$(date +%s.%N); {{ {where}{command}; }} > {clone}/.step{n}.out 2>&1; rc=$?; "
                      f"cd {clone}; echo $rc $(date +%s.%N) $s > {clone}/.step{n}.rc; [ $rc = 0 ] || exit $rc")
    subprocess.run(["bash", "-c", "\n".join(script)], env=env, check=False)
    results = []
    for n, (name, _, _) in enumerate(STEPS):
        rc_file = clone / f".step{n}.rc"
        if not rc_file.exists():
            break
        rc, end, start = rc_file.read_text().split()
        results.append((name, float(end) - float(start), int(rc), (clone / f".step{n}.out").read_text()))
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="piflash-readme-") as tmp:
        clone = Path(tmp) / "piflash"
        start = time.monotonic()
        subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
        steps = [("git clone", time.monotonic() - start, 0, "")]
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PIFLASH_", "VIRTUAL_ENV"))}
        env.update(PIFLASH_SIM_DIR=str(Path(tmp) / "sim"), PIFLASH_HISTORY=str(Path(tmp) / "history.sqlite3"))
        steps += run(clone, env)
    total = sum(s for _, s, _, _ in steps)
    failed = [(name, rc, out) for name, _, rc, out in steps if rc != 0]
    ok = not failed and len(steps) == len(STEPS) + 1
    if args.json:
        print(json.dumps({"machine": machine(), "steps": {name: round(s, 2) for name, s, _, _ in steps},
                          "total_s": round(total, 1), "goal_s": GOAL_S, "ok": ok,
                          "met": ok and total < GOAL_S}, indent=2))
    else:
        print(f"machine: {machine()}")
        for name, seconds, rc, _ in steps:
            print(f"  {name:18} {seconds:7.1f} s" + (f"  (exit {rc})" if rc else ""))
        print(f"total: {total:.1f} s (goal: under {GOAL_S:.0f} s with the package caches warm): "
              + ("met" if ok and total < GOAL_S else "NOT met" if ok else "a step failed"))
    for name, rc, out in failed:
        print(f"{name} exited {rc}:\n{out[-3000:]}", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
