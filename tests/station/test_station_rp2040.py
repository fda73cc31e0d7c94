"""The station with Raspberry Pi Picos (simulated RP2040s) and Pico 2s (RP2350s) on the fixture:
pico-examples blink as a UF2, boards told apart by their unique ID (the RP2040's flash's, the
RP2350's OTP chip ID), a board left on the fixture flashed once."""

from __future__ import annotations

import time

import pytest

pytest.importorskip("unicorn")

from support.stationkit import (  # noqa: E402
    StationProcess,
    rows,
    wait_rows,
    write_config,
    write_profile,
)
from support.uf2kit import to_uf2  # noqa: E402

from piflash.sim import SimStore  # noqa: E402


@pytest.mark.parametrize("chip", ["rp2040", "rp2350"])
def test_station_flashes_picos_one_after_another(tmp_path, pyocd_binaries, chip):
    from support.uf2kit import RP2040_FAMILY, RP2350_ARM_S_FAMILY
    store = SimStore()
    firmware = tmp_path / "blink.uf2"
    family = RP2040_FAMILY if chip == "rp2040" else RP2350_ARM_S_FAMILY
    blink = (pyocd_binaries / f"{chip}.bin").read_bytes()
    firmware.write_bytes(to_uf2(blink, 0x10000000, family))
    history = tmp_path / "history.sqlite3"
    profile = write_profile(tmp_path, firmware, name="pico-blink", target=chip)
    config = write_config(tmp_path, profile, ["sim:pico-bay"], history)
    uids = [store.create("pico-bay", chip).target_uid.lower()]
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
        assert all(r["target"] == chip and r["programmed_bytes"] >= len(blink) for r in got)
        assert station.stop() == 0
    finally:
        station.kill()
    assert len(rows(history)) == 4
    assert "station stopped: 4 passed, 0 failed, 0 skipped" in station.output()
