"""Every command in README.md and docs/*.md runs as written (issue 41, "every doc command runs as
written"): the lines of fenced ``sh``/``bash``/``shell`` blocks, and the ``$ `` lines of other
blocks (``console``, ``text``, none: a command shown with its output), are taken from each page in
order and run by one bash in one fresh folder per page, as a reader who copies them would:

- ``piflash`` and ``pyocd`` on the PATH run this checkout's code (``python -m piflash``), in a
  terminal 80 columns wide (``COLUMNS=80``: the pages' tables are pasted at that width);
- the folder holds the firmware files the docs name, made from the test firmware as
  ``scripts/build-test-firmware.sh`` makes them in ``tests/firmware/build/examples/`` (README,
  "Using it"), with the test pack (``tests/firmware/pack``) and a 4-byte ``uicr.bin`` profiles.md flashes, and a board the page names (``sim:NAME``) but never creates is created just before
  the first command that names it (a reader attaches it then);
- a ``yaml`` fence whose first line is ``# NAME.yaml`` (a ``python`` one: ``# NAME.py``) is a file
  the reader saves: it is written, as shown, where it stands on the page (so the page and the walk
  cannot drift apart);
- ``pytest`` on the PATH is this interpreter's, with this checkout first on its path (ci.md's
  examples run pytest with piflash's and labgrid's plugins);
- ``piflash sim serve`` is started in the background on a free port (the page's port, e.g. 5555,
  replaced everywhere on the page) and stopped at the end of the page;
- a command must exit 0, except one the page shows failing (its output starts with ``error:``),
  which must fail with that error line (numbers, unique IDs and the page's folder aside).

A command that cannot run here (real hardware, root on the real machine, systemd, minutes of
benchmark) is on :data:`SKIP` with the reason; the test checks that every entry is still on its
page. A command that needs root but is safe in the walk's own folder (a fake root directory, a
memory cgroup of its own) is on :data:`ROOT_LEG`: it runs when the walk runs as root (CI runs the
suite once as root, once as a normal user) through a ``sudo`` on the walk's PATH that runs the
command itself, with sudo's ``secure_path`` and a reset environment; as a normal user without a
passwordless sudo it is left out, and the page's test reports it as skipped, with the reason,
after the rest of the page ran. Its opposite, :data:`NOT_ROOT`, is a command the page shows
failing for want of root: as root it would change this machine, so only the normal user's run
has it. The README's Python API example runs too."""

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
#: The Debian root tests/system/test_setup_root.py builds (scripts/make-root.sh), when this machine has it.
DEBIAN_ROOT = Path(os.environ.get("PIFLASH_CACHE_DIR", Path.home() / ".cache" / "piflash")) / "roots" / \
    "bookworm-amd64-minbase"
