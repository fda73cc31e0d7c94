"""``piflash setup permissions``: the click layer over :mod:`piflash.probe.permissions`."""

from __future__ import annotations

import click

from piflash.cli.options import CONTEXT, EXIT_CODES_EPILOG, handles_errors


@click.group(context_settings=CONTEXT)
def setup():
    """Set this machine up for piflash (needs root)."""


@setup.command(context_settings=CONTEXT, epilog=EXIT_CODES_EPILOG)
@click.option("--user", metavar="NAME", help="User to add to plugdev [default: $SUDO_USER].")
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
    """Let USER open USB debug probes without root.

    Creates the plugdev group if missing, adds the user, installs piflash's udev rules
    (/etc/udev/rules.d/60-piflash-probes.rules) and reloads udev. Idempotent. The user
    must log in again afterwards; 'piflash doctor' checks the result.
    """
    from piflash.probe.permissions import setup_permissions, uninstall_permissions

    if uninstall:
        if user:
            raise click.UsageError("--uninstall takes no --user: it reverts what the record says")
        uninstall_permissions(root, dry_run, echo=click.echo)
    else:
        setup_permissions(root, user, dry_run, echo=click.echo)
