"""Raspberry Pi RP2350 (Arm, Secure) specifics: the ADIv6 debug port, the boot ROM, XIP flash
behind the QMI, the RCP, ACCESSCTRL, OTP's chip ID.

Sources: RP2350 datasheet (build 2025-07) section 2.2 (address map), 3.5 (debug: one SW-DP
version 3, DPIDR 0x4C013477, dormant at power-up; the debug address space with the root ROM
table at 0, core 0's AHB-AP at 0x2000, core 1's at 0x4000), 3.6.3 (RCP, coprocessor 7), 3.7
(Cortex-M33 configuration), 4.4 (QMI: direct mode), 5.4 (boot ROM), 10.6 (ACCESSCTRL), 12.15
(SYSINFO), 13 (OTP: CHIPID0-3 in rows 0-3); pico-sdk ``src/rp2350/hardware_regs`` for register
offsets (``qmi.h``, ``accessctrl.h``, ``otp_data.h``, ``addressmap.h``); pyOCD's use:
``pyocd/target/family/target_rp2.py`` (``RP2350``: Secure state through DSCSR, ACCESSCTRL
CFGRESET).

Modelled: core 0 (Cortex-M33, Secure) behind a CS-600 AHB5-AP at 0x2000 of the debug address
space; core 1 is not emulated and its AP is listed as not present; 520 KiB SRAM; the boot ROM
(:mod:`piflash.sim.chips.rp2350_bootrom`); the Pico 2's 4 MiB flash (Winbond W25Q32RV, JEDEC ID
EF 40 16 as the W25Q32JV's, Raspberry Pi Pico 2 datasheet chapter 1) behind the QMI: its
memory window at 0x10000000 (repeated, for the debugger and the core alike, through the 16 MiB
chip-select 0 window, its no-cache alias 0x14000000 and no-translate alias 0x1C000000: the part
ignores the address bits above its 4 MiB) serves flash data by serial 03h
reads from reset on, except while direct mode is on; its direct mode (DIRECT_CSR/TX/RX) talks to the flash serially; the RCP's salt and canary
status (coprocessor 7, the instructions pyOCD's flash algorithm and pico-sdk's crt0 use);
ACCESSCTRL's password, LOCK and CFGRESET; SYSINFO CHIP_ID; OTP CRITICAL (0: no flag programmed);
OTP's ECC-read rows CHIPID0-3, which
carry the board's ``target_uid`` as pico-sdk's ``pico_get_unique_board_id`` reads it (RP2350:
the OTP chip ID, not the flash's; ``pico_unique_id/unique_id.c``); RESETS, XOSC, PLL_SYS and the
clk_ref/clk_sys muxes (:mod:`piflash.sim.chips.rp2_clocks`), whose system clock the board reports
(``clock_hz``). Not modelled: the other clocks, the XIP cache contents, ATRANS, SAU/IDAU (everything is Secure), the
Non-secure state, RISC-V, the RP-AP, the rest of OTP (reads 0, as unprogrammed rows do).
"""

from __future__ import annotations

import hashlib
from collections import deque
from types import SimpleNamespace
from typing import Dict

from piflash.sim.chips.base import ChipBoard
from piflash.sim.chips.rp2_clocks import RP2350_CLOCKS, Clocks
from piflash.sim.chips.rp2_common import (
    RomPortBase,
    ValueRegisters,
    XipTiming,
    attach_rom_and_xip,
)
from piflash.sim.chips.rp2040 import QspiPins
from piflash.sim.chips.rp2350_bootrom import Rp2350BootRom
from piflash.sim.debug.adiv6 import ApV2, RootRomTable, SwDpV3
from piflash.sim.debug.dap import AccessPortModel
from piflash.sim.debug.multidrop import MultidropWire
from piflash.sim.memory.bus import BusError, DeviceRegion, RegisterDevice
from piflash.sim.memory.spiflash import SpiNorFlash

__all__ = [
    "attach",
    "Qmi",
    "Rcp",
    "AccessCtrl",
    "TARGETID",
    "CHIP_ID",
    "QMI_BASE",
    "ACCESSCTRL_BASE",
    "OTP_DATA_BASE",
    "SYSINFO_BASE",
    "CORE0_AP",
    "otp_chip_id_rows",
]

