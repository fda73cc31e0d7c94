"""``piflash ledger status | verify-chain | report | upload | takeover | publish``: the central ledger of a
line's stations (PostgreSQL, :mod:`piflash.record.ledger`)."""

from __future__ import annotations

import csv
import sys
from collections import Counter, defaultdict
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


history_option = click.option(
    "--file",
    "path",
    type=click.Path(dir_okay=False),
    help="This machine's history [default: the history piflash uses].",
)


@ledger.command(context_settings=CONTEXT, epilog=EXIT_CODES_EPILOG)
@ledger_option
@history_option
@click.option("--station", metavar="NAME", help="The station's name in the ledger [default: this host's name].")
@handles_errors
def status(url, path, station):
    """What the ledger holds per station, and what this station's history still queues for it:
    for the station NAME, and for the one-off origin (PIFLASH_STATION or one-off:HOST:ID8) this
    history's one-off rows go up under."""
    import socket

    from piflash import settings
    from piflash.cli.tables import echo_wrapped
    from piflash.record.history import History
    from piflash.record.ledger import one_off_origin

    host = socket.gethostname()
    station = station or host
    with _open(url) as db:
        histories = db.histories()
        db.expire_leases()
        leases = db.leases()
        holder = db.registration(station)
    with History(path) as hist:
        local, mine, asked = hist.head_seq(), hist.identity, len(hist.asked_rows(limit=1 << 62))
    head = max((h["head_seq"] for h in histories if (h["origin"], h["history_id"]) == (station, mine)), default=0)
    queued = max(0, local - head)
    several = {h["origin"] for h in histories if sum(1 for g in histories if g["origin"] == h["origin"]) > 1}
    for h in histories:
        label = f"{h['origin']} (history {str(h['history_id'])[:8]})" if h["origin"] in several else h["origin"]
        note = "" if h["holder"] or h["kind"] is None else " (before a takeover)"
        click.echo(f"{label:<24} {h['rows']:>8} rows{note}")
    echo_wrapped(
        f"serial leases: {leases['open']} open, {leases['closed']} closed, {leases['lost']} lost by "
        f"stations that crashed ({leases['lost_numbers']} numbers never issued), {leases['expired']} "
        f"expired ({leases['expired_numbers']} numbers not seen in the ledger's rows)"
    )
    elsewhere = [h for h in histories if h["history_id"] == mine and h["origin"] != station]
    if not elsewhere:
        echo_wrapped(f"this station ({station}): {local} sealed rows, {queued} queued for the ledger")
    else:
        # This history's rows went up under other origins (a one-off's, with --all-history): the
        # station NAME's count alone read as if they had not gone up at all (issue 41).
        echo_wrapped(f"this history ({str(mine)[:8]}): {local} sealed rows, in the ledger under:")
        for h in elsewhere:
            echo_wrapped(f"  {h['origin']} ({h['kind'] or 'unregistered'}): {h['rows']} rows, head seq {h['head_seq']}")
        if head:
            echo_wrapped(f"  {station} (station): head seq {head}, {queued} queued for it")
        elif holder is not None and holder["history_id"] == mine:
            echo_wrapped(f"  {station} ({holder['kind']}): no rows yet, {queued} queued for it")
        else:
            echo_wrapped(
                f"this station ({station}): none of this history's rows; {queued} would go up under "
                f"{station} only if a station named {station} ran on this history"
            )
    if asked:
        origin = settings.PIFLASH_STATION.value() or one_off_origin(host, str(mine))
        echo_wrapped(
            f"one-off rows of this history queued for the ledger under {origin}: {asked} (piflash ledger upload)"
        )


@ledger.command(context_settings=CONTEXT, epilog=EXIT_CODES_EPILOG)
@ledger_option
@history_option
@click.option(
    "--all-history",
    is_flag=True,
    help="Every sealed row of the history, not only those of the commands run with a ledger.",
)
@handles_errors
def upload(url, path, all_history):
    """Upload this history's one-off rows the ledger has not got: those of the commands run with a
    ledger (--ledger, PIFLASH_LEDGER), or with --all-history every row, under the origin
    PIFLASH_STATION or one-off:HOST:ID8 (a station uploads its own rows)."""
    from piflash.record.history import History
    from piflash.record.ledger import one_off_upload

    with _open(url) as db, History(path) as hist:
        origin, new = one_off_upload(db, hist, all_history=all_history)
    click.echo(f"{new} rows uploaded to the ledger under {origin}")


@ledger.command(context_settings=CONTEXT, epilog=EXIT_CODES_EPILOG)
@ledger_option
@history_option
@click.argument("station")
@handles_errors
def takeover(url, path, station):
    """Register the station name STATION to this machine and its history, on purpose: the
    replacement of a station that is gone. Recorded in the ledger (who, when, the old machine and
    history); the old rows stay under the name, this history's go up beside them. Give the
    station's history with --file (its config's 'history:') unless it is the default one."""
    import socket

    from piflash.record.history import History

    host = socket.gethostname()
    with History(path) as hist:
        mine = hist.identity
    with _open(url) as db:
        old = db.takeover(station, host, str(mine))
    if old is None:
        click.echo(f"station {station} registered to {host} (history {str(mine)[:8]}); it was nobody's")
    elif (old["host"], old["history_id"]) == (host, mine):
        click.echo(f"station {station} was already {host}'s (history {str(mine)[:8]}); the takeover is recorded")
    else:
        click.echo(
            f"station {station} taken over by {host} (history {str(mine)[:8]}) from {old['host'] or 'rows from before registrations'} "
            f"(history {str(old['history_id'])[:8]}); recorded in ledger_takeovers"
        )


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


