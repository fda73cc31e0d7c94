"""Every command in README.md and docs/*.md runs as written (issue 41, "every doc command runs as
written"): the lines of fenced ``sh``/``bash``/``shell`` blocks, and the ``$ `` lines of other
blocks (``console``, ``text``, none: a command shown with its output), are taken from each page in
order and run by one bash in one fresh folder per page, as a reader who copies them would:

- ``piflash`` and ``pyocd`` on the PATH run this checkout's code (``python -m piflash``);
- the folder holds the firmware files the docs name, made from the test firmware as
  ``scripts/build-test-firmware.sh`` makes them in ``tests/firmware/build/examples/`` (README,
  "Using it"), with the test pack (``tests/firmware/pack``) and a 4-byte ``uicr.bin`` profiles.md flashes, and a board the page names (``sim:NAME``) but never creates is created just before
  the first command that names it (a reader attaches it then);
- a ``yaml`` fence whose first line is ``# NAME.yaml`` is a file the reader saves: it is written,
  as shown, where it stands on the page (so the page and the walk cannot drift apart);
- ``piflash sim serve`` is started in the background on a free port (the page's port, e.g. 5555,
  replaced everywhere on the page) and stopped at the end of the page;
- a command must exit 0, except one the page shows failing (its output starts with ``error:``),
  which must fail with that error line (numbers, unique IDs and the page's folder aside).

A command that cannot run here (real hardware, root on the real machine, systemd, minutes of
benchmark) is on :data:`SKIP` with the reason; the test checks that every entry is still on its
page. The README's Python API example runs too."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import textwrap
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

pytest.importorskip("unicorn")

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md"] + sorted((REPO / "docs").glob("*.md"))
FENCE = re.compile(r"^[ \t]*```([a-z]*)\n(.*?)^[ \t]*```", re.S | re.M)
SHELL_LANGS = ("sh", "bash", "shell")
#: A ``yaml`` fence whose first line is ``# NAME.yaml`` (then optionally `` -- what it is``) shows
#: a file the reader writes: the walk writes it, as shown, at that point of the page.
FILE_FENCE = re.compile(r"^# ([\w.-]+(?:/[\w.-]+)*\.ya?ml)(?: -- .*)?$")
HEREDOC = re.compile(r"<<-?\s*'?\"?(\w+)'?\"?")

HW = "real hardware: needs a USB probe or board attached"
ROOT = "changes the real machine as root (apt, /etc, /opt, udev, users)"
SYSTEMD = "needs systemd running the station service (tests/station/test_station_systemd.py boots one)"
BENCH = "a benchmark that runs for minutes (its figures are in docs/benchmarks.md)"
CLONE = "a fresh clone and install: benchmarks/readme_first_run.py runs these in order"
SUITE = "runs the test suite itself"
LEDGER_LINE = ("needs a ledger on which station line-a numbered boards and holds a lease "
               "(tests/production/test_serial_ledger.py makes one on tests/support/pgserver.py)")
TWIN = ("/tmp/ldoc/b.sqlite3 is the history of a second station named st-2 on the ledger "
        "(tests/production/test_ledger_identity.py makes the pair)")
PASSWORD = ("a cluster that asks for the password of role 'line' (scram-sha-256) "
            "(tests/production/test_ledger_secrets.py starts one)")
STATION_BOARDS = ("runs until stopped while boards are swapped on its fixture, and is killed with SIGKILL "
                  "(tests/station/test_station_serials.py does it)")

#: (page, command as written, comment cut off) -> why the test does not run it.
SKIP: Dict[Tuple[str, str], str] = {
    ("README.md", "bash scripts/demo.sh"): CLONE + " (and tests/docs/test_readme_commands.py as root)",
    ("README.md", "bash scripts/test.sh"): SUITE,
    ("README.md", 'bash scripts/test.sh -m "not slow"'): SUITE,
    ("README.md", "git clone <piflash repository URL> piflash && cd piflash"): "<piflash repository URL> is a placeholder; "
    + CLONE,
    ("README.md", "bash scripts/install.sh"): CLONE + " (tests/system/test_install.py installs for real)",
    ("README.md", "piflash flash app.bin --base-address 0x08000000 -t stm32f103rc -u 066DFF49"): HW
    + " (066DFF49: an ST-Link's serial)",
    ("README.md", "piflash flash --profile my-board"): "a profile the reader writes (docs/profiles.md)",
    ("README.md", "piflash run app.elf -t nrf52840"): "runs until Ctrl-C (tests/sim/test_run.py stops it)",
    ("README.md", "piflash flash blink.uf2 -t rp2040"): HW + " (a Pico through a Debug Probe)",
    ("README.md", "piflash flash blink.uf2 -u picoboot"): HW + " (a Pico in BOOTSEL mode; simulator.md runs it)",
    ("README.md", 'sudo "$(command -v piflash)" setup permissions'): ROOT
    + " (tests/docs/test_readme_commands.py runs it with --dry-run)",
    ("README.md", "cat boot.hex app.hex > joined.hex && piflash flash joined.hex -t nrf52840 -> error: joined.hex: "
     "line 3: a record after the end-of-file re"): "boot.hex is the reader's own bootloader",
    ("README.md", "piflash erase --chip --yes -u sim:st -> error: chip erase did not take: 12,784 byte(s) are not "
     "blank"): "needs a write-protected board (tests/sim/test_erase.py injects the fault)",
    ("simulator.md", "piflash sim create bench --target nrf52840 -> error: the simulator is not installed (piflash's "
     "'sim' extra"): "shows an install without the simulator; this one has it",
    ("install.md", "sudo apt update && sudo apt install -y git"): ROOT,
    ("install.md", "git clone <piflash repository URL> piflash"): "<piflash repository URL> is a placeholder; "
    + CLONE,
    ("install.md", "cd piflash"): CLONE,
    ("install.md", "bash scripts/install.sh"): CLONE + " (tests/system/test_install.py installs for real)",
    ("install.md", "bash scripts/install.sh --with-ledger --with-metrics"): CLONE + " (tests/system/test_install.py)",
    ("install.md", "bash scripts/install.sh --with-sim"): CLONE + " (tests/system/test_install.py)",
    ("install.md", "sudo apt install -y build-essential python3-dev cmake"): ROOT,
    ("install.md", "bash scripts/build-wheelhouse.sh --profile full ~/piflash-wheels"): "builds wheels for minutes "
    "(tests/system/test_wheelhouse.py)",
    ("install.md", "bash scripts/install.sh --profile full --wheelhouse ~/piflash-wheels"): CLONE,
    ("history.md", "piflash history --file /tmp/rodoc/ro/history.sqlite3"): "a read-only bind mount needs root "
    "(tests/production/test_history.py reads one)",
    ("history.md", 'sqlite3 t3.sqlite3 "DELETE FROM operations WHERE id=2"'): "t3 is a station's history whose rows "
    "finished out of order (tests/production/test_history_chain.py makes one)",
    ("history.md", "piflash history verify-chain --file t3.sqlite3 -> error: the history chain is broken: row #2 "
     "(seq 1) was delet"): "t3.sqlite3, above",
    ("boot-check.md", "piflash rtt build/app.elf -t nrf52840 --reset"): "runs until Ctrl-C "
    "(tests/production/test_boot_check*.py stop it)",
    ("boot-check.md", "piflash flash test.elf --boot-check 'semihost:0' --boot-timeout 5"): "test.elf (the test "
    "firmware's semihosting image) exits with status 3, so that the tests see a non-zero status checked "
    "(tests/production/test_boot_check.py)",
    ("boot-check.md", "piflash rtt -u 0240000032044e45 -t nrf52840"): HW + " (0240000032044e45: a probe's serial)",
    ("ledger.md", "piflash station check --config line-a/station.yaml"): "line-a is a station that numbered "
    "1000..1002 before it joined the ledger (tests/production/test_serial_ledger.py makes one)",
    ("ledger.md", 'psql "$LEDGER" -c "SELECT counter, holder, old_next, new_next, reason FROM '
     'ledger_counter_raises"'): "the raise of the station check above",
    ("ledger.md", "piflash ledger takeover st-2 --ledger postgresql://piflash@db/production --file "
     "/tmp/ldoc/b.sqlite3"): TWIN,
    ("ledger.md", "piflash ledger status --ledger postgresql://piflash@db/production --file /tmp/ldoc/b.sqlite3 "
     "--station st-2"): TWIN,
    ("ledger.md", "piflash ledger report --ledger postgresql://piflash@db/production -> error: the ledger database "
     "'production' at postgresql://pifl"): "needs a LATIN1 database (tests/production/test_ledger_encoding.py "
    "makes one)",
    ("ledger.md", "piflash ledger status --ledger 'host=127.0.0.1 port=33903 user=line dbname=ledger "
     "password=wrong-one' -> error: cannot use the ledger host=127.0.0.1 port=33903 user="): PASSWORD,
    ("ledger.md", "piflash ledger status --ledger postgresql://line@127.0.0.1:53953/ledger -> error: cannot use the "
     "ledger postgresql://line@127.0.0.1:539"): PASSWORD,
    ("ledger.md", "printf '127.0.0.1:53953:ledger:line:%s\\n' \"$PW\" > ~/.config/piflash/pgpass && chmod 600 "
     "~/.config/piflash/pgpass"): PASSWORD,
    ("ledger.md", "PGPASSFILE=~/.config/piflash/pgpass piflash ledger status --ledger "
     "postgresql://line@127.0.0.1:53953/ledger"): PASSWORD,
    ("station.md", "git clone <piflash repository URL> piflash && cd piflash"): "<piflash repository URL> is a "
    "placeholder; " + CLONE,
    ("station.md", "sudo bash scripts/install.sh --system"): ROOT + " (tests/system/test_install.py)",
    ("station.md", "piflash station status --config station.yaml"): "a station with two probes running, one board "
    "failed (tests/station/test_station_status_file.py runs one and reads its status)",
    ("station.md", "piflash station status --config station.yaml -> error: no station status file (/tmp/sst2/status.json "
     "or /run"): "the config of a station that is not running, its history in /tmp/sst2 "
    "(tests/station/test_station_status_file.py)",
    ("station.md", "piflash station run --plain --config station.yaml -> error: cannot open the history database "
     "/srv/line-1/h/histor"): "a station.yaml whose history: is /srv/line-1/h/history.sqlite3, /srv/line-1/h a file "
    "(tests/station/test_station_history_refused.py)",
    ("station.md", "echo $?"): "the exit status of the station run above",
    ("station.md", "bash scripts/install.sh --with-sim"): CLONE + " (this checkout has the simulator)",
    ("station.md", ".venv/bin/python benchmarks/station_vs_shell.py"): BENCH,
    ("production.md", "piflash flash -p sensor -u sim:bench --serial 1003 -q -> error: serial 1003 was already issued: "
     "board ba1bf26c78848f7"): LEDGER_LINE,
    ("production.md", "piflash flash -p sensor -u sim:bench --serial 1010 -q -> error: serial 1010 was already issued: "
     "a board whose unique "): LEDGER_LINE,
    ("production.md", "piflash flash -p sensor -u sim:bench --serial 1001 -q -> error: serial 1001 was already issued: "
     "a board whose unique "): LEDGER_LINE,
    ("production.md", "piflash protect recover -u sim:bench -t nrf52840"): "asks on a terminal (answered y on the page); "
    "the walk has none, and the --yes line after it runs (tests/production/test_erase_confirm.py answers the prompt)",
    ("production.md", "piflash station run --plain --config station.yaml"): STATION_BOARDS,
    ("production.md", "piflash station run --plain --config station.yaml -> error: the list units.csv is used up: all "
     "its 3 rows are use"): STATION_BOARDS + " (tests/station/test_station_unitlist.py)",
    ("production.md", 'sqlite3 -header -column state/serials.sqlite3 "SELECT n, state, holder, target_uid FROM '
     'numbers"'): "the serial database of the station runs above",
    ("production.md", 'sqlite3 -header -column state/serials.sqlite3 "SELECT id, first, count, used, state FROM '
     'leases"'): "the serial database of the station runs above",
    ("production.md", "piflash sim board pull bay"): "the fixture of the station runs above",
    ("production.md", "piflash sim dump bay -o bay.bin"): "the last board the station runs above flashed",
    ("production.md", "xxd -s 0xff000 -l 24 bay.bin"): "bay.bin, above",
    ("production.md", 'sqlite3 -header -column state/unitlists.sqlite3 "SELECT row, state, holder, target_uid FROM '
     'rows"'): "the unit list database of the station runs above",
}

#: Pages that are transcripts of a session whose files (profiles, station configs, key pairs, a
#: ledger server) the page shows only in part, or that only run benchmarks / change the machine:
#: page -> why none of its commands is run here. Each such page must still have commands.
SKIP_PAGES: Dict[str, str] = {
    "benchmarks.md": BENCH,
    "station-service.md": SYSTEMD + "; the rest installs into /opt and /etc as root",
    "permissions.md": ROOT + "; the rest reads real USB devices (tests/unit/test_permissions*.py)",
    "memory.md": "needs root and cgroup v1's memory controller (scripts/capped-run.py)",
}

#: Per page: the folder its transcript was made in, as its error lines show it (the walk's folder
#: stands for it).
FOLDER: Dict[str, str] = {
    "production.md": "/tmp/pdoc",
}

#: Per page: the ledger URL its commands name (``--ledger URL``); the walk starts a PostgreSQL
#: (tests/support/pgserver.py, skipped without one) and writes its URL for this one. Not exported as
#: ``PIFLASH_LEDGER``: the page shows a command without a ledger keeping its row at home.
LEDGER_URL: Dict[str, str] = {
    "ledger.md": "postgresql://piflash@db/production",
}

#: Per page: the commands after which the reader waits for the station running in the background
#: (a command ending in ``&``) to show one more board's PASS or FAIL, as the page says (up to 60 s).
AWAIT: Dict[str, Tuple[str, ...]] = {
    "station.md": ("piflash station --config station.yaml &", "piflash sim board swap bay"),
}

#: Per page: shell run before its first command (boards a page's commands assume attached).
SETUP: Dict[str, str] = {
    "README.md": "piflash sim create one --target nrf52840 >/dev/null",   # "one probe attached"
    "boot-check.md": "piflash sim create one --target nrf52840 >/dev/null",  # one board for the commands without -u
    "profiles.md": "piflash sim create bench1 --target nrf52840 >/dev/null",  # the test pack's part is an nRF52840
}


@dataclass
class Command:
    """One command of a page: ``text`` as written (several lines for a heredoc), ``key`` the text
    with its comment cut off, ``error`` the ``error:`` line the page shows it print, if any."""

    text: str
    key: str
    error: str = ""
    output: List[str] = field(default_factory=list)

    @property
    def ident(self) -> str:
        """How :data:`SKIP` names it: the key, and for a command shown failing the start of its error."""
        return f"{self.key} -> {self.error[:60]}" if self.error else self.key


def _cut_comment(line: str) -> str:
    """``line`` without a trailing shell comment (a ``#`` after a blank, outside quotes)."""
    quote = ""
    for i, ch in enumerate(line):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line.rstrip()


def commands(page: Path) -> List[Command]:
    """The page's commands in page order."""
    out: List[Command] = []
    for lang, block in FENCE.findall(page.read_text()):
        lines = block.splitlines()
        named = FILE_FENCE.match(lines[0]) if lang in ("yaml", "yml") and lines else None
        if named:               # a file the page shows: written by a heredoc as the reader would save it
            body = textwrap.dedent(block)
            out.append(Command(f"mkdir -p \"$(dirname {named.group(1)})\" && cat > {named.group(1)} <<'PIFLASH_FILE'\n"
                               f"{body}PIFLASH_FILE", f"write {named.group(1)}"))
            continue
        shell = lang in SHELL_LANGS
        i, current = 0, None
        while i < len(lines):
            raw = lines[i].strip()
            i += 1
            if raw.startswith("$ "):
                raw = raw[2:]
            elif not shell or not raw or raw.startswith("#"):
                if current is not None and raw:
                    current.output.append(raw)
                continue
            text = raw
            while text.endswith("\\") and i < len(lines):
                text = text[:-1] + lines[i].strip()
                i += 1
            m = HEREDOC.search(text)
            if m:
                while i < len(lines):
                    text += "\n" + lines[i]
                    i += 1
                    if lines[i - 1].strip() == m.group(1):
                        break
            out.append(Command(text, _cut_comment(text.splitlines()[0])))
            current = None if shell else out[-1]
    for cmd in out:             # the error line may follow lines the command printed before it (a report)
        cmd.error = next((ln for ln in cmd.output if ln.startswith("error:")), "")
    return out


PAGE_COMMANDS = [(page.name, cmds) for page in PAGES if (cmds := commands(page))]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _target_of(argv: List[str]) -> str:
    for flag in ("-t", "--target"):
        if flag in argv:
            return argv[argv.index(flag) + 1]
    return "nrf52840"


def example_files(firmware_dir: Path, pyocd_binaries: Path, into: Path) -> None:
    """The files README's "Using it" says ``scripts/build-test-firmware.sh`` makes, the same way."""
    from piflash.firmware.uf2 import dump_uf2

    for name in ("blink.hex", "firmware.hex", "app.hex", "fw.hex"):
        shutil.copy(firmware_dir / "nrf52840" / "firmware.hex", into / name)
    shutil.copy(firmware_dir / "nrf52840" / "firmware.elf", into / "blink.elf")
    shutil.copy(firmware_dir / "boot" / "nrf52840" / "rtt.elf", into / "app.elf")
    for name in ("rtt.elf", "rtt.hex"):
        shutil.copy(firmware_dir / "boot" / "nrf52840" / name, into / name)
    shutil.copy(firmware_dir / "boot" / "nrf52840" / "semihost.elf", into / "test.elf")
    shutil.copy(firmware_dir / "stm32f103rc" / "firmware.bin", into / "app.bin")
    with zipfile.ZipFile(into / "piflash.PIFLASH_TEST_DFP.1.0.0.pack", "w") as z:  # as tests/sim/test_packs.py
        z.write(REPO / "tests" / "firmware" / "pack" / "piflash.PIFLASH_TEST_DFP.pdsc", "piflash.PIFLASH_TEST_DFP.pdsc")
        z.write(firmware_dir / "pack" / "piflash_nrf52840.FLM", "Flash/piflash_nrf52840.FLM")
    (into / "uicr.bin").write_bytes((0xFFFFFF00).to_bytes(4, "little"))  # profiles.md: one UICR word, 4 bytes
    for chip, family, name in (("rp2040", 0xE48BFF56, "blink.uf2"), ("rp2350", 0xE48BFF59, "blink-rp2350.uf2")):
        (into / name).write_bytes(dump_uf2([(0x10000000, (pyocd_binaries / f"{chip}.bin").read_bytes())], family))


def _shims(bindir: Path) -> None:
    bindir.mkdir()
    for name, module in (("piflash", "piflash"), ("pyocd", "pyocd")):
        shim = bindir / name
        shim.write_text(f'#!/bin/sh\nPYTHONPATH={shlex.quote(str(REPO))} exec {shlex.quote(sys.executable)} '
                        f'-m {module} "$@"\n')
        shim.chmod(0o755)


def _script(name: str, cmds: List[Command], outdir: Path, ledger: str = "") -> Tuple[str, List[Command]]:
    """The page's bash script: each command's output and exit status into ``outdir``; ``ledger``:
    the URL that stands for the page's :data:`LEDGER_URL`."""
    port = str(_free_port())
    lines = ["set +e", "trap 'kill $(jobs -p) 2>/dev/null' EXIT", SETUP.get(name, ":")]
    run: List[Command] = []
    bg = None                   # the output of the station the page runs in the background
    kept = [c for c in cmds if (name, c.ident) not in SKIP and name not in SKIP_PAGES]
    made = {c.key.split()[3] for c in kept if c.key.startswith("piflash sim create ")}
    for cmd in kept:
        for board in re.findall(r"sim:([a-z0-9][a-z0-9_.-]*)", cmd.key):
            if board not in made:               # a board the page uses but never creates: attached just before
                made.add(board)
                lines.append(f"piflash sim create {board} --target {_target_of(shlex.split(cmd.key))} >/dev/null")
        n = len(run)
        run.append(cmd)
        text = cmd.text.replace("5555", port)
        if ledger:
            text = text.replace(LEDGER_URL[name], ledger)
        if cmd.key.startswith("piflash sim serve"):     # runs until stopped: in the background, until it listens
            lines.append(f"{{ {text}\n}} > {outdir}/{n} 2>&1 &")
            lines.append(f"for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null && break; "
                         f"sleep 0.2; done; (exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null; echo $? > {outdir}/{n}.rc")
            continue
        awaited = bg is not None or cmd.key.endswith("&")
        if awaited and cmd.key.startswith(AWAIT.get(name, ())):
            bg = outdir / str(n) if bg is None else bg
            results = f"grep -cE ': (PASS|FAIL) ' {bg} 2>/dev/null"
            lines.append(f"before=$({results})")
        lines.append(f"{{ {text}\n}} > {outdir}/{n} 2>&1 < /dev/null; echo $? > {outdir}/{n}.rc")
        if awaited and cmd.key.startswith(AWAIT.get(name, ())):
            lines.append(f'for _ in $(seq 300); do [ "$({results})" -gt "${{before:-0}}" ] && break; sleep 0.2; done')
    return "\n".join(lines) + "\n", run


def _digits(line: str, folder: str = "") -> str:
    """``line`` with what changes from run to run made alike: the page's folder (``FOLDER``, or
    the walk's own), target unique IDs (8 hex digits or more) and then every number."""
    if folder:
        line = line.replace(folder, "FOLDER")
    line = re.sub(r"\b[0-9a-f]{8,}\b", "UID", line)
    return re.sub(r"\d+(\.\d+)?", "N", line)


@pytest.mark.parametrize("name,cmds", PAGE_COMMANDS, ids=[n for n, _ in PAGE_COMMANDS])
def test_page_commands_run_as_written(name, cmds, tmp_path, firmware_dir, pyocd_binaries):
    work, outdir = tmp_path / "work", tmp_path / "out"
    work.mkdir()
    outdir.mkdir()
    (tmp_path / "home").mkdir()
    _shims(tmp_path / "bin")
    example_files(firmware_dir, pyocd_binaries, work)
    env = {k: v for k, v in os.environ.items() if k != "PIFLASH_SIM_USB"}
    env.update(HOME=str(tmp_path / "home"), PATH=f"{tmp_path / 'bin'}:{os.environ['PATH']}",
               XDG_CONFIG_HOME=str(tmp_path / "home" / ".config"))
    # the pages name ~/.local/state/piflash and ./piflash.d, the defaults (tests/conftest.py sets them elsewhere)
    for name_ in ("XDG_STATE_HOME", "PIFLASH_HISTORY", "PIFLASH_SERIALS", "PIFLASH_PROFILE_PATH"):
        env.pop(name_, None)
    server = None
    if name in LEDGER_URL:
        from support.pgserver import PgServer

        server = PgServer()
    script, run = _script(name, cmds, outdir, server.url if server else "")
    try:
        subprocess.run(["bash", "-c", script], cwd=work, env=env, timeout=600, check=False)
    except subprocess.TimeoutExpired:           # the command without an exit status is the one that hung
        pass
    finally:
        if server is not None:
            server.close()
    failures = []
    for n, cmd in enumerate(run):
        rc_file = outdir / f"{n}.rc"
        rc = int(rc_file.read_text()) if rc_file.exists() else None
        output = (outdir / str(n)).read_text() if (outdir / str(n)).exists() else ""
        if cmd.error:
            shown = _digits(cmd.error, FOLDER.get(name, ""))
            if rc == 0 or not any(_digits(ln.strip(), str(work)) == shown for ln in output.splitlines()):
                failures.append(f"{cmd.key!r}: the page shows it fail with {cmd.error!r}; exit {rc}:\n{output}")
        elif rc != 0:
            failures.append(f"{cmd.key!r}: exit {rc}:\n{output}")
    if name in AWAIT:           # the station's last line, as the comment of the command that stops it quotes it
        bg = next(n for n, c in enumerate(run) if c.key.endswith("&"))
        said = (outdir / str(bg)).read_text() if (outdir / str(bg)).exists() else ""
        for cmd in run:
            quoted = re.search(r'#\s*"([^"]+)"', cmd.text) if cmd.key.startswith("kill ") else None
            if quoted and quoted.group(1) not in said:
                failures.append(f"{cmd.key!r}: the page says the station printed {quoted.group(1)!r}; it said:\n{said}")
    assert not failures, f"{name}:\n" + "\n\n".join(failures)


def test_skip_list_entries_are_still_in_the_docs():
    keys = {(name, c.ident) for name, cmds in PAGE_COMMANDS for c in cmds}
    stale = [k for k in SKIP if k not in keys] + [p for p in SKIP_PAGES if p not in dict(PAGE_COMMANDS)]
    assert not stale, f"no longer in the docs, drop from SKIP: {stale}"


def test_the_pages_have_commands():
    assert sum(len(c) for _, c in PAGE_COMMANDS) >= 100


def test_readme_python_api_example_runs(tmp_path, firmware_dir, monkeypatch):
    """The README's Python API sentence, run as written: the imports from the modules it names."""
    text = (REPO / "README.md").read_text()
    m = re.search(r"\*\*Python API\*\*: `(flash_firmware\(.*?\))`\s*\(from `([\w.]+)`, `([\w.]+)` and\s*`([\w.]+)`\)",
                  text, re.S)
    assert m, "README's Python API sentence"
    call = " ".join(m.group(1).split())
    from piflash.sim import SimStore

    SimStore().create("demo", "nrf52840")
    shutil.copy(firmware_dir / "nrf52840" / "firmware.hex", tmp_path / "fw.hex")
    monkeypatch.chdir(tmp_path)
    code = (f"from {m.group(2)} import flash_firmware\nfrom {m.group(3)} import load_image\n"
            f"from {m.group(4)} import FlashOptions\nresult = {call}\nprint(result.ok)\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().endswith("True"), proc.stdout
