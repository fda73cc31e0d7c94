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


def test_a_station_on_the_pins_needs_the_pins_extra(tmp_path, firmware_dir, monkeypatch):
    """A ``spidev:`` or ``gpio:`` slot needs python-periphery (``--with-pins``): ``station check``'s
    extras name it, and a venv without it is exit 17 with the install line, not a traceback."""
    import sys

    from piflash.errors import ExitCode, ExtraMissingError
    from piflash.station.config import check_extras, load_config, needed_extras

    profile = write_profile(tmp_path, firmware_dir / "nrf52840" / "firmware.hex")
    usb = load_config(write_config(tmp_path, profile, ["sim:a"], tmp_path / "h.sqlite3"))
    assert "pins" not in needed_extras(usb)
    for probes in (["spidev:0.0", "spidev:1.0"], ["gpio:gpiochip0:swclk=5,swdio=6"]):
        cfg = load_config(write_config(tmp_path, profile, probes, tmp_path / "h.sqlite3"))
        assert needed_extras(cfg) == ["pins"]
        assert check_extras(cfg) == ["pins"]
        monkeypatch.setitem(sys.modules, "periphery", None)  # as if not installed: its import fails
        with pytest.raises(ExtraMissingError) as err:
            check_extras(cfg)
        monkeypatch.delitem(sys.modules, "periphery")
        assert err.value.exit_code == ExitCode.EXTRA_MISSING == 17
        assert "--with-pins" in err.value.hint and "'pins' extra" in str(err.value)
