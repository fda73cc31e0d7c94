"""A Pico in USB BOOTSEL mode, no probe: the simulated boot ROM device below pyusb
(piflash/sim/probes/usb/picoboot.py) and ``piflash flash`` over PICOBOOT
(piflash/probe/picoboot.py, piflash/jobs/bootsel.py).

Firmware: pico-examples blink (pyOCD's test/data/binaries/rp2040.bin, not ours), as .bin and as
UF2. What BOOTSEL writes is checked through SWD (``-u sim:pico``) and in the board's flash."""

from __future__ import annotations

import errno
import struct

import pytest

pytest.importorskip("unicorn")

from support.uf2kit import RP2040_FAMILY, RP2350_ARM_S_FAMILY, to_uf2  # noqa: E402

from piflash.sim import SimStore  # noqa: E402

BASE = 0x10000000


@pytest.fixture
def pico(pyocd_binaries, monkeypatch):
    store = SimStore()
    info = store.create("pico", "rp2040")
    monkeypatch.setenv("PIFLASH_SIM_USB", "pico@bootsel")
    return store, info, (pyocd_binaries / "rp2040.bin").read_bytes()


@pytest.fixture
def bus(pico):
    """The simulated USB bus in this process (uninstalled afterwards)."""
    from piflash.sim.probes import usb as sim_usb
    backend = sim_usb.install()
    yield backend
    sim_usb.uninstall()


def _command(dev, token, cmd_id, size, length, args=b""):
    return struct.pack("<IIBBxxI", 0x431FD10B, token, cmd_id, size, length) + args.ljust(16, b"\0")


def test_descriptors_are_the_boot_roms(bus):
    import usb.core
    import usb.util
    dev = usb.core.find(idVendor=0x2E8A, idProduct=0x0003, backend=bus)
    assert dev is not None and dev.bcdUSB == 0x0110
    assert usb.util.get_string(dev, dev.iProduct) == "RP2 Boot"
    assert usb.util.get_string(dev, dev.iManufacturer) == "Raspberry Pi"
    serial = usb.util.get_string(dev, dev.iSerialNumber)
    assert len(serial) == 12 and serial == serial.upper()
    cfg = dev.get_active_configuration()
    msc, pb = list(cfg)
    assert (msc.bInterfaceClass, msc.bInterfaceSubClass, msc.bInterfaceProtocol) == (0x08, 0x06, 0x50)
    assert pb.bInterfaceClass == 0xFF and [e.bEndpointAddress for e in pb] == [0x03, 0x84]
    assert all(e.wMaxPacketSize == 64 for e in pb)


def test_refused_commands_stall_and_say_why_then_reset(bus):
    """A misaligned erase: both endpoints stall, GET_COMMAND_STATUS names BAD_ALIGNMENT with the
    command's token, INTERFACE_RESET and CLEAR_FEATURE bring the interface back."""
    import usb.core
    dev = usb.core.find(idVendor=0x2E8A, backend=bus)
    usb.util.claim_interface(dev, 1)
    try:
        dev.write(0x03, _command(dev, 7, 0x03, 8, 0, struct.pack("<II", BASE + 0x100, 4096)))
        with pytest.raises(usb.core.USBError) as err:
            dev.read(0x84, 64, 1000)
        assert err.value.errno == errno.EPIPE
        token, status, cmd, busy = struct.unpack_from("<IIBB", bytes(dev.ctrl_transfer(0xC1, 0x42, 0, 1, 16)))
        assert (token, status, cmd, busy) == (7, 5, 0x03, 0)            # BAD_ALIGNMENT
        dev.ctrl_transfer(0x41, 0x41, 0, 1, None)
        dev.clear_halt(0x84)
        dev.clear_halt(0x03)
        # A wrong bCmdSize is INVALID_CMD_LENGTH; a write into the ROM is INVALID_ADDRESS.
        for cmd, want in ((_command(dev, 8, 0x06, 4, 0), 2),
                          (_command(dev, 9, 0x05, 8, 16, struct.pack("<II", 0x100, 16)), 4)):
            dev.write(0x03, cmd)
            with pytest.raises(usb.core.USBError):
                dev.read(0x84, 64, 1000)
            assert struct.unpack_from("<I", bytes(dev.ctrl_transfer(0xC1, 0x42, 0, 1, 16)), 4)[0] == want
            dev.ctrl_transfer(0x41, 0x41, 0, 1, None)
        # A good command after the reset: EXIT_XIP, acknowledged by an empty IN packet.
        dev.write(0x03, _command(dev, 10, 0x06, 0, 0))
        assert len(dev.read(0x84, 64, 1000)) == 0
    finally:
        usb.util.release_interface(dev, 1)
        usb.util.dispose_resources(dev)


