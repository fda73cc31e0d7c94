"""``piflash ledger status | verify-chain | report``: the central ledger of a line's stations
(PostgreSQL, :mod:`piflash.record.ledger`)."""

from __future__ import annotations

import csv
import sys
from collections import defaultdict
from datetime import datetime

import click

from piflash.cli.options import CONTEXT, EXIT_CODES_EPILOG, emit_json, handles_errors

ledger_option = click.option(
    "--ledger",
    "url",
    metavar="URL",
    envvar="PIFLASH_LEDGER",
    help="The ledger: postgresql://USER@HOST[:PORT]/DATABASE [default: $PIFLASH_LEDGER].",
)


def _open(url):
    from piflash.record.ledger import Ledger

    if not url:
        raise click.UsageError("no ledger: give --ledger postgresql://... or set PIFLASH_LEDGER")
    return Ledger(url)


@click.group(context_settings=CONTEXT, epilog=EXIT_CODES_EPILOG)
def ledger():
    """The central ledger of a line's stations on PostgreSQL (docs/ledger.md)."""


@ledger.command(context_settings=CONTEXT, epilog=EXIT_CODES_EPILOG)
@ledger_option
@click.option(
    "--file",
    "path",
    type=click.Path(dir_okay=False),
    help="This station's history, to count its queue [default: the history piflash uses].",
)
@click.option("--station", metavar="NAME", help="The station's name in the ledger [default: this host's name].")
@handles_errors
def status(url, path, station):
    """What the ledger holds per station, and what this station's history still queues for it."""
    import socket

    from piflash.record.history import History

    station = station or socket.gethostname()
    with _open(url) as db:
        stations = {s: db.head(s) for s in db.stations()}
        head = stations.get(station, 0)
        db.expire_leases()
        leases = db.leases()
    with History(path) as hist:
        local = hist.head_seq()
    queued = max(0, local - head)
    for s, h in stations.items():
        click.echo(f"{s:<24} {h:>8} rows")
    click.echo(
        f"serial leases: {leases['open']} open, {leases['closed']} closed, {leases['lost']} lost by "
        f"stations that crashed ({leases['lost_numbers']} numbers never issued), {leases['expired']} "
        f"expired ({leases['expired_numbers']} numbers not seen in the ledger's rows)"
    )
    click.echo(f"this station ({station}): {local} sealed rows, {queued} queued for the ledger")


@ledger.command("verify-chain", context_settings=CONTEXT, epilog=EXIT_CODES_EPILOG)
@ledger_option
@handles_errors
def verify_chain(url):
    """Check every station's hash chain in the ledger: exit 0, or 19 naming the station and the
    first row that was edited, deleted or inserted."""
    from piflash.errors import HistoryChainError

    with _open(url) as db:
        reports = db.verify_chains()
    broken = {s: r for s, r in reports.items() if r.problems}
    for s, r in reports.items():
        click.echo(f"{s:<24} {'intact' if not r.problems else 'BROKEN'}: {r.sealed} rows, head seq {r.head_seq}")
    if broken:
        s, r = next(iter(broken.items()))
        raise HistoryChainError(
            f"station {s}: {r.problems[0].detail} (and {len(r.problems) - 1} more)"
            if len(r.problems) > 1
            else f"station {s}: {r.problems[0].detail}",
            r,
            hint="compare with that station's own history: piflash history verify-chain",
        )


def report_rows(rows):
    """Per station, profile and day: boards, passed, yield, first-pass yield, serial range,
    failures by cause. ``rows``: ledger rows (dicts). A board is a target unique ID; it passed the
    first time when its first flash row passed."""
    groups = defaultdict(list)
    for r in rows:
        if r["operation"] != "flash":
            continue
        day = datetime.fromtimestamp(r["started_at"]).astimezone().date().isoformat()
        groups[(r["origin"], r["profile"] or "", day)].append(r)
    out = []
    for (station, profile, day), rs in sorted(groups.items()):
        boards = {}
        for r in sorted(rs, key=lambda r: r["seq"]):
            boards.setdefault(r["target_uid"], []).append(r)
        passed = sum(1 for b in boards.values() if any(r["outcome"] == "pass" for r in b))
        first = sum(1 for b in boards.values() if b[0]["outcome"] == "pass")
        serials = sorted(int(r["serial"]) for r in rs if (r["serial"] or "").isdigit())
        causes = defaultdict(int)
        for r in rs:
            if r["outcome"] in ("fail", "interrupted"):
                causes[r["error_kind"] or r["outcome"]] += 1
        n = len(boards)
        out.append(
            {
                "station": station,
                "profile": profile,
                "day": day,
                "boards": n,
                "passed": passed,
                "yield": round(passed / n, 4) if n else None,
                "first_pass_yield": round(first / n, 4) if n else None,
                "serial_first": serials[0] if serials else None,
                "serial_last": serials[-1] if serials else None,
                "failures": dict(sorted(causes.items())),
            }
        )
    return out


@ledger.command(context_settings=CONTEXT, epilog=EXIT_CODES_EPILOG)
@ledger_option
@click.option("--json", "json_mode", is_flag=True, help="Print JSON.")
@click.option("--csv", "csv_mode", is_flag=True, help="Print CSV.")
@handles_errors
def report(url, json_mode, csv_mode):
    """The line's yield per station, profile and day: boards, passed, yield, first-pass yield,
    serial range, failures by cause."""
    if json_mode and csv_mode:
        raise click.UsageError("--csv and --json exclude each other")
    with _open(url) as db:
        rows = report_rows(db.rows())
    if json_mode:
        emit_json({"report": rows})
        return
    if csv_mode:
        out = csv.DictWriter(sys.stdout, fieldnames=list(rows[0]) if rows else ["station"], lineterminator="\n")
        out.writeheader()
        for r in rows:
            out.writerow(dict(r, failures=" ".join(f"{k}={v}" for k, v in r["failures"].items())))
        return
    for r in rows:
        serials = f"serials {r['serial_first']}-{r['serial_last']}" if r["serial_first"] is not None else "no serials"
        causes = ", ".join(f"{k} {v}" for k, v in r["failures"].items()) or "no failures"
        click.echo(
            f"{r['day']}  {r['station']:<16} {r['profile']:<16} {r['boards']:>5} boards, {r['passed']:>5} passed, "
            f"yield {r['yield']:.1%}, first pass {r['first_pass_yield']:.1%}, {serials}; {causes}"
        )
