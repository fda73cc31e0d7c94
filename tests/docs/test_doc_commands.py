"""Every simulator command shown in README.md and docs/*.md runs as written (issue 19, "Done
when"): the fenced ``sh``/``console`` lines that start with ``piflash`` and use the simulator
(``piflash sim ...`` or a ``sim:`` probe) are taken from each page in order and run in one fresh
folder per page, with the files they name (``app.hex``, ``app.bin``) made from the test firmware
and the boards they name created, as a reader who copies them would. ``piflash sim serve`` runs
until it listens, then is stopped; its ``--port`` is replaced by a free one (the pages' 5555 may
be taken, by another page's server running beside it in the suite)."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("unicorn")

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md"] + sorted((REPO / "docs").glob("*.md"))
FENCE = re.compile(r"```(?:sh|console|bash|shell|text)?\n(.*?)```", re.S)


def commands(page: Path):
    """The page's simulator commands, comments and prompts removed, in page order. A command the
    page shows failing (its output, the next line, starts with ``error:``: e.g. without the
    simulator installed) illustrates that failure and is left out."""
    out = []
    for block in FENCE.findall(page.read_text()):
        lines = [ln.strip() for ln in block.splitlines()]
        for i, line in enumerate(lines):
            if line.startswith("$ "):
                line = line[2:]
            if not line.startswith("piflash ") or not ("sim:" in line or line.startswith("piflash sim ")):
                continue
            if i + 1 < len(lines) and lines[i + 1].startswith("error:"):
                continue
            out.append(shlex.split(line, comments=True))
    return out


PAGE_COMMANDS = [(page.name, cmds) for page in PAGES if (cmds := commands(page))]


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _target_of(argv):
    for flag in ("-t", "--target"):
        if flag in argv:
            return argv[argv.index(flag) + 1]
    return "nrf52840"


@pytest.mark.parametrize("name,cmds", PAGE_COMMANDS, ids=[n for n, _ in PAGE_COMMANDS])
def test_page_commands_run_as_written(name, cmds, tmp_path, firmware_dir, monkeypatch):
    from piflash.sim import SimStore

    work = tmp_path / "work"
    work.mkdir()
    shutil.copy(firmware_dir / "nrf52840" / "firmware.hex", work / "app.hex")
    shutil.copy(firmware_dir / "nrf52840" / "firmware.bin", work / "app.bin")
    store = SimStore()
    created = set()
    for argv in cmds:
        if argv[1:3] == ["sim", "create"]:
            created.add(argv[3])
    env = dict(os.environ)
    for argv in cmds:
        for arg in argv:                                  # boards the page uses but never creates
            m = re.match(r"sim:([a-z0-9][a-z0-9_.-]*)$", arg)
            if m and m.group(1) not in created and not store.exists(m.group(1)):
                store.create(m.group(1), _target_of(argv))
        run = [sys.executable, "-m", "piflash", *argv[1:]]
        if argv[1:3] == ["sim", "serve"]:
            if "--port" in run:              # the page's port may be taken (another page's server,
                run[run.index("--port") + 1] = str(_free_port())      # another program): a free one
            server = subprocess.Popen(run, cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True)
            try:
                time.sleep(2.0)
                assert server.poll() is None, (argv, server.stdout.read())
            finally:
                server.terminate()
                server.wait(10)
            continue
        proc = subprocess.run(run, cwd=work, env=env, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, f"{name}: {shlex.join(argv)} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}"


def test_the_pages_have_commands():
    assert sum(len(c) for _, c in PAGE_COMMANDS) >= 15
