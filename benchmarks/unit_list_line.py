"""A line of stations sharing one CSV list of per-unit values through the ledger (issue 39's goal:
"2 stations x 2 simulated probes consuming a 200-row CSV with every 5th board faulty and one
station SIGKILLed mid-board: every row used at most once, none lost, and each used row names
its board in the ledger").

Real parts, really started: Debian's PostgreSQL in a temporary folder (tests/support/pgserver.py);
``--stations`` real ``piflash station run`` processes with ``--probes`` simulated nRF52840 boards
each, whose profile takes a MAC address (UICR) and a secret key (flash) from one ``--rows``-row
CSV, leased from the ledger ``--block`` rows at a time; an operator (tests/support/line.py) puts a
new board into a bay once its station finished the one there, every 5th board faulty (a flash
bit that will not program: it fails verify after programming, so it keeps its row). Once
``--kill-at`` boards are finished a station is SIGKILLed mid-board and started again. The line
runs until the list is used up: each station then stops by itself (exit 22).

Afterwards, and printed, from the ledger: its list rows by state (``ledger_unit_rows``), rows
named by two boards (goal 0), rows lost (neither used nor free nor never leased; goal 0: with
the list used up, every row is used), used rows whose board (``target_uid``) is not the board of
the ledger row that names them (goal 0), used rows no ledger row names (goal 0), secret keys
found in the ledger (goal 0), open leases (goal 0).

    python benchmarks/unit_list_line.py [--stations 2] [--probes 2] [--rows 200] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))


def _firmware() -> Path:
    built = REPO / "tests" / "firmware" / "build" / "nrf52840" / "firmware.hex"
    if not built.exists():
        import subprocess

        subprocess.run(["make", "-s", "-C", str(REPO / "tests" / "firmware")], check=True)
    return built


PROFILE = """target: nrf52840
firmware: {firmware}
patch:
  - name: mac
    uicr_customer: 0
    encoding: hex
    length: 6
    list: {units}
  - name: key
    address: 0x000FF100
    encoding: hex
    length: 16
    list: {units}
    secret: true
