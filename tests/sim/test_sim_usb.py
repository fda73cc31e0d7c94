"""Simulated USB CMSIS-DAP probes (piflash.sim.probes.usb): pyOCD's own USB discovery and CMSIS-DAP v1/v2
drivers flash simulated boards through a pyusb backend; the virtual clock is deterministic;
WAIT/FAULT acks, EACCES and unplugging behave as on hardware."""

from __future__ import annotations

import errno
import os

import pytest

pytest.importorskip("unicorn")

import usb.core  # noqa: E402
from pyocd.core.helpers import ConnectHelper  # noqa: E402
from pyocd.flash.file_programmer import FileProgrammer  # noqa: E402
from pyocd.probe.cmsis_dap_probe import CMSISDAPProbe  # noqa: E402
from pyocd.probe.pydapaccess.dap_access_cmsis_dap import DAPAccessCMSISDAP  # noqa: E402

from piflash.probe import probetable  # noqa: E402
from piflash.sim import SimStore
from piflash.sim.probes import usb as sim_usb  # noqa: E402
from piflash.sim.probes.usb.presets import PRESETS  # noqa: E402
from piflash.sim.probes.usb.timing import TARGET_TIMING  # noqa: E402
from piflash.sim.specs import TARGETS  # noqa: E402

IMAGE = 16 * 1024


@pytest.fixture
def usb_sim(monkeypatch):
    """``usb_sim(board, target, preset)`` creates the board and plugs a simulated probe in."""
    store = SimStore()

    def plug(board, target, preset="debugprobe", noaccess=False):
        store.create(board, target, exist_ok=True)
        spec = "%s@%s%s" % (board, preset, "!noaccess" if noaccess else "")
        monkeypatch.setenv(sim_usb.ENV_VAR, spec)
        return sim_usb.install(spec, store).devices[0]

    yield plug
    sim_usb.uninstall()


def flash_with_pyocd(device, target, data, tmp_path):
    path = tmp_path / "image.bin"
    path.write_bytes(data)
    session = ConnectHelper.session_with_chosen_probe(unique_id=device.serial, blocking=False,
                                                      target_override=target)
    assert session is not None, "pyOCD did not find the simulated USB probe"
    with session:
        probe = session.probe
        FileProgrammer(session).program(str(path), base_address=TARGETS[target].flash.start)
    return probe


@pytest.mark.parametrize("requested, runs", [
    (1_000_000, 125e6 / 128), (4_000_000, 125e6 / 36), (10_000_000, 125e6 / 16),
    (25_000_000, 125e6 / 8), (31_250_000, 125e6 / 4), (50_000_000, 125e6 / 4),
    (500, 125e6 / (4 * 65535))])
def test_the_debug_probe_runs_the_swclk_its_pio_divider_gives(requested, runs):
    """debugprobe v2.3.1 divides its 125 MHz clk_sys by 4 x an integer (src/probe.c): a request
    of 25 MHz runs 15.6 MHz, anything from 31.25 MHz runs 31.25 MHz; the SWD bits of a transfer
    take that clock's time. A probe whose firmware is not modelled runs the request up to its
    maximum."""
    store = SimStore()
    store.create("clk", "nrf52840", exist_ok=True)
    device = sim_usb.install("clk@debugprobe", store).devices[0]
    try:
        device.claim()
        device.write_out(bytes([0x11]) + requested.to_bytes(4, "little"))   # DAP_SWJ_Clock
        assert device.read_in(64, 1000)[:2] == bytes([0x11, 0x00])
        assert device.firmware.swd_hz == pytest.approx(runs)
    finally:
        sim_usb.uninstall()
    assert PRESETS["mculink"].swclk_hz(requested) == min(requested, PRESETS["mculink"].max_swd_hz)


def test_presets_are_in_the_probe_table():
    for preset in PRESETS.values():
        model = probetable.lookup(preset.vid, preset.pid)
        assert model is not None, preset.name


@pytest.mark.parametrize("target,preset", [("nrf51", "daplink"), ("nrf51", "debugprobe"),
                                           ("nrf52840", "daplink"), ("nrf52840", "debugprobe"),
                                           ("stm32f103rc", "daplink"), ("stm32f103rc", "mculink")])
def test_pyocd_cmsis_dap_driver_carries_the_flash(usb_sim, tmp_path, target, preset):
    device = usb_sim("b1", target, preset)
    data = os.urandom(IMAGE)
    probe = flash_with_pyocd(device, target, data, tmp_path)
    # pyOCD's own classes carried it: the CMSIS-DAP probe and its DAP access layer over USB.
    assert type(probe) is CMSISDAPProbe
    assert type(probe._link) is DAPAccessCMSISDAP
    assert probe._link._interface.is_bulk == (PRESETS[preset].cmsis_dap_version == 2)
    assert probe.unique_id == device.serial
    flash = SimStore().read_flash("b1")
    assert flash[:IMAGE] == data
    counts = device.clock.requests
    assert counts["DAP_TransferBlock"] > 0 and counts["usb_out"] == counts["usb_in"]
    assert device.clock.now > 0


