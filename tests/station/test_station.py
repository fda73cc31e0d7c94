"""The station end to end: ``piflash station run`` as a real subprocess, real pyOCD, simulated
boards swapped on the fixture by the test, the history read back with sqlite3."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import signal
import time
from pathlib import Path

import pytest

pytest.importorskip("unicorn")

from support.stationkit import (  # noqa: E402
    MID_PROGRAM_TRANSFERS,
    StationProcess,
    rows,
    wait_rows,
    write_config,
    write_profile,
)

from piflash.sim import SimStore  # noqa: E402
from piflash.station.loop import REPEAT_WINDOW  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def store(sim_dir):
    return SimStore()


@pytest.fixture
def firmware(firmware_dir):
    return firmware_dir / "nrf52840" / "firmware.hex"


@pytest.fixture
def stations():
    started = []

    def start(config, log, **kw):
        st = StationProcess(config, log, **kw)
        started.append(st)
        return st

    yield start
    for st in started:
        st.kill()


def test_twenty_boards(tmp_path, store, firmware, stations):
    """18 pass, one write-protected and one pulled mid-flash fail with their reasons, the station
    keeps running, the history is exact, and the last board, left on the fixture, is flashed once."""
    history = tmp_path / "history.sqlite3"
    profile = write_profile(tmp_path, firmware, name="blinky")
    config = write_config(tmp_path, profile, ["sim:bay"], history)
    first = store.create("bay", "nrf52840")
    station = stations(config, tmp_path / "station.log")
    faults = {6: {"write_protect": [0x1000]}, 12: {"remove_after": MID_PROGRAM_TRANSFERS}}
    uids = [first.target_uid.lower()]
    wait_rows(history, 1, station)
    for i in range(1, 20):
        uids.append(store.swap("bay", faults=faults.get(i)).target_uid.lower())
        wait_rows(history, i + 1, station)

    got = rows(history)
    assert [r["target_uid"] for r in got] == uids
    assert [r["outcome"] for r in got] == ["fail" if i in faults else "pass" for i in range(20)]
    sha = hashlib.sha256(firmware.read_bytes()).hexdigest()
    for r in got:
        assert (r["station"], r["profile"], r["probe_id"], r["target"], r["operation"]) == \
            ("test-line", "blinky", "sim:bay", "nrf52840", "flash")
        assert r["firmware_sha256"] == sha and r["firmware"] == str(firmware)
        assert r["connect_s"] > 0 and r["ended_at"] >= r["started_at"]
    for r in (r for i, r in enumerate(got) if i not in faults):
        assert r["exit_code"] == 0 and r["error"] is None and r["programmed_bytes"] >= 12 * 1024
        assert r["erase_s"] > 0 and r["program_s"] > 0 and r["verify_s"] > 0 and r["reset_s"] >= 0
    protected, pulled = got[6], got[12]
    assert (protected["error_kind"], protected["exit_code"]) == ("VerifyError", 12)
    assert re.search(r"verify failed: [\d,]+ byte\(s\) differ, first at 0x00001000", protected["error"])
    assert pulled["error"].startswith("board removed during program: ") and pulled["exit_code"] in (10, 11)
    out = station.output()
    assert f"FAIL {uids[6]} verify failed" in out and f"FAIL {uids[12]} board removed during program" in out
    assert out.count("PASS ") == 18 and f"PASS {uids[-1]} #20" in out

    # The last board stays on the fixture for many poll intervals: no second flash, no new row.
    time.sleep(30 * 0.1)
    assert len(rows(history)) == 20 and station.proc.poll() is None
    assert station.stop() == 0
    assert len(rows(history)) == 20
    last = store.get("bay")
    assert last.stats["program_bytes"] == got[-1]["programmed_bytes"]      # programmed once
    assert "station stopped: 18 passed, 2 failed, 0 skipped" in station.output()


def test_two_probes_in_parallel_with_a_fault_on_one(tmp_path, store, firmware, stations):
    history = tmp_path / "history.sqlite3"
    config = write_config(tmp_path, write_profile(tmp_path, firmware), "any", history)
    a = store.create("bay-a", "nrf52840")
    b = store.create("bay-b", "nrf52840")
    store.set_faults("bay-b", disconnect_after=MID_PROGRAM_TRANSFERS)     # b's probe drops mid-flash
    station = stations(config, tmp_path / "station.log")
    got = wait_rows(history, 2, station)
    by_probe = {r["probe_id"]: r for r in got}
    assert by_probe["sim:bay-a"]["outcome"] == "pass"
    assert by_probe["sim:bay-a"]["target_uid"] == a.target_uid.lower()
    lost = by_probe["sim:bay-b"]
    assert (lost["outcome"], lost["error_kind"], lost["exit_code"]) == ("fail", "ProbeLostError", 13)
    assert lost["target_uid"] == b.target_uid.lower()
    # b's probe is back with the same board: not flashed again; a keeps working meanwhile.
    a2 = store.swap("bay-a")
    got = wait_rows(history, 3, station)
    assert (got[2]["probe_id"], got[2]["target_uid"], got[2]["outcome"]) == \
        ("sim:bay-a", a2.target_uid.lower(), "pass")
    b2 = store.swap("bay-b")                                               # a good board on b
    got = wait_rows(history, 4, station)
    assert (got[3]["probe_id"], got[3]["target_uid"], got[3]["outcome"]) == \
        ("sim:bay-b", b2.target_uid.lower(), "pass")
    assert station.stop() == 0 and len(rows(history)) == 4


def test_sigterm_mid_board_finishes_and_records_it(tmp_path, store, stations):
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(256 * 1024))
    history = tmp_path / "history.sqlite3"
    profile = write_profile(tmp_path, big, base_address="0x0")
    station = stations(write_config(tmp_path, profile, ["sim:bay"], history), tmp_path / "station.log")
    store.create("bay", "nrf52840")
    station.wait_output("sim:bay: flashing")
    assert rows(history) == []                    # caught in the middle of the board...
    assert [r["outcome"] for r in rows(history, with_open=True)] == ["open"]   # ...its row opened
    station.signal(signal.SIGTERM)
    assert station.wait() == 0                    # one SIGTERM only: a second would abort the board
    got = rows(history)
    assert len(got) == 1 and got[0]["outcome"] == "pass" and got[0]["programmed_bytes"] == 256 * 1024
    assert "station stopped: 1 passed" in station.output()
    assert store.read_flash("bay")[:256 * 1024] == big.read_bytes()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.parametrize("via", ["timeout", "twice"])
def test_one_stop_request_delivered_twice_counts_once(tmp_path, store, stations, sig, via):
    """One Ctrl-C/SIGTERM often reaches the station twice: `timeout 600 piflash station ...`
    (GNU timeout passes the signal to the station and then to its whole process group), or a
    terminal's Ctrl-C reaching every process of the group while a wrapper relays it too. One
    user action: the board in flight is finished and recorded as pass. ``twice`` delivers the
    signal twice 50 ms apart (the timeout route is a race: Python may fold two quick deliveries
    into one handler call)."""
    if via == "timeout" and not shutil.which("timeout"):
        pytest.skip("needs GNU timeout (coreutils)")
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(256 * 1024))
    history = tmp_path / "history.sqlite3"
    profile = write_profile(tmp_path, big, base_address="0x0")
    station = stations(write_config(tmp_path, profile, ["sim:bay"], history), tmp_path / "station.log",
                       prefix=["timeout", "600"] if via == "timeout" else [])
    store.create("bay", "nrf52840")
    station.wait_output("sim:bay: flashing")
    station.signal(sig)                           # via timeout: it relays the signal twice
    if via == "twice":
        time.sleep(0.05)
        station.signal(sig)
    assert station.wait() == 0, station.output()
    got = rows(history)
    assert len(got) == 1 and got[0]["outcome"] == "pass", (got, station.output())
    assert store.read_flash("bay")[:256 * 1024] == big.read_bytes()


def test_a_later_second_stop_request_aborts_the_board(tmp_path, store, stations):
    """A second SIGTERM well after the first (a user insisting) aborts the board in flight; it is
    recorded as a failure, never left out of the history."""
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(1024 * 1024))
    history = tmp_path / "history.sqlite3"
    profile = write_profile(tmp_path, big, base_address="0x0")
    station = stations(write_config(tmp_path, profile, ["sim:bay"], history), tmp_path / "station.log")
    store.create("bay", "nrf52840")
    station.wait_output("sim:bay: flashing")
    station.signal(signal.SIGTERM)
    time.sleep(REPEAT_WINDOW + 0.2)
    assert station.proc.poll() is None, "the 1 MiB board finished too soon to test an abort"
    station.signal(signal.SIGTERM)
    assert station.wait() == 0
    got = rows(history)
    assert len(got) == 1 and got[0]["outcome"] == "fail", got
    assert "station stopped during" in (got[0]["error"] or ""), got


def test_skip_reflash_and_sighup_reload(tmp_path, store, firmware, stations, cli):
    from conftest import expected_flash

    history = tmp_path / "history.sqlite3"
    profile = write_profile(tmp_path, firmware)
    config = write_config(tmp_path, profile, ["sim:bay"], history, on_same_firmware="skip")
    flashed = expected_flash(firmware, 1024 * 1024)
    store.create("bay", "nrf52840")
    store.write_flash("bay", flashed)                           # already carries the firmware
    station = stations(config, tmp_path / "station.log")
    got = wait_rows(history, 1, station)
    assert got[0]["outcome"] == "skip" and got[0]["programmed_bytes"] == 0 and got[0]["verify_s"] > 0
    station.wait_output("SKIP ")

    config.write_text(config.read_text().replace("on_same_firmware: skip", "on_same_firmware: reflash"))
    station.signal(signal.SIGHUP)
    station.wait_output("config reloaded")
    store.swap("bay", flash=flashed)
    got = wait_rows(history, 2, station)
    assert got[1]["outcome"] == "pass"                          # flashed (and verified) again

    config.write_text(config.read_text() + "poll_interval: 3\n")     # a duplicate key: broken
    station.signal(signal.SIGHUP)
    station.wait_output("reload failed, keeping the previous config")
    assert "station.yaml:7: key 'poll_interval': duplicate key" in station.output()
    store.swap("bay")
    got = wait_rows(history, 3, station)
    assert got[2]["outcome"] == "pass" and station.proc.poll() is None
    assert station.stop() == 0


@pytest.mark.parametrize("text, line, key, message", [
    ("profile: board.yaml\npoll_interval: fast\n", 2, "poll_interval", "expected seconds"),
    ("profile: board.yaml\nprobes: [1, 2]\n", 2, "probes", "expected 'any' or a list"),
    ("station: x\nprofile: board.yaml\non_same_firmware: maybe\n", 3, "on_same_firmware", "skip, reflash"),
    ("profile: board.yaml\nprobe: any\n", 2, "probe", "did you mean 'probes'"),
    ("station: x\nprofile: nowhere\n", 2, "profile", "profile 'nowhere' not found"),
    ("profile: board.yaml\ngpio:\n  pass_led: 99\n", 2, "gpio.pass_led", "BCM GPIO number"),
])
def test_broken_config_exits_5_with_file_line_key(tmp_path, firmware, cli, text, line, key, message):
    write_profile(tmp_path, firmware, name="board")
    config = tmp_path / "station.yaml"
    config.write_text(text)
    for command in ("run", "check"):
        proc = cli("station", command, "--config", config, check=5)
        assert f"{config}:{line}: key '{key}': " in proc.stderr and message in proc.stderr, proc.stderr


def test_broken_profile_and_firmware_exit_codes(tmp_path, firmware, cli):
    bad_profile = tmp_path / "board.yaml"
    bad_profile.write_text(f"target: nrf52840\nfirmware: {firmware}\nerase: fast\n")
    config = write_config(tmp_path, bad_profile, ["sim:bay"], tmp_path / "h.sqlite3")
    proc = cli("station", "run", "--config", config, check=5)
    assert f"{bad_profile}:3: key 'erase'" in proc.stderr
    write_profile(tmp_path, tmp_path / "missing.hex", name="board")
    assert "firmware" in cli("station", "check", "--config", config, check=3).stderr
    write_profile(tmp_path, firmware, name="board", sha256="0" * 64)
    cli("station", "check", "--config", config, check=6)


def test_config_example_in_docs_loads(tmp_path, firmware, monkeypatch):
    """The example in docs/station.md is a working config (its gpio section included)."""
    from piflash.station.config import load_config

    text = (REPO / "docs" / "station.md").read_text()
    example = re.search(r"<!-- station-config-example -->\n```yaml\n(.*?)```", text, re.S).group(1)
    profiles = tmp_path / "profiles"
    profiles.mkdir(exist_ok=True)
    write_profile(profiles, firmware, name="nrf52-app")
    monkeypatch.setenv("PIFLASH_PROFILE_PATH", str(profiles))
    (tmp_path / "station.yaml").write_text(example)
    cfg = load_config(tmp_path / "station.yaml")
    assert cfg.profile.name == "nrf52-app" and cfg.probes and cfg.on_same_firmware in ("skip", "reflash")
    assert set(cfg.gpio) == {"pass_led", "fail_led", "busy_led", "buzzer", "button"}


def test_station_over_the_remote_probe_protocol(tmp_path, store, firmware, stations, sim_server):
    """A board served by 'piflash sim serve' (as a host serves one to a station in a container):
    boards swapped on the serving side are flashed through pyOCD's remote probe."""
    history = tmp_path / "history.sqlite3"
    first = store.create("remote-bay", "nrf52840")
    server = sim_server("remote-bay", "nrf52840")
    config = write_config(tmp_path, write_profile(tmp_path, firmware), [server.uid], history)
    station = stations(config, tmp_path / "station.log")
    wait_rows(history, 1, station)
    second = store.swap("remote-bay")
    got = wait_rows(history, 2, station)
    assert [(r["probe_id"], r["target_uid"], r["outcome"]) for r in got] == \
        [(server.uid, first.target_uid.lower(), "pass"), (server.uid, second.target_uid.lower(), "pass")]
    store.pull("remote-bay")
    station.wait_output("waiting for board")
    assert station.stop() == 0 and len(rows(history)) == 2


def test_memory_guard_refuses_before_the_station_starts(tmp_path, firmware, cli, monkeypatch):
    """On a starved Zero 2W the station stops with exit 14 and the numbers, touching nothing."""
    root = tmp_path / "zero2w"
    (root / "proc" / "device-tree").mkdir(parents=True)
    (root / "proc" / "device-tree" / "model").write_bytes(b"Raspberry Pi Zero 2 W Rev 1.0\0")
    (root / "proc" / "meminfo").write_text("MemTotal: 437228 kB\nMemFree: 20000 kB\n"
                                           "MemAvailable: 40000 kB\nSwapTotal: 0 kB\nSwapFree: 0 kB\n")
    monkeypatch.setenv("PIFLASH_PROC_ROOT", str(root))
    history = tmp_path / "history.sqlite3"
    config = write_config(tmp_path, write_profile(tmp_path, firmware, name="board"), ["sim:bay"], history)
    proc = cli("station", "run", "--config", config, check=14)
    assert "not enough memory: station needs about" in proc.stderr
    assert "on Raspberry Pi Zero 2 W" in proc.stderr and "CONF_SWAPSIZE" in proc.stderr
    assert not history.exists()
