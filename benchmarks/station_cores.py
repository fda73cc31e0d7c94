"""Predicted boards/hour of a station with 1, 2 and 4 probes on a host preset, threads vs a
process per probe, behind a single-TT or a multi-TT USB hub (issue 20, deliverable 4).

Predictions of a model, not measurements. One fresh board is flashed in-process through pyOCD's
USB CMSIS-DAP driver on the simulated probe's virtual clock with the host preset's CPU time per
USB transfer (piflash/sim/probes/usb/timing.py, ``HOST_PRESETS``), which gives, per board:

* ``board_s``: the board's time with one probe (connect to reset, host CPU included);
* ``host_s``: the host CPU in it: (DAP packets out + responses in) x the preset's time per
  packet, as the clock charged it; the preset's sleeps are wall time, not CPU, and are not
  counted here;
* ``bus_s``: the board's time on the full-speed bus: the bytes it moved both ways in 64-byte
  packets plus 13 bytes of token, handshake and CRC each, at 12 Mbit/s (USB 2.0 spec 5.8.4,
  8.4). A DAPLink's HID reports wait for their 1 ms frame (5.7.4), which is in ``board_s``, but
  the frame is not theirs alone: other devices' transactions fill it, so only the bytes count.

A station with N probes is then predicted by replaying N copies of the board's recorded
timeline (the clock's ``timeline``: every interval the board held the bus or the host's CPU)
against what the probes share (``piflash.sim.probes.usb.hub.replay``, a discrete-event replay,
the probes starting in step, ``detect_s`` between a probe's boards: half the station's poll
interval (the swap falls anywhere within a removal poll) + its removal confirmation delay,
piflash/station/worker.py ``CONFIRM_DELAY``; the operator's swap time 0):

* the host CPU -- one interpreter lock for all probes with worker threads; min(N, host cores)
  with ``workers: processes`` (Zero 2W, Pi 4, Pi 5: 4 cores, BCM2710A1, BCM2711, BCM2712
  datasheets);
* the full-speed bus behind a **single-TT** hub, where every full-speed device shares the one
  Transaction Translator's 12 Mbit/s (USB 2.0 spec 11.14.1.3: a single TT serves all ports),
  packet by packet; nothing shared behind a multi-TT hub (a TT per port). A Zero 2W has one USB
  2.0 port, so its probes always sit behind a hub; the 480 Mbit/s upstream link is never the
  bound for full-speed probes.

A probe that waits for a shared resource carries the delay into the rest of its board. The
goal (issue 20): 4 probes >= 3.5x the boards/hour of 1 probe on the zero2w preset.

Against it: N shell loops of ``pyocd flash``, one per probe (:func:`shell_board`): each board a
new process (pyOCD's start-up, the host preset's ``startup_s``), the file parsed, flashed without
verify; the loops are separate processes, so up to the host's cores run at once; the same bus
bounds, taken as a minimum (no queueing: an upper bound for the loops); no detection wait (the
next command starts when the last ends). ``vs_shell``: the
station's boards/hour over the loops' (goal: >= 3x).

    python benchmarks/station_cores.py [--presets debugprobe,daplink] [--targets nrf52840]
        [--host zero2w] [--poll-interval 0.5] [--json]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import tempfile
from pathlib import Path

PROBES = (1, 2, 4)
#: Host cores by preset (the boards' SoCs: BCM2710A1 Zero 2W, BCM2711 Pi 4, BCM2712 Pi 5: four
#: Cortex-A53 / A72 / A76 cores); x86: this machine's.
HOST_CORES = {"zero2w": 4, "pi4": 4, "pi5": 4, "x86": os.cpu_count() or 1}
FS_BPS = 12e6
PACKET, PACKET_OVERHEAD = 64, 13


def board_image(target: str) -> Path:
    """The 64 KiB image both contenders flash (seeded random bytes, the same for a target)."""
    work = Path(tempfile.mkdtemp(prefix="station-cores-"))
    image = work / "app.bin"
    image.write_bytes(random.Random(target).randbytes(64 * 1024))
    return image


def one_board(preset: str, target: str, host) -> dict:
    """Flash one fresh board through the simulated probe; the clock's per-board figures."""
    from real_probe import usb_device  # benchmarks/, the script's own folder

    from piflash.firmware.image import load_image
    from piflash.jobs.workflow import flash_firmware
    from piflash.sim.probes import usb as sim_usb
    from piflash.sim.specs import TARGETS

    spec = TARGETS[target]
    image = board_image(target)
    device = usb_device(f"cores-{preset}-{target}", target, preset, host)
    start = device.clock.snapshot()
    device.clock.timeline = []
    flash_firmware(load_image(str(image), base_address=spec.flash.start), probe=device.serial, target=target)
    end = device.clock.snapshot()
    sim_usb.uninstall()
    req = {k: end["requests"].get(k, 0) - start["requests"].get(k, 0) for k in end["requests"]}
    # DAP packets each way (one IN response per packet; several packets may share one OUT
    # transfer on the Debug Probe, piflash/probe/batched_dap.py): what the host's CPU is charged by.
    transfers = 2 * req.get("usb_in", 0)
    nbytes = req.get("bytes_out", 0) + req.get("bytes_in", 0)
    packets = sum(math.ceil(req.get(f"bytes_{d}", 0) / PACKET) or 0 for d in ("out", "in"))
    bus = (nbytes + PACKET_OVERHEAD * max(packets, transfers)) * 8 / FS_BPS
    timeline = [(r, t - start["now_s"], s) for r, t, s in device.clock.timeline]
    host_s = sum(s for r, _t, s in timeline if r == "host")     # the CPU the clock charged
    return {"board_s": end["now_s"] - start["now_s"], "host_s": host_s,
            "bus_s": bus, "transfers": transfers, "timeline": timeline}


