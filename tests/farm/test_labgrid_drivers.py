"""piflash.labgrid's resources, drivers and strategy on a labgrid ``Target`` of this host (issue
45), in labgrid's own driver-test manner (labgrid's tests/test_openocd.py: a ``Target``, the
resource, the driver, ``target.activate``, then the protocol's calls) but without mocks: the
driver runs the real ``piflash`` (this checkout) on a simulated nRF52840. The exporter, SSH and
coordinator path is tests/farm/test_labgrid.py (slow)."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

import pytest

pytest.importorskip("labgrid")

from labgrid import Environment, Target  # noqa: E402
from labgrid.factory import target_factory  # noqa: E402
from labgrid.protocol import BootstrapProtocol, ResetProtocol  # noqa: E402

from piflash.labgrid import PiflashBootDriver, PiflashDriver, PiflashProbe, PiflashRunError  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
PROBE = "sim:nrf52840"


@pytest.fixture
def env(tmp_path, firmware_dir):
    """A labgrid environment whose ``piflash`` tool is this checkout's (the test's simulated boards
    and history come with the environment variables tests/conftest.py sets)."""
    tool = tmp_path / "piflash"
    tool.write_text(f'#!/bin/sh\nPYTHONPATH={REPO} exec {sys.executable} -m piflash "$@"\n')
    tool.chmod(0o755)
    cfg = tmp_path / "env.yaml"
    cfg.write_text(
        f"targets:\n  main:\n    resources:\n      PiflashProbe:\n        probe_id: {PROBE}\n"
        "    drivers:\n      PiflashDriver: {pyocd_target: nrf52840}\n"
        "      PiflashBootDriver: {check: 'rtt:self-test: PASS', timeout: 5}\n      PiflashStrategy: {}\n"
        f"tools:\n  piflash: {tool}\nimages:\n  firmware: {firmware_dir / 'boot' / 'nrf52840' / 'rtt.elf'}\n"
        "imports:\n  - piflash.labgrid\n"
    )
    return Environment(str(cfg))


def test_registered_with_labgrid_as_its_own():
    for name in ("PiflashProbe", "NetworkPiflashProbe"):
        assert name in target_factory.resources
    for name in ("PiflashDriver", "PiflashBootDriver", "PiflashStrategy"):
        assert name in target_factory.drivers
    assert issubclass(PiflashDriver, BootstrapProtocol) and issubclass(PiflashDriver, ResetProtocol)


def test_a_probe_id_piflash_refuses_is_refused_when_read():
    target = Target("test")
    with pytest.raises(ValueError, match="names no sim probe"):
        PiflashProbe(target, name=None, probe_id="sim:")
    with pytest.raises(ValueError, match="may only end a probe ID"):
        PiflashProbe(target, name=None, probe_id="02*4*")


def test_a_boot_check_piflash_refuses_is_refused_when_read():
    target = Target("test")
    PiflashProbe(target, name=None, probe_id=PROBE)
    PiflashDriver(target, name=None)
    with pytest.raises(ValueError, match="PiflashBootDriver check 'uart:PASS'"):
        PiflashBootDriver(target, name=None, check="uart:PASS")


def test_load_reset_boot_and_a_failed_boot(env, firmware_dir, tmp_path):
    target = env.get_target("main")
    flasher = target.get_driver("BootstrapProtocol")
    assert isinstance(flasher, PiflashDriver) and target.get_driver("ResetProtocol") is flasher
    result = flasher.load(str(firmware_dir / "boot" / "nrf52840" / "rtt.elf"))
    assert result["ok"] and result["verified"] and result["probe_id"] == PROBE and result["labgrid_place"] is None
    assert flasher.reset()["ok"]
    boot = target.get_driver("PiflashBootDriver")
    assert boot.boot()["passed"] and boot.last_boot["output"].endswith("self-test: PASS\n")

    flasher.load(str(firmware_dir / "boot" / "nrf52840" / "silent.elf"))
    with pytest.raises(PiflashRunError) as err:
        boot.boot()
    text = str(err.value)
    assert err.value.exit_code == 26 and err.value.result["phase"] == "boot_check"
    assert f"on {PROBE} failed in phase boot_check (exit 26)" in text
    assert "RTT" in text and "board output so far (0 characters)" in text and "hint:" in text

    with pytest.raises(PiflashRunError, match="no such firmware file"):
        flasher.run_piflash(["flash", str(tmp_path / "none.hex"), "-u", PROBE], "piflash flash none.hex")


def test_the_strategy_goes_off_flashed_booted(env, tmp_path):
    target = env.get_target("main")
    strategy = target.get_driver("PiflashStrategy")
    strategy.transition("booted")
    assert strategy.status.name == "booted"
    assert target.get_driver("PiflashBootDriver").last_boot["passed"]
    strategy.transition("off")
    assert strategy.status.name == "off"
    with sqlite3.connect(tmp_path / "history.sqlite3") as db:
        ops = db.execute("SELECT operation, outcome FROM operations ORDER BY id").fetchall()
    assert ops == [("flash", "pass"), ("flash", "pass")]
