"""``piflash rtt``: stream a board's RTT channel 0 to the terminal (as ``pyocd rtt`` does)."""

from __future__ import annotations

import sys

import click

from piflash.cli.options import (
    CONTEXT,
    EXIT_CODES_EPILOG,
    Seconds,
    _int_auto,
    handles_errors,
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
