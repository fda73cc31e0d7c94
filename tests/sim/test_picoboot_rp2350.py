"""A Pico 2 (RP2350) in USB BOOTSEL mode: the simulated boot ROM device below pyusb
(piflash/sim/probes/usb/picoboot_rp2350.py) and piflash flashing through it
(piflash/probe/picoboot.py, piflash/jobs/bootsel.py): the RP2350's descriptors and
serial number (its chip ID), the commands it refuses (EXEC, REBOOT) and the ones it adds
(REBOOT2, GET_INFO), a write beyond its flash device refused NOT_PERMITTED, and pico-examples
blink flashed as UF2 without a probe, then checked through SWD."""

from __future__ import annotations

import errno
import struct

import pytest

pytest.importorskip("unicorn")

from support.uf2kit import RP2040_FAMILY, RP2350_ARM_S_FAMILY, to_uf2  # noqa: E402

from piflash.sim import SimStore  # noqa: E402

BASE = 0x10000000


@pytest.fixture
def pico2(pyocd_binaries, monkeypatch):
    store = SimStore()
    info = store.create("pico2", "rp2350")
    monkeypatch.setenv("PIFLASH_SIM_USB", "pico2@bootsel")
    return store, info, (pyocd_binaries / "rp2350.bin").read_bytes()


@pytest.fixture
def bus(pico2):
    from piflash.sim.probes import usb as sim_usb
    backend = sim_usb.install()
    yield backend
    sim_usb.uninstall()


def _command(token, cmd_id, size, length, args=b""):
    return struct.pack("<IIBBxxI", 0x431FD10B, token, cmd_id, size, length) + args.ljust(16, b"\0")


def _refused(dev, packet):
    """Send ``packet``; the endpoints must stall: the ROM's status code, then the interface reset."""
    import usb.core
    dev.write(0x03, packet)
    with pytest.raises(usb.core.USBError) as err:
        dev.read(0x84, 64, 1000)
    assert err.value.errno == errno.EPIPE
    status = struct.unpack_from("<I", bytes(dev.ctrl_transfer(0xC1, 0x42, 0, 1, 16)), 4)[0]
    dev.ctrl_transfer(0x41, 0x41, 0, 1, None)
    return status


def test_descriptors_serial_refusals_and_get_info(pico2, bus):
    import usb.core
    import usb.util
    store, info, _ = pico2
    dev = usb.core.find(idVendor=0x2E8A, idProduct=0x000F, backend=bus)
    assert dev is not None and dev.bcdUSB == 0x0210
    assert usb.util.get_string(dev, dev.iProduct) == "RP2350 Boot"
    assert usb.util.get_string(dev, dev.iSerialNumber) == info.target_uid.upper()    # the chip's ID
    usb.util.claim_interface(dev, 1)
    try:
        assert _refused(dev, _command(1, 0x08, 4, 0, struct.pack("<I", 0x20000001))) == 1     # EXEC: UNKNOWN_CMD
        assert _refused(dev, _command(2, 0x02, 12, 0)) == 1                                   # REBOOT
        assert _refused(dev, _command(3, 0x0A, 16, 0, struct.pack("<IIII", 0xD, 0, 0, 0))) == 10   # PC_SP
        assert _refused(dev, _command(4, 0x05, 8, 256, struct.pack("<II", 0x11000000, 256))) == 10  # CS1
        assert _refused(dev, _command(5, 0x03, 8, 0, struct.pack("<II", BASE + 0x100, 4096))) == 5
        dev.write(0x03, _command(6, 0x8B, 16, 256, struct.pack("<BBHI", 1, 0, 0, 0x0B)))
        got = bytes(dev.read(0x84, 256, 1000))
        dev.write(0x03, b"")
        count, flags, package, low, high, critical, devinfo = struct.unpack_from("<7I", got)
        assert (count, flags, package, critical, devinfo) == (6, 0x0B, 0, 0, 0x0C00)
        assert (low | high << 32).to_bytes(8, "big").hex() == info.target_uid.lower()
        assert got[28:] == b"\0" * (256 - 28)
    finally:
        usb.util.release_interface(dev, 1)
        usb.util.dispose_resources(dev)


def test_flash_uf2_over_bootsel_then_check_through_swd(cli, pico2, tmp_path, monkeypatch):
    store, info, blink = pico2
    uf2 = tmp_path / "blink.uf2"
    uf2.write_bytes(to_uf2(blink, BASE, RP2350_ARM_S_FAMILY))
    out = cli.json("flash", uf2)                        # the sole BOOTSEL device, no -u
    assert out["ok"] and out["verified"] and out["reset"]
    assert out["probe_id"] == "picoboot:1-2" and out["target"] == "rp2350"
    assert out["target_uid"] == info.target_uid.lower()
    padded = blink + b"\0" * (-len(blink) % 256)
    flash = store.read_flash("pico2")
    assert flash[:len(padded)] == padded and flash[len(padded):] == b"\xff" * (len(flash) - len(padded))
    monkeypatch.delenv("PIFLASH_SIM_USB")
    assert cli.json("verify", uf2, "-u", "sim:pico2", "-t", "rp2350")["ok"]


def test_unchanged_reflash_by_serial_and_another_family_refused(cli, pico2, tmp_path):
    store, info, blink = pico2
    uf2 = tmp_path / "blink.uf2"
    uf2.write_bytes(to_uf2(blink, BASE, RP2350_ARM_S_FAMILY))
    # The whole serial number (the chip's unique ID), in another case; its tail names nothing.
    tail = cli.json("flash", uf2, "-u", f"picoboot:{info.target_uid[-6:]}", "--no-reset", check=7)
    assert f"(ATTACHED: PICOBOOT:1-2, PICOBOOT:{info.target_uid.upper()})" in tail["error"]["message"].upper()
    first = cli.json("flash", uf2, "-u", f"picoboot:{info.target_uid.lower()}", "--no-reset")
    assert first["ok"] and first["program"]["programmed_bytes"] > 0
    second = cli.json("flash", uf2, "-u", f"picoboot:{info.target_uid}", "--no-reset")
    assert second["program"]["programmed_bytes"] == 0 and second["program"]["erased_bytes"] == 0
    other = tmp_path / "pico.uf2"
    other.write_bytes(to_uf2(b"\x55" * 512, BASE, RP2040_FAMILY))
    bad = cli.json("flash", other, check=4)
    assert "0xe48bff56" in bad["error"]["message"]
    assert store.read_flash("pico2")[:len(blink)] == blink             # untouched