def test_the_flash_unique_id_is_read_by_the_core_through_exec(pico, bus):
    from piflash.probe import picoboot
    store, info, _ = pico
    device = picoboot.select_device("picoboot")
    with picoboot.PicobootConnection(device) as conn:
        conn.exclusive()
        conn.exit_xip()
        conn.load_helper()
        assert conn.flash_unique_id().hex() == info.target_uid.lower()
        # The helper's page CRCs are zlib's, of what the flash holds.
        blank = __import__("binascii").crc32(b"\xff" * 256)
        assert conn.page_crcs(BASE, 3) == [blank] * 3


def test_flash_uf2_over_bootsel_then_check_through_swd(cli, pico, tmp_path, monkeypatch):
    store, info, blink = pico
    uf2 = tmp_path / "blink.uf2"
    uf2.write_bytes(to_uf2(blink, BASE, RP2040_FAMILY))
    out = cli.json("flash", uf2)                         # the sole BOOTSEL device, no -u
    assert out["ok"] and out["verified"] and out["reset"]
    assert out["probe_id"] == "picoboot:1-2" and out["target"] == "rp2040"
    assert out["target_uid"] == info.target_uid.lower()
    assert out["program"]["programmed_bytes"] == 8704 and out["program"]["erased_bytes"] == 0
    assert out["verify"]["crc_pages"] == 34 and out["verify"]["readback_bytes"] == 0   # by the chip's CRC
    flash = store.read_flash("pico")                    # UF2 blocks carry 256 bytes: the last is padded
    assert flash[:len(blink)] == blink and flash[8704:] == b"\xff" * (len(flash) - 8704)
    # The same board through SWD: the bytes BOOTSEL wrote verify there.
    monkeypatch.delenv("PIFLASH_SIM_USB")
    assert cli.json("verify", uf2, "-u", "sim:pico", "-t", "rp2040")["ok"]
    # Again over BOOTSEL: nothing erased or written, the history has both, by the flash's unique ID.
    monkeypatch.setenv("PIFLASH_SIM_USB", "pico@bootsel")
    again = cli.json("flash", uf2, "-u", "picoboot:1-2")
    assert again["program"]["programmed_bytes"] == 0 and again["program"]["skipped_bytes"] == 8704  # as over SWD
    rows = cli.json("history")["operations"]
    uid = info.target_uid.lower()
    assert [(r["operation"], r["probe_id"], r["target_uid"], r["outcome"]) for r in rows] == [
        ("flash", "picoboot:1-2", uid, "pass"), ("verify", "sim:pico", uid, "pass"),
        ("flash", "picoboot:1-2", uid, "pass")]


def test_a_partly_covered_sector_loses_nothing(cli, pico, tmp_path):
    """Other data in the sectors the image touches survives the erase the image needs."""
    store, info, blink = pico
    store.write_flash("pico", b"\x11" * 8192)             # old data in sectors 0 and 1
    small = tmp_path / "small.bin"
    small.write_bytes(b"\x22" * 300)
    out = cli.json("flash", small, "--base-address", hex(BASE + 4096 + 100), "-u", "picoboot")
    assert out["ok"] and out["program"]["erased_bytes"] == 4096
    flash = store.read_flash("pico")
    assert flash[:4096] == b"\x11" * 4096                # a sector the image does not touch
    assert flash[4096:4196] == b"\x11" * 100 and flash[4196:4496] == b"\x22" * 300
    assert flash[4496:8192] == b"\x11" * (8192 - 4496)


