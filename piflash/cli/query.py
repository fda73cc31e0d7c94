"""``piflash info``, ``probes`` and ``targets``: the commands that look without writing."""

from __future__ import annotations

import click

from piflash.cli.options import (
    CONTEXT,
    emit_json,
    handles_errors,
    memory_guarded,
    probe_options,
    require_transport,
    resolve,
    session_options,
)


@click.command(context_settings=CONTEXT)
@probe_options
@click.option("--json", "json_mode", is_flag=True, help="Print JSON.")
@handles_errors
@memory_guarded("info")
def info(probe, target, frequency, profile, pyocd_options, json_mode):
    """Connect and show the target: type, unique ID, probe, flash regions."""
    s = resolve(profile, probe=probe, target=target, frequency=frequency)
    require_transport(s.probe, ["identify"], "info", "'piflash probes' shows its chip and port")
    from piflash.jobs.transports import PICOBOOT, flash_transport

    if flash_transport(s.probe) is PICOBOOT:  # named, or the only thing attached (both: exit 8)
        from piflash.jobs.bootsel import bootsel_info

        data = bootsel_info(s.probe, s.target)
    else:
        data = _connected_info(s, pyocd_options)
    if json_mode:
        emit_json(data)
        return
    click.echo(f"Target:     {data['target']}")
    click.echo(f"Target UID: {data['target_uid'] or 'unknown'}")
    from piflash.cli.tables import DEFAULT_WIDTH, output_width, print_table

    probe_line = f"Probe:      {data['probe_id']} ({data['probe_description']})"
    if len(probe_line) > (output_width() or DEFAULT_WIDTH):  # a long USB serial: the description below it
        probe_line = f"Probe:      {data['probe_id']}\n            ({data['probe_description']})"
    click.echo(probe_line)
    if data.get("swd_hz"):  # a debug probe's session (not PICOBOOT)
        click.echo(f"SWD clock:  {data['swd_hz'] / 1e6:g} MHz asked (the probe runs at most that)")
    click.echo("Memory:")
    right = {"justify": "right", "no_wrap": True}
    print_table(
        [("type", {}), ("name", {"overflow": "fold"}), ("start-end", {"no_wrap": True}), ("bytes", right)]
        + [("sector", right), ("page", right)],
        [
            [r["type"], r["name"], f"{r['start']:#010x}-{r['end']:#010x}", f"{r['size']:,}"]
            + ([f"{r['sector_size']:,}", f"{r['page_size']:,}"] if r.get("sector_size") else ["", ""])
            for r in data["regions"]
        ],
    )


def _connected_info(s, pyocd_options) -> dict:
    """:func:`piflash.targets.info.target_info` for the resolved settings ``s``; a connect that
    fails on a locked chip (a locked nRF52, whose AHB-AP does not answer) is exit 20 with the
    recover hint, as the flash workflow says it (:func:`piflash.production.protect.explain_connect_error`).
    Any other failed connect stays the connect error (exit 10, with the type the probe reports).

    :raises ProtectedError: the chip is locked.
    :raises ConnectError: and what ``target_info`` raises.
    """
    from piflash.errors import ConnectError, ProtectedError, WrongTargetError
    from piflash.targets.info import target_info

    try:
        return target_info(s.probe, s.target, s.job.frequency, session_options(s, pyocd_options))
    except ConnectError as exc:
        if isinstance(exc, WrongTargetError):
            raise
        from piflash.production.protect import explain_connect_error

        better = explain_connect_error(s.probe, s.target, s.job.frequency)
        if isinstance(better, ProtectedError):
            raise better from exc
        raise