#: TARGETID: TPARTNO 0x0004, TDESIGNER 0x493 (Raspberry Pi), bit 0 (OpenOCD tcl/target/rp2350.cfg
#: ``-dp-id 0x00040927``; the TREVISION nibble is not published and is 0 here).
TARGETID = 0x00040927
#: SYSINFO CHIP_ID of an RP2350 A2: REVISION 2 [31:28], PART 0x0004 [27:12], MANUFACTURER 0x493
#: [11:1], bit 0 (RP2350 datasheet 12.15.1; the stepping matches the ROM version 2 at 0x13).
CHIP_ID = 0x20004927
SYSINFO_BASE = 0x40000000
ACCESSCTRL_BASE = 0x40060000
QMI_BASE = 0x400D0000
OTP_DATA_BASE = 0x40130000
#: OTP's registers (pico-sdk hardware/regs/otp.h): CRITICAL at 0x148, the CRIT1 flags latched at
#: boot (secure boot, Secure debug off, debug off...): 0 on a part whose OTP nobody programmed.
OTP_BASE, OTP_CRITICAL = 0x40120000, 0x148
SIO_BASE = 0xD0000000
#: The XIP windows the model maps for the debugger: chip select 0's 16 MiB at 0x10000000, the
#: no-cache no-allocate alias 0x14000000 and the no-translate alias 0x1C000000 (section 4.4.1);
#: the maintenance window 0x18000000 takes cache maintenance writes (flash_flush_cache's).
XIP_WINDOWS, XIP_WINDOW_SIZE = (0x10000000, 0x14000000, 0x1C000000), 0x1000000
XIP_MAINTENANCE = 0x18000000
#: Debug address space: the root ROM table and core 0's AHB-AP (section 3.5.2, table 13).
ROOT_TABLE, CORE0_AP, CORE1_AP = 0x0, 0x2000, 0x4000
#: Raspberry Pi's JEP106 code (continuation 9, identity 0x13) and the root table's part number,
#: as pyOCD logs them for a real RP2350 (pyOCD issue #1760).
RPI_JEP106, ROOT_TABLE_PART = 0x913, 0x004
#: W25Q32JV / W25Q32RV JEDEC ID (Linux drivers/mtd/spi-nor/winbond.c: both answer EF 40 16).
W25Q32_JEDEC = bytes((0xEF, 0x40, 0x16))

# QMI registers (pico-sdk hardware/regs/qmi.h).
DIRECT_CSR, DIRECT_TX, DIRECT_RX, M0_TIMING, M0_RFMT, M0_RCMD = 0x00, 0x04, 0x08, 0x0C, 0x10, 0x14
CSR_EN, CSR_BUSY, CSR_ASSERT_CS0N, CSR_AUTO_CS0N = 1 << 0, 1 << 1, 1 << 2, 1 << 6
CSR_TXEMPTY, CSR_RXEMPTY = 1 << 11, 1 << 16
TX_IWIDTH_SHIFT, TX_DWIDTH, TX_NOPUSH = 16, 1 << 18, 1 << 20
#: QMI reset values: DIRECT_CSR CLKDIV 6 [29:22]; M0_TIMING CLKDIV 4 [7:0]; M0_RFMT, M0_RCMD
#: (serial 03h reads).
QMI_RESET = {DIRECT_CSR: 0x01800000, M0_TIMING: 0x40000004, M0_RFMT: 0x00001000, M0_RCMD: 0x0000A003}
#: M0_RFMT and M0_RCMD of the ROM's four XIP read modes (``flash_select_xip_read_mode``:
#: BOOTROM_XIP_MODE_03H_SERIAL, _0BH_SERIAL, _BBH_DUAL, _EBH_QUAD; pico-bootrom-rp2350
#: ``varm_generic_flash.c``), in the register fields of qmi.h: serial 03h; serial 0Bh with 8 dummy
#: bits; BBh with dual address and an 8-bit dual mode suffix; EBh with quad address, an 8-bit
#: quad mode suffix and 16 quad dummy bits. The mode byte 0x00 keeps the flash out of its
#: continuous read mode (W25Q32JV 8.2.11-8.2.12: M5-4 = 10b would enter it).
ROM_READ_MODES = {0: (0x00001000, 0x03), 1: (0x00021000, 0x0B), 2: (0x00009114, 0x00BB), 3: (0x000492A8, 0x00EB)}
_LANES = (1, 2, 4, 0)  # qmi.h *_WIDTH: 0 single, 1 dual, 2 quad (3 reserved)

