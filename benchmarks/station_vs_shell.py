#!/usr/bin/env python3
"""Boards per hour: ``piflash station`` vs a shell loop of ``pyocd flash``, side by side in one run.

Both flash the same 64 KiB image onto simulated nRF52840 boards, swapped by the same "operator"
(this script, through ``SimStore.swap``: a fresh board, new target unique ID, erased flash):

- station: one ``piflash station run`` process serves probe ``sim:bench-station``; the operator
  swaps in the next board as soon as the history has the row of the current one. The station
  verifies every board (read-back) and checks for the same firmware first (its defaults).
- shell loop: for each board the operator swaps, then runs ``pyocd flash -t nrf52840
  -u sim:bench-shell --base-address 0 image.bin`` (what ``while true; do pyocd flash ...; done``
  does), which programs without verifying.

Then the station's memory: RSS while idle (no board on the fixture), and after 10 and after
``--long`` boards (default 500), read from /proc/PID/status (VmRSS).

    python benchmarks/station_vs_shell.py [--boards 20] [--long 500]

Goals (issue #5): station >= 2x the shell loop's boards per hour; idle RSS < 60 MB; RSS after
500 boards within 5 MB of RSS after 10.

This runs on the wall clock with the zero-time ``sim:`` probe, so it says nothing about a real
probe; ``station_vs_shell_usb.py`` runs both contenders over the simulated USB probe and reports
boards per hour on its virtual clock (issue 12).
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent
IMAGE_SIZE = 64 * 1024


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def count_rows(db: Path) -> int:
    if not db.exists():
        return 0
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        # A board's row is opened when the station reaches it (outcome 'open', piflash/record/history.py):
        # count finished boards only, or the operator swaps a board in the middle of its flash.
        return con.execute("SELECT count(*) FROM operations WHERE outcome != 'open'").fetchone()[0]
    except sqlite3.OperationalError:
        return 0
    finally:
        con.close()


def outcomes(db: Path) -> dict:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        return dict(con.execute("SELECT outcome, count(*) FROM operations GROUP BY outcome").fetchall())
    finally:
        con.close()


def wait_rows(db: Path, n: int, proc, deadline: float = 120.0) -> None:
    end = time.monotonic() + deadline
    while count_rows(db) < n:
        if proc.poll() is not None:
            raise SystemExit("the station exited")
        if time.monotonic() > end:
            raise SystemExit(f"timed out waiting for history row {n}")
        time.sleep(0.01)


class Station:
    def __init__(self, tmp: Path, env: dict, image: Path, name: str, db: Path) -> None:
        profile = tmp / f"{name}.profile.yaml"
        profile.write_text(f"target: nrf52840\nfirmware: {image}\nbase_address: 0x0\n")
        config = tmp / f"{name}.station.yaml"
        config.write_text(f"station: bench\nprofile: {profile}\nprobes: [\"sim:{name}\"]\n"
                          f"poll_interval: 0.05\nhistory: {db}\n")
        self.db = db
        self.proc = subprocess.Popen([BIN / "piflash", "station", "run", "--plain", "--config", config],
                                     env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(60)


def run_station(store, tmp, env, image, boards: int):
    name = "bench-station"
    store.create(name, "nrf52840")
    station = Station(tmp, env, image, name, tmp / "station.sqlite3")
    try:
        wait_rows(station.db, 1, station.proc)       # the first board (start-up not counted)
        start = time.perf_counter()
        for i in range(boards):
            store.swap(name)
            wait_rows(station.db, i + 2, station.proc)
        wall = time.perf_counter() - start
    finally:
        station.stop()
    result = outcomes(station.db)
    if result.get("pass", 0) != boards + 1:
        raise SystemExit(f"station: not every board passed: {result}")
    return wall


def run_shell(store, env, image, boards: int):
    name = "bench-shell"
    store.create(name, "nrf52840")
    cmd = [BIN / "pyocd", "flash", "-t", "nrf52840", "-u", f"sim:{name}", "--base-address", "0", image]
    start = time.perf_counter()
    for _ in range(boards):
        store.swap(name)
        subprocess.run(cmd, env=env, check=True, capture_output=True)
    wall = time.perf_counter() - start
    data = image.read_bytes()
    if store.read_flash(name)[:len(data)] != data:
        raise SystemExit("shell loop: the last board does not hold the image")
    return wall


def memory(store, tmp, env, image, long_run: int):
    name = "bench-memory"
    store.create(name, "nrf52840")
    store.pull(name)                                  # the fixture starts empty
    station = Station(tmp, env, image, name, tmp / "memory.sqlite3")
    try:
        time.sleep(5.0)                               # started, polling an empty fixture
        idle = rss_mib(station.proc.pid)
        marks, done = {}, 0
        store.seat(name)
        for target in (10, long_run):
            while done < target:
                if done:
                    store.swap(name)
                wait_rows(station.db, done + 1, station.proc)
                done += 1
            time.sleep(0.5)
            marks[target] = rss_mib(station.proc.pid)
    finally:
        station.stop()
    return idle, marks


def machine() -> str:
    model = ""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith(("model name", "Model")):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{platform.machine()}, {os.cpu_count()} CPUs ({model}), Python {platform.python_version()}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--boards", type=int, default=20, help="boards per contender")
    ap.add_argument("--long", type=int, default=500, help="boards for the memory run")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        env = dict(os.environ, PIFLASH_SIM_DIR=str(tmp / "sim"), PIFLASH_HISTORY="off")
        os.environ["PIFLASH_SIM_DIR"] = env["PIFLASH_SIM_DIR"]
        from piflash.sim import SimStore

        store = SimStore()
        image = tmp / "image.bin"
        image.write_bytes(random.Random(5).randbytes(IMAGE_SIZE))
        station_wall = run_station(store, tmp, env, image, args.boards)
        shell_wall = run_shell(store, env, image, args.boards)
        st_bph, sh_bph = args.boards * 3600 / station_wall, args.boards * 3600 / shell_wall
        print(f"machine: {machine()}")
        print(f"image: {IMAGE_SIZE:,} bytes on simulated nrf52840, {args.boards} boards each")
        print(f"{'station (verify on)':<28} {station_wall / args.boards:6.2f} s/board {st_bph:8,.0f} boards/hour")
        print(f"{'shell loop of pyocd flash':<28} {shell_wall / args.boards:6.2f} s/board {sh_bph:8,.0f} boards/hour")
        print(f"station / shell loop: {st_bph / sh_bph:.2f}x (goal >= 2x)")
        idle, marks = memory(store, tmp, env, image, args.long)
        print(f"station RSS idle: {idle:.1f} MiB (goal < 60 MB)")
        print(f"station RSS after 10 boards: {marks[10]:.1f} MiB, after {args.long}: "
              f"{marks[args.long]:.1f} MiB, growth {marks[args.long] - marks[10]:+.1f} MiB (goal within 5 MB)")


if __name__ == "__main__":
    main()
