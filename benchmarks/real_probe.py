"""Predicted time on real hardware: piflash vs pyOCD through simulated USB CMSIS-DAP probes.

For each probe preset (piflash.sim.probes.usb.presets) and target, a fresh blank board and a re-flash of
the same image, run in-process through pyOCD's own USB CMSIS-DAP driver on the virtual clock:

* ``piflash_s`` -- ``piflash.jobs.workflow.flash_firmware`` (erase auto, program, read-back verify, reset);
* ``pyocd_s`` -- what ``pyocd flash`` does: connect, ``FileProgrammer.program``, reset (no verify);
* ``floor_s`` -- max(datasheet erase + write time of what must change, time for the bytes that
  must cross the link at its best packet rate) + the connect and reset time of the piflash run;
* ``floor_framed_s`` -- the same floor with the link carrying only what a ``DAP_TransferBlock``
  packet can: the packet minus its 5-byte header (command, DAP index, 2-byte count, request;
  CMSIS-DAP DAP_TransferBlock), rounded down to whole words (56 of 64 bytes; 504 of 512). No
  CMSIS-DAP tool can beat it; ``floor_s`` is the issue's definition, kept as the goal;
* ``phases`` -- ``{"piflash": {phase: seconds}, "pyocd": {phase: seconds}}`` (piflash's phases
  connect/erase/program/verify/reset; pyOCD's connect/program/reset/disconnect);
* ``requests`` -- ``{"piflash": {...}, "pyocd": {...}}``: counts of USB transfers and bytes, each
  DAP command, SWD transfers, WAIT acks, DHCSR polls that found the algorithm still running,
  flash page erases and program operations.
* ``phase_requests`` -- the same counts per phase (``{"piflash": {phase: {...}}, "pyocd": ...}``).

* ``host`` -- the host preset (``--host``, default ``x86``; ``zero2w``, ``pi4``, ``pi5``:
  ``piflash.sim.probes.usb.timing.HOST_PRESETS``): each tool's CPU time per USB transfer is
  charged on the virtual clock, and its fixed host costs are added as phases: ``load`` (parsing
  the firmware file, both tools; piflash's re-flash reads it back from its parsed-image cache,
  ``piflash/firmware/cache.py``) and pyOCD's sleeps during reset (``time.sleep`` in
  ``cortex_m._perform_reset``, both tools; wall time, the same on every host);
* ``goals`` -- issue 20's ratios: fresh board ``piflash_s / floor_s`` and ``piflash_s /
  pyocd_s``; re-flash ``piflash_s`` over connect + check + reset (the fresh run's connect,
  verify and reset phases), each also without the ``load`` phase (``*_noload``), and for a
  fresh board flashed with a file piflash loaded before (a batch of boards, one command each:
  the ``load`` phase read back from the cache, ``load_cached_s``; ``*_cached``).

All figures are predictions of the timing model (piflash/sim/probes/usb/timing.py), not measurements;
they do not depend on this machine's speed. Images: Debian's MicroPython hex for nrf51, a
256 KiB image for nrf52840, 64 KiB for stm32f103rc, 400 KiB for rp2040 (the size of issue 21's
published RP2040 figures; pseudo-random bytes, fixed seed).

* ``swd_hz`` -- the SWD clock piflash asked for (``--frequency``), or ``"default"`` (4 MHz),
  capped at the probe preset's fastest; pyOCD always runs at its own default (1 MHz), as
  ``pyocd flash`` without ``-f`` does.

piflash sends several DAP packets per USB transfer to probes whose firmware frames commands by
packet (the Debug Probe; ``piflash/probe/batched_dap.py``); ``PIFLASH_DAP_BATCH=0`` in the
environment gives one packet per transfer, as pyOCD sends them.

    python benchmarks/real_probe.py [--json] [--host zero2w] [--presets debugprobe,daplink] [--targets nrf52840]
                                    [--frequency 10000000]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
from pathlib import Path
from typing import Optional

MICROPYTHON_HEX = Path("/usr/share/firmware-microbit-micropython/firmware.hex")
SIZES = {"nrf52840": 256 * 1024, "stm32f103rc": 64 * 1024, "rp2040": 400 * 1024, "rp2350": 1024 * 1024}


def make_image(target: str, workdir: Path) -> Path:
    """The image for ``target``: MicroPython for nrf51, else seeded random bytes (a .bin)."""
    if target == "nrf51":
        if not MICROPYTHON_HEX.exists():
            raise SystemExit(f"{MICROPYTHON_HEX} is missing: the nrf51 rows flash Debian's MicroPython for the "
                             "micro:bit; install it with: sudo apt-get install firmware-microbit-micropython "
                             "(or leave nrf51 out: --targets nrf52840,stm32f103rc)")
        return MICROPYTHON_HEX
    path = workdir / ("%s.bin" % target)
    path.write_bytes(random.Random(target).randbytes(SIZES[target]))
    return path


class _PhaseSink:
    """A piflash ProgressSink that books virtual time to piflash's phases."""

    def __init__(self, clock) -> None:
        self.clock = clock

    def phase_start(self, phase: str, total: int) -> None:
        self.clock.set_phase(phase)

    def phase_update(self, phase: str, done: int) -> None:
        pass

    def phase_end(self, phase: str, summary: str = "") -> None:
        pass

    def message(self, text: str) -> None:
        pass


