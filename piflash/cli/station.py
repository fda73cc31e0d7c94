"""``piflash station [run]|check|status|install-service``: the click layer over :mod:`piflash.station`
(the loop, its config, and the systemd unit installer :mod:`piflash.station.service`)."""

from __future__ import annotations

import os
from pathlib import Path

import click

from piflash.cli.options import CONTEXT, EXIT_CODES_EPILOG, emit_json, handles_errors

#: Where the config is looked for when --config is not given.
CONFIG_ENV = "PIFLASH_STATION_CONFIG"
DEFAULT_CONFIG = "/etc/piflash/station.yaml"

config_option = click.option(
    "--config",
    "-c",
    "config",
    metavar="FILE",
    envvar=CONFIG_ENV,
    default=DEFAULT_CONFIG,
    show_default=True,
    show_envvar=True,
    type=click.Path(dir_okay=False),
    help="The station config (YAML, see docs/station.md).",
)
plain_option = click.option("--plain", is_flag=True, help="Plain log lines even on a terminal (no live view).")


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
    """Validate the config, its profile and firmware, the extras it needs and its ledger, without
    touching a probe."""
    from piflash.station.config import load_station

    loaded = load_station(config)
    cfg = loaded.config
    click.echo(
        f"{os.fspath(cfg.path)}: station {cfg.station}, profile {cfg.profile.name} "
        f"({cfg.profile.target}), firmware {cfg.profile.firmware} "
        f"({loaded.image.size:,} bytes, sha256 {loaded.image.sha256}), probes "
        f"{', '.join(cfg.probes) if cfg.probes else 'any'}, on same firmware "
        f"{cfg.on_same_firmware}, poll every {cfg.poll_interval:g} s"
    )
    if cfg.bundle is not None:
        b = cfg.bundle
        click.echo(
            f"bundle {b.path}: line {b.manifest.line} version {b.manifest.version}, signed by {b.signer} "
            f"(allowed signers {cfg.allowed_signers}), sha256 {b.sha256}"
        )
    from piflash.station.config import check_extras

    extras = check_extras(cfg)  # what 'station run' would stop on (exit 17)
    if extras:
        click.echo(f"extras installed: {', '.join(extras)}")
    if cfg.ledger:
        from piflash.record.ledger import Ledger, safe_url

        with Ledger(cfg.ledger):  # exit 27, the password masked, when it cannot be used
            click.echo(f"ledger {safe_url(cfg.ledger)}: reached")
    _join_ledger(cfg)


def _join_ledger(cfg) -> None:
    """With a ledger and a numbering profile: bring the numbers this station's serial database
    holds to the ledger's counter (raised above them, recorded; :meth:`PostgresLeaseSource.join`),
    and say where the counter stands. :raises SerialError: (exit 22) the ledger refuses or cannot be reached."""
    plan = cfg.profile.patch_plan
    if not cfg.ledger or plan is None or not plan.uses_serial:
        return
    from piflash.production.leases import PostgresLeaseSource
    from piflash.production.serials import held_in
    from piflash.record.ledger import safe_url

    held = held_in(cfg.serials_path, plan.counter.name)
    source = PostgresLeaseSource(cfg.ledger, cfg.lease_ttl)
    try:
        before, after = source.join(plan.counter, cfg.station, held)
    finally:
        source.close()
    mine = (
        f"this station's serial database holds up to {held['highest']}"
        if held["highest"] is not None
        else ("this station's serial database holds no number of it")
    )
    how = f"raised from {before} to {after}" if after != before else f"next {after}"
    click.echo(f"ledger {safe_url(cfg.ledger)}: counter '{plan.counter.name}' {how} ({mine})")


@station.command(epilog=EXIT_CODES_EPILOG, context_settings=CONTEXT)
@config_option
@click.option("--json", "json_mode", is_flag=True, help="Print the status file's object (docs/result.md).")
@handles_errors
def status(config, json_mode):
    """Show the running station's slots and counters, from the status file it keeps
    (status.json in $RUNTIME_DIRECTORY, /run/piflash, or beside its history).

    Exits 29 when no station runs: no status file, or its process has ended (the last state
    is shown).
    """
    from piflash.errors import StationDownError
    from piflash.station.config import history_path
    from piflash.station.status import read_status, station_alive, status_candidates

    places = status_candidates(history_path(config))
    path = next((p for p in places if p.exists()), None)
    if path is None:
        raise StationDownError(
            f"no station status file ({' or '.join(map(str, places))}): the station is not running",
            hint=f"start it: piflash station run --config {config} (or systemctl start piflash-station)",
        )
    doc = read_status(path)
    alive = station_alive(doc)
    down = None
    if alive is False:
        how = f"stopped at {doc['stopped_at']}" if doc.get("stopped_at") else f"last update {doc.get('updated_at')}"
        down = StationDownError(
            f"station {doc.get('station')} is not running: its process {doc.get('pid')} has ended ({how})",
            hint=f"start it: piflash station run --config {config} (or systemctl start piflash-station); "
            "its log says why it ended",
        )
    if json_mode:
        out = dict(doc, status_file=str(path), running=alive is not False)
        if down is not None:
            out.update(ok=False, error=down.to_dict())
        emit_json(out, command="station status")
    else:
        _print_status(doc, path, alive)
    if down is not None:
        click.secho(f"error: {down.message}", fg="red", err=True)
        click.echo(f"hint: {down.hint}", err=True)
        raise SystemExit(int(down.exit_code))