def shell_board(preset: str, target: str, host, image: Path) -> dict:
    """One board of a shell loop of ``pyocd flash`` on the same probe and host: a process per
    board, so pyOCD's start-up (the preset's ``startup_s``), the file's parse and pyOCD's sleeps
    (real_probe.add_host_costs) on top of its flash on the virtual clock (erase, program, no
    verify, reset). ``board_s`` the board's time, ``host_s`` its CPU (start-up, parse and the
    preset's time per transfer), ``bus_s`` as for the station."""
    from real_probe import add_host_costs, run_pyocd, usb_device

    from piflash.sim.probes import usb as sim_usb

    device = usb_device(f"shell-{preset}-{target}", target, preset, host, tool="pyocd")
    result = add_host_costs(run_pyocd(device, target, image), host, "pyocd", image)
    sim_usb.uninstall()
    req = result["requests"]
    transfers = req.get("usb_out", 0) + req.get("usb_in", 0)
    nbytes = req.get("bytes_out", 0) + req.get("bytes_in", 0)
    packets = sum(math.ceil(req.get(f"bytes_{d}", 0) / PACKET) or 0 for d in ("out", "in"))
    return {"board_s": result["seconds"] + host.startup_s,
            "host_s": transfers * host.transfer_at("pyocd") + result["phases"].get("load", 0.0) + host.startup_s,
            "bus_s": (nbytes + PACKET_OVERHEAD * max(packets, transfers)) * 8 / FS_BPS}


def shell_rates(fig: dict, cores: int) -> dict:
    """Boards/hour of N shell loops, one per probe, each its own process (so up to ``cores``
    of them run at once), behind either hub: {(hub, N): boards/hour}."""
    out = {}
    for hub in ("single-TT", "multi-TT"):
        for n in PROBES:
            bounds = (n / fig["board_s"], min(n, cores) / fig["host_s"],
                      (1 if hub == "single-TT" else n) / fig["bus_s"])
            out[(hub, n)] = round(3600 * min(bounds))
    return out


