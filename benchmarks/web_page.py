"""The operator's page (issue 44): how soon a slot's change reaches the page, and how fast the
page loads with 500 history rows, both measured in the browser.

A real station (``python -m piflash station run --plain``) serves one simulated nRF52840 slot with
``web_port:``, its history filled beforehand with ``--rows`` rows (History.record, station name the
same: the page's table shows the last 20 of them). Debian's headless Chromium
(``/usr/bin/chromium``), driven by Playwright, opens the page; then:

- **load**: ``--loads`` fresh pages, each timed from navigation start to the first status drawn
  (the page's first server-sent event rendered, ``performance.now()``), with ``loadEventEnd``;
- **latency**: ``--boards`` boards are swapped onto the fixture, one after the other; each status
  the page draws carries the station's ``updated_at`` (the moment the station wrote the file, ms),
  and the page notes ``Date.now()`` once it has drawn it: the difference is the change-to-page
  latency (same machine, same clock). Every update counts: states, progress and results.

    python benchmarks/web_page.py [--rows 500] [--boards 10] [--loads 10] [--json]

Goals (issue 44): a change within 1 s, a load within 1 s with 500 history rows.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fill_history(path: Path, rows: int, station: str) -> None:
    """``rows`` finished rows of ``station`` in a new history (pass, every tenth a fail)."""
    from piflash.record.history import History
    from piflash.record.result import OperationResult

    hist = History(path)
    for i in range(rows):
        ok = i % 10 != 9
        res = OperationResult(operation="flash", probe_id="sim:bay", target="nrf52840", target_uid=f"{i:016x}",
                              firmware="/fw/app.hex", firmware_sha256="ab" * 32, image_bytes=12748, ok=ok,
                              started_at=time.time(), duration=0.4, durations={"connect": 0.1, "program": 0.2},
                              serial=str(1000 + i))
        hist.record(res, station=station)
    hist.close()


def _ms(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp() * 1000


def pct(values, q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=500)
    ap.add_argument("--boards", type=int, default=10)
    ap.add_argument("--loads", type=int, default=10)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    from playwright.sync_api import sync_playwright

    build = Path(os.environ.get("PIFLASH_TEST_FIRMWARE") or REPO / "tests" / "firmware" / "build")  # as the tests
    firmware = build / "nrf52840" / "firmware.hex"
    if not firmware.exists():
        raise SystemExit(f"{firmware} is missing: run scripts/build-test-firmware.sh first")
    work = Path(tempfile.mkdtemp(prefix="web-page-"))
    env = dict(os.environ, PIFLASH_SIM_DIR=str(work / "sim"), PIFLASH_HISTORY=str(work / "history.sqlite3"))
    env.pop("RUNTIME_DIRECTORY", None)
    fill_history(work / "history.sqlite3", args.rows, "bench")
    subprocess.run([sys.executable, "-m", "piflash", "sim", "create", "bay", "--target", "nrf52840"],
                   env=env, check=True, capture_output=True)
    port = _free_port()
    (work / "board.yaml").write_text(f"target: nrf52840\nfirmware: {firmware}\n")
    (work / "station.yaml").write_text(
        f'station: bench\nprofile: board.yaml\nprobes: ["sim:bay"]\npoll_interval: 0.1\n'
        f"history: {work / 'history.sqlite3'}\nweb_port: {port}\n")
    log = open(work / "station.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "piflash", "station", "run", "--plain", "--config",
                             str(work / "station.yaml")], env=env, stdout=log, stderr=subprocess.STDOUT)
    sys.path.insert(0, str(REPO))
    from piflash.sim import SimStore

    os.environ["PIFLASH_SIM_DIR"] = env["PIFLASH_SIM_DIR"]
    store = SimStore()

    def passes() -> int:
        return (work / "station.log").read_text().count(": PASS ")

    def wait(cond, what, deadline=120.0):
        end = time.monotonic() + deadline
        while not cond():
            if proc.poll() is not None or time.monotonic() > end:
                raise SystemExit(f"{what}:\n" + (work / "station.log").read_text())
            time.sleep(0.05)

    try:
        wait(lambda: passes() >= 1, "the first board was not flashed")
        url = f"http://127.0.0.1:{port}/"
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True)
            loads, load_events = [], []
            for _ in range(args.loads):
                page = browser.new_page(viewport={"width": 800, "height": 480})
                page.add_init_script("""addEventListener('DOMContentLoaded', () => new MutationObserver((m, o) => {
                    if (document.querySelector('#recent tbody tr')) { window.firstDrawn = performance.now(); o.disconnect(); }
                  }).observe(document.body, {childList: true, subtree: true}));""")
                page.goto(url)
                page.wait_for_function("() => window.firstDrawn !== undefined && performance.timing.loadEventEnd > 0")
                assert page.locator("#recent tbody tr").count() == 20
                loads.append(page.evaluate("window.firstDrawn"))
                load_events.append(page.evaluate("performance.getEntriesByType('navigation')[0].loadEventEnd"))
                page.close()
            page = browser.new_page(viewport={"width": 800, "height": 480})
            page.goto(url)
            page.wait_for_function("() => window.piflashUpdates.length > 0")
            start = page.evaluate("window.piflashUpdates.length")
            for i in range(args.boards):
                done = passes()
                store.swap("bay")
                wait(lambda d=done: passes() > d, f"board {i + 2} was not flashed")
                time.sleep(0.5)  # the PASS reaches the page
            updates = page.evaluate("window.piflashUpdates.map(u => [u.updated_at, u.shown_ms])")[start:]
            browser.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
    lat = [shown - _ms(at) for at, shown in updates]
    out = {
        "history_rows": args.rows,
        "loads": len(loads),
        "load_first_status_ms": {"median": round(statistics.median(loads), 1), "max": round(max(loads), 1)},
        "load_event_end_ms": {"median": round(statistics.median(load_events), 1), "max": round(max(load_events), 1)},
        "boards": args.boards,
        "updates": len(lat),
        "latency_ms": {"median": round(statistics.median(lat), 1), "p95": round(pct(lat, 0.95), 1),
                       "max": round(max(lat), 1)},
    }
    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    print(f"page load with {args.rows} history rows, {len(loads)} loads: first status drawn median "
          f"{out['load_first_status_ms']['median']} ms, max {out['load_first_status_ms']['max']} ms; "
          f"loadEventEnd median {out['load_event_end_ms']['median']} ms")
    print(f"change to page, {len(lat)} updates over {args.boards} boards: median {out['latency_ms']['median']} ms, "
          f"p95 {out['latency_ms']['p95']} ms, max {out['latency_ms']['max']} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
