"""The simulated RP2350 (Pico 2): the ADIv6 debug port (DPv3, a root ROM table, an AHB5-AP in the
debug address space), the Cortex-M33 in Secure state, the RCP, the version-2 boot ROM and its
IMAGE_DEF boot, the QMI and the flash, ACCESSCTRL and OTP's chip ID; and pyOCD's own rp2350
target and flash algorithm flashing a Pico 2 build nobody here wrote (pyOCD's
test/data/binaries/rp2350.bin, pico-examples "blink") through the ``sim:`` probe and the
simulated Debug Probe below pyusb."""

from __future__ import annotations

import struct

import pytest

pytest.importorskip("unicorn")

from pyocd.core.exceptions import TransferError, TransferFaultError  # noqa: E402
from pyocd.core.helpers import ConnectHelper  # noqa: E402
from pyocd.core.target import Target  # noqa: E402
from pyocd.flash.file_programmer import FileProgrammer  # noqa: E402
from support.swdwire import sender  # noqa: E402

from piflash.sim import SimStore  # noqa: E402
from piflash.sim.board import SimBoard  # noqa: E402
from piflash.sim.chips import rp2350 as chip  # noqa: E402
from piflash.sim.chips.rp2_bootrom import table_code  # noqa: E402
from piflash.sim.chips.rp2350_bootrom import find_image_def  # noqa: E402
from piflash.sim.cpu import StopReason  # noqa: E402
from piflash.sim.faults import Faults  # noqa: E402
from piflash.sim.memory.bus import BusError  # noqa: E402
from piflash.sim.probes import usb as sim_usb  # noqa: E402
from piflash.sim.specs import get_target  # noqa: E402

SPEC = get_target("rp2350")
UID = bytes.fromhex("d48ff4e70c412683")
SELECT, CTRL_STAT, RDBUFF = 0x8, 0x4, 0xC


def board(image: bytes = b"") -> SimBoard:
    flash = image + b"\xff" * (SPEC.flash.size - len(image))
    return SimBoard(SPEC, UID, {"flash": flash}, Faults())


def wake(wire):
    """pyOCD's dormant-to-SWD wake-up and line reset (pyocd/probe/swj.py), no TARGETSEL."""
    swj = sender(wire)
    swj.dormant_to_swd()
    swj.line_reset()
    swj.idle_cycles(2)


def powered(wire):
    wake(wire)
    wire.write_dp(SELECT, 0)
    wire.write_dp(CTRL_STAT, 0x50000F00)
    return wire


def ap_read(wire, address):
    wire.write_dp(SELECT, address & 0xFFFFFFF0)
    return wire.read_ap(address & 0xC)


def test_dormant_dp_wakes_without_targetsel_and_points_at_its_root_table():
    wire = board().dp
    with pytest.raises(TransferError):          # dormant at power-up (datasheet 3.5.1)
        wire.read_dp(0x0)
    sender(wire, use_dormant=False).switch_to_swd()   # line reset, JTAG-to-SWD
    with pytest.raises(TransferError):          # the JTAG-to-SWD sequence does not wake it
        wire.read_dp(0x0)
    wake(wire)
    assert wire.read_dp(0x0) == 0x4C013477      # DPv3, no TARGETSEL needed for the sole DP
    wire.write_dp(SELECT, 1)
    assert wire.read_dp(0x0) == 0x20            # DPIDR1: 32-bit debug address space
    wire.write_dp(SELECT, 2)
    assert wire.read_dp(0x0) == 0x1             # BASEPTR0: the root at 0, VALID
    wire.write_dp(SELECT, 0)
    with pytest.raises(TransferFaultError):     # debug power not requested yet
        wire.read_ap(0x0)


