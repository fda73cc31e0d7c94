"""A line of stations on one ledger, at scale, with faults (issue 24's goal: "8 stations x 4
simulated probes against one PostgreSQL on this machine: zero duplicate serials and zero lost rows
over 10,000 boards with faults injected"; "a station cut off from the database for 10 minutes
loses nothing and uploads its queue within 5 s of the return").

Real parts, really started: Debian's PostgreSQL in a temporary folder (tests/support/pgserver.py),
reached by every station through a TCP proxy (tests/support/tcpproxy.py); ``--stations`` real
``piflash station run`` processes with ``--probes`` simulated nRF52840 boards each, numbering
their boards from one counter (``serial_block`` numbers a lease); an operator (tests/support/line.py)
puts a new board into a bay once its station finished the one there, every 5th board faulty
(a flash bit that will not program: it fails verify). Faults, by boards finished on the line:
every ``--kill-every`` a station is SIGKILLed mid-board and started again; every
``--restart-every`` the database is stopped for 2 s and started again; every ``--cut-every``
the proxy drops every connection and refuses new ones for 2 s; ``--outage S`` once, at half the
run, cuts the network for S seconds (the stations keep flashing from the numbers they hold).

``--twins K``: the first K stations each get a twin, a station process configured with the same
``station:`` name and a history and bays of its own (a copied config): the ledger must refuse
its rows (queued at home, none under the name) while it numbers its boards from the same counter.
``--one-offs M``: M people at other machines run one-off ``piflash flash`` commands on boards of
their own, every second one with ``--ledger`` through the same proxy: only those rows may reach
the ledger (each once, under the person's one-off origin), the others stay at home.

Afterwards, and printed: boards by outcome, serial numbers issued twice (goal 0), rows lost
(sealed at a station, not in the ledger) and rows the ledger has that no station sealed (goal 0
each), each station's chain, leases left open, and after each network return the seconds until
every station's queue was in the ledger (goal <= 5 s), and the median seconds from a board's end
to its row's arrival in the ledger.

    python benchmarks/ledger_line.py [--stations 8] [--probes 4] [--boards 10000] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import statistics
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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--stations", type=int, default=8)
    ap.add_argument("--probes", type=int, default=4)
    ap.add_argument("--boards", type=int, default=10000, help="boards finished on the line before it stops")
    ap.add_argument("--block", type=int, default=16, help="serial numbers per lease")
    ap.add_argument("--kill-every", type=int, default=500)
    ap.add_argument("--restart-every", type=int, default=2000)
    ap.add_argument("--cut-every", type=int, default=1500)
    ap.add_argument("--outage", type=float, default=0.0, help="one network cut of this many seconds mid-run")
    ap.add_argument("--twins", type=int, default=0, help="stations that get a twin with the same name")
    ap.add_argument("--one-offs", type=int, default=0, help="people running one-off flashes beside the line")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)

    os.environ.setdefault("PIFLASH_SIM_DIR", tempfile.mkdtemp(prefix="piflash-line-sim-"))
    from support.line import Feeder, OneOffUser, finished_by_slot
    from support.pgserver import PgServer
    from support.stationkit import (
        StationProcess,
        rows,
        wait_for,
        write_config,
        write_profile,
    )
    from support.tcpproxy import TcpProxy

    from piflash.record.ledger import Ledger
    from piflash.sim import SimStore

    work = Path(tempfile.mkdtemp(prefix="piflash-line-"))
    pg = PgServer()
    proxy = TcpProxy(pg.port)
    url = f"postgresql://{pg.user}@127.0.0.1:{proxy.port}/postgres"
    store = SimStore()
    firmware = _firmware()
    stations = {}
    for i in range(args.stations):
        name = f"line-{i + 1}"
        d = work / name
        d.mkdir()
        bays = [f"s{i + 1}p{j + 1}" for j in range(args.probes)]
        for bay in bays:
            store.create(bay, "nrf52840")
        profile = write_profile(d, firmware, name="numbered", serial="{uicr_customer: 0, encoding: u32, start: 1}")
        config = write_config(d, profile, [f"sim:{b}" for b in bays], d / "history.sqlite3", ledger=url,
                              serials=d / "serials.sqlite3", serial_block=args.block, poll_interval=0.05)
        config.write_text(config.read_text().replace("station: test-line", f"station: {name}"))
        stations[name] = {"dir": d, "config": config, "bays": bays, "runs": 1,
                          "proc": StationProcess(config, d / "run1.log")}
    twins = {}
    for i in range(min(args.twins, args.stations)):
        name = f"line-{i + 1}"
        d = work / f"{name}-twin"
        d.mkdir()
        bays = [f"t{i + 1}p{j + 1}" for j in range(args.probes)]
        for bay in bays:
            store.create(bay, "nrf52840")
        profile = write_profile(d, firmware, name="numbered", serial="{uicr_customer: 0, encoding: u32, start: 1}")
        config = write_config(d, profile, [f"sim:{b}" for b in bays], d / "history.sqlite3", ledger=url,
                              serials=d / "serials.sqlite3", serial_block=args.block, poll_interval=0.05)
        config.write_text(config.read_text().replace("station: test-line", f"station: {name}"))
        twins[name] = {"dir": d, "config": config, "bays": bays, "proc": None}
    people = []
    for i in range(args.one_offs):
        store.create(f"desk{i + 1}", "nrf52840")
        people.append(OneOffUser(work / f"person{i + 1}.sqlite3", f"desk{i + 1}", firmware, url))
    feeder = Feeder(store, {s["dir"] / "history.sqlite3": s["bays"]
                            for s in list(stations.values()) + list(twins.values())}).start()
    if twins:
        # the line's stations have registered their names (a first board uploaded) before the
        # twins start, as when a copied config is started beside a running line
        wait_for(lambda: all(n in _registered(pg.url) for n in twins), "the twinned stations registered",
                 deadline=300, step=0.2)
        for t in twins.values():
            t["proc"] = StationProcess(t["config"], t["dir"] / "run1.log")
    for person in people:
        person.start()

    def finished() -> int:
        return sum(sum(finished_by_slot(s["dir"] / "history.sqlite3").values()) for s in stations.values())

    def sealed() -> dict:
        return {n: sum(finished_by_slot(s["dir"] / "history.sqlite3").values()) for n, s in stations.items()}

    def drain_time(since: float) -> float:
        """Seconds from ``since`` (the network's return) until every station's ledger head holds
        the rows the station had sealed at that moment (its queue; the boards finished after it
        are the next uploads, not the queue)."""
        queued = sealed()

        def drained() -> bool:
            with Ledger(pg.url) as db:
                heads = {h["origin"]: h["head_seq"] for h in db.histories() if h["holder"]}
            return all(heads.get(n, 0) >= queued[n] for n in stations)
        wait_for(drained, "the queues in the ledger", deadline=120, step=0.05)
        return round(time.monotonic() - since, 2)

    def away(go, back, seconds: float) -> float:
        """The database out of reach for ``seconds`` (``go()`` ... ``back()``); returns how long
        the queue took to reach the ledger after ``back()``."""
        go()
        time.sleep(seconds)
        back()
        return drain_time(time.monotonic())

    faults = {"kills": 0, "db_restarts": 0, "cuts": 0, "outage_s": args.outage}
    drains = []
    next_kill, next_restart, next_cut = args.kill_every, args.restart_every, args.cut_every
    outage_at = args.boards // 2 if args.outage else None
    start = time.monotonic()
    victim = 0
    try:
        while True:
            done = finished()
            if done >= args.boards:
                break
            if done >= next_kill:
                next_kill += args.kill_every
                name = list(stations)[victim % len(stations)]
                victim += 1
                s = stations[name]
                wait_for(lambda: any(r["outcome"] == "open" for r in rows(s["dir"] / "history.sqlite3",
                                                                           with_open=True)), "a board mid-flash",
                         deadline=60, step=0.01)
                s["proc"].kill()
                s["runs"] += 1
                s["proc"] = StationProcess(s["config"], s["dir"] / f"run{s['runs']}.log")
                faults["kills"] += 1
            if done >= next_restart:
                next_restart += args.restart_every
                faults["db_restarts"] += 1
                drains.append(("db restart", away(pg.stop, pg.start, 2)))
            if done >= next_cut:
                next_cut += args.cut_every
                faults["cuts"] += 1
                drains.append(("network cut 2 s", away(proxy.cut, proxy.mend, 2)))
            if outage_at is not None and done >= outage_at:
                outage_at = None
                drains.append((f"network cut {args.outage:g} s", away(proxy.cut, proxy.mend, args.outage)))
            time.sleep(0.2)
        feeder.close()
        for person in people:
            person.close()
        for s in list(stations.values()) + list(twins.values()):
            s["proc"].signal(signal.SIGTERM)
        codes = {n: s["proc"].wait(120) for n, s in stations.items()}
        codes.update({f"{n} (twin)": t["proc"].wait(120) for n, t in twins.items()})
        for person in people:      # what a cut left queued goes up with the next command: this one
            person.env["PIFLASH_LEDGER"] = pg.url
            import subprocess

            subprocess.run([sys.executable, "-m", "piflash", "ledger", "upload", "--file", str(person.history)],
                           env=person.env, capture_output=True, check=True, timeout=120)
        wall = time.monotonic() - start
        drains.append(("final", drain_time(time.monotonic())))
        local = {(n, r["id"]): r["row_hash"] for n, s in stations.items() for r in rows(s["dir"] / "history.sqlite3")}
        with Ledger(pg.url) as db:
            central = db.rows()
            chains = {n: not r.problems for n, r in db.verify_chains().items()}
            leases = db.leases()
            registered = {n: db.registration(n) for n in stations}
        # the line's stations' rows: those of the history each name is registered to
        mine = {n: r["history_id"] for n, r in registered.items() if r}
        ledger_keys = {(r["origin"], r["id"]): r["row_hash"] for r in central if mine.get(r["origin"]) == r["history_id"]}
        twin_local = {n: rows(t["dir"] / "history.sqlite3") for n, t in twins.items()}
        twin_ids = {n: _identity(t["dir"] / "history.sqlite3") for n, t in twins.items()}
        twin_in_ledger = sum(1 for r in central if r["history_id"] in twin_ids.values())
        person_ids = {_identity(p.history): p for p in people}
        person_rows = {hid: rows(p.history) for hid, p in person_ids.items()}
        one_off_in_ledger = [r for r in central if r["history_id"] in person_ids]
        # every number issued anywhere: the ledger's, and the twins' (which never reach it)
        serials = [r["serial"] for r in central if r["serial"] is not None]
        serials += [r["serial"] for rs in twin_local.values() for r in rs if r["serial"] is not None]
        outcomes: dict = {}
        for r in central:
            key = r["outcome"] if r["outcome"] != "fail" else f"fail {r['error_kind']}"
            outcomes[key] = outcomes.get(key, 0) + 1
        report = {
            "host": f"{platform.machine()} {os.cpu_count()} cores (x86 host preset: this machine)",
            "stations": args.stations, "probes_per_station": args.probes, "block": args.block,
            "boards": len(central), "outcomes": outcomes, "faults": faults,
            "duplicate_serials": len(serials) - len(set(serials)),
            "rows_lost": sum(1 for k, h in local.items() if ledger_keys.get(k) != h),
            "rows_unknown": sum(1 for k in ledger_keys if k not in local),
            "twins": {"stations": len(twins), "rows_sealed": sum(len(v) for v in twin_local.values()),
                      "rows_in_ledger": twin_in_ledger,
                      "refusals_logged": sum(t["dir"].joinpath("run1.log").read_text().count(
                          "ledger refuses this station's rows") for t in twins.values())},
            "one_offs": {"people": len(people), "commands": sum(p.runs for p in people),
                         "with_ledger": sum(p.asked for p in people),
                         "failed": sum(len(p.failed) for p in people),
                         "rows_in_ledger": len(one_off_in_ledger),
                         "rows_in_ledger_twice": len(one_off_in_ledger) - len({(r["history_id"], r["id"])
                                                                             for r in one_off_in_ledger}),
                         "asked_rows_lost": sum(p.asked for p in people) - len(one_off_in_ledger),
                         # run k (row #k: each command made one row, none failed) had --ledger
                         # when k % ledger_every == 0
                         "rows_not_asked_in_ledger": sum(
                             1 for r in one_off_in_ledger if r["id"] % person_ids[r["history_id"]].ledger_every),
                         "rows_at_home": sum(len(v) for v in person_rows.values()) - len(one_off_in_ledger)},
            "chains_intact": sum(chains.values()), "chains": len(chains),
            "leases": leases, "station_exit_codes": sorted(set(codes.values())),
            "queue_drained_s": drains,
            "queue_drained_s_max_after_fault": max([t for w, t in drains if w != "final"], default=None),
            "wall_s": round(wall, 1), "boards_per_hour": round(len(central) / wall * 3600),
        }
        lags = _upload_lags(pg.url)
        report["median_upload_lag_s"] = round(statistics.median(lags), 3) if lags else None
    finally:
        feeder.close()
        for person in people:
            person.stop.set()
        for s in list(stations.values()) + list(twins.values()):
            if s["proc"] is not None and s["proc"].proc.poll() is None:
                s["proc"].kill()
        proxy.close()
        pg.close()
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        for k, v in report.items():
            print(f"{k:<36} {v}")
    oneoff = report["one_offs"]
    ok = (report["duplicate_serials"] == 0 and report["rows_lost"] == 0 and report["rows_unknown"] == 0
          and report["chains_intact"] == report["chains"] and report["leases"]["open"] == 0
          and report["twins"]["rows_in_ledger"] == 0 and oneoff["asked_rows_lost"] == 0
          and oneoff["rows_in_ledger_twice"] == 0 and oneoff["failed"] == 0
          and oneoff["rows_not_asked_in_ledger"] == 0)
    return 0 if ok else 1


def _registered(url) -> set:
    """The station names the ledger has registered (none before its tables exist)."""
    import psycopg

    try:
        with psycopg.connect(url) as db:
            return {r[0] for r in db.execute("SELECT name FROM ledger_stations").fetchall()}
    except psycopg.errors.UndefinedTable:
        return set()


def _identity(history: Path) -> str:
    """A history file's identity (its ``meta`` table), read with plain sqlite3."""
    import sqlite3

    db = sqlite3.connect(f"file:{history}?mode=ro", uri=True, timeout=30)
    try:
        return db.execute("SELECT value FROM meta WHERE key = 'identity'").fetchone()[0]
    finally:
        db.close()


def _upload_lags(url):
    """Seconds from each board's end to its row's arrival in the ledger (faults included)."""
    import psycopg

    with psycopg.connect(url) as db:
        return [u - e for u, e in db.execute("SELECT uploaded_at, ended_at FROM ledger_operations "
                                               "WHERE ended_at IS NOT NULL").fetchall()]


if __name__ == "__main__":
    sys.exit(main())
