"""Predicted cost of the boot check on real probes: a flash with ``--boot-check rtt:...`` vs without.

For each probe preset and target, the boot-check test firmware (``tests/firmware/boot``, kind
``rtt``: it prints its banner and ``self-test: PASS`` within its first few thousand instructions)
is flashed twice onto a board that already holds it (a re-flash: nothing to program, so the
difference is the check), in-process through pyOCD's own USB CMSIS-DAP driver on the simulated
probe's virtual clock:

* ``plain_s`` -- ``flash_firmware`` without a check (connect, plan, verify, reset);
* ``checked_s`` -- the same with ``rtt:self-test: PASS`` (vector catch, wiping an old RTT block at
  the ELF symbol, the reset, the looks until the text is there, the vector catch set back);
* ``added_s`` -- the difference, the goal's figure (issue 23: <= 0.2 s on the x86 host preset for a
  board that prints within 100 ms); ``requests`` -- the USB requests (DAP command packets) the
  check added.

All figures are predictions of the timing model (piflash/sim/probes/usb/timing.py) with the host
preset's CPU time per transfer, not measurements. The firmware's own run time to its banner is the
simulated core's (microseconds); a board that prints later adds that wait, looked at every 10 ms.

    python benchmarks/boot_check_usb.py [--json] [--presets debugprobe,daplink] [--targets nrf52840]
        [--host x86|zero2w]
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from real_probe import bench_rows, usb_device

REPO = Path(__file__).resolve().parent.parent


def _firmware(target: str) -> Path:
    path = REPO / "tests" / "firmware" / "build" / "boot" / target / "rtt.elf"
    if not path.exists():
        raise SystemExit(f"{path} is missing: run scripts/build-test-firmware.sh first")
    return path


def bench(presets, targets, host_name: str = "x86") -> list:
    os.environ.setdefault("PIFLASH_SIM_DIR", tempfile.mkdtemp(prefix="boot_check-"))
    os.environ["PIFLASH_HISTORY"] = "off"
    from piflash.firmware.image import load_image
    from piflash.jobs.workflow import FlashOptions, flash_firmware
    from piflash.production.bootcheck import parse_boot_check
    from piflash.sim.probes import usb as sim_usb
    from piflash.sim.probes.usb.timing import get_host

    host = get_host(host_name)
    check = parse_boot_check("rtt:self-test: PASS", 2.0)
    rows = []
    for preset in presets:
        for target in targets:
            image = load_image(str(_firmware(target)))
            device = usb_device(f"boot-{preset}-{target}", target, preset, host)
            flash_firmware(image, probe=device.serial, target=target)        # the board holds it now
            row = {"probe": preset, "target": target, "host": host.name}
            for case, kwargs in (("plain", {}), ("checked", {"job": FlashOptions(boot_check=check)})):
                start, requests = device.clock.now, device.clock.snapshot()["requests"]
                flash_firmware(image, probe=device.serial, target=target, **kwargs)
                row[f"{case}_s"] = round(device.clock.now - start, 4)
                row[f"{case}_requests"] = _count(device.clock.snapshot()["requests"]) - _count(requests)
            row["added_s"] = round(row["checked_s"] - row["plain_s"], 4)
            row["requests"] = row["checked_requests"] - row["plain_requests"]
            row["goal_added_le_0_2s"] = row["added_s"] <= 0.2
            rows.append(row)
    sim_usb.uninstall()
    return rows


def _count(requests: dict) -> int:
    """DAP command packets the host sent: the clock's ``usb_in`` count, one response per packet
    (``usb_out`` counts USB transfers, which carry several packets on the Debug Probe)."""
    return int(requests.get("usb_in", 0))


def main(argv=None) -> int:
    rows = bench_rows(__doc__.splitlines()[0], bench, argv)
    if rows is None:
        return 0
    print("host preset: %s (predictions of the timing model)" % (rows[0]["host"] if rows else ""))
    print("%-10s %-11s %9s %9s %9s %8s  %s" % ("probe", "target", "plain_s", "checked_s", "added_s",
                                               "requests", "added <= 0.2 s"))
    for r in rows:
        print("%-10s %-11s %9.4f %9.4f %9.4f %8d  %s" % (r["probe"], r["target"], r["plain_s"], r["checked_s"],
                                                         r["added_s"], r["requests"], r["goal_added_le_0_2s"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