# ACCESSCTRL (hardware/regs/accessctrl.h): LOCK (reset 0x4: DMA locked), FORCE_CORE_NS,
# CFGRESET; a write needs the password 0xACCE in [31:16] (a wrong one is a bus fault).
LOCK, FORCE_CORE_NS, CFGRESET = 0x00, 0x04, 0x08
ACCESSCTRL_PASSWORD = 0xACCE
LOCK_RESET = 0x4


class Qmi(RegisterDevice):
    """The QSPI memory interface as the model needs it: the memory window's state and the
    direct mode.

    Direct mode (section 4.4.4): with DIRECT_CSR.EN set, each DIRECT_TX write shifts 8 bits (16
    with DWIDTH) out on the flash's pins and, unless NOPUSH, queues what came back for
    DIRECT_RX. ASSERT_CS0N holds chip select 0 low; with AUTO_CS0N the bytes queued since the
    last status or RX read form one frame. Frames in dual or quad width (IWIDTH) are not sent to
    the flash (their answers read 0).

    :param pins: The flash's pins (:class:`~piflash.sim.chips.rp2040.QspiPins`).
    """

    def __init__(self, pins: QspiPins) -> None:
        self.pins = pins
        self.regs: Dict[int, int] = {}
        self.rx: deque = deque()
        self.tx: list = []
        self.shifted = 0
        self.reset()

    def reset(self) -> None:
        """Reset values: direct mode off; the window reads by serial 03h (M0_RCMD/RFMT), which
        a flash fresh out of reset answers, so XIP reads work before any set-up."""
        self.regs = dict(QMI_RESET)
        self.rx.clear()
        self.tx = []
        if self.pins.flash.selected:
            self.pins.flash.deselect()

    # -- what the XIP model asks ---------------------------------------------------------------
    def xip_ready(self) -> bool:
        """Whether window reads return flash data: not while direct mode is on (the ROM's
        program and erase functions, or software talking to the flash; datasheet 5.4.8.10),
        nor when M0_RFMT/M0_RCMD describe no read the flash answers (:meth:`read_phases`; the
        part would return bytes that are not the flash's)."""
        return not self.regs[DIRECT_CSR] & CSR_EN and self.read_phases() is not None

    def read_phases(self):
        """SCK cycles of one read transfer in the window's format: (command, address and what
        follows it up to the data; per 8 data bytes), or None when M0_RFMT/M0_RCMD are not one
        the flash answers (``SpiNorFlash.read_cycles``: an 8-bit serial prefix, a 24-bit address,
        the instruction's lanes and cycles; no DTR)."""
        rfmt, cmd = self.regs[M0_RFMT], self.regs[M0_RCMD] & 0xFF
        if rfmt & (1 << 28) or not rfmt & (1 << 12) or rfmt & 3:
            return None  # DTR, no or non-serial prefix
        lanes = [_LANES[(rfmt >> shift) & 3] for shift in (2, 4, 6, 8)]  # addr, suffix, dummy, data
        if 0 in lanes:
            return None
        suffix_bits = 8 if (rfmt >> 14) & 3 == 2 else 0
        between = suffix_bits // lanes[1] + 4 * ((rfmt >> 16) & 7) // lanes[2]
        return self.pins.flash.read_cycles(cmd, lanes[0], between, lanes[3])

    def miss_cycles(self, sequential: bool = False) -> int:
        """clk_sys cycles of one 8-byte line fill: the transfer's SCK cycles
        (:meth:`read_phases`), one SCK per M0_TIMING.CLKDIV cycles (0: 256). A fill that follows
        the last one sequentially while chip select is still asserted (COOLDOWN non-zero, no
        PAGEBREAK boundary crossed; qmi.h M0_TIMING) only appends the data clocks; the model
        takes every sequential fill as arriving within the cooldown (64 x COOLDOWN clk_sys
        cycles), i.e. the reader consumes a line within that time, and any PAGEBREAK setting as
        breaking every burst (it does not track the boundaries; slower, never faster), and
        ignores MAX_SELECT (0 after reset and in piflash's set-up)."""
        phases = self.read_phases() or (32, 64)
        clkdiv = (self.regs[M0_TIMING] & 0xFF) or 256
        cooldown = self.regs[M0_TIMING] >> 30
        stream = sequential and cooldown and not (self.regs[M0_TIMING] >> 28) & 3
        return (phases[1] if stream else phases[0] + phases[1]) * clkdiv

    def set_read_mode(self, clkdiv: int, mode: int = 0) -> None:
        """What the ROM's ``flash_select_xip_read_mode(mode, clkdiv)`` leaves (pico-bootrom-rp2350
        ``varm_generic_flash.c``): DIRECT_CSR = CLKDIV only (direct mode off, no chip select
        asserted), M0_TIMING.CLKDIV = ``clkdiv``, M0_RFMT/M0_RCMD of ``mode``
        (:data:`ROM_READ_MODES`; ``flash_exit_xip`` and ``flash_enter_cmd_xip``: 0, serial 03h)."""
        self.regs[DIRECT_CSR] = (clkdiv & 0xFF) << 22
        self.regs[M0_TIMING] = (self.regs[M0_TIMING] & ~0xFF) | (clkdiv & 0xFF)
        self.regs[M0_RFMT], self.regs[M0_RCMD] = ROM_READ_MODES.get(mode, ROM_READ_MODES[0])

    # -- direct mode ---------------------------------------------------------------------------
    def _flush(self) -> None:
        if not self.tx:
            return
        frame, self.tx = self.tx, []
        flash = self.pins.flash
        held = bool(self.regs[DIRECT_CSR] & CSR_ASSERT_CS0N)
        if not held:
            flash.select()
        for value, nbytes, serial, push in frame:
            got = 0
            for i in range(nbytes):
                byte = flash.exchange((value >> (8 * (nbytes - 1 - i))) & 0xFF) if serial else 0
                got = (got << 8) | byte
                self.shifted += 1
            if push:
                self.rx.append(got)
        if not held:
            flash.deselect()

    def read32(self, offset: int) -> int:
        if offset == DIRECT_CSR:
            if not self.regs[DIRECT_CSR] & CSR_ASSERT_CS0N:
                self._flush()
            csr = self.regs[DIRECT_CSR] & ~(CSR_BUSY | CSR_RXEMPTY | (7 << 18))
            csr |= CSR_TXEMPTY | (CSR_RXEMPTY if not self.rx else 0) | (min(len(self.rx), 7) << 18)
            return csr
        if offset == DIRECT_RX:
            self._flush()
            return self.rx.popleft() if self.rx else 0
        return self.regs.get(offset, 0)

    def write32(self, offset: int, value: int) -> None:
        value &= 0xFFFFFFFF
        if offset == DIRECT_TX:
            if self.regs[DIRECT_CSR] & CSR_EN:
                serial = (value >> TX_IWIDTH_SHIFT) & 3 == 0
                nbytes = 2 if value & TX_DWIDTH else 1
                self.tx.append((value & 0xFFFF, nbytes, serial, not value & TX_NOPUSH))
                if self.regs[DIRECT_CSR] & CSR_ASSERT_CS0N:
                    self._flush()
            return
        if offset == DIRECT_CSR:
            self._flush()
            before = self.regs[DIRECT_CSR]
            self.regs[DIRECT_CSR] = value & ~(CSR_BUSY | CSR_TXEMPTY | CSR_RXEMPTY)
            flash = self.pins.flash
            if value & CSR_ASSERT_CS0N and not before & CSR_ASSERT_CS0N:
                flash.select()
            elif before & CSR_ASSERT_CS0N and not value & CSR_ASSERT_CS0N:
                flash.deselect()
            if not value & CSR_EN:
                self.rx.clear()
            return
        if offset in (DIRECT_RX,):
            return
        self.regs[offset] = value


