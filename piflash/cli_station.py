"""``piflash station ...``: the click layer over :mod:`piflash.station`."""

from __future__ import annotations

import os

import click

from piflash.cli import CONTEXT, EXIT_CODES_EPILOG, handles_errors

#: Where the config is looked for when --config is not given.
CONFIG_ENV = "PIFLASH_STATION_CONFIG"
DEFAULT_CONFIG = "/etc/piflash/station.yaml"

config_option = click.option(
    "--config", "-c", "config", metavar="FILE", envvar=CONFIG_ENV, default=DEFAULT_CONFIG,
    show_default=True, show_envvar=True, type=click.Path(dir_okay=False),
    help="The station config (YAML, see docs/station.md).")
plain_option = click.option("--plain", is_flag=True,
                            help="Plain log lines even on a terminal (no live view).")


@click.group(context_settings=CONTEXT, invoke_without_command=True, epilog=EXIT_CODES_EPILOG)
@config_option
@plain_option
@click.pass_context
def station(ctx, config, plain):
    """A hands-free flashing station: every board put on a probe's fixture is flashed,
    verified, reset and recorded in the history.

    \b
    Without a subcommand, runs the station (as 'piflash station run').
      piflash station run --config station.yaml
      piflash station check --config station.yaml
    Stop with Ctrl-C or SIGTERM (the board being flashed is finished and recorded);
    SIGHUP reloads the config.
    """
    if ctx.invoked_subcommand is None:
        ctx.invoke(run, config=config, plain=plain, force=False)


@station.command(epilog=EXIT_CODES_EPILOG, context_settings=CONTEXT)
@config_option
@plain_option
@click.option("--force", is_flag=True, help="Start even when the memory guard says it will not fit.")
@handles_errors
def run(config, plain, force):
    """Run the station until SIGTERM or Ctrl-C (exit 0)."""
    from piflash.station.loop import Station

    raise SystemExit(Station(config, interactive=False if plain else None, force=force).run())


@station.command(epilog=EXIT_CODES_EPILOG, context_settings=CONTEXT)
@config_option
@handles_errors
def check(config):
    """Validate the config, its profile and firmware without touching a probe."""
    from piflash.station.config import load_station

    loaded = load_station(config)
    cfg = loaded.config
    click.echo(f"{os.fspath(cfg.path)}: station {cfg.station}, profile {cfg.profile.name} "
               f"({cfg.profile.target}), firmware {cfg.profile.firmware} "
               f"({loaded.image.size:,} bytes, sha256 {loaded.image.sha256}), probes "
               f"{', '.join(cfg.probes) if cfg.probes else 'any'}, on same firmware "
               f"{cfg.on_same_firmware}, poll every {cfg.poll_interval:g} s")