def report_rows(rows, by="station"):
    """Per station, profile and day (``by`` ``station``), or per job bundle (``by`` ``bundle``:
    ``bundle_sha256`` and ``bundle_version``, None for the rows flashed without a bundle, with the
    stations that flashed it): boards, passed, yield, first-pass yield, serial range, failures by
    cause. ``rows``: ledger rows (dicts). A board is a target unique ID; it passed the first time
    when its first flash row passed."""
    groups = defaultdict(list)
    for r in rows:
        if r["operation"] != "flash":
            continue
        if by == "bundle":
            groups[(r["bundle_version"] or 0, r["bundle_sha256"] or "")].append(r)
            continue
        day = datetime.fromtimestamp(r["started_at"]).astimezone().date().isoformat()
        groups[(r["origin"], r["profile"] or "", day)].append(r)
    out = []
    for key, rs in sorted(groups.items()):
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
        if by == "bundle":
            head = {
                "bundle_sha256": key[1] or None,
                "bundle_version": key[0] or None,
                "stations": sorted({str(r["origin"]) for r in rs}),
            }
        else:
            head = dict(zip(("station", "profile", "day"), key))
        out.append(
            head
            | {
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
@click.option(
    "--by",
    type=click.Choice(["station", "bundle"]),
    default="station",
    show_default=True,
    help="Group per station, profile and day, or per job bundle (bundle_sha256, bundle_version).",
)
@handles_errors
def report(url, json_mode, csv_mode, by):
    """The line's yield per station, profile and day (or with --by bundle per job bundle): boards,
    passed, yield, first-pass yield, serial range, failures by cause."""
    if json_mode and csv_mode:
        raise click.UsageError("--csv and --json exclude each other")
    with _open(url) as db:
        held = db.rows()
    rows = report_rows(held, by)
    if json_mode:
        emit_json({"report": rows})
        return
    if csv_mode:
        out = csv.DictWriter(sys.stdout, fieldnames=list(rows[0]) if rows else ["station"], lineterminator="\n")
        out.writeheader()
        for r in rows:
            flat = dict(r, failures=" ".join(f"{k}={v}" for k, v in r["failures"].items()))
            if "stations" in r:
                flat["stations"] = " ".join(r["stations"])
            out.writerow(flat)
        return
    if not rows:  # never nothing: say what the ledger holds instead
        ops = ", ".join(f"{op} {n}" for op, n in sorted(Counter(str(r["operation"]) for r in held).items()))
        click.echo(f"no flash rows in the ledger ({len(held)} rows{': ' + ops if ops else ''})")
    if rows:
        _print_report(rows, by)


def _print_report(rows, by: str) -> None:
    """``ledger report``'s text (issue 41: it was about 165 characters a line): a group's name on
    one line, its figures on the next, its failures (wrapped) under them, each at most the output's
    width (:func:`piflash.cli.tables.output_width`, else 80). ``rows``: :func:`report_rows`' dicts."""
    import textwrap

    from piflash.cli.tables import DEFAULT_WIDTH, output_width

    width = max(40, output_width() or DEFAULT_WIDTH)
    for i, r in enumerate(rows):
        if by == "bundle":
            name = f"bundle v{r['bundle_version']} {r['bundle_sha256']}" if r["bundle_sha256"] else "no bundle"
            name += "; stations " + ", ".join(r["stations"])
        else:
            name = f"{r['day']}  {r['station']}  {r['profile'] or '(no profile)'}"
        serials = f"serials {r['serial_first']}-{r['serial_last']}" if r["serial_first"] is not None else "no serials"
        figures = (
            f"{r['boards']} boards, {r['passed']} passed, yield {r['yield']:.1%}, "
            f"first pass {r['first_pass_yield']:.1%}, {serials}"
        )
        causes = ", ".join(f"{k} {v}" for k, v in r["failures"].items())
        lines = textwrap.wrap(name, width, subsequent_indent="    ", break_on_hyphens=False)
        lines += textwrap.wrap(figures, width, initial_indent="  ", subsequent_indent="    ")
        lines += textwrap.wrap("failures: " + (causes or "none"), width, initial_indent="  ", subsequent_indent="    ")
        if i:
            click.echo("")
        click.echo("\n".join(lines))


@ledger.command(context_settings=CONTEXT, epilog=EXIT_CODES_EPILOG)
@ledger_option
@click.argument("job", type=click.Path(dir_okay=False))
@click.option(
    "--allowed-signers",
    "allowed_signers",
    required=True,
    type=click.Path(dir_okay=False),
    help="OpenSSH allowed_signers file the bundle must verify against (docs/bundles.md).",
)
@handles_errors
def publish(url, job, allowed_signers):
    """Publish the signed job bundle JOB (a .pfb) to its line: verified as a flash would verify it,
    then stored in the ledger as the line's newest job, which every station with
    'job: ledger:LINE' takes before its next board. Refused (exit 28): unverifiable, or a version
    not newer than the line's newest in the ledger (docs/bundles.md)."""
    from piflash.bundle.jobs import publish as publish_job
    from piflash.record.ledger import safe_url

    if not url:
        raise click.UsageError("no ledger: give --ledger postgresql://... or set PIFLASH_LEDGER")
    bundle = publish_job(job, allowed_signers, url)
    m = bundle.manifest
    click.echo(
        f"Published {job}: line {m.line} version {m.version}, sha256 {bundle.sha256}, signed by {bundle.signer}, "
        f"to {safe_url(url)}"
    )
