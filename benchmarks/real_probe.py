"""Predicted time on real hardware: piflash vs pyOCD through simulated USB CMSIS-DAP probes.

For each probe preset (piflash.sim.probes.usb.presets) and target, a fresh blank board and a re-flash of
the same image, run in-process through pyOCD's own USB CMSIS-DAP driver on the virtual clock:

* ``piflash_s`` -- ``piflash.jobs.workflow.flash_firmware`` (erase auto, program, read-back verify, reset);
* ``pyocd_s`` -- what ``pyocd flash -f HZ`` does at piflash's SWD clock: connect, ``FileProgrammer.program``,
  reset (no verify). The clock is the one piflash's run asked the probe for (its last
  ``DAP_SWJ_Clock``, as the simulated probe firmware saw it: ``swd_hz_requested``), given to pyOCD
  through its public session option ``frequency``;
  None when pyOCD failed at that clock (``pyocd_error`` says how: in the simulator, pyOCD's reads
  of the RP2350's flash at 24 MHz and more end in WAIT acks its retries do not outlast);
* ``pyocd_default_s`` -- the same at pyOCD's own default clock (``pyocd flash`` without ``-f``:
  1 MHz; ``pyocd_default_hz`` is what that run asked the probe for);
* ``floor_s`` -- the physics floor, from the chip, the link and the clock alone (never from
  piflash's own run; ``floor_parts`` gives each term, seconds):

      floor = max(chip_s, usb_s, swd_s) + connect_s + reset_s

  - ``chip_s``: the datasheet's typical erase + program time of what must change
    (``piflash.sim.probes.usb.timing.TARGET_TIMING``): a blank board programs every write unit of
    the image; a ``changed`` board also erases every sector the image covers, by its best unit;
  - ``usb_s``: the image's bytes on the link at its best packet rate (``Link.best_rate``: one
    report per 1 ms frame on HID, back-to-back packets on bulk);
  - ``swd_s``: the image's bytes as 32-bit SWD writes at the clock piflash asked for, as the
    probe runs it (``ProbePreset.swclk_hz``): ``swd_transfer_bits(0)`` = 46 SWCLK cycles per word
    (ADIv5.2 B4.2: request, turnaround, ack, turnaround, data, parity; no idle cycles);
  - ``connect_s``: 3 link round trips (a DAP request and its response, nothing else: no host
    CPU, no probe firmware time), each waiting for the answer the next request depends on
    (ADIv5.2): (1) line reset and DPIDR read (the DP answers and names its version), (2) the
    CTRL/STAT power-up request (CSYSPWRUPREQ, CDBGPWRUPREQ) and its acknowledge, which must be
    seen before any AP access, (3) AP SELECT and IDR read (the MEM-AP the flash is reached
    through);
  - ``reset_s``: 1 link round trip (the AIRCR.SYSRESETREQ write) plus the reset the chip needs
    by its datasheet (``TargetTiming.reset_s``, with its source; not pyOCD's fixed 0.1 s
    ``reset.post_delay`` sleep).

  A re-flash has nothing to change and nothing to move: its floor is ``connect_s + reset_s``;
* ``floor_framed_s`` -- the same floor with the link carrying only what a ``DAP_TransferBlock``
  packet can: the packet minus its 5-byte header (command, DAP index, 2-byte count, request;
  CMSIS-DAP DAP_TransferBlock), rounded down to whole words (56 of 64 bytes; 504 of 512). No
  CMSIS-DAP tool can beat it; ``floor_s`` is the issue's definition, kept as the goal;
* ``phases`` -- ``{"piflash": {phase: seconds}, "pyocd": {...}, "pyocd_default": {...}}`` (piflash's
  phases connect/erase/program/verify/reset; pyOCD's connect/program/reset/disconnect);
* ``requests`` -- the same keys: counts of USB transfers and bytes, each DAP command, SWD
  transfers, WAIT acks, DHCSR polls that found the algorithm still running, flash page erases
  and program operations.
* ``phase_requests`` -- the same counts per phase (``{"piflash": {phase: {...}}, "pyocd": ...}``).

* ``host`` -- the host preset (``--host``, default ``x86``; ``zero2w``, ``pi4``, ``pi5``:
  ``piflash.sim.probes.usb.timing.HOST_PRESETS``) at one end of its factor band
  (``--host-factor low|mid|high``, default ``mid``; ``host_factor`` is the end's name,
  ``host_factor_value`` its factor, ``host_band`` the three): each tool's CPU time per DAP packet
  in each phase is charged on the virtual clock, and its fixed host costs are added as phases:
  ``load`` (parsing the firmware file, both tools; piflash's re-flash reads it back from its
  parsed-image cache, ``piflash/firmware/cache.py``) and what pyOCD slept during the run
  (``reset.post_delay`` and the like, counted: :class:`counted_sleeps`; wall time, the same on
  every host; piflash sets ``reset.post_delay`` to 0 for targets whose reset keeps the debug
  port, ``piflash/targets/families``);
* ``goals`` -- issue 20's ratios: fresh board ``piflash_s / floor_s`` and ``piflash_s /
  pyocd_s`` (equal SWD clock; ``piflash_over_pyocd_default``: against ``pyocd_default_s``);
  re-flash ``piflash_s`` over connect + check + reset (the fresh run's connect, verify and reset
  phases), each also without the ``load`` phase (``*_noload``), and for a fresh board flashed
  with a file piflash loaded before (a batch of boards, one command each: the ``load`` phase
  read back from the cache, ``load_cached_s``; ``*_cached``).

All figures are predictions of the timing model (piflash/sim/probes/usb/timing.py), not measurements;
they do not depend on this machine's speed. Images: Debian's MicroPython hex for nrf51, a
256 KiB image for nrf52840, 64 KiB for stm32f103rc, 400 KiB for rp2040 (the size of issue 21's
published RP2040 figures; pseudo-random bytes, fixed seed).

* ``swd_hz`` -- the SWD clock piflash was given (``--frequency``), or ``"default"`` (its own
  default); ``swd_hz_requested`` is what it then asked the probe for, Hz.

piflash encodes the DAP transfers itself (``piflash/probe/lean_dap.py``; ``PIFLASH_DAP_LEAN=0``
in the environment leaves them to pyOCD's encoding) and sends several DAP packets per USB transfer
to probes whose firmware frames commands by packet (the Debug Probe; ``PIFLASH_DAP_BATCH=0``
gives one packet per transfer, as pyOCD sends them).

    python benchmarks/real_probe.py [--json] [--host zero2w] [--host-factor low|mid|high]
                                    [--presets debugprobe,daplink] [--targets nrf52840]
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


#: The modules whose ``sleep`` (``from time import sleep``) pyOCD sleeps with during a flash:
#: ``cortex_m._perform_reset`` (``reset.post_delay``), ``CMSISDAPProbe.reset`` (``reset.hold_time``,
#: ``reset.post_delay``) and ``Timeout.check`` (pyocd/coresight/cortex_m.py,
#: pyocd/probe/cmsis_dap_probe.py, pyocd/utility/timeout.py).
SLEEPING_MODULES = ("pyocd.coresight.cortex_m", "pyocd.probe.cmsis_dap_probe", "pyocd.utility.timeout")


class counted_sleeps:
    """Within the ``with`` block, the seconds pyOCD asks ``sleep`` for (``total``), counted in
    :data:`SLEEPING_MODULES` (it still sleeps: wall time the virtual clock does not see, added to
    the run as the ``reset`` phase by :func:`add_host_costs`). piflash's own waits never sleep on
    a simulated probe (piflash/targets/families/base.py ``poll_until``)."""

    def __enter__(self) -> "counted_sleeps":
        import importlib
        self.total, self._saved = 0.0, []
        for name in SLEEPING_MODULES:
            module = importlib.import_module(name)
            real = module.sleep

            def sleep(seconds, _real=real):
                self.total += seconds
                _real(seconds)
            self._saved.append((module, real))
            module.sleep = sleep
        return self

    def __exit__(self, *exc) -> None:
        for module, real in self._saved:
            module.sleep = real


def run_piflash(device, target: str, image: Path, frequency: Optional[int] = None) -> dict:
    """piflash's flash (``flash_firmware``) of ``image`` on ``device``'s virtual clock; the result
    (:func:`_delta`) also has ``swj_clock_hz`` (the last DAP_SWJ_Clock) and ``sleep_s`` (what
    pyOCD slept, :class:`counted_sleeps`)."""
    from piflash.firmware.image import load_image
    from piflash.jobs.workflow import FlashOptions, flash_firmware
    from piflash.sim.specs import TARGETS
    base = TARGETS[target].flash.start if image.suffix == ".bin" else None
    clock = device.clock
    device.firmware.swj_clock_hz = None
    start = clock.snapshot()
    clock.set_phase("connect")
    with counted_sleeps() as slept:
        flash_firmware(load_image(str(image), base_address=base), probe=device.serial, target=target,
                       job=FlashOptions(frequency=frequency), progress=_PhaseSink(clock))
    return dict(_delta(start, clock.snapshot()), swj_clock_hz=device.firmware.swj_clock_hz,
                sleep_s=round(slept.total, 6))


def run_pyocd(device, target: str, image: Path, frequency: Optional[int] = None) -> dict:
    """What ``pyocd flash`` does, in-process on ``device``'s virtual clock; ``frequency``: the
    SWD clock (Hz) given through pyOCD's public session option ``frequency`` (``pyocd flash
    -f``), None for pyOCD's default. The result's ``swj_clock_hz`` is the clock the run asked
    the probe for (its last DAP_SWJ_Clock)."""
    from pyocd.core.helpers import ConnectHelper
    from pyocd.flash.file_programmer import FileProgrammer

    from piflash.sim.specs import TARGETS
    clock = device.clock
    device.firmware.swj_clock_hz = None
    start = clock.snapshot()
    clock.set_phase("connect")
    options = {} if frequency is None else {"frequency": int(frequency)}
    with counted_sleeps() as slept:
        session = ConnectHelper.session_with_chosen_probe(unique_id=device.serial, blocking=False,
                                                          target_override=target, **options)
        with session:
            clock.set_phase("program")
            base = TARGETS[target].flash.start if image.suffix == ".bin" else None
            FileProgrammer(session, progress=lambda _fraction: None).program(str(image), base_address=base)
            clock.set_phase("reset")
            session.board.target.reset()
            clock.set_phase("disconnect")
    return dict(_delta(start, clock.snapshot()), swj_clock_hz=device.firmware.swj_clock_hz,
                sleep_s=round(slept.total, 6))


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


#: Link round trips of the shortest SWD connect (module docstring): DPIDR, power-up
#: request/acknowledge, AP SELECT/IDR; and of the reset (the AIRCR.SYSRESETREQ write).
CONNECT_ROUND_TRIPS = 3
RESET_ROUND_TRIPS = 1
#: Bytes of the DAP_Transfer of one connect step: command, DAP index, count, then a write
#: (request + 4 data bytes) and a read (request) -- 9 bytes out; the response: command, count,
#: ack, 4 data bytes -- 7 bytes in (CMSIS-DAP DAP_Transfer). A HID report is always whole.
ROUND_TRIP_BYTES = (9, 7)


def link_round_trips(preset, count: int) -> float:
    """Seconds of ``count`` DAP requests on ``preset``'s link alone (no host CPU, no probe
    firmware time), each sent when the answer to the one before has arrived: a fresh link, the
    first request submitted at 0 (:data:`ROUND_TRIP_BYTES`). HID: an OUT report in the next free
    frame, its answer at the same frame's IN poll, so one round trip per 1 ms frame; bulk: one
    scheduling latency each way plus the packets' wire time
    (``piflash.sim.probes.usb.timing.Link``)."""
    from piflash.sim.probes.usb.timing import Link
    link = Link(preset)
    out, inn = ROUND_TRIP_BYTES
    if preset.link == "v1-hid":
        out = inn = preset.max_packet
    t = 0.0
    for _ in range(count):
        t = link.inn(link.out(t, out), inn)
    return t


def floor_parts(preset, target: str, image: Path, case: str, swd_hz: float) -> dict:
    """The floor's terms (module docstring), seconds: ``chip_s``, ``usb_s``, ``usb_framed_s``,
    ``swd_s``, ``connect_s``, ``reset_s``; from the chip (``TARGET_TIMING[target]``), the link
    (``preset``) and the SWD clock ``swd_hz`` (Hz, as asked of the probe) alone. A re-flash moves
    nothing: its byte terms are 0.

    :raises KeyError: A target without timing or spec.
    """
    from piflash.firmware.image import load_image
    from piflash.sim.probes.usb.timing import TARGET_TIMING, Link, swd_transfer_bits
    from piflash.sim.specs import TARGETS
    spec, timing = TARGETS[target], TARGET_TIMING[target]
    parts = {"chip_s": 0.0, "usb_s": 0.0, "usb_framed_s": 0.0, "swd_s": 0.0,
             "connect_s": link_round_trips(preset, CONNECT_ROUND_TRIPS),
             "reset_s": link_round_trips(preset, RESET_ROUND_TRIPS) + timing.reset_s}
    if case == "reflash":
        return parts                # nothing must change and nothing must cross
    base = spec.flash.start if image.suffix == ".bin" else None
    nbytes = load_image(str(image), base_address=base).size
    chip = nbytes / timing.program_unit * timing.program_s      # blank board: nothing to erase
    if case == "changed":       # every sector the image covers must be erased, by its best unit
        sectors = -(-nbytes // spec.flash.page_size)
        blocks64 = nbytes // 0x10000 if "erase_block64" in timing.block_erase_s else 0
        rest = sectors - blocks64 * (0x10000 // spec.flash.page_size)
        chip += blocks64 * timing.op_time("erase_block64", 0x10000) + rest * timing.erase_page_s
    usb = nbytes / Link(preset).best_rate(preset.packet_size)
    payload = (preset.packet_size - TRANSFER_BLOCK_HEADER) // 4 * 4
    words = -(-nbytes // 4)
    parts.update(chip_s=chip, usb_s=usb, usb_framed_s=usb * preset.packet_size / payload,
                 swd_s=words * swd_transfer_bits(0) / preset.swclk_hz(int(swd_hz)))
    return parts


def floor_seconds(preset, target: str, image: Path, case: str, swd_hz: float,
                  framed: bool = False) -> float:
    """The physics floor, seconds: max(chip, USB, SWD) + connect + reset (:func:`floor_parts`;
    ``framed``: the USB term at DAP_TransferBlock's payload, ``floor_framed_s``)."""
    p = floor_parts(preset, target, image, case, swd_hz)
    usb = p["usb_framed_s"] if framed else p["usb_s"]
    return max(p["chip_s"], usb, p["swd_s"]) + p["connect_s"] + p["reset_s"]


def add_host_costs(result: dict, host, tool: str, image: Path, case: str = "fresh") -> dict:
    """Add ``host``'s fixed costs for ``tool`` to a run's ``result`` (from :func:`_delta`): the
    ``load`` phase (loading ``image``) and pyOCD's reset sleeps (into ``reset``). A fresh board
    is flashed with a file this host never loaded (parsed); a re-flash with the file the fresh
    run loaded, which piflash reads back from its parsed-image cache (pyOCD parses it again)."""
    fmt = "hex" if image.suffix == ".hex" else "bin"
    load = host.parse_s(tool, fmt, image.stat().st_size, cached=case in ("reflash", "changed"))
    # What pyOCD slept in this run (counted_sleeps), else the host preset's figure.
    sleep = result["sleep_s"] if "sleep_s" in result else host.sleep_s[tool]
    phases = dict(result["phases"])
    phases["load"] = round(load, 6)
    phases["reset"] = round(phases.get("reset", 0.0) + sleep, 6)
    return dict(result, seconds=result["seconds"] + load + sleep, phases=phases,
                load_cached_s=round(host.parse_s(tool, fmt, image.stat().st_size, cached=True), 6))


def _seconds(result: dict):
    """A run's seconds (3 decimals), or None for a run that failed (its ``error``)."""
    return round(result["seconds"], 3) if "seconds" in result else None


def _ratio(a: float, b) -> object:
    """``a / b`` to 3 decimals, or None when ``b`` is None (a failed run)."""
    return round(a / b, 3) if b else None


def goals(row: dict, fresh: dict) -> dict:
    """Issue 20's ratios for ``row`` (``fresh``: the same probe and target's fresh row); against
    pyOCD at the same SWD clock (``pyocd_s``) and, ``piflash_over_pyocd_default``, at its
    default (``pyocd_default_s``)."""
    pf, load = row["piflash_s"], row["phases"]["piflash"].get("load", 0.0)
    if row["case"] in ("fresh", "changed"):
        po_load = row["phases"]["pyocd"].get("load", 0.0)
        cached = pf - load + row["load_cached_s"]          # the file loaded before (a batch)
        po, pd = row["pyocd_s"], row["pyocd_default_s"]     # None: that pyOCD run failed
        return {"piflash_over_floor": round(pf / row["floor_s"], 3),
                "piflash_over_pyocd": _ratio(pf, po),
                "piflash_over_pyocd_default": _ratio(pf, pd),
                "piflash_over_floor_cached": round(cached / row["floor_s"], 3),
                "piflash_over_pyocd_cached": _ratio(cached, po),
                "piflash_over_floor_noload": round((pf - load) / row["floor_s"], 3),
                "piflash_over_pyocd_noload": _ratio(pf - load, po - po_load if po is not None else None)}
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


#: The runs of a row: piflash, pyOCD at piflash's SWD clock, pyOCD at its default clock.
TOOLS = ("piflash", "pyocd", "pyocd_default")


def bench(presets, targets, host_name: str = "x86", cases=("fresh", "reflash"),
          frequency: Optional[int] = None, host_factor: str = "mid") -> list:
    """The rows of the module docstring for each preset x target x case, on ``host_name`` at the
    ``host_factor`` end of its band; piflash given ``frequency`` (Hz, None: its default).

    :raises ValueError: Unknown host or band end.
    :raises RuntimeError: A run that never asked the probe for a clock (DAP_SWJ_Clock).
    """
    os.environ.setdefault("PIFLASH_SIM_DIR", tempfile.mkdtemp(prefix="real_probe-"))
    from piflash.sim import SimStore
    from piflash.sim.probes import usb as sim_usb
    from piflash.sim.probes.usb.presets import get_preset
    from piflash.sim.probes.usb.timing import HOST_FACTORS, get_host
    host = get_host(host_name, host_factor)
    band = {end: host.band[end][0] for end in HOST_FACTORS}
    work = Path(tempfile.mkdtemp(prefix="real_probe-img-"))
    rows = []
    for preset_name in presets:
        preset = get_preset(preset_name)
        for target in targets:
            image = make_image(target, work)
            results: dict = {}
            for tool in TOOLS:
                figures = "piflash" if tool == "piflash" else "pyocd"
                board = "%s-%s-%s" % (tool, preset_name, target)
                store = SimStore()
                store.create(board, target, exist_ok=True)
                sim_usb.uninstall()
                os.environ[sim_usb.ENV_VAR] = "%s@%s" % (board, preset_name)
                device = sim_usb.install(store=store).devices[0]
                device.host_transfer_s = host.transfer_s[figures]
                results[tool] = {}
                for case in ("fresh", "reflash") + tuple(c for c in cases if c == "changed"):
                    _prepare(store, board, target, image, case)
                    if tool == "piflash":
                        run = run_piflash(device, target, image, frequency)
                    else:       # pyOCD at the clock piflash asked the probe for in this case
                        hz = results["piflash"][case]["swj_clock_hz"] if tool == "pyocd" else None
                        try:
                            run = run_pyocd(device, target, image, hz)
                        except Exception as exc:  # noqa: BLE001 - pyOCD fails at this clock: the row says so
                            results[tool][case] = {"error": "%s: %s" % (type(exc).__name__, exc), "phases": {},
                                                   "requests": {}, "phase_requests": {}, "swj_clock_hz": hz}
                            continue
                    if run["swj_clock_hz"] is None:
                        raise RuntimeError("%s on %s/%s asked the probe for no SWD clock" % (tool, preset_name, target))
                    results[tool][case] = add_host_costs(run, host, figures, image, case)
            fresh_row = None
            for case in cases:
                pf, po, pd = (results[tool][case] for tool in TOOLS)
                hz = pf["swj_clock_hz"]
                parts = floor_parts(preset, target, image, case, hz)
                rows.append({"probe": preset_name, "link": preset.link, "target": target, "case": case,
                             "host": host.name, "host_factor": host.host_factor,
                             "host_factor_value": host.factor, "host_band": band,
                             "swd_hz": frequency or "default", "swd_hz_requested": hz,
                             "pyocd_hz": po["swj_clock_hz"], "pyocd_default_hz": pd["swj_clock_hz"],
                             "piflash_s": round(pf["seconds"], 3), "pyocd_s": _seconds(po),
                             "pyocd_default_s": _seconds(pd),
                             **{"%s_error" % t: results[t][case]["error"] for t in TOOLS if "error" in results[t][case]},
                             "load_cached_s": pf["load_cached_s"],
                             "floor_s": round(floor_seconds(preset, target, image, case, hz), 3),
                             "floor_framed_s": round(floor_seconds(preset, target, image, case, hz, framed=True), 3),
                             "floor_parts": {k: round(v, 6) for k, v in parts.items()},
                             "phases": {tool: results[tool][case]["phases"] for tool in TOOLS},
                             "requests": {tool: results[tool][case]["requests"] for tool in TOOLS},
                             "phase_requests": {tool: results[tool][case]["phase_requests"] for tool in TOOLS}})
                fresh_row = fresh_row or rows[-1]
                rows[-1]["goals"] = goals(rows[-1], fresh_row)
    sim_usb.uninstall()
    return rows


def preset_target_args(description: str, argv=None, host_factor: bool = False) -> argparse.Namespace:
    """Parse the options of a script run over every probe preset and target: ``--json``,
    ``--presets`` and ``--targets`` (comma-separated), ``--cases``, ``--host``, ``--frequency``
    and, with ``host_factor``, ``--host-factor``; also silences pyOCD's warnings."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--json", action="store_true", help="print {\"rows\": [...]} as JSON")
    parser.add_argument("--presets", default="debugprobe,daplink,mculink")
    parser.add_argument("--targets", default="nrf51,nrf52840,stm32f103rc")
    parser.add_argument("--cases", default="fresh,reflash",
                        help="fresh, reflash, changed (a board holding other firmware)")
    parser.add_argument("--host", default="x86",
                        help="host preset: x86 (measured), zero2w, pi4, pi5 (predicted)")
    if host_factor:
        parser.add_argument("--host-factor", default="mid", choices=("low", "mid", "high"),
                            help="which end of the host preset's factor band (default: mid)")
    parser.add_argument("--frequency", type=int, default=None,
                        help="SWD clock (Hz) piflash asks for (pyOCD runs at the clock piflash asked the "
                        "probe for, and at its own default); default: piflash's default")
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
    args = preset_target_args(description, argv, host_factor=bench_fn is bench)
    if bench_fn is bench:
        rows = bench_fn(args.presets.split(","), args.targets.split(","), args.host, tuple(args.cases.split(",")),
                        args.frequency, args.host_factor)
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
    if rows:
        band = rows[0]["host_band"]
        print("host preset: %s, factor %g (%s; band low %g / mid %g / high %g)" % (
            rows[0]["host"], rows[0]["host_factor_value"], rows[0]["host_factor"], band["low"], band["mid"],
            band["high"]))
    print("%-10s %-10s %-11s %-7s %9s %9s %9s %10s %8s %9s  %s" % (
        "probe", "link", "target", "case", "swd_hz", "piflash_s", "pyocd_s", "pyocd_dflt", "floor_s", "framed_s",
        "goals"))
    def cell(value, width):
        return ("%*.2f" % (width, value)) if value is not None else "%*s" % (width, "failed")
    for r in rows:
        print("%-10s %-10s %-11s %-7s %9d %9.2f %s %s %8.2f %9.2f  %s" % (
            r["probe"], r["link"], r["target"], r["case"], r["swd_hz_requested"], r["piflash_s"],
            cell(r["pyocd_s"], 9), cell(r["pyocd_default_s"], 10), r["floor_s"], r["floor_framed_s"],
            " ".join("%s=%s" % kv for kv in r["goals"].items())))
        for tool in ("pyocd", "pyocd_default"):
            if "%s_error" % tool in r:
                print("    %s failed: %s" % (tool, r["%s_error" % tool]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