def run_piflash(device, target: str, image: Path, frequency: Optional[int] = None) -> dict:
    from piflash.firmware.image import load_image
    from piflash.jobs.workflow import FlashOptions, flash_firmware
    from piflash.sim.specs import TARGETS
    base = TARGETS[target].flash.start if image.suffix == ".bin" else None
    clock = device.clock
    start = clock.snapshot()
    clock.set_phase("connect")
    flash_firmware(load_image(str(image), base_address=base), probe=device.serial, target=target,
                   job=FlashOptions(frequency=frequency), progress=_PhaseSink(clock))
    return _delta(start, clock.snapshot())


def run_pyocd(device, target: str, image: Path) -> dict:
    from pyocd.core.helpers import ConnectHelper
    from pyocd.flash.file_programmer import FileProgrammer

    from piflash.sim.specs import TARGETS
    clock = device.clock
    start = clock.snapshot()
    clock.set_phase("connect")
    session = ConnectHelper.session_with_chosen_probe(unique_id=device.serial, blocking=False,
                                                      target_override=target)
    with session:
        clock.set_phase("program")
        base = TARGETS[target].flash.start if image.suffix == ".bin" else None
        FileProgrammer(session, progress=lambda _fraction: None).program(str(image), base_address=base)
        clock.set_phase("reset")
        session.board.target.reset()
        clock.set_phase("disconnect")
    return _delta(start, clock.snapshot())


def _counts(after: dict, before: dict) -> dict:
    return {k: v - before.get(k, 0) for k, v in after.items() if v - before.get(k, 0)}


def _delta(a: dict, b: dict) -> dict:
    phases = {getattr(k, "value", k): v - a["phases"].get(k, 0.0) for k, v in b["phases"].items()}
    by_phase = {getattr(k, "value", k): _counts(v, a["phase_requests"].get(k, {}))
                for k, v in b["phase_requests"].items()}
    return {"seconds": b["now_s"] - a["now_s"],
            "phases": {k: round(v, 6) for k, v in phases.items() if v > 0},
            "requests": _counts(b["requests"], a["requests"]),
            "phase_requests": {k: v for k, v in by_phase.items() if v}}


#: DAP_TransferBlock request header, bytes: command, DAP index, 2-byte transfer count, transfer
#: request (CMSIS-DAP command reference, DAP_TransferBlock).
TRANSFER_BLOCK_HEADER = 5


