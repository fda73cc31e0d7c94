"""What every ``piflash`` command shares: click settings, the exit-code epilog, error handling,
the probe/firmware/output options, the profile merge and the memory guard's ``--force``.

Command modules import this module, never the root group (``piflash.cli``), so the CLI has no
import circle. Only click and piflash's light modules are imported here; pyOCD, rich and the
guard's own module are imported when a command runs.
"""

from __future__ import annotations

import functools
import json
import signal
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, List, Optional, Tuple

import click

from piflash.cli.completion import complete_probe, complete_profile, complete_target
from piflash.errors import EXIT_CODE_HELP, ExitCode, PiflashError

if TYPE_CHECKING:
    from piflash.jobs.options import FlashOptions

#: click context settings of every command: -h as well as --help, help text up to 100 columns.
CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}

#: The exit-code table (piflash.errors.EXIT_CODE_HELP) as the epilog of ``piflash --help``.
EXIT_CODES_TABLE = "\b\nExit codes:\n" + "\n".join(f"  {int(code):>3}  {text}" for code, text in EXIT_CODE_HELP.items())

#: The --help epilog of every subcommand: one line that points to the table, so that a
#: subcommand's help stays about the subcommand (the table is in ``piflash --help`` and
#: docs/exit-codes.md).
EXIT_CODES_EPILOG = "Exit codes: listed by 'piflash --help' and in docs/exit-codes.md."


def command_name(ctx: Optional[click.Context] = None) -> Optional[str]:
    """The running command's name below ``piflash`` ("flash", "protect status", "history
    verify-chain"), from click's context (default: the current one); None outside a command."""
    ctx = ctx or click.get_current_context(silent=True)
    names: List[str] = []
    while ctx is not None and ctx.parent is not None:
        names.insert(0, ctx.command.name or ctx.info_name or "")  # an alias (list) by its name (probes)
        ctx = ctx.parent
    return " ".join(names) or None


def emit_json(body: dict, command: Optional[str] = None) -> None:
    """Print ``body`` as the command's one JSON object on stdout, led by ``schema_version``
    (:data:`piflash.record.result.SCHEMA_VERSION`) and ``command`` (default :func:`command_name`).
    Every ``--json`` output goes through here; docs/result.schema.json describes them all."""
    from piflash.record.result import SCHEMA_VERSION

    out = {"schema_version": SCHEMA_VERSION, "command": command or command_name()}
    out.update((k, v) for k, v in body.items() if k not in out)
    click.echo(json.dumps(out, indent=2))


def emit_error(exc: PiflashError, json_mode: bool, result=None) -> None:
    """Report ``exc`` to the user: ``error:`` and ``hint:`` lines on stderr and, with
    ``json_mode``, one JSON object on stdout (``result.to_dict()`` when the operation got that
    far, else ``{"ok": false}``, plus ``"error": exc.to_dict()``, see :func:`emit_json`)."""
    from piflash.redact import scrub

    if json_mode:
        out = result.to_dict() if result is not None else {"ok": False}
        out["error"] = dict(exc.to_dict(), message=scrub(exc.message), hint=scrub(exc.hint))
        emit_json(out)
    click.secho(f"error: {scrub(exc.message)}", fg="red", err=True)
    if exc.hint:
        click.echo(f"hint: {scrub(exc.hint)}", err=True)


