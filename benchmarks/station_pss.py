"""Memory of a 4-probe station: total PSS of the station and its worker processes, threads vs
processes (issue 20: "A 4-probe station's total PSS <= 180 MiB", measured as PSS, not RSS).

PSS (proportional set size, ``/proc/PID/smaps_rollup``, Linux 4.14+) charges each shared page to
the processes that map it in equal parts, so the sum over the station and its workers counts the
pages the worker processes share with the station (pyOCD, the firmware image: forked after they
were loaded) once, as the kernel spends them; RSS would count them once per process.

For each mode, a station (``python -m piflash station run --plain``) serves N simulated nRF52840
boards (``sim:`` probes, the simulator in each worker's process); once every board has been
flashed and the station waits for the next ones, the PSS of the station and its children is
summed, sampled ``--samples`` times 0.5 s apart, and the largest sum is reported. The simulator
(unicorn, the board models) runs inside the workers here; on a real station the probes are USB
and that memory is not there, so these figures are an upper bound of the real station's.

With ``--web`` each mode runs twice, without and with the operator's page (``web_port:``, issue
44: "the page adds <= 25 MiB PSS"); with the page, one client holds its event stream open (as a
page on the bench does) and the page's files are fetched once before sampling, so the server's
code paths have run. ``--modes`` picks the modes.

    python benchmarks/station_pss.py [--probes 4] [--samples 6] [--web] [--modes threads,processes] [--kind sim|spidev] [--json]

``--kind spidev`` puts each board behind a simulated spidev instead (``PIFLASH_SIM_PINS``, issue
43: the station's slots are ``spidev:0.0``, ``spidev:1.0``...): the same simulator in the workers,
plus python-periphery and the bit-level SWD line.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MIB = 1 << 20


def pss_kib(pid: int) -> int:
    """PSS of process ``pid`` in KiB (0 once it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except OSError:
        return 0
    return 0


def rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return 0
    return 0


def children(pid: int):
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _page_client(port: int):
    """Fetch the page and its files once, then hold ``/events`` open (returns the connection)."""
    import http.client

    for path in ("/", "/static/app.js", "/static/style.css", "/status.json"):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", path)
        resp = conn.getresponse()
        resp.read()
        conn.close()
        if resp.status != 200:
            raise SystemExit(f"GET {path}: {resp.status}")
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", "/events")
    resp = conn.getresponse()
    resp.readline()  # the stream is open and speaking
    return conn


def run(mode: str, probes: int, samples: int, firmware: Path, web: bool = False, kind: str = "sim") -> dict:
    work = Path(tempfile.mkdtemp(prefix=f"station-pss-{mode}-"))
    port = _free_port()
    env = dict(os.environ, PIFLASH_SIM_DIR=str(work / "sim"), PIFLASH_HISTORY=str(work / "history.sqlite3"))
    names = [f"bay{i}" for i in range(probes)]
    ids = [f"sim:{n}" for n in names]
    if kind == "spidev":
        ids = [f"spidev:{i}.0" for i in range(probes)]
        env["PIFLASH_SIM_PINS"] = ",".join(f"{n}@{p}" for n, p in zip(names, ids))
    for name in names:
        subprocess.run([sys.executable, "-m", "piflash", "sim", "create", name, "--target", "nrf52840"],
                       env=env, check=True, capture_output=True)
    (work / "board.yaml").write_text(f"target: nrf52840\nfirmware: {firmware}\n")
    (work / "station.yaml").write_text(
        "station: pss\nprofile: board.yaml\nprobes: [" + ", ".join(f'"{p}"' for p in ids) + "]\n"
        f"poll_interval: 0.1\nhistory: {work / 'history.sqlite3'}\nworkers: {mode}\n"
        + (f"web_port: {port}\n" if web else ""))
    log = open(work / "station.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "piflash", "station", "run", "--plain", "--config",
                             str(work / "station.yaml")], env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while (work / "station.log").read_text().count(": PASS ") < probes:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("station did not flash every board:\n" + (work / "station.log").read_text())
            time.sleep(0.2)
        client = _page_client(port) if web else None
        best = {"pss_mib": 0.0}
        for _ in range(samples):
            time.sleep(0.5)
            pids = [proc.pid] + children(proc.pid)
            pss = sum(pss_kib(p) for p in pids) / 1024
            if pss > best["pss_mib"]:
                best = {"pss_mib": round(pss, 1), "rss_sum_mib": round(sum(rss_kib(p) for p in pids) / 1024, 1),
                        "processes": len(pids)}
        if client is not None:
            client.close()
        return {"mode": mode + ("+web" if web else ""), "kind": kind, "probes": probes, **best}
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--probes", type=int, default=4)
    ap.add_argument("--samples", type=int, default=6)
    ap.add_argument("--web", action="store_true", help="each mode without and with the operator's page")
    ap.add_argument("--modes", default="threads,processes")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--kind", choices=("sim", "spidev"), default="sim", help="the slots' probe kind")
    ap.add_argument("--firmware", type=Path, help="the nRF52840 image (default: the test firmware's build)")
    args = ap.parse_args(argv)
    build = Path(os.environ.get("PIFLASH_TEST_FIRMWARE") or REPO / "tests" / "firmware" / "build")  # as the tests
    firmware = args.firmware or build / "nrf52840" / "firmware.hex"
    if not firmware.exists():
        raise SystemExit(f"{firmware} is missing: run scripts/build-test-firmware.sh first")
    rows = []
    for mode in args.modes.split(","):
        rows.append(run(mode, args.probes, args.samples, firmware, kind=args.kind))
        if args.web:
            rows.append(run(mode, args.probes, args.samples, firmware, web=True, kind=args.kind))
            rows[-1]["web_added_pss_mib"] = round(rows[-1]["pss_mib"] - rows[-2]["pss_mib"], 1)
    if args.json:
        print(json.dumps({"rows": rows}, indent=1))
        return 0
    print("%-14s %6s %10s %14s %9s" % ("workers", "probes", "PSS MiB", "sum RSS MiB", "processes"))
    for r in rows:
        print("%-14s %6d %10.1f %14.1f %9d" % (r["mode"], r["probes"], r["pss_mib"], r["rss_sum_mib"], r["processes"])
              + (f"   page adds {r['web_added_pss_mib']:.1f} MiB" if "web_added_pss_mib" in r else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
