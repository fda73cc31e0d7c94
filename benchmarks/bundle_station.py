#!/usr/bin/env python3
"""Verification is paid once per bundle load, not per board (issue 40): a station flashing from a
signed job bundle against the same station flashing the same profile, interleaved.

Each run is a real ``piflash station run --plain`` process with its own simulated folder, history
and ``--boards`` erased nRF52840 boards (``sim:b0``...), one probe each, flashed with the test
firmware; it is stopped (SIGTERM) once the history holds a row per board. Runs alternate plain,
bundle, plain, bundle... The per-board figure is each row's ``ended_at - started_at`` (the board's
whole operation, as the history times it); the verdict is the median over pairs of the ratio
bundle/plain of each run's median per-board time. The one-time cost, verifying and loading the
bundle (``open_bundle`` and ``load_image``: two ``ssh-keygen`` runs), is timed in this process.
The key is made by ``ssh-keygen`` in a temporary folder.

    .venv/bin/python benchmarks/bundle_station.py --pairs 5 --boards 4

Needs the simulator (``piflash[sim]``), ssh-keygen and the test firmware
(``PIFLASH_TEST_FIRMWARE``, default tests/firmware/build).
"""

from __future__ import annotations

import argparse
import os
import platform
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # this checkout's piflash, in this process as in the stations
FIRMWARE = Path(os.environ.get("PIFLASH_TEST_FIRMWARE", REPO / "tests" / "firmware" / "build")) / "nrf52840"


def _piflash(env, *args) -> None:
    proc = subprocess.run([sys.executable, "-m", "piflash", *map(str, args)], env=env, capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"piflash {args[0]} {args[1]} exited {proc.returncode}: {proc.stderr.strip()}")


def _rows(history: Path):
    if not history.exists():
        return []
    db = sqlite3.connect(f"file:{history}?mode=ro", uri=True, timeout=30)
    try:
        return db.execute("SELECT ended_at - started_at, bundle_version FROM operations WHERE outcome = 'pass'").fetchall()
    except sqlite3.OperationalError:
        return []
    finally:
        db.close()


def run_station(work: Path, source: str, boards: int, base_env: dict) -> list:
    """One station run in ``work`` with ``source`` (a ``profile:`` or ``bundle:`` block); the
    per-board seconds of its rows."""
    from piflash.sim import SimStore

    work.mkdir()
    env = dict(base_env, PIFLASH_SIM_DIR=str(work / "sim"), PIFLASH_HISTORY=str(work / "history.sqlite3"))
    os.environ["PIFLASH_SIM_DIR"] = env["PIFLASH_SIM_DIR"]
    store = SimStore()
    for i in range(boards):
        store.create(f"b{i}", "nrf52840")
    probes = ", ".join(f'"sim:b{i}"' for i in range(boards))
    config = work / "station.yaml"
    config.write_text(f"station: bench\nprobes: [{probes}]\npoll_interval: 0.1\n"
                      f"history: {work / 'history.sqlite3'}\n{source}\n")
    log = open(work / "station.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "piflash", "station", "run", "--plain", "--config", str(config)],
                            env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 300
        while len(_rows(work / "history.sqlite3")) < boards:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"station failed: {(work / 'station.log').read_text()[-2000:]}")
            time.sleep(0.1)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
        log.close()
    rows = _rows(work / "history.sqlite3")
    expected = None if source.startswith("profile") else 1
    assert all(v == expected for _, v in rows), rows
    return [s for s, _ in rows]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--boards", type=int, default=4)
    args = parser.parse_args()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    with tempfile.TemporaryDirectory(prefix="piflash-bench-bundle-") as tmp:
        d = Path(tmp)
        env = dict(os.environ, PYTHONPATH=str(REPO), PIFLASH_PROFILE_PATH=str(d / "none"))
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "owner", "-f", str(d / "key")],
                       check=True, stdin=subprocess.DEVNULL)
        pub = " ".join((d / "key.pub").read_text().split()[:2])
        (d / "allowed").write_text(f'owner namespaces="piflash-bundle" {pub}\n')
        profile = d / "board.yaml"
        profile.write_text(f"target: nrf52840\nfirmware: {FIRMWARE / 'firmware.hex'}\n")
        job = d / "job.pfb"
        _piflash(env, "bundle", "create", "-p", profile, "-o", job, "--line", "bench", "--version", "1")
        _piflash(env, "bundle", "sign", job, "-k", d / "key")

        from piflash.bundle.loader import open_bundle

        loads = []
        for _ in range(11):
            start = time.perf_counter()
            b = open_bundle(job, d / "allowed", accept=False, state=d / "state.sqlite3")
            b.load_image()
            loads.append(time.perf_counter() - start)
            b.close()
        print(f"verify and load the bundle once: median {statistics.median(loads) * 1000:.1f} ms (11 runs)")

        plain_src = f"profile: {profile}"
        bundle_src = f"bundle: {job}\nallowed_signers: {d / 'allowed'}"
        ratios, plain_all, bundle_all = [], [], []
        for i in range(args.pairs):
            plain = run_station(d / f"plain{i}", plain_src, args.boards, env)
            bundled = run_station(d / f"bundle{i}", bundle_src, args.boards, env)
            plain_all += plain
            bundle_all += bundled
            ratios.append(statistics.median(bundled) / statistics.median(plain))
            print(f"pair {i + 1}: plain {statistics.median(plain):.3f} s/board, bundle "
                  f"{statistics.median(bundled):.3f} s/board, ratio {ratios[-1]:.3f}")
        print(f"per board, median of {len(plain_all)} boards each: plain {statistics.median(plain_all):.3f} s, "
              f"bundle {statistics.median(bundle_all):.3f} s; median pair ratio bundle/plain "
              f"{statistics.median(ratios):.3f} (min {min(ratios):.3f}, max {max(ratios):.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
