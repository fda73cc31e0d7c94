"""Predicted time of ``piflash flash`` to a Pico in USB BOOTSEL mode (PICOBOOT, no probe).

A ~400 KiB image (400 KiB of pseudo-random bytes, fixed seed: the size of the published RP2040
figures of rgrr/yapicoprobe ``doc/benchmarks.adoc``, where a UF2 copy to the BOOTSEL drive took
4.1 s) is flashed with ``piflash.jobs.bootsel.flash_bootsel`` into the simulated boot ROM
device (piflash/sim/probes/usb/picoboot.py), verify on, in three cases:

* ``fresh`` -- an erased board;
* ``reflash`` -- the same image again (nothing to erase or write);
* ``changed`` -- every byte of the image different from what the board holds (every sector erased).

Printed per case: ``piflash_s`` (the virtual clock at the end: USB full speed, the boot ROM's one
256-byte buffer, the W25Q16JV's typical times, clk_sys 48 MHz with the ROM's SPI divider 6, and
the host's CPU time per USB transfer of the host preset), ``floor_s`` and the ratio. The floor is
what any PICOBOOT tool must spend (:func:`floor_s`): every page that must change crosses the bus
once, is shifted to the flash at the fastest SPI clock and programmed (the ROM takes the next 256
bytes only once the page is programmed, so these add up), plus the typical erase time of what
must be erased in 64 KiB blocks where they fit; no check of what the board held and no verify. ``uf2_copy_s`` is the published 4.1 s.

All figures are predictions of the timing model, not measurements: they do not depend on this
machine's speed, only on the host preset (``--host x86|zero2w|pi4|pi5``: its CPU seconds per USB
transfer, ``piflash.sim.probes.usb.timing.HOST_PRESETS``, piflash's figure; pyusb alone costs
less than piflash over pyOCD, so this errs on the slow side).

The station lines (:func:`station`) predict boards/hour of 1, 2 and 4 slots on one hub from the
fresh run, its recorded bus and host intervals replayed against each other.

    python benchmarks/picoboot_usb.py [--chip rp2350] [--host zero2w] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SIZE = 400 * 1024
BASE = 0x10000000
UF2_COPY_S = 4.1            # rgrr/yapicoprobe doc/benchmarks.adoc, ~400 KB image


#: SPI divider and erase unit the fastest PICOBOOT tool can have, by chip: an RP2040 runs code
#: by EXEC, so clk_sys / 2 and 64 KiB block erases; an RP2350's ROM runs none (EXEC refused) and
#: keeps its BOOTSEL divider 6 (BOOTROM_SPI_CLKDIV_NSBOOT) and its FLASH_ERASE by 4 KiB sectors.
FASTEST = {"rp2040": (2, 64 * 1024), "rp2350": (6, 4096)}


def floor_s(pages: int, erased: int, chip: str = "rp2040") -> float:
    """The floor of a PICOBOOT flash writing ``pages`` pages and erasing ``erased`` bytes from a
    64 KiB boundary (s): per page its wire time, its 260 bytes on the SPI bus at the fastest
    clock the chip gives in BOOTSEL mode (clk_sys 48 MHz / :data:`FASTEST`'s divider) and the
    typical page program time, added up (the ROM's one 256-byte buffer serialises them); 64 KiB
    block erases where whole blocks go (RP2040), 4 KiB sector erases for the rest, typical times."""
    from piflash.sim.probes.usb import picoboot as sim
    from piflash.sim.probes.usb.timing import (
        FULL_SPEED_BPS,
        PACKET_OVERHEAD_BYTES,
        TARGET_TIMING,
    )
    t = TARGET_TIMING[chip]
    divider, unit = FASTEST[chip]
    wire = (256 + 4 * PACKET_OVERHEAD_BYTES) * 8 / FULL_SPEED_BPS
    spi = (4 + 256) * 8 * divider / sim.BOOT_CLK_SYS_HZ
    blocks, rest = divmod(erased, 64 * 1024) if unit > 4096 else (0, erased)
    erase = blocks * t.block_erase_s["erase_block64"][0] + rest // 4096 * t.erase_page_s
    return pages * (wire + spi + t.program_s) + erase


def run_case(case: str, host: str, chip: str = "rp2040") -> dict:
    from piflash.firmware.image import load_image
    from piflash.jobs.bootsel import flash_bootsel
    from piflash.jobs.options import FlashOptions
    from piflash.progress import ProgressSink
    from piflash.sim import SimStore
    from piflash.sim.probes import usb as sim_usb
    from piflash.sim.probes.usb.timing import get_host

    with tempfile.TemporaryDirectory() as tmp:
        os.environ["PIFLASH_SIM_DIR"] = tmp
        store = SimStore()
        store.create("pico", chip)
        data = random.Random(chip).randbytes(SIZE)
        path = Path(tmp) / "image.bin"
        path.write_bytes(data)
        image = load_image(str(path), base_address=BASE)
        if case == "reflash":
            store.write_flash("pico", data)
        elif case == "changed":
            store.write_flash("pico", bytes(b ^ 0x5A for b in data))
        device = sim_usb.install("pico@bootsel", store).devices[0]
        device.host_transfer_s = get_host(host).transfer_at("piflash")
        device.clock.timeline = []
        phases = {}

        class Clocked(ProgressSink):
            """Books each phase's virtual seconds."""

            def phase_start(self, phase, total):
                phases[str(phase)] = -device.clock.now

            def phase_end(self, phase, summary=""):
                phases[str(phase)] = round(phases[str(phase)] + device.clock.now, 3)

        try:
            result = flash_bootsel(image, "picoboot", job=FlashOptions(verify=True, reset=True), progress=Clocked())
        finally:
            sim_usb.uninstall()
        p = result.program
        assert store.read_flash("pico")[:SIZE] == data
        floor = floor_s(p.programmed_pages, p.erased_bytes, chip)
        total = device.clock.now
        return {"case": case, "chip": chip, "host": host, "image_bytes": SIZE, "piflash_s": round(total, 3),
                "floor_s": round(floor, 3), "ratio": round(total / floor, 2) if floor else None,
                "uf2_copy_s": UF2_COPY_S, "programmed_pages": p.programmed_pages,
                "erased_bytes": p.erased_bytes, "phases": phases,
                "requests": dict(device.clock.requests), "_timeline": device.clock.timeline}


#: The station set-ups predicted: (label, shared resources and their capacity, staggered start).
#: ``bus``: behind a single-TT hub every full-speed device shares one Transaction Translator (USB
#: 2.0 spec 11.14.1.3); a multi-TT hub has one per port. ``host``: the station's one interpreter
#: lock with worker threads (the default); a Zero 2W's four cores with ``workers: processes``.
SETUPS = (
    ("single-TT hub, in step", {"bus": 1, "host": 1}, False),
    ("single-TT hub, staggered", {"bus": 1, "host": 1}, True),
    ("multi-TT hub", {"host": 1}, False),
)


def station(row: dict) -> list:
    """Predicted boards/hour of a station with 1, 2 and 4 BOOTSEL slots on one hub, from one
    fresh board's run (``row``, its recorded timeline): N copies of it replayed against the
    shared full-speed bus and the station's interpreter lock (``piflash.sim.probes.usb.hub``,
    6 boards a slot). ``in step``: every slot starts its board at once (a fixture closing on all
    of them; the bus-heavy program phases coincide); ``staggered``: slot i starts i/N of a board
    later (boards seated one after the other). The time the operator needs to swap a board is
    left out (the same for every N)."""
    from piflash.sim.probes.usb.hub import station_rates
    out = []
    for label, capacity, stagger in SETUPS:
        for r in station_rates(row["_timeline"], row["piflash_s"], (1, 2, 4), capacity, stagger=stagger):
            out.append({"setup": label, "slots": r["devices"], "boards_per_hour": round(r["boards_per_hour"]),
                        "vs_one": round(r["vs_one"], 2), "wait_s": round(r["wait_s"], 3),
                        "waits_s": {k: round(v, 3) for k, v in r["waits_s"].items()}})
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="x86", help="host preset (x86, zero2w, pi4, pi5)")
    parser.add_argument("--cases", default="fresh,reflash,changed")
    parser.add_argument("--chip", default="rp2040", choices=sorted(FASTEST), help="the Pico's chip")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    rows = [run_case(case, args.host, args.chip) for case in args.cases.split(",")]
    fresh = next((r for r in rows if r["case"] == "fresh"), None)
    slots = station(fresh) if fresh is not None else []
    for r in rows:
        timeline = r.pop("_timeline")
        r["bus_s"] = round(sum(s for res, _, s in timeline if res == "bus"), 3)
        r["host_s"] = round(sum(s for res, _, s in timeline if res == "host"), 3)
    if args.json:
        print(json.dumps({"rows": rows, "station": slots}, indent=2))
        return 0
    print(f"PICOBOOT, {args.chip}, 400 KiB image, verify on, host preset {args.host} (predictions of the timing model)")
    print(f"{'case':<8} {'piflash_s':>9} {'floor_s':>8} {'ratio':>6} {'uf2_copy_s':>10}  phases (s)")
    for r in rows:
        ratio = f"{r['ratio']:.2f}" if r["ratio"] is not None else "-"
        phases = " ".join(f"{k} {v:.2f}" for k, v in r["phases"].items())
        print(f"{r['case']:<8} {r['piflash_s']:>9.2f} {r['floor_s']:>8.2f} {ratio:>6} {r['uf2_copy_s']:>10.1f}  {phases}")
    if slots:
        print(f"station, fresh boards: bus {fresh['bus_s']:.2f} s and host CPU {fresh['host_s']:.3f} s "
              f"per board (worker threads: one interpreter lock)")
        for r in slots:
            print(f"  {r['setup']:<25} {r['slots']} slot(s): {r['boards_per_hour']:>6} boards/hour  "
                  f"({r['vs_one']:.2f}x one slot; waits {r['wait_s']:.3f} s a board)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
