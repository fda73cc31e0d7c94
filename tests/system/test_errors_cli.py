"""Every bad input and every injected fault ends in a clear message and its own exit code."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from piflash.errors import EXIT_CODE_HELP, ExitCode

NRF = ["-t", "nrf52840", "-u", "sim:nrf52840"]


@pytest.fixture
def app_hex(firmware_dir):
    return firmware_dir / "nrf52840" / "firmware.hex"


@pytest.mark.parametrize("content, message", [
    ("", "the file is empty"),
    (":10000000FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF01\n:00000001FF\n", "corrupt Intel HEX"),
    (":00000001FF\n", "contains no data"),
])
def test_bad_hex_files(cli, tmp_path, content, message):
    path = tmp_path / "bad.hex"
    path.write_text(content)
    proc = cli("flash", path, *NRF, check=ExitCode.FIRMWARE)
    assert message in proc.stderr


def test_truncated_hex_leaves_board_untouched(cli, tmp_path, app_hex):
    cli("flash", app_hex, *NRF, check=0)
    lines = app_hex.read_text().splitlines()
    cut = tmp_path / "cut.hex"
    cut.write_text("\n".join(lines[: len(lines) // 2]) + "\n")
    proc = cli("flash", cut, *NRF, check=ExitCode.FIRMWARE)
    assert "truncated" in proc.stderr
    cli("verify", app_hex, *NRF, check=0)  # the earlier firmware is still there, whole


def test_hex_outside_flash(cli, tmp_path):
    from intelhex import IntelHex
    ih = IntelHex()
    ih.frombytes(b"\x01" * 64, offset=0x20000000)  # RAM, not flash
    path = tmp_path / "ram.hex"
    ih.write_hex_file(str(path))
    proc = cli("flash", path, *NRF, check=ExitCode.IMAGE_RANGE)
    assert "0x20000000" in proc.stderr and "outside the flash" in proc.stderr


def test_bin_without_base_address_and_missing_file(cli, tmp_path):
    path = tmp_path / "a.bin"
    path.write_bytes(b"\x00" * 16)
    assert "--base-address" in cli("flash", path, *NRF, check=ExitCode.FIRMWARE).stderr
    assert "no such firmware file" in cli("flash", tmp_path / "nope.hex", *NRF,
                                          check=ExitCode.FIRMWARE).stderr


def test_unknown_target_is_usage(cli, app_hex):
    proc = cli("flash", app_hex, "-t", "nrf52480", "-u", "sim:nrf52840", check=ExitCode.USAGE)
    assert "did you mean" in proc.stderr and "nrf52840" in proc.stderr


def write_profile(dirpath, name, text):
    dirpath.mkdir(parents=True, exist_ok=True)
    path = dirpath / f"{name}.yaml"
    path.write_text(text)
    return path


def test_profiles(cli, tmp_path, app_hex):
    profiles = tmp_path / "profiles"
    digest = hashlib.sha256(app_hex.read_bytes()).hexdigest()
    write_profile(profiles, "good", f"target: nrf52840\nprobe: sim:nrf52840\nfirmware: {app_hex}\n"
                                    f"sha256: {digest}\nfrequency: 4MHz\n")
    res = cli.json("flash", "--profile", "good")
    assert res["ok"] and res["target"] == "nrf52840"

    write_profile(profiles, "badtype", f"target: nrf52840\nfirmware: {app_hex}\nfrequency: fast\n")
    proc = cli("flash", "--profile", "badtype", check=ExitCode.PROFILE)
    assert "badtype.yaml:3: key 'frequency'" in proc.stderr

    write_profile(profiles, "unknown", f"target: nrf52840\nfirmware: {app_hex}\nverfy: true\n")
    proc = cli("flash", "--profile", "unknown", check=ExitCode.PROFILE)
    assert "unknown.yaml:3: key 'verfy'" in proc.stderr and "verify" in proc.stderr

    write_profile(profiles, "badtarget", f"# board\ntarget: nrf5284\nfirmware: {app_hex}\n")
    proc = cli("flash", "--profile", "badtarget", check=ExitCode.PROFILE)
    assert "badtarget.yaml:2: key 'target': unknown target type" in proc.stderr
    assert "nrf52840" in proc.stderr  # the close match

    write_profile(profiles, "badsum", f"target: nrf52840\nprobe: sim:nrf52840\nfirmware: {app_hex}\n"
                                      f"sha256: {'0' * 64}\n")
    proc = cli("flash", "--profile", "badsum", check=ExitCode.CHECKSUM)
    assert digest in proc.stderr
    # Another firmware on the command line is not held to the profile's pinned digest.
    other = tmp_path / "other.bin"
    other.write_bytes(b"\x00" * 64)
    res = cli.json("flash", "--profile", "badsum", other, "--base-address", "0")
    assert res["ok"] and res["firmware"] == str(other)


def test_no_probe(cli, app_hex):
    proc = cli("flash", app_hex, "-t", "nrf52840", check=ExitCode.NO_PROBE)
    assert "no debug probe found" in proc.stderr


def test_two_probes_without_probe_option(cli, app_hex):
    cli("sim", "create", "one", "--target", "nrf52840", check=0)
    cli("sim", "create", "two", "--target", "nrf52840", check=0)
    proc = cli("flash", app_hex, "-t", "nrf52840", check=ExitCode.SEVERAL_PROBES)
    assert "sim:one" in proc.stderr and "sim:two" in proc.stderr and "--probe" in proc.stderr
    cli("flash", app_hex, "-t", "nrf52840", "-u", "sim:two", check=0)


def test_write_protected_sector_stm32(cli, firmware_dir):
    # The STM32F1 FLASH peripheral refuses with WRPRTERR; pyOCD's algorithm reports it.
    cli("sim", "create", "stm32f103rc", "-t", "stm32f103rc", check=0)
    cli("sim", "fault", "stm32f103rc", "--write-protect", "0x08000800", check=0)
    res = cli.json("flash", firmware_dir / "stm32f103rc" / "firmware.hex", "-t", "stm32f103rc",
                   "-u", "sim:stm32f103rc", "--erase", "sector", check=ExitCode.FLASH)
    assert res["ok"] is False and res["error"]["exit_code"] == ExitCode.FLASH
    assert res["phase"] == "program"
    assert res["error"]["message"].startswith("program failed at 0x08000800: ")   # the protected page


def test_write_protected_sector_nrf_caught_by_verify(cli, app_hex):
    # The nRF NVMC ignores the writes and pyOCD's algorithm reports success: only verify sees it.
    cli("sim", "create", "nrf52840", "-t", "nrf52840", check=0)
    cli("sim", "fault", "nrf52840", "--write-protect", "0x2000", check=0)
    res = cli.json("flash", app_hex, *NRF, "--erase", "sector", check=ExitCode.VERIFY)
    assert res["phase"] == "verify" and "first at 0x00002000" in res["error"]["message"]


def _holds_old_data(board):
    """Give the board's first sectors other data, so that flashing must erase them first (a
    blank sector is programmed without an erase: piflash/flashing/plan.py)."""
    from piflash.sim.store import SimStore

    SimStore().write_flash(board, b"\x00" * 64 * 1024)


def test_stuck_busy_controller_times_out(cli, app_hex):
    cli("sim", "create", "nrf52840", "-t", "nrf52840", check=0)
    _holds_old_data("nrf52840")
    cli("sim", "fault", "nrf52840", "--stuck-busy", check=0)
    proc = cli("flash", app_hex, *NRF, "-O", "flash.timeout.erase_sector=0.5",
               "-O", "flash.timeout.program=0.5", "-O", "flash.timeout.erase_all=0.5",
               "-O", "flash.timeout.init=0.5", "--json", check=ExitCode.FLASH)
    res = json.loads(proc.stdout)
    assert res["phase"] == "erase" and "timed out" in res["error"]["message"]


def test_stuck_busy_controller_times_out_while_programming(cli, app_hex):
    """A blank board needs no erase: the first run's ProgramPage waits for NVMC.READY forever,
    and piflash's run caller gives up after flash.timeout.program with the timeout's hint."""
    cli("sim", "create", "nrf52840", "-t", "nrf52840", check=0)
    cli("sim", "fault", "nrf52840", "--stuck-busy", check=0)
    proc = cli("flash", app_hex, *NRF, "-O", "flash.timeout.program=0.5", "--json", check=ExitCode.FLASH)
    res = json.loads(proc.stdout)
    assert res["phase"] == "program" and "timed out" in res["error"]["message"]
    assert "did not finish" in res["error"]["hint"]


def test_bit_flip_caught_by_verify(cli, app_hex):
    cli("sim", "create", "nrf52840", "-t", "nrf52840", check=0)
    cli("sim", "fault", "nrf52840", "--bit-flip", "0x1235:3", check=0)
    res = cli.json("flash", app_hex, *NRF, check=ExitCode.VERIFY)
    assert res["phase"] == "verify"
    assert "1 byte(s) differ, first at 0x00001235" in res["error"]["message"]


def test_probe_pulled_mid_flash(cli, app_hex):
    cli("sim", "create", "nrf52840", "-t", "nrf52840", check=0)
    cli("sim", "fault", "nrf52840", "--disconnect-after", "3000", check=0)
    proc = cli("flash", app_hex, *NRF, check=ExitCode.PROBE_LOST)
    assert "disconnected" in proc.stderr


def test_absent_board(cli, app_hex):
    cli("sim", "create", "nrf52840", "-t", "nrf52840", check=0)
    cli("sim", "fault", "nrf52840", "--absent", check=0)
    proc = cli("flash", app_hex, *NRF, check=ExitCode.CONNECT)
    assert "cannot connect to the target" in proc.stderr


@pytest.mark.parametrize("phase", ["erase", "program"])
def test_ctrl_c_mid_flash(cli, tmp_path, phase):
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(512 * 1024))
    # A controller that never finishes keeps the flash in the phase until the signal comes, however
    # late a loaded machine delivers it (a board with old data is erased first; a blank one is
    # programmed without an erase).
    cli("sim", "create", "nrf52840", "-t", "nrf52840", check=0)
    if phase == "erase":
        _holds_old_data("nrf52840")
    cli("sim", "fault", "nrf52840", "--stuck-busy", check=0)
    proc = subprocess.Popen([sys.executable, "-m", "piflash", "flash", big, "-a", "0", *NRF,
                             "-O", "flash.timeout.erase_sector=50", "-O", "flash.timeout.program=50"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    label = {"erase": "Erasing...", "program": "Programming..."}[phase]
    for line in proc.stdout:
        if line.startswith(label):
            time.sleep(0.3)
            proc.send_signal(signal.SIGINT)
            break
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == ExitCode.INTERRUPTED, err
    state = {"erase": "partly erased", "program": "partly programmed"}[phase]
    assert f"interrupted during {phase}" in err and state in err
    # The board is usable afterwards: a new flash completes and verifies.
    cli("sim", "fault", "nrf52840", "--clear", check=0)
    cli("flash", big, "-a", "0", *NRF, check=0)


def test_exit_codes_documented(cli):
    from pathlib import Path
    doc = (Path(__file__).resolve().parents[2] / "docs" / "exit-codes.md").read_text()
    help_text = cli("--help", check=0).stdout
    for code, text in EXIT_CODE_HELP.items():
        assert f"| {int(code)} | `{code.name}` |" in doc, code
        assert f"{int(code):>3}  {text}" in help_text


def test_target_required_for_a_probe_that_does_not_know_it(cli, sim_server, app_hex):
    server = sim_server("nrf52840", "nrf52840")  # a remote probe cannot report its target
    proc = cli("flash", app_hex, "-u", server.uid, check=ExitCode.USAGE)
    assert "--target" in proc.stderr