PAGES = [REPO / "README.md"] + sorted((REPO / "docs").glob("*.md"))
FENCE = re.compile(r"^[ \t]*```([a-z]*)\n(.*?)^[ \t]*```", re.S | re.M)
SHELL_LANGS = ("sh", "bash", "shell")
#: A ``yaml`` fence whose first line is ``# NAME.yaml`` (a ``python`` one: ``# NAME.py``; then optionally
#: `` -- what it is``) shows a file the reader writes: the walk writes it, as shown, at that point of the page.
FILE_FENCE = re.compile(r"^# ([\w.-]+(?:/[\w.-]+)*\.(?:ya?ml|py))(?: -- .*)?$")
#: The fence languages whose first line may name a file (:data:`FILE_FENCE`), with the suffixes each may name.
FILE_LANGS = {"yaml": (".yaml", ".yml"), "yml": (".yaml", ".yml"), "python": (".py",)}
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
    **{("benchmarks.md", f".venv/bin/python benchmarks/{script}"): BENCH for script in (
        "readme_first_run.py", "flash_vs_pyocd.py", "startup.py --base 48dabc8 --pairs 21",
        "startup.py --base 17e84e6 --pairs 11", "hostile_files.py --pairs 7",
        "bundle_station.py --pairs 15 --boards 2", "memory_baseline.py --runs 3", "station_vs_shell.py",
        "probe_requests.py", "real_probe.py", "station_vs_shell_usb.py", "station_vs_shell_usb.py --poll-interval 0.05",
        "host_cost.py --repeats 5", "host_cost.py --repeats 5 --targets nrf51,nrf52840,stm32f103rc,rp2040",
        "real_probe.py --json --host x86",
        "real_probe.py --json --host x86 --presets P --targets T",
        "real_probe.py --json --host zero2w --host-factor high --presets P --targets T", "real_probe.py --json --host zero2w",
        "unit_list_line.py", "station_pss.py --web", "web_page.py", "labgrid_flash.py --rounds 9",
        "hex_parse.py")},
    ("benchmarks.md", ".venv/bin/python benchmarks/host_presets.py"): "tests/unit/test_host_presets.py runs it and "
    "finds its tables on the page",
    ("permissions.md", 'sudo "$(command -v piflash)" setup permissions'): ROOT + " (tests/system/test_setup_root.py "
    "runs it on a Debian root; tests/docs/test_readme_commands.py with --dry-run)",
    ("permissions.md", "udevadm verify --resolve-names=never 60-piflash-probes.rules"): "needs systemd 253's "
    "udevadm verify (bookworm's 252 has none; the page ran it with 254 from bookworm-backports)",
    ("permissions.md", "piflash info -t nrf52840 -> error: probe ST-Link/V2-1 (0483:374b serial 066DFF4951578086"):
    "on the simulated USB bench as nobody (scripts/doctor-bench.py); "
    "test_permissions_bench_transcript_is_a_run checks it",
    ("permissions.md", "lsusb"): HW + " (lsusb lists the real USB bus)",
    ("permissions.md", "ls -l /dev/bus/usb/001/003"): HW + " (a probe at bus 1 device 3)",
    ("permissions.md", "udevadm info /dev/bus/usb/001/003 | grep -E 'PIFLASH_PROBE|ID_MM_DEVICE_IGNORE'"): HW
    + " (a probe at bus 1 device 3, under udev)",
    ("station-service.md", "systemd-analyze security --offline=true /etc/systemd/system/piflash-station.service"):
    SYSTEMD,
    ("station-service.md", "systemd-analyze security --offline=true \"$(/opt/piflash/bin/python -c 'import piflash, "
     "os; print(os.path.dirname(piflash.__file__))')/data/piflash-station.service\""): "needs the install in "
    "/opt/piflash (" + ROOT + "); " + SYSTEMD,
    ("station-service.md", "apt-get install -y git procps"): ROOT,
    ("station-service.md", "git clone <piflash repository URL> /usr/local/src/piflash"): "<piflash repository URL> "
    "is a placeholder; " + CLONE,
    ("station-service.md", "bash /usr/local/src/piflash/scripts/install.sh --system"): ROOT
    + " (tests/system/test_install.py)",
    ("station-service.md", "/opt/piflash/bin/piflash setup permissions"): ROOT,
    ("station-service.md", "mkdir -p /etc/piflash/profiles /etc/piflash/firmware"): ROOT,
    ("station-service.md", "cp app.hex /etc/piflash/firmware/"): ROOT,
    ("station-service.md", "cat > /etc/piflash/profiles/app.yaml <<'EOF'"): ROOT,
    ("station-service.md", "/opt/piflash/bin/piflash station install-service --config station.yaml --now"): SYSTEMD,
    ("station-service.md", "systemctl status piflash-station"): SYSTEMD,
    ("station-service.md", "systemctl edit piflash-station"): SYSTEMD + " (opens an editor)",
    ("station-service.md", ".venv/bin/python -m pytest -q tests/station/test_station_systemd.py "
     "tests/system/test_service_install.py"): SUITE,
}

