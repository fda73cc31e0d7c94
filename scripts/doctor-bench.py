#!/usr/bin/env python3
"""Print docs/permissions.md's "On the test bench" transcript from a real run.

    sudo PYTHONPATH=. .venv/bin/python scripts/doctor-bench.py

Builds the simulated USB bench of tests/system/test_usbscan.py (tests/support/usbfake.py
``make_bench``: a fake /sys and /dev with an ST-Link whose node is ``root:plugdev 0660`` and a
DAPLink whose node no rule touched) and runs ``piflash doctor`` and ``piflash info -t nrf52840``
on it as the user ``nobody`` without supplementary groups, so that the kernel's own permission
check decides. Prints each command as a ``$ `` line followed by what it printed (stdout, then
stderr). Needs root and ``setpriv`` (util-linux), as those tests do; exits 1 without them.
tests/docs/test_doc_commands.py checks the page's rows against a run of this bench.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import List, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from support.usbfake import make_bench  # noqa: E402

#: The commands of the transcript, in page order.
COMMANDS: Tuple[Tuple[str, ...], ...] = (("doctor",), ("info", "-t", "nrf52840"))


def transcript() -> List[Tuple[str, str]]:
    """``[(command line, output)]`` of :data:`COMMANDS` on a fresh bench, as nobody."""
    bench = make_bench()
    try:
        out = []
        for args in COMMANDS:
            proc = bench.piflash(*args)
            out.append(("piflash " + " ".join(args), proc.stdout + proc.stderr))
        return out
    finally:
        shutil.rmtree(bench.base)


def main() -> int:
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        print("doctor-bench: needs root and setpriv (util-linux), to run piflash as nobody", file=sys.stderr)
        return 1
    for line, output in transcript():
        print(f"$ {line}")
        print(output, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