def test_another_chips_uf2_is_refused_before_the_board_is_touched(cli, pico, tmp_path):
    store, info, blink = pico
    uf2 = tmp_path / "pico2.uf2"
    uf2.write_bytes(to_uf2(blink, BASE, RP2350_ARM_S_FAMILY))
    proc = cli("flash", uf2, "-u", "picoboot", check=4)
    assert "0xe48bff59" in proc.stderr.lower() and "rp2040" in proc.stderr
    assert store.read_flash("pico") == b"\xff" * len(store.read_flash("pico"))
    assert cli.json("history")["operations"] == []


def test_the_device_leaving_mid_write_is_exit_13_and_recorded(cli, pico, tmp_path):
    store, info, blink = pico
    store.set_faults("pico", disconnect_after=30)
    bin_ = tmp_path / "blink.bin"
    bin_.write_bytes(blink * 8)
    proc = cli("flash", bin_, "--base-address", hex(BASE), "-u", "picoboot", check=13)
    assert "left the USB bus" in proc.stderr and "BOOTSEL" in proc.stderr
    rows = cli.json("history")["operations"]
    assert len(rows) == 1 and rows[0]["outcome"] == "fail" and rows[0]["target_uid"] == info.target_uid.lower()


def _pulled_mid_flash(cli, store, info, tmp_path, image: bytes, run):
    """Flash ``image`` over ``-u picoboot`` while ``run`` (given the running ``piflash flash``)
    takes the board away; what piflash must say: exit 13 (PROBE_LOST, docs/exit-codes.md), the
    device named as gone from the USB bus, what to do with the board, no traceback, the history
    row completed as a failure of that board. Returns (stderr, the history row)."""
    bin_ = tmp_path / "big.bin"
    bin_.write_bytes(image)
    proc = run(["flash", bin_, "--base-address", hex(BASE), "-u", "picoboot", "--json"])
    assert proc.returncode == 13, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout
    assert "left the USB bus" in proc.stderr and "BOOTSEL" in proc.stderr
    # What the board holds now: partly written once an erase or a flash write was sent.
    assert ("the flash may be partly written" in proc.stderr) != ("its flash was not changed" in proc.stderr)
    result = __import__("json").loads(proc.stdout)
    assert result["ok"] is False and result["error"]["exit_code"] == 13
    rows = cli.json("history")["operations"]
    assert len(rows) == 1
    row = rows[0]
    assert row["operation"] == "flash" and row["outcome"] == "fail" and row["probe_id"] == "picoboot:1-2"
    assert row["target_uid"] == info.target_uid.lower() and row["exit_code"] == 13
    return proc.stderr, row


def test_a_bootsel_board_pulled_mid_flash_is_exit_13_and_recorded(cli, pico, tmp_path):
    """The fault a probe's board has (``piflash sim fault --remove-after N``) on a Pico in
    BOOTSEL mode: the board is pulled after N bulk transfers, mid-write; its USB device goes with
    it. What was written before stays on the board, which is off its port afterwards."""
    store, info, blink = pico
    store.set_faults("pico", remove_after=40)
    image = bytes(range(256)) * 1024                       # 256 KiB: a few hundred transfers
    err, _ = _pulled_mid_flash(cli, store, info, tmp_path, image, lambda args: cli(*args))
    assert "during WRITE: the flash may be partly written" in err
    now = store.get("pico")
    assert not now.seated and now.faults.remove_after is None          # pulled; the fault spent
    flash = store.read_flash("pico")
    assert flash[:len(image)] != image                     # cut off before the end
    assert cli("probes", "--json").returncode == 0
    assert cli.json("probes")["probes"] == []              # gone from the bus, not back


