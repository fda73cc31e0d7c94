"""``piflash bundle create|sign|verify|show``: the click layer over :mod:`piflash.bundle` (docs/bundles.md)."""

from __future__ import annotations

import click

from piflash.cli.options import CONTEXT, emit_json, handles_errors

_json = click.option("--json", "json_mode", is_flag=True, help="Print one JSON object on stdout.")


@click.group(context_settings=CONTEXT)
def bundle():
    """Signed job bundles (JOB.pfb): approved firmware only (docs/bundles.md)."""


def _print(data: dict) -> None:
    for key in ("bundle", "line", "bundle_version", "target", "profile", "max_boards", "bundle_sha256", "signer"):
        if key in data:
            value = data[key]
            click.echo(f"{key + ':':<16} {value if value is not None else '-'}")
    for f in data["files"]:
        click.echo(f"  {f['path']:<28} {f['size']:>10,} bytes  sha256 {f['sha256']}")


@bundle.command()
@click.option(
    "--profile", "-p", "profile", required=True, metavar="PROFILE", help="The profile (name or file) to bundle."
)
@click.option("--output", "-o", "output", required=True, metavar="JOB.pfb", help="The bundle to write.")
@click.option("--line", "line", required=True, metavar="NAME", help="The production line the job is for.")
@click.option(
    "--version",
    "version",
    required=True,
    type=click.IntRange(min=1),
    metavar="N",
    help="The job's version on its line.",
)
@click.option(
    "--max-boards",
    type=click.IntRange(min=1),
    metavar="N",
    help="At most N boards across the line (counted in the ledger).",
)
@_json
@handles_errors
def create(profile, output, line, version, max_boards, json_mode):
    """Write an unsigned bundle of PROFILE, its firmware and packs (sign it with 'bundle sign')."""
    from piflash.bundle.loader import SUFFIX, create_bundle, describe

    if not output.lower().endswith(SUFFIX):
        raise click.BadParameter(f"a bundle's name ends in {SUFFIX}, got {output!r}", param_hint="'--output'")
    manifest, sha256 = create_bundle(profile, output, line, version, max_boards)
    data = describe(output, sha256, manifest, signed=False)
    if json_mode:
        emit_json(data)
        return
    _print(data)
    click.secho(f"Wrote {output} (unsigned): piflash bundle sign {output} -k KEYFILE", fg="green")


@bundle.command()
@click.argument("path", metavar="JOB.pfb")
@click.option(
    "--key", "-k", "key", required=True, metavar="KEYFILE", help="OpenSSH private key (ssh-keygen -Y sign -f)."
)
@_json
@handles_errors
def sign(path, key, json_mode):
    """Sign JOB.pfb's manifest with an OpenSSH key (namespace piflash-bundle)."""
    from piflash.bundle.loader import describe, sign_bundle

    manifest, sha256 = sign_bundle(path, key)
    data = describe(path, sha256, manifest, signed=True)
    if json_mode:
        emit_json(data)
        return
    click.secho(f"Signed {path}: line {manifest.line} version {manifest.version}, sha256 {sha256}", fg="green")


@bundle.command()
@click.argument("path", metavar="JOB.pfb")
@click.option("--allowed-signers", "allowed", required=True, metavar="FILE", help="OpenSSH allowed_signers file.")
@click.option("--target", "-t", "target", metavar="TARGET", help="Refuse a bundle for another target.")
@_json
@handles_errors
def verify(path, allowed, target, json_mode):
    """Verify JOB.pfb: signature, files, target, and no rollback on this machine (exit 28 if not)."""
    from piflash.bundle.loader import open_bundle

    data = open_bundle(path, allowed, target=target, accept=False, load=False).to_dict()
    if json_mode:
        emit_json(data)
        return
    _print(data)
    click.secho(f"{path}: OK, signed by {data['signer']}", fg="green")


@bundle.command()
@click.argument("path", metavar="JOB.pfb")
@_json
@handles_errors
def show(path, json_mode):
    """Show what JOB.pfb holds (its signature is not checked: see 'bundle verify')."""
    from piflash.bundle.loader import show_bundle

    data = show_bundle(path)
    if json_mode:
        emit_json(data)
        return
    _print(data)
    click.echo(f"{'signed:':<16} {'yes (not verified here)' if data['signed'] else 'no'}")
