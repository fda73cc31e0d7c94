"""The ``piflash`` command: a thin click layer over :mod:`piflash.flasher` and friends.

Only click and piflash's own light modules are imported at start-up; pyOCD,
rich and the simulator are imported by the commands that use them, so
``piflash --help`` answers at once even on a Pi Zero 2W.
"""

from __future__ import annotations

import functools
import json
import logging
import signal
import sys
from typing import Optional

import click

from piflash import __version__
from piflash.cli_guard import memory_guarded
from piflash.errors import EXIT_CODE_HELP, ExitCode, PiflashError
from piflash.program import ERASE_MODES

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}

EXIT_CODES_EPILOG = "\b\nExit codes:\n" + "\n".join(
    f"  {int(code):>3}  {text}" for code, text in EXIT_CODE_HELP.items())


def _emit_error(exc: PiflashError, json_mode: bool, result=None) -> None:
    if json_mode:
        out = result.to_dict() if result is not None else {"ok": False}
        out["error"] = exc.to_dict()
        click.echo(json.dumps(out, indent=2))
    click.secho(f"error: {exc.message}", fg="red", err=True)
    if exc.hint:
        click.echo(f"hint: {exc.hint}", err=True)


def handles_errors(func):
    """Print a PiflashError as 'error:'/'hint:' lines and exit with its code; same for Ctrl-C."""
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        json_mode = bool(kwargs.get("json_mode"))
        try:
            return func(*args, **kwargs)
        except PiflashError as exc:
            _emit_error(exc, json_mode, getattr(exc, "result", None))
            sys.exit(int(exc.exit_code))
        except KeyboardInterrupt:
            click.secho("error: interrupted", fg="red", err=True)
            sys.exit(int(ExitCode.INTERRUPTED))
    return wrapper


def _sigterm_as_interrupt() -> None:
    """Let SIGTERM take the same clean path as Ctrl-C (disconnect, say what state the board is in)."""
    def handler(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, handler)


def _int_auto(ctx, param, value):
    if value is None:
        return None
    try:
        return int(str(value), 0)
    except ValueError:
        raise click.BadParameter(f"'{value}' is not a number (use 0x08000000 or 134217728)")


def _frequency(ctx, param, value):
    if value is None:
        return None
    from piflash.profiles import parse_frequency
    try:
        return parse_frequency(value)
    except PiflashError as exc:
        raise click.BadParameter(exc.message.replace("key 'frequency': ", ""))


def _pyocd_options(ctx, param, values):
    out = {}
    for item in values:
        name, sep, raw = item.partition("=")
        if not sep or not name:
            raise click.BadParameter(f"'{item}' is not NAME=VALUE")
        value: object = raw
        if raw.lower() in ("true", "false"):
            value = raw.lower() == "true"
        else:
            for conv in (lambda v: int(v, 0), float):
                try:
                    value = conv(raw)
                    break
                except ValueError:
                    pass
        out[name] = value
    return out


def probe_options(func):
    """--probe, --target, --frequency, --profile and -O, shared by every command that opens a probe."""
    func = click.option("--option", "-O", "pyocd_options", multiple=True, callback=_pyocd_options,
                        metavar="NAME=VALUE",
                        help="A pyOCD session option, e.g. -O flash.timeout.erase_sector=2 (repeatable).")(func)
    func = click.option("--profile", "-p", "profile", metavar="NAME|FILE",
                        help="Profile: a YAML file, or a name searched in ./piflash.d, "
                             "$XDG_CONFIG_HOME/piflash/profiles, /etc/piflash/profiles.")(func)
    func = click.option("--frequency", "-f", callback=_frequency, metavar="HZ",
                        help="SWD clock, e.g. 4000000 or 4MHz.")(func)
    func = click.option("--target", "-t", metavar="TYPE",
                        help="pyOCD target type, e.g. nrf52840, stm32f103rc ('piflash targets').")(func)
    func = click.option("--probe", "-u", metavar="UID",
                        help="Probe unique ID (or part of one), e.g. a serial number, "
                             "sim:nrf52840, remote:HOST:PORT.")(func)
    return func


def firmware_options(func):
    """The FIRMWARE argument and --base-address, shared by flash and verify."""
    func = click.option("--base-address", "-a", callback=_int_auto, metavar="ADDR",
                        help="Load address of a .bin file, e.g. 0x08000000.")(func)
    return click.argument("firmware", required=False, type=click.Path(dir_okay=False))(func)


reset_option = click.option("--reset/--no-reset", default=None,
                            help="Reset the target afterwards; --no-reset leaves it halted "
                                 "[default: reset, or the profile's].")


def output_options(func):
    func = click.option("--json", "json_mode", is_flag=True,
                        help="Print one JSON result object on stdout.")(func)
    func = click.option("--quiet", "-q", is_flag=True, help="No progress display.")(func)
    return func


class Settings(dict):
    """Resolved settings of one command: the profile's values overridden by the command line."""