def floor_seconds(preset, target: str, image: Path, case: str, piflash: dict,
                  framed: bool = False) -> float:
    """The physics floor: see the module docstring (``framed``: ``floor_framed_s``)."""
    from piflash.firmware.image import load_image
    from piflash.sim.probes.usb.timing import TARGET_TIMING, Link
    from piflash.sim.specs import TARGETS
    fixed = sum(piflash["phases"].get(p, 0.0) for p in ("connect", "reset"))
    if case == "reflash":
        return fixed                # nothing must change and nothing must cross
    spec, timing = TARGETS[target], TARGET_TIMING[target]
    base = spec.flash.start if image.suffix == ".bin" else None
    img = load_image(str(image), base_address=base)
    nbytes = img.size
    chip = nbytes / timing.program_unit * timing.program_s      # blank board: nothing to erase
    if case == "changed":       # every sector the image covers must be erased, by its best unit
        sectors = -(-nbytes // spec.flash.page_size)
        blocks64 = nbytes // 0x10000 if "erase_block64" in timing.block_erase_s else 0
        rest = sectors - blocks64 * (0x10000 // spec.flash.page_size)
        chip += blocks64 * timing.op_time("erase_block64", 0x10000) + rest * timing.erase_page_s
    link = nbytes / Link(preset).best_rate(preset.packet_size)
    if framed:
        payload = (preset.packet_size - TRANSFER_BLOCK_HEADER) // 4 * 4
        link *= preset.packet_size / payload
    return max(chip, link) + fixed


def add_host_costs(result: dict, host, tool: str, image: Path, case: str = "fresh") -> dict:
    """Add ``host``'s fixed costs for ``tool`` to a run's ``result`` (from :func:`_delta`): the
    ``load`` phase (loading ``image``) and pyOCD's reset sleeps (into ``reset``). A fresh board
    is flashed with a file this host never loaded (parsed); a re-flash with the file the fresh
    run loaded, which piflash reads back from its parsed-image cache (pyOCD parses it again)."""
    fmt = "hex" if image.suffix == ".hex" else "bin"
    load = host.parse_s(tool, fmt, image.stat().st_size, cached=case in ("reflash", "changed"))
    sleep = host.sleep_s[tool]
    phases = dict(result["phases"])
    phases["load"] = round(load, 6)
    phases["reset"] = round(phases.get("reset", 0.0) + sleep, 6)
    return dict(result, seconds=result["seconds"] + load + sleep, phases=phases,
                load_cached_s=round(host.parse_s(tool, fmt, image.stat().st_size, cached=True), 6))


def goals(row: dict, fresh: dict) -> dict:
    """Issue 20's ratios for ``row`` (``fresh``: the same probe and target's fresh row)."""
    pf, load = row["piflash_s"], row["phases"]["piflash"].get("load", 0.0)
    if row["case"] in ("fresh", "changed"):
        po_load = row["phases"]["pyocd"].get("load", 0.0)
        cached = pf - load + row["load_cached_s"]          # the file loaded before (a batch)
        return {"piflash_over_floor": round(pf / row["floor_s"], 3),
                "piflash_over_pyocd": round(pf / row["pyocd_s"], 3),
                "piflash_over_floor_cached": round(cached / row["floor_s"], 3),
                "piflash_over_pyocd_cached": round(cached / row["pyocd_s"], 3),
                "piflash_over_floor_noload": round((pf - load) / row["floor_s"], 3),
                "piflash_over_pyocd_noload": round((pf - load) / (row["pyocd_s"] - po_load), 3)}
    ph = fresh["phases"]["piflash"]
    ref = sum(ph.get(p, 0.0) for p in ("connect", "verify", "reset"))
    return {"reference_s": round(ref, 4), "piflash_over_reference": round(pf / ref, 3),
            "piflash_over_reference_noload": round((pf - load) / ref, 3)}


#: What each case starts from: a blank board (``fresh``), the fresh run's result (``reflash``), or
#: a board holding other firmware over the whole image (``changed``: the image's own bytes,
#: inverted, so every sector must be erased and every page programmed).
CASES = ("fresh", "reflash", "changed")


def _prepare(store, board: str, target: str, image: Path, case: str) -> None:
    """Put ``board`` in the state ``case`` starts from (:data:`CASES`)."""
    if case != "changed":
        return
    from piflash.firmware.image import load_image
    from piflash.sim.specs import TARGETS
    spec = TARGETS[target]
    img = load_image(str(image), base_address=spec.flash.start if image.suffix == ".bin" else None)
    for seg in img.segments:
        if spec.flash.contains(seg.address):
            store.write_flash(board, bytes(b ^ 0xFF for b in seg.data), offset=seg.address - spec.flash.start)


def bench(presets, targets, host_name: str = "x86", cases=("fresh", "reflash"),
          frequency: Optional[int] = None) -> list:
    os.environ.setdefault("PIFLASH_SIM_DIR", tempfile.mkdtemp(prefix="real_probe-"))
    from piflash.sim import SimStore
    from piflash.sim.probes import usb as sim_usb
    from piflash.sim.probes.usb.presets import get_preset
    from piflash.sim.probes.usb.timing import get_host
    host = get_host(host_name)
    work = Path(tempfile.mkdtemp(prefix="real_probe-img-"))
    rows = []
    for preset_name in presets:
        preset = get_preset(preset_name)
        for target in targets:
            image = make_image(target, work)
            results = {}
            for tool in ("piflash", "pyocd"):
                board = "%s-%s-%s" % (tool, preset_name, target)
                store = SimStore()
                store.create(board, target, exist_ok=True)
                sim_usb.uninstall()
                os.environ[sim_usb.ENV_VAR] = "%s@%s" % (board, preset_name)
                device = sim_usb.install(store=store).devices[0]
                device.host_transfer_s = host.transfer_s[tool]
                results[tool] = {}
                for case in ("fresh", "reflash") + tuple(c for c in cases if c == "changed"):
                    _prepare(store, board, target, image, case)
                    run = run_piflash(device, target, image, frequency) if tool == "piflash" \
                        else run_pyocd(device, target, image)
                    results[tool][case] = add_host_costs(run, host, tool, image, case)
            fresh_row = None
            for case in cases:
                pf, po = results["piflash"][case], results["pyocd"][case]
                rows.append({"probe": preset_name, "link": preset.link, "target": target, "case": case,
                             "host": host.name, "swd_hz": frequency or "default",
                             "piflash_s": round(pf["seconds"], 3), "pyocd_s": round(po["seconds"], 3),
                             "load_cached_s": pf["load_cached_s"],
                             "floor_s": round(floor_seconds(preset, target, image, case, pf), 3),
                             "floor_framed_s": round(floor_seconds(preset, target, image, case, pf,
                                                                   framed=True), 3),
                             "phases": {"piflash": pf["phases"], "pyocd": po["phases"]},
                             "requests": {"piflash": pf["requests"], "pyocd": po["requests"]},
                             "phase_requests": {"piflash": pf["phase_requests"],
                                                "pyocd": po["phase_requests"]}})
                fresh_row = fresh_row or rows[-1]
                rows[-1]["goals"] = goals(rows[-1], fresh_row)
    sim_usb.uninstall()
    return rows


def preset_target_args(description: str, argv=None) -> argparse.Namespace:
    """Parse the options of a script run over every probe preset and target: ``--json``,
    ``--presets`` and ``--targets`` (comma-separated); also silences pyOCD's warnings."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--json", action="store_true", help="print {\"rows\": [...]} as JSON")
    parser.add_argument("--presets", default="debugprobe,daplink,mculink")
    parser.add_argument("--targets", default="nrf51,nrf52840,stm32f103rc")
    parser.add_argument("--cases", default="fresh,reflash",
                        help="fresh, reflash, changed (a board holding other firmware)")
    parser.add_argument("--host", default="x86",
                        help="host preset: x86 (measured), zero2w, pi4, pi5 (predicted)")
    parser.add_argument("--frequency", type=int, default=None,
                        help="SWD clock (Hz) piflash asks for (pyOCD keeps its default); default: 4 MHz")
    args = parser.parse_args(argv)
    import logging
    logging.disable(logging.WARNING)
    return args


def usb_device(board: str, target: str, preset: str, host, tool: str = "piflash"):
    """A fresh simulated board ``board`` behind a simulated USB probe of ``preset`` (the only one
    installed), charging ``host``'s CPU per transfer for ``tool``; returns the device (its
    ``serial`` is the probe's unique ID, its ``clock`` the virtual clock). The caller uninstalls."""
    from piflash.sim import SimStore
    from piflash.sim.probes import usb as sim_usb

    store = SimStore()
    store.create(board, target, exist_ok=True)
    sim_usb.uninstall()
    os.environ[sim_usb.ENV_VAR] = f"{board}@{preset}"
    device = sim_usb.install(store=store).devices[0]
    device.host_transfer_s = host.transfer_s[tool]
    return device


def bench_rows(description: str, bench_fn, argv=None):
    """Run ``bench_fn(presets, targets, host)`` with the options of :func:`preset_target_args`;
    print its rows as JSON and return None under ``--json``, else return the rows (a list)
    for the script to print as a table."""
    args = preset_target_args(description, argv)
    if bench_fn is bench:
        rows = bench_fn(args.presets.split(","), args.targets.split(","), args.host, tuple(args.cases.split(",")),
                        args.frequency)
    else:
        rows = bench_fn(args.presets.split(","), args.targets.split(","), args.host)
    if args.json:
        print(json.dumps({"rows": rows}, indent=1))
        return None
    return rows


def main(argv=None) -> int:
    rows = bench_rows(__doc__.splitlines()[0], bench, argv)
    if rows is None:
        return 0
    print("host preset: %s" % rows[0]["host"] if rows else "")
    print("%-10s %-10s %-11s %-7s %9s %9s %8s  %s" % ("probe", "link", "target", "case", "piflash_s",
                                                      "pyocd_s", "floor_s", "goals"))
    for r in rows:
        print("%-10s %-10s %-11s %-7s %9.2f %9.2f %8.2f  %s" % (
            r["probe"], r["link"], r["target"], r["case"], r["piflash_s"], r["pyocd_s"], r["floor_s"],
            " ".join("%s=%s" % kv for kv in r["goals"].items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
