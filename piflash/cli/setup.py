"""``piflash setup permissions`` and ``piflash setup pins``: the click layer over
:mod:`piflash.probe.permissions` and :mod:`piflash.host.pinsetup`."""

from __future__ import annotations

import click

from piflash.cli.options import CONTEXT, EXIT_CODES_EPILOG, handles_errors


@click.group(context_settings=CONTEXT)
def setup():
    """Set this machine up for piflash (needs root)."""


@setup.command(context_settings=CONTEXT, epilog=EXIT_CODES_EPILOG)
@click.option("--user", metavar="NAME", help="User to add to plugdev, spi and gpio [default: $SUDO_USER].")
@click.option("--dry-run", is_flag=True, help="Print every change, make none (runs without root).")
@click.option("--uninstall", is_flag=True, help="Revert exactly what earlier runs changed.")
@click.option(
    "--root",
    "root",
    default="/",
    show_default=True,
    metavar="DIR",
    type=click.Path(file_okay=False, exists=True),
    help="Work on the root file system in DIR (image builders, tests).",
)
@handles_errors
def permissions(user, dry_run, uninstall, root):
    """Let USER open USB debug probes, and the Pi's SPI and GPIO nodes, without root.

    Creates the plugdev, spi and gpio groups if missing, adds the user to them, installs
    piflash's udev rules (/etc/udev/rules.d/60-piflash-probes.rules: USB probes for plugdev,
    /dev/spidev* for spi, /dev/gpiochip* and /dev/gpiomem for gpio) and reloads udev.
    Idempotent. The user must log in again afterwards; 'piflash doctor' checks the result.
    """
    from piflash.probe.permissions import setup_permissions, uninstall_permissions

    if uninstall:
        if user:
            raise click.UsageError("--uninstall takes no --user: it reverts what the record says")
        uninstall_permissions(root, dry_run, echo=click.echo)
    else:
        setup_permissions(root, user, dry_run, echo=click.echo)


@setup.command(context_settings=CONTEXT, epilog=EXIT_CODES_EPILOG)
@click.option(
    "-u",
    "--probe",
    "probes",
    multiple=True,
    metavar="ID",
    help="A Pi-pin probe to check (spidev:0.0, spidev:1.0:nreset=13, gpio:gpiochip0:swclk=5,swdio=6,nreset=13); repeatable.",
)
@click.option(
    "--config",
    metavar="FILE",
    type=click.Path(dir_okay=False, exists=True),
    help="Station config whose probes: and gpio: pins are checked [default: PIFLASH_STATION_CONFIG, if it exists].",
)
@click.option(
    "--boot-config",
    metavar="FILE",
    type=click.Path(dir_okay=False),
    help="The boot config [default: PIFLASH_BOOT_CONFIG, else ROOT/boot/firmware/config.txt, else ROOT/boot/config.txt].",
)
@click.option(
    "--root",
    default="/",
    show_default=True,
    metavar="DIR",
    type=click.Path(file_okay=False, exists=True),
    help="Check the system in DIR: its boot/, dev/, sys/ and proc/device-tree/model (image builders, tests).",
)
@click.option("--json", "json_mode", is_flag=True, help="Print one JSON object.")
@handles_errors
def pins(probes, config, boot_config, root, json_mode):
    """Check the Pi's own pins as an SWD probe: SPI turned on in the boot config
    (dtparam=spi=on for spidev:0.x, dtoverlay=spi1-1cs for spidev:1.x), the probe's device node,
    its pins held by no other driver, and the station's LED, buzzer and button pins colliding with
    no SWD or SPI pin. Reads only; changes nothing, needs no root. Exits 15 when a check fails.
    The wiring: docs/wiring.md.
    """
    import os
    import re
    import sys

    from piflash import settings
    from piflash.cli.doctor import print_checks, station_pins
    from piflash.cli.options import emit_json
    from piflash.errors import ExitCode
    from piflash.host import machine
    from piflash.host.doctor import Check, verdict
    from piflash.host.pinsetup import PinSetup, check_rows

    ids, gpio = station_pins(config)
    here = os.path.realpath(root) == "/"
    setup = PinSetup(
        sysroot=root,
        dev_root=settings.PIFLASH_DEV_ROOT.value() if here else os.path.join(root, "dev"),
        sysfs_root=settings.PIFLASH_SYSFS_ROOT.value() if here else os.path.join(root, "sys"),
        boot_config=boot_config or (settings.PIFLASH_BOOT_CONFIG.value() if here else None),
        model=machine.read_model() if here else machine.read_model(root),
        probes=ids + tuple(probes),
        station_gpio=gpio,
    )
    results = [Check(*row) for row in check_rows(setup)]
    if not results:
        results = [Check("Pi pins", "ok", "nothing to check: no boot config, no spidev:/gpio: probe, no station pins")]
    ok, text = verdict(results)
    text = re.sub(r"\bflash(ing)?\b", lambda m: m.group(0) + " through the Pi's pins", text, count=1)
    if json_mode:
        emit_json({"ok": ok, "verdict": text, "checks": [c.to_dict() for c in results]})
    else:
        print_checks(results, ok, text)
    sys.exit(0 if ok else int(ExitCode.DOCTOR))
