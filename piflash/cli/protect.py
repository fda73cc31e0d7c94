"""``piflash protect status|lock|recover``: read-out protection (nRF APPROTECT, STM32 RDP), a thin
layer over :mod:`piflash.production.protect` that records each run in the history."""

from __future__ import annotations

import click

from piflash.cli.options import (
    CONTEXT,
    EXIT_CODES_EPILOG,
    Seconds,
    confirm_mass_erase,
    emit_json,
    handles_errors,
    output_options,
    probe_options,
    require_transport,
    resolve,
    sigterm_as_interrupt,
    yes_option,
)
from piflash.limits import RECOVER_TIMEOUT_MAX_S


@click.group(context_settings=CONTEXT, epilog=EXIT_CODES_EPILOG)
def protect():
    """Read-out protection: read it, lock a chip, or recover (mass-erase) a locked one.

    \b
    status   reads the chip's real state; never writes or erases anything
    lock     sets APPROTECT (nRF) / RDP level 1 (STM32F1), resets, reads it back
    recover  only if status reads locked: mass-erases the chip (all flash, nRF UICR), opens it
    """


def _run(operation: str, profile, probe, target, frequency, action):
    from piflash.cli.flash import _recorded
    from piflash.jobs.workflow import tracking
    from piflash.production.protect import open_port
    from piflash.record.result import OperationResult

    s = resolve(profile, probe=probe, target=target, frequency=frequency)
    require_transport(s.probe, ["protect"], "protect", "the RP2040 has no read-out protection")
    if not s.target:
        raise click.UsageError("protect needs the target type: --target (or 'target:' in a profile)")

    def call(on_connected):
        result = OperationResult.start(operation, None, s.probe, s.target)
        with tracking(result):
            try:
                with open_port(s.probe, s.target, s.job.frequency) as port:
                    result.probe_id = port.dp.probe.unique_id
                    result.target_uid = _target_uid(port, s.target)
                    on_connected(result)  # the history row opens: the board is reached
                    action(port, s.target, result)
                    if result.target_uid is None:
                        result.target_uid = _target_uid(port, s.target)
            except KeyboardInterrupt:
                from piflash.errors import OperationInterrupted

                raise OperationInterrupted(
                    f"interrupted during {operation}: run 'piflash protect status' to see the state"
                ) from None
            except Exception as exc:
                from piflash.errors import PiflashError
                from piflash.probe.pyocd_errors import translate_error

                if isinstance(exc, PiflashError):
                    raise
                raise translate_error(exc, operation) from exc
        return result

    return _recorded(s, call)


def _target_uid(port, target: str):
    """The chip's unique ID (hex) if the debugger may read it now, else None."""
    from piflash.targets.catalog import uid_location

    loc = uid_location(target)
    if loc is None:
        return None
    try:
        words = [port.read32(loc.address + i) for i in range(0, loc.size, 4)]
    except Exception:  # a locked nRF52 hides it
        return None
    return b"".join(w.to_bytes(4, "little") for w in words)[: loc.size].hex()


def _show(result, status, json_mode: bool, quiet: bool, line: str) -> None:
    if json_mode:
        out = result.to_dict()
        out["status"] = status.to_dict()
        emit_json(out)
    elif not quiet:
        click.echo(line)


@protect.command()
@probe_options
@output_options
@handles_errors
def status(probe, target, frequency, profile, pyocd_options, quiet, json_mode):
    """Read the chip's read-out protection. Writes and erases nothing."""
    from piflash.production.protect import read_status

    got = {}

    def action(port, tgt, result):
        got["status"] = st = read_status(port, tgt)
        result.protection = st.state

    result = _run("protect-status", profile, probe, target, frequency, action)
    st = got["status"]
    note = ""
    if st.configured and not st.locked:
        note = " (the setting is written but not in effect: reset the chip, then read again)"
    _show(
        result, st, json_mode, quiet, f"{result.target} on {result.probe_id}: {st.state.upper()}{note}\n  {st.detail}"
    )


@protect.command()
@probe_options
@output_options
@handles_errors
def lock(probe, target, frequency, profile, pyocd_options, quiet, json_mode):
    """Lock the chip (the debugger is shut out until a recover erases it), then read it back."""
    from piflash.production.protect import lock as do_lock

    sigterm_as_interrupt()
    got = {}

    def action(port, tgt, result):
        got["status"] = st = do_lock(port, tgt)
        result.protection = st.state

    result = _run("lock", profile, probe, target, frequency, action)
    _show(
        result,
        got["status"],
        json_mode,
        quiet,
        f"LOCKED {result.target} on {result.probe_id} (read back: {got['status'].detail})",
    )


@protect.command()
@probe_options
@click.option(
    "--timeout",
    type=Seconds(RECOVER_TIMEOUT_MAX_S, minimum=0.1, min_open=False),
    default=None,
    metavar="SECONDS",
    help="How long the mass erase may take, 0.1 to 3600 [default: 15].",
)
@yes_option
@output_options
@handles_errors
def recover(probe, target, frequency, profile, pyocd_options, timeout, yes, quiet, json_mode):
    """Open a LOCKED chip by mass erase. A chip that reads open is left untouched.

    The erase wipes all of flash (and on nRF the UICR): the firmware and any data on the board
    are lost. It only happens after the state was read as locked, and after the user said yes:
    on a terminal it asks first, without one it needs --yes.
    """
    from piflash.production.protect import RECOVER_TIMEOUT, read_status
    from piflash.production.protect import recover as do_recover

    sigterm_as_interrupt()
    require_transport(probe, ["protect"], "protect recover", "the RP2040 has no read-out protection")
    if not resolve(profile, probe=probe, target=target, frequency=frequency).target:
        raise click.UsageError("protect needs the target type: --target (or 'target:' in a profile)")
    confirm_mass_erase("all of its flash and, on an nRF, the UICR, if it reads locked", yes, "protect recover")
    got = {}

    def action(port, tgt, result):
        before = read_status(port, tgt)
        got["before"] = before
        if not before.locked:
            got["status"] = before
            result.protection = before.state
            return
        result.operation = "recover-mass-erase"
        result.program.erase_mode = "chip"
        got["status"] = st = do_recover(port, tgt, timeout or RECOVER_TIMEOUT)
        result.protection = st.state

    result = _run("recover", profile, probe, target, frequency, action)
    st = got["status"]
    if not got["before"].locked:
        line = f"{result.target} on {result.probe_id} is not locked: nothing erased\n  {st.detail}"
    else:
        line = (
            f"Recovered {result.target} on {result.probe_id}: MASS ERASE done (flash"
            f"{' and UICR' if st.family.startswith('nrf') else ''} erased), now {st.state.upper()}\n"
            f"  {st.detail}"
        )
    _show(result, st, json_mode, quiet, line)