class Rcp:
    """The redundancy coprocessor (coprocessor 7, section 3.6.3) as far as setting up its salt:
    ``mrc p7, #1, Rt, c0, c0, #0`` reads the canary status (0xA500A500 when this core's salt
    is valid, 0x00C300C3 before; to APSR_nzcv, N and C set when valid), ``mcrr p7, #8, Rt,
    Rt2, c0`` / ``c1`` write core 0's / core 1's salt. A second salt write, or any other RCP
    instruction before the salt is set, is an RCP fault (the real part raises NMI and stalls the
    coprocessor: the model's core stops with a fault); other RCP instructions (canary and value
    checks) are not modelled and stop the core too. Coprocessor 7 must be enabled in CPACR
    (CP7 bits [15:14]), else the instruction is a NOCP UsageFault.

    :param cpacr: returns the current CPACR value.
    """

    TRUE, FALSE = 0xA500A500, 0x00C300C3

    def __init__(self, cpacr) -> None:
        self._cpacr = cpacr
        self.salt = [None, None]  # per core: the 64-bit salt, or None

    def reset(self) -> None:
        """A system reset clears the salts."""
        self.salt = [None, None]

    def execute(self, first: int, second: int, cpu) -> bool:
        """Execute an RCP instruction (``Cpu.add_coprocessor`` handler).

        :raises RuntimeError: an RCP fault (the core stops with it).
        """
        if not (self._cpacr() >> 14) & 3:
            return False  # CP7 disabled: NOCP UsageFault
        if first & 0xEFF0 == 0xEC40:  # MCRR: opc1 [7:4], CRm [3:0] of the second half-word
            opc1, crm = (second >> 4) & 0xF, second & 0xF
            if opc1 == 8 and crm in (0, 1):
                if self.salt[crm] is not None:
                    raise RuntimeError("RCP fault: the salt of core %d was written twice" % crm)
                low, high = cpu.read_reg((second >> 12) & 0xF), cpu.read_reg(first & 0xF)
                self.salt[crm] = (high << 32) | low
                return True
        elif first & 0xEF10 == 0xEE10:  # MRC: opc1 [7:5], CRn [3:0]; Rt, opc2, CRm
            opc1, crn = (first >> 5) & 7, first & 0xF
            rt, opc2, crm = (second >> 12) & 0xF, (second >> 5) & 7, second & 0xF
            if (opc1, crn, opc2, crm) == (1, 0, 0, 0):
                valid = self.salt[0] is not None
                if rt == 15:
                    cpu.set_flags(0b1010 if valid else 0)
                else:
                    cpu.write_reg(rt, self.TRUE if valid else self.FALSE)
                return True
        if self.salt[0] is None:
            raise RuntimeError("RCP fault: an RCP instruction before the salt was set")
        raise RuntimeError("RCP instruction %04x %04x not modelled" % (first, second))