def resolve(profile: Optional[str], **cli_values) -> Settings:
    """Merge a profile (if any) with command-line values; the command line wins when given.

    Overriding the profile's firmware drops its pinned SHA-256 (and its base address unless the
    new file is a .bin), as :meth:`piflash.profiles.Profile.with_overrides` does.
    """
    from piflash import profiles
    from piflash.errors import ProfileError
    from piflash.target import check_target

    given = {k: v for k, v in cli_values.items() if v is not None}
    out = Settings(profile=None, firmware=None, sha256=None, target=None, probe=None,
                   frequency=None, erase="auto", base_address=None, verify=True, reset=True)
    if not profile:
        out.update(given)
        return out
    prof = profiles.load_profile(profiles.find_profile(profile), check_target=check_target)
    try:
        prof = prof.with_overrides(**given)
    except ProfileError as exc:  # the command line contradicts the profile: a usage error
        raise click.UsageError(f"{exc.message} (with profile {prof.path})") from None
    out.update(profile=prof.name, firmware=str(prof.firmware), sha256=prof.sha256,
               target=prof.target, probe=prof.probe, frequency=prof.frequency, erase=prof.erase,
               base_address=prof.base_address, verify=prof.verify, reset=prof.reset,
               profile_obj=prof)
    return out


def _load(settings: Settings):
    from piflash.image import load_image

    if not settings.get("firmware"):
        raise click.UsageError("no firmware given (a FIRMWARE argument or a profile with 'firmware:')")
    image = load_image(settings["firmware"], settings.get("base_address"))
    if settings.get("profile_obj") is not None:
        settings["profile_obj"].check_digest(image.sha256)
    return image


def _run_with_progress(settings: Settings, quiet: bool, json_mode: bool, call):
    from piflash.cli_progress import RichProgress, make_progress

    display = make_progress(quiet, json_mode)
    if isinstance(display, RichProgress):
        with display:
            return _recorded(settings, lambda: call(display))
    return _recorded(settings, lambda: call(display))


def _recorded(settings: Settings, call):
    """Run one workflow call and record its result, passed or failed, in the history."""
    try:
        result = call()
    except PiflashError as exc:
        if getattr(exc, "result", None) is not None:
            _record(exc.result, settings)
        raise
    _record(result, settings)
    return result


def _record(result, settings: Settings) -> None:
    """Append ``result`` to the history; a history that cannot be written warns, never fails the job."""
    from piflash.history import History, HistoryError, default_path

    path = default_path()
    if path is None:
        return
    try:
        with History(path) as db:
            db.record(result, profile=settings.get("profile"))
    except HistoryError as exc:
        click.secho(f"warning: not recorded in the history: {exc}", fg="yellow", err=True)


def _report(result, json_mode: bool, quiet: bool, line: str) -> None:
    if json_mode:
        click.echo(json.dumps(result.to_dict(), indent=2))
    elif not quiet:
        click.secho(line, fg="green")


@click.group(context_settings=CONTEXT, epilog=EXIT_CODES_EPILOG)
@click.version_option(__version__, prog_name="piflash")
@click.option("--verbose", "-v", count=True, help="Show pyOCD's log (-vv for debug).")
def cli(verbose: int) -> None:
    """Flash Arm Cortex-M microcontrollers through pyOCD: connect, erase, program,
    read-back verify, reset.

    \b
    Examples:
      piflash flash firmware.hex --target nrf52840
      piflash flash app.bin --base-address 0x08000000 -t stm32f103rc -u 066DFF49
      piflash flash --profile my-board
      piflash probes
    """
    level = {0: logging.CRITICAL, 1: logging.INFO}.get(verbose, logging.DEBUG)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(message)s")
    logging.getLogger("pyocd").setLevel(level)
    logging.getLogger("piflash").setLevel(min(level, logging.WARNING))


@cli.command(epilog=EXIT_CODES_EPILOG, context_settings=CONTEXT)
@firmware_options
@probe_options
@click.option("--erase", "-e", type=click.Choice(ERASE_MODES), default=None,
              help="Erase mode [default: auto, the faster of the two].")
@click.option("--verify/--no-verify", default=None,
              help="Read back and compare every programmed byte [default: on, or the profile's].")
@reset_option
@output_options
@handles_errors
@memory_guarded("flash")
def flash(firmware, probe, target, frequency, profile, pyocd_options, base_address, erase, verify,
          reset, quiet, json_mode):
    """Flash FIRMWARE (.hex, .elf, or .bin with --base-address), verify it and reset the target."""
    from piflash.flasher import flash_firmware

    _sigterm_as_interrupt()
    s = resolve(profile, firmware=firmware, probe=probe, target=target, frequency=frequency,
                erase=erase, base_address=base_address, verify=verify, reset=reset)
    image = _load(s)
    result = _run_with_progress(s, quiet, json_mode, lambda display: flash_firmware(
        image, probe=s["probe"], target=s["target"], frequency=s["frequency"], erase=s["erase"],
        verify=s["verify"], reset=s["reset"], progress=display, options=pyocd_options))
    p = result.program
    verified = "verified" if result.verify else "NOT verified"
    _report(result, json_mode, quiet,
            f"Flashed {image.size:,} bytes to {result.target} ({result.probe}): {p.programmed_bytes:,} "
            f"programmed, {p.skipped_bytes:,} unchanged, {verified}, in {result.duration:.2f} s")


