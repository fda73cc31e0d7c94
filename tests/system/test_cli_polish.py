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