def handles_errors(func):
    """Print a PiflashError as 'error:'/'hint:' lines and exit with its code; same for Ctrl-C."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        json_mode = bool(kwargs.get("json_mode"))
        try:
            return func(*args, **kwargs)
        except PiflashError as exc:
            emit_error(exc, json_mode, exc.result)
            sys.exit(int(exc.exit_code))
        except KeyboardInterrupt:
            click.secho("error: interrupted", fg="red", err=True)
            sys.exit(int(ExitCode.INTERRUPTED))

    return wrapper


#: ``--yes``/``-y`` of the commands that mass-erase a chip (``erase --chip``, ``protect recover``).
yes_option = click.option(
    "--yes", "-y", is_flag=True, help="Do not ask before the mass erase (needed when stdin is not a terminal)."
)


def confirm_mass_erase(what: str, yes: bool, command: str) -> None:
    """Get the user's go-ahead for a mass erase, before the probe is opened.

    With ``yes`` it goes on. On a terminal (stdin a tty) it asks on stderr (stdout stays one JSON
    object with ``--json``), default no. Without a terminal it cannot ask: it refuses, so a script
    or a pasted line never mass-erases a chip nobody confirmed.

    :param what: what is lost, e.g. "all of its flash and, on an nRF, the UICR".
    :param command: the command as typed, for the messages, e.g. ``"erase --chip"``.
    :raises click.UsageError: no terminal and no ``--yes`` (exit 2), naming ``--yes``.
    :raises OperationInterrupted: the user answered no (exit 130): nothing was touched.
    """
    from piflash.errors import OperationInterrupted

    if yes:
        return
    if not sys.stdin.isatty():
        raise click.UsageError(
            f"{command} mass-erases the chip, losing {what}; stdin is not a terminal, "
            f"so piflash cannot ask: add --yes to go on"
        )
    if not click.confirm(f"{command} mass-erases the chip, losing {what}. Go on?", default=False, err=True):
        raise OperationInterrupted(f"{command} not confirmed: nothing was erased, the probe was not opened")


def sigterm_as_interrupt() -> None:
    """Let SIGTERM take the same clean path as Ctrl-C (disconnect, say what state the board is in)."""

    def handler(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, handler)


def _int_auto(ctx, param, value):
    """An address option: a number in any base Python reads (``0x08000000``, ``134217728``) that is
    a 32-bit address, 0 to 0xFFFFFFFF (Cortex-M addresses are 32 bits); else a usage error."""
    if value is None:
        return None
    try:
        number = int(str(value).strip(), 0)
    except ValueError:
        raise click.BadParameter(f"'{value:.40}' is not a number (use 0x08000000 or 134217728)")
    if not 0 <= number <= 0xFFFFFFFF:
        raise click.BadParameter(f"'{value:.40}' is not a 32-bit address (0 to 0xFFFFFFFF)")
    return number


def _frequency(ctx, param, value):
    if value is None:
        return None
    from piflash.profiles import parse_frequency

    try:
        return parse_frequency(value)
    except PiflashError as exc:
        raise click.BadParameter(exc.message.replace("key 'frequency': ", ""))


class Seconds(click.ParamType):
    """A length of time in seconds, checked by :func:`piflash.limits.seconds`: finite, more than
    ``minimum`` (or at least it, without ``min_open``), at most ``maximum``; ``inf`` and ``nan``
    are usage errors (exit 2), not waits."""

    name = "seconds"

    def __init__(self, maximum: float, minimum: float = 0.0, min_open: bool = True) -> None:
        self.maximum, self.minimum, self.min_open = maximum, minimum, min_open

    def convert(self, value, param, ctx):
        from piflash.limits import seconds

        try:
            return seconds(value, "the value", self.maximum, self.minimum, self.min_open)
        except ValueError as exc:
            self.fail(str(exc).replace("the value must be", "must be"), param, ctx)


def _probe(ctx, param, value):
    """``--probe``: parsed as a probe selector (:mod:`piflash.probe.selector`), passed on as written
    (the API parses it again, with the same result); a malformed one is a usage error."""
    if value is None:
        return None
    from piflash.probe.selector import ProbeSelector

    try:
        return str(ProbeSelector.parse(value))
    except PiflashError as exc:
        raise click.BadParameter(exc.message + (f" ({exc.hint})" if exc.hint else ""))


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
    func = click.option(
        "--option",
        "-O",
        "pyocd_options",
        multiple=True,
        callback=_pyocd_options,
        metavar="NAME=VALUE",
        help="A pyOCD session option, e.g. -O flash.timeout.erase_sector=2 (repeatable).",
    )(func)
    func = click.option(
        "--profile",
        "-p",
        "profile",
        metavar="NAME|FILE",
        shell_complete=complete_profile,
        help="Profile: a YAML file, or a name searched in ./piflash.d, "
        "$XDG_CONFIG_HOME/piflash/profiles, /etc/piflash/profiles.",
    )(func)
    func = click.option(
        "--frequency", "-f", callback=_frequency, metavar="HZ", help="SWD clock, e.g. 4000000 or 4MHz."
    )(func)
    func = click.option(
        "--target",
        "-t",
        metavar="TYPE",
        shell_complete=complete_target,
        help="pyOCD target type, e.g. nrf52840, stm32f103rc ('piflash targets').",
    )(func)
    # --uid as pyOCD spells it (`pyocd flash --uid`): LAVA's pyocd boot method runs
    # `COMMAND flash OPTIONS --uid BOARD_ID IMAGE` (lava_dispatcher/actions/boot/pyocd.py), docs/ci.md.
    func = click.option(
        "--probe",
        "-u",
        "--uid",
        metavar="UID",
        callback=_probe,
        shell_complete=complete_probe,
        help="Probe unique ID, matched whole (any case): a serial number, "
        "sim:nrf52840, remote:HOST:PORT, picoboot[:SERIAL|:BUS-PORT]; "
        "0240* for a prefix that matches one probe.",
    )(func)
    return func


def firmware_options(func):
    """The FIRMWARE argument and --base-address, shared by flash and verify."""
    func = click.option(
        "--base-address", "-a", callback=_int_auto, metavar="ADDR", help="Load address of a .bin file, e.g. 0x08000000."
    )(func)
    # A plain string: a missing, unreadable or directory FIRMWARE is piflash.firmware.image.load_image's
    # FirmwareError (exit 3, as docs/exit-codes.md says), not click's usage error (exit 2).
    return click.argument("firmware", required=False, type=str)(func)


reset_option = click.option(
    "--reset/--no-reset",
    default=None,
    help="Reset the target afterwards; --no-reset leaves it halted [default: reset, or the profile's].",
)


def output_options(func):
    """--json (one result object on stdout) and --quiet (no progress display)."""
    func = click.option("--json", "json_mode", is_flag=True, help="Print one JSON result object on stdout.")(func)
    func = click.option("--quiet", "-q", is_flag=True, help="No progress display.")(func)
    return func


def _flash_options(**values) -> FlashOptions:
    """A :class:`~piflash.jobs.options.FlashOptions`, imported when a command runs (not for ``--help``)."""
    from piflash.jobs.options import FlashOptions

    return FlashOptions(**values)


@dataclass
class Settings:
    """Resolved settings of one command: the profile's values overridden by the command line
    (:func:`resolve`). What a flash job is asked to do is :attr:`job`, a
    :class:`~piflash.jobs.options.FlashOptions`; the rest is what the command acts on and records.

    :ivar profile: the profile's name (str), or None without one.
    :ivar profile_obj: the loaded :class:`piflash.profiles.Profile`, or None.
    :ivar firmware: the firmware file's path (str), or None.
    :ivar sha256: the SHA-256 the profile pins (64 hex digits), or None.
    :ivar base_address: load address of a ``.bin`` (int), or None.
    :ivar target: pyOCD target type (str), or None when the probe knows its board.
    :ivar probe: probe selector as written (str, :mod:`piflash.probe.selector`), or None.
    :ivar pack: CMSIS pack paths of the profile (tuple of str), or None.
    :ivar job: ``erase`` (default ``"auto"``), ``verify`` (True), ``reset`` (True) and
        ``frequency`` (Hz, None) from the profile and the command line; the flash command adds the
        rest (:func:`session_options`, plan, serial, lock, boot check).
    :ivar serial: the one-off serial number (str) for the history row from its first touch, or None.
    :ivar ledger: the central ledger's URL (str, ``flash --ledger``), or None for ``PIFLASH_LEDGER``.
    """

    profile: Optional[str] = None
    profile_obj: Optional[Any] = None
    firmware: Optional[str] = None
    sha256: Optional[str] = None
    base_address: Optional[int] = None
    target: Optional[str] = None
    probe: Optional[str] = None
    pack: Optional[Tuple[str, ...]] = None
    job: FlashOptions = field(default_factory=_flash_options)
    serial: Optional[str] = None
    ledger: Optional[str] = None


#: The keys of :func:`resolve` that are :class:`~piflash.jobs.options.FlashOptions` fields.
_JOB_KEYS = ("erase", "verify", "reset", "frequency")


def resolve(profile: Optional[str], **cli_values) -> Settings:
    """Merge a profile (if any) with command-line values; the command line wins when given.

    :param cli_values: ``firmware``, ``probe``, ``target``, ``frequency``, ``erase``,
        ``base_address``, ``verify``, ``reset`` as the command line gave them (None: not given).

    Overriding the profile's firmware drops its pinned SHA-256 (and its base address unless the
    new file is a .bin), as :meth:`piflash.profiles.Profile.with_overrides` does.
    """
    from piflash import profiles
    from piflash.errors import ProfileError
    from piflash.targets.catalog import check_target

    given = {k: v for k, v in cli_values.items() if v is not None}
    if not profile:
        job = _flash_options(**{k: v for k, v in given.items() if k in _JOB_KEYS})
        return Settings(job=job, **{k: v for k, v in given.items() if k not in _JOB_KEYS})
    prof = profiles.load_profile(profiles.find_profile(profile), check_target=check_target)
    try:
        prof = prof.with_overrides(**given)
    except ProfileError as exc:  # the command line contradicts the profile: a usage error
        raise click.UsageError(f"{exc.message} (with profile {prof.path})") from None
    return Settings(
        profile=prof.name,
        profile_obj=prof,
        firmware=str(prof.firmware),
        sha256=prof.sha256,
        base_address=prof.base_address,
        target=prof.target,
        probe=prof.probe,
        pack=prof.pack,
        job=_flash_options(erase=prof.erase, verify=prof.verify, reset=prof.reset, frequency=prof.frequency),
    )


def session_options(settings: Settings, pyocd_options: Optional[dict]) -> dict:
    """The pyOCD session options of one command: ``-O NAME=VALUE`` over the profile's (its
    ``pack``); ``-O pack=FILE`` replaces the profile's pack."""
    out = dict(pyocd_options or {})
    if settings.pack and "pack" not in out:
        out["pack"] = list(settings.pack)
    return out


