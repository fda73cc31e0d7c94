"""The CLI's light start-up, its listing commands, and profile values overridden by options."""

from __future__ import annotations

import subprocess
import sys


def test_help_imports_nothing_heavy():
    code = ("import sys\nfrom piflash.cli import cli\n"
            "try:\n    cli(['--help'])\nexcept SystemExit:\n    pass\n"
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'pyocd', 'rich', 'unicorn', 'yaml'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout


def test_targets_lists_pyocd_builtins(cli):
    rows = cli.json("targets", "nrf52")["targets"]
    names = {r["name"] for r in rows}
    assert {"nrf52840", "nrf52832"} <= names and all("nrf52" in n for n in names)
    nrf = next(r for r in rows if r["name"] == "nrf52840")
    assert nrf["flash_bytes"] >= 1024 * 1024


def test_probes_empty_then_listed(cli):
    assert cli.json("probes")["probes"] == []
    assert "No debug probes found" in cli("probes", check=0).stdout
    cli("sim", "create", "bench", "--target", "stm32f103rc", check=0)
    assert cli.json("probes")["probes"] == [{"probe_id": "sim:bench", "target": "stm32f103rc",
                                             "description": "piflash Simulated STM32F103RC board",
                                             "vid_pid": None, "accessible": True, "node": None,
                                             "reason": None, "fix": None}]


def test_command_line_overrides_profile(cli, tmp_path, firmware_dir):
    fw = firmware_dir / "nrf52840" / "firmware.hex"
    cli("sim", "create", "a", "--target", "nrf52840", check=0)
    cli("sim", "create", "b", "--target", "nrf52840", check=0)
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "board.yaml").write_text(f"target: nrf52840\nprobe: sim:a\nfirmware: {fw}\n"
                                         "verify: false\n")
    res = cli.json("flash", "--profile", "board")
    assert res["probe_id"] == "sim:a" and res["verify"] is None      # the profile's choices
    res = cli.json("flash", "--profile", "board", "--probe", "sim:b", "--no-reset")
    assert res["probe_id"] == "sim:b" and res["reset"] is False      # the command line wins
    shown = cli.json("profile", "show", "board")
    assert shown["probe"] == "sim:a" and shown["verify"] is False
    assert "OK" in cli("profile", "check", "board", check=0).stdout


def test_sim_dump_and_faults_listed(cli, tmp_path):
    cli("sim", "create", "x", "--target", "nrf51", check=0)
    out = cli("sim", "fault", "x", "--bit-flip", "0x10:2", "--write-protect", "0x400", check=0).stdout
    assert "bit_flip=0x00000010:2" in out and "write_protect=0x00000400" in out
    assert "sim:x faults: none" in cli("sim", "fault", "x", "--clear", check=0).stdout
    cli("sim", "dump", "x", "--out", tmp_path / "x.bin", check=0)
    assert (tmp_path / "x.bin").read_bytes() == b"\xff" * (256 * 1024)
    proc = cli("sim", "create", "x", "--target", "nrf51", check=2)
    assert "exists" in proc.stderr


def test_list_is_probes(cli):
    """``piflash list`` (probe-rs and pyOCD call it so) is ``probes``: the same output, and its JSON
    names the command by its one name."""
    assert cli("list", check=0).stdout == cli("probes", check=0).stdout
    assert cli.json("list")["command"] == "probes"
