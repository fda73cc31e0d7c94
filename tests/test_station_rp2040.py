"""The station with Raspberry Pi Picos (simulated RP2040s) on the fixture: pico-examples blink as
a UF2, boards told apart by their flash's unique ID, a board left on the fixture flashed once."""

from __future__ import annotations

import time

import pytest

pytest.importorskip("unicorn")

from piflash.sim import SimStore  # noqa: E402
from support.stationkit import StationProcess, rows, wait_rows, write_config, write_profile  # noqa: E402
from support.uf2kit import to_uf2  # noqa: E402


def test_station_flashes_picos_one_after_another(tmp_path, pyocd_binaries):
    store = SimStore()
    firmware = tmp_path / "blink.uf2"
    firmware.write_bytes(to_uf2((pyocd_binaries / "rp2040.bin").read_bytes(), 0x10000000))
    history = tmp_path / "history.sqlite3"
    profile = write_profile(tmp_path, firmware, name="pico-blink", target="rp2040")
    config = write_config(tmp_path, profile, ["sim:pico-bay"], history)
    uids = [store.create("pico-bay", "rp2040").target_uid.lower()]
    station = StationProcess(config, tmp_path / "station.log")
    try:
        wait_rows(history, 1, station)
        for i in range(1, 4):
            uids.append(store.swap("pico-bay").target_uid.lower())
            wait_rows(history, i + 1, station)
        time.sleep(2.0)                          # the last board stays: no second flash
        got = rows(history)
        assert [r["target_uid"] for r in got] == uids and len(set(uids)) == 4
        assert [r["outcome"] for r in got] == ["pass"] * 4
        assert all(r["target"] == "rp2040" and r["programmed_bytes"] >= 8472 for r in got)
        assert station.stop() == 0
    finally:
        station.kill()
    assert len(rows(history)) == 4
    assert "station stopped: 4 passed, 0 failed, 0 skipped" in station.output()
