"""SWD over the Pi's SPI pins (issue 43): predicted flash times on a host preset, against the floor.

Runs piflash's own flash (``piflash.jobs.workflow.flash_firmware``, the CLI's path) through the
``spidev:0.0`` probe onto a simulated board behind a simulated spidev (``PIFLASH_SIM_PINS``,
``piflash/sim/probes/pins``) and reads the device's virtual clock: every SPI message is charged
the host's CPU (the x86 figures below times the host preset's factor, ``--host``, ``--host-factor``),
the kernel's fixed cost per message and the SPI clock's bits; the chip's erase and program time
come from the same timing model as the USB probes (``TARGET_TIMING``). The result is a
prediction, labelled with the host preset and its band end.

Floor (docs/benchmarks.md, ``benchmarks/real_probe.py``'s definition with no USB link):
``max(chip_s, swd_s)``, ``chip_s`` the datasheet's typical program time of the image on a blank
board, ``swd_s`` the image's words as 46-cycle SWD writes at the clock.

``--engine-cost`` measures on this machine the host CPU the figures come from: a flash of the
nRF52840 case with the simulated device's own CPU (inside its ioctl) taken out of the process's
CPU time, divided by the SWD packets sent; and the CPU of one empty periphery ``SPI.transfer``
round (python-periphery, ctypes, the seam's dispatch) per message.

Usage::

    python benchmarks/pins_probe.py --host zero2w [--host-factor mid] [--json]
    python benchmarks/pins_probe.py --engine-cost
    python benchmarks/pins_probe.py --gpio-cost
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

#: (target, bytes, goal ratio over the floor) of issue 43's goals, and the 256 KiB nRF52840 image
#: the Debug Probe rows were measured with (benchmarks/real_probe.py ``SIZES``).
CASES = [("nrf52840", 1024 * 1024, 1.5), ("nrf52840", 256 * 1024, 1.5), ("rp2040", 400 * 1024, 2.0)]
#: The Debug Probe rows' image sizes (benchmarks/real_probe.py ``SIZES``): only those compare.
DEBUG_PROBE_SIZES = {"nrf52840": 256 * 1024, "rp2040": 400 * 1024}
#: The Debug Probe rows of commit 41c98bc on the zero2w preset, mid band (issue 43): seconds.
DEBUG_PROBE_ROWS = {"nrf52840": 3.32, "rp2040": 5.11}
SWD_HZ = 8_000_000
PACKET_CYCLES = 46


def floor_parts(target: str, nbytes: int, swd_hz: float) -> dict:
    """``chip_s`` and ``swd_s`` of a blank board (see the module), seconds."""
    from piflash.sim.probes.usb.timing import TARGET_TIMING

    timing = TARGET_TIMING[target]
    chip = nbytes / timing.program_unit * timing.program_s
    swd = -(-nbytes // 4) * PACKET_CYCLES / swd_hz
    return {"chip_s": chip, "swd_s": swd, "reset_s": timing.reset_s}


def _setup(target: str, nbytes: int, host: str, factor: str):
    os.environ["PIFLASH_SIM_DIR"] = tempfile.mkdtemp(prefix="pins-bench-")
    os.environ["PIFLASH_SIM_PINS"] = "bench@spidev:0.0"
    from piflash.sim import SimStore
    from piflash.sim.probes import pins as sim_pins
    from piflash.sim.probes.usb.timing import get_host

    store = SimStore()
    store.create("bench", target)
    backend = sim_pins.install("bench@spidev:0.0", store)
    device = backend.devices["spidev0.0"]
    device.host = get_host(host, factor)
    from piflash.probe import pinprobe

    pinprobe.pins_backend = lambda: backend  # this process's backend, whatever the installed entry points
    rng = random.Random(43)
    image = Path(os.environ["PIFLASH_SIM_DIR"]) / ("image-%s.bin" % target)
    image.write_bytes(bytes(rng.getrandbits(8) for _ in range(nbytes)))
    return device, image


def run_case(target: str, nbytes: int, host: str, factor: str) -> dict:
    """One fresh-board flash; returns the row (seconds, counts)."""
    from piflash.firmware.image import load_image
    from piflash.jobs.options import FlashOptions
    from piflash.jobs.workflow import flash_firmware
    from piflash.sim.probes.pins import uninstall
    from piflash.sim.specs import TARGETS

    device, image = _setup(target, nbytes, host, factor)
    try:
        loaded = load_image(str(image), base_address=TARGETS[target].flash.start)
        result = flash_firmware(loaded, probe="spidev:0.0", target=target, job=FlashOptions(frequency=SWD_HZ))
        clock = device.clock.snapshot()
    finally:
        uninstall()
    parts = floor_parts(target, nbytes, SWD_HZ)
    floor = max(parts["chip_s"], parts["swd_s"]) + parts["reset_s"]
    predicted = clock["now_s"]
    return {
        "target": target,
        "bytes": nbytes,
        "case": "fresh",
        "swd_hz": SWD_HZ,
        "host": host,
        "host_factor": factor,
        "predicted_s": round(predicted, 3),
        "floor_s": round(floor, 3),
        "over_floor": round(predicted / floor, 3),
        "debug_probe_s": DEBUG_PROBE_ROWS.get(target) if DEBUG_PROBE_SIZES.get(target) == nbytes else None,
        "spi_messages": clock["requests"].get("spi_messages", 0),
        "spi_bytes": clock["requests"].get("spi_bytes", 0),
        "swd_transfers": clock["requests"].get("swd_transfers", 0),
        "busy": {k: round(v, 3) for k, v in clock["busy"].items()},
        "ok": result.ok if hasattr(result, "ok") else True,
    }


def engine_cost() -> dict:
    """Host CPU of the product side on this machine (see the module): seconds per SWD packet
    and per empty SPI message."""
    from piflash.sim.probes.pins import spidev as sim_spidev

    inside = [0.0]
    original = sim_spidev.SimSpidev.ioctl

    def timed(self, request, arg, mutate=True):
        t0 = time.process_time()
        try:
            return original(self, request, arg, mutate)
        finally:
            inside[0] += time.process_time() - t0

    sim_spidev.SimSpidev.ioctl = timed  # type: ignore[method-assign]
    try:
        target, nbytes = "nrf52840", 256 * 1024
        device, image = _setup(target, nbytes, "x86", "mid")
        from piflash.firmware.image import load_image
        from piflash.jobs.options import FlashOptions
        from piflash.jobs.workflow import flash_firmware
        from piflash.sim.specs import TARGETS

        loaded = load_image(str(image), base_address=TARGETS[target].flash.start)
        t0 = time.process_time()
        flash_firmware(loaded, probe="spidev:0.0", target=target, job=FlashOptions(frequency=SWD_HZ))
        total = time.process_time() - t0
        sim = inside[0]
        packets = device.clock.requests.get("spi_bytes", 0) * 8 // PACKET_CYCLES
        messages = device.clock.requests.get("spi_messages", 0)
        # One empty message: periphery's transfer of one byte through the seam, minus the device.
        from periphery import SPI

        from piflash.sim.probes.pins import active_backend

        path = os.path.join(active_backend().dev_root, "spidev0.0")
        spi = SPI(path, 0, SWD_HZ)
        inside[0] = 0.0
        n = 2000
        t1 = time.process_time()
        for _ in range(n):
            spi.transfer(b"\0")
        empty = (time.process_time() - t1 - inside[0]) / n
        spi.close()
    finally:
        sim_spidev.SimSpidev.ioctl = original  # type: ignore[method-assign]
        from piflash.sim.probes.pins import uninstall

        uninstall()
    host = total - sim
    # The engine alone per packet: block writes of full messages against a stand-in transfer that
    # answers OK to every packet (no device, no kernel).
    from piflash.probe.spiswd import PACKET_CYCLES as CYC
    from piflash.probe.spiswd import REVERSE, TRAILING_IDLE, SpiSwd

    per = SpiSwd(lambda b: b).per_message
    ok = sum(1 << (i * CYC + 9) for i in range(per))
    answer = ok.to_bytes((per * CYC + TRAILING_IDLE + 7) // 8, "little").translate(REVERSE)
    engine = SpiSwd(lambda b: answer)
    words = list(range(per))
    rounds = 200
    t2 = time.process_time()
    for _ in range(rounds):
        engine.write_many(0xC, words)
        engine.flush()
    per_packet = (time.process_time() - t2) / (rounds * per)
    per_message = (host - per_packet * packets) / messages if messages else None
    return {
        "host_cpu_s": round(host, 3),
        "sim_cpu_s": round(sim, 3),
        "packets": packets,
        "messages": messages,
        "host_s_per_packet": host / packets if packets else None,
        "empty_message_s": empty,
        "engine_s_per_packet": per_packet,
        "host_s_per_message_rest": per_message,
    }


def gpio_cost(reads: int = 300) -> dict:
    """Host CPU per SWD bit of the ``gpio:`` probe on this machine, outside the simulated chip:
    ``reads`` DPIDR reads (46 cycles each) bit-banged through python-periphery; and what that
    predicts on each host preset (its factor, plus the kernel's assumed time per ioctl)."""
    from piflash.sim.probes.pins import gpiochip

    inside = [0.0]

    def timed(original):
        def wrapper(self, request, arg, mutate=True):
            t0 = time.process_time()
            try:
                return original(self, request, arg, mutate)
            finally:
                inside[0] += time.process_time() - t0

        return wrapper

    saved = (gpiochip._LineHandle.ioctl, gpiochip.SimGpioChip.ioctl)
    gpiochip._LineHandle.ioctl = timed(saved[0])  # type: ignore[method-assign]
    gpiochip.SimGpioChip.ioctl = timed(saved[1])  # type: ignore[method-assign]
    probe_id = "gpio:gpiochip0:swclk=5,swdio=6"
    os.environ["PIFLASH_SIM_DIR"] = tempfile.mkdtemp(prefix="pins-gpio-")
    from piflash.probe import pinprobe
    from piflash.sim import SimStore
    from piflash.sim.probes import pins as sim_pins

    store = SimStore()
    store.create("g", "nrf52840")
    backend = sim_pins.install("g@" + probe_id, store)
    pinprobe.pins_backend = lambda: backend
    wire = backend.devices[probe_id]
    probe = pinprobe.probe_class("gpio").get_probe_with_id(probe_id)
    probe.open()
    try:
        engine = probe.engine
        engine.line_reset()
        engine.read(False, 0)
        inside[0] = 0.0
        cycles0, ioctls0 = wire.cycles, engine.ioctls
        t0 = time.process_time()
        for _ in range(reads):
            engine.read(False, 0)
        total = time.process_time() - t0
        cycles, ioctls = wire.cycles - cycles0, engine.ioctls - ioctls0
    finally:
        probe.close()
        sim_pins.uninstall()
        gpiochip._LineHandle.ioctl, gpiochip.SimGpioChip.ioctl = saved  # type: ignore[method-assign]
    per_bit = (total - inside[0]) / cycles
    per_ioctl = (total - inside[0]) / ioctls
    from piflash.sim.probes.usb.timing import HOST_FACTORS, get_host

    predictions = {}
    for host in ("zero2w", "pi4", "pi5"):
        for end in HOST_FACTORS:
            factor = get_host(host, end).factor
            bit_s = per_bit * factor + ioctls / cycles * gpiochip.GPIO_IOCTL_KERNEL_S
            predictions["%s %s" % (host, end)] = {"s_per_bit": bit_s, "swclk_hz": 1 / bit_s}
    return {
        "cycles": cycles,
        "ioctls_per_bit": round(ioctls / cycles, 3),
        "x86_cpu_s_per_bit": per_bit,
        "x86_cpu_s_per_ioctl": per_ioctl,
        "x86_swclk_hz": 1 / per_bit,
        "predicted": predictions,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="zero2w", help="host preset (x86, zero2w, pi4, pi5)")
    parser.add_argument("--host-factor", default="mid", choices=("low", "mid", "high"))
    parser.add_argument("--targets", default=",".join(t for t, _, _ in CASES))
    parser.add_argument("--engine-cost", action="store_true", help="measure the host CPU figures on this machine")
    parser.add_argument("--gpio-cost", action="store_true", help="CPU per SWD bit of the gpio: probe, and predictions")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.gpio_cost:
        print(json.dumps(gpio_cost(), indent=2))
        return 0
    if args.engine_cost:
        out = engine_cost()
        print(json.dumps(out, indent=2))
        return 0
    rows = []
    wanted = set(args.targets.split(","))
    for target, nbytes, goal in CASES:
        if target not in wanted:
            continue
        row = run_case(target, nbytes, args.host, args.host_factor)
        row["goal_over_floor"] = goal
        row["meets"] = row["over_floor"] <= goal and row["predicted_s"] < (row["debug_probe_s"] or float("inf"))
        rows.append(row)
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print("prediction on host preset %s (%s band), spidev at %.0f MHz, fresh board" % (
            args.host, args.host_factor, SWD_HZ / 1e6))
        print("%-9s %9s %11s %8s %7s %7s %10s %9s" % ("target", "bytes", "predicted", "floor", "ratio", "goal",
                                                     "DebugProbe", "messages"))
        for r in rows:
            print("%-9s %9d %10.3fs %7.3fs %7.2f %7.1f %9.2fs %9d" % (
                r["target"], r["bytes"], r["predicted_s"], r["floor_s"], r["over_floor"], r["goal_over_floor"],
                r["debug_probe_s"] or float("nan"), r["spi_messages"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
