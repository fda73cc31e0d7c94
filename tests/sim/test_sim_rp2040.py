"""The simulated RP2040: multi-drop SWD, the boot ROM, the W25Q16JV behind XIP, and pyOCD's own
rp2040 target and flash algorithm flashing a Pico build nobody here wrote (pyOCD's
test/data/binaries/rp2040.bin, pico-examples "blink"), through the ``sim:`` probe and the
simulated Debug Probe below pyusb."""

from __future__ import annotations

import struct

import pytest

pytest.importorskip("unicorn")

from pyocd.core.exceptions import TransferError  # noqa: E402
from pyocd.core.helpers import ConnectHelper  # noqa: E402
from pyocd.flash.file_programmer import FileProgrammer  # noqa: E402
from pyocd.utility import mask  # noqa: E402
from support.swdwire import sender  # noqa: E402

from piflash.sim import SimStore  # noqa: E402
from piflash.sim.board import SimBoard  # noqa: E402
from piflash.sim.chips.rp2_bootrom import BOOT2_SRAM, crc32_boot2  # noqa: E402
from piflash.sim.faults import Faults  # noqa: E402
from piflash.sim.probes import usb as sim_usb  # noqa: E402
from piflash.sim.specs import get_target  # noqa: E402

SPEC = get_target("rp2040")
UID = bytes.fromhex("e66038b7134f4d2c")


def board(image: bytes = b"") -> SimBoard:
    flash = image + b"\xff" * (SPEC.flash.size - len(image))
    return SimBoard(SPEC, UID, {"flash": flash}, Faults())


def select(wire, targetsel, parity_error=False):
    """What pyocd/target/family/target_rp2.py select_dp sends: dormant-to-SWD, line reset,
    2 idle cycles, then the TARGETSEL write packet as a raw SWD sequence."""
    swj = sender(wire)
    swj.dormant_to_swd()
    swj.line_reset()
    swj.idle_cycles(2)
    data = targetsel | mask.parity32_high(targetsel)
    if parity_error:
        data ^= 1 << 32
    wire.swd_sequence([(8, 0x99), (5,), (33, data), (2, 0)])


def test_multidrop_wire_dormant_targetsel_and_instances():
    wire = board().dp
    with pytest.raises(TransferError):          # cold reset: dormant, nobody answers
        wire.read_dp(0x0)
    swj = sender(wire)
    swj.line_reset()                            # a line reset alone does not wake a dormant DP
    with pytest.raises(TransferError):
        wire.read_dp(0x0)
    swj.dormant_to_swd()                        # awake, but no TARGETSEL yet
    with pytest.raises(TransferError):
        wire.read_dp(0x0)

    for targetsel, instance in ((0x01002927, 0x0), (0x11002927, 0x1), (0xF1002927, 0xF)):
        select(wire, targetsel)
        assert wire.read_dp(0x0) == 0x0BC12477
        wire.write_dp(0x8, 0x2)
        assert wire.read_dp(0x4) == 0x01002927                 # TARGETID
        wire.write_dp(0x8, 0x3)
        assert wire.read_dp(0x4) == (instance << 28) | 1       # DLPIDR: TINSTANCE, PROTVSN 1
        wire.write_dp(0x8, 0x0)

    select(wire, 0x21002927)                    # no such instance: every DP stays silent
    with pytest.raises(TransferError):
        wire.read_dp(0x0)
    select(wire, 0x01002927, parity_error=True)
    with pytest.raises(TransferError):
        wire.read_dp(0x0)

    select(wire, 0x01002927)
    swj.line_reset()
    swj.swd_to_dormant()                        # back to dormant: a TARGETSEL alone is not enough
    wire.swd_sequence([(8, 0x99), (5,), (33, 0x01002927 | mask.parity32_high(0x01002927)), (2, 0)])
    with pytest.raises(TransferError):
        wire.read_dp(0x0)


def test_boot_rom_header_and_table_lookup_run_on_the_core():
    b = board()
    rom = b.bus.read_block(0, 0x1A)
    assert rom[0x10:0x13] == b"Mu\x01"
    func_table, data_table, lookup = struct.unpack_from("<HHH", rom, 0x14)
    assert lookup & 1                           # Thumb bit: callable with BLX
    # BLX R2; BKPT, in SRAM, run on the emulated core for each documented code.
    b.bus.write_block(0x20000000, struct.pack("<HH", 0x4790, 0xBE00))
    found = {}
    for code in ("IF", "EX", "RE", "RP", "FC", "CX", "MC", "MS", "ZZ"):
        b.cpu.write_reg(0, func_table)
        b.cpu.write_reg(1, ord(code[0]) | ord(code[1]) << 8)
        b.cpu.write_reg(2, lookup)
        b.cpu.write_reg(13, 0x20040000)
        b.cpu.write_reg(15, 0x20000000)
        b.cpu.flush_translation_cache()
        assert b.cpu.run(1000, 1.0).value == "bkpt"
        found[code] = b.cpu.read_reg(0)
    assert found.pop("ZZ") == 0                 # not in the table
    assert all(ptr & 1 and 0 < ptr < 0x4000 for ptr in found.values())
    assert len(set(found.values())) == len(found)