"""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--stations", type=int, default=2)
    ap.add_argument("--probes", type=int, default=2)
    ap.add_argument("--rows", type=int, default=200)
    ap.add_argument("--block", type=int, default=8, help="list rows per lease")
    ap.add_argument("--kill-at", type=int, default=None, help="boards finished before the kill (default rows/2)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    kill_at = args.kill_at if args.kill_at is not None else args.rows // 2

    os.environ.setdefault("PIFLASH_SIM_DIR", tempfile.mkdtemp(prefix="piflash-list-sim-"))
    from support.line import Feeder, finished_by_slot
    from support.pgserver import PgServer
    from support.stationkit import StationProcess, wait_for, write_config

    from piflash.sim import SimStore

    work = Path(tempfile.mkdtemp(prefix="piflash-list-line-"))
    units = work / "units.csv"
    keys = [os.urandom(16).hex() for _ in range(args.rows)]
    units.write_text("mac,key\n" + "".join(f"02:00:00:00:{i // 256:02x}:{i % 256:02x},{keys[i - 1]}\n"
                                           for i in range(1, args.rows + 1)))
    pg = PgServer()
    store = SimStore()
    stations = {}
    for i in range(args.stations):
        name = f"line-{i + 1}"
        d = work / name
        d.mkdir()
        bays = [f"s{i + 1}p{j + 1}" for j in range(args.probes)]
        for bay in bays:
            store.create(bay, "nrf52840")
        profile = d / "listed.yaml"
        profile.write_text(PROFILE.format(firmware=_firmware(), units=units))
        config = write_config(d, profile, [f"sim:{b}" for b in bays], d / "history.sqlite3", ledger=pg.url,
                              serials=d / "serials.sqlite3", serial_block=args.block, poll_interval=0.05)
        config.write_text(config.read_text().replace("station: test-line", f"station: {name}"))
        stations[name] = {"dir": d, "config": config, "runs": 1, "proc": StationProcess(config, d / "run1.log"),
                          "bays": bays}
    feeder = Feeder(store, {s["dir"] / "history.sqlite3": s["bays"] for s in stations.values()}).start()

    def finished() -> int:
        return sum(sum(finished_by_slot(s["dir"] / "history.sqlite3").values()) for s in stations.values())

    start = time.monotonic()
    killed = None
    codes = {}
    try:
        while any(s["proc"].proc.poll() is None for s in stations.values()):
            if killed is None and finished() >= kill_at:
                killed, s = next(iter(stations.items()))
                from support.stationkit import rows as history_rows

                wait_for(lambda: any(r["outcome"] == "open" for r in history_rows(s["dir"] / "history.sqlite3",
                                                                                   with_open=True)),
                         "a board mid-flash", deadline=60, step=0.01)
                s["proc"].kill()
                s["runs"] += 1
                s["proc"] = StationProcess(s["config"], s["dir"] / f"run{s['runs']}.log")
            if time.monotonic() - start > 3600:
                raise SystemExit("the line did not use up its list within an hour")
            time.sleep(0.2)
        wall = time.monotonic() - start
        feeder.close()
        codes = {n: s["proc"].wait(60) for n, s in stations.items()}
        report = _report(pg.url, args, keys, wall, codes, killed, stations)
    finally:
        feeder.close()
        for s in stations.values():
            if s["proc"].proc.poll() is None:
                s["proc"].kill()
        pg.close()
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        for k, v in report.items():
            print(f"{k:<34} {v}")
    ok = all(report[k] == 0 for k in ("rows_on_two_boards", "rows_lost", "rows_board_mismatch",
                                      "rows_used_unrecorded", "secrets_in_ledger", "leases_open"))
    return 0 if ok else 1


def _report(url: str, args, keys, wall: float, codes, killed, stations) -> dict:
    import psycopg

    with psycopg.connect(url) as db:
        unit = {int(r): (s, uid) for r, s, uid in db.execute("SELECT row, state, target_uid FROM ledger_unit_rows")}
        (total, granted), = db.execute("SELECT rows, next FROM ledger_unit_lists").fetchall()
        ops = db.execute("SELECT patch, target_uid, outcome, origin FROM ledger_operations").fetchall()
        leases_open = db.execute("SELECT count(*) FROM ledger_unit_leases WHERE state = 'open'").fetchone()[0]
        text = " ".join(str(v) for row in db.execute("SELECT * FROM ledger_operations").fetchall() for v in row)
    named: dict = {}
    outcomes: dict = {}
    for patch, uid, outcome, _origin in ops:
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        if not patch:
            continue
        row = json.loads(patch)["mac"]["row"]
        named.setdefault(row, []).append((outcome, uid))
    states: dict = {}
    for s, _ in unit.values():
        states[s] = states.get(s, 0) + 1
    used = {r: uid for r, (s, uid) in unit.items() if s in ("pass", "fail", "interrupted")}
    free = {r for r, (s, _) in unit.items() if s == "free"} | set(range(granted + 1, total + 1))
    return {
        "host": f"{platform.machine()} {os.cpu_count()} cores (x86 host preset: this machine)",
        "stations": args.stations, "probes_per_station": args.probes, "rows": total, "block": args.block,
        "killed_mid_board": killed,
        "ledger_rows_by_outcome": outcomes,
        "list_rows_by_state": states,
        "rows_used": len(used), "rows_free_or_never_leased": len(free),
        "rows_on_two_boards": sum(1 for v in named.values() if len(v) > 1),
        "rows_lost": total - len(used) - len(free),
        "rows_board_mismatch": sum(1 for r, uid in used.items() if r in named and named[r][0][1] != uid),
        "rows_used_unrecorded": sum(1 for r in used if r not in named),
        "secrets_in_ledger": sum(1 for k in keys if k in text),
        "leases_open": leases_open,
        "station_exit_codes": sorted(set(codes.values())),
        "station_runs": {n: s["runs"] for n, s in stations.items()},
        "wall_s": round(wall, 1), "boards_per_hour": round(len(ops) / wall * 3600),
    }


if __name__ == "__main__":
    sys.exit(main())
