"""The station with serial numbers (issue 13): real ``piflash station run`` subprocesses, real
pyOCD, simulated nRF52840 boards swapped on the fixture; the serial database and the boards'
flash read back afterwards."""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

import pytest

pytest.importorskip("unicorn")

from support.stationkit import rows, serial_numbers, wait_for, wait_rows, write_config  # noqa: E402

from piflash.production.serials import KILL_POINTS  # noqa: E402
from piflash.sim import SimStore  # noqa: E402

LABEL = 0x000FF000


def _profile(tmp_path: Path, firmware_dir: Path, extra: str = "") -> Path:
    path = tmp_path / "numbered.yaml"
    path.write_text(f"""target: nrf52840
firmware: {firmware_dir / "nrf52840" / "firmware.hex"}
serial:
  uicr_customer: 0
  encoding: u32
  start: 5000
patch:
  - name: label
    address: {LABEL:#x}
    encoding: ascii
    length: 16
    template: "SN-{{n:06d}}"
{extra}""")
    return path


def _burned(store: SimStore, name: str):
    """(number in UICR CUSTOMER[0], label text) of the board, taken off the fixture. The simulated
    flash is written through, so it is there even when the station that wrote it was killed and
    the board was then skipped (no session saved it, and its operation counts stayed 0)."""
    store.pull(name)
    wait_for(lambda: store.read_nvm(name, "uicr")[0x80:0x84] != b"\xff" * 4, "the board's number in its UICR")
    uicr = store.read_nvm(name, "uicr")
    return int.from_bytes(uicr[0x80:0x84], "little"), store.read_flash(name)[LABEL:LABEL + 16]


@pytest.mark.slow
def test_twenty_boards_get_twenty_numbers_and_failed_ones_keep_theirs(tmp_path, store, firmware_dir,
                                                                      stations, cli):
    history, serials = tmp_path / "history.sqlite3", tmp_path / "serials.sqlite3"
    config = write_config(tmp_path, _profile(tmp_path, firmware_dir), ["sim:bay"], history,
                          serials=serials, serial_block=4)
    first = store.create("bay", "nrf52840")
    station = stations(config, tmp_path / "station.log")
    flipped = {5: {"bit_flip": {"address": LABEL + 3, "bit": 2}},
               13: {"bit_flip": {"address": LABEL + 9, "bit": 0}}}
    uids, burned = [first.target_uid.lower()], []
    wait_rows(history, 1, station)
    burned.append(_burned(store, "bay"))
    for i in range(1, 20):
        uids.append(store.swap("bay", faults=flipped.get(i)).target_uid.lower())
        wait_rows(history, i + 1, station)
        burned.append(_burned(store, "bay"))
        if i == 19:                                   # the last board, through the CLI's dump
            dump = tmp_path / "last.bin"
            cli("sim", "dump", "bay", "-o", dump, check=0)
            assert dump.read_bytes()[LABEL:LABEL + 16] == burned[-1][1]
    assert station.stop() == 0

    got = rows(history)
    assert [r["outcome"] for r in got] == ["fail" if i in flipped else "pass" for i in range(20)]
    assert all(got[i]["error_kind"] == "VerifyError" for i in flipped)
    numbers = serial_numbers(serials, "n, state, target_uid")
    assert len(numbers) == 20 and len({n for n, _, _ in numbers}) == 20
    by_uid = {uid: (n, state) for n, state, uid in numbers}
    assert set(by_uid) == set(uids)
    for i, uid in enumerate(uids):
        n, state = by_uid[uid]
        assert state == ("fail" if i in flipped else "pass")          # failed boards keep theirs
        assert burned[i][0] == n                                      # UICR CUSTOMER[0], u32 LE
        label = f"SN-{n:06d}".encode().ljust(16, b"\0")
        if i in flipped:
            assert burned[i][1] != label and sum(a != b for a, b in zip(burned[i][1], label)) == 1
        else:
            assert burned[i][1] == label                              # the template, exactly
    # The history rows carry each board's number and patch values (issue 13 item 3's columns).
    assert [r["serial"] for r in got] == [str(by_uid[u][0]) for u in uids]
    assert all(f"SN-{int(r['serial']):06d}" in r["patch"] for r in got)
    out = station.output()
    assert out.count("PASS ") == 18 and f"serial {by_uid[uids[-1]][0]}" in out
    assert f"FAIL {uids[5]} serial {by_uid[uids[5]][0]} verify failed" in out
    assert f"flashing {uids[0]} serial 5000" in out