def test_flash_functions_through_the_rom_and_unique_id_through_the_ssi():
    b = board()
    rom = b.chip
    # flash_range_erase(0, 64 KiB + 8 KiB, 64 KiB, D8h): one block erase and two sector erases.
    ops = []
    b.nvm["flash"].observer = lambda op, n: ops.append((op, n))
    b.nvm["flash"].data[:0x12000] = b"\x00" * 0x12000
    for reg, value in enumerate((0, 0x12000, 0x10000, 0xD8)):
        b.cpu.write_reg(reg, value)
    rom.call(rom.entries["flash_range_erase"])
    # Each: Write Enable (1 byte), the instruction and address (4), one status read (2).
    # (no flash_exit_xip ran here: the SSI's reset BAUDR 0 counts as the minimum divider 2)
    assert sum(n for op, n in ops if op == "spi_cycles") == 3 * 7 * 8 * 2
    ops[:] = [o for o in ops if o[0] != "spi_cycles"]
    assert ops == [("erase_block64", 0x10000), ("erase_page", 0x1000), ("erase_page", 0x1000)]
    assert b.nvm["flash"].data[:0x12000] == b"\xff" * 0x12000
    # flash_range_program(0x100, SRAM, 512): two page programs.
    ops.clear()
    b.bus.write_block(0x20001000, bytes(range(256)) * 2)
    for reg, value in enumerate((0x100, 0x20001000, 512)):
        b.cpu.write_reg(reg, value)
    rom.call(rom.entries["flash_range_program"])
    # XIP serves no flash data until flash_enter_cmd_xip (or boot stage 2) sets the SSI up.
    assert b.bus.read_block(0x10000100, 4) == b"\xa5" * 4
    rom.call(rom.entries["flash_enter_cmd_xip"])
    assert sum(n for op, n in ops if op == "spi_cycles") == 2 * (1 + 260 + 2) * 8 * 2
    assert [o for o in ops if o[0] != "spi_cycles"] == [("program", 256), ("program", 256)]
    assert b.bus.read_block(0x10000100, 512) == bytes(range(256)) * 2      # through XIP

    # The unique ID as a debugger or pico-sdk's flash_get_unique_id reads it: /CS low by the
    # IO_QSPI override (through its XOR alias), 4Bh, four dummy bytes, eight ID bytes.
    b.bus.write(0x18000008, 4, 0)               # SSIENR off
    b.bus.write(0x18000000, 4, 0x00070000)      # 8-bit frames, transmit and receive
    b.bus.write(0x18000008, 4, 1)
    b.bus.write(0x4001900C, 4, 2 << 8)          # GPIO_QSPI_SS_CTRL ^= OUTOVER low
    for byte in (0x4B, 0, 0, 0, 0) + (0,) * 8:
        b.bus.write(0x18000060, 4, byte)
    got = bytes(b.bus.read(0x18000060, 4) for _ in range(13))
    b.bus.write(0x4001B00C, 4, 3 << 8)          # clear alias: OUTOVER back to normal
    b.bus.write(0x4001A00C, 4, 3 << 8)          # set alias: /CS high
    assert got[5:] == UID
    assert b.chip.port.pins.flash.command(b"\x9f", 3) == bytes((0xEF, 0x40, 0x15))   # JEDEC ID


def _core_load(b, address: int) -> int:
    """The word the core loads at ``address`` (LDR R0, [R1]; BKPT, run from SRAM)."""
    b.bus.write_block(0x20000000, struct.pack("<HH", 0x6808, 0xBE00))
    b.cpu.write_reg(1, address)
    b.cpu.write_reg(15, 0x20000000)
    b.cpu.flush_translation_cache()
    assert b.cpu.run(100, 1.0).value == "bkpt"
    return b.cpu.read_reg(0)