def test_sim_unplug_during_a_bootsel_flash_is_exit_13_and_recorded(cli, pico, tmp_path):
    """``piflash sim unplug`` from another shell while ``piflash flash -u picoboot`` writes: the
    device leaves the bus within 0.05 s of the board store changing (as a probe does)."""
    import os
    import subprocess
    import sys
    import time

    store, info, blink = pico
    image = bytes(range(256)) * 4096                       # 1 MiB: seconds of writing

    def run(args):
        proc = subprocess.Popen([sys.executable, "-m", "piflash", *map(str, args)], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=os.environ.copy())
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            if store.read_flash("pico") != blank:          # the first block written: piflash writes
                break
            time.sleep(0.02)
        cli("sim", "unplug", "pico", check=0)
        out, err = proc.communicate(timeout=120)
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)

    blank = store.read_flash("pico")
    assert blank == b"\xff" * len(blank)
    err, _ = _pulled_mid_flash(cli, store, info, tmp_path, image, run)
    assert store.get("pico").present is False
    assert "the flash may be partly written" in err


def test_a_board_held_by_another_program_is_exit_24(cli, pico):
    """Two hosts asking for the same board: the second is told it is in use (the kernel refuses
    a second claim of the PICOBOOT interface)."""
    store, info, blink = pico
    with store.session_lock("pico"):
        proc = cli("flash", "--base-address", hex(BASE), _write(blink), "-u", "picoboot", check=24)
    assert "in use by another program" in proc.stderr


def _write(data: bytes):
    import tempfile
    f = tempfile.NamedTemporaryFile(suffix=".bin", delete=False)
    f.write(data)
    f.close()
    return f.name


def test_no_bootsel_device_is_exit_7_with_the_button_hint(cli, pico, monkeypatch, tmp_path):
    monkeypatch.setenv("PIFLASH_SIM_USB", "other@debugprobe")
    (tmp_path / "a.bin").write_bytes(b"\0" * 16)
    proc = cli("flash", tmp_path / "a.bin", "--base-address", hex(BASE), "-u", "picoboot", check=7)
    assert "hold BOOTSEL" in proc.stderr


def test_probes_lists_the_bootsel_device(cli, pico):
    rows = cli.json("probes")["probes"]
    assert [(r["probe_id"], r["target"], r["vid_pid"]) for r in rows] == [("picoboot:1-2", "rp2040", "2e8a:0003")]
    assert "BOOTSEL" in cli("probes", check=0).stdout


def test_serial_and_patch_bytes_over_bootsel(cli, pico, tmp_path):
    """A profile numbers the board and writes a label with the flash's unique ID (read by the
    helper on the chip) next to blink, as over SWD; the history row carries the serial."""
    store, info, blink = pico
    fw = tmp_path / "blink.uf2"
    fw.write_bytes(to_uf2(blink, BASE))
    profiles = tmp_path / "profiles"
    profiles.mkdir(exist_ok=True)
    (profiles / "pico-line.yaml").write_text(
        f"target: rp2040\nfirmware: {fw}\n"
        "serial:\n  address: 0x1001F000\n  encoding: u32\n  start: 500\n"
        "patch:\n  - name: label\n    address: 0x1001F010\n    encoding: ascii\n    length: 32\n"
        "    template: \"PICO-{n}-{target_uid}\"\n")
    out = cli.json("flash", "-p", "pico-line", "-u", "picoboot", "--serial", "507")
    uid = info.target_uid.lower()
    assert out["ok"] and out["serial"] == "507" and out["probe_id"] == "picoboot:1-2"
    assert out["patch"]["label"]["value"] == f"PICO-507-{uid}"
    flash = store.read_flash("pico")
    assert flash[0x1F000:0x1F004] == (507).to_bytes(4, "little")
    assert flash[0x1F010:0x1F030] == f"PICO-507-{uid}".encode().ljust(32, b"\0")
    assert flash[:len(blink)] == blink
    rows = cli.json("history")["operations"]
    assert [(r["serial"], r["outcome"]) for r in rows] == [("507", "pass")]
    # The number is taken: giving it again is refused before the board is touched (exit 25).
    cli("flash", "-p", "pico-line", "-u", "picoboot", "--serial", "507", check=25)


