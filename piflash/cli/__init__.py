"""The ``piflash`` command: the root click group, its entry point and the table of commands.

A thin layer: each command family lives in its own module (``piflash/cli/flash.py`` for
flash/verify/erase/reset, ``query.py``, ``profile.py``, ``history.py``, ``doctor.py``,
``setup.py``, ``sim.py``, ``station.py``) that parses options and calls piflash's plain modules;
what they share is in :mod:`piflash.cli.options`. Command modules never import this module, so
there is no import circle. The CLI is the top package: it may import every other package of piflash, the simulator included; nothing imports it.

Only click and piflash's own light modules are imported at start-up; pyOCD, rich and the
simulator are imported by the commands that use them, so ``piflash --help`` answers at once even
on a Pi Zero 2W.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys

import click

from piflash import __version__
from piflash.cli.options import CONTEXT, EXIT_CODES_EPILOG, EXIT_CODES_TABLE, emit_json
from piflash.errors import ExitCode, output_closed

#: The commands, by module of ``piflash.cli``: (module, names of its click commands/groups).
COMMANDS = (
    ("flash", ("flash", "verify", "read", "erase", "reset")),
    ("query", ("info", "probes", "targets")),
    ("profile", ("profile",)),
    ("history", ("history",)),
    ("doctor", ("doctor",)),
    ("setup", ("setup",)),
    ("sim", ("sim",)),
    ("station", ("station",)),
    ("protect", ("protect",)),
    ("rtt", ("rtt", "run")),
    ("ledger", ("ledger",)),
    ("bundle", ("bundle",)),
)


def _version_message() -> str:
    """``piflash X (pyOCD Y, Python Z)``: the versions a bug report needs, read from the installed
    packages' metadata (pyOCD itself is not imported: --version stays fast)."""
    import platform
    from importlib.metadata import PackageNotFoundError, version

    try:
        pyocd = version("pyocd")
    except PackageNotFoundError:
        pyocd = "not installed"
    return f"piflash {__version__} (pyOCD {pyocd}, Python {platform.python_version()})"


