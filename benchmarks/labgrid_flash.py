#!/usr/bin/env python3
"""Flashing through labgrid against ``piflash flash`` on the same simulated board (issue 45: the
goal is at most 0.5 s more).

A: ``piflash flash IMAGE -u sim:BOARD -t nrf52840 --json -q``, a process of its own.
B: labgrid's ``PiflashDriver.load(IMAGE)`` on a ``PiflashProbe`` (the probe on this host), in a
   process that has loaded the labgrid environment once (as a labgrid test session has).
C: the same on a ``NetworkPiflashProbe`` whose host is a real sshd on 127.0.0.1 (Debian's
   openssh-server, tests/support/sshserver.py): labgrid's SSH connection manager, its
   ``ManagedFile``, ``ssh HOST -- piflash flash ...``; left out, with the reason, when sshd cannot
   run here.

Every leg runs the same ``piflash`` executable (this checkout, this interpreter). The image is
the project's nRF52840 test firmware (``--image small``, 12.7 KB) or pyOCD's nRF52840 test binary
(``--image pyocd``, ``l1_nrf52840-dk.bin``, 184 KB) and, turn about, the same bytes inverted, so
that every flash erases and programs the whole image. Runs are interleaved A B C A B
C so load drift on a shared machine hits every leg alike; one warm-up round is not counted. The
verdict is the median of the per-round differences B-A and C-A (seconds) and of the ratios. Each
round also times one ``true`` over labgrid's SSH connection to the same sshd: leg C runs two
commands over it (``ManagedFile``'s ``stat`` of the image, then ``piflash flash``), and what one
costs is the SSH session and the exporter account's shell start-up, not piflash's or labgrid's.

    .venv/bin/python benchmarks/labgrid_flash.py --rounds 9 [--image pyocd]
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BUILD = Path(os.environ.get("PIFLASH_TEST_FIRMWARE", REPO / "tests" / "firmware" / "build"))
#: The images: pyOCD's nRF52840 test binary (184 KB, --image pyocd) or the project's nRF52840 test
#: firmware (12.7 KB, --image small, the default: the flash itself is then short and the fixed cost
#: of each leg, what this compares, is not drowned in the noise of a shared machine).
IMAGES = {"pyocd": BUILD / "pyocd" / "binaries" / "l1_nrf52840-dk.bin", "small": BUILD / "nrf52840" / "firmware.bin"}
BOARD = "sim:nrf52840-lgbench"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9, help="A B C rounds to count [9]")
    parser.add_argument("--image", choices=sorted(IMAGES), default="small", help="the image [small]")
    args = parser.parse_args()
    BINARY = IMAGES[args.image]
    if not BINARY.exists():
        raise SystemExit(f"{BINARY} is missing: run scripts/build-test-firmware.sh")
    tmp = Path(tempfile.mkdtemp(prefix="piflash-lgbench-"))
    images = [tmp / "a.bin", tmp / "b.bin"]
    data = BINARY.read_bytes()
    images[0].write_bytes(data)
    images[1].write_bytes(bytes(b ^ 0xFF for b in data))
    piflash = tmp / "piflash"
    piflash.write_text(
        f"#!/bin/sh\nexport PYTHONPATH={REPO} PIFLASH_SIM_DIR={tmp / 'sim'} PIFLASH_HISTORY={tmp / 'history.sqlite3'} "
        f"PIFLASH_CACHE={tmp / 'cache'}\nexec {sys.executable} -m piflash \"$@\"\n"
    )
    piflash.chmod(0o755)
    subprocess.run([str(piflash), "sim", "create", BOARD.split(":", 1)[1], "--target", "nrf52840"], check=True,
                   capture_output=True)

    sys.path[:0] = [str(REPO), str(REPO / "tests")]
    from labgrid import Environment

    def env_for(resource: str) -> Environment:
        path = tmp / f"env-{resource}.yaml"
        host = f"\n        host: {ssh.host}" if resource.startswith("Network") else ""
        path.write_text(
            f"targets:\n  main:\n    resources:\n      {resource}:\n        probe_id: {BOARD}{host}\n"
            "    drivers:\n      PiflashDriver:\n        pyocd_target: nrf52840\n        base_address: 0\n"
            f"tools:\n  piflash: {piflash}\nimports:\n  - piflash.labgrid\n"
        )
        return Environment(str(path))

    ssh, why = None, ""
    try:
        from support.sshserver import SshServer

        ssh = SshServer()
        os.environ["PATH"] = f"{ssh.path_dir}:{os.environ['PATH']}"
    except BaseException as exc:  # pytest's skip outside pytest: sshd cannot run here
        why = str(exc)
    legs = {"A piflash flash": None}
    drivers = {}
    for name, resource in (("B labgrid, local", "PiflashProbe"), ("C labgrid, over SSH", "NetworkPiflashProbe")):
        if resource.startswith("Network") and ssh is None:
            print(f"{name}: left out ({why})")
            continue
        target = env_for(resource).get_target("main")
        driver = target.get_driver("PiflashDriver")
        drivers[name] = driver
        legs[name] = driver
    times = {name: [] for name in legs}
    ssh_true = []  # one command over labgrid's SSH connection (its control master): what each costs here
    turn = 0
    try:
        for rnd in range(args.rounds + 1):
            for name in legs:
                image = images[turn % 2]
                turn += 1
                start = time.perf_counter()
                if name.startswith("A"):
                    subprocess.run([str(piflash), "flash", str(image), "-u", BOARD, "-t", "nrf52840",
                                    "--base-address", "0", "--json", "-q"], check=True, capture_output=True)
                else:
                    result = drivers[name].load(str(image))
                    assert result["program"]["programmed_bytes"] > 0
                if rnd:  # round 0 warms up (imports, the SSH master connection)
                    times[name].append(time.perf_counter() - start)
            if ssh is not None:
                from labgrid.util.ssh import sshmanager

                start = time.perf_counter()
                sshmanager.get(ssh.host).run_check("true")
                if rnd:
                    ssh_true.append(time.perf_counter() - start)
    finally:
        if ssh is not None:
            ssh.close()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} CPUs; {args.rounds} rounds, "
          f"{len(data):,}-byte image, every flash erases and programs it")
    base = times["A piflash flash"]
    for name, t in times.items():
        line = f"{name:22} median {statistics.median(t):.3f} s (min {min(t):.3f}, max {max(t):.3f})"
        if name != "A piflash flash":
            diffs = [b - a for a, b in zip(base, t)]
            ratios = [b / a for a, b in zip(base, t)]
            line += f"; minus A: median {statistics.median(diffs):+.3f} s, ratio {statistics.median(ratios):.3f}"
        print(line)
    if ssh_true:
        print(f"ssh HOST true over labgrid's connection: median {statistics.median(ssh_true):.3f} s; leg C runs two "
              "commands over it (ManagedFile's stat of the image, then piflash)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
