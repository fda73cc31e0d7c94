"""What gets a history row, and when: opened when the board is first reached, completed at the end,
left ``open`` by a killed process and shown (then sealed) as interrupted; refusals record nothing."""

from __future__ import annotations

import csv
import io
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from datetime import datetime

import pytest

from piflash.errors import ExitCode
from piflash.progress import ProgressSink
from piflash.record.history import DIED, History, process_alive, process_identity
from piflash.record.result import OperationResult

NRF = ["-t", "nrf52840", "-u", "sim:nrf52840"]


@pytest.fixture
def app_hex(firmware_dir):
    return firmware_dir / "nrf52840" / "firmware.hex"


def _rows(path):
    if not path.exists():
        return []
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        db.row_factory = sqlite3.Row
        return [dict(r) for r in db.execute("SELECT * FROM operations ORDER BY id")]
    except sqlite3.OperationalError:                 # no table: nothing was ever opened
        return []
    finally:
        db.close()


def _refusal(code, tmp_path, app_hex):
    """The command line of a refusal that exits with ``code`` before reaching the board."""
    profiles = tmp_path / "profiles"
    profiles.mkdir(exist_ok=True)
    if code == ExitCode.USAGE:
        return ["flash", app_hex, "-t", "nosuchchip", "-u", "sim:nrf52840"]
    if code == ExitCode.FIRMWARE:
        return ["flash", tmp_path / "missing.hex", *NRF]
    if code == ExitCode.IMAGE_RANGE:
        from intelhex import IntelHex
        ih = IntelHex()
        ih.frombytes(b"\x01" * 64, offset=0x20000000)   # RAM, not flash
        ih.write_hex_file(str(tmp_path / "ram.hex"))
        return ["flash", tmp_path / "ram.hex", *NRF]
    if code == ExitCode.PROFILE:
        (profiles / "bad.yaml").write_text(f"target: nrf52840\nfirmware: {app_hex}\nbogus: 1\n")
        return ["flash", "-p", "bad", "-u", "sim:nrf52840"]
    if code == ExitCode.CHECKSUM:
        (profiles / "pinned.yaml").write_text(f"target: nrf52840\nfirmware: {app_hex}\nsha256: {'a' * 64}\n")
        return ["flash", "-p", "pinned", "-u", "sim:nrf52840"]
    if code == ExitCode.NO_PROBE:
        return ["flash", app_hex, "-t", "nrf52840", "-u", "no-such-probe"]
    raise AssertionError(code)


@pytest.mark.parametrize("code", [ExitCode.USAGE, ExitCode.FIRMWARE, ExitCode.IMAGE_RANGE, ExitCode.PROFILE,
                                  ExitCode.CHECKSUM, ExitCode.NO_PROBE])
def test_refusals_before_the_board_record_nothing(cli, tmp_path, app_hex, code):
    cli("sim", "create", "nrf52840", "-t", "nrf52840", check=0)
    cli(*_refusal(code, tmp_path, app_hex), check=code)
    assert _rows(tmp_path / "history.sqlite3") == []


def test_a_connect_that_reached_the_target_is_recorded(cli, tmp_path, app_hex):
    cli("sim", "create", "nrf52840", "-t", "nrf52840", check=0)
    cli("sim", "fault", "nrf52840", "--absent", check=0)       # the probe opens, no target answers
    cli("flash", app_hex, *NRF, check=ExitCode.CONNECT)
    (row,) = _rows(tmp_path / "history.sqlite3")
    assert (row["outcome"], row["exit_code"], row["error_kind"]) == ("fail", 10, "ConnectError")
    assert row["probe_id"] == "sim:nrf52840" and row["firmware"] == str(app_hex.resolve())
    assert row["seq"] == 1 and row["row_hash"]