def test_root_table_lists_core0s_ap_which_reaches_the_bus():
    wire = powered(board().dp)
    assert [ap_read(wire, 4 * i) for i in range(3)] == [0x2003, 0x4002, 0]   # core 1: not present
    assert ap_read(wire, 0xFBC) == 0x47700AF7 and ap_read(wire, 0xFF4) == 0x90     # class 0x9 table
    assert ap_read(wire, 0x2DFC) == 0x14770005 and ap_read(wire, 0x2FBC) == 0x47700A17
    csw = ap_read(wire, 0x2D00)
    assert csw & (1 << 23) and csw & (1 << 6)   # SDeviceEn, DeviceEn
    assert ap_read(wire, 0x2DF8) == 0xE00FF003  # the M33's ROM table
    wire.write_dp(SELECT, 0x2D00)
    wire.write_ap(0x0, 0x03000012)              # word accesses
    wire.write_ap(0x4, 0x40000000)              # SYSINFO CHIP_ID
    assert wire.read_ap(0xC) == chip.CHIP_ID
    wire.write_ap(0x4, 0x00000010)              # the boot ROM's magic and version bytes
    assert struct.pack("<I", wire.read_ap(0xC)) == b"Mu\x02\x02"


def test_boot_rom_table_lookup_as_pico_sdk_calls_it():
    b = board()
    rom = b.chip

    def lookup(code, mask, entry=False):
        b.cpu.write_reg(0, table_code(code))
        b.cpu.write_reg(1, mask)
        rom._lookup2(entry=entry)
        return b.cpu.read_reg(0)

    for code in ("IF", "EX", "RE", "RP", "FC", "CX", "RA", "XM", "SR"):
        ptr = lookup(code, 0x4)
        assert ptr & 1 and rom.stub_range[0] <= ptr - 1 <= rom.stub_range[1], code
    assert lookup("RE", 0x10) == 0              # no Non-secure variant
    assert lookup("ZZ", 0x4) == 0
    slot = lookup("RP", 0x4, entry=True)
    assert struct.unpack_from("<H", rom.image, slot)[0] == lookup("RP", 0x4)
    header = struct.unpack_from("<HHH", rom.image, 0x14)
    assert header[0] == 0x100 and header[1] & 1 and header[2] & 1


def _run_code(b, halfwords):
    code = struct.pack("<%dH" % len(halfwords), *halfwords)
    b.bus.write_block(0x20000000, code + b"\x00" * (-len(code) % 4))
    b.cpu.flush_translation_cache()
    b.cpu.write_reg(15, 0x20000000)
    b.cpu.write_reg(13, 0x20001000)
    return b.cpu.run(1000, 5.0)


def test_rcp_salt_and_canary_status_need_cp7_and_fault_when_written_twice():
    b = board()
    b.chip.parts.rcp.reset()                    # as after a reset the ROM did not run
    mrc_status = [0xEE30, 0xF710]               # mrc p7, #1, APSR_nzcv, c0, c0, #0
    mcrr_salt0 = [0xEC40, 0x0780]               # mcrr p7, #8, r0, r0, c0
    bkpt = [0xBE00]
    assert _run_code(b, mrc_status + bkpt) is StopReason.FAULT        # CP7 off in CPACR: NOCP
    b.bus.write(0xE000ED88, 4, 0xC000)          # CPACR.CP7 full access
    assert _run_code(b, mrc_status + bkpt) is StopReason.BKPT
    assert b.cpu.read_reg(16) >> 28 == 0        # salt not valid: N and C clear
    b.cpu.write_reg(0, 0x12345678)
    assert _run_code(b, mcrr_salt0 + mrc_status + bkpt) is StopReason.BKPT
    assert b.cpu.read_reg(16) >> 28 == 0b1010   # valid: N and C set
    assert b.chip.parts.rcp.salt[0] == 0x12345678_12345678
    assert _run_code(b, mcrr_salt0 + bkpt) is StopReason.FAULT
    assert "written twice" in b.cpu.fault


def test_accessctrl_wants_its_password_and_otp_holds_the_chip_id():
    b = board()
    with pytest.raises(BusError):
        b.bus.write(chip.ACCESSCTRL_BASE + 0x08, 4, 1)
    b.bus.write(chip.ACCESSCTRL_BASE + 0x08, 4, 0xACCE0001)
    assert b.chip.parts.accessctrl.cfgresets == 1
    assert b.bus.read(chip.ACCESSCTRL_BASE, 4) == 0x4
    raw = b.bus.read_block(chip.OTP_DATA_BASE, 8)
    assert raw[::-1] == UID                     # CHIPID3..0, as pico_get_unique_board_id has it


