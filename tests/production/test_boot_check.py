"""The boot check (issue 23): after the flash and the reset, the simulated board runs the flashed
firmware and ``piflash flash --boot-check`` waits for its RTT text, its semihosting exit or a word
in memory; a HardFault is reported with the stacked PC, silence with the timeout. Through the real
CLI and pyOCD, on every simulated target, on the ``sim:`` probe and a simulated USB Debug Probe,
with the test firmware of ``tests/firmware/boot/boot.c``."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("unicorn")

from piflash.errors import ExitCode  # noqa: E402
from piflash.production.bootcheck import OUTPUT_LIMIT, elf_symbol, parse_boot_check  # noqa: E402
from piflash.record.history import SCHEMA_VERSION, History  # noqa: E402
from piflash.sim import SimStore  # noqa: E402
from piflash.sim.probes import usb as sim_usb  # noqa: E402
from piflash.sim.probes.usb.device import serial_for  # noqa: E402
from piflash.sim.probes.usb.presets import get_preset  # noqa: E402

BOOT = int(ExitCode.BOOT_CHECK)
TARGETS = ["nrf51", "nrf52840", "stm32f103rc"]


def one_quick(quick: str):
    """TARGETS with every target but ``quick`` marked slow: each check below runs on one target in
    the quick run (a different one per check, so every target is still booted there) and on all
    three in the full run (CI's first leg), where a target's own difference (the Cortex-M0's
    fault frame, the STM32's RAM) is still caught."""
    return [t if t == quick else pytest.param(t, marks=pytest.mark.slow) for t in TARGETS]

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def boot_fw(firmware_dir):
    """``boot_fw(target, kind, ext="elf")``: the boot-check test firmware's path."""
    if not (firmware_dir / "boot" / "stm32f103rc" / "silent.hex").exists():
        subprocess.run(["make", "-s", "-C", str(REPO / "tests" / "firmware")], check=True)

    def path(target: str, kind: str, ext: str = "elf") -> Path:
        return firmware_dir / "boot" / target / f"{kind}.{ext}"

    return path


@pytest.fixture
def board(monkeypatch):
    """``board(target, via)``: a new simulated board; returns the ``-u``/``-t`` arguments."""
    store = SimStore()

    def make(target: str, via: str = "sim"):
        store.create("b", target, exist_ok=True)
        if via == "sim":
            return ["-u", "sim:b", "-t", target]
        monkeypatch.setenv(sim_usb.ENV_VAR, "b@debugprobe")
        return ["-u", serial_for(get_preset("debugprobe"), "b", target), "-t", target]

    return make


def _flash(cli, fw, args, *extra, check=0):
    proc = cli("flash", fw, *args, *extra, "--json", check=check)
    return json.loads(proc.stdout), proc


@pytest.mark.parametrize("target", one_quick("nrf51"))
def test_rtt_banner_passes_and_is_recorded(target, board, boot_fw, cli):
    res, _ = _flash(cli, boot_fw(target, "rtt"), board(target), "--boot-check", "rtt:self-test: PASS")
    check = res["boot_check"]
    assert res["ok"] and check["passed"] and check["check"] == "rtt:self-test: PASS"
    assert check["output"] == f"piflash boot-check firmware: {target}\nself-test: PASS\n"
    assert check["fault_pc"] is None and 0 <= check["seconds"] < 1.0
    assert res["durations"]["boot_check"] >= check["seconds"]
    rows = History().query()
    assert json.loads(rows[0]["boot_check"]) == check


@pytest.mark.parametrize("target", one_quick("stm32f103rc"))
def test_hardfault_fails_with_the_stacked_pc(target, board, boot_fw, cli):
    fw = boot_fw(target, "fault")
    res, proc = _flash(cli, fw, board(target), "--boot-check", "rtt:PASS", check=BOOT)
    check = res["boot_check"]
    assert not check["passed"] and "HardFault" in check["detail"]
    assert check["output"].endswith("about to fault\n")              # what it printed before
    # the faulting load lies inside fault_load(), as the ELF says
    start = elf_symbol(str(fw), "fault_load") & ~1
    assert start <= int(check["fault_pc"], 16) < start + 16
    assert res["error"]["exit_code"] == BOOT and res["phase"] == "boot_check"
    assert f"addr2line -e {fw}" in res["error"]["hint"]
    assert check["seconds"] < 1.0                                       # at once, not at the timeout


@pytest.mark.parametrize("target", one_quick("nrf52840"))
def test_semihosting_exit_status(target, board, boot_fw, cli):
    args = board(target)
    fw = boot_fw(target, "semihost")
    res, _ = _flash(cli, fw, args, "--boot-check", "semihost:3")
    assert res["boot_check"]["exit_status"] == 3
    assert res["boot_check"]["output"] == f"piflash boot-check firmware: {target}: exiting\n"
    res, _ = _flash(cli, fw, args, "--boot-check", "semihost:0", check=BOOT)
    assert res["boot_check"]["detail"] == "the firmware exited through semihosting with status 3, expected 0"
    # an RTT check on a firmware that exits: the exit is the verdict, not the timeout
    res, _ = _flash(cli, fw, args, "--boot-check", "rtt:PASS", check=BOOT)
    assert "exited through semihosting with status 3" in res["boot_check"]["detail"]


@pytest.mark.parametrize("target", one_quick("nrf51"))
def test_silent_firmware_times_out_within_the_timeout_plus_one_second(target, board, boot_fw, cli):
    args = board(target)
    res, _ = _flash(cli, boot_fw(target, "silent", "hex"), args, "--boot-check", "rtt:PASS",
                    "--boot-timeout", "0.5", check=BOOT)
    check = res["boot_check"]
    assert check["detail"] == "no RTT control block was found within 0.5 s"
    assert 0.5 <= check["seconds"] < 1.5
    assert "--boot-timeout" in res["error"]["hint"]


def test_an_old_control_block_is_not_read_as_the_new_firmware(board, boot_fw, cli):
    """SRAM keeps the previous firmware's RTT block through the reset: the check wipes it, so the
    silent firmware (a .hex: no symbol, the RAM is searched) is not passed on the old one's text."""
    args = board("nrf52840")
    _flash(cli, boot_fw("nrf52840", "rtt"), args, "--boot-check", "rtt:PASS")
    res, _ = _flash(cli, boot_fw("nrf52840", "silent", "hex"), args, "--boot-check", "rtt:PASS",
                    "--boot-timeout", "0.5", check=BOOT)
    assert res["boot_check"]["output"] == ""
    # and the .hex of the RTT firmware is found by searching RAM
    res, _ = _flash(cli, boot_fw("nrf52840", "rtt", "hex"), args, "--boot-check", "rtt:PASS")
    assert res["boot_check"]["passed"]


def test_word_by_address_and_by_symbol(board, boot_fw, cli):
    args = board("stm32f103rc")
    fw = boot_fw("stm32f103rc", "rtt")
    addr = elf_symbol(str(fw), "boot_status")
    res, _ = _flash(cli, fw, args, "--boot-check", "word:boot_status=0x600db007")
    assert res["boot_check"]["detail"] == f"the word at 0x{addr:08x} reads 0x600db007"
    res, _ = _flash(cli, boot_fw("stm32f103rc", "rtt", "hex"), args, "--boot-check",
                    f"word:0x{addr:x}=0x600db007")
    assert res["boot_check"]["passed"]
    res, _ = _flash(cli, fw, args, "--boot-check", f"word:0x{addr:x}=1", "--boot-timeout", "0.3", check=BOOT)
    assert res["boot_check"]["detail"].endswith("within 0.3 s (it reads 0x600db007)")
    # a symbol needs an ELF that has it
    res, _ = _flash(cli, boot_fw("stm32f103rc", "rtt", "hex"), args, "--boot-check", "word:boot_status=1",
                    check=BOOT)
    assert "no symbol 'boot_status'" in res["error"]["message"]


def test_through_the_simulated_usb_debug_probe(board, boot_fw, cli):
    args = board("nrf52840", via="usb")
    res, _ = _flash(cli, boot_fw("nrf52840", "rtt"), args, "--boot-check", "rtt:self-test: PASS")
    assert res["boot_check"]["passed"] and res["probe_id"] == args[1]
    res, _ = _flash(cli, boot_fw("nrf52840", "fault"), args, "--boot-check", "rtt:PASS", check=BOOT)
    assert res["boot_check"]["fault_pc"] is not None


def test_no_check_costs_nothing_and_records_nothing(board, boot_fw, cli):
    res, _ = _flash(cli, boot_fw("nrf51", "silent"), board("nrf51"))
    assert res["boot_check"] is None and "boot_check" not in res["durations"]
    assert History().query()[0]["boot_check"] is None


def test_history_shows_the_boot_output(board, boot_fw, cli):
    args = board("nrf52840")
    _flash(cli, boot_fw("nrf52840", "fault"), args, "--boot-check", "rtt:PASS", check=BOOT)
    table = cli("history", check=0).stdout
    assert "FAIL: piflash boot-check firmware: nrf52840: about to fault" in table
    shown = cli("history", "show", "1", check=0).stdout
    assert "  | piflash boot-check firmware: nrf52840: about to fault" in shown
    assert "HardFault at PC 0x" in shown
    assert cli("history", "verify-chain").returncode == 0


def test_profile_boot_check_and_the_command_line_over_it(board, boot_fw, cli, tmp_path):
    args = board("nrf51")
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "starts.yaml").write_text(
        f"target: nrf51\nfirmware: {boot_fw('nrf51', 'semihost')}\nboot_check: {{semihost: 3, timeout: 2}}\n")
    res = cli.json("flash", "-p", "starts", *args[:2])
    assert res["boot_check"]["passed"] and res["boot_check"]["check"] == "semihost:3"
    res = cli.json("flash", "-p", "starts", *args[:2], "--boot-check", "semihost:1", check=BOOT)
    assert res["boot_check"]["detail"].endswith("expected 1")
    res = cli.json("flash", "-p", "starts", *args[:2], "--boot-check", "off")
    assert res["boot_check"] is None
    (profiles / "bad.yaml").write_text(f"target: nrf51\nfirmware: {boot_fw('nrf51', 'rtt')}\n"
                                       "boot_check: {rtt: PASS, semihost: 0}\n")
    proc = cli("flash", "-p", "bad", *args[:2], check=int(ExitCode.PROFILE))
    assert "bad.yaml:3: key 'boot_check': give exactly one of rtt, semihost or word" in proc.stderr


@pytest.mark.parametrize("extra,message", [
    (["--boot-check", "bogus"], "'bogus' is not a boot check"),
    (["--boot-check", "rtt:("], "is not a valid regular expression"),
    (["--boot-check", "word:0x20000002=1"], "is not word aligned"),
    (["--boot-timeout", "2"], "--boot-timeout sets the boot check's wait"),
    (["--boot-check", "rtt:x", "--no-reset"], "--no-reset never starts it"),
])
def test_bad_checks_are_usage_errors_before_any_probe(extra, message, boot_fw, cli):
    proc = cli("flash", boot_fw("nrf51", "rtt"), "-u", "sim:nowhere", "-t", "nrf51", *extra,
               check=int(ExitCode.USAGE))
    assert message in proc.stderr


def test_output_is_bounded():
    from piflash.production.bootcheck import BootResult

    result = BootResult("rtt:x")
    result.add_output(b"a" * 5000)
    result.add_output(b"b" * 10)
    assert result.output == "a" * OUTPUT_LIMIT
    assert parse_boot_check("semihost:-1").status == -1


def test_a_pattern_that_backtracks_without_end_fails_in_bounded_time(board, boot_fw, cli):
    """Issue 38: ``(.|[^\\n])*Z`` tries 2^n ways through each line of the board's output (here
    "piflash boot-check firmware: nrf52840", 38 characters: 2^38 steps). Python's re cannot be
    interrupted; before, the check never ended. Now the search runs in a child process ended after
    PATTERN_SEARCH_MAX_S: exit 26 naming the pattern, a hint about nesting, the output kept."""
    from piflash.limits import PATTERN_SEARCH_MAX_S

    pattern = r"rtt:(.|[^\n])*Z"
    res, proc = _flash(cli, boot_fw("nrf52840", "rtt"), board("nrf52840"), "--boot-check", pattern,
                       "--boot-timeout", "600", check=BOOT)
    check = res["boot_check"]
    assert not check["passed"]
    assert f"took more than {PATTERN_SEARCH_MAX_S:g} s" in check["detail"], check["detail"]
    assert "backtracks without end" in res["error"]["hint"]
    assert "piflash boot-check firmware" in check["output"]
    assert "Traceback" not in proc.stderr


def test_the_search_window_is_bounded_and_its_child_ends():
    """The text searched is the last BOOT_TEXT_WINDOW characters, whatever was fed; closing ends
    the child (no process left behind); a search that takes too long raises SearchTooSlow."""
    import time

    from piflash.limits import BOOT_TEXT_WINDOW
    from piflash.production.textsearch import SearchTooSlow, TextSearch

    with TextSearch(r"START.*END") as search:
        assert not search.feed("START" + "x" * 100)
        assert search.feed("END")                              # a match across two pieces
    with TextSearch(r"START.*END", limit=5.0) as search:
        assert not search.feed("START" + "x" * BOOT_TEXT_WINDOW)  # START falls out of the window
        assert not search.feed("END")
        pid = search._proc.pid
    assert not Path(f"/proc/{pid}").exists()                  # killed and reaped
    search = TextSearch(r"(a|aa)+$", limit=0.5)
    begun = time.monotonic()
    with pytest.raises(SearchTooSlow, match="took more than 0.5 s"):
        search.feed("a" * 60 + "!")
    assert time.monotonic() - begun < 5
    with pytest.raises(SearchTooSlow):
        search.feed("more")                                   # stays stopped
    search.close()


def test_a_schema_2_history_gains_the_column_and_keeps_its_chain(board, boot_fw, cli, tmp_path):
    """Rows sealed before the column existed keep their hashes (chain.LATE_COLUMNS)."""
    args = board("nrf51")
    _flash(cli, boot_fw("nrf51", "rtt"), args)
    path = History().path
    with sqlite3.connect(str(path)) as db:               # back to schema 2 as piflash 0.1.x left it
        db.execute("ALTER TABLE operations DROP COLUMN boot_check")
        db.execute("PRAGMA user_version = 2")
    _flash(cli, boot_fw("nrf51", "rtt"), args, "--boot-check", "rtt:PASS")
    assert cli("history", "verify-chain").returncode == 0
    with sqlite3.connect(str(path)) as db:
        assert db.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        assert [r[0] is None for r in db.execute("SELECT boot_check FROM operations ORDER BY id")] == [True, False]


def test_the_station_counts_a_board_only_when_its_boot_check_passes(tmp_path, boot_fw):
    """Station: each board's boot result in its row; a board that does not start fails (exit 26)
    and is not locked (protect: lock comes after the boot check)."""
    from support.stationkit import (
        StationProcess,
        rows,
        wait_rows,
        write_config,
        write_profile,
    )

    store = SimStore()
    history = tmp_path / "station-history.sqlite3"
    profile = write_profile(tmp_path, boot_fw("nrf52840", "rtt"), name="starts", protect="lock",
                            boot_check="{rtt: 'self-test: PASS', timeout: 1}")
    config = write_config(tmp_path, profile, ["sim:bay"], history)
    store.create("bay", "nrf52840")
    station = StationProcess(config, tmp_path / "station.log")
    try:
        wait_rows(history, 1, station)
        store.swap("bay")
        wait_rows(history, 2, station)
    finally:
        assert station.stop() == 0
    got = rows(history)
    assert [r["outcome"] for r in got] == ["pass", "pass"]
    for r in got:
        check = json.loads(r["boot_check"])
        assert check["passed"] and check["output"].endswith("self-test: PASS\n")
        assert r["protection"] == "locked"

    # a firmware that faults as it starts: the board fails and is not locked
    profile = write_profile(tmp_path, boot_fw("nrf52840", "fault"), name="faults", protect="lock",
                            boot_check="{rtt: 'self-test: PASS', timeout: 1}")
    config = write_config(tmp_path, profile, ["sim:bay"], history, name="faults-station.yaml")
    store.swap("bay")
    station = StationProcess(config, tmp_path / "faults.log")
    try:
        wait_rows(history, 3, station)
    finally:
        assert station.stop() == 0
    last = rows(history)[-1]
    assert (last["outcome"], last["exit_code"], last["error_kind"]) == ("fail", BOOT, "BootCheckError")
    assert "HardFault at PC 0x" in last["error"] and last["protection"] != "locked"
    assert "HardFault" in station.output()


def test_rtt_streams_until_ctrl_c(board, boot_fw, cli):
    """``piflash rtt``: what the board prints, from its start with --reset; Ctrl-C ends it with 0."""
    import os
    import signal
    import sys
    import time

    args = board("nrf52840")
    fw = boot_fw("nrf52840", "rtt")
    _flash(cli, fw, args)
    proc = subprocess.Popen([sys.executable, "-m", "piflash", "rtt", str(fw), *args, "--reset"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=os.environ.copy())
    try:
        os.set_blocking(proc.stdout.fileno(), False)
        got, deadline = b"", time.monotonic() + 30
        while b"self-test: PASS\n" not in got and time.monotonic() < deadline and proc.poll() is None:
            got += proc.stdout.read() or b""
            time.sleep(0.05)
        assert got == b"piflash boot-check firmware: nrf52840\nself-test: PASS\n"
        proc.send_signal(signal.SIGINT)
        assert proc.wait(10) == 0, proc.stderr.read()
    finally:
        proc.kill()
    # the RAM is searched without the ELF; a firmware without RTT is exit 26 after --find-timeout
    assert cli("rtt", *args, "--duration", "0.5", check=0).stdout.startswith("piflash boot-check firmware")
    _flash(cli, boot_fw("nrf52840", "silent"), args)
    proc = cli("rtt", *args, "--reset", "--find-timeout", "0.5", check=BOOT)
    assert "no RTT control block found in RAM within 0.5 s" in proc.stderr
