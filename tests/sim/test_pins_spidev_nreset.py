"""nRESET of a ``spidev:`` probe (issue 43): ``spidev:0.0:nreset=25`` drives GPIO 25 open-drain
through python-periphery's ``GPIO`` onto the simulated gpiochip, whose line is wired to the board's
reset pin (``PIFLASH_SIM_PINS=NAME@spidev:0.0:nreset=25``): pulled low, then released as an input,
never driven high. pyOCD's hardware reset (reset type ``hw``) goes through it."""

from __future__ import annotations

import os

import pytest

pytest.importorskip("unicorn")
pytest.importorskip("periphery")

from pyocd.core import exceptions  # noqa: E402

from piflash.probe import pinprobe  # noqa: E402
from piflash.sim.probes import pins as sim_pins  # noqa: E402

PROBE = "spidev:0.0:nreset=25"


def _states(history):
    """The line's successive states: python-periphery changes a line's direction by releasing
    its request and asking again, so a change shows as a release ("in") then the new state."""
    out = []
    for state in history:
        if not out or out[-1] != state:
            out.append(state)
    return out


def test_spec_parsing():
    assert sim_pins.parse_spec("a@spidev:0.0:nreset=25,b@spidev:1.0:nreset=gpiochip4/3") == [
        ("a", "spidev0.0:nreset=25"), ("b", "spidev1.0:nreset=gpiochip4/3")]
    # gpiochip0 is the default chip: named or not, one wiring.
    assert sim_pins.parse_spec("a@spidev:0.0:nreset=gpiochip0/25") == [("a", "spidev0.0:nreset=25")]
    for bad in ("a@spidev:0.0:nreset=", "a@spidev:0.0:reset=25", "a@spidev:0.0,b@spidev:0.0:nreset=25"):
        with pytest.raises(ValueError):
            sim_pins.parse_spec(bad)


def test_a_line_is_wired_once(pins_env):
    with pytest.raises(ValueError):
        pins_env("a@spidev:0.0:nreset=5,g@gpio:gpiochip0:swclk=5,swdio=6", a="nrf52840", g="nrf52840")


def test_listing_is_passive_and_names_the_line(pins_env):
    """Listing names the configured probe with its line, and opens neither the device nor the line."""
    backend = pins_env("bay@" + PROBE, bay="nrf52840")
    from piflash.probe.discovery import list_probes

    assert PROBE in [p.unique_id for p in list_probes()]
    (info,) = list_probes(PROBE)
    assert info.description.endswith(", nRESET on gpiochip0 line 25")
    tap, device = backend.resets["spidev0.0"], backend.devices["spidev0.0"]
    assert tap.history == [] and tap.ioctls == 0
    assert device._opens == 0 and device.firmware.probe is None


def test_open_drain_reset_through_the_line(pins_env):
    backend = pins_env("bay@" + PROBE, bay="nrf52840")
    tap = backend.resets["spidev0.0"]
    probe = pinprobe.probe_class().get_probe_with_id(PROBE)
    probe.open()
    try:
        assert tap.history == ["in"]  # requested released: opening resets nothing
        engine = probe.engine
        engine.line_reset()
        engine.cycles(0xE79E, 16)  # JTAG-to-SWD
        engine.line_reset()
        dpidr = engine.read(False, 0x0)
        engine.write(False, 0x4, 0x50000000)  # power-up: the board's probe side is open now
        engine.flush()
        assert dpidr.value == 0x2BA01477
        board = tap.device.firmware.probe
        probe.assert_reset(True)
        assert board.is_reset_asserted() and probe.is_reset_asserted()
        probe.assert_reset(False)
        assert not board.is_reset_asserted() and not probe.is_reset_asserted()
        probe.reset()
        assert not board.is_reset_asserted()
        assert _states(tap.history) == ["in", "low", "in", "low", "in"]
    finally:
        probe.close()
    assert tap.history[-1] == "in" and tap.driven_high == 0
    assert backend.devices["spidev0.0"]._opens == 0


def test_without_a_line_a_hardware_reset_is_refused(pins_env):
    pins_env("bay@spidev:0.0", bay="nrf52840")
    probe = pinprobe.probe_class().get_probe_with_id("spidev:0.0")
    probe.open()
    try:
        probe.assert_reset(False)  # nothing to release: no error
        with pytest.raises(exceptions.ProbeError, match="has no nRESET line"):
            probe.reset()
        with pytest.raises(exceptions.ProbeError, match="has no nRESET line"):
            probe.assert_reset(True)
    finally:
        probe.close()


def test_a_busy_reset_line_fails_the_open_and_leaves_nothing_open(pins_env):
    from periphery import GPIO

    backend = pins_env("bay@" + PROBE, bay="nrf52840")
    other = GPIO(os.path.join(backend.dev_root, "gpiochip0"), 25, "in")
    try:
        probe = pinprobe.probe_class().get_probe_with_id(PROBE)
        with pytest.raises(exceptions.ProbeError, match="cannot request the nRESET line 25"):
            probe.open()
        assert not probe.is_open and backend.devices["spidev0.0"]._opens == 0
    finally:
        other.close()


def test_a_flash_with_a_hardware_reset_resets_through_the_line(pins_env, firmware_dir):
    """The whole flash (piflash's workflow, in this process so the line can be watched) with
    pyOCD's reset type ``hw``: the board is reset by nRESET, low then released, never high."""
    from piflash.firmware.image import load_image
    from piflash.jobs.options import FlashOptions
    from piflash.jobs.workflow import flash_firmware

    backend = pins_env("bay@" + PROBE, bay="nrf52840")
    tap = backend.resets["spidev0.0"]
    image = load_image(firmware_dir / "nrf52840" / "firmware.hex")
    result = flash_firmware(image, PROBE, "nrf52840", FlashOptions(session_options={"reset_type": "hw"}))
    assert result.ok and result.reset
    assert _states(tap.history) == ["in", "low", "in"] and tap.driven_high == 0


def test_cli_resets_through_the_line(pins_env, cli):
    pins_env("bay@" + PROBE, bay="nrf52840")
    sim_pins.uninstall()  # the child process installs its own
    ok = cli("reset", "-t", "nrf52840", "-u", PROBE, "-O", "reset_type=hw", timeout=120)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    refused = cli("reset", "-t", "nrf52840", "-u", "spidev:0.0", "-O", "reset_type=hw", timeout=120)
    assert refused.returncode != 0 and "Traceback" not in refused.stderr
    assert "has no nRESET line" in refused.stdout + refused.stderr
