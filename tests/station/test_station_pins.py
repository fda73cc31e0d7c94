"""Issue 43 item 4: station slots on the Pi's own pins, ``probes: ["spidev:0.0", "spidev:1.0"]``:
a real station process flashes a simulated board behind each spidev device; its history rows carry
the probe IDs and its status file names the probe kind of each slot."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

pytest.importorskip("unicorn")
pytest.importorskip("periphery")

from support.pinskit import _entry_point_overlay  # noqa: E402
from support.stationkit import wait_for, wait_rows, write_config, write_profile  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


def test_two_spidev_slots_flash_a_board_each(tmp_path, store, firmware_dir, stations):
    store.create("left", "nrf52840")
    store.create("right", "nrf52840")
    env = {k: v for k, v in os.environ.items() if k != "RUNTIME_DIRECTORY"}
    env["PIFLASH_SIM_PINS"] = "left@spidev:0.0,right@spidev:1.0"
    overlay = _entry_point_overlay(tmp_path)
    if overlay is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(overlay), str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    history = tmp_path / "history.sqlite3"
    profile = write_profile(tmp_path, firmware_dir / "nrf52840" / "firmware.hex")
    config = write_config(tmp_path, profile, ["spidev:0.0", "spidev:1.0"], history)
    station = stations(config, tmp_path / "station.log", env)
    got = wait_rows(history, 2, station, deadline=180)
    assert sorted(r["probe_id"] for r in got) == ["spidev:0.0", "spidev:1.0"]
    assert {r["outcome"] for r in got} == {"pass"}, got
    status = tmp_path / "status.json"
    wait_for(lambda: status.exists() and len(json.loads(status.read_text())["slots"]) == 2, "the status file")
    slots = json.loads(status.read_text())["slots"]
    assert sorted((s["probe_id"], s["probe_kind"]) for s in slots) == [("spidev:0.0", "spidev"), ("spidev:1.0", "spidev")]