def test_flash_past_its_size_is_the_flash_over_every_path():
    """The W25Q16JV takes 24 address bits and ignores those above its 2 MiB (A23-A21):
    a program at flash offset 0x200100 through the ROM's flash functions (what pyOCD's algorithm
    passes for 0x10200100) lands at 0x100, and the 16 MiB XIP windows repeat the 2 MiB for the
    debugger and for the core alike; an erase at 0xFFD000 (pyOCD's basic_test's 0x10FFD000)
    erases 0x1FD000."""
    b = board()
    rom = b.chip
    rom.exit_xip()
    rom.program(0x200100, bytes(range(256)))
    rom.program(0x1FD000, b"\x00" * 256)
    rom.erase_range(0xFFD000, 0x1000, 0x10000, 0xD8)
    rom.enter_cmd_xip()
    flash = b.nvm["flash"].data
    assert flash[0x100:0x200] == bytes(range(256)) and flash[0x1FD000:0x1FE000] == b"\xff" * 0x1000
    for window in (0x10000000, 0x11000000, 0x12000000, 0x13000000):
        for copy in (0, 0x200000, 0xE00000):
            assert b.bus.read_block(window + copy + 0x100, 4) == bytes(range(4))       # the debugger
            assert _core_load(b, window + copy + 0x104) == 0x07060504                 # the core
    # SPI commands over the SSI: 03h Read Data at 0x200100 is the cells at 0x100.
    assert b.chip.port.pins.flash.command(b"\x03\x20\x01\x00", 4) == bytes(range(4))


def test_ssi_xip_reads_in_the_formats_the_flash_answers():
    """The SSI set up for 3Bh dual output (CTRLR0.SPI_FRF dual, SPI_CTRLR0 XIP_CMD 3Bh, 8 wait
    cycles) reads the flash at 72 SCK per 8-byte line (serial 03h: 96); dual frames with an
    instruction the flash answers on one line return no flash data."""
    b = board(bytes(range(256)))
    ssi = 0x18000000
    cycles = []
    b.nvm["flash"].observer = lambda op, n: cycles.append(n) if op == "spi_cycles" else None

    def xip(ctrlr0, spi_ctrlr0):
        for offset, value in ((0x08, 0), (0x00, ctrlr0), (0xF4, spi_ctrlr0), (0x14, 4), (0x08, 1)):
            b.bus.write(ssi + offset, 4, value)
        b.bus.write(0x14000004, 4, 1)                        # XIP_CTRL FLUSH: the next read misses
        cycles.clear()
        return b.bus.read_block(0x10000000, 64), sum(cycles)

    eeprom_32 = (31 << 16) | (3 << 8)
    data, cost = xip(eeprom_32, (0x03 << 24) | (2 << 8) | (6 << 2))
    assert data == bytes(range(64)) and cost == 8 * 96 * 4
    data, cost = xip((1 << 21) | eeprom_32, (0x3B << 24) | (8 << 11) | (2 << 8) | (6 << 2))
    assert data == bytes(range(64)) and cost == 8 * 72 * 4
    data, _ = xip((1 << 21) | eeprom_32, (0x03 << 24) | (2 << 8) | (6 << 2))
    assert data == b"\xa5" * 64


def test_quad_xip_needs_the_continuous_read_mode_and_keeps_the_flash_in_it():
    """Boot stage 2's quad XIP (pico-sdk boot2_w25q080.S): EBh and the A0h mode bits through DR0
    put the flash in its continuous read mode, after which the SSI's instruction-less EBh reads
    return the flash at 28 SCK per 8-byte line. The same XIP set-up without that entry, or with
    the flash's QE bit clear, returns no flash data; mode bits 00h serve one more read and end
    the mode; while the flash is in it a serial instruction does nothing; the boot ROM's
    flash_exit_xip ends it."""
    b = board(bytes(range(256)))
    ssi, flash = 0x18000000, b.chip.port.pins.flash
    cycles = []
    b.nvm["flash"].observer = lambda op, n: cycles.append(n) if op == "spi_cycles" else None
    quad = (2 << 21) | (31 << 16) | (3 << 8)                 # quad frames, 32-bit, EEPROM read

    def setup(spi_ctrlr0, ctrlr0=quad):
        for offset, value in ((0x08, 0), (0x00, ctrlr0), (0x04, 0), (0xF4, spi_ctrlr0), (0x14, 2), (0x08, 1)):
            b.bus.write(ssi + offset, 4, value)

    def enter():
        setup((4 << 11) | (2 << 8) | (8 << 2) | 1)           # EBh with instruction, 32-bit address field
        b.bus.write(ssi + 0x60, 4, 0xEB)
        b.bus.write(ssi + 0x60, 4, 0xA0)                     # address 0, mode bits A0h
        b.bus.read(ssi + 0x28, 4)                            # SR: the frame is sent

    def xip(mode=0xA0):
        setup((mode << 24) | (4 << 11) | (8 << 2) | 2)       # no instruction, mode bits appended
        b.bus.write(0x14000004, 4, 1)
        cycles.clear()
        return b.bus.read_block(0x10000000, 64), sum(cycles)

    assert xip() == (b"\xa5" * 64, 0)                        # not in the continuous read mode
    enter()
    assert flash.continuous
    data, cost = xip()
    assert data == bytes(range(64)) and cost == 8 * 28 * 2
    assert flash.command(b"\x9f", 3) == b"\xff" * 3          # a serial instruction is an address now
    data, _ = xip(mode=0x00)                                 # mode bits 00h: this read, then out
    assert data == bytes(range(64)) and not flash.continuous
    assert xip()[0] == b"\xa5" * 64
    assert flash.command(b"\x9f", 3) == bytes((0xEF, 0x40, 0x15))
    enter()
    b.chip.exit_xip()                                        # the ROM's flash_exit_xip
    assert not flash.continuous and flash.command(b"\x9f", 3) == bytes((0xEF, 0x40, 0x15))
    flash.sr2 = 0                                            # QE clear: IO2/IO3 are /WP, /HOLD
    enter()
    assert not flash.continuous and xip()[0] == b"\xa5" * 64