@cli.command(epilog=EXIT_CODES_EPILOG, context_settings=CONTEXT)
@firmware_options
@probe_options
@reset_option
@output_options
@handles_errors
@memory_guarded("verify")
def verify(firmware, probe, target, frequency, profile, pyocd_options, base_address, reset, quiet,
           json_mode):
    """Compare the target's flash with FIRMWARE without writing anything."""
    from piflash.flasher import verify_firmware

    _sigterm_as_interrupt()
    s = resolve(profile, firmware=firmware, probe=probe, target=target, frequency=frequency,
                base_address=base_address, reset=reset)
    image = _load(s)
    result = _run_with_progress(s, quiet, json_mode, lambda display: verify_firmware(
        image, probe=s["probe"], target=s["target"], frequency=s["frequency"], progress=display,
        reset=s["reset"], options=pyocd_options))
    _report(result, json_mode, quiet, f"Verified: all {image.size:,} bytes match on {result.target}")


def _range(text: str):
    try:
        if "+" in text:
            start, length = (int(v, 0) for v in text.split("+", 1))
            start, end = start, start + length
        elif "-" in text:
            start, end = (int(v, 0) for v in text.split("-", 1))
        else:
            start = int(text, 0)
            end = start + 1
    except ValueError:
        raise click.BadParameter(f"'{text}' is not ADDR, START-END or START+LENGTH") from None
    if end <= start:
        raise click.BadParameter(f"'{text}' is an empty range (END is exclusive, LENGTH must be > 0)")
    return start, end


@cli.command(epilog=EXIT_CODES_EPILOG, context_settings=CONTEXT)
@probe_options
@click.option("--chip", "mode", flag_value="chip", help="Erase the whole chip (the default).")
@click.option("--sector", "sectors", multiple=True, metavar="RANGE",
              help="Erase the sectors covering RANGE: ADDR, START-END (end exclusive) or START+LENGTH. Repeatable.")
@output_options
@handles_errors
@memory_guarded("erase")
def erase(probe, target, frequency, profile, pyocd_options, mode, sectors, quiet, json_mode):
    """Erase the chip, or the sectors covering the given ranges."""
    from piflash.flasher import erase_target

    _sigterm_as_interrupt()
    if mode == "chip" and sectors:
        raise click.UsageError("--chip and --sector exclude each other")
    s = resolve(profile, probe=probe, target=target, frequency=frequency)
    ranges = [_range(r) for r in sectors]
    result = _run_with_progress(s, quiet, json_mode, lambda display: erase_target(
        s["probe"], s["target"], "sector" if ranges else "chip", ranges, s["frequency"], display,
        pyocd_options))
    _report(result, json_mode, quiet, f"Erased {result.program.erased_bytes:,} bytes on {result.target}")


@cli.command(epilog=EXIT_CODES_EPILOG, context_settings=CONTEXT)
@probe_options
@click.option("--halt", is_flag=True, help="Halt at the reset vector instead of running.")
@output_options
@handles_errors
def reset(probe, target, frequency, profile, pyocd_options, halt, quiet, json_mode):
    """Reset the target."""
    from piflash.flasher import reset_board

    s = resolve(profile, probe=probe, target=target, frequency=frequency)
    result = _recorded(s, lambda: reset_board(s["probe"], s["target"], halt, s["frequency"],
                                              pyocd_options))
    _report(result, json_mode, quiet, f"Reset {result.target}" + (" (halted)" if halt else ""))


def _register_subgroups() -> None:
    from piflash.cli_doctor import doctor
    from piflash.cli_history import history
    from piflash.cli_profile import profile
    from piflash.cli_query import info, probes, targets
    from piflash.cli_setup import setup
    from piflash.cli_sim import sim
    from piflash.cli_service import install_service
    from piflash.cli_station import station

    cli.add_command(doctor)
    cli.add_command(history)
    cli.add_command(info)
    cli.add_command(probes)
    cli.add_command(targets)
    cli.add_command(profile)
    cli.add_command(setup)
    cli.add_command(sim)
    station.add_command(install_service)  # piflash/cli_service.py: station install-service
    cli.add_command(station)


_register_subgroups()


def main() -> None:
    """Console-script entry point.

    With ``--json`` anywhere on the command line, a usage error also prints its result object
    (``{"ok": false, "error": {...}}``) on stdout, so a script always gets one JSON object.
    """
    try:
        cli.main(prog_name="piflash", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("Aborted!", err=True)
        sys.exit(int(ExitCode.INTERRUPTED))
    except click.exceptions.ClickException as exc:
        if "--json" in sys.argv[1:]:
            click.echo(json.dumps({"ok": False, "error": {
                "kind": "UsageError", "message": exc.format_message(), "hint": None,
                "exit_code": exc.exit_code}}, indent=2))
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
