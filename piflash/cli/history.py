"""``piflash history``: the recorded operations as a table, CSV or JSON, with a summary line."""

from __future__ import annotations

import csv
import json
import re
import sys
import time
from datetime import datetime

import click

_RELATIVE = re.compile(r"^(\d+(?:\.\d+)?)\s*([smhdw])$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_since(text: str, now: float = None) -> float:
    """Unix time from "2026-11-21", "2026-11-21T14:30" (local time, ISO 8601) or an age: "30m", "2h", "7d".

    :raises click.BadParameter: for anything else.
    """
    m = _RELATIVE.match(text.strip().lower())
    if m:
        return (time.time() if now is None else now) - float(m.group(1)) * _UNIT_SECONDS[m.group(2)]
    try:
        return datetime.fromisoformat(text.strip()).timestamp()
    except ValueError:
        raise click.BadParameter(f"'{text}' is neither a date (2026-11-21, 2026-11-21T14:30) "
                                 "nor an age (30m, 2h, 7d)") from None


def _when(ts: float) -> str:
    return datetime.fromtimestamp(ts).isoformat(sep=" ", timespec="seconds")


def _duration(row) -> str:
    return f"{row['ended_at'] - row['started_at']:.2f}"


def _summary_line(summary) -> str:
    rate = summary["boards_per_hour"]
    return (f"{summary['passed']} passed, {summary['failed']} failed, {summary['skipped']} skipped, "
            f"{summary['boards']} boards" + (f", {rate:g} boards/hour" if rate is not None else ""))


@click.command(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("--since", metavar="WHEN", help="Only operations since a date (2026-11-21[T14:30]) or an age (30m, 2h, 7d).")
@click.option("--failed", is_flag=True, help="Only failed operations.")
@click.option("--board", metavar="UID", help="Only this target unique ID.")
@click.option("--station", metavar="NAME", help="Only this station's operations.")
@click.option("--limit", "-n", type=click.IntRange(min=1), help="Only the newest N operations.")
@click.option("--csv", "csv_mode", is_flag=True, help="Print CSV (every column).")
@click.option("--json", "json_mode", is_flag=True, help="Print JSON: {'operations': [...], 'summary': {...}}.")
@click.option("--file", "path", type=click.Path(dir_okay=False), envvar=None,
              help="The history database [default: $PIFLASH_HISTORY, $STATE_DIRECTORY or ~/.local/state/piflash].")
def history(since, failed, board, station, limit, csv_mode, json_mode, path):
    """Show what was flashed: every operation from the command line and the station.

    \b
    Examples:
      piflash history --since 8h
      piflash history --failed --csv > failures.csv
      piflash history --board 5f1a3c0e9b2d4471
    """
    from piflash.history import COLUMN_NAMES, History, HistoryError, default_path, summarize

    if csv_mode and json_mode:
        raise click.UsageError("--csv and --json exclude each other")
    since_ts = parse_since(since) if since else None
    db_path = path or default_path()
    if db_path is None:
        raise click.UsageError("history is turned off (PIFLASH_HISTORY=off); give --file")
    try:
        with History(db_path) as db:
            rows = db.query(since=since_ts, failed=failed, board=board, station=station, limit=limit)
    except HistoryError as exc:
        raise click.UsageError(f"{exc} (check the path and its permissions)") from None
    summary = summarize(rows)
    if json_mode:
        click.echo(json.dumps({"operations": rows, "summary": summary}, indent=2))
        return
    if csv_mode:
        out = csv.DictWriter(sys.stdout, fieldnames=COLUMN_NAMES, lineterminator="\n")
        out.writeheader()
        out.writerows(rows)
        return
    _print_table(rows)
    click.echo(_summary_line(summary))


def _print_table(rows) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(soft_wrap=False)
    if not console.is_terminal:  # a pipe or a log: whole lines, not an 80-column wrap
        console = Console(soft_wrap=False, width=220)
    table = Table(box=None, header_style="bold", pad_edge=False)
    for name, justify in (("#", "right"), ("started", "left"), ("station", "left"), ("op", "left"),
                          ("target", "left"), ("target UID", "left"), ("firmware", "left"),
                          ("result", "left"), ("bytes", "right"), ("s", "right")):
        table.add_column(name, justify=justify, no_wrap=True)
    table.add_column("error", overflow="ellipsis", no_wrap=True, max_width=80)
    style = {"pass": "green", "fail": "red", "skip": "yellow"}
    for r in rows:
        firmware = (r["firmware"] or "").rsplit("/", 1)[-1]
        table.add_row(str(r["id"]), _when(r["started_at"]), r["station"] or "-", r["operation"],
                      r["target"] or "", r["target_uid"] or "", firmware,
                      f"[{style[r['outcome']]}]{r['outcome'].upper()}[/]", f"{r['image_bytes']:,}",
                      _duration(r), r["error"] or "")
    console.print(table)
