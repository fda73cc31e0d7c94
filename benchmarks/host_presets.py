#!/usr/bin/env python3
"""The host presets at each end of their factor band, as the tables of docs/benchmarks.md print them.

The simulated USB devices charge a host preset's CPU figures on the virtual clock
(``piflash.sim.probes.usb.timing``: ``HOST_PRESETS``, ``get_host(name, end)``). The x86 preset is
measured (``benchmarks/host_cost.py``); the Pis are the x86 figures times a factor, a band of
low / mid / high with a source for each end. This script reads those figures and prints them:
nothing is measured or predicted here, so the tables it prints change only when the presets do.

    .venv/bin/python benchmarks/host_presets.py            # both tables, Markdown
    .venv/bin/python benchmarks/host_presets.py --json     # every figure of every end

Table 1 (``--table band``): per preset and band end, the factor, piflash's and pyOCD's CPU per
DAP packet outside the named phases (us), MicroPython's .hex (670,788 bytes, Debian's
firmware-microbit-micropython) parsed by piflash and by pyOCD (s), and ``pyocd flash``'s
start-up (s). Table 2 (``--table phase``): piflash's and pyOCD's CPU per DAP packet in the
program and connect phases (us).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Dict, List

#: Bytes of MicroPython's .hex for the micro:bit (Debian firmware-microbit-micropython
#: 1.0.1-3, /usr/share/firmware-microbit-micropython/firmware.hex): the file the parse figures
#: of the presets were measured on.
MICROPYTHON_HEX_BYTES = 670788


def _figures(preset) -> Dict[str, float]:
    """The figures of one preset at one end of its band (us per packet, seconds per file)."""
    return {
        "factor": preset.factor,
        "piflash_us": preset.transfer_at("piflash") * 1e6,
        "pyocd_us": preset.transfer_at("pyocd") * 1e6,
        "piflash_program_us": preset.transfer_at("piflash", "program") * 1e6,
        "piflash_connect_us": preset.transfer_at("piflash", "connect") * 1e6,
        "pyocd_program_us": preset.transfer_at("pyocd", "program") * 1e6,
        "pyocd_connect_us": preset.transfer_at("pyocd", "connect") * 1e6,
        "piflash_hex_s": preset.parse_s("piflash", "hex", MICROPYTHON_HEX_BYTES),
        "pyocd_hex_s": preset.parse_s("pyocd", "hex", MICROPYTHON_HEX_BYTES),
        "pyocd_startup_s": preset.startup_s,
    }


def collect() -> Dict[str, Dict[str, Dict[str, float]]]:
    """``{preset: {end: figures}}`` for every preset and band end (``HOST_FACTORS``)."""
    from piflash.sim.probes.usb.timing import HOST_FACTORS, HOST_PRESETS, get_host

    return {name: {end: _figures(get_host(name, end)) for end in HOST_FACTORS} for name in HOST_PRESETS}


def _g(value: float, digits: int = 3) -> str:
    """``value`` to ``digits`` significant digits, never in exponent form (``4104``, ``41.9``)."""
    if value >= 10**digits:
        return "%d" % round(value, digits - len(str(int(value))))
    return "%.*g" % (digits, value)


def band_cell(f: Dict[str, float]) -> str:
    """One cell of the band table: ``8.4: 312 / 360 us, 0.466 / 1.55 s, 4.47 s``."""
    return "%s: %s / %s us, %s / %s s, %s s" % (
        _g(f["factor"]),
        _g(f["piflash_us"]),
        _g(f["pyocd_us"]),
        _g(f["piflash_hex_s"]),
        _g(f["pyocd_hex_s"]),
        _g(f["pyocd_startup_s"]),
    )


def phase_cell(f: Dict[str, float]) -> str:
    """One cell of the phase table: ``8.4: piflash program 31.2 / connect 723 us, pyOCD ...``."""
    return "%s: piflash program %s / connect %s us, pyOCD program %s / connect %s us" % (
        _g(f["factor"]),
        _g(f["piflash_program_us"]),
        _g(f["piflash_connect_us"]),
        _g(f["pyocd_program_us"]),
        _g(f["pyocd_connect_us"]),
    )


def table(figures, cell) -> List[str]:
    """Markdown rows: a preset per row, an end per column; an end equal to the one before it
    says so ("the same")."""
    ends = ("low", "mid", "high")
    lines = ["| preset | low | mid | high |", "|---|---|---|---|"]
    for name, by_end in figures.items():
        cells, before = [], None
        for end in ends:
            text = cell(by_end[end])
            if before is not None and text == before:
                cells.append("the same")
            elif before is not None and text.split(":", 1)[1] == before.split(":", 1)[1]:
                cells.append("%s: the same" % text.split(":", 1)[0])
            else:
                cells.append(text)
            before = text
        lines.append("| `%s` | %s |" % (name, " | ".join(cells)))
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--json", action="store_true", help="every figure of every preset and end, as JSON")
    parser.add_argument("--table", choices=("band", "phase", "both"), default="both")
    args = parser.parse_args(argv)
    figures = collect()
    if args.json:
        json.dump(figures, sys.stdout, indent=1, sort_keys=True)
        print()
        return 0
    if args.table in ("band", "both"):
        print("\n".join(table(figures, band_cell)))
    if args.table == "both":
        print()
    if args.table in ("phase", "both"):
        print("\n".join(table(figures, phase_cell)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
