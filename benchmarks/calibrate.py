"""Calibration of the USB probe timing model against published pyOCD measurements.

Reproduces, on the virtual clock (piflash.sim.probes.usb), the setups of published pyOCD figures and
prints predicted next to published. Sources and setups are in docs/benchmarks.md
("Calibration"). All of them are pyOCD's own test programs (test/speed_test.py and
test/flash_test.py in pyOCD's repository) run on an nRF51 at pyOCD's nRF test clock of 1 MHz
(test/test_util.py get_target_test_params), rates in KB/s with KB = 1000 bytes:

* RAM write / RAM read: ``write_memory_block32`` / ``read_memory_block32`` of the whole RAM
  region (16 KiB); ROM read: ``read_memory_block32`` of the whole flash (256 KiB);
* page erase rate: ``flash_block`` of the whole flash, sector erase, smart flash off,
  bytes / (erase + program time);
* chip erase rate: the same with chip erase.

The CMSIS-DAP v2 row (issue 21): rgrr/yapicoprobe ``doc/benchmarks.adoc``, table "CMSIS-DAP
Benchmarks", row git-28fd8db (2023-01-06, "SWCLK tuned to 25MHz"): ``time pyocd flash -f 25000000
-t rp2040 firmware.elf`` (pyOCD 0.34.3, Linux) of "an image with a size around 400KByte":
13.9 s. Reproduced as: the ``yapicoprobe`` preset (that commit's DAPv2 packets: 2 x 128 bytes),
a blank simulated RP2040, 400 KiB of seeded random bytes at 0x10000000, pyOCD's connect,
``FileProgrammer.program`` and reset at 25 MHz, the ``x86`` host preset's CPU per transfer and
its ``pyocd flash`` process start-up and file load (``HostPreset``). Assumed where the source is
silent: the board's flash differs from the image everywhere (pyOCD then erases and programs it
all, as OpenOCD's ``program`` does in the same table), and KByte = 1024 bytes. The same table's
DAPv1 figure (28.6 s) is OpenOCD's, which the simulator cannot run: ``rp2040_pyocd_dapv1_s`` is
pyOCD over that firmware's DAPv1 (1 x 64 bytes, HID), a prediction with nothing to compare.

    python benchmarks/calibrate.py [--json] [--preset daplink]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile

#: Published figures: pyOCD issue #23 (github.com/pyocd/pyOCD/issues/23), comment of
#: 2019-10-28 by the pyOCD maintainer: CI results on Windows 7, Python 3.7, two nrf51 boards.
#: Second source: pyOCD pull request #287 (github.com/pyocd/pyOCD/pull/287), comment of
#: 2017-04-23: speed test of the same CI on an nrf51 (pyOCD of 2017): read and write speed.
PUBLISHED = {
    "ram_write_kBps": (45.257, 51.845),
    "ram_read_kBps": (45.132, 48.471),
    "rom_read_kBps": (44.100, 48.337),
    "page_erase_kBps": (17.657,),
    "chip_erase_kBps": (31.232,),
}
PUBLISHED_2017 = {"ram_write_kBps": (44.281,), "ram_read_kBps": (43.230,)}


def measure(preset: str) -> dict:
    os.environ.setdefault("PIFLASH_SIM_DIR", tempfile.mkdtemp(prefix="calibrate-"))
    from pyocd.core.helpers import ConnectHelper

    from piflash.sim import SimStore
    from piflash.sim.probes import usb as sim_usb
    store = SimStore()
    store.create("cal", "nrf51", exist_ok=True)
    os.environ[sim_usb.ENV_VAR] = "cal@%s" % preset
    device = sim_usb.install(store=store).devices[0]
    clock = device.clock
    rng = random.Random(51)
    out = {}
    session = ConnectHelper.session_with_chosen_probe(unique_id=device.serial, blocking=False,
                                                      target_override="nrf51",
                                                      options={"frequency": 1_000_000})
    with session:
        target = session.board.target

        def timed(fn) -> float:
            t0 = clock.snapshot()["now_s"]
            fn()
            return clock.snapshot()["now_s"] - t0

        ram = target.memory_map.get_default_region_of_type(__import__("pyocd.core.memory_map", fromlist=["MemoryType"]).MemoryType.RAM)
        words = [rng.getrandbits(32) for _ in range(ram.length // 4)]
        out["ram_write_kBps"] = ram.length / timed(lambda: (target.write_memory_block32(ram.start, words), target.flush())) / 1000
        out["ram_read_kBps"] = ram.length / timed(lambda: target.read_memory_block32(ram.start, ram.length // 4)) / 1000
        rom = target.memory_map.get_boot_memory()
        out["rom_read_kBps"] = rom.length / timed(lambda: target.read_memory_block32(rom.start, rom.length // 4)) / 1000
        data = list(rng.randbytes(rom.length))
        flash = rom.flash
        out["page_erase_kBps"] = len(data) / timed(lambda: flash.flash_block(rom.start, data, False, "sector")) / 1000
        data = list(rng.randbytes(rom.length))
        out["chip_erase_kBps"] = len(data) / timed(lambda: flash.flash_block(rom.start, data, False, "chip")) / 1000
    sim_usb.uninstall()
    return out


#: rgrr/yapicoprobe doc/benchmarks.adoc, row git-28fd8db: ``pyocd flash`` over DAPv2, seconds.
PUBLISHED_RP2040 = {"rp2040_pyocd_dapv2_s": 13.9}
RP2040_IMAGE = 400 * 1024


def measure_rp2040(preset: str, host_name: str = "x86") -> float:
    """Predicted seconds of ``time pyocd flash -f 25000000 -t rp2040`` of :data:`RP2040_IMAGE`
    random bytes onto a blank board behind ``preset``: the virtual clock of connect, program and
    reset, plus the host preset's process start-up and file load."""
    os.environ.setdefault("PIFLASH_SIM_DIR", tempfile.mkdtemp(prefix="calibrate-"))
    from pyocd.core.helpers import ConnectHelper
    from pyocd.flash.file_programmer import FileProgrammer

    from piflash.sim import SimStore
    from piflash.sim.probes import usb as sim_usb
    from piflash.sim.probes.usb.timing import get_host

    host = get_host(host_name)
    store = SimStore()
    board = "cal-rp2040-%s" % preset
    store.create(board, "rp2040", exist_ok=True)
    sim_usb.uninstall()
    os.environ[sim_usb.ENV_VAR] = "%s@%s" % (board, preset)
    device = sim_usb.install(store=store).devices[0]
    device.host_transfer_s = host.transfer_s["pyocd"]
    image = os.path.join(tempfile.mkdtemp(prefix="calibrate-img-"), "firmware.bin")
    with open(image, "wb") as f:
        f.write(random.Random("rp2040").randbytes(RP2040_IMAGE))
    t0 = device.clock.snapshot()["now_s"]
    session = ConnectHelper.session_with_chosen_probe(unique_id=device.serial, blocking=False,
                                                      target_override="rp2040",
                                                      options={"frequency": 25_000_000})
    with session:
        FileProgrammer(session, progress=lambda _p: None).program(image, base_address=0x10000000)
        session.board.target.reset()
    seconds = device.clock.snapshot()["now_s"] - t0
    sim_usb.uninstall()
    return seconds + host.startup_s + host.parse_s("pyocd", "bin", RP2040_IMAGE) + host.sleep_s["pyocd"]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--preset", default="daplink")
    args = parser.parse_args(argv)
    import logging
    logging.disable(logging.WARNING)
    got = measure(args.preset)
    rows = []
    for source, table in (("pyOCD#23", PUBLISHED), ("pyOCD#287", PUBLISHED_2017)):
        for key, published in table.items():
            mean = sum(published) / len(published)
            rows.append({"source": source, "figure": key, "published": list(published),
                         "predicted": round(got[key], 3), "ratio": round(got[key] / mean, 3)})
    v2 = measure_rp2040("yapicoprobe")
    rows.append({"source": "yapicoprobe", "figure": "rp2040_pyocd_dapv2_s",
                 "published": [PUBLISHED_RP2040["rp2040_pyocd_dapv2_s"]], "predicted": round(v2, 3),
                 "ratio": round(v2 / PUBLISHED_RP2040["rp2040_pyocd_dapv2_s"], 3)})
    rows.append({"source": "yapicoprobe", "figure": "rp2040_pyocd_dapv1_s", "published": [],
                 "predicted": round(measure_rp2040("yapicoprobe-v1"), 3), "ratio": None})
    if args.json:
        print(json.dumps({"preset": args.preset, "rows": rows}, indent=1))
        return 0
    for r in rows:
        ratio = "ratio %.2f" % r["ratio"] if r["ratio"] is not None else "(no published figure)"
        print("%-11s %-20s published %-18s predicted %8.3f  %s"
              % (r["source"], r["figure"], r["published"], r["predicted"], ratio))
    return 0


if __name__ == "__main__":
    sys.exit(main())