@click.command(context_settings=CONTEXT)
@click.option("--json", "json_mode", is_flag=True, help="Print JSON.")
@handles_errors
def probes(json_mode):
    """List the debug probes pyOCD can see (simulated ones included), the Picos in USB BOOTSEL
    mode (flashed with -u picoboot:PORT, no probe), and the USB probes attached that cannot be
    opened, each with the reason and the fix."""
    import getpass

    from piflash.probe.discovery import list_probes
    from piflash.probe.permissions import fix_text
    from piflash.probe.picoboot import CHIPS, VID, list_devices, list_running
    from piflash.probe.usbscan import blocked_probes

    found = list_probes()
    bootsel = list_devices()
    running = list_running()
    seen = {p.unique_id for p in found}
    blocked = [
        b for b in blocked_probes() if (not b.serial or b.serial not in seen) and not (b.vid == VID and b.pid in CHIPS)
    ]
    if json_mode:
        rows = [dict(p.to_dict(), accessible=True, node=None, reason=None, fix=None) for p in found]
        rows += [
            {
                "probe_id": d.probe_id,
                "description": f"{d.chip.upper()} in BOOTSEL mode (PICOBOOT), boot ROM serial {d.serial}",
                "target": d.chip,
                "vid_pid": "%04x:%04x" % (VID, _pid(d.chip)),
                "accessible": d.accessible,
                "node": None,
                "reason": None if d.accessible else "this user may not open the device",
                "fix": None if d.accessible else fix_text(getpass.getuser()),
            }
            for d in bootsel
        ]
        rows += [
            {
                "probe_id": r.probe_id,
                "description": _running_text(r),
                "target": None,
                "vid_pid": r.vid_pid,
                "accessible": True,
                "node": None,
                "reason": None,
                "fix": None,
            }
            for r in running
        ]
        rows += [
            {
                "probe_id": b.serial,
                "description": b.name,
                "target": None,
                "vid_pid": b.vid_pid,
                "accessible": False,
                "node": b.node,
                "reason": b.reason,
                "fix": b.fix,
            }
            for b in blocked
        ]
        emit_json({"probes": rows})
        return
    if not found and not blocked and not bootsel and not running:
        click.echo("No debug probes found.")
        return
    from rich.text import Text

    from piflash.cli.tables import output_width, print_table

    def row(probe_id: str, target: str, usb: str, what, note: str = ""):
        # The ID whole on its own line (what -u takes), the description under it, wrapped to
        # the width: 80 columns on a Pi's console and in a pipe, whatever the ID's length.
        cell = Text(probe_id) + Text("\n  ") + Text(what)
        if note:
            cell.append(f" [{note}]", style="red")
        return [cell, target, usb]

    rows = [row(p.unique_id, p.target or "", p.vid_pid or "", p.description) for p in found]
    rows += [
        row(
            d.probe_id,
            d.chip,
            "%04x:%04x" % (VID, _pid(d.chip)),
            f"{d.chip.upper()} in BOOTSEL mode (PICOBOOT), boot ROM serial {d.serial or '?'}",
            "" if d.accessible else f"cannot open: {fix_text(getpass.getuser())}",
        )
        for d in bootsel
    ]
    rows += [row(r.probe_id, "", r.vid_pid, _running_text(r)) for r in running]
    rows += [row(b.serial or b.vid_pid, "", b.vid_pid, b.name, "cannot open") for b in blocked]
    print_table([("probe ID, description", {}), ("target", {"no_wrap": True}), ("USB", {"no_wrap": True})], rows)
    width = output_width() or 80
    for b in blocked:
        click.echo(f"{b.serial or b.vid_pid} cannot be opened:")
        for label, text in (("reason", b.reason), ("fix", b.fix)):
            click.echo(_wrapped(f"{label}: {text}", width, "    "))


def _wrapped(text: str, width: int, indent: str) -> str:
    """``text`` wrapped to ``width`` at spaces, every line indented (a word longer than a line,
    a path, is kept whole)."""
    import textwrap

    return "\n".join(
        textwrap.wrap(
            text,
            width=width,
            initial_indent=indent,
            subsequent_indent=indent + "  ",
            break_long_words=False,
            break_on_hyphens=False,
        )
    )


def _running_text(r) -> str:
    what = f"running firmware ({r.product or 'no product string'}, serial {r.serial or '?'})"
    if r.interface is None:
        return what + ": no USB reset interface, hold BOOTSEL to flash it without a probe"
    return what + ": -u picoboot reboots it into BOOTSEL"


def _pid(chip: str) -> int:
    from piflash.probe.picoboot import CHIPS

    return next(pid for pid, name in CHIPS.items() if name == chip)


@click.command(context_settings=CONTEXT)
@click.argument("pattern", required=False)
@click.option(
    "--pack",
    "packs",
    multiple=True,
    metavar="FILE",
    help="Also list the parts of this CMSIS pack (.pack or directory; repeatable).",
)
@click.option("--json", "json_mode", is_flag=True, help="Print JSON.")
@handles_errors
def targets(pattern, packs, json_mode):
    """List the target types pyOCD knows (PATTERN filters by substring)."""
    from piflash.targets.info import list_targets

    rows = list_targets(pattern, list(packs) or None)
    if json_mode:
        emit_json({"targets": rows})
        return
    if not rows and pattern:
        import difflib

        names = [r["name"] for r in list_targets(None, list(packs) or None)]
        from piflash.targets.families import board_targets

        # Board names people search for (each family's boards: Pico, micro:bit...).
        close = [t for board, types in board_targets().items() if board in pattern.lower() for t in types]
        close += [n for n in difflib.get_close_matches(pattern.lower(), names, n=5, cutoff=0.5) if n not in close]
        click.secho(f"no target type matches '{pattern}' (a part of the name, any case)", fg="yellow", err=True)
        click.echo(
            "hint: "
            + (f"close names: {', '.join(close)}; " if close else "")
            + f"'piflash targets' lists all {len(names)}",
            err=True,
        )
        return
    for row in rows:
        flash = f"{row['flash_bytes'] // 1024:,} KiB flash" if row["flash_bytes"] else ""
        source = f"  (pack {row['pack']})" if row["pack"] else ""
        click.echo(f"{row['name']:<24} {row['vendor']:<24} {flash}{source}".rstrip())