def test_qmi_direct_mode_reads_the_jedec_id_and_blocks_xip_meanwhile():
    b = board(b"\x11\x22\x33\x44")
    qmi = chip.QMI_BASE
    assert b.bus.read(0x10000000, 4) == 0x44332211      # serial 03h reads work from reset
    b.bus.write(qmi, 4, (12 << 22) | 1 | (1 << 2))      # EN, ASSERT_CS0N
    assert b.bus.read(0x10000000, 4) == 0xA5A5A5A5      # no XIP while in direct mode
    for byte in (0x9F, 0, 0, 0):
        b.bus.write(qmi + 0x04, 4, byte)
    got = [b.bus.read(qmi + 0x08, 4) for _ in range(4)]
    b.bus.write(qmi, 4, 12 << 22)
    assert got[1:] == [0xEF, 0x40, 0x16]
    assert b.bus.read(0x10400000, 4) == 0x44332211      # the 4 MiB repeat through the window


def test_flash_past_its_size_is_the_flash_for_the_rom_the_debugger_and_the_core():
    """The Pico 2's 4 MiB flash ignores the address bits above its size: a program at flash
    offset 0x400100 through the ROM's functions lands at 0x100, an erase at 0xFFD000 erases
    0x3FD000, and every copy of the 4 MiB through the XIP windows reads the same cells, for the
    debugger and for the core (LDR R0, [R1]; BKPT from SRAM)."""
    b = board()
    rom = b.chip
    rom.exit_xip()
    rom.program(0x400100, bytes(range(256)))
    rom.program(0x3FD000, b"\x00" * 256)
    rom.erase_range(0xFFD000, 0x1000, 0x10000, 0xD8)
    rom.enter_cmd_xip()
    flash = b.nvm["flash"].data
    assert flash[0x100:0x200] == bytes(range(256)) and flash[0x3FD000:0x3FE000] == b"\xff" * 0x1000
    b.bus.write_block(0x20000000, struct.pack("<HH", 0x6808, 0xBE00))
    for window in chip.XIP_WINDOWS:
        for copy in (0, 0x400000, 0xC00000):
            assert b.bus.read_block(window + copy + 0x100, 4) == bytes(range(4))
            b.cpu.write_reg(1, window + copy + 0x104)
            b.cpu.write_reg(15, 0x20000000)
            b.cpu.flush_translation_cache()
            assert b.cpu.run(100, 1.0) is StopReason.BKPT and b.cpu.read_reg(0) == 0x07060504


def test_qmi_reads_in_the_formats_the_flash_answers_and_bursts_sequential_lines():
    """M0_RFMT/M0_RCMD (pico-sdk qmi.h) against the W25Q32's read instructions: 3Bh dual output
    reads the flash, a format it does not answer and a quad read without QE do not; sequential
    line fills within the cooldown cost only their data clocks (qmi.h M0_TIMING.COOLDOWN)."""
    b = board(bytes(range(256)) * 16)
    qmi = chip.QMI_BASE
    cycles = []
    b.nvm["flash"].observer = lambda op, n: cycles.append(n) if op == "spi_cycles" else None

    def fill_cycles(timing, rfmt, rcmd):
        b.bus.write(qmi + 0x0C, 4, timing)
        b.bus.write(qmi + 0x10, 4, rfmt)
        b.bus.write(qmi + 0x14, 4, rcmd)
        b.bus.write(chip.XIP_MAINTENANCE, 4, 0)              # a flush: the next read misses
        cycles.clear()
        data = b.bus.read_block(0x10000000, 64)
        return data, sum(cycles)

    serial = (1 << 12, 0x03)
    dual = ((1 << 12) | (2 << 16) | (1 << 8), 0x3B)
    data, cost = fill_cycles(4, *serial)                      # COOLDOWN 0: 8 fills of 96 SCK
    assert data == bytes(range(64)) and cost == 8 * 96 * 4
    data, cost = fill_cycles((1 << 30) | 4, *serial)          # then each next line 64 SCK
    assert data == bytes(range(64)) and cost == (96 + 7 * 64) * 4
    data, cost = fill_cycles((3 << 30) | 2, *dual)            # 3Bh: 8 + 24 + 8 dummy, 32 data
    assert data == bytes(range(64)) and cost == (72 + 7 * 32) * 2
    data, _ = fill_cycles((1 << 30) | 2, (1 << 12) | (2 << 16), 0x3B)     # data on one line
    assert data == b"\xa5" * 64
    quad = ((1 << 12) | (2 << 16) | (2 << 8), 0x6B)
    data, _ = fill_cycles((1 << 30) | 2, *quad)
    assert data == bytes(range(64))                          # the Pico 2's flash has QE set
    b.chip.parts.flash.sr2 &= ~0x02
    data, _ = fill_cycles((1 << 30) | 2, *quad)
    assert data == b"\xa5" * 64                              # IO2/IO3 are /WP and /HOLD


