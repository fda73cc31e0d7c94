"""``piflash station install-service``: the click layer over :mod:`piflash.service`.

The command is attached to the ``station`` group (``piflash/cli_station.py``) by
``piflash.cli._register_subgroups``, so the station's own module needs no change for it.
"""

from __future__ import annotations

from pathlib import Path

import click

from piflash.cli import CONTEXT, handles_errors


@click.command("install-service", context_settings=CONTEXT)
@click.option("--root", "root", type=click.Path(file_okay=False, path_type=Path), default="/",
              show_default=True, metavar="DIR",
              help="Install into this file system root (an image being built) instead of /.")
@click.option("--config", "config", type=click.Path(dir_okay=False, path_type=Path), metavar="FILE",
              help="Station config to copy to /etc/piflash/station.yaml.")
@click.option("--executable", metavar="PATH",
              help="Absolute path of piflash as seen inside --root for ExecStart= "
                   "(default: the piflash running now).")
@click.option("--enable", is_flag=True, help="Start the station at every boot.")
@click.option("--now", is_flag=True,
              help="Enable and start it now (needs systemd running on /).")
@click.option("--uninstall", is_flag=True,
              help="Stop, disable and remove the unit (config and history are kept).")
@click.option("--dry-run", "-n", is_flag=True, help="Print what would be done, change nothing.")
@handles_errors
def install_service(root, config, executable, enable, now, uninstall, dry_run):
    """Install the piflash-station.service systemd unit (needs root).

    Writes /etc/systemd/system/piflash-station.service with ExecStart= naming this piflash,
    copies --config to /etc/piflash/station.yaml, reloads systemd when it runs on /, and with
    --enable/--now enables (and starts) the station. Running it again changes only what
    differs. See docs/station-service.md.
    """
    from piflash import service

    if uninstall:
        if config or executable or enable or now:
            raise click.UsageError("--uninstall takes only --root and --dry-run")
        steps = service.plan_uninstall(root, dry_run=dry_run)
    else:
        steps = service.plan_install(root, executable=executable, config=config, enable=enable,
                                     now=now, dry_run=dry_run)
    if dry_run:
        for step in steps:
            click.echo(("would " if step.run else "") + step.text)
        return
    service.run_steps(steps, echo=click.echo)