def test_what_bootsel_does_not_do_is_a_usage_error(cli, pico, tmp_path):
    (tmp_path / "a.bin").write_bytes(b"\0" * 16)
    proc = cli("flash", tmp_path / "a.bin", "--base-address", hex(BASE), "-u", "picoboot", "--erase", "chip", check=2)
    assert "BOOTSEL" in proc.stderr and "chip erase" in proc.stderr


def test_a_running_pico_is_rebooted_into_bootsel_through_its_reset_interface(cli, pico, monkeypatch, tmp_path):
    """pico-sdk firmware with USB stdio offers the reset interface: -u picoboot sends its BOOTSEL
    request (as picotool -f does), waits for the boot ROM at the same port and flashes it."""
    store, info, blink = pico
    monkeypatch.setenv("PIFLASH_SIM_USB", "pico@app")
    rows = cli.json("probes")["probes"]
    assert [(r["probe_id"], r["vid_pid"]) for r in rows] == [("picoboot:1-2", "2e8a:000a")]
    assert "reboots it into BOOTSEL" in rows[0]["description"]
    fw = tmp_path / "blink.uf2"
    fw.write_bytes(to_uf2(blink, BASE, RP2040_FAMILY))
    out = cli.json("flash", fw, "-u", "picoboot")
    assert out["ok"] and out["probe_id"] == "picoboot:1-2" and out["target_uid"] == info.target_uid.lower()
    assert store.read_flash("pico")[:len(blink)] == blink


def test_a_running_pico_without_the_reset_interface_needs_the_button(cli, pico, monkeypatch, tmp_path):
    monkeypatch.setenv("PIFLASH_SIM_USB", "pico@app-noreset")
    assert "hold BOOTSEL" in cli.json("probes")["probes"][0]["description"]
    (tmp_path / "a.bin").write_bytes(b"\0" * 16)
    proc = cli("flash", tmp_path / "a.bin", "--base-address", hex(BASE), "-u", "picoboot", check=7)
    assert "without the USB reset interface" in proc.stderr and "hold BOOTSEL" in proc.stderr


def test_a_device_that_stops_answering_is_exit_23_and_recorded(cli, pico, tmp_path):
    """A flash whose BUSY never clears: the boot ROM polls it for ever and answers nothing more;
    piflash gives up after the command's bound and says what to do."""
    store, info, blink = pico
    store.set_faults("pico", stuck_busy=True)
    store.write_flash("pico", b"\x00" * 4096)             # something to erase first
    (tmp_path / "a.bin").write_bytes(b"\x5a" * 4096)
    proc = cli("flash", tmp_path / "a.bin", "--base-address", hex(BASE), "-u", "picoboot", check=23)
    assert "did not answer" in proc.stderr and "BOOTSEL" in proc.stderr
    rows = cli.json("history")["operations"]
    assert len(rows) == 1 and rows[0]["outcome"] == "fail" and rows[0]["target_uid"] == info.target_uid.lower()


def test_a_bootsel_device_this_user_may_not_open_is_exit_9(cli, pico, monkeypatch, tmp_path):
    monkeypatch.setenv("PIFLASH_SIM_USB", "pico@bootsel!noaccess")
    row, = cli.json("probes")["probes"]
    assert row["probe_id"] == "picoboot:1-2" and row["accessible"] is False
    (tmp_path / "a.bin").write_bytes(b"\0" * 16)
    proc = cli("flash", tmp_path / "a.bin", "--base-address", hex(BASE), "-u", "picoboot", check=9)
    assert "setup permissions" in proc.stderr