def _cell(text, width: int) -> str:
    """``text`` cut to ``width`` characters (an ellipsis marks the cut), padded to it."""
    text = "-" if text is None or text == "" else str(text)
    return (text if len(text) <= width else text[: width - 1] + "\u2026").ljust(width)


#: The slot table's columns (name, width): 20 + 22 + 16 + 10 and three gaps of 2 = 74 columns,
#: under the 80 of a Pi's console.
_COLUMNS = (("slot", 20), ("state", 22), ("board", 16), ("serial", 10))


def _print_status(doc: dict, path, alive) -> None:
    """The status file as a compact text table, at most 80 columns wide."""
    import textwrap

    running = {True: "running", False: "NOT RUNNING", None: "on another host"}[alive]
    click.echo(f"station {doc.get('station')}: {running}, pid {doc.get('pid')}, since {doc.get('started_at')}")
    click.echo(f"updated {doc.get('updated_at')}")
    fw = doc.get("firmware") or {}
    bundle = f", bundle version {doc['bundle_version']}" if doc.get("bundle_version") is not None else ""
    click.echo(
        textwrap.shorten(
            f"profile {doc.get('profile')} ({doc.get('target')}), firmware "
            f"{os.path.basename(str(fw.get('path')))} sha256 {str(fw.get('sha256'))[:12]}{bundle}",
            80,
        )
    )
    ledger = doc.get("ledger")
    if ledger:
        reached = {True: "reached", False: "NOT reached", None: "not tried yet"}[ledger.get("reached")]
        queued = ledger.get("queued")
        click.echo(
            textwrap.shorten(
                f"ledger {ledger.get('url')}: {reached}" + (f", {queued} row(s) queued" if queued is not None else ""),
                80,
            )
        )
    click.echo("  ".join(_cell(name, w) for name, w in _COLUMNS).rstrip())
    for slot in doc.get("slots", []):
        last = slot.get("last_result")
        state = slot.get("text")
        if slot.get("state") in ("pass", "skip", "fail") and last:  # the board and reason have columns and lines
            row = f" #{last['history_id']}" if last.get("history_id") else ""
            state = f"{str(slot['state']).upper()}{row}"
        cells = (slot.get("probe_id"), state, slot.get("target_uid"), slot.get("serial"))
        click.echo("  ".join(_cell(c, w) for c, (_, w) in zip(cells, _COLUMNS)).rstrip())
        if last:
            click.echo("  " + textwrap.shorten(f"last: {last.get('text')}", 78, placeholder="\u2026"))
            hint = (last.get("error") or {}).get("hint")
            if hint:
                click.echo("  " + textwrap.shorten(f"hint: {hint}", 78, placeholder="\u2026"))
    c = doc.get("counters") or {}
    line = f"{c.get('passed', 0)} passed, {c.get('failed', 0)} failed, {c.get('skipped', 0)} skipped"
    if c.get("yield") is not None:
        line += f"; yield {c['yield'] * 100:.1f} %"
    if c.get("boards_per_hour") is not None:
        line += f"; {c['boards_per_hour']:g} boards/hour"
    click.echo(line)


@station.command("install-service", context_settings=CONTEXT)
@click.option(
    "--root",
    "root",
    type=click.Path(file_okay=False, path_type=Path),
    default="/",
    show_default=True,
    metavar="DIR",
    help="Install into this file system root (an image being built) instead of /.",
)
@click.option(
    "--config",
    "config",
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="FILE",
    help="Station config to copy to /etc/piflash/station.yaml.",
)
@click.option(
    "--executable",
    metavar="PATH",
    help="Absolute path of piflash as seen inside --root for ExecStart= (default: the piflash running now).",
)
@click.option("--enable", is_flag=True, help="Start the station at every boot.")
@click.option("--now", is_flag=True, help="Enable and start it now (needs systemd running on /).")
@click.option("--uninstall", is_flag=True, help="Stop, disable and remove the unit (config and history are kept).")
@click.option("--dry-run", "-n", is_flag=True, help="Print what would be done, change nothing.")
@handles_errors
def install_service(root, config, executable, enable, now, uninstall, dry_run):
    """Install the piflash-station.service systemd unit (needs root).

    Writes /etc/systemd/system/piflash-station.service with ExecStart= naming this piflash,
    copies --config to /etc/piflash/station.yaml, reloads systemd when it runs on /, and with
    --enable/--now enables (and starts) the station. Running it again changes only what
    differs. See docs/station-service.md.
    """
    from piflash.station import service

    if uninstall:
        if config or executable or enable or now:
            raise click.UsageError("--uninstall takes only --root and --dry-run")
        steps = service.plan_uninstall(root, dry_run=dry_run)
    else:
        steps = service.plan_install(
            root, executable=executable, config=config, enable=enable, now=now, dry_run=dry_run
        )
    if dry_run:
        for step in steps:
            click.echo(("would " if step.run else "") + step.text)
        return
    service.run_steps(steps, echo=click.echo)