def rates(fig: dict, cores: int, detect_s: float) -> list:
    """Boards/hour of 1, 2 and 4 probes for each way of running the workers and each hub, by
    replaying the board's recorded bus and host intervals against the shared ones
    (``piflash.sim.probes.usb.hub``), probes starting in step (the worst case for a shared bus)."""
    from piflash.sim.probes.usb.hub import station_rates
    out = []
    for workers in ("threads", "processes"):
        for hub in ("single-TT", "multi-TT"):
            capacity = {"host": 1 if workers == "threads" else cores}
            if hub == "single-TT":
                capacity["bus"] = 1
            for r in station_rates(fig["timeline"], fig["board_s"], PROBES, capacity, gap_s=detect_s):
                waits = {k: round(v, 3) for k, v in r["waits_s"].items() if v >= 0.0005}
                bound = ("waits: " + ", ".join(f"{k} {v} s" for k, v in waits.items())) if waits else "probes"
                out.append({"workers": workers, "hub": hub, "probes": r["devices"],
                            "boards_per_hour": round(r["boards_per_hour"]), "wait_s": round(r["wait_s"], 3),
                            "waits_s": waits, "bound": bound})
    return out


def bench(presets, targets, host_name: str, poll: float) -> list:
    os.environ.setdefault("PIFLASH_SIM_DIR", tempfile.mkdtemp(prefix="station-cores-sim-"))
    os.environ["PIFLASH_HISTORY"] = "off"
    from piflash.sim.probes.usb.timing import get_host
    from piflash.station.worker import CONFIRM_DELAY

    host = get_host(host_name)
    rows = []
    for preset in presets:
        for target in targets:
            fig = one_board(preset, target, host)
            cores = HOST_CORES.get(host.name, 4)
            table = rates(fig, cores, poll / 2 + CONFIRM_DELAY)
            shell_fig = shell_board(preset, target, host, board_image(target))
            shell = shell_rates(shell_fig, cores)
            one = {(r["workers"], r["hub"]): r["boards_per_hour"] for r in table if r["probes"] == 1}
            for r in table:
                r["vs_1_probe"] = round(r["boards_per_hour"] / one[(r["workers"], r["hub"])], 2)
                r["shell_boards_per_hour"] = shell[(r["hub"], r["probes"])]
                r["vs_shell"] = round(r["boards_per_hour"] / r["shell_boards_per_hour"], 2)
            rows.append({"probe": preset, "target": target, "host": host.name,
                         "board_s": round(fig["board_s"], 3), "host_s": round(fig["host_s"], 3),
                         "bus_s": round(fig["bus_s"], 3),
                         "shell_board_s": round(shell_fig["board_s"], 3),
                         "shell_host_s": round(shell_fig["host_s"], 3), "table": table})
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--presets", default="debugprobe,daplink")
    ap.add_argument("--targets", default="nrf52840,stm32f103rc")
    ap.add_argument("--host", default="zero2w")
    ap.add_argument("--poll-interval", type=float, default=0.5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    rows = bench(args.presets.split(","), args.targets.split(","), args.host, args.poll_interval)
    if args.json:
        print(json.dumps({"rows": rows}, indent=1))
        return 0
    for row in rows:
        print(f"{row['probe']} {row['target']} on {row['host']} (predictions): board {row['board_s']} s, "
              f"host CPU {row['host_s']} s, FS bus {row['bus_s']} s per board; shell loop of pyocd flash "
              f"{row['shell_board_s']} s, host CPU {row['shell_host_s']} s per board")
        for r in row["table"]:
            print("  %-9s %-9s %d probe(s): %6d boards/hour  %4.2fx one probe, %4.2fx %d shell loop(s) "
                  "(%d/h)  (bound: %s)" % (r["workers"], r["hub"], r["probes"], r["boards_per_hour"],
                                           r["vs_1_probe"], r["vs_shell"], r["probes"],
                                           r["shell_boards_per_hour"], r["bound"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
