"""``piflash profile list|show|check``: the click layer over :mod:`piflash.profiles`."""

from __future__ import annotations

import click

from piflash.cli.completion import complete_profile
from piflash.cli.options import CONTEXT, emit_json, handles_errors


@click.group(context_settings=CONTEXT)
def profile():
    """Target/firmware profiles (YAML): list, show, check."""


@profile.command("list")
@click.option("--json", "json_mode", is_flag=True, help="Print JSON.")
def list_cmd(json_mode):
    """List the profiles found on the search path (broken ones marked)."""
    from piflash.profiles import list_profiles, profile_dirs

    rows = list_profiles()
    if json_mode:
        emit_json({"profiles": [{"name": n, "path": str(p), "error": e, "description": d} for n, p, e, d in rows]})
        return
    if not rows:
        click.echo("No profiles found. Searched: " + ", ".join(str(d) for d in profile_dirs()))
        return
    for name, path, error, description in rows:
        status = click.style("BROKEN", fg="red") + f"  {error}" if error else (description or "")
        click.echo(f"{name:<24} {path}  {status}".rstrip())


@profile.command()
@click.argument("name", shell_complete=complete_profile)
@click.option("--json", "json_mode", is_flag=True, help="Print JSON.")
@handles_errors
def show(name, json_mode):
    """Show the profile NAME (or FILE) with every value resolved, as YAML (--json: as JSON)."""
    from piflash.profiles import find_profile, load_profile, profile_to_dict, profile_yaml

    data = profile_to_dict(load_profile(find_profile(name)))
    if json_mode:
        emit_json(data)
        return
    click.echo(profile_yaml(data), nl=False)


@profile.command()
@click.argument("name", shell_complete=complete_profile)
@handles_errors
def check(name):
    """Validate NAME: its keys and types, the firmware file, its SHA-256 and its place in flash."""
    from piflash.profiles import find_profile, load_profile
    from piflash.targets.catalog import check_target

    prof = load_profile(find_profile(name), check_target=check_target)
    image = prof.load_image()  # a digest mismatch names the actual SHA-256 in its message
    click.echo(f"firmware sha256: {image.sha256}")
    if prof.unit_list is not None:
        ulist = prof.unit_list
        click.echo(f"list {ulist.path}: {len(ulist):,} rows, columns {', '.join(ulist.used)}, sha256 {ulist.sha256}")
    click.secho(f"{prof.path}: OK ({image.describe()})", fg="green")