class AccessCtrl(RegisterDevice):
    """ACCESSCTRL (section 10.6): every write needs the password 0xACCE in [31:16] (a wrong one
    is a bus fault); LOCK bits once set stay set until a reset; CFGRESET bit 0 resets the other
    registers to their defaults (counted in ``cfgresets``)."""

    def __init__(self) -> None:
        self.regs: Dict[int, int] = {}
        self.cfgresets = 0
        self.reset()

    def reset(self) -> None:
        """Reset values (LOCK 0x4: the DMA's lock bit)."""
        self.regs = {LOCK: LOCK_RESET}

    def read32(self, offset: int) -> int:
        return self.regs.get(offset, 0)

    def peek32(self, offset: int) -> int:
        return self.read32(offset)

    def write32(self, offset: int, value: int) -> None:
        if value >> 16 != ACCESSCTRL_PASSWORD:
            raise BusError(ACCESSCTRL_BASE + offset, "ACCESSCTRL write without its password")
        value &= 0xFFFF
        if offset == LOCK:
            self.regs[LOCK] |= value & 0xF
        elif offset == CFGRESET:
            if value & 1:
                self.cfgresets += 1
                self.regs = {k: v for k, v in self.regs.items() if k in (LOCK, FORCE_CORE_NS)}
        else:
            self.regs[offset] = value


def otp_chip_id_rows(uid: bytes) -> Dict[int, int]:
    """OTP rows CHIPID0-3 (rows 0-3, 16 bits each) for the 8-byte chip ID ``uid``, so that
    pico-sdk's ``pico_get_unique_board_id`` returns ``uid``: its bytes are CHIPID3..CHIPID0, most
    significant byte first (pico-sdk ``pico_unique_id/unique_id.c``, RP2350 branch)."""
    value = int.from_bytes(uid, "big")
    return {row: (value >> (16 * row)) & 0xFFFF for row in range(4)}


class _Otp(RegisterDevice):
    """OTP's ECC read alias (OTP_DATA_BASE): one 16-bit row per half-word (a word read gives two
    rows, the lower in [15:0]); only the chip ID rows are programmed."""

    def __init__(self, rows: Dict[int, int]) -> None:
        self.rows = rows

    def read32(self, offset: int) -> int:
        row = offset // 2
        return self.rows.get(row, 0) | (self.rows.get(row + 1, 0) << 16)


class _Maintenance(RegisterDevice):
    """The XIP maintenance window: writes there are cache maintenance (the model flushes its
    last-line cache); reads return 0."""

    def __init__(self, timing: XipTiming) -> None:
        self.timing = timing

    def write32(self, offset: int, value: int) -> None:
        self.timing.flush()


