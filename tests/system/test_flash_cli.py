"""`piflash flash` end to end: real firmware, real pyOCD, simulated boards, in-process and remote."""

from __future__ import annotations

import pytest
from conftest import expected_flash, firmware_for

#: (target, flash base, flash size in bytes) of the simulated parts (main flash only).
TARGETS = [("nrf51", 0x0, 256 * 1024), ("nrf52840", 0x0, 1024 * 1024),
           ("stm32f103rc", 0x08000000, 512 * 1024)]


def dump(cli, board, tmp_path):
    out = tmp_path / f"{board}.bin"
    cli("sim", "dump", board, "--out", out, check=0)
    return out.read_bytes()


#: How the probe is reached: the sim plugin, pyOCD's remote probe protocol, or a simulated USB
#: CMSIS-DAP probe (piflash.sim.probes.usb) through pyOCD's own USB driver, v2 bulk or v1 HID.
ROUTES = ["plugin", "remote"]
USB_PRESETS = {"usb-v2": "debugprobe", "usb-v1": "daplink"}
#: Every target through the plugin and the remote probe; the USB driver once per CMSIS-DAP
#: version (v2 bulk with nrf52840, v1 HID with stm32f103rc): flashing through it takes a few
#: times longer in wall time, and tests/sim/test_sim_usb.py covers all targets x both versions
#: in-process.
ROUTE_TARGETS = [(route, *t) for route in ROUTES for t in TARGETS] + [
    ("usb-v2", *TARGETS[1]), ("usb-v1", *TARGETS[2])]


def probe_for(route, board, target, sim_server, monkeypatch):
    """The --probe value for ``board`` reached by ``route`` (sets PIFLASH_SIM_USB for usb-*)."""
    if route == "remote":
        return sim_server(board, target).uid
    if route in USB_PRESETS:
        from piflash.sim.probes.usb import ENV_VAR
        from piflash.sim.probes.usb.device import serial_for
        from piflash.sim.probes.usb.presets import get_preset

        monkeypatch.setenv(ENV_VAR, f"{board}@{USB_PRESETS[route]}")
        return serial_for(get_preset(USB_PRESETS[route]), board, target)
    return f"sim:{board}"


@pytest.mark.parametrize("route, target, base, size", ROUTE_TARGETS)
def test_flash_real_firmware(cli, sim_server, tmp_path, firmware_dir, microbit_hex, monkeypatch,
                             target, base, size, route):
    board = f"{target}-t"
    cli("sim", "create", board, "--target", target, check=0)
    fw = firmware_for(target, firmware_dir, microbit_hex)
    uid = probe_for(route, board, target, sim_server, monkeypatch)

    first = cli.json("flash", fw, "--target", target, "--probe", uid)
    assert first["ok"] and first["verified"] and first["reset"]
    assert first["program"]["programmed_bytes"] >= first["image_bytes"] > 0
    assert first["verify"]["verified_bytes"] >= first["image_bytes"]

    second = cli.json("flash", fw, "--target", target, "--probe", uid)
    assert second["ok"] and second["verified"]
    # Nothing is rewritten, not even the micro:bit image's 28-byte UICR record, which the CRC
    # analyzer cannot address (0x10001000, see piflash/flashing/plan.py): it is read back and compared.
    assert second["program"]["programmed_pages"] == 0, second["program"]
    assert second["program"]["erased_bytes"] == 0, second["program"]
    assert second["program"]["skipped_pages"] > 0


@pytest.mark.parametrize("target, base, size", TARGETS)
def test_flash_is_byte_exact(cli, tmp_path, firmware_dir, microbit_hex, target, base, size):
    board = f"{target}-x"
    fw = firmware_for(target, firmware_dir, microbit_hex)
    cli("flash", fw, "--target", target, "--probe", f"sim:{board}", check=0)
    assert dump(cli, board, tmp_path) == expected_flash(fw, size, base)


