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


def test_erase_mode_is_null_when_nothing_was_erased(cli, firmware_dir, tmp_path):
    """``program.erase_mode`` says how the erase was done, and is null when nothing was erased:
    a blank board, or the same firmware again (docs/result.md)."""
    import random

    fw = firmware_dir / "nrf52840" / "firmware.hex"
    nrf = ["-t", "nrf52840", "-u", "sim:nrf"]
    cli("sim", "create", "nrf", "--target", "nrf52840", check=0)
    blank = cli.json("flash", fw, *nrf, "-q")["program"]           # onto erased flash
    assert (blank["erase_mode"], blank["erased_bytes"]) == (None, 0) and blank["programmed_bytes"] > 0
    again = cli.json("flash", fw, *nrf, "-q")["program"]           # unchanged
    assert (again["erase_mode"], again["erased_bytes"], again["programmed_bytes"]) == (None, 0, 0)
    other = tmp_path / "other.bin"
    other.write_bytes(random.Random(41).randbytes(4096))
    over = cli.json("flash", other, "-a", "0", *nrf, "-q")["program"]  # over the firmware's first sector
    assert (over["erase_mode"], over["erased_bytes"]) == ("sector", 4096)
    chip = cli.json("flash", fw, *nrf, "-q", "--erase", "chip")["program"]
    assert chip["erase_mode"] == "chip"


def test_erase_mode_over_bootsel(cli, pyocd_binaries, tmp_path, monkeypatch):
    """The same over PICOBOOT (a Pico in BOOTSEL mode): null on a blank board and for the same
    image again, "sector" when a sector holding other data is erased."""
    pytest.importorskip("unicorn")
    from support.uf2kit import RP2040_FAMILY, to_uf2

    from piflash.sim import SimStore

    SimStore().create("pico", "rp2040")
    monkeypatch.setenv("PIFLASH_SIM_USB", "pico@bootsel")
    blink = (pyocd_binaries / "rp2040.bin").read_bytes()
    uf2 = tmp_path / "blink.uf2"
    uf2.write_bytes(to_uf2(blink, 0x10000000, RP2040_FAMILY))
    modes = [cli.json("flash", uf2, "-u", "picoboot")["program"]["erase_mode"] for _ in range(2)]
    other = tmp_path / "other.bin"
    other.write_bytes(b"\x00" * 256)
    changed = cli.json("flash", other, "--base-address", "0x10000000", "-u", "picoboot")["program"]
    assert modes + [changed["erase_mode"]] == [None, None, "sector"] and changed["erased_bytes"] == 4096


def test_profile_show_prints_yaml(cli, tmp_path):
    """``profile show`` prints a YAML document (PyYAML's safe dumper), not Python reprs: read
    back with ``yaml.safe_load`` it is what ``--json`` prints, addresses as numbers."""
    import yaml

    (tmp_path / "app.bin").write_bytes(b"\x01" * 1000)
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "board.yaml").write_text(
        "target: nrf52840\nprobe: '0240*'\nfirmware: ../app.bin\nbase_address: 0x1000\n"
        "description: 'nRF52 DK: bench 3'\n"
        "serial: {start: 1000, end: 1999, address: 0x10001080, encoding: u32}\n"
        "boot_check: {rtt: 'self-test: PASS', timeout: 3}\n")
    out = cli("profile", "show", "board", check=0).stdout
    assert "{'" not in out and "None" not in out and "True" not in out, out
    assert "base_address: 0x00001000\n" in out and "    address: 0x10001080\n" in out
    shown = yaml.safe_load(out)
    as_json = cli.json("profile", "show", "board")
    del as_json["schema_version"], as_json["command"]
    as_json["patch_plan"]["entries"][0]["address"] = 0x10001080  # a string in JSON, a number in YAML
    assert shown == as_json
    assert list(shown) == list(as_json)  # the same order


def test_sim_list_gives_milliseconds_and_lower_case_ids(cli):
    """``sim list`` gives a board's creation time to the millisecond, in local time with its
    offset as every other time piflash prints (docs/result.md), and its target unique ID in
    lower case in the text as in --json."""
    import re
    import time
    from datetime import datetime

    before = time.time()
    cli("sim", "create", "bench", "--target", "stm32f103rc", check=0)
    board = cli.json("sim", "list")["boards"][0]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d\d:\d\d", board["created"]), board["created"]
    created = datetime.fromisoformat(board["created"])
    assert created.utcoffset() == datetime.fromtimestamp(before).astimezone().utcoffset()
    assert before - 0.001 <= created.timestamp() <= time.time()
    text = cli("sim", "list", check=0).stdout
    assert f"uid {board['target_uid']} " in text and board["target_uid"] == board["target_uid"].lower()
