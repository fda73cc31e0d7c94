#!/usr/bin/env python3
"""Probe requests and flash operations of one flash, piflash against stock ``pyocd flash``.

A deterministic proxy for time on a real probe, until the virtual clock of
``benchmarks/real_probe.py`` (issue 11) predicts seconds: for each target and case it counts

- ``requests``: DAP calls pyOCD makes on the simulated probe (``read_dp``, ``write_dp``,
  ``read_ap``, ``write_ap``, ``read_ap_multiple``, ``write_ap_multiple``): over the remote
  protocol each is one round trip;
- ``transfers``: 32-bit DAP transfers those calls carry (what ``SimProbe.transfer_count`` counts);
- ``erase_ops``, ``program_ops``, ``program_bytes``: the simulated flash controller's operations
  (a sector or chip erase is one erase op; nRF programs one word per op, STM32 one half-word).

Cases: ``fresh`` (a board just created: all flash erased) and ``reflash`` (the same image again on
the board the fresh run left). Images: nrf52840 256 KiB and stm32f103rc 64 KiB of seeded random
bytes at the start of flash (as ``benchmarks/flash_vs_pyocd.py`` makes them), nrf51 Debian's
MicroPython hex for the micro:bit. piflash runs ``flasher.flash_firmware`` (erase auto, verify,
reset); pyocd runs ``pyocd flash`` (its defaults: erase auto, no verify, reset), both in this
process on the same simulated probe plugin.

    .venv/bin/python benchmarks/probe_requests.py [--json] [--targets nrf52840,nrf51,stm32f103rc]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import sys
import tempfile
from pathlib import Path

MICROPYTHON_HEX = Path("/usr/share/firmware-microbit-micropython/firmware.hex")
#: target -> (image description, flash base address, random image size in bytes or None for the hex)
CASES = {"nrf52840": (0x0, 256 * 1024), "nrf51": (None, None), "stm32f103rc": (0x08000000, 64 * 1024)}
_DAP_CALLS = ("read_dp", "write_dp", "read_ap", "write_ap", "read_ap_multiple", "write_ap_multiple")
COUNTS = {"requests": 0, "transfers": 0}


def _count_dap_calls() -> None:
    """Wrap the simulated probe's DAP methods (this benchmark process only) to count them."""
    from piflash.sim.probes.simprobe import SimProbe

    for name in _DAP_CALLS:
        original = getattr(SimProbe, name)

        def counted(self, *args, _original=original, _name=name, **kwargs):
            COUNTS["requests"] += 1
            if _name == "read_ap_multiple":
                COUNTS["transfers"] += args[1] if len(args) > 1 else kwargs.get("count", 1)
            elif _name == "write_ap_multiple":
                COUNTS["transfers"] += len(args[1])
            else:
                COUNTS["transfers"] += 1
            return _original(self, *args, **kwargs)

        setattr(SimProbe, name, counted)


def make_image(tmp: Path, target: str) -> tuple:
    """Return (path, base address or None) of the benchmark image for ``target``."""
    base, size = CASES[target]
    if size is None:
        if not MICROPYTHON_HEX.exists():
            raise SystemExit(f"{MICROPYTHON_HEX} missing: apt-get install firmware-microbit-micropython")
        return MICROPYTHON_HEX, None
    path = tmp / f"{target}.bin"
    path.write_bytes(random.Random(42).randbytes(size))
    return path, base


def run_piflash(path: Path, base, target: str, board: str) -> None:
    from piflash.firmware.image import load_image
    from piflash.jobs.workflow import flash_firmware

    flash_firmware(load_image(path, base), probe=f"sim:{board}", target=target)


def run_pyocd(path: Path, base, target: str, board: str) -> None:
    from pyocd.__main__ import PyOCDTool

    args = ["flash", "-t", target, "-u", f"sim:{board}", str(path)]
    if base is not None:
        args += ["--base-address", hex(base)]
    if PyOCDTool().run(args) != 0:
        raise SystemExit(f"pyocd {' '.join(args)} failed")


def measure(tool: str, path: Path, base, target: str) -> dict:
    """Flash a fresh board, then the same image again; return {case: counts}."""
    from piflash.sim.store import SimStore

    store = SimStore()
    board = f"{tool}-{target}"
    store.create(board, target)
    run = run_piflash if tool == "piflash" else run_pyocd
    rows = {}
    for case in ("fresh", "reflash"):
        before = dict(store.get(board).stats)
        COUNTS.update(requests=0, transfers=0)
        run(path, base, target, board)
        after = store.get(board).stats
        rows[case] = dict(COUNTS, **{k: after.get(k, 0) - before.get(k, 0)
                                     for k in ("erase_ops", "program_ops", "program_bytes")})
    image = store.load_state(board)[1]["flash"]
    rows["_flash"] = image
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--targets", default=",".join(CASES), help="comma-separated target types")
    args = ap.parse_args()
    logging.disable(logging.WARNING)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["PIFLASH_SIM_DIR"] = str(Path(tmp) / "sim")
        _count_dap_calls()
        for target in args.targets.split(","):
            path, base = make_image(Path(tmp), target)
            by_tool = {tool: measure(tool, path, base, target) for tool in ("piflash", "pyocd")}
            if by_tool["piflash"].pop("_flash") != by_tool["pyocd"].pop("_flash"):
                raise SystemExit(f"{target}: piflash and pyocd left different flash contents")
            for case in ("fresh", "reflash"):
                for tool in ("piflash", "pyocd"):
                    results.append(dict(target=target, case=case, tool=tool, **by_tool[tool][case]))
    if args.json:
        print(json.dumps({"rows": results}, indent=1))
        return 0
    keys = ("requests", "transfers", "erase_ops", "program_ops", "program_bytes")
    print(f"{'target':<12} {'case':<8} {'tool':<8} " + " ".join(f"{k:>13}" for k in keys) + "   piflash/pyocd requests")
    for row in results:
        ratio = ""
        if row["tool"] == "pyocd":
            mine = next(r for r in results if r["tool"] == "piflash" and r["target"] == row["target"]
                        and r["case"] == row["case"])
            ratio = f"{mine['requests'] / row['requests']:.3f}" if row["requests"] else "-"
        print(f"{row['target']:<12} {row['case']:<8} {row['tool']:<8} "
              + " ".join(f"{row[k]:>13,}" for k in keys) + f"   {ratio}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