def test_reset_boots_stage2_then_the_firmware_and_a_bad_crc_parks(pyocd_binaries):
    blink = (pyocd_binaries / "rp2040.bin").read_bytes()
    assert crc32_boot2(blink[:252]) == struct.unpack_from("<I", blink, 252)[0]
    b = board(blink)
    b.cpu.run(3, 5.0)                                           # the ROM's boot, into stage 2
    assert b.bus.read_block(BOOT2_SRAM, 256) == blink[:256] and BOOT2_SRAM <= b.cpu.pc < BOOT2_SRAM + 256
    b.cpu.run(200_000, 5.0)
    assert b.bus.read(0xE000ED08, 4) == 0x10000100             # stage 2 set VTOR to the app
    assert 0x10000100 <= b.cpu.pc < 0x10000000 + len(blink)     # and the app runs from XIP

    bad = bytearray(blink)
    bad[10] ^= 1                                                # boot stage 2 CRC now wrong
    b = board(bytes(bad))
    assert b.cpu.run(10_000, 5.0).value == "sleep"              # parked where BOOTSEL would start
    assert b.cpu.pc < 0x4000


def test_rescue_dp_resets_the_chip_and_parks_the_core(pyocd_binaries):
    b = board((pyocd_binaries / "rp2040.bin").read_bytes())
    b.cpu.run(200_000, 5.0)
    assert b.cpu.pc >= 0x10000000
    wire = b.dp
    select(wire, 0xF1002927)
    wire.write_dp(0x4, 1 << 28)                 # CDBGPWRUPREQ set
    wire.write_dp(0x4, 0)                       # and cleared: the chip resets
    assert b.cpu.run(10_000, 5.0).value == "sleep" and b.cpu.pc < 0x4000


def _open(unique_id):
    session = ConnectHelper.session_with_chosen_probe(unique_id=unique_id, blocking=False,
                                                      target_override="rp2040")
    assert session is not None
    return session


@pytest.mark.parametrize("probe", ["sim", "usb"])
def test_pyocd_flashes_pico_blink_byte_exact(probe, pyocd_binaries, tmp_path, monkeypatch):
    blink = pyocd_binaries / "rp2040.bin"
    store = SimStore()
    store.create("pico", "rp2040")
    device = None
    if probe == "usb":                          # the Debug Probe (CMSIS-DAP v2) below pyusb
        monkeypatch.setenv(sim_usb.ENV_VAR, "pico@debugprobe")
        device = sim_usb.install("pico@debugprobe", store).devices[0]
        unique_id = device.serial
    else:
        unique_id = "sim:pico"
    try:
        with _open(unique_id) as session:
            FileProgrammer(session, progress=lambda _p: None).program(str(blink), base_address=0x10000000)
            assert session.target.read_memory_block8(0x10000000, 16) == list(blink.read_bytes()[:16])
            session.target.reset()
    finally:
        if device is not None:
            sim_usb.uninstall()
    if device is not None:
        assert device.clock.requests["DAP_SWD_Sequence"] == 1      # the TARGETSEL packet
    data = blink.read_bytes()
    flash = store.read_flash("pico")
    assert flash[:len(data)] == data and flash[len(data):] == b"\xff" * (len(flash) - len(data))
