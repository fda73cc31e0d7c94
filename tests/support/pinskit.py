"""The Pi's pins in the simulator for tests (issue 43): the ``pins_env`` fixture, and the entry
points a checkout whose installed metadata predates them needs."""

from __future__ import annotations

import os
from importlib.metadata import entry_points
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _entry_point_overlay(tmp_path: Path) -> Path | None:
    """A directory to put on the path when the installed piflash's metadata predates the
    ``piflash.pins_backend`` and ``spidev`` entry points (a checkout not installed again): a
    dist-info of its own declaring them, as pyproject.toml does. None when installed."""
    if any(p.name == "sim" for p in entry_points(group="piflash.pins_backend")):
        return None
    info = tmp_path / "ep" / "piflash_pins_overlay-0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: piflash-pins-overlay\nVersion: 0\n")
    (info / "entry_points.txt").write_text(
        "[piflash.pins_backend]\nsim = piflash.sim.probes.pins:pins_backend\n\n"
        "[pyocd.probe]\nspidev = piflash.probe.pinplugin:SpidevProbePlugin\n"
        "gpio = piflash.probe.pinplugin:GpioProbePlugin\n")
    return info.parent


@pytest.fixture
def pins_env(tmp_path, monkeypatch):
    """``pins_env(spec, **boards)``: creates the boards (name=target), sets ``PIFLASH_SIM_PINS``
    for child processes (with the entry points on their path) and installs the devices here."""
    overlay = _entry_point_overlay(tmp_path)
    if overlay is not None:
        monkeypatch.syspath_prepend(str(overlay))
        monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
            [str(overlay), str(REPO)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    from piflash.sim import SimStore
    from piflash.sim.probes import pins as sim_pins

    store = SimStore()

    def make(spec, **boards):
        for name, target in boards.items():
            store.create(name, target, exist_ok=True)
        monkeypatch.setenv(sim_pins.ENV_VAR, spec)
        return sim_pins.install(spec, store)

    yield make
    sim_pins.uninstall()


