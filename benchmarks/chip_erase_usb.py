"""Predicted time of a chip erase on real probes: ``piflash erase --chip`` vs ``pyocd erase --chip``.

For each probe preset and target, a board whose whole flash holds data, erased in-process through
pyOCD's own USB CMSIS-DAP driver on the simulated probe's virtual clock:

* ``piflash_s`` -- ``piflash.jobs.workflow.erase_target(mode="chip")``: connect, the chip erase, the
  blank check that proves every flash region erased, reset;
* ``pyocd_s`` -- what ``pyocd erase --chip`` does: connect, ``FlashEraser`` in chip mode (one
  ``EraseAll`` per flash region, no check);
* ``nvm_erases`` -- erase operations the simulated flash arrays carried out (an nRF ERASEALL
  clears the code flash and the UICR: two).

All figures are predictions of the timing model (piflash/sim/probes/usb/timing.py), not measurements.

    python benchmarks/chip_erase_usb.py [--json] [--presets debugprobe,daplink] [--targets nrf52840]
"""

from __future__ import annotations

import os
import random
import sys
import tempfile

from real_probe import bench_rows


def run_piflash(device, target: str) -> None:
    from piflash.jobs.workflow import erase_target
    erase_target(probe=device.serial, target=target, mode="chip")


def run_pyocd(device, target: str) -> None:
    from pyocd.core.helpers import ConnectHelper
    from pyocd.flash.eraser import FlashEraser
    session = ConnectHelper.session_with_chosen_probe(unique_id=device.serial, blocking=False,
                                                      target_override=target)
    with session:
        FlashEraser(session, FlashEraser.Mode.CHIP).erase()


def bench(presets, targets, host_name: str = "x86") -> list:
    os.environ.setdefault("PIFLASH_SIM_DIR", tempfile.mkdtemp(prefix="chip_erase-"))
    from piflash.sim import SimStore
    from piflash.sim.probes import usb as sim_usb
    from piflash.sim.probes.usb.timing import get_host
    host = get_host(host_name)
    rows = []
    for preset in presets:
        for target in targets:
            row = {"probe": preset, "target": target, "host": host.name}
            for tool, runner in (("piflash", run_piflash), ("pyocd", run_pyocd)):
                board = "%s-%s-%s" % (tool, preset, target)
                store = SimStore()
                info = store.create(board, target, exist_ok=True)
                store.write_flash(board, random.Random(target).randbytes(info.spec.flash.size))
                sim_usb.uninstall()
                os.environ[sim_usb.ENV_VAR] = "%s@%s" % (board, preset)
                device = sim_usb.install(store=store).devices[0]
                device.host_transfer_s = host.transfer_s[tool]
                erases, start = store.get(board).stats["erase_ops"], device.clock.now
                runner(device, target)
                row[tool + "_s"] = round(device.clock.now - start, 3)
                row[tool + "_nvm_erases"] = store.get(board).stats["erase_ops"] - erases
                if set(store.read_flash(board)) != {0xFF}:
                    raise SystemExit("%s left data in %s's flash" % (tool, board))
            rows.append(row)
    sim_usb.uninstall()
    return rows


def main(argv=None) -> int:
    rows = bench_rows(__doc__.splitlines()[0], bench, argv)
    if rows is None:
        return 0
    print("%-10s %-11s %9s %9s %8s %8s" % ("probe", "target", "piflash_s", "pyocd_s", "erases", "(pyocd)"))
    for r in rows:
        print("%-10s %-11s %9.3f %9.3f %8d %8d" % (r["probe"], r["target"], r["piflash_s"], r["pyocd_s"],
                                                   r["piflash_nvm_erases"], r["pyocd_nvm_erases"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