def test_verify_and_reset_over_bootsel_and_what_needs_a_probe(cli, pico, tmp_path):
    store, info, blink = pico
    uf2 = tmp_path / "blink.uf2"
    uf2.write_bytes(to_uf2(blink, BASE, RP2040_FAMILY))
    assert cli.json("flash", uf2, "-u", "picoboot", "--no-reset")["ok"]
    out = cli.json("verify", uf2, "-u", "picoboot")
    assert out["ok"] and out["verify"]["crc_pages"] == 34 and out["probe_id"] == "picoboot:1-2"
    flash = bytearray(store.read_flash("pico"))
    flash[0x1000] ^= 0x40                                  # one bit flipped in the fifth sector
    store.write_flash("pico", bytes(flash))
    bad = cli("verify", uf2, "-u", "picoboot", "--json", check=12)
    assert "0x10001000" in bad.stdout
    assert cli.json("reset", "-u", "picoboot")["reset"]
    for argv in (("protect", "status", "-t", "rp2040"), ("rtt",)):
        proc = cli(*argv, "-u", "picoboot", check=2)
        assert "needs a debug probe" in proc.stderr, argv


def test_a_block_past_the_flash_is_refused_not_written_at_its_start(cli, pico, tmp_path):
    """Issue 38: a block at 0x10201000 (the Pico's flash is 2 MiB, and ignores the address bits
    above) was written at 0x1000 and read back from there as verified. The helper reads the
    flash's JEDEC ID; the block is exit 4, naming it and the size, and nothing is written."""
    store, info, blink = pico
    first = tmp_path / "first.uf2"
    first.write_bytes(to_uf2(blink, BASE, RP2040_FAMILY))
    cli.json("flash", first, "-u", "picoboot", "--no-reset")
    before = store.read_flash("pico")
    past = tmp_path / "past.uf2"
    past.write_bytes(to_uf2(b"\x5a" * 256, 0x10201000, RP2040_FAMILY))
    for command in ("flash", "verify"):
        out = cli.json(command, past, "-u", "picoboot", "--no-reset", check=4)
        message = out["error"]["message"]
        assert "image data at 0x10201000-0x102010ff (256 bytes) is outside the flash of rp2040" in message
        assert "2 MiB as the flash's JEDEC ID EF 40 15 says" in message
        assert out["program"]["erased_bytes"] == out["program"]["programmed_bytes"] == 0
    assert store.read_flash("pico") == before
    # Inside the flash, the same block is written where it says.
    inside = tmp_path / "inside.uf2"
    inside.write_bytes(to_uf2(b"\x5a" * 256, 0x101FF000, RP2040_FAMILY))
    cli.json("flash", inside, "-u", "picoboot", "--no-reset")
    assert store.read_flash("pico")[0x1FF000:0x1FF100] == b"\x5a" * 256
    assert store.read_flash("pico")[:0x1000] == before[:0x1000]


@pytest.mark.parametrize("target", ["rp2350", "nrf52840"])
def test_another_target_for_a_bootsel_pico_is_exit_10_naming_the_chip(cli, pico, tmp_path, target):
    """Issue 38: -t rp2350 (or -t nrf52840) on an RP2040 in BOOTSEL mode was exit 1, a TypeError
    in WrongTargetError.__init__()."""
    store, info, blink = pico
    uf2 = tmp_path / "blink.uf2"
    uf2.write_bytes(to_uf2(blink, BASE, RP2040_FAMILY))
    out = cli.json("flash", uf2, "-u", "picoboot", "-t", target, check=10)
    assert (out["error"]["kind"], out["error"]["exit_code"]) == ("WrongTargetError", 10)
    assert f"picoboot:1-2 is an RP2040 in BOOTSEL mode, not {target}" in out["error"]["message"]
    assert "--target rp2040" in out["error"]["hint"]
    assert store.read_flash("pico") == b"\xff" * len(store.read_flash("pico"))


