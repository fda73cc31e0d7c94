"""``piflash doctor``: the click layer over :mod:`piflash.host.doctor` (rich imported lazily)."""

from __future__ import annotations

import sys

import click

from piflash.cli.options import CONTEXT, EXIT_CODES_EPILOG, emit_json
from piflash.errors import ExitCode

_STYLE = {"ok": ("ok", "green"), "warn": ("warn", "yellow"), "fail": ("FAIL", "bold red")}


@click.command(context_settings=CONTEXT, epilog=EXIT_CODES_EPILOG)
@click.option("--json", "json_mode", is_flag=True, help="Print one JSON object.")
def doctor(json_mode):
    """Check that this machine can flash: Python environment, install, pyOCD, libusb, udev
    rules, plugdev membership, each attached probe, the station service.

    Prints one table, a fix per problem and a verdict; exits 15 when something blocks
    flashing. PIFLASH_SYSROOT, PIFLASH_SYSFS_ROOT and PIFLASH_DEV_ROOT point it at another
    root, sysfs or /dev (for tests and image builders).
    """
    from piflash.host.doctor import Context, run_checks, verdict

    results = run_checks(Context.from_env())
    ok, text = verdict(results)
    if json_mode:
        emit_json({"ok": ok, "verdict": text, "checks": [c.to_dict() for c in results]})
    else:
        _print_table(results, ok, text)
    sys.exit(0 if ok else int(ExitCode.DOCTOR))


def _print_table(results, ok: bool, text: str) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console(width=None if sys.stdout.isatty() else 160)
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    table.add_column("Check", no_wrap=True)
    table.add_column("Status", no_wrap=True)
    table.add_column("Detail")
    for c in results:
        label, style = _STYLE[c.status]
        table.add_row(Text(c.name), Text(label, style=style), Text(c.detail))
    with console.capture() as captured:  # rich pads table rows to the full width: trim them
        console.print(table)
    click.echo("\n".join(line.rstrip() for line in captured.get().splitlines()))
    fixes: dict = {}  # one line per distinct fix, naming the rows it fixes
    for c in results:
        if c.fix and c.status != "ok":
            fixes.setdefault(c.fix, []).append(c.name)
    if fixes:
        console.print()
    for fix, names in fixes.items():
        console.print(Text(f"fix {', '.join(names)}: ", style="bold") + Text(fix), soft_wrap=True)
    console.print()
    console.print(Text(("OK: " if ok else "NOT READY: ") + text, style="green" if ok else "bold red"), soft_wrap=True)