def test_both_discovery_paths_reach_the_simulated_bus(usb_sim):
    device = usb_sim("b1", "nrf52840")
    found = usb.core.find(idVendor=0x2E8A, idProduct=0x000C)
    assert found is not None and found.serial_number == device.serial
    libusb_package = pytest.importorskip("libusb_package")
    found = libusb_package.find(idVendor=0x2E8A, idProduct=0x000C)
    assert found is not None and found.product == "Debug Probe (CMSIS-DAP)"


def test_sim_plugin_does_not_list_boards_behind_usb(usb_sim):
    device = usb_sim("b1", "nrf52840")
    ids = [p.unique_id for p in ConnectHelper.get_all_connected_probes(blocking=False)]
    assert ids == [device.serial]


def test_virtual_time_is_deterministic(usb_sim, tmp_path):
    data = bytes(range(256)) * (IMAGE // 256)
    figures = []
    for board in ("d1", "d2"):
        sim_usb.uninstall()
        device = usb_sim(board, "nrf52840", "daplink")
        flash_with_pyocd(device, "nrf52840", data, tmp_path)
        snap = device.clock.snapshot()
        figures.append((snap["now_s"], snap["requests"]))
    assert figures[0] == figures[1]
    # HID: at most one report per 1 ms frame and direction, so time >= USB IN transfers x 1 ms.
    assert figures[0][0] >= figures[0][1]["usb_in"] * 1e-3 * 0.99


def test_erase_is_charged_at_datasheet_time(usb_sim, tmp_path):
    device = usb_sim("b1", "nrf52840", "mculink")
    flash_with_pyocd(device, "nrf52840", os.urandom(IMAGE), tmp_path)
    pages = device.clock.requests["erase_page"]
    assert pages == IMAGE // 4096
    # Predictions use the typical page erase (the maximum is for timeouts only).
    erase = TARGET_TIMING["nrf52840"].erase_page_s
    assert device.clock.busy["flash_erase"] == pytest.approx(pages * erase)
    # The host cannot finish before the flash has erased and written every page.
    assert device.clock.now > pages * erase + IMAGE / 4 * TARGET_TIMING["nrf52840"].program_s
    assert device.clock.requests["core_polls_running"] > 0


def _dap(device, packet, t=0.0):
    response, t = device.firmware.execute(bytes(packet), t)
    return response, t


def test_busy_flash_answers_wait(usb_sim):
    """Debugger-driven page erase of the nRF52840 NVMC, then a read of that page: WAIT while
    the erase runs (the typical page erase in virtual time), OK once wait_retry covers it."""
    device = usb_sim("b1", "nrf52840")
    device.claim()
    try:
        def transfer(t, *items):
            body = bytearray([0x05, 0, len(items)])
            for req, value in items:
                body.append(req)
                if value is not None:
                    body += value.to_bytes(4, "little")
            return _dap(device, body, t)

        _, t = _dap(device, [0x02, 1])
        _, t = _dap(device, [0x04, 0, 0, 0, 0, 0], t)      # wait_retry = 0
        _, t = transfer(t, (0x04, 0x50000000), (0x08, 0x00000000),       # CTRL/STAT, SELECT
                        (0x01, 0x23000052), (0x05, 0x4001E504), (0x0D, 2),  # CSW, TAR, CONFIG=EEN
                        (0x05, 0x4001E508), (0x0D, 0x0))                   # ERASEPAGE = 0
        resp, t2 = transfer(t, (0x05, 0x0), (0x0F, None))                 # TAR = 0, read DRW
        assert resp[1:3] == bytes([1, 2])                                  # 1 done, ack WAIT
        _, t = _dap(device, [0x04, 0, 0xFF, 0xFF, 0, 0], t2)                # wait_retry = 65535
        resp, t3 = transfer(t, (0x05, 0x0), (0x0F, None))
        assert resp[1:3] == bytes([2, 1]) and resp[3:7] == b"\xff" * 4
        erase = TARGET_TIMING["nrf52840"].erase_page_s
        assert t3 - t2 > erase * 0.9 and device.clock.requests["swd_wait"] > 0
        resp, _ = transfer(t3, (0x05, 0xF0000000), (0x0F, None))         # unmapped: FAULT
        assert resp[2] == 4
    finally:
        device.release()


def test_access_denied_device_is_present_but_not_opened(usb_sim):
    usb_sim("b1", "nrf52840", "daplink", noaccess=True)
    dev = usb.core.find(idVendor=0x0D28, idProduct=0x0204)
    assert dev is not None
    with pytest.raises(usb.core.USBError) as info:
        dev.get_active_configuration()
    assert info.value.errno == errno.EACCES
    assert ConnectHelper.get_all_connected_probes(blocking=False) == []


def test_unplugged_mid_flash_is_probe_lost(usb_sim, tmp_path, cli):
    usb_sim("b1", "nrf52840")
    SimStore().set_faults("b1", disconnect_after=800)
    image = tmp_path / "image.bin"
    image.write_bytes(os.urandom(IMAGE))
    result = cli("flash", str(image), "-t", "nrf52840", "--base-address", "0")
    assert result.returncode == 13, result.stdout + result.stderr
    assert "disconnected" in result.stderr


def test_probe_that_cannot_be_opened_fails_at_once(monkeypatch, cli, firmware_dir):
    """A listed probe whose open fails (here: no board behind the simulated USB probe, so claiming
    its interface fails as a busy or vanished device does): exit 13 within seconds. piflash used
    to ask the unopened probe for DPIDR, which pyOCD's CMSIS-DAP driver never finishes."""
    monkeypatch.setenv(sim_usb.ENV_VAR, "nosuch@daplink")
    rows = cli.json("probes")["probes"]
    assert len(rows) == 1 and rows[0]["vid_pid"] == "0d28:0204"
    result = cli("flash", firmware_dir / "nrf52840" / "firmware.hex", "-t", "nrf52840", timeout=60)
    assert result.returncode == 13, result.stdout + result.stderr
    assert f"cannot open probe {rows[0]['probe_id']}" in result.stderr
    assert "Traceback" not in result.stderr


def test_cli_lists_the_usb_probe_with_its_usb_identity(usb_sim, cli):
    device = usb_sim("b1", "nrf52840", "debugprobe")
    rows = cli.json("probes")["probes"]
    assert rows == [{"probe_id": device.serial, "description": "Raspberry Pi Debug Probe (CMSIS-DAP)",
                     "target": None, "vid_pid": "2e8a:000c", "accessible": True, "node": None,
                     "reason": None, "fix": None}]


def test_cli_permission_path_end_to_end(usb_sim, cli, firmware_dir):
    device = usb_sim("b1", "nrf52840", "daplink", noaccess=True)
    rows = cli.json("probes")["probes"]
    assert [(r["probe_id"], r["accessible"], r["vid_pid"]) for r in rows] == [(device.serial, False, "0d28:0204")]
    assert "Access denied" in rows[0]["reason"]
    doctor = cli("doctor")
    assert doctor.returncode != 0 and "probe 0d28:0204" in doctor.stdout and "FAIL" in doctor.stdout
    result = cli("flash", firmware_dir / "nrf52840" / "firmware.hex", "-t", "nrf52840")
    assert result.returncode == 9, result.stdout + result.stderr
    assert "may not be opened" in result.stderr


def test_stock_pyocd_command_flashes_through_the_usb_probe(usb_sim, firmware_dir):
    import subprocess
    import sys

    from conftest import expected_flash

    device = usb_sim("b1", "stm32f103rc", "debugprobe")
    fw = firmware_dir / "stm32f103rc" / "firmware.hex"
    listed = subprocess.run([sys.executable, "-m", "pyocd", "list"], capture_output=True, text=True,
                            timeout=120, env=os.environ.copy())
    assert device.serial in listed.stdout and "Debug Probe (CMSIS-DAP)" in listed.stdout
    proc = subprocess.run([sys.executable, "-m", "pyocd", "flash", "-t", "stm32f103rc", "-u", device.serial,
                           str(fw)], capture_output=True, text=True, timeout=300, env=os.environ.copy())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert SimStore().read_flash("b1") == expected_flash(fw, 512 * 1024, 0x08000000)


def test_a_routine_longer_than_the_resume_budget_is_polled_to_its_end(usb_sim):
    """A routine on the core that outlasts one resume's instruction budget runs on in slices at
    each DHCSR poll; a poll must not see it halted and the next one running again (pyOCD then
    fails reading R0: "core not halted"). Here: piflash's CRC over 2 MiB of the nRF52840's flash,
    about 12 million instructions (the budget is 10 million)."""
    import binascii

    from piflash.flashing.flashcheck import FlashCheck

    device = usb_sim("long-routine", "nrf52840")
    session = ConnectHelper.session_with_chosen_probe(unique_id=device.serial, blocking=False,
                                                      target_override="nrf52840")
    with session:
        flash = session.target.memory_map.get_boot_memory().flash
        flash.init(flash.Operation.VERIFY)
        crcs = FlashCheck.for_flash(flash).crc32([(0, 1024 * 1024)] * 2)
    assert crcs == [binascii.crc32(b"\xff" * 1024 * 1024)] * 2
    assert device.clock.requests["core_polls_running"] > 0