def memory_guarded(operation: str):
    """--force, and the memory guard (piflash/host/memguard.py) run before the command imports pyOCD.

    Place it below ``handles_errors`` so a refusal exits with code 14. The guard reads
    ``$PIFLASH_PROC_ROOT`` (default ``/``), ``$PIFLASH_MEMORY_GUARD`` and the profile's
    ``memory_guard``; a tight verdict is printed as a warning on stderr.

    :param operation: what the command does, a key of :data:`piflash.host.memguard.BASELINE`
        (``flash``, ``verify``, ``erase``, ``info``). The command must take ``firmware``,
        ``profile`` and ``pyocd_options`` keyword arguments where it has them.
    """

    def decorate(func):
        @functools.wraps(func)
        def wrapper(*args, force=False, **kwargs):
            from piflash.profiles import check_job

            check_job(
                operation,
                kwargs.get("firmware"),
                kwargs.get("profile"),
                kwargs.get("pyocd_options"),
                force=force,
                warn=lambda text: click.secho(text, fg="yellow", err=True),
            )
            return func(*args, **kwargs)

        return click.option("--force", is_flag=True, help="Go on even when the memory guard says it will not fit.")(
            wrapper
        )

    return decorate


def require_transport(probe: Optional[str], needs, command: str, hint: Optional[str] = None) -> None:
    """Refuse, before the probe is opened, a command whose probe's transport does not do what it
    needs (:func:`piflash.jobs.transports.require`: the one place that decides it, one message).

    :param probe: the probe selector (str) or None; its kind names the transport.
    :param needs: capability names (:data:`piflash.jobs.transports.CAPABILITIES`), e.g. ``["identify"]``.
    :param command: the command as typed, for the message, e.g. ``"info"``.
    :param hint: what to do instead.
    :raises UnsupportedError: (exit 2) e.g. ``piflash info -u picoboot``.
    """
    from piflash.jobs.transports import caps_of, require

    require(caps_of(probe), needs, f"'piflash {command}'", hint)