#: Why a :data:`ROOT_LEG` command is left out of a normal user's run.
ROOT_ONLY = "needs root: runs in CI's root leg"
#: (page, command) -> what it needs root for; run when the walk is root (or has a passwordless
#: sudo), else left out with :data:`ROOT_ONLY` and that reason.
ROOT_LEG: Dict[Tuple[str, str], str] = {
    **{("permissions.md", f"sudo scripts/setup-probe-permissions.sh --root /tmp/perm-docroot {args}"):
       "groupadd/gpasswd --root on the walk's fake root (perm-docroot)"
       for args in ("--user alice --dry-run", "--user alice", "--uninstall")},
    ("memory.md", 'sudo python3 scripts/capped-run.py --limit-mib 60 -- "$(command -v piflash)" flash '
     "tests/firmware/build/examples/app.hex -t nrf52840 -u sim:mb -> error: not enough memory: flash needs about 64 "
     "MiB (pyOCD 64"): "a child of its memory cgroup (cgroup v1) with a 60 MiB cap",
    ("station-service.md", "piflash station install-service --root $T/root --executable /opt/piflash/bin/piflash "
     "--config station.yaml"): "gives the installed config to root:plugdev",
    ("station-service.md", "ls -l $T/root/etc/piflash/"): "the config install-service, above, installed as root",
}
#: (page, command) -> why it runs only in a normal user's walk: it shows a refusal for want of root,
#: and as root it would change this machine.
NOT_ROOT: Dict[Tuple[str, str], str] = {
    ("permissions.md", "scripts/setup-probe-permissions.sh --user alice -> error: setting up probe permissions "
     "changes system files (a "): "shows the refusal without root; as root it would add alice to this machine's "
    "plugdev and install its udev rules (the normal-user leg runs it)",
}
#: The walk may run commands as root: it is root, or sudo runs without a password.
ROOTED = os.geteuid() == 0 or (shutil.which("sudo") is not None and subprocess.run(
    ["sudo", "-n", "true"], capture_output=True, check=False).returncode == 0)


def leg_skips() -> Dict[Tuple[str, str], str]:
    """The commands this run leaves out for who runs it (:data:`ROOT_LEG`, :data:`NOT_ROOT`), with why."""
    if ROOTED:
        return dict(NOT_ROOT)
    return {k: f"{ROOT_ONLY} ({why})" for k, why in ROOT_LEG.items()}


#: Pages whose commands run from the top of the checkout (``scripts/...``,
#: ``tests/firmware/build/examples/...``): the walk's folder gets ``scripts`` and ``piflash`` (links
#: to this checkout's, so that a script finds the package beside it as in a checkout) and the example
#: firmware in ``tests/firmware/build/examples``, where scripts/build-test-firmware.sh puts it.
CHECKOUT = ("permissions.md", "memory.md")

#: Per page: a fixed path its commands name -> the name in the walk's folder that stands for it (two
#: runs on one machine must not share it).
PATHS: Dict[str, Dict[str, str]] = {
    "permissions.md": {"/tmp/perm-docroot": "perm-docroot"},
}

#: Per page: the folder its transcript was made in, as its error lines show it (the walk's folder
#: stands for it).
FOLDER: Dict[str, str] = {
    "production.md": "/tmp/pdoc",
}

#: Per page: commands (by how they start) whose output the page shows in full: the run must print
#: exactly those lines (the page's :data:`PATHS` standing for the walk's).
EXACT: Dict[str, Tuple[str, ...]] = {
    "permissions.md": ("sudo scripts/setup-probe-permissions.sh", "scripts/setup-probe-permissions.sh"),
    "station-service.md": ("piflash station install-service --root",),
}
#: A folder made by ``mktemp -d`` (``tmp.`` and 10 characters), in the page or in the walk's
#: ``$TMPDIR``: the same wherever it is, for :data:`EXACT`.
MKTEMP = re.compile(r"/\S*/tmp\.\w{10}\b")

