"""``piflash rtt``: stream a board's RTT channel 0 to the terminal (as ``pyocd rtt`` does)."""

from __future__ import annotations

import dataclasses
import sys

import click

from piflash.cli.options import (
    CONTEXT,
    EXIT_CODES_EPILOG,
    Seconds,
    _int_auto,
    handles_errors,
    memory_guarded,
    probe_options,
    require_transport,
    resolve,
    session_options,
    sigterm_as_interrupt,
)
from piflash.limits import RTT_DURATION_MAX_S, RTT_FIND_TIMEOUT_MAX_S


@click.command(epilog=EXIT_CODES_EPILOG, context_settings=CONTEXT)
@click.argument("firmware", required=False, type=click.Path(dir_okay=False))
@probe_options
@click.option(
    "--address",
    callback=_int_auto,
    metavar="ADDR",
    help="The RTT control block's address [default: FIRMWARE's _SEGGER_RTT symbol, else RAM is searched].",
)
@click.option("--reset", is_flag=True, help="Reset the target first and show what it prints from its start.")
@click.option(
    "--find-timeout",
    type=Seconds(RTT_FIND_TIMEOUT_MAX_S),
    default=5.0,
    show_default=True,
    metavar="SECONDS",
    help="How long to look for the control block (at most 600).",
)
@click.option(
    "--duration",
    type=Seconds(RTT_DURATION_MAX_S),
    metavar="SECONDS",
    help="Stop after this many seconds, at most a week [default: run until Ctrl-C].",
)
@handles_errors
def rtt(firmware, probe, target, frequency, profile, pyocd_options, address, reset, find_timeout, duration):
    """Print what the board writes to RTT channel 0 until Ctrl-C.

    FIRMWARE (an ELF, optional) gives the control block's address by its _SEGGER_RTT symbol;
    without it the target's RAM is searched. Nothing is recorded in the history.

    \b
    Examples:
      piflash rtt build/app.elf -t nrf52840 --reset
      piflash rtt -u 0240000032044e45 -t nrf52840 --address 0x20000400
    """
    from piflash.jobs.workflow import monitor_rtt

    sigterm_as_interrupt()
    s = resolve(profile, probe=probe, target=target, frequency=frequency)
    require_transport(s.probe, ["rtt"], "rtt", "RTT reads the target's RAM while its firmware runs")
    out = sys.stdout.buffer

    def write(data: bytes) -> None:
        out.write(data)
        out.flush()

    monitor_rtt(
        s.probe,
        s.target,
        s.job.frequency,
        write,
        firmware_path=firmware,
        address=address,
        reset=reset,
        find_timeout=find_timeout,
        duration=duration,
        options=session_options(s, pyocd_options),
    )


@click.command("run", epilog=EXIT_CODES_EPILOG, context_settings=CONTEXT)
@click.argument("firmware", required=False, type=click.Path(dir_okay=False))
@probe_options
@click.option(
    "--until",
    metavar="REGEX",
    help="Stop once RTT channel 0 printed text matching REGEX (exit 0); with --timeout, exit 26 if it did not in time.",
)
@click.option(
    "--timeout",
    type=Seconds(RTT_DURATION_MAX_S),
    metavar="SECONDS",
    help="Stop after this many seconds of output [default: run until Ctrl-C, or --until].",
)
@click.option(
    "--find-timeout",
    type=Seconds(RTT_FIND_TIMEOUT_MAX_S),
    default=5.0,
    show_default=True,
    metavar="SECONDS",
    help="How long to look for the RTT control block after the reset (at most 600).",
)
@click.option("--base-address", callback=_int_auto, metavar="ADDR", help="Load address of a .bin file.")
@click.option("--quiet", "-q", is_flag=True, help="No progress: only what the board prints.")
@handles_errors
@memory_guarded("flash")
def run(firmware, probe, target, frequency, profile, pyocd_options, until, timeout, find_timeout, base_address, quiet):
    """Flash FIRMWARE (erase, program, verify, reset), then print what the board writes to RTT
    channel 0 until Ctrl-C, --until REGEX or --timeout, as 'probe-rs run' does.

    The flash is recorded in the history as 'piflash flash' records it; the stream goes to stdout,
    progress and messages to stderr. A profile's serial: and patch: are not applied (a numbered
    board is 'piflash flash's job). defmt frames are printed as they come: no kept Python
    decoder exists; pipe them to 'defmt-print -e FIRMWARE.elf' (knurling-rs).

    \b
    Examples:
      piflash run build/app.elf -t nrf52840
      piflash run build/app.elf -t nrf52840 --until 'self-test: (PASS|FAIL)' --timeout 10
    """
    from piflash.cli.flash import _load, _run_with_progress
    from piflash.jobs.workflow import flash_firmware, monitor_rtt
    from piflash.production.bootcheck import parse_boot_check

    sigterm_as_interrupt()
    if until is not None:
        try:
            parse_boot_check(f"rtt:{until}")  # the boot check's own checks of a pattern
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="'--until'") from None
    s = resolve(profile, firmware=firmware, probe=probe, target=target, frequency=frequency, base_address=base_address)
    require_transport(s.probe, ["flash", "rtt"], "run", "RTT reads the target's RAM while its firmware runs")
    image = _load(s)
    job = s.job if s.job.reset else dataclasses.replace(s.job, reset=True)  # the firmware must run
    job = dataclasses.replace(job, session_options=session_options(s, pyocd_options))
    result = _run_with_progress(  # json_mode=True: the display on stderr, stdout is the board's
        s,
        quiet,
        True,
        lambda display, on_connected: flash_firmware(
            image, probe=s.probe, target=s.target, job=job, progress=display, on_connected=on_connected
        ),
    )
    if not quiet:
        click.secho(f"Flashed and verified {image.size:,} bytes on {result.target}", fg="green", err=True)
        click.echo("RTT channel 0 follows (Ctrl-C stops):", err=True)
    out = sys.stdout.buffer

    def write(data: bytes) -> None:
        out.write(data)
        out.flush()

    monitor_rtt(
        result.probe_id or s.probe,
        result.target or s.target,
        s.job.frequency,
        write,
        firmware_path=s.firmware if str(s.firmware).lower().endswith(".elf") else None,
        find_timeout=find_timeout,
        duration=timeout,
        options=session_options(s, pyocd_options),
        until=until,
    )