def test_image_def_boots_blink_and_a_plain_image_parks(pyocd_binaries):
    blink = (pyocd_binaries / "rp2350.bin").read_bytes()
    assert find_image_def(blink) == 0x1021      # EXE, Secure, Arm, RP2350
    b = board(blink)
    assert b.cpu.run(200_000, 5.0) is StopReason.BUDGET
    assert b.cpu.pc >= 0x10000000 and b.bus.read(0xE000ED08, 4) == 0x10000000   # VTOR
    plain = board(struct.pack("<II", 0x20082000, 0x10000101) + b"\x00" * 0x200)
    assert plain.cpu.run(200_000, 5.0) is StopReason.SLEEP and plain.cpu.pc < 0x8000


def test_dscsr_changes_security_state_only_without_its_key():
    b = board()
    scs = 0xE000EE08
    assert b.bus.read(scs, 4) & (1 << 16)
    b.bus.write(scs, 4, 1 << 17)                # CDSKEY set: CDS unchanged
    assert b.bus.read(scs, 4) & (1 << 16)
    b.bus.write(scs, 4, 0)                      # key clear, CDS 0: Non-secure
    assert not b.bus.read(scs, 4) & (1 << 16)


@pytest.mark.parametrize("probe", ["sim", "usb"])
def test_pyocd_flashes_pico2_blink_byte_exact(probe, pyocd_binaries, monkeypatch):
    blink = pyocd_binaries / "rp2350.bin"
    store = SimStore()
    store.create("pico2", "rp2350")
    device = None
    if probe == "usb":                          # the Debug Probe (CMSIS-DAP v2) below pyusb
        monkeypatch.setenv(sim_usb.ENV_VAR, "pico2@debugprobe")
        device = sim_usb.install("pico2@debugprobe", store).devices[0]
        unique_id = device.serial
    else:
        unique_id = "sim:pico2"
    try:
        with ConnectHelper.session_with_chosen_probe(unique_id=unique_id, blocking=False,
                                                     target_override="rp2350") as session:
            target = session.target
            assert target.get_security_state() == Target.SecurityState.SECURE
            assert "Cortex-M33" in target.cores[0].name
            target.reset_and_halt()             # the ROM has not run: the algorithm sets the salt
            FileProgrammer(session, progress=lambda _p: None).program(str(blink), base_address=0x10000000)
            assert target.read_memory_block8(0x10000000, 16) == list(blink.read_bytes()[:16])
            target.reset()
    finally:
        if device is not None:
            sim_usb.uninstall()
    if device is not None:
        assert device.clock.requests["DAP_SWJ_Sequence"] >= 4     # the dormant wake-up among them
    data = blink.read_bytes()
    flash = store.read_flash("pico2")
    assert flash[:len(data)] == data and flash[len(data):] == b"\xff" * (len(flash) - len(data))
