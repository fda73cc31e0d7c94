"""Issue 41, item 6 ("one style"): unique IDs in lower case everywhere (docs/result.schema.json's
``target_uid``), given in any case; addresses in hex. Run as a user runs them: the real CLI in a
subprocess. (``history --board`` in any case: tests/production/test_history.py.)"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

from piflash.errors import ExitCode
from piflash.sim import SimStore

HEX_UPPER = re.compile(r"\b[0-9A-F]{16,}\b")


def test_sim_commands_print_unique_ids_lower_case(cli):
    created = cli("sim", "create", "nrf", "-t", "nrf52840", check=0).stdout
    uid = re.search(r"target unique ID ([0-9a-fA-F]+)", created).group(1)
    assert uid == uid.lower() and not HEX_UPPER.search(created), created
    assert f"uid {uid} " in cli("sim", "list", check=0).stdout
    assert cli.json("sim", "list")["boards"][0]["target_uid"] == uid
    # given upper case, the same board: printed, stored and read over SWD lower case
    swapped = cli("sim", "board", "swap", "nrf", "--uid", "00112233AABBCCDD", check=0).stdout
    assert "board 00112233aabbccdd seated" in swapped, swapped
    assert "board 00112233aabbccdd seated" in cli("sim", "board", "seat", "nrf", check=0).stdout
    assert SimStore().get("nrf").target_uid == "00112233aabbccdd"
    assert cli.json("info", "-t", "nrf52840", "-u", "sim:nrf")["target_uid"] == "00112233aabbccdd"


def test_a_board_stored_upper_case_reads_back_lower_case(cli, sim_dir):
    cli("sim", "create", "old", "-t", "stm32f103rc", check=0)
    path = sim_dir / "old" / "board.json"
    data = json.loads(path.read_text())
    data["target_uid"] = "00112233445566778899AABB"  # as versions before issue 41 stored it
    path.write_text(json.dumps(data))
    assert "uid 00112233445566778899aabb " in cli("sim", "list", check=0).stdout
    assert "board 00112233445566778899aabb seated" in cli("sim", "board", "seat", "old", check=0).stdout
    assert cli.json("info", "-t", "stm32f103rc", "-u", "sim:old")["target_uid"] == "00112233445566778899aabb"


def test_sim_faults_print_addresses_in_hex(cli):
    cli("sim", "create", "nrf", "-t", "nrf52840", check=0)
    out = cli("sim", "fault", "nrf", "--write-protect", "0x1000", "--bit-flip", "0x1235:3", check=0).stdout
    assert "write_protect=0x00001000" in out and "bit_flip=0x00001235:3" in out, out
    assert "4096" not in out and "4661" not in out, out
    listed = cli("sim", "list", check=0).stdout
    assert "write_protect=0x00001000" in listed and "4096" not in listed, listed


def test_install_service_sudo_hint_keeps_the_config(monkeypatch, tmp_path):
    """Not root on /: the hint's sudo command is the one given, --config (quoted for the shell),
    --executable and --now kept, so that pasting it installs what was asked."""
    import shlex

    import pytest

    from piflash.errors import ServiceError
    from piflash.station import service

    config = tmp_path / "my line" / "station.yaml"
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(ServiceError) as err:
        service.plan_install(config=config, executable="/opt/piflash/bin/piflash", now=True)
    command = err.value.hint.split(": ", 1)[1]
    words = shlex.split(command)
    assert words[0] == "sudo" and words[2:4] == ["station", "install-service"], command
    assert words[words.index("--config") + 1] == str(config), command
    assert words[words.index("--executable") + 1] == "/opt/piflash/bin/piflash" and "--now" in words, command


def _flash_args(firmware_dir):
    return [sys.executable, "-m", "piflash", "flash", str(firmware_dir / "nrf52840" / "firmware.hex"),
            "-t", "nrf52840", "-u", "sim:nrf"]


def test_flash_into_a_closed_pipe_ends_quietly_with_141(cli, firmware_dir):
    """``piflash flash FW | head -c 1``: the reader goes after the first byte; the next progress
    line meets the closed pipe inside pyOCD's connect. That is the output's broken pipe, not the
    probe's (it was exit 13, "the probe disconnected", with the probe-server hint)."""
    cli("sim", "create", "nrf", "-t", "nrf52840", check=0)
    proc = subprocess.Popen(_flash_args(firmware_dir), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout.read(1) == b"C"     # "Connecting..."
    proc.stdout.close()                    # as head -c 1 does
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == ExitCode.PIPE_CLOSED, err
    assert err == "", err


def test_flash_with_stdout_closed_flashes_quietly(cli, firmware_dir):
    """``piflash flash FW >&-``: it was a traceback (exit 1) in make_progress; now the flash runs as
    with >/dev/null, and the history database (opened on the lowest free descriptor) takes none of
    the output."""
    cli("sim", "create", "nrf", "-t", "nrf52840", check=0)
    proc = subprocess.run(["sh", "-c", 'exec "$@" >&-', "sh", *_flash_args(firmware_dir)],
                          stderr=subprocess.PIPE, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    (row,) = cli.json("history")["operations"]
    assert row["outcome"] == "pass"
    assert cli("history", "verify-chain", check=0).stdout.startswith("chain intact")


def test_bootsel_byte_counts_agree_on_a_blank_pico(cli, pyocd_binaries, tmp_path, monkeypatch):
    """A blank Pico over BOOTSEL: erase says what its bytes are (the sectors checked, none erased),
    program writes the image's pages, and "unchanged" counts only the image's pages the chip
    already held, as over SWD: it was "3,584 B unchanged", the blank rest of the last sector."""
    from support.uf2kit import RP2040_FAMILY, to_uf2

    SimStore().create("pico", "rp2040")
    monkeypatch.setenv("PIFLASH_SIM_USB", "pico@bootsel")
    uf2 = tmp_path / "blink.uf2"
    uf2.write_bytes(to_uf2((pyocd_binaries / "rp2040.bin").read_bytes(), 0x10000000, RP2040_FAMILY))
    lines = cli("flash", uf2, check=0).stdout.splitlines()
    line = {text.split(" ", 1)[0]: text for text in lines}
    assert line["Erasing..."] == "Erasing... 12,288 bytes", lines
    assert "3 sector(s) (12,288 B) checked, nothing to erase" in line["Erasing"], lines
    assert line["Programming..."] == "Programming... 8,704 bytes", lines
    assert "8,704 B written, 0 B unchanged" in line["Programming"], lines
    assert "8,704 programmed, 0 unchanged" in line["Flashed"], lines
    again = cli.json("flash", uf2)["program"]
    assert (again["programmed_bytes"], again["skipped_bytes"], again["erased_bytes"]) == (0, 8704, 0)


# -- 80 columns (issue 41 item 6): the width a Pi's console has, given as COLUMNS, output piped --

LONG_ERROR = ("program failed at 0x00003000: flash program failure at page 0x00003000 (4096 bytes from "
              "0x00003000 in one call) (address 0x00003000; result code 0x1) (algorithm result 0x1)")
DAPLINK_ID = re.compile(r"^[0-9A-F]{48}$")


def _at(columns, *args):
    proc = subprocess.run([sys.executable, "-m", "piflash", *map(str, args)], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ, COLUMNS=str(columns)))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines and max(len(line) for line in lines) <= columns, "\n".join(lines)
    return lines


def _station_history(path):
    """A station's history as a line has it: 8 boards on three probes (one a DAPLink's 48-digit
    serial), two not on the station, serial numbers, two failures with pyOCD's long error."""
    from piflash.record.history import History
    from piflash.record.result import OperationResult

    probes = ["E6614103E7176A23", "110215ED22B8CCE7B7C491B76710C796B056C7FCB8C98270", "sim:bay3"]
    with History(path) as db:
        for i in range(1, 9):
            res = OperationResult(operation="flash", probe_id=probes[i % 3], target="nrf52840",
                                  target_uid=f"{0x5f1a3c0e9b2d4400 + i:016x}", firmware="/srv/fw/blink-v1.2.3.hex",
                                  firmware_sha256="ab" * 32, image_bytes=65536, ok=i % 3 != 0,
                                  started_at=1_790_000_000.0 + 30 * i, duration=2.0,
                                  durations={"connect": 0.1, "program": 1.5})
            if not res.ok:
                res.error = {"kind": "FlashError", "message": LONG_ERROR, "exit_code": 11}
            db.record(res, station="line-1" if i > 2 else None, serial=f"SN-{1000 + i}")


def test_history_at_80_columns_keeps_result_serial_error_station_probe(tmp_path):
    _station_history(tmp_path / "h.sqlite3")
    lines = _at(80, "history", "--file", tmp_path / "h.sqlite3")
    # what every row shares is said once, above the table
    assert lines[0].startswith("every row: op flash, target nrf52840, firmware blink-v1.2.3.hex"), lines
    header = next(line for line in lines if line.startswith("#"))
    assert header.split() == ["#", "station", "probe", "serial", "result", "error"], header
    rows = {line.split()[0]: line for line in lines[lines.index(header) + 1:-1]}
    assert len(rows) == 8
    failed = rows["3"]
    assert "line-1" in failed and "E6614103E7176A23" in failed and "SN-1003" in failed and " FAIL " in failed
    assert "program failed at 0x00003000" in failed and failed.endswith("…")       # shortened, not dropped
    assert "110215ED22B8CCE…" in rows["1"] and " - " in rows["1"]                   # a long ID's beginning
    assert lines[-1].startswith("6 passed, 2 failed")
    # piped without a width: every column, the error whole, as before
    whole = subprocess.run([sys.executable, "-m", "piflash", "history", "--file", tmp_path / "h.sqlite3"],
                           capture_output=True, text=True, env={k: v for k, v in os.environ.items() if k != "COLUMNS"},
                           check=True).stdout
    assert LONG_ERROR in whole and "110215ED22B8CCE7B7C491B76710C796B056C7FCB8C98270" in whole


def test_probes_list_and_info_fit_80_columns(cli, monkeypatch):
    for board, target in (("dl", "nrf52840"), ("mc", "stm32f103rc"), ("bp", "rp2040"), ("bs", "rp2040"),
                          ("app", "rp2040"), ("noa", "nrf52840"), ("nrf", "nrf52840")):
        SimStore().create(board, target)
    monkeypatch.setenv("PIFLASH_SIM_USB", "dl@daplink,mc@mculink,bp@debugprobe,bs@bootsel,app@app,noa@debugprobe!noaccess")
    listed = cli.json("probes")["probes"]
    ids = [p["probe_id"] for p in listed]
    assert any(DAPLINK_ID.match(i) for i in ids) and "sim:nrf" in ids and len(ids) == 7, ids
    for command in ("probes", "list"):
        lines = _at(80, command)
        text = "\n".join(lines)
        for probe in listed:                              # each ID whole, on a line of its own
            assert any(line.startswith(probe["probe_id"]) for line in lines), (probe["probe_id"], text)
        assert "ARM DAPLink CMSIS-DAP" in text and "BOOTSEL mode" in text and "[cannot open]" in text
    daplink = next(i for i in ids if DAPLINK_ID.match(i))
    lines = _at(80, "info", "-t", "nrf52840", "-u", daplink)
    assert f"Probe:      {daplink}" in lines and any("0x00000000-0x000fffff" in line for line in lines), lines