@pytest.mark.slow
def test_sigkill_at_every_step_never_gives_a_number_twice(tmp_path, store, firmware_dir, stations):
    """For each step of a board's cycle, a station that kills itself right after it (the test-only
    PIFLASH_TEST_KILL_AT hook), then a clean station that finishes the same board."""
    history, serials = tmp_path / "history.sqlite3", tmp_path / "serials.sqlite3"
    config = write_config(tmp_path, _profile(tmp_path, firmware_dir), ["sim:bay"], history,
                          serials=serials, serial_block=3)
    store.create("bay", "nrf52840")
    final = {}
    for round_, step in enumerate(KILL_POINTS):
        uid = store.swap("bay").target_uid.lower() if round_ else store.get("bay").target_uid.lower()
        env = dict(os.environ, PIFLASH_TEST_KILL_AT=step)
        killed = stations(config, tmp_path / f"kill-{step}.log", env)
        wait_for(lambda: killed.proc.poll() is not None, f"the station to kill itself at {step!r}")
        assert killed.proc.returncode == -9, killed.output()
        # The clean station flashes the board, or (killed after the verify) finds it already
        # carries the firmware and skips it: the board keeps the number it got.
        again = stations(config, tmp_path / f"again-{step}.log")
        wait_for(lambda: f"PASS {uid}" in again.output() or f"SKIP {uid}" in again.output(),
                 f"board {uid} done after the kill at {step!r}")
        assert again.stop() == 0
        final[uid] = _burned(store, "bay")[0]

    numbers = serial_numbers(serials, "n, state, target_uid")
    assert len({n for n, _, _ in numbers}) == len(numbers)          # never a number twice
    for uid, n in final.items():                                    # the board's number is its own
        assert (n, uid) in [(m, u) for m, _, u in numbers]
    assert len(set(final.values())) == len(KILL_POINTS)             # every board its own number
    states = [s for _, s, _ in numbers]
    assert "interrupted" in states                                  # boards cut off mid-cycle
    assert all(s in ("pass", "interrupted") for s in states)


def test_station_locks_boards_and_fails_one_whose_lock_does_not_take(tmp_path, store, firmware_dir,
                                                                    stations, cli):
    history = tmp_path / "history.sqlite3"
    profile = tmp_path / "plain.yaml"
    profile.write_text(f"target: nrf52840\nfirmware: {firmware_dir / 'nrf52840' / 'firmware.hex'}\n")
    config = write_config(tmp_path, profile, ["sim:bay"], history, protect="lock")
    store.create("bay", "nrf52840")
    station = stations(config, tmp_path / "station.log")
    wait_rows(history, 1, station)
    # The locked board hides its unique ID, yet it counts as still there: PASS stays shown (and
    # the pass LED lit) until it is taken off, and it is not flashed again.
    time.sleep(1.0)                                                 # ten poll intervals
    assert station.output().rstrip().splitlines()[-1].startswith("sim:bay: PASS"), station.output()
    uid = store.swap("bay", faults={"lock_ignored": True}).target_uid.lower()
    wait_rows(history, 2, station)
    store.swap("bay")
    wait_rows(history, 3, station)
    assert station.stop() == 0
    got = rows(history)
    assert [r["outcome"] for r in got] == ["pass", "fail", "pass"]
    assert [r["protection"] for r in got] == ["locked", "open", "locked"]     # as read back
    assert (got[1]["error_kind"], got[1]["exit_code"]) == ("ProtectError", 21)
    assert "the lock did not take" in got[1]["error"] and got[1]["verify_s"] > 0   # verified first
    assert f"FAIL {uid} the lock did not take" in station.output()
    status = cli.json("protect", "status", "-u", "sim:bay", "-t", "nrf52840")["status"]
    assert status["state"] == "locked"                               # the last board shipped locked


@pytest.mark.parametrize("text, line, key, message", [
    ("serial_block: 0\n", 6, "serial_block", "from 1 to 10000"),
    ("protect: always\n", 6, "protect", "must be one of profile, lock, off"),
    ("serials: 5\n", 6, "serials", "expected a file path"),
])
def test_bad_station_production_keys(tmp_path, firmware_dir, text, line, key, message):
    from piflash.errors import ProfileError
    from piflash.station.config import load_config

    config = write_config(tmp_path, _profile(tmp_path, firmware_dir), ["sim:bay"], tmp_path / "h.sqlite3")
    config.write_text(config.read_text() + text)
    with pytest.raises(ProfileError) as info:
        load_config(config)
    assert (info.value.line, info.value.key) == (line, key) and message in info.value.message