def _print_version(ctx: click.Context, param, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        click.echo(_version_message())
        ctx.exit()


class _StdoutClosed(Exception):
    """stdout's reader went away (``piflash history | head -1``): raised past click, which would
    exit 1 (the internal-error code) for it, to :func:`main`, which ends quietly."""


class _Root(click.Group):
    """The root group: a BrokenPipeError from a closed stdout leaves the command as
    :class:`_StdoutClosed`, so click's own handling of EPIPE (exit 1) does not see it."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except BrokenPipeError as exc:
            if not output_closed(exc):  # a socket to a probe server: not the output's
                raise
            raise _StdoutClosed() from exc


@click.group(cls=_Root, context_settings=CONTEXT, epilog=EXIT_CODES_TABLE)
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_version,
    help="Show piflash's version, pyOCD's and Python's, and exit.",
)
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
    for handler in logging.getLogger().handlers:  # a database error in a log line: its password masked
        if not any(isinstance(f, _Scrubbed) for f in handler.filters):
            handler.addFilter(_Scrubbed())
    logging.getLogger("pyocd").setLevel(level)
    logging.getLogger("piflash").setLevel(min(level, logging.WARNING))


class _Scrubbed(logging.Filter):
    """Masks passwords in a log record's text (:func:`piflash.redact.scrub`) before it is written."""

    def filter(self, record: logging.LogRecord) -> bool:
        from piflash.redact import scrub

        text = record.getMessage()
        clean = scrub(text)
        if clean != text:
            record.msg, record.args = clean, None
        return True


#: Other names of commands, as other tools call them: ``piflash list`` is ``probes`` (probe-rs
#: ``list``, pyOCD ``list``).
ALIASES = {"list": "probes"}


def _register() -> None:
    for module, names in COMMANDS:
        mod = importlib.import_module(f"piflash.cli.{module}")
        for name in names:
            cli.add_command(getattr(mod, name))
    for alias, name in ALIASES.items():
        cli.add_command(cli.commands[name], alias)
    _point_to_exit_codes(cli)


def _point_to_exit_codes(group: click.Group) -> None:
    """Give every subcommand below ``group`` that has no epilog of its own the one line that
    points to the exit codes (:data:`EXIT_CODES_EPILOG`); the table itself ends only the root's
    help."""
    for command in group.commands.values():
        if not command.epilog:
            command.epilog = EXIT_CODES_EPILOG
        if isinstance(command, click.Group):
            _point_to_exit_codes(command)


_register()


def _command_words(args) -> str:
    """The command named on a command line that did not parse ("flash", "protect status"): the
    leading words that are piflash's commands and subcommands, options skipped."""
    words: list[str] = []
    group: click.Command = cli
    for arg in args:
        if arg.startswith("-"):
            continue
        sub = group.commands.get(arg) if isinstance(group, click.Group) else None
        if sub is None:
            break
        words.append(arg)
        group = sub
    return " ".join(words) or "piflash"


def main() -> None:
    """Console-script entry point.

    With ``--json`` anywhere on the command line, a usage error also prints its result object
    (``{"schema_version": 1, "command": ..., "ok": false, "error": {...}}``) on stdout, so a
    script always gets one JSON object.

    A closed stdout (``piflash history | head -1``) ends the command quietly with exit 141
    (:attr:`ExitCode.PIPE_CLOSED`, 128 + SIGPIPE, what a shell reports for a program SIGPIPE
    ended): no traceback. As the Python docs' "Note on SIGPIPE" recommends, stdout is then pointed
    at /dev/null so the interpreter's last flush does not fail again. A command that exited with
    its own code before it met the closed pipe keeps that code.

    A standard stream closed before the start (``piflash flash fw.hex >&-``) is opened on
    /dev/null first (:func:`_closed_streams_to_devnull`): the command runs as with ``>/dev/null``.
    """
    _closed_streams_to_devnull()
    try:
        try:
            _main()
            sys.stdout.flush()  # what is still buffered: a closed pipe may show only here
        except SystemExit:
            try:
                sys.stdout.flush()
            except BrokenPipeError:
                _stdout_to_devnull()
            raise
    except (_StdoutClosed, BrokenPipeError) as exc:
        if isinstance(exc, BrokenPipeError) and not output_closed(exc):
            raise
        _stdout_to_devnull()
        sys.exit(int(ExitCode.PIPE_CLOSED))


def _closed_streams_to_devnull() -> None:
    """Open /dev/null on each of file descriptors 0, 1 and 2 that is closed (``>&-``, ``2>&-``),
    as a daemon does, and make it ``sys.stdin``/``stdout``/``stderr`` (Python set them to None).

    Otherwise the next file opened (the history database) would get the lowest free descriptor,
    1, and what is written to stdout would go into it; and every ``sys.stdout.isatty()`` would
    fail on None. The lowest free descriptor is the closed one when the ones below are open, so
    they are opened in order."""
    for fd, name in ((0, "stdin"), (1, "stdout"), (2, "stderr")):
        try:
            os.fstat(fd)
            continue
        except OSError:
            pass
        devnull = os.open(os.devnull, os.O_RDWR)
        if devnull != fd:
            os.dup2(devnull, fd)
            os.close(devnull)
        setattr(sys, name, open(fd, "r" if fd == 0 else "w", encoding="utf-8", closefd=False))


def _stdout_to_devnull() -> None:
    """Point stdout's file descriptor at /dev/null: what is left in its buffer goes nowhere."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def _main() -> None:
    """:func:`main` without its closed-pipe handling."""
    try:
        cli.main(prog_name="piflash", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("Aborted!", err=True)
        sys.exit(int(ExitCode.INTERRUPTED))
    except click.exceptions.ClickException as exc:
        if "--json" in sys.argv[1:]:
            emit_json(
                {
                    "ok": False,
                    "error": {
                        "kind": "UsageError",
                        "message": exc.format_message(),
                        "hint": None,
                        "exit_code": exc.exit_code,
                    },
                },
                command=_command_words(sys.argv[1:]),
            )
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