class _Port(RomPortBase):
    """The RP2350 as the boot ROM's native functions see it: the QMI's direct-mode divider
    (DIRECT_CSR.CLKDIV) times the SPI."""

    def __init__(self, board: ChipBoard, pins: QspiPins, qmi: Qmi, rcp: Rcp) -> None:
        super().__init__(board, pins)
        self.qmi, self.rcp = qmi, rcp

    def sck_divider(self) -> int:
        return max(1, (self.qmi.regs[DIRECT_CSR] >> 22) & 0xFF)

    def release_cs(self) -> None:
        """RP2350's flash_flush_cache releases no chip select (datasheet 5.4.8.8)."""

    def ssi_write(self, offset: int, value: int) -> None:
        """No SSI on RP2350 (the ROM's read mode goes by :meth:`set_read_mode`)."""

    def set_read_mode(self, clkdiv: int, mode: int = 0) -> None:
        self.qmi.set_read_mode(clkdiv, mode)

    def on_boot(self) -> None:
        # The ROM's boot path sets the RCP salt (pico-bootrom-rp2350 varm_boot_path.c).
        for core in (0, 1):
            if self.rcp.salt[core] is None:
                self.rcp.salt[core] = 0


def attach(board: ChipBoard) -> None:
    """Add the RP2350's ROM, QMI and flash, RCP, ACCESSCTRL, SYSINFO, OTP and ADIv6 debug port."""
    flash_nvm = board.nvm["flash"]
    flash_uid = hashlib.sha256(b"flash" + board.target_uid).digest()[:8]  # the flash chip's own ID
    flash = SpiNorFlash(flash_nvm, flash_uid, W25Q32_JEDEC)
    pins = QspiPins(flash)
    qmi = Qmi(pins)
    rcp = Rcp(lambda: board.bus.read(0xE000ED88, 4))
    rom = Rp2350BootRom(_Port(board, pins, qmi, rcp))
    accessctrl = AccessCtrl()
    #: The chip's other models, for tests and the PICOBOOT device.
    rom.parts = SimpleNamespace(qmi=qmi, rcp=rcp, accessctrl=accessctrl, flash=flash)
    board.chip = rom

    board.cpu.add_coprocessor(7, lambda first, second: rcp.execute(first, second, board.cpu))
    xip = attach_rom_and_xip(board, rom, qmi, XIP_WINDOWS, XIP_WINDOW_SIZE)
    board.bus.add(DeviceRegion(XIP_MAINTENANCE, XIP_WINDOW_SIZE, _Maintenance(xip), "xip-maintenance"))
    board.cpu.map_mmio(XIP_MAINTENANCE, XIP_WINDOW_SIZE)

    clocks = Clocks(RP2350_CLOCKS)
    for base, device, name in clocks.devices():
        board.bus.add(DeviceRegion(base, 0x4000, device, name))
    board.clock_hz = clocks.sys_hz
    for hook in (qmi.reset, rcp.reset, accessctrl.reset, clocks.reset):
        board.add_reset_hook(hook)
    board.bus.add(DeviceRegion(QMI_BASE, 0x1000, qmi, "qmi"))
    board.bus.add(DeviceRegion(ACCESSCTRL_BASE, 0x1000, accessctrl, "accessctrl"))
    board.bus.add(DeviceRegion(SYSINFO_BASE, 0x1000, ValueRegisters({0x00: CHIP_ID}), "sysinfo"))
    board.bus.add(DeviceRegion(OTP_DATA_BASE, 0x2000, _Otp(otp_chip_id_rows(board.target_uid)), "otp-data"))
    board.bus.add(DeviceRegion(OTP_BASE, 0x1000, ValueRegisters({OTP_CRITICAL: 0}), "otp"))
    board.bus.add(DeviceRegion(SIO_BASE, 0x1000, ValueRegisters({0x00: 0}), "sio"))  # CPUID: core 0
    board.cpu.map_mmio(SIO_BASE, 0x1000)

    def debug_port(aps: Dict[int, AccessPortModel]) -> MultidropWire:
        space = {
            ROOT_TABLE: RootRomTable([CORE0_AP, CORE1_AP], RPI_JEP106, ROOT_TABLE_PART, absent=[CORE1_AP]),
            CORE0_AP: ApV2(board.spec.ap_idr, board.bus, 0xE00FF000, board.spec.ap_wrap, guard=board.debug_guard),
        }
        dp = SwDpV3(board.spec.dpidr, TARGETID, space, root=ROOT_TABLE)
        return MultidropWire([dp], sole_answers=True)

    board.set_debug_port(debug_port)