#: On every page: commands whose shown output must be exactly what they print (``echo $?``: the status
#: of the command before it).
EXACT_ALL = ("echo $?",)
#: A ``piflash history`` table: the command (not an export, a report or one row) and its header line.
HISTORY_TABLE = re.compile(r"^piflash history(?! (?:show|verify-chain))(?!.*--(?:csv|json))")


def _columns(output: List[str]) -> List[str]:
    """The column names of the first history table header in ``output`` (lines), [] if none."""
    head = next((ln for ln in output if ln.strip().startswith("#  ")), "")
    return re.split(r"\s{2,}", head.strip()) if head else []


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
    # "a Debian bookworm root made with scripts/make-root.sh (the group removed first, and a user alice
    # added), exactly as the test does it" (tests/system/test_setup_root.py): that root when this
    # machine has it cached, else one with only the files the setup reads and changes (its output is
    # the same); as root only, the commands that use it being ROOT_LEG's
    "permissions.md": 'if sudo -n true 2>/dev/null; then r=$PWD/perm-docroot; '
    'if [ -f "$PIFLASH_DOC_DEBIAN_ROOT/.piflash-root" ]; then sudo cp -a "$PIFLASH_DOC_DEBIAN_ROOT" "$r" '
    '&& sudo groupdel --root "$r" plugdev; else mkdir -p "$r/etc" && printf "root:x:0:0:root:/root:/bin/bash\\n" '
    '> "$r/etc/passwd" && printf "root:x:0:\\n" > "$r/etc/group" && printf "root:*::\\n" > "$r/etc/gshadow" && '
    'printf "root:*:19000:0:99999:7:::\\n" > "$r/etc/shadow"; fi; '
    'sudo useradd --root "$r" --no-create-home --shell /bin/bash alice 2>/dev/null; fi',
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
        named = FILE_FENCE.match(lines[0]) if lang in FILE_LANGS and lines else None
        if named and not named.group(1).endswith(FILE_LANGS[lang]):
            named = None
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


#: Debian's sudo ``secure_path`` (sudoers): the PATH a command run by sudo gets.
SECURE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#: The walk's ``sudo``: as root, the command itself as sudo would run it (``env_reset``: PATH is
#: :data:`SECURE_PATH`, the environment reset but for the terminal, language and home, SUDO_* set);
#: otherwise the real sudo, which must not ask (``-n``).
SUDO_SHIM = f"""#!/bin/sh
if [ "$(id -u)" = 0 ]; then
    [ "$1" = -n ] && shift
    exec env -i PATH={SECURE_PATH} HOME="$HOME" TERM="${{TERM:-dumb}}" LANG="${{LANG:-C.UTF-8}}" \\
        SUDO_USER=root SUDO_UID=0 SUDO_GID=0 SUDO_COMMAND="$*" "$@"
fi
exec /usr/bin/sudo -n "$@"
"""


def _shims(bindir: Path) -> None:
    bindir.mkdir()
    # this checkout first, then the test run's own PYTHONPATH (an interpreter that has piflash's
    # dependencies only through it, as a normal user's run of a root-owned venv does)
    path = os.pathsep.join([str(REPO), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))])
    for name, module in (("piflash", "piflash"), ("pyocd", "pyocd"), ("pytest", "pytest")):
        shim = bindir / name
        shim.write_text(f'#!/bin/sh\nPYTHONPATH={shlex.quote(path)} exec {shlex.quote(sys.executable)} '
                        f'-m {module} "$@"\n')
        shim.chmod(0o755)
    (bindir / "sudo").write_text(SUDO_SHIM)
    (bindir / "sudo").chmod(0o755)


