"""piflash in labgrid with real labgrid parts (issue 45): a labgrid coordinator, an exporter
publishing a simulated probe as ``NetworkPiflashProbe``, ``labgrid-client``, labgrid's pytest
plugin, and a real sshd (Debian's openssh-server) on a loopback port through which the drivers
run ``piflash`` "on the exporter", as labgrid's OpenOCDDriver runs openocd. No part of labgrid
is replaced: the only stand-in is the lab's ``~/.ssh/config``, given as ``ssh -F`` by a wrapper
first on the PATH (support/sshserver.py).

The place is reserved by tag, acquired, flashed with pyOCD's own nRF52840 test binary
(``l1_nrf52840-dk.bin``) by ``labgrid-client bootstrap``, booted by the strategy with the
boot-check firmware (``rtt:self-test: PASS``), and released; the history rows on the exporter
carry the place.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.sshserver import SshServer, free_port

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
PLACE = "bench"
EXPORTER = "pi-bench"
#: Seconds any labgrid command of the test may take (a flash of pyOCD's 184 KB binary on the
#: simulated board takes about 2 s).
CMD_TIMEOUT_S = 120


def _tool(name: str) -> str:
    path = BIN / name
    if not path.exists():
        pytest.skip(f"{name} is not installed (pip install 'piflash[labgrid]'): the labgrid tests run labgrid")
    return str(path)


class Lab:
    """The coordinator, the exporter and the environment the clients use."""

    def __init__(self, tmp: Path, ssh: SshServer, sim_dir: Path) -> None:
        self.tmp, self.ssh = tmp, ssh
        self.procs = []
        self.coordinator = f"127.0.0.1:{free_port()}"
        self.history = tmp / "exporter-history.sqlite3"
        # piflash as the exporter has it: an executable run by the SSH session (whose environment
        # is sshd's, not the test's), with its simulated boards and history.
        self.piflash = tmp / "piflash-on-exporter"
        self.piflash.write_text(
            f"#!/bin/sh\nexport PYTHONPATH={REPO} PIFLASH_SIM_DIR={sim_dir} PIFLASH_HISTORY={self.history} "
            f"PIFLASH_CACHE={tmp / 'cache'}\nexec {sys.executable} -m piflash \"$@\"\n"
        )
        self.piflash.chmod(0o755)
        self.env = dict(os.environ, LG_COORDINATOR=self.coordinator, PATH=f"{ssh.path_dir}:{BIN}:{os.environ['PATH']}",
                        PYTHONPATH=f"{REPO}:{REPO / 'tests'}", LG_SSH_CONNECT_TIMEOUT="10")
        self.env.pop("LG_TOKEN", None)

    def start(self, name, *args):
        log = open(self.tmp / f"{name}.log", "wb")
        proc = subprocess.Popen([_tool(name), *args], stdout=log, stderr=subprocess.STDOUT, env=self.env,
                                cwd=self.tmp)
        self.procs.append(proc)
        return proc

    def log(self, name):
        return (self.tmp / f"{name}.log").read_text(errors="replace")

    def client(self, *args, check=True, env=None):
        proc = subprocess.run([_tool("labgrid-client"), *args], capture_output=True, text=True,
                              env=self.env | (env or {}), cwd=self.tmp, timeout=CMD_TIMEOUT_S)
        if check:
            assert proc.returncode == 0, f"labgrid-client {' '.join(args)}: exit {proc.returncode}\n" \
                f"{proc.stdout}\n{proc.stderr}\ncoordinator:\n{self.log('labgrid-coordinator')[-2000:]}\n" \
                f"exporter:\n{self.log('labgrid-exporter')[-2000:]}"
        return proc

    def wait_for(self, what, probe, timeout=30.0):
        deadline = time.monotonic() + timeout
        while True:
            got = probe()
            if got:
                return got
            for p in self.procs:
                assert p.poll() is None, f"{p.args[0]} ended while waiting for {what}:\n" + \
                    self.log(Path(p.args[0]).name)
            assert time.monotonic() < deadline, f"no {what} within {timeout} s"
            time.sleep(0.2)

    def close(self):
        for p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()


@pytest.fixture
def lab(tmp_path, sim_dir):
    _tool("labgrid-coordinator")
    ssh = SshServer()
    lab = Lab(tmp_path, ssh, sim_dir)
    try:
        yield lab
    finally:
        lab.close()
        ssh.close()


def test_reserve_flash_boot_release_through_a_real_labgrid(lab, pyocd_binaries, firmware_dir):
    pyocd_bin = pyocd_binaries / "l1_nrf52840-dk.bin"
    rtt_elf = firmware_dir / "boot" / "nrf52840" / "rtt.elf"
    lab.start("labgrid-coordinator", "-l", lab.coordinator)
    lab.wait_for("coordinator", lambda: lab.client("places", check=False).returncode == 0)

    # The exporter publishes the probe as a class it does not know: a plain ResourceEntry.
    (lab.tmp / "exporter.yaml").write_text(
        "bench:\n  probe:\n    cls: NetworkPiflashProbe\n    host: " + lab.ssh.host + "\n    probe_id: sim:nrf52840\n"
    )
    lab.start("labgrid-exporter", "-n", EXPORTER, "--hostname", lab.ssh.host, "exporter.yaml")
    lab.wait_for("the exported probe", lambda: "NetworkPiflashProbe" in lab.client("-v", "resources").stdout)

    lab.client("-p", PLACE, "create")
    lab.client("-p", PLACE, "add-match", f"{EXPORTER}/bench/NetworkPiflashProbe")
    lab.client("-p", PLACE, "set-tags", "board=nrf52840")
    shown = lab.client("-p", PLACE, "show").stdout
    assert "NetworkPiflashProbe" in shown or f"{EXPORTER}/bench/NetworkPiflashProbe" in shown

    reserved = lab.client("reserve", "--wait", "--shell", "board=nrf52840").stdout
    token = next(line.split("=", 1)[1] for line in reserved.splitlines() if line.startswith("export LG_TOKEN="))
    mine = {"LG_TOKEN": token}
    lab.client("-p", "+", "acquire", env=mine)

    (lab.tmp / "env.yaml").write_text(
        f"targets:\n  main:\n    resources:\n      RemotePlace:\n        name: {PLACE}\n"
        "    drivers:\n      PiflashDriver:\n        base_address: 0\n"
        "      PiflashBootDriver:\n        check: 'rtt:self-test: PASS'\n        timeout: 5\n"
        "      PiflashStrategy: {}\n"
        f"tools:\n  piflash: {lab.piflash}\nimages:\n  firmware: {rtt_elf}\nimports:\n  - piflash.labgrid\n"
    )
    # labgrid-client's own bootstrap command finds PiflashDriver by its BootstrapProtocol.
    boot = lab.client("-c", "env.yaml", "-p", "+", "-v", "bootstrap", str(pyocd_bin), env=mine)
    # ... and its steps show in labgrid-client -v as labgrid's own drivers' do; the image reaches the
    # exporter through ManagedFile (on the loopback the exporter sees the same file: no copy)
    said = boot.stdout + boot.stderr
    assert f"\u2192 PiflashDriver.load(filename='{pyocd_bin}')" in said and "\u2190 PiflashDriver.load()" in said, said
    assert "ManagedFile" in said and f"is accessible on {lab.ssh.host}" in said, said
    dump = lab.tmp / "flash.bin"
    subprocess.run([str(lab.piflash), "sim", "dump", "nrf52840", "--out", str(dump)], check=True, capture_output=True)
    image = pyocd_bin.read_bytes()
    assert dump.read_bytes()[: len(image)] == image

    # labgrid's pytest plugin, as a lab's tests use it: the strategy to "booted" (boot check passed),
    # then pyOCD's binary flashed and its boot checked: its application's first system call
    # (sd_softdevice_vector_table_base_set, SVC 0x13) makes the SoftDevice record the application's
    # vector table (0x20003d18) at 0x20000004; then a boot check that binary cannot pass (it has no
    # RTT), which must say where it failed.
    (lab.tmp / "test_board.py").write_text(
        "import pytest\n"
        "from piflash.labgrid import PiflashRunError\n"
        "def test_booted(target, strategy):\n"
        "    strategy.transition('booted')\n"
        "    boot = target.get_driver('PiflashBootDriver')\n"
        "    assert boot.last_boot['passed'] and 'self-test: PASS' in boot.last_boot['output']\n"
        "    assert target.get_driver('PiflashDriver').reset()['ok']\n"
        "def test_pyocds_binary_boots(target):\n"
        "    flasher, boot = target.get_driver('PiflashDriver'), target.get_driver('PiflashBootDriver')\n"
        f"    flasher.load({str(pyocd_bin)!r})\n"
        "    check, boot.check = boot.check, 'word:0x20000004=0x20003d18'\n"
        "    try:\n"
        "        result = boot.boot()\n"
        "    finally:\n"
        "        boot.check = check\n"
        "    assert result['passed'] and result['fault_pc'] is None, result\n"
        "def test_a_failed_boot_says_where(target):\n"
        "    with pytest.raises(PiflashRunError) as err:\n"
        "        target.get_driver('PiflashBootDriver').boot()\n"
        "    text = str(err.value)\n"
        "    assert err.value.exit_code == 26 and 'no RTT control block' in text, text\n"
        f"    assert 'sim:nrf52840 (labgrid place {PLACE})' in text and 'in phase boot_check' in text, text\n"
    )
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", "-q",
                          "--lg-env", "env.yaml", "test_board.py"], capture_output=True, text=True,
                         env=lab.env | mine, cwd=lab.tmp, timeout=CMD_TIMEOUT_S * 3)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]

    lab.client("-p", "+", "release", env=mine)
    lab.client("cancel-reservation", token)
    assert "acquired: None" in lab.client("-p", PLACE, "show").stdout

    # The exporter's history: every flash through the place carries it.
    with sqlite3.connect(lab.history) as db:
        rows = db.execute("SELECT operation, labgrid_place, outcome, firmware, boot_check FROM operations "
                          "ORDER BY id").fetchall()
    bin_path, elf_path = str(pyocd_bin), str(rtt_elf)
    assert [r[:4] for r in rows] == [
        ("flash", PLACE, "pass", bin_path),  # labgrid-client bootstrap
        ("flash", PLACE, "pass", elf_path),  # the strategy: flashed
        ("flash", PLACE, "pass", elf_path),  # ... booted: the boot check, nothing written again
        ("reset", PLACE, "pass", None),
        ("flash", PLACE, "pass", bin_path),
        ("flash", PLACE, "pass", bin_path),  # its boot check: the SoftDevice took the SVC
        ("flash", PLACE, "fail", bin_path),  # a check it cannot pass: no RTT in pyOCD's binary
    ], rows
    checks = [json.loads(r[4]) if r[4] else None for r in rows]
    assert checks[2]["passed"] and checks[5]["passed"] and checks[5]["fault_pc"] is None
    assert not checks[6]["passed"] and checks[6]["fault_pc"] is None
