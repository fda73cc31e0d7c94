"""SWD over spidev (issue 43): piflash's ``spidev:B.C`` probe through python-periphery's unchanged
``SPI`` class onto a simulated spidev (piflash.sim.probes.pins), a board behind it; the CLI
flashes firmware nobody here wrote through it, and pyOCD's own tests pass through it."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("unicorn")
pytest.importorskip("periphery")

from pyocd.core import exceptions  # noqa: E402

from piflash.probe import pinprobe  # noqa: E402
from piflash.probe.spiswd import REVERSE, SpiSwd  # noqa: E402
from piflash.sim.probes import pins as sim_pins  # noqa: E402

MICROBIT_HEX = Path("/usr/share/firmware-microbit-micropython/firmware.hex")


def test_spec_parsing():
    assert sim_pins.parse_spec("bay1@spidev:0.0, bay2@SPIDEV:1.0") == [("bay1", "spidev0.0"), ("bay2", "spidev1.0")]
    for bad in ("bay1", "bay1@spidev:0", "@spidev:0.0", "a@spidev:0.0,b@spidev:0.0"):
        with pytest.raises(ValueError):
            sim_pins.parse_spec(bad)


def test_listing_is_passive(pins_env):
    """Listing opens no device and clocks nothing: a HAT or a reset line may be on those pins."""
    backend = pins_env("bay1@spidev:0.0,bay2@spidev:1.0", bay1="nrf52840", bay2="rp2040")
    from piflash.probe.discovery import list_probes

    ids = [p.unique_id for p in list_probes()]
    assert "spidev:0.0" in ids and "spidev:1.0" in ids
    assert list_probes("spidev:1.0")[0].description.startswith("SWD over SPI1 CE0")
    for device in backend.devices.values():
        assert device.messages == 0 and device._opens == 0 and device.firmware.probe is None


def test_a_device_this_user_may_not_open_is_not_listed(pins_env):
    backend = pins_env("bay1@spidev:0.0", bay1="nrf52840")
    if os.geteuid() == 0:
        pytest.skip("root may open any file")
    os.chmod(os.path.join(backend.dev_root, "spidev0.0"), 0o400)
    assert pinprobe.probe_class().get_all_connected_probes() == []


def test_the_pis_spi_block_takes_no_lsb_first(pins_env):
    """spi-bcm2835 has no SPI_LSB_FIRST among its mode bits: periphery's bit_order="lsb" fails
    with EINVAL, which is why piflash reverses the bits itself."""
    from periphery import SPI, SPIError

    backend = pins_env("bay1@spidev:0.0", bay1="nrf52840")
    with pytest.raises(SPIError) as info:
        SPI(os.path.join(backend.dev_root, "spidev0.0"), 0, 1_000_000, bit_order="lsb")
    assert info.value.errno == errno.EINVAL
    spi = SPI(os.path.join(backend.dev_root, "spidev0.0"), 0, 8_000_000)
    try:
        assert spi.max_speed == 8_000_000 and spi.bit_order == "msb"
        with pytest.raises(SPIError) as info:
            spi.transfer(bytes(4097))
        assert info.value.errno == errno.EMSGSIZE
    finally:
        spi.close()


def _open(pins_env, target="nrf52840"):
    backend = pins_env("bay1@spidev:0.0", bay1=target)
    probe = pinprobe.probe_class().get_probe_with_id("spidev:0.0")
    probe.open()
    return backend.devices["spidev0.0"], probe


def _connect(engine: SpiSwd):
    engine.line_reset()
    engine.cycles(0xE79E, 16)
    engine.line_reset()
    dpidr = engine.read(False, 0x0)
    engine.write(False, 0x0, 0x1E)  # ABORT: clear the sticky flags
    engine.write(False, 0x4, 0x50000000)  # power-up (the engine adds ORUNDETECT)
    engine.flush()
    return dpidr.value


def test_many_swd_packets_go_in_one_spi_message(pins_env):
    device, probe = _open(pins_env)
    try:
        engine = probe.engine
        assert _connect(engine) == 0x2BA01477
        # The JTAG-to-SWD sequence reads as a malformed packet to a DP already in SWD: one
        # protocol error, cleared by the line reset after it, as on the wire.
        assert device.line.protocol_errors == 1
        before = device.messages
        engine.write(True, 0x0, 0x23000052)  # CSW: word, auto-increment
        engine.write(True, 0x4, 0x20000000)  # TAR
        for i in range(256):
            engine.write(True, 0xC, i * 0x01010101)
        engine.write(True, 0x4, 0x20000000)
        reads = [engine.read(True, 0xC) for _ in range(256)]
        engine.flush()
        assert [r.value for r in reads] == [i * 0x01010101 & 0xFFFFFFFF for i in range(256)]
        # 515 packets + RDBUFF: 46 cycles each, 712 to a 4096-byte message.
        assert device.messages - before == 1
        assert device.line.contention == 0 and device.line.protocol_errors == 1
    finally:
        probe.close()


def test_wait_replays_from_the_first_bad_ack(pins_env):
    device, probe = _open(pins_env)
    try:
        engine = probe.engine
        _connect(engine)
        engine.write(True, 0x0, 0x23000052)
        engine.write(True, 0x4, 0x20000100)
        engine.flush()
        device.line.inject_wait(3)
        for i in range(8):
            engine.write(True, 0xC, 0xA0 + i)
        engine.write(True, 0x4, 0x20000100)
        reads = [engine.read(True, 0xC) for _ in range(8)]
        engine.flush()
        assert [r.value for r in reads] == [0xA0 + i for i in range(8)]
        assert engine.waits == 3
    finally:
        probe.close()


def test_fault_and_no_ack(pins_env):
    device, probe = _open(pins_env)
    try:
        engine = probe.engine
        _connect(engine)
        engine.write(True, 0x0, 0x23000052)
        engine.write(True, 0x4, 0xF0000000)  # nothing there: an AHB error
        engine.read(True, 0xC)
        with pytest.raises(exceptions.TransferFaultError):
            engine.flush()
        engine.write(False, 0x0, 0x1E)
        engine.flush()
        engine.cycles(0xFF, 8)  # 0b11111111: a request with a bad parity: the DP locks out
        with pytest.raises(exceptions.TransferError) as info:
            engine.read(False, 0x0)
            engine.flush()
        assert "no ACK" in str(info.value)
    finally:
        probe.close()


def test_bytes_are_reversed_in_software():
    assert REVERSE[0x01] == 0x80 and REVERSE[0xA5] == 0xA5 and REVERSE[0x0F] == 0xF0
    assert bytes(range(256)).translate(REVERSE).translate(REVERSE) == bytes(range(256))


def _flash(cli, *args):
    result = cli("flash", *args, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "verified" in result.stdout
    return result


def test_cli_flashes_the_nrf52840_test_firmware(pins_env, cli, firmware_dir):
    pins_env("bay1@spidev:0.0,bay2@spidev:1.0", bay1="nrf52840", bay2="rp2040")
    sim_pins.uninstall()  # the child process installs its own
    rows = cli.json("probes")["probes"]
    assert {"spidev:0.0", "spidev:1.0"} <= {r["probe_id"] for r in rows}
    image = firmware_dir / "nrf52840" / "firmware.hex"
    result = _flash(cli, image, "-t", "nrf52840", "-u", "spidev:0.0", "--json")
    assert '"probe_id": "spidev:0.0"' in result.stdout
    # Read back by another way in: the board itself, not through the pins.
    check = cli("verify", image, "-t", "nrf52840", "-u", "sim:bay1")
    assert check.returncode == 0, check.stdout + check.stderr


def test_cli_flashes_pyocds_rp2040_binary_through_targetsel(pins_env, cli, pyocd_binaries):
    """The RP2040 is multi-drop: the connect goes through the dormant wake-up and TARGETSEL."""
    pins_env("pico@spidev:1.0", pico="rp2040")
    sim_pins.uninstall()
    binary = pyocd_binaries / "rp2040.bin"
    _flash(cli, binary, "-t", "rp2040", "-u", "spidev:1.0", "--base-address", "0x10000000")
    check = cli("verify", binary, "-t", "rp2040", "-u", "sim:pico", "--base-address", "0x10000000")
    assert check.returncode == 0, check.stdout + check.stderr


@pytest.mark.slow
def test_cli_flashes_debians_micropython_for_the_microbit(pins_env, cli, microbit_hex):
    pins_env("mb@spidev:0.0", mb="nrf51")
    sim_pins.uninstall()
    _flash(cli, microbit_hex, "-t", "nrf51", "-u", "spidev:0.0")
    check = cli("verify", microbit_hex, "-t", "nrf51", "-u", "sim:mb")
    assert check.returncode == 0, check.stdout + check.stderr


def test_a_pin_probe_without_a_board_is_no_ack(pins_env, cli, firmware_dir):
    pins_env("nosuch@spidev:0.0")
    sim_pins.uninstall()
    result = cli("flash", firmware_dir / "nrf52840" / "firmware.hex", "-t", "nrf52840", "-u", "spidev:0.0",
                 timeout=120)
    assert result.returncode != 0 and "Traceback" not in result.stderr, result.stdout + result.stderr


_RUNNER = textwrap.dedent("""
    import sys
    sys.path.insert(0, sys.argv[1])
    from piflash.probe import pinprobe
    pinprobe.register_with_pyocd()
    which, probe_id, binary = sys.argv[2], sys.argv[3], sys.argv[4]
    if which == "basic":
        from basic_test import basic_test
        basic_test(probe_id, binary)
    else:
        from flash_test import flash_test
        print("RESULT passed=%s" % flash_test(probe_id).passed)