def _script(name: str, cmds: List[Command], outdir: Path, ledger: str = "", work: Path = Path("."),
            left_out: Dict[Tuple[str, str], str] = {}) -> Tuple[str, List[Command]]:  # noqa: B006 (read only)
    """The page's bash script: each command's output and exit status into ``outdir``; ``ledger``:
    the URL that stands for the page's :data:`LEDGER_URL`; ``work``: the walk's folder (for
    :data:`PATHS`); ``left_out``: commands this run leaves out besides :data:`SKIP` (:func:`leg_skips`)."""
    port = str(_free_port())
    lines = ["set +e", "trap 'kill $(jobs -p) 2>/dev/null' EXIT", SETUP.get(name, ":")]
    run: List[Command] = []
    bg = None                   # the output of the station the page runs in the background
    kept = [c for c in cmds if (name, c.ident) not in SKIP and (name, c.ident) not in left_out]
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
        for path, stand_in in PATHS.get(name, {}).items():
            text = text.replace(path, str(work / stand_in))
        if cmd.key.startswith("piflash sim serve"):     # runs until stopped: in the background, until it listens
            # exec: the job is the server itself, so the EXIT trap's kill reaches it (a subshell
            # killed instead would leave the server running after the test)
            lines.append(f"{{ exec {text}\n}} > {outdir}/{n} 2>&1 &")
            lines.append(f"for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null && break; "
                         f"sleep 0.2; done; (exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null; echo $? > {outdir}/{n}.rc")
            continue
        awaited = bg is not None or cmd.key.endswith("&")
        if awaited and cmd.key.startswith(AWAIT.get(name, ())):
            bg = outdir / str(n) if bg is None else bg
            results = f"grep -cE ': (PASS|FAIL) ' {bg} 2>/dev/null"
            lines.append(f"before=$({results})")
        # the status is kept in $? for the next command, as the reader's shell has it (``echo $?``)
        lines.append(f"{{ {text}\n}} > {outdir}/{n} 2>&1 < /dev/null; __rc=$?; echo $__rc > {outdir}/{n}.rc; "
                     "(exit $__rc)")
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
    (tmp_path / "tmp").mkdir()
    if name in CHECKOUT:
        for top in ("scripts", "piflash"):
            (work / top).symlink_to(REPO / top)
        examples = work / "tests" / "firmware" / "build" / "examples"
        examples.mkdir(parents=True)
        example_files(firmware_dir, pyocd_binaries, examples)
    else:
        example_files(firmware_dir, pyocd_binaries, work)
    env = {k: v for k, v in os.environ.items() if k not in ("PIFLASH_SIM_USB", "PIFLASH_SIM_PINS")}
    env.update(HOME=str(tmp_path / "home"), PATH=f"{tmp_path / 'bin'}:{os.environ['PATH']}",
               XDG_CONFIG_HOME=str(tmp_path / "home" / ".config"), TMPDIR=str(tmp_path / "tmp"),
               PIFLASH_DOC_DEBIAN_ROOT=str(DEBIAN_ROOT),
               COLUMNS="80")    # a reader's 80-column terminal: the pages' tables are pasted at that width
    # the pages name ~/.local/state/piflash and ./piflash.d, the defaults (tests/conftest.py sets them elsewhere)
    for name_ in ("XDG_STATE_HOME", "PIFLASH_HISTORY", "PIFLASH_SERIALS", "PIFLASH_PROFILE_PATH"):
        env.pop(name_, None)
    server = None
    if name in LEDGER_URL:
        from support.pgserver import PgServer

        server = PgServer()
    left_out = {k: why for k, why in leg_skips().items() if k[0] == name}
    script, run = _script(name, cmds, outdir, server.url if server else "", work, left_out)
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
        if HISTORY_TABLE.match(cmd.key) and _columns(cmd.output) and \
                _columns(cmd.output) != _columns(output.splitlines()):
            failures.append(f"{cmd.key!r}: the page shows the columns {_columns(cmd.output)}; it printed:\n{output}")
        if cmd.key.startswith(EXACT.get(name, ("\0",)) + EXACT_ALL):
            said = output
            for path, stand_in in PATHS.get(name, {}).items():
                said = said.replace(str(work / stand_in), path)
            if [MKTEMP.sub("$T", ln) for ln in said.splitlines()] != [MKTEMP.sub("$T", ln) for ln in cmd.output]:
                failures.append(f"{cmd.key!r}: the page shows it print {cmd.output!r}; it printed:\n{said}")
    if name in AWAIT:           # the station's last line, as the comment of the command that stops it quotes it
        bg = next(n for n, c in enumerate(run) if c.key.endswith("&"))
        said = (outdir / str(bg)).read_text() if (outdir / str(bg)).exists() else ""
        for cmd in run:
            quoted = re.search(r'#\s*"([^"]+)"', cmd.text) if cmd.key.startswith("kill ") else None
            if quoted and quoted.group(1) not in said:
                failures.append(f"{cmd.key!r}: the page says the station printed {quoted.group(1)!r}; it said:\n{said}")
    assert not failures, f"{name}:\n" + "\n\n".join(failures)
    if left_out:                # the rest of the page ran and passed; these did not run, and say why
        pytest.skip(f"{len(run)} commands ran and passed; {len(left_out)} left out: "
                    + "; ".join(f"{cmd!r}: {why}" for (_, cmd), why in left_out.items()))


