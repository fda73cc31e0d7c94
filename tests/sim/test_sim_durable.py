"""Simulated flash keeps what was written when the process that wrote it dies (issue 19, item 8):
real flash does, and every kill test of the station proves only as much as the simulator keeps.
Real processes killed with SIGKILL, the board read back afterwards."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

pytest.importorskip("unicorn")

from conftest import expected_flash  # noqa: E402
from support.stationkit import (  # noqa: E402
    StationProcess,
    rows,
    wait_for,
    wait_rows,
    write_config,
    write_profile,
)

from piflash.sim import SimStore  # noqa: E402

NRF52840_FLASH = 1024 * 1024


def test_board_passed_by_a_killed_station_keeps_its_flash(tmp_path, sim_dir, firmware_dir, cli):
    """The station passes a board and keeps its session open (waiting for removal); kill -9. The
    board still carries the image, and a new station finds it there (SKIP), not blank (PASS)."""
    firmware = firmware_dir / "nrf52840" / "firmware.hex"
    history = tmp_path / "history.sqlite3"
    config = write_config(tmp_path, write_profile(tmp_path, firmware), ["sim:bay"], history,
                          on_same_firmware="skip")
    store = SimStore()
    uid = store.create("bay", "nrf52840").target_uid.lower()
    first = StationProcess(config, tmp_path / "first.log")
    try:
        wait_rows(history, 1, first)
        first.wait_output(f"PASS {uid}")
    finally:
        first.kill()                                   # SIGKILL: no session close, no save
    assert first.proc.returncode == -signal.SIGKILL

    assert store.read_flash("bay") == expected_flash(firmware, NRF52840_FLASH)
    dump = tmp_path / "bay.bin"
    cli("sim", "dump", "bay", "-o", dump, check=0)
    assert dump.read_bytes() == expected_flash(firmware, NRF52840_FLASH)

    again = StationProcess(config, tmp_path / "again.log")
    try:
        wait_rows(history, 2, again)
        assert again.stop() == 0
    finally:
        again.kill()
    assert [r["outcome"] for r in rows(history)] == ["pass", "skip"], again.output()


def test_flash_killed_mid_program_leaves_the_bytes_programmed_so_far(tmp_path, sim_dir, cli):
    """``piflash flash`` of 384 KiB killed with SIGKILL while programming: the board, opened again,
    holds a programmed part of the image (every byte written so far, nothing else)."""
    image = os.urandom(384 * 1024)
    big = tmp_path / "big.bin"
    big.write_bytes(image)
    store = SimStore()
    store.create("bay", "nrf52840")
    blank = b"\xff" * NRF52840_FLASH
    proc = subprocess.Popen([sys.executable, "-m", "piflash", "flash", str(big), "-a", "0", "-t", "nrf52840",
                             "-u", "sim:bay"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: proc.poll() is not None or store.read_flash("bay")[:4096] != blank[:4096],
                 "the first page programmed, seen in the board's store", deadline=120)
        assert proc.poll() is None, proc.stderr.read()
        time.sleep(0.3)
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL

    dump = tmp_path / "bay.bin"
    cli("sim", "dump", "bay", "-o", dump, check=0)     # a new session on the board
    flash = dump.read_bytes()
    done = next(i for i in range(0, len(image), 4096) if flash[i:i + 4096] == blank[:4096])
    assert 4096 <= done < len(image), done             # killed in the middle of it
    assert flash[:done] == image[:done]                 # what was programmed is there
    assert flash[len(image):] == blank[len(image):]     # and nothing else