def test_station_protect_policy_and_serials_path(tmp_path, firmware_dir):
    from piflash.station.config import load_config

    prof = _profile(tmp_path, firmware_dir, "protect: lock\n")
    cfg = load_config(write_config(tmp_path, prof, ["sim:bay"], tmp_path / "h.sqlite3"))
    assert cfg.protect == "lock" and cfg.serial_block == 16
    assert cfg.serials_path == tmp_path / "serials.sqlite3"          # beside the history
    cfg = load_config(write_config(tmp_path, prof, ["sim:bay"], tmp_path / "h.sqlite3", protect="off",
                                   serials="s/x.sqlite3"))
    assert cfg.protect is None and cfg.serials_path == tmp_path / "s" / "x.sqlite3"


@pytest.mark.slow
def test_numbering_passed_gives_a_failed_boards_number_to_the_next(tmp_path, store, firmware_dir, stations):
    """``numbering: passed``: a board that fails gives its number back to the station's next
    board, across a restart too, so the passed boards carry consecutive numbers; the failed
    board's row keeps the number it had, and the serial database says it was released."""
    history, serials = tmp_path / "history.sqlite3", tmp_path / "serials.sqlite3"
    config = write_config(tmp_path, _profile(tmp_path, firmware_dir), ["sim:bay"],
                          history, serials=serials, serial_block=4)
    profile = tmp_path / "numbered.yaml"
    profile.write_text(profile.read_text().replace("  start: 5000\n", "  start: 5000\n  numbering: passed\n"))
    store.create("bay", "nrf52840")
    flip = {"bit_flip": {"address": LABEL + 3, "bit": 2}}
    station = stations(config, tmp_path / "station.log")
    wait_rows(history, 1, station)                       # board 0 passes: 5000
    store.swap("bay", faults=flip)                       # board 1 fails with 5001
    wait_rows(history, 2, station)
    store.swap("bay")                                    # board 2 takes 5001 again
    wait_rows(history, 3, station)
    store.swap("bay", faults=flip)                       # board 3 fails with 5002 ...
    wait_rows(history, 4, station)
    assert station.stop() == 0                           # ... and the station stops
    station = stations(config, tmp_path / "station2.log")
    store.swap("bay")                                    # after the restart: 5002 again
    wait_rows(history, 5, station)
    store.swap("bay")
    wait_rows(history, 6, station)
    assert station.stop() == 0
    got = rows(history)
    assert [(r["outcome"], r["serial"]) for r in got] == [
        ("pass", "5000"), ("fail", "5001"), ("pass", "5001"), ("fail", "5002"), ("pass", "5002"),
        ("pass", "5003")]
    assert serial_numbers(serials) == [(n, "pass") for n in range(5000, 5004)]
    db = sqlite3.connect(f"file:{serials}?mode=ro", uri=True)
    try:
        released = db.execute("SELECT n, target_uid, reused_at IS NOT NULL FROM released ORDER BY id").fetchall()
    finally:
        db.close()
    assert [(n, uid, reused) for n, uid, reused in released] == [
        (5001, got[1]["target_uid"], 1), (5002, got[3]["target_uid"], 1)]


def test_station_with_numbers_joins_a_ledger(tmp_path, store, firmware_dir, stations):
    """A station that numbered boards on its own (serial database 5000, 5001) is pointed at a new
    ledger (issue 39): its next board gets 5002, not a failure on sqlite's "UNIQUE constraint
    failed: numbers.counter, numbers.n" for every board (the ledger's counter started at 5000)."""
    pytest.importorskip("psycopg")
    from support.pgserver import PgServer

    history, serials = tmp_path / "history.sqlite3", tmp_path / "serials.sqlite3"
    profile = _profile(tmp_path, firmware_dir)
    store.create("bay", "nrf52840")
    alone = stations(write_config(tmp_path, profile, ["sim:bay"], history, serials=serials, serial_block=2),
                     tmp_path / "alone.log")
    wait_rows(history, 1, alone)
    store.swap("bay")
    wait_rows(history, 2, alone)
    assert alone.stop() == 0
    pg = PgServer()
    try:
        config = write_config(tmp_path, profile, ["sim:bay"], history, name="line.yaml", serials=serials,
                              serial_block=2, ledger=pg.url)
        station = stations(config, tmp_path / "line.log")
        store.swap("bay")
        got = wait_rows(history, 3, station)
        assert station.stop() == 0
    finally:
        pg.close()
    assert [(r["serial"], r["outcome"]) for r in got] == [("5000", "pass"), ("5001", "pass"), ("5002", "pass")]
    assert "UNIQUE" not in station.output()