def test_a_bootsel_pico_and_a_debug_probe_name_both_and_the_picoboot_hint(cli, pico, tmp_path):
    """Issue 41: with a Pico in BOOTSEL mode and another probe attached, a flash that names no
    probe went to the other probe (or was exit 8 naming only it). It is exit 8 naming both, and
    says how to choose the Pico (-u picoboot); info and erase the same."""
    store, info, blink = pico
    store.create("mb", "nrf52840")
    uf2 = tmp_path / "blink.uf2"
    uf2.write_bytes(to_uf2(blink, BASE, RP2040_FAMILY))
    for argv in (("flash", uf2), ("info",), ("erase", "--sector", hex(BASE))):
        proc = cli(*argv, check=8)
        assert "sim:mb" in proc.stderr and "picoboot:1-2 (an RP2040 in BOOTSEL mode)" in proc.stderr, argv
        assert "-u picoboot" in proc.stderr, argv
    out = cli.json("flash", uf2, check=8)
    assert out["error"]["exit_code"] == 8


def _schema_check(out):
    """``out`` (a --json object) against docs/result.schema.json."""
    import json
    from pathlib import Path

    import fastjsonschema
    schema = json.loads((Path(__file__).parents[2] / "docs" / "result.schema.json").read_text())
    fastjsonschema.compile(schema)(out)
    return out


def test_info_over_bootsel_shows_what_the_boot_rom_reports(cli, pico):
    """Issue 41: ``info -u picoboot`` was refused. It shows the chip, the flash's unique ID (4Bh,
    lower-case hex) and the flash its JEDEC ID gives (2 MiB on a Pico)."""
    store, info, blink = pico
    text = cli("info", "-u", "picoboot").stdout
    assert "Target:     rp2040" in text and f"Target UID: {info.target_uid.lower()}" in text
    assert "Probe:      picoboot:1-2\n" in text and "(RP2040 in BOOTSEL mode" in text
    assert ["flash", "xip", "0x10000000-0x101fffff", "2,097,152", "4,096", "256"] in [ln.split() for ln in
                                                                                   text.splitlines()], text
    out = _schema_check(cli.json("info", "-u", "picoboot"))
    assert out["target_uid"] == info.target_uid.lower() and out["probe_id"] == "picoboot:1-2"
    assert out["regions"] == [{"name": "xip", "type": "flash", "start": BASE, "end": BASE + 0x1FFFFF,
                               "size": 0x200000, "sector_size": 4096, "page_size": 256}]


def test_erase_over_bootsel_sectors_and_the_chip_with_history(cli, pico):
    """Issue 41: ``erase -u picoboot`` was refused. --sector erases the 4 KiB sectors covering the
    range and nothing else; --chip (only with --yes off a terminal) the whole 2 MiB flash, with
    progress; each is a history row with the board's unique ID."""
    store, info, blink = pico
    store.write_flash("pico", b"\x5a" * 0x4000 + b"\xff" * 0x1000 + b"\x3c" * 0x1000)
    out = _schema_check(cli.json("erase", "--sector", hex(BASE + 0x1800) + "+0x1000", "-u", "picoboot"))
    assert out["ok"] and out["program"]["erase_mode"] == "sector" and out["program"]["erased_bytes"] == 0x2000
    flash = store.read_flash("pico")
    assert flash[:0x1000] == b"\x5a" * 0x1000 and flash[0x1000:0x3000] == b"\xff" * 0x2000
    assert flash[0x3000:0x4000] == b"\x5a" * 0x1000 and flash[0x5000:0x6000] == b"\x3c" * 0x1000
    bad = cli.json("erase", "--sector", "0x10200000+16", "-u", "picoboot", check=4)   # past the 2 MiB flash
    assert "0x10200000" in bad["error"]["message"]
    assert cli("erase", "--chip", "-u", "picoboot", check=2).returncode == 2          # no --yes off a terminal
    proc = cli("erase", "--chip", "--yes", "-u", "picoboot")
    assert "Erasing... 2,097,152 bytes" in proc.stdout and "Erased 2,097,152 bytes on rp2040" in proc.stdout
    assert set(store.read_flash("pico")) == {0xFF}
    rows = cli.json("history")["operations"]
    uid = info.target_uid.lower()
    assert [(r["operation"], r["outcome"], r["target_uid"]) for r in rows] == [
        ("erase", "pass", uid), ("erase", "fail", uid), ("erase", "pass", uid)]   # newest first
