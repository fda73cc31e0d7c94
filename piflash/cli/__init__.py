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
import sys

import click

from piflash import __version__
from piflash.cli.options import CONTEXT, EXIT_CODES_EPILOG, emit_json
from piflash.errors import ExitCode

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


@click.group(context_settings=CONTEXT, epilog=EXIT_CODES_EPILOG)
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
    """
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
