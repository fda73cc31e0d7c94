"""SWD bit-banged on GPIO lines (issue 43): piflash's ``gpio:CHIP:swclk=N,swdio=N[,nreset=N]`` probe
through python-periphery's unchanged ``GPIO`` class (character device v2) onto a simulated gpiochip
with a board on its lines; the CLI flashes firmware nobody here wrote through it."""

from __future__ import annotations

import os

import pytest

pytest.importorskip("unicorn")
pytest.importorskip("periphery")

from piflash.probe import pinprobe  # noqa: E402
from piflash.sim.probes import pins as sim_pins  # noqa: E402

PROBE = "gpio:gpiochip0:swclk=5,swdio=6,nreset=13"


def test_spec_parsing():
    assert sim_pins.parse_spec("a@%s,b@spidev:0.0" % PROBE) == [("a", PROBE), ("b", "spidev0.0")]
    with pytest.raises(ValueError):
        sim_pins.parse_spec("a@gpio:gpiochip0:swclk=5")


def test_listing_is_passive_and_names_the_lines(pins_env):
    backend = pins_env("g@" + PROBE, g="nrf52840")
    from piflash.probe.discovery import list_probes

    (info,) = list_probes(PROBE)
    assert info.description == "SWD bit-banged on gpiochip0 lines 5 (SWCLK), 6 (SWDIO), 13 (nRESET)"
    wire = backend.devices[PROBE]
    assert wire.ioctls == 0 and wire.cycles == 0 and wire.firmware.probe is None


def test_bit_banged_packets_and_open_drain_reset(pins_env):
    backend = pins_env("g@" + PROBE, g="nrf52840")
    wire = backend.devices[PROBE]
    probe = pinprobe.probe_class("gpio").get_probe_with_id(PROBE)
    probe.open()
    try:
        engine = probe.engine
        engine.line_reset()
        assert engine.read(False, 0x0).value == 0x2BA01477
        engine.write(False, 0x4, 0x50000000)
        engine.write(True, 0x0, 0x23000052)
        engine.write(True, 0x4, 0x20000000)
        engine.write_many(0xC, [0x11, 0x22, 0x33])
        engine.write(True, 0x4, 0x20000000)
        assert [p.value for p in engine.read_many(0xC, 3)] == [0x11, 0x22, 0x33]
        wire.line.inject_wait(2)
        assert engine.read(True, 0x4).value == 0x2000000C  # TAR after three reads
        assert engine.waits == 2
        # The host never drives SWDIO while the target does.
        assert wire.line.contention == 0
        # nRESET: low, then released as an input; never high.
        probe.assert_reset(True)
        assert wire.firmware.probe.is_reset_asserted()
        probe.assert_reset(False)
        assert not wire.firmware.probe.is_reset_asserted()
        assert wire.driven_high == 0
    finally:
        probe.close()


def test_a_requested_line_is_busy(pins_env):
    from periphery import GPIO, GPIOError

    backend = pins_env("g@" + PROBE, g="nrf52840")
    chip = os.path.join(backend.dev_root, "gpiochip0")
    first = GPIO(chip, 5, "low")
    try:
        with pytest.raises(GPIOError):
            GPIO(chip, 5, "low")
    finally:
        first.close()
    GPIO(chip, 5, "in").close()  # released: free again


@pytest.mark.slow  # 19 s: the quick run keeps the bit-level tests above; spidev flashes the same binary quick
def test_cli_flashes_pyocds_rp2040_binary_over_gpio(pins_env, cli, pyocd_binaries):
    pins_env("pico@gpio:gpiochip0:swclk=5,swdio=6", pico="rp2040")
    sim_pins.uninstall()
    binary = pyocd_binaries / "rp2040.bin"
    result = cli("flash", binary, "-t", "rp2040", "-u", "gpio:gpiochip0:swclk=5,swdio=6",
                 "--base-address", "0x10000000", timeout=300)
    assert result.returncode == 0 and "verified" in result.stdout, result.stdout + result.stderr
    check = cli("verify", binary, "-t", "rp2040", "-u", "sim:pico", "--base-address", "0x10000000")
    assert check.returncode == 0, check.stdout + check.stderr


@pytest.mark.slow
def test_cli_flashes_debians_micropython_over_gpio(pins_env, cli, microbit_hex):
    pins_env("mb@" + PROBE, mb="nrf51")
    sim_pins.uninstall()
    result = cli("flash", microbit_hex, "-t", "nrf51", "-u", PROBE, timeout=900)
    assert result.returncode == 0 and "verified" in result.stdout, result.stdout + result.stderr
    check = cli("verify", microbit_hex, "-t", "nrf51", "-u", "sim:mb")
    assert check.returncode == 0, check.stdout + check.stderr