def test_sigkill_mid_program_leaves_an_interrupted_row(cli, tmp_path):
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(512 * 1024))                   # ~6 s of programming on the sim
    history = tmp_path / "history.sqlite3"
    cli("sim", "create", "nrf52840", "-t", "nrf52840", check=0)
    proc = subprocess.Popen([sys.executable, "-m", "piflash", "flash", str(big), "-a", "0", *NRF],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        seen = []
        for line in proc.stdout:                              # plain progress lines (not a TTY)
            seen.append(line)
            if line.startswith("Programming..."):
                break
        assert seen and seen[-1].startswith("Programming..."), seen
        # the row was opened at first touch, before the erase
        (row,) = _rows(history)
        assert row["outcome"] == "open" and row["pid"] == proc.pid and row["seq"] is None
        time.sleep(1.0)
        assert proc.poll() is None, "the flash ended before it could be killed mid-program"
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    finally:
        proc.kill()
        proc.wait()

    table = cli("history", check=0).stdout
    assert "INTERRUPTED" in table and DIED in table, table
    assert table.strip().splitlines()[-1].startswith("0 passed, 0 failed, 0 skipped, 1 interrupted, 1 board")
    shown = cli.json("history")["operations"][0]
    assert (shown["outcome"], shown["error"], shown["ended_at"]) == ("interrupted", DIED, None)
    assert shown["firmware"] == str(big) and shown["target_uid"]
    assert _rows(history)[0]["outcome"] == "open"             # reading does not write

    cli("flash", big, "-a", "0", *NRF, "-q", check=0)        # the next writer seals it
    first, second = _rows(history)
    assert (first["outcome"], first["error"], first["exit_code"], first["seq"]) == ("interrupted", DIED, None, 1)
    assert (second["outcome"], second["seq"], second["prev_hash"]) == ("pass", 2, first["row_hash"])
    assert "chain intact: 2 sealed rows" in cli("history", "verify-chain", check=0).stdout


def test_a_reused_pid_is_not_taken_for_the_dead_process(tmp_path):
    me = process_identity()
    assert me and re.fullmatch(r"[0-9a-f-]{36}/\d+", me)
    host = socket.gethostname()
    boot, _, ticks = me.partition("/")
    assert process_alive(host, os.getpid(), me) is True
    assert process_alive(host, os.getpid(), f"{boot}/{int(ticks) + 1}") is False   # same pid, other start
    assert process_alive(host, os.getpid(), f"{'0' * 8}-0000-0000-0000-{'0' * 12}/{ticks}") is False  # rebooted
    assert process_alive("another-host", os.getpid(), me) is None                 # cannot tell

    # a row whose pid is alive now but belonged to an earlier process: sealed as interrupted
    with History(tmp_path / "h.sqlite3") as db:
        res = OperationResult(operation="flash", probe_id="sim:x", started_at=time.time())
        stale = db.open(res)
        live = db.open(res)
        db._db.execute("UPDATE operations SET process_start = ? WHERE id = ?", (f"{boot}/{int(ticks) + 1}", stale))
        assert db.reap() == [stale]
        assert [r["outcome"] for r in db.query()] == ["interrupted", "open"] and live == stale + 1


def test_station_refuses_to_start_without_a_writable_history(cli, tmp_path, firmware_dir):
    from support.stationkit import write_config, write_profile

    (tmp_path / "a-file").write_text("")
    history = tmp_path / "a-file" / "history.sqlite3"        # its folder is a file
    config = write_config(tmp_path, write_profile(tmp_path, firmware_dir / "nrf52840" / "firmware.hex"),
                          ["sim:bay"], history)
    proc = cli("station", "run", "--plain", "--config", config, timeout=60, check=ExitCode.HISTORY)
    assert "error: cannot open the history database" in proc.stderr and "Traceback" not in proc.stderr
    assert "hint: check that" in proc.stderr


def test_exports_write_iso_8601_times_with_the_utc_offset(cli, app_hex):
    cli("sim", "create", "nrf52840", "-t", "nrf52840", check=0)
    cli("flash", app_hex, *NRF, "-q", check=0)
    (row,) = list(csv.DictReader(io.StringIO(cli("history", "--csv", check=0).stdout)))
    (js,) = cli.json("history")["operations"]
    iso = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d\d:\d\d")
    for t in ("started_at", "ended_at"):
        assert iso.fullmatch(row[t]) and js[t] == row[t], row[t]
        assert abs(datetime.fromisoformat(row[t]).timestamp() - float(row[f"{t}_unix"])) < 0.001
        assert js[f"{t}_unix"] == float(row[f"{t}_unix"])


def test_board_search_by_target_uid_or_serial(cli, tmp_path):
    with History(tmp_path / "history.sqlite3") as db:
        for n, uid in enumerate(["aa01", "bb02", "aa01"]):
            res = OperationResult(operation="flash", probe_id="sim:x", target="nrf52840", target_uid=uid,
                                  ok=True, started_at=time.time(), duration=1.0)
            db.record(res, serial=f"SN-{n:04d}", patch={"serial": n}, protection="locked",
                      station="line-1", slot="sim:x")
    assert [r["id"] for r in cli.json("history", "--board", "AA01")["operations"]] == [1, 3]
    (row,) = cli.json("history", "--board", "SN-0001")["operations"]
    assert (row["target_uid"], row["serial"], row["patch"], row["protection"], row["slot"]) == \
        ("bb02", "SN-0001", '{"serial":1}', "locked", "sim:x")
    assert "SN-0002" in cli("history", check=0).stdout        # the serial column, when there are serials


class _PhaseLog(ProgressSink):
    """Notes phase starts, to see where on_connected falls among them."""

    def __init__(self, log):
        self.log = log

    def phase_start(self, phase, total):
        self.log.append(str(phase))


def test_on_connected_is_called_once_after_the_connect_and_before_the_erase(firmware_dir):
    from piflash.errors import NoProbeError
    from piflash.firmware.image import load_image
    from piflash.jobs.workflow import flash_firmware

    image = load_image(firmware_dir / "nrf52840" / "firmware.hex")
    log = []
    flash_firmware(image, probe="sim:nrf52840", target="nrf52840", progress=_PhaseLog(log),
                   on_connected=lambda r: log.append(("touch", r.probe_id, r.target_uid, r.firmware)))
    touch = [e for e in log if isinstance(e, tuple)]
    assert len(touch) == 1 and touch[0][1] == "sim:nrf52840" and len(touch[0][2]) == 16
    assert touch[0][3] == str(image.path.resolve())
    assert log.index(touch[0]) == log.index("connect") + 1 and log[log.index(touch[0]) + 1] == "erase"
    called = []
    with pytest.raises(NoProbeError):
        flash_firmware(image, probe="no-such-probe", target="nrf52840", on_connected=called.append)
    assert called == []