def test_bin_and_elf(cli, tmp_path, firmware_dir):
    fw = firmware_dir / "stm32f103rc"
    cli("flash", fw / "firmware.bin", "-t", "stm32f103rc", "-u", "sim:stm32f103rc",
        "--base-address", "0x08000000", check=0)
    want = expected_flash(fw / "firmware.hex", 512 * 1024, 0x08000000)
    assert dump(cli, "stm32f103rc", tmp_path) == want
    cli("erase", "--chip", "--yes", "-t", "stm32f103rc", "-u", "sim:stm32f103rc", check=0)
    assert dump(cli, "stm32f103rc", tmp_path) == b"\xff" * (512 * 1024)
    cli("flash", fw / "firmware.elf", "-t", "stm32f103rc", "-u", "sim:stm32f103rc", check=0)
    assert dump(cli, "stm32f103rc", tmp_path) == want


@pytest.mark.parametrize("route", ["plugin"])
def test_verify_command(cli, firmware_dir, tmp_path, sim_server, monkeypatch, route):
    fw = firmware_dir / "nrf52840" / "firmware.hex"
    from piflash.sim.store import SimStore

    cli("sim", "create", "nrf52840", "--target", "nrf52840", check=0)
    uid = probe_for(route, "nrf52840", "nrf52840", sim_server, monkeypatch)
    cli("flash", fw, "-t", "nrf52840", "-u", uid, check=0)
    before = SimStore().get("nrf52840").stats
    res = cli.json("verify", fw, "-t", "nrf52840", "-u", uid)
    assert res["ok"] and res["verify"]["verified_bytes"] == res["image_bytes"]
    assert SimStore().get("nrf52840").stats == before  # no erase, no program: verify only reads
    other = tmp_path / "other.bin"
    other.write_bytes(b"\x5a" * 4096)  # the firmware starts with the stack pointer, no 0x5a byte
    proc = cli("verify", other, "-a", "0", "-t", "nrf52840", "-u", uid, check=12)
    assert "differ, first at 0x00000000" in proc.stderr


def test_sector_erase(cli, tmp_path, firmware_dir):
    fw = firmware_dir / "nrf52840" / "firmware.hex"
    cli("flash", fw, "-t", "nrf52840", "-u", "sim:nrf52840", check=0)
    cli("erase", "--sector", "0x1000+0x1000", "-t", "nrf52840", "-u", "sim:nrf52840", check=0)
    flash = dump(cli, "nrf52840", tmp_path)
    want = expected_flash(fw, 1024 * 1024)
    assert flash[0x1000:0x2000] == b"\xff" * 0x1000
    assert flash[:0x1000] == want[:0x1000] and flash[0x2000:] == want[0x2000:]
    cli("erase", "--sector", "0x20000000", "-t", "nrf52840", "-u", "sim:nrf52840", check=4)


def test_info_reset_probes(cli):
    cli("sim", "create", "a", "--target", "nrf52840", check=0)
    cli("sim", "create", "b", "--target", "nrf52840", check=0)
    probes = cli.json("probes")["probes"]
    assert {p["probe_id"] for p in probes} >= {"sim:a", "sim:b"}
    a = cli.json("info", "-u", "sim:a", "-t", "nrf52840")
    b = cli.json("info", "-u", "sim:b", "-t", "nrf52840")
    assert a["target_uid"] and b["target_uid"] and a["target_uid"] != b["target_uid"]
    assert any(r["type"] == "flash" and r["start"] == 0 and r["sector_size"] == 4096
               for r in a["regions"])
    cli("reset", "-u", "sim:a", "-t", "nrf52840", check=0)
    cli("reset", "--halt", "-u", "sim:a", "-t", "nrf52840", check=0)


def test_plain_progress_when_not_a_terminal(cli, firmware_dir):
    proc = cli("flash", firmware_dir / "nrf52840" / "firmware.hex", "-t", "nrf52840",
               "-u", "sim:nrf52840", check=0)
    for phase in ("Connecting", "Erasing", "Programming", "Verifying", "Resetting"):
        assert f"{phase} done" in proc.stdout, proc.stdout
    assert "\x1b[" not in proc.stdout  # no terminal escapes in a pipe
    assert "Flashed 12," in proc.stdout