""")


def _pyocd_test(which, target, binary, pins_env, tmp_path, timeout=900):
    pins_env("t@spidev:0.0", t=target)
    sim_pins.uninstall()
    tests = binary.parent.parent / "test"
    env = dict(os.environ, PYOCD_TEST_BINARY=str(binary))
    # Wires name no target (a sim: board does): the user says which, in pyOCD's own config file.
    (tmp_path / "pyocd.yaml").write_text("probes:\n  spidev:0.0:\n    target_override: %s\n" % target)
    proc = subprocess.run([sys.executable, "-c", _RUNNER, str(tests), which, "spidev:0.0", str(binary)],
                          capture_output=True, text=True, timeout=timeout, env=env, cwd=tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    return out


@pytest.mark.slow
def test_pyocds_basic_test_through_spidev_on_the_nrf52840(pins_env, pyocd_binaries, tmp_path):
    out = _pyocd_test("basic", "nrf52840", pyocd_binaries / "l1_nrf52840-dk.bin", pins_env, tmp_path)
    assert "TEST FAILED" not in out and out.count("TEST PASSED") == 2, out[-4000:]


@pytest.mark.slow
def test_pyocds_flash_test_through_spidev_on_the_nrf52840(pins_env, pyocd_binaries, tmp_path):
    out = _pyocd_test("flash", "nrf52840", pyocd_binaries / "l1_nrf52840-dk.bin", pins_env, tmp_path)
    assert "RESULT passed=True" in out and "FLASH TEST SCRIPT PASSED" in out, out[-4000:]


@pytest.mark.slow
def test_pyocds_basic_test_through_spidev_on_the_rp2040(pins_env, pyocd_binaries, tmp_path):
    """As through the sim: probe (tests/sim/test_pyocd_functional.py): everything passes but the
    read-back of the erased sectors while pyOCD's RP2 algorithm has XIP off, which a Pico fails
    too."""
    out = _pyocd_test("basic", "rp2040", pyocd_binaries / "rp2040.bin", pins_env, tmp_path)
    assert out.count("TEST PASSED") == 1, out[-4000:]
    failed = [line.strip() for line in out.splitlines() if line.startswith("FAILED to erase")]
    assert failed == ["FAILED to erase sector @ 0x%x (4096 bytes)" % a for a in (0x10FFD000, 0x10FFE000, 0x10FFF000)]


def test_the_pins_are_never_the_only_probe_unnamed(pins_env, cli, firmware_dir, monkeypatch):
    """An enabled SPI bus may carry a HAT: without --probe, piflash does not count spidev:0.0 among
    the probes to choose from. Here the board's own sim: probe is the only one left (not "2 probes
    found"); with the pins alone, it says to name them (exit 7)."""
    backend = pins_env("bay1@spidev:0.0", bay1="nrf52840")
    from piflash.errors import NoProbeError
    from piflash.probe import discovery

    pins_only = [pinprobe.probe_class().get_probe_with_id("spidev:0.0")]
    original = discovery._find_probes
    monkeypatch.setattr(discovery, "_find_probes", lambda selector, listed=None: list(pins_only))
    with pytest.raises(NoProbeError) as info:
        discovery.select_probe(None)
    assert "only when named: spidev:0.0" in str(info.value) and "--probe spidev:0.0" in info.value.hint
    assert backend.devices["spidev0.0"].messages == 0
    monkeypatch.setattr(discovery, "_find_probes", original)
    sim_pins.uninstall()
    result = cli("flash", firmware_dir / "nrf52840" / "firmware.hex", "-t", "nrf52840", timeout=120)
    assert result.returncode == 0 and "on sim:bay1" in result.stdout, result.stdout + result.stderr


def test_pyocd_list_sees_the_pins_through_its_entry_point(pins_env):
    """The stock ``pyocd list`` finds the spidev and gpio probes through piflash's ``pyocd.probe``
    entry points (pyproject.toml), nothing of piflash imported by hand."""
    pins_env("bay1@spidev:0.0,bay2@gpio:gpiochip0:swclk=5,swdio=6", bay1="nrf52840", bay2="rp2040")
    sim_pins.uninstall()
    proc = subprocess.run([sys.executable, "-m", "pyocd", "list"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "spidev:0.0" in proc.stdout and "gpio:gpiochip0:swclk=5,swdio=6" in proc.stdout, proc.stdout