def test_skip_list_entries_are_still_in_the_docs():
    keys = {(name, c.ident) for name, cmds in PAGE_COMMANDS for c in cmds}
    stale = [k for k in (*SKIP, *ROOT_LEG, *NOT_ROOT) if k not in keys]
    assert not stale, f"no longer in the docs, drop from SKIP, ROOT_LEG or NOT_ROOT: {stale}"
    both = [k for k in (*ROOT_LEG, *NOT_ROOT) if k in SKIP]
    assert not both, f"on SKIP and on a leg's list: {both}"


#: A row of ``piflash doctor``'s table: the check's name, then its status (a continuation line of a
#: long detail starts with blanks and is no row).
DOCTOR_ROW = re.compile(r"^(\S.*?)\s{2,}(ok|warn|FAIL|Status)\s")
#: The simulated bench's folder, new each run (tests/support/usbfake.py make_fake_system).
BENCH_DIR = re.compile(r"/tmp/piflash-usbfake-\w+")


def _bench_shape(transcript: str) -> List[str]:
    """What of a doctor/info transcript must be the same in every run: the commands, the doctor
    rows' names and statuses, the heads of the fix lines, the verdict and the error lines (the
    bench's folder and numbers aside). Machine paths in the details, and RAM, are not."""
    out = []
    for line in transcript.splitlines():
        row = DOCTOR_ROW.match(line)
        if line.startswith(("$ ", "NOT READY", "OK:")):
            out.append(_digits(line))
        elif row:
            out.append(f"row {row.group(1)} {row.group(2)}")
        elif line.startswith("fix "):
            out.append(line.split(": ")[0])
        elif line.startswith("error: "):
            out.append(_digits(BENCH_DIR.sub("BENCH", line)))
    return out


def test_permissions_bench_transcript_is_a_run():
    """permissions.md's doctor and info transcript "on the test bench" is what
    scripts/doctor-bench.py prints now: the same rows with the same statuses (a new check, such as
    the memory row, fails this until the page is pasted again), fixes, verdict and error."""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root and setpriv (util-linux) to run piflash as nobody on the bench: runs in CI's root leg")
    page = (REPO / "docs" / "permissions.md").read_text()
    shown = next(block for lang, block in FENCE.findall(page) if block.startswith("$ piflash doctor\n"))
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "doctor-bench.py")], capture_output=True,
                          text=True, timeout=300, env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert proc.returncode == 0, proc.stderr
    assert _bench_shape(shown) == _bench_shape(proc.stdout), proc.stdout
    assert len(_bench_shape(shown)) > 10


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
