"""``piflash doctor``: the click layer over :mod:`piflash.host.doctor` (rich imported lazily)."""

from __future__ import annotations

import os
import sys
from typing import Dict, Optional, Tuple

import click

from piflash.cli.options import CONTEXT, EXIT_CODES_EPILOG, emit_json, handles_errors
from piflash.errors import ExitCode

_STYLE = {"ok": ("ok", "green"), "warn": ("warn", "yellow"), "fail": ("FAIL", "bold red")}


@click.command(context_settings=CONTEXT, epilog=EXIT_CODES_EPILOG)
@click.option("--json", "json_mode", is_flag=True, help="Print one JSON object.")
@click.option(
    "-u",
    "--probe",
    "probes",
    multiple=True,
    metavar="ID",
    help="Also check this Pi-pin probe's SPI bus, node and pins (spidev:0.0, gpio:gpiochip0:swclk=5,swdio=6); repeatable.",
)
@click.option(
    "--config",
    "config",
    metavar="FILE",
    type=click.Path(dir_okay=False, exists=True),
    help="Station config whose probes: and gpio: pins are checked [default: PIFLASH_STATION_CONFIG, if it exists].",
)
@handles_errors
def doctor(json_mode, probes, config):
    """Check that this machine can flash: Python environment, install, pyOCD, libusb, udev
    rules, plugdev membership, each attached probe, the Pi's pins as a probe (SPI on, pins
    free, no collision with the station's LEDs and button), the station service.

    Prints one table, a fix per problem and a verdict; exits 15 when something blocks
    flashing. PIFLASH_SYSROOT, PIFLASH_SYSFS_ROOT, PIFLASH_DEV_ROOT and PIFLASH_BOOT_CONFIG
    point it at another root, sysfs, /dev or boot config (for tests and image builders).
    """
    from piflash.host.doctor import Context, run_checks, verdict

    ids, gpio = station_pins(config)
    results = run_checks(Context.from_env(pin_probes=ids + tuple(probes), station_gpio=tuple(gpio.items())))
    ok, text = verdict(results)
    if json_mode:
        emit_json({"ok": ok, "verdict": text, "checks": [c.to_dict() for c in results]})
    else:
        print_checks(results, ok, text)
    sys.exit(0 if ok else int(ExitCode.DOCTOR))


def station_pins(config: Optional[str]) -> Tuple[Tuple[str, ...], Dict[str, int]]:
    """The station config's probe IDs and ``gpio:`` pins (:func:`piflash.station.config.pin_uses`):
    of ``config``, else of ``PIFLASH_STATION_CONFIG`` when that file exists (its errors ignored:
    the station's own check reports them), else none.

    :raises ProfileError: (exit 5) ``config`` given and unreadable."""
    from piflash import settings
    from piflash.errors import ProfileError
    from piflash.station.config import pin_uses

    if config:
        return pin_uses(config)
    default = settings.PIFLASH_STATION_CONFIG.value()
    if default and os.path.isfile(default):
        try:
            return pin_uses(default)
        except ProfileError:
            return (), {}
    return (), {}


def print_checks(results, ok: bool, text: str) -> None:
    """Print check rows (name, status, detail) as a table, each distinct fix once, and the verdict."""
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
