"""Small CLI behaviours users meet in the daily loop (issue 41, item 6): a closed pipe, the help's
epilog, ``profile show`` as YAML."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

#: 128 + SIGPIPE (13): what a shell reports for a program a closed pipe ended (docs/exit-codes.md).
PIPE_CLOSED = 141


@pytest.mark.parametrize("args", [("history",), ("targets",), ("probes", "--json")])
def test_a_closed_pipe_ends_the_command_quietly(args):
    """``piflash history | head -1``: the reader closes its end of a real pipe (here before
    reading anything, so every write piflash makes meets it closed, as one after ``head`` exits
    does). piflash ends with 141 (128 + SIGPIPE, docs/exit-codes.md), not 1 (internal error),
    and prints no traceback."""
    proc = subprocess.Popen([sys.executable, "-m", "piflash", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=os.environ.copy())
    proc.stdout.close()  # the pipe's only reading end: the child's writes get EPIPE
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == PIPE_CLOSED, err
    assert b"Traceback" not in err and b"Exception ignored" not in err, err
    assert err == b"", err



def _subcommands(group, words=()):
    """Every command below ``group`` as the words that name it: ("flash",), ("history", "show")..."""
    for name, command in sorted(group.commands.items()):
        yield (*words, name)
        if hasattr(command, "commands"):
            yield from _subcommands(command, (*words, name))


def test_a_subcommands_help_ends_with_one_line_about_exit_codes():
    """Each subcommand's --help ends with ONE line that points to the exit codes (not the
    28-line table); ``piflash --help`` keeps the whole table (test_errors_cli checks its rows)."""
    from click.testing import CliRunner

    from piflash.cli import cli

    runner = CliRunner()
    top = runner.invoke(cli, ["--help"], terminal_width=80)
    assert "Exit codes:\n" in top.output and "  130  interrupted" in top.output
    names = list(_subcommands(cli))
    assert ("history", "verify-chain") in names and ("sim", "create") in names
    for words in names:
        out = runner.invoke(cli, [*words, "--help"], terminal_width=80)
        assert out.exit_code == 0, (words, out.output)
        lines = out.output.rstrip("\n").splitlines()
        assert lines[-1] == "  Exit codes: listed by 'piflash --help' and in docs/exit-codes.md.", (words, lines[-3:])
        assert lines[-2] == "", (words, lines[-3:])
        assert "  130  interrupted" not in out.output, words  # the table's last row: not in a subcommand's help
