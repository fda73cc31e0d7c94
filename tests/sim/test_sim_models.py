"""Register-level tests of the simulated board models (DP, MEM-AP, ROM table, SCS, CPU, flash
controllers), driven through the SW-DP exactly as a probe would, without a pyOCD session."""

from __future__ import annotations

import struct

import pytest

pytest.importorskip("unicorn")

from pyocd.core.exceptions import TransferFaultError  # noqa: E402

from piflash.sim.board import SimBoard  # noqa: E402
from piflash.sim.faults import Faults  # noqa: E402
from piflash.sim.specs import TARGETS  # noqa: E402

DHCSR, DCRSR, DCRDR, DEMCR, DFSR, AIRCR = 0xE000EDF0, 0xE000EDF4, 0xE000EDF8, 0xE000EDFC, 0xE000ED30, 0xE000ED0C
KEY = 0xA05F0000


def make_board(target, faults=None, flash=None, uid=None):
    spec = TARGETS[target]
    images = {n.name: n.initial() for n in spec.nvm}
    if flash is not None:
        images["flash"] = flash + b"\xff" * (spec.flash.size - len(flash))
    return SimBoard(spec, uid or bytes(range(spec.uid_length)), images, faults or Faults())


class Dap:
    """Memory access through DP/AP registers, as a probe without MEM-AP acceleration does."""

    def __init__(self, board):
        self.board = board
        self.dp = board.dp
        self.dp.write_dp(0x4, 0x50000F00)      # CSYSPWRUPREQ | CDBGPWRUPREQ | MASKLANE
        self.dp.write_dp(0x8, 0)               # SELECT AP0 bank 0

    def select(self, apsel, bank=0):
        self.dp.write_dp(0x8, (apsel << 24) | bank)

    def ap_read(self, reg, apsel=0):
        self.select(apsel, reg & 0xF0)
        return self.dp.read_ap((apsel << 24) | reg)

    def ap_write(self, reg, value, apsel=0):
        self.select(apsel, reg & 0xF0)
        self.dp.write_ap((apsel << 24) | reg, value)

    def csw(self, size, inc=True):
        self.ap_write(0x00, 0x23000040 | size | (0x10 if inc else 0))

    def read(self, addr, size=32):
        self.csw({8: 0, 16: 1, 32: 2}[size])
        self.ap_write(0x04, addr)
        value = self.ap_read(0x0C)
        if size == 8:
            return (value >> (8 * (addr & 3))) & 0xFF
        if size == 16:
            return (value >> (8 * (addr & 2))) & 0xFFFF
        return value

    def write(self, addr, value, size=32):
        self.csw({8: 0, 16: 1, 32: 2}[size])
        self.ap_write(0x04, addr)
        if size == 8:
            value = (value & 0xFF) << (8 * (addr & 3))
        elif size == 16:
            value = (value & 0xFFFF) << (8 * (addr & 2))
        self.ap_write(0x0C, value)

    def write_block(self, addr, words):
        self.csw(2)
        self.ap_write(0x04, addr)
        self.dp.write_ap_multiple(0x0C, words)

    def read_block(self, addr, count):
        self.csw(2)
        self.ap_write(0x04, addr)
        return self.dp.read_ap_multiple(0x0C, count)

    # core helpers
    def halt(self):
        self.write(DHCSR, KEY | 3)

    def set_reg(self, regsel, value):
        self.write(DCRDR, value)
        self.write(DCRSR, regsel | (1 << 16))

    def get_reg(self, regsel):
        self.write(DCRSR, regsel)
        return self.read(DCRDR)

    def run_code(self, code: bytes, regs=None, addr=0x20000000):
        """Load Thumb ``code`` at ``addr`` and run it until it halts (BKPT)."""
        self.halt()
        code += b"\x00" * (-len(code) % 4)
        words = list(struct.unpack("<%dI" % (len(code) // 4), code))
        self.write_block(addr, words)
        for regsel, value in (regs or {}).items():
            self.set_reg(regsel, value)
        self.set_reg(15, addr)
        self.set_reg(16, 0x01000000)
        self.set_reg(13, addr + 0x1000)
        self.write(DFSR, 0x1F)
        self.write(DHCSR, KEY | 1)
        return self.read(DHCSR)


def thumb(*halfwords):
    return struct.pack("<%dH" % len(halfwords), *halfwords)


# ---------------------------------------------------------------------------------------------
# DP / AP
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("target", ["nrf51", "nrf52840", "stm32f103rc"])
def test_dp_idr_and_power_handshake(target):
    board = make_board(target)
    dp = board.dp
    assert dp.read_dp(0x0) == TARGETS[target].dpidr
    assert dp.read_dp(0x4) & 0xA0000000 == 0
    with pytest.raises(TransferFaultError):          # AP access with debug powered down
        dp.read_ap(0xFC)
    dp.write_dp(0x0, 0x1E)                             # ABORT: clear sticky flags
    dp.write_dp(0x4, 0x50000F00)
    assert dp.read_dp(0x4) & 0xF0000000 == 0xF0000000  # both ACKs follow the requests
    dp.write_dp(0x8, 0)
    dap = Dap(board)
    assert dap.ap_read(0xFC) == TARGETS[target].ap_idr
    assert dp.read_dp(0xC) == TARGETS[target].ap_idr   # RDBUFF holds the last AP read
    assert dap.ap_read(0xF8) == 0xE00FF003             # BASE: legacy format, present
    assert dap.ap_read(0xF4) == 0                      # CFG
    assert dap.ap_read(0xFC, apsel=3) == 0             # absent AP reads zero
    dp.write_dp(0x4, 0x10000F00)                       # drop system power request
    assert dp.read_dp(0x4) & 0xA0000000 == 0x20000000


def test_ap_csw_sizes_and_lanes():
    dap = Dap(make_board("nrf52840"))
    dap.ap_write(0x00, 0x23000041)
    assert dap.ap_read(0x00) & 0x7 == 1 and dap.ap_read(0x00) & 0x40
    dap.ap_write(0x00, 0x23000047)                     # unsupported size reads back as word
    assert dap.ap_read(0x00) & 0x7 == 2
    dap.write(0x20000000, 0x11223344)
    dap.write(0x20000001, 0xAB, 8)
    dap.write(0x20000002, 0xCDEF, 16)
    assert dap.read(0x20000000) == 0xCDEFAB44
    assert dap.read(0x20000003, 8) == 0xCD
    assert dap.read(0x20000002, 16) == 0xCDEF
    # Byte auto-increment walks through the lanes.
    dap.csw(0)
    dap.ap_write(0x04, 0x20000010)
    for i in range(4):
        dap.ap_write(0x0C, (0x50 + i) << (8 * i))
    assert dap.read(0x20000010) == 0x53525150
    # Banked data registers BD0-BD3 address TAR[31:4].
    dap.ap_write(0x04, 0x20000004)
    assert dap.ap_read(0x10) == dap.read(0x20000000)
    assert dap.ap_read(0x1C) == dap.read(0x2000000C)


@pytest.mark.parametrize("target,wrap", [("nrf51", 0x400), ("nrf52840", 0x1000)])
def test_tar_autoincrement_wraps(target, wrap):
    dap = Dap(make_board(target))
    base = 0x20000000 + wrap - 8
    dap.csw(2)
    dap.ap_write(0x04, base)
    for value in (1, 2, 3):
        dap.ap_write(0x0C, value)
    assert dap.ap_read(0x04) == 0x20000004             # wrapped within the block
    assert dap.read(base) == 1 and dap.read(base + 4) == 2
    assert dap.read(0x20000000) == 3
    # Block transfers wrap the same way.
    dap.ap_write(0x04, base)
    dap.dp.write_ap_multiple(0x0C, [7, 8, 9, 10])
    assert dap.read_block(0x20000000, 2) == [9, 10]


def test_block_transfer_truncates_to_32_bits():
    dap = Dap(make_board("stm32f103rc"))
    dap.write_block(0x20000100, [0x1_0000_0005, 0x6])
    assert dap.read_block(0x20000100, 2) == [5, 6]


def test_unmapped_access_faults_and_sticks():
    dap = Dap(make_board("nrf52840"))
    with pytest.raises(TransferFaultError) as info:
        dap.read(0x30000000)
    assert info.value.fault_address == 0x30000000
    assert dap.dp.read_dp(0x4) & 0x20                  # STICKYERR
    with pytest.raises(TransferFaultError):
        dap.ap_read(0x00)                              # every AP access faults until cleared
    dap.dp.write_dp(0x0, 0x04)                         # ABORT.STKERRCLR
    assert dap.read(0x20000000) == 0
    # A block transfer wraps inside the 4 KiB auto-increment block rather than leaving RAM...
    dap.write_block(0x2003FFF8, [1, 2, 3, 4])
    assert dap.read_block(0x2003FFF8, 2) == [1, 2] and dap.read_block(0x2003F000, 2) == [3, 4]
    # ...while a bus block access that runs off RAM writes the words before the fault.
    from piflash.sim.memory.bus import BusError
    with pytest.raises(BusError) as err:
        dap.board.bus.write_block(0x2003FFF8, bytes(range(16)))
    assert err.value.address == 0x20040000
    assert dap.read_block(0x2003FFF8, 2) == [0x03020100, 0x07060504]


# ---------------------------------------------------------------------------------------------
# ROM table / SCS
# ---------------------------------------------------------------------------------------------
def _cidr_pidr(dap, base):
    regs = dap.read_block(base + 0xFD0, 12)
    cidr = sum((regs[8 + i] & 0xFF) << (8 * i) for i in range(4))
    pidr = sum((regs[4 + i] & 0xFF) << (8 * i) for i in range(4)) | ((regs[0] & 0xFF) << 32)
    return cidr, pidr


@pytest.mark.parametrize("target,scs_part,rom_part", [("nrf51", 0x008, 0x471), ("nrf52840", 0x000, 0x4C4),
                                                       ("stm32f103rc", 0x000, 0x4C3)])
def test_rom_table_and_components(target, scs_part, rom_part):
    dap = Dap(make_board(target))
    cidr, pidr = _cidr_pidr(dap, 0xE00FF000)
    assert cidr == 0xB105100D                          # class 0x1 ROM table
    assert pidr & 0xFFF == rom_part
    designer = ((pidr >> 12) & 0x7F) | (((pidr >> 32) & 0xF) << 8)
    assert designer == 0x43B
    entries = dap.read_block(0xE00FF000, 4)
    addrs = [(0xE00FF000 + (e & 0xFFFFF000)) & 0xFFFFFFFF for e in entries[:3]]
    assert addrs == [0xE000E000, 0xE0001000, 0xE0002000] and entries[3] == 0
    cidr, pidr = _cidr_pidr(dap, 0xE000E000)
    assert cidr == 0xB105E00D and pidr & 0xFFF == scs_part


@pytest.mark.parametrize("target,cpuid", [("nrf51", 0x410CC200), ("nrf52840", 0x410FC241),
                                          ("stm32f103rc", 0x411FC231)])
def test_scs_identity(target, cpuid):
    dap = Dap(make_board(target))
    assert dap.read(0xE000ED00) == cpuid
    if target == "nrf52840":
        assert dap.read(0xE000EF40) == 0x10110021       # MVFR0: FPv4-SP
        assert (dap.read(0xE000ED6C) >> 4) & 0xF == 3    # ID_ISAR3.SIMD: DSP
        assert dap.read(0xE000ED90) == 0x800             # MPU with 8 regions
    if target == "nrf51":
        assert dap.read(0xE000ED78) == 0 and dap.read(0xE000ED90) == 0
    assert dap.read(0xE000ED0C) >> 16 == 0xFA05          # AIRCR VECTKEYSTAT


def test_dhcsr_key_halt_registers_and_dfsr():
    dap = Dap(make_board("nrf52840"))
    dap.write(DHCSR, 0x00000003)                          # no key: ignored
    assert not dap.read(DHCSR) & 1
    dap.halt()
    dhcsr = dap.read(DHCSR)
    assert dhcsr & 0x3 == 0x3 and dhcsr & (1 << 17) and dhcsr & (1 << 16)
    assert dap.read(DFSR) & 1
    dap.write(DFSR, 1)                                    # write-1-to-clear
    assert dap.read(DFSR) & 1 == 0
    for regsel, value in ((0, 0x12345678), (12, 0xCAFEF00D), (14, 0x20000001), (17, 0x20001000),
                          (0x40, 0x3F800000), (33, 0x03000000)):
        dap.set_reg(regsel, value)
        assert dap.get_reg(regsel) == value, regsel
    dap.set_reg(20, 0x00000001)                           # CFBP: PRIMASK
    assert dap.get_reg(20) & 0xFF == 1
    dap.set_reg(15, 0x20000101)                           # PC: bit 0 ignored
    assert dap.get_reg(15) == 0x20000100


def test_sysresetreq_with_vector_catch():
    vectors = struct.pack("<II", 0x20001000, 0x00000101)
    dap = Dap(make_board("nrf52840", flash=vectors))
    dap.halt()
    dap.write(DEMCR, 0x01000001)                          # TRCENA | VC_CORERESET
    dap.write(AIRCR, 0x05FA0004)
    first = dap.read(DHCSR)
    assert first & (1 << 25) and first & (1 << 17)       # S_RESET_ST (sticky) and halted
    assert not dap.read(DHCSR) & (1 << 25)               # cleared by the read
    assert dap.read(DFSR) & (1 << 3)                      # VCATCH
    assert dap.get_reg(15) == 0x100 and dap.get_reg(13) == 0x20001000
    assert dap.get_reg(16) == 0x01000000
    dap.write(AIRCR, 0x00000004)                          # wrong key: ignored
    assert not dap.read(DHCSR) & (1 << 25)


def test_stm32_boot_alias_and_reset_runs_firmware():
    # Reset handler at flash+8: movs r0,#0; adds r0,#1; b .-2  (runs forever)
    firmware = struct.pack("<II", 0x20001000, 0x08000009) + thumb(0x2000, 0x3001, 0xE7FD)
    dap = Dap(make_board("stm32f103rc", flash=firmware))
    assert dap.read(0x00000000) == 0x20001000 and dap.read(0x08000004) == 0x08000009
    dap.write(DHCSR, KEY | 1)
    dap.write(AIRCR, 0x05FA0004)
    state = dap.read(DHCSR)                               # running: a slice executes
    assert not state & (1 << 17) and state & (1 << 24)   # not halted, S_RETIRE_ST
    dap.halt()
    assert dap.get_reg(15) in (0x0800000A, 0x0800000C)
    assert dap.get_reg(0) > 0


def test_cpu_bkpt_fault_lockup_and_sleep():
    board = make_board("nrf51")
    dap = Dap(board)
    # movs r0,#42 ; bkpt
    dhcsr = dap.run_code(thumb(0x202A, 0xBE00))
    assert dhcsr & (1 << 17) and dap.read(DFSR) & 2       # halted on BKPT
    assert dap.get_reg(0) == 42 and dap.get_reg(15) == 0x20000002
    # udf -> the model locks up (no exception entry)
    dhcsr = dap.run_code(thumb(0xDEFE, 0xBE00))
    assert dhcsr & (1 << 19) and not dhcsr & (1 << 17)
    dap.halt()
    assert dap.read(DHCSR) & (1 << 17)
    # with VC_HARDERR the fault is taken and the core halts at the handler (vector catch): erased
    # flash gives the vector 0xffffffff, the frame holds the faulting PC
    dap.write(DEMCR, 1 << 10)
    dhcsr = dap.run_code(thumb(0x2007, 0xDEFE, 0xBE00), regs={14: 0x1235})    # movs r0,#7 ; udf
    assert dhcsr & (1 << 17) and dap.read(DFSR) & (1 << 3)
    sp = dap.get_reg(13)
    assert sp == 0x20001000 - 0x20
    frame = [dap.read(sp + 4 * i) for i in range(8)]
    assert frame[0] == 7 and frame[5] == 0x1235 and frame[6] == 0x20000002     # R0, LR, PC
    assert frame[7] & 0x01000000                                              # xPSR.T
    assert dap.get_reg(14) == 0xFFFFFFF9 and dap.get_reg(16) & 0x1FF == 3     # EXC_RETURN, IPSR
    assert dap.get_reg(15) == 0xFFFFFFFE                                      # erased vector
    dap.write(DEMCR, 0)
    # wfi -> sleeping
    dhcsr = dap.run_code(thumb(0xBF30, 0xBE00))
    assert dhcsr & (1 << 18)


def test_single_step():
    dap = Dap(make_board("nrf52840"))
    dap.run_code(thumb(0xBE00))
    dap.write_block(0x20000100, list(struct.unpack("<II", thumb(0x2001, 0x2002, 0x2003, 0xBE00))))
    dap.set_reg(15, 0x20000100)
    dap.write(DHCSR, KEY | 0x5 | 0x8)                     # step with interrupts masked
    assert dap.read(DHCSR) & (1 << 17)
    assert dap.get_reg(15) == 0x20000102 and dap.get_reg(0) == 1


# ---------------------------------------------------------------------------------------------
# Nordic NVMC
# ---------------------------------------------------------------------------------------------
NVMC = 0x4001E000


def test_nvmc_config_erase_program():
    board = make_board("nrf52840")
    dap = Dap(board)
    assert dap.read(NVMC + 0x400) == 1 and dap.read(NVMC + 0x408) == 1
    dap.write(0x1000, 0x12345678)                         # CONFIG=Ren: ignored
    assert dap.read(0x1000) == 0xFFFFFFFF
    dap.write(NVMC + 0x504, 1)
    dap.write(0x1000, 0x12345678)
    dap.write(0x1000, 0xFFFF00FF)                         # bits only go 1 -> 0
    assert dap.read(0x1000) == 0x12340078
    dap.write(0x1004, 0xAB, 8)                            # byte writes do not program
    assert dap.read(0x1004) == 0xFFFFFFFF
    dap.write(NVMC + 0x508, 0x1000)                       # ERASEPAGE needs Een
    assert dap.read(0x1000) == 0x12340078
    dap.write(NVMC + 0x504, 2)
    dap.write(NVMC + 0x508, 0x1004)
    assert dap.read(0x1000) == 0xFFFFFFFF
    dap.write(NVMC + 0x504, 1)
    dap.write(0x10001080, 0x11111111)                     # UICR
    dap.write(0x2000, 0)
    dap.write(NVMC + 0x504, 2)
    dap.write(NVMC + 0x514, 1)                            # ERASEUICR
    assert dap.read(0x10001080) == 0xFFFFFFFF and dap.read(0x2000) == 0
    dap.write(NVMC + 0x50C, 1)                            # ERASEALL
    assert dap.read(0x2000) == 0xFFFFFFFF
    assert board.stats["erase_ops"] >= 3


def test_nvmc_faults():
    faults = Faults(write_protect=[0x1000], bit_flip={"address": 0x2001, "bit": 0})
    board = make_board("nrf52840", faults=faults)
    dap = Dap(board)
    dap.write(NVMC + 0x504, 1)
    dap.write(0x1000, 0)                                  # protected page: no change
    dap.write(0x2000, 0x00000000)
    assert dap.read(0x1000) == 0xFFFFFFFF
    assert dap.read(0x2000) == 0x00000100                 # bit 0 of byte 0x2001 reads back wrong
    dap.write(NVMC + 0x504, 2)
    dap.write(NVMC + 0x50C, 1)                            # ERASEALL refused while protected
    assert dap.read(0x2000) == 0x00000100
    faults.stuck_busy = True
    assert dap.read(NVMC + 0x400) == 0
    dap.write(NVMC + 0x508, 0x2000)
    assert dap.read(0x2000) == 0x00000100


def test_cpu_store_into_flash_goes_through_nvmc():
    board = make_board("nrf51")
    dap = Dap(board)
    # r1 = flash address, r2 = NVMC, r0 = value; CONFIG=1; str r0,[r1]; ldr r3,[r1]; str r0,[r1,#4]
    # (without WEN restored) ... bkpt
    code = thumb(0x2401,            # movs r4,#1
                 0x6054,            # str r4,[r2,#4]   CONFIG = Wen
                 0x6008,            # str r0,[r1]
                 0x680B,            # ldr r3,[r1]      read back right after the store
                 0x2400,            # movs r4,#0
                 0x6054,            # str r4,[r2,#4]   CONFIG = Ren
                 0x6048,            # str r0,[r1,#4]   ignored by the NVMC
                 0x684D,            # ldr r5,[r1,#4]
                 0xBE00)
    regs = {0: 0xA5A5F00F, 1: 0x3000, 2: NVMC + 0x500}
    dhcsr = dap.run_code(code, regs)
    assert dhcsr & (1 << 17)
    assert dap.get_reg(3) == 0xA5A5F00F
    assert dap.get_reg(5) == 0xFFFFFFFF
    assert dap.read(0x3000) == 0xA5A5F00F and dap.read(0x3004) == 0xFFFFFFFF
    assert board.nvm["flash"].read(0x3000, 8) == bytes.fromhex("0ff0a5a5ffffffff")


def test_nrf_ficr_uid_and_ctrl_ap():
    uid = bytes.fromhex("0102030405060708")
    board = make_board("nrf52840", uid=uid)
    dap = Dap(board)
    assert dap.read(0x10000060) == 0x04030201 and dap.read(0x10000064) == 0x08070605
    assert dap.read(0x10000100) == 0x52840 and dap.read(0x10000010) == 0x1000
    assert dap.read(0x10000014) == 256
    assert dap.ap_read(0xFC, apsel=1) == 0x02880000
    assert dap.ap_read(0x0C, apsel=1) == 1                # APPROTECTSTATUS: unprotected
    dap.write(NVMC + 0x504, 1)
    dap.write(0x4000, 0)
    dap.ap_write(0x04, 1, apsel=1)                        # CTRL-AP ERASEALL
    assert dap.ap_read(0x08, apsel=1) == 0
    assert dap.read(0x4000) == 0xFFFFFFFF


# ---------------------------------------------------------------------------------------------
# STM32F1 FPEC
# ---------------------------------------------------------------------------------------------
FLASH_IF = 0x40022000
KEYR, SR, CR, AR, WRPR = FLASH_IF + 4, FLASH_IF + 0xC, FLASH_IF + 0x10, FLASH_IF + 0x14, FLASH_IF + 0x20


def _unlock(dap):
    dap.write(KEYR, 0x45670123)
    dap.write(KEYR, 0xCDEF89AB)


def test_fpec_lock_program_erase():
    board = make_board("stm32f103rc")
    dap = Dap(board)
    assert dap.read(CR) & 0x80                            # locked at reset
    dap.write(CR, 1)
    assert dap.read(CR) == 0x80                           # CR is write-protected while locked
    _unlock(dap)
    assert dap.read(CR) == 0
    dap.write(CR, 1)                                      # PG
    dap.write(0x08000000, 0x1234, 16)
    assert dap.read(0x08000000, 16) == 0x1234 and dap.read(SR) & 0x20    # EOP
    dap.write(SR, 0x20)
    assert dap.read(SR) == 0
    dap.write(0x08000000, 0x0FFF, 16)                     # not erased -> PGERR
    assert dap.read(SR) & 0x4 and dap.read(0x08000000, 16) == 0x1234
    dap.write(0x08000000, 0x0000, 16)                     # writing zero is allowed
    assert dap.read(0x08000000, 16) == 0
    dap.write(0x08000002, 0x12, 8)                        # byte programming -> PGERR
    dap.write(SR, 0x34)
    dap.write(CR, 0x2)                                    # PER
    dap.write(AR, 0x08000010)
    dap.write(CR, 0x42)                                   # PER | STRT
    assert dap.read(0x08000000) == 0xFFFFFFFF and dap.read(CR) == 0x2 and dap.read(SR) == 0x20
    assert dap.read(0x00000000) == 0xFFFFFFFF             # the boot alias mirrors flash
    dap.write(CR, 0x80)                                   # LOCK
    dap.write(KEYR, 0x11111111)                           # wrong key: locked until reset
    _unlock(dap)
    assert dap.read(CR) & 0x80
    board.system_reset()
    _unlock(dap)
    assert not dap.read(CR) & 0x80


def test_fpec_write_protect_and_busy():
    faults = Faults(write_protect=[0x08000800, 0x08020000])
    dap = Dap(make_board("stm32f103rc", faults=faults))
    assert dap.read(WRPR) == 0xFFFFFFFF & ~(1 << 0) & ~(1 << 31)
    _unlock(dap)
    dap.write(CR, 1)
    dap.write(0x08000800, 0x5555, 16)
    assert dap.read(SR) & 0x10 and dap.read(0x08000800, 16) == 0xFFFF    # WRPRTERR
    dap.write(CR, 0x4)
    dap.write(CR, 0x44)                                   # mass erase refused
    assert dap.read(SR) & 0x10
    faults.stuck_busy = True
    assert dap.read(SR) & 1


def test_stm32_uid_flash_size_dbgmcu():
    uid = bytes(range(0xA0, 0xAC))
    dap = Dap(make_board("stm32f103rc", uid=uid))
    assert dap.read_block(0x1FFFF7E8, 3) == list(struct.unpack("<III", uid))
    assert dap.read(0x1FFFF7E0, 16) == 512
    assert dap.read(0xE0042000) == 0x10036414
    dap.write(0xE0042004, 0x7E3FFF00)
    assert dap.read(0xE0042004) == 0x7E3FFF00


def test_ctrl_c_inside_emulation_propagates(monkeypatch):
    """A KeyboardInterrupt raised in a flash-store or MMIO callback must reach the caller (it
    would otherwise be swallowed by unicorn's callback guard) and leave the board usable."""
    from piflash.sim.memory.nvmc import Nvmc
    real_store, real_read = Nvmc.store, Nvmc.read32
    hits = {"store": 0, "read": 0}

    def store(self, addr, size, value):
        hits["store"] += 1
        if hits["store"] == 1:
            raise KeyboardInterrupt
        real_store(self, addr, size, value)

    def read32(self, offset):
        hits["read"] += 1
        if hits["read"] == 1 and offset == 0x400:
            raise KeyboardInterrupt
        return real_read(self, offset)

    monkeypatch.setattr(Nvmc, "store", store)
    monkeypatch.setattr(Nvmc, "read32", read32)
    dap = Dap(make_board("nrf51"))
    regs = {0: 0x12345678, 1: 0x3000, 2: NVMC + 0x500}
    code = thumb(0x2401, 0x6054, 0x6008, 0xBE00)          # CONFIG=Wen; str r0,[r1]; bkpt
    with pytest.raises(KeyboardInterrupt):
        dap.run_code(code, regs)                          # interrupted in the flash-store hook
    dap.halt()
    with pytest.raises(KeyboardInterrupt):               # ldr r3,[r2] reads NVMC READY (MMIO)
        dap.run_code(thumb(0x6813, 0xBE00), {2: NVMC + 0x400})
    dap.halt()
    assert dap.run_code(thumb(0x2007, 0xBE00)) & (1 << 17)   # still works afterwards
    assert dap.get_reg(0) == 7


def test_unmodelled_peripheral_access_is_logged_once(caplog):
    """Firmware that polls a register the simulator lacks reads 0: said once in the log, with the
    address, instead of a silent hang (issue 23)."""
    import logging

    dap = Dap(make_board("nrf51"))
    # ldr r1,[r0] ; ldr r1,[r0] ; bkpt  with r0 = 0x40008000 (nRF51 TIMER0: not modelled)
    with caplog.at_level(logging.INFO, logger="piflash.sim.cpu"):
        dhcsr = dap.run_code(thumb(0x6801, 0x6801, 0xBE00), regs={0: 0x40008000})
    assert dhcsr & (1 << 17) and dap.get_reg(1) == 0
    said = [r.getMessage() for r in caplog.records if "unmodelled peripheral" in r.getMessage()]
    assert len(said) == 1 and "at 0x40008000" in said[0]
