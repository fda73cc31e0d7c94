"""``piflash history [verify-chain]``: the recorded operations as a table, CSV or JSON with a
summary line, and the check of the history's hash chain."""

from __future__ import annotations

import csv
import re
import sys
import time
from datetime import datetime
from typing import Dict, Optional

import click

from piflash.cli.options import CONTEXT, EXIT_CODES_EPILOG, emit_json, handles_errors
from piflash.record.result import iso_time, seconds

_RELATIVE = re.compile(r"^(\d+(?:\.\d+)?)\s*([smhdw])$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_TIMES = ("started_at", "ended_at")


def parse_since(text: str, now: Optional[float] = None) -> float:
    """Unix time from "2026-11-21", "2026-11-21T14:30" (local time, ISO 8601) or an age: "30m", "2h", "7d".

    :raises click.BadParameter: for anything else.
    """
    m = _RELATIVE.match(text.strip().lower())
    if m:
        return (time.time() if now is None else now) - float(m.group(1)) * _UNIT_SECONDS[m.group(2)]
    try:
        return datetime.fromisoformat(text.strip()).timestamp()
    except ValueError:
        raise click.BadParameter(
            f"'{text}' is neither a date (2026-11-21, 2026-11-21T14:30) nor an age (30m, 2h, 7d)"
        ) from None


def export_columns():
    """The columns of ``--csv``: every stored column, the times as ISO 8601, then
    ``started_at_unix``/``ended_at_unix`` (the stored Unix seconds, which the row hash covers)."""
    from piflash.record.history import COLUMN_NAMES

    return COLUMN_NAMES + tuple(f"{t}_unix" for t in _TIMES)


def exported(row: Dict[str, object]) -> Dict[str, object]:
    """One row for ``--csv``: an open row whose process died shows as ``interrupted``
    (error "interrupted (process died)") as the next writer will store it."""
    from piflash.record.history import DIED, OPEN, row_state

    out = dict(row)
    for t in _TIMES:
        out[f"{t}_unix"] = row[t]
        out[t] = iso_time(row[t])
    if row["outcome"] == OPEN and row_state(row) == "interrupted":
        out.update(outcome="interrupted", error=DIED)
    return out


def exported_json(row: Dict[str, object]) -> Dict[str, object]:
    """One row for ``--json`` (docs/result.md, "History rows"): :func:`exported`, with the
    phase columns ``connect_s`` ... ``reset_s`` as ``durations`` ({phase: seconds}, the phases
    that ran, as in a command's result) and ``duration`` (seconds from start to end, None while
    open or when the process died). The stored values are unchanged, so the row hash can be
    checked from the export (``durations.connect`` is the column ``connect_s``)."""
    from piflash.record.history import PHASES

    out = exported(row)
    durations = {p: out.pop(f"{p}_s") for p in PHASES}
    ended, started = row["ended_at"], row["started_at"]
    out["duration"] = seconds(ended - started) if ended is not None else None
    out["durations"] = {p: v for p, v in durations.items() if v is not None}
    out["boot_check"] = _json_or_none(out.get("boot_check"))
    return out


def _json_or_none(text):
    import json

    return json.loads(text) if text else None


def _when(ts: float) -> str:
    return datetime.fromtimestamp(ts).isoformat(sep=" ", timespec="seconds")


def _duration(row) -> str:
    return f"{row['ended_at'] - row['started_at']:.2f}" if row["ended_at"] is not None else "-"


def _summary_line(summary) -> str:
    rate = summary["boards_per_hour"]
    extra = "".join(f", {summary[k]} {k}" for k in ("interrupted", "open") if summary[k])
    return (
        f"{summary['passed']} passed, {summary['failed']} failed, {summary['skipped']} skipped{extra}, "
        f"{summary['boards']} board{'' if summary['boards'] == 1 else 's'}"
        + (f", {rate:g} boards/hour" if rate is not None else "")
    )


def _open_db(path):
    from piflash.record.history import History, default_path

    db_path = path or default_path()
    if db_path is None:
        raise click.UsageError("history is turned off (PIFLASH_HISTORY=off); give --file")
    db = History.for_reading(db_path)
    if db.unseen:
        click.echo(f"note: {db.unseen}", err=True)
    return db


file_option = click.option(
    "--file",
    "path",
    type=click.Path(dir_okay=False),
    envvar=None,
    help="The history database [default: $PIFLASH_HISTORY, $STATE_DIRECTORY or ~/.local/state/piflash].",
)


@click.group(context_settings=CONTEXT, invoke_without_command=True, epilog=EXIT_CODES_EPILOG)
@click.option(
    "--since", metavar="WHEN", help="Only operations since a date (2026-11-21[T14:30]) or an age (30m, 2h, 7d)."
)
@click.option("--failed", is_flag=True, help="Only failed (and interrupted) operations.")
@click.option("--board", metavar="UID|SERIAL", help="Only this board: its target unique ID or its serial number.")
@click.option("--station", metavar="NAME", help="Only this station's operations.")
@click.option("--limit", "-n", type=click.IntRange(min=1), help="Only the newest N operations.")
@click.option("--csv", "csv_mode", is_flag=True, help="Print CSV (every column, times in ISO 8601).")
@click.option("--json", "json_mode", is_flag=True, help="Print JSON: {'operations': [...], 'summary': {...}}.")
@file_option
@click.pass_context
@handles_errors
def history(ctx, since, failed, board, station, limit, csv_mode, json_mode, path):
    """Show what was flashed: every operation from the command line and the station.

    \b
    Examples:
      piflash history --since 8h
      piflash history --failed --csv > failures.csv
      piflash history --board 5f1a3c0e9b2d4471
      piflash history verify-chain
    """
    from piflash.record.history import summarize

    if ctx.invoked_subcommand is not None:
        return
    if csv_mode and json_mode:
        raise click.UsageError("--csv and --json exclude each other")
    since_ts = parse_since(since) if since else None
    with _open_db(path) as db:
        rows = db.query(since=since_ts, failed=failed, board=board, station=station, limit=limit)
    summary = summarize(rows)
    if json_mode:
        emit_json({"operations": [exported_json(r) for r in rows], "summary": summary})
        return
    if csv_mode:
        out = csv.DictWriter(sys.stdout, fieldnames=export_columns(), lineterminator="\n")
        out.writeheader()
        out.writerows(exported(r) for r in rows)
        return
    _print_table(rows)
    click.echo(_summary_line(summary))


@history.command("show", context_settings=CONTEXT, epilog=EXIT_CODES_EPILOG)
@click.argument("row_id", metavar="ROW", type=click.IntRange(min=1))
@click.option("--json", "json_mode", is_flag=True, help="Print the row as JSON (as in 'piflash history --json').")
@file_option
@handles_errors
def show(row_id, json_mode, path):
    """Show one history row in full: every column and what the board printed in its boot check.

    \b
    Example:
      piflash history show 42
    """
    with _open_db(path) as db:
        row = db.find_row(row_id)
        where = db.path
    if row is None:
        # The history is fine; the row asked for is not in it: a usage error, not exit 18.
        raise click.UsageError(
            f"history row #{row_id} does not exist in {where} ('piflash history' lists the rows and their numbers)"
        )
    out = exported_json(row)
    if json_mode:
        emit_json({"row": out})
        return
    boot = out.pop("boot_check")
    for key, value in out.items():
        if key not in ("durations",):
            click.echo(f"{key:17} {'' if value is None else value}")
    click.echo(f"{'durations':17} " + ", ".join(f"{k} {v:.3f} s" for k, v in out["durations"].items()))
    if boot:
        click.echo(
            f"{'boot_check':17} {boot['check']}: {'pass' if boot['passed'] else 'FAIL'}, "
            f"{boot['detail']} ({boot['seconds']:.3f} s)"
            + (f", fault PC {boot['fault_pc']}" if boot.get("fault_pc") else "")
        )
        if boot.get("output"):
            click.echo("boot output:")
            for line in boot["output"].splitlines():
                click.echo(f"  | {line}")


@history.command("verify-chain", context_settings=CONTEXT, epilog=EXIT_CODES_EPILOG)
@click.option(
    "--anchor",
    metavar="HASH",
    help="A row_hash kept elsewhere earlier (a head printed by an "
    "earlier verify-chain): fail unless it is still in the chain.",
)
@click.option("--json", "json_mode", is_flag=True, help="Print the report as JSON.")
@file_option
@handles_errors
def verify_chain(anchor, json_mode, path):
    """Check the history's hash chain: exit 0 when every row is as written, 19 naming the first
    row that was edited, deleted or inserted."""
    from piflash.errors import HistoryChainError

    with _open_db(path) as db:
        report = db.verify_chain(anchor)
    if not json_mode:
        for p in report.problems:
            where = f"row #{p.row_id}" if p.row_id is not None else f"seq {p.seq}"
            click.echo(f"{where}: {p.kind}: {p.detail}")
        if report.open_rows:
            click.echo(f"not sealed yet (open): {', '.join(f'#{i}' for i in report.open_rows)}")
    error = None
    if report.problems:
        first = report.problems[0]
        error = HistoryChainError(
            f"the history chain is broken: {first.name} was {first.kind}"
            + (f" ({len(report.problems)} problems)" if len(report.problems) > 1 else ""),
            report,
            hint="the rows named above no longer are as piflash wrote them; "
            "compare with a copy or export of the history",
        )
    elif report.anchor_found is False:
        error = HistoryChainError(
            f"the anchor {anchor} is not in the history chain",
            report,
            hint="the chain was rewritten after that head was taken, or it is from another history",
        )
    if error is not None:
        raise error  # its result is the report: --json prints both in one object
    if json_mode:
        emit_json(report.to_dict())
    else:
        click.echo(
            f"chain intact: {report.sealed} sealed rows, head seq {report.head_seq} "
            f"row_hash {report.head_hash}" + (", anchor found" if anchor else "")
        )


#: The table's columns, in display order, and how each is aligned.
_COLUMNS = (
    ("#", "right"),
    ("started", "left"),
    ("station", "left"),
    ("probe", "left"),
    ("op", "left"),
    ("target", "left"),
    ("target UID", "left"),
    ("serial", "left"),
    ("firmware", "left"),
    ("result", "left"),
    ("boot", "left"),
    ("bytes", "right"),
    ("s", "right"),
    ("error", "left"),
)
#: Which columns a width too narrow for all keeps first (a Pi's console is 80 columns wide):
#: what happened to which board, where, then what was done. The result always stays.
_PRIORITY = (
    "result",
    "#",
    "serial",
    "error",
    "station",
    "probe",
    "op",
    "target",
    "firmware",
    "started",
    "boot",
    "target UID",
    "s",
    "bytes",
)
#: Columns never folded into the "every row:" line, even when all rows agree: a row's number,
#: when it started (rows a second apart are still a list of times to read, not "every row:
#: started 15:37:52") and its result.
_ALWAYS = ("#", "started", "result")
#: A probe ID longer than this is cut to its beginning and "…" in a narrow table (a beginning
#: is what ``-u PREFIX*`` takes).
_PROBE_CHARS = 16
#: Columns cut with an ellipsis rather than dropped, down to this many characters.
_SHRINK = {"firmware": 12, "error": 24, "boot": 24, "probe": _PROBE_CHARS}
#: Spaces between two columns.
_GAP = 2
_STYLE = {"pass": "green", "fail": "red", "skip": "yellow", "interrupted": "red", "open": "cyan"}


def _cut(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters, its last one "…" when it was longer."""
    return text if len(text) <= width else text[: width - 1] + "…"


def _wrap(head: str, items, width: int) -> str:
    """``head`` then ``items`` joined by ", ", in lines of at most ``width`` characters, broken
    between items only (an item longer than a line stands alone), continued lines indented."""
    lines = [head]
    for i, item in enumerate(items):
        piece = item + ("," if i < len(items) - 1 else "")
        if len(lines[-1]) + 1 + len(piece) > width and lines[-1].strip():
            lines.append("  " + piece)
        else:
            lines[-1] += ("" if lines[-1].endswith(" ") or not lines[-1] else " ") + piece
    return "\n".join(lines)


def boot_cell(row) -> str:
    """The ``boot`` cell of a row: ``pass`` or ``FAIL`` and the last line the board printed."""
    import json

    if not row.get("boot_check"):
        return ""
    check = json.loads(row["boot_check"])
    lines = [ln for ln in (check.get("output") or "").splitlines() if ln.strip()]
    return ("pass" if check.get("passed") else "FAIL") + (f": {lines[-1].strip()}" if lines else "")


def _cells(row, serials: bool, boots: bool = False) -> Dict[str, str]:
    """One history row as the table's cell texts (``serial`` / ``boot`` only when some row has one)."""
    from piflash.record.history import DIED, row_state

    state = row_state(row)
    out = {
        "#": str(row["id"]),
        "started": _when(row["started_at"]),
        "station": row["station"] or "-",
        "probe": row["probe_id"] or "",
        "op": row["operation"],
        "target": row["target"] or "",
        "target UID": row["target_uid"] or "",
        "serial": row["serial"] or "",
        "firmware": (row["firmware"] or "").rsplit("/", 1)[-1],
        "result": state.upper(),
        "bytes": f"{row['image_bytes']:,}",
        "s": _duration(row),
        "error": DIED if state == "interrupted" and row["outcome"] == "open" else (row["error"] or ""),
    }
    out["boot"] = boot_cell(row)
    if not serials:
        del out["serial"]
    if not boots:
        del out["boot"]
    return out


def fit_columns(cells, width: int) -> Dict[str, int]:
    """The columns that fit in ``width`` characters and the width of each, in display order.

    Columns are taken in :data:`_PRIORITY` order while they fit (``firmware`` and ``error`` at
    their :data:`_SHRINK` width at least), the result column always; the room left widens the
    cut ones again.

    :param cells: the rows' cells (dicts from :func:`_cells`, all with the same keys).
    :param width: the terminal's width in characters.
    """
    names = [n for n, _ in _COLUMNS if not cells or n in cells[0]]
    natural = {n: max([len(n)] + [len(c[n]) for c in cells]) for n in names}
    chosen: Dict[str, int] = {}
    used = -_GAP
    for name in (n for n in _PRIORITY if n in natural):
        need = min(natural[name], _SHRINK.get(name, natural[name]))
        if name == "result" or used + _GAP + need <= width:
            chosen[name] = need
            used += _GAP + need
    spare = max(0, width - used)
    for name in ("error", "probe", "firmware"):
        if name in chosen:
            more = min(spare, natural[name] - chosen[name])
            chosen[name] += more
            spare -= more
    return {n: chosen[n] for n in names if n in chosen}


def _print_table(rows) -> None:
    """The rows as a table.

    With a width (``COLUMNS``, or the terminal's: :func:`piflash.cli.tables.output_width`) it
    fits in it: the columns that are the same on every row are said once above the table
    (``every row: op flash, target nrf52840``) when not all fit, then :func:`fit_columns` keeps
    the most useful ones (result, serial, a shortened error, station, probe...); on a terminal
    coloured by rich, else plain. Without a width (a pipe, no ``COLUMNS``) every column, each as
    wide as its widest cell, without colour or trailing spaces, the same at any width.
    """
    from piflash.cli.tables import output_width

    serials = any(r["serial"] for r in rows)
    boots = any(r.get("boot_check") for r in rows)
    cells = [_cells(r, serials, boots) for r in rows]
    names = [n for n, _ in _COLUMNS if not cells or n in cells[0]]
    right = {n for n, justify in _COLUMNS if justify == "right"}
    width = output_width()
    natural = {n: max([len(n)] + [len(c[n]) for c in cells]) for n in names}
    if width is None or sum(natural.values()) + _GAP * (len(names) - 1) <= width:
        for line in [{n: n for n in names}] + cells:
            click.echo(
                "  ".join(
                    line[n].rjust(natural[n]) if n in right else line[n].ljust(natural[n]) for n in names
                ).rstrip()
            )
        return
    common = {}
    if cells:  # a column with one value (or none: no station) is said once, or not at all
        common = {n: cells[0][n] for n in names if n not in _ALWAYS and len({c[n] for c in cells}) == 1}
        cells = [{n: v for n, v in c.items() if n not in common} for c in cells]
    said = [f"{'seconds' if n == 's' else n} {v}" for n, v in common.items() if v not in ("", "-")]
    if said:
        click.echo(_wrap("every row:", said, width))
    columns = fit_columns(cells, width)
    if not sys.stdout.isatty():
        for line in [{n: n for n in columns}] + cells:
            click.echo(
                "  ".join(
                    _cut(line[n], w).rjust(w) if n in right else _cut(line[n], w).ljust(w) for n, w in columns.items()
                ).rstrip()
            )
        return

    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console(soft_wrap=False, width=width)
    table = Table(box=None, header_style="bold", pad_edge=False, padding=(0, _GAP // 2))
    justify = dict(_COLUMNS)
    for name, width in columns.items():
        table.add_column(
            name, justify=justify[name], no_wrap=True, overflow="ellipsis", min_width=width, max_width=width
        )
    for cell in cells:
        table.add_row(
            *(Text(cell[n], style=_STYLE[cell[n].lower()]) if n == "result" else Text(cell[n]) for n in columns)
        )
    console.print(table)
