"""Raspberry Pi RP2040 specifics: multi-drop SWD, the boot ROM, XIP flash behind the SSI.

Sources: RP2040 datasheet (build 2024-05) section 2.3.4 "Debug" (two SW-DPs on one multi-drop
bus, TARGETSEL 0x01002927 core 0 / 0x11002927 core 1, the Rescue DP 0xF1002927), 2.8 "Bootrom",
2.19.6.2 IO_QSPI (GPIO_QSPI_SS_CTRL), 4.10 SSI (DW_apb_ssi registers), 2.20 SYSINFO, 2.3.1.1
SIO CPUID; the atomic register aliases of APB peripherals (+0x1000 XOR, +0x2000 set, +0x3000
clear: 2.1.2). pyOCD's use: ``pyocd/target/family/target_rp2.py``.

Modelled: core 0 behind its DP with one AHB-AP; core 1's DP answers TARGETSEL, DPIDR, TARGETID
and DLPIDR but has no AP (the second core is not emulated); the Rescue DP, whose CDBGPWRUPREQ
resets the chip when cleared and makes the boot ROM park the core (a WFE loop); 264 KiB SRAM;
the boot ROM (:mod:`piflash.sim.chips.rp2_bootrom`); the Pico's 2 MiB W25Q16JV behind XIP at
0x10000000 (always coherent: the XIP cache is not modelled; the debugger and the core see the
2 MiB repeated through each 16 MiB XIP window and its aliases, as the part ignores A23-A21) and
behind the SSI's serial mode; the QSPI chip-select override; RESETS, XOSC, PLL_SYS and the clk_sys mux
(:mod:`piflash.sim.chips.rp2_clocks`), whose system clock the board reports (``clock_hz``).
The flash's 64-bit unique ID is the board's ``target_uid``.
"""

from __future__ import annotations

from typing import Dict, List

from piflash.sim.chips.base import ChipBoard
from piflash.sim.chips.rp2_bootrom import BootRom
from piflash.sim.chips.rp2_clocks import RP2040_CLOCKS, Clocks
from piflash.sim.chips.rp2_common import (
    RomPortBase,
    ValueRegisters,
    XipCtrl,
    attach_rom_and_xip,
)
from piflash.sim.debug.dap import AccessPortModel, SwDp
from piflash.sim.debug.multidrop import MultidropDp, MultidropWire
from piflash.sim.memory.bus import DeviceRegion, RegisterDevice
from piflash.sim.memory.spiflash import SpiNorFlash

__all__ = [
    "attach",
    "TARGETSEL_CORE0",
    "TARGETSEL_CORE1",
    "TARGETSEL_RESCUE",
    "TARGETID",
    "XIP_SSI_BASE",
    "IO_QSPI_BASE",
    "PADS_QSPI_BASE",
    "SIO_BASE",
    "SYSINFO_BASE",
    "Ssi",
    "IoQspi",
    "PadsQspi",
    "FAST_SCK_HZ",
]

#: TARGETID: TREVISION 0 [31:28], TPARTNO 0x1002 [27:12], TDESIGNER 0x493 [11:1] (JEP106
#: Raspberry Pi), bit 0 set (2.3.4.2); TARGETSEL carries the DP's instance in [31:28] instead.
TARGETID = 0x01002927
TARGETSEL_CORE0, TARGETSEL_CORE1, TARGETSEL_RESCUE = 0x01002927, 0x11002927, 0xF1002927
XIP_SSI_BASE = 0x18000000
XIP_CTRL_BASE = 0x14000000
#: XIP windows: cached, no-allocate, no-cache, no-cache no-allocate (2.6.3), 16 MiB each.
XIP_WINDOWS, XIP_WINDOW_SIZE = (0x10000000, 0x11000000, 0x12000000, 0x13000000), 0x1000000
IO_QSPI_BASE = 0x40018000
PADS_QSPI_BASE = 0x40020000
SYSINFO_BASE = 0x40000000
SIO_BASE = 0xD0000000
#: SYSINFO CHIP_ID of an RP2040-B2: REVISION 2 [31:28], PART 0x0002 [27:12], MANUFACTURER
#: 0x927 [11:0] (datasheet 2.20.2; "1 for B0/B1, 2 for B2": pico-sdk's rp2040_chip_version,
#: pico/platform.h).
CHIP_ID = 0x20002927
#: GPIO_QSPI_SS_CTRL (2.19.6.2): OUTOVER [9:8]: 0 the peripheral's signal, 1 inverted, 2 low,
#: 3 high.
SS_CTRL = 0x0C

# SSI registers (4.10.13).
CTRLR0, CTRLR1, SSIENR, SER, BAUDR, TXFLR, RXFLR, SR, DR0 = 0x00, 0x04, 0x08, 0x10, 0x14, 0x20, 0x24, 0x28, 0x60
#: SPI_CTRLR0 (4.10.13): XIP_CMD [31:24] (reset 03h), WAIT_CYCLES [15:11], INST_L [9:8] (2: 8
#: bits), ADDR_L [5:2] (in 4 bits), TRANS_TYPE [1:0] (0: instruction and address on one line).
SPI_CTRLR0, SPI_CTRLR0_RESET = 0xF4, 0x03000000
SR_TFNF, SR_TFE, SR_RFNE = 0x02, 0x04, 0x08
#: PADS_QSPI registers and reset values (RP2040 datasheet 2.19.6.4; pico-sdk
#: hardware_regs/pads_qspi.h): VOLTAGE_SELECT 0x00, GPIO_QSPI_SCLK 0x04 (0x56: input enabled,
#: 4 mA, pull-down, Schmitt trigger, slow slew), SD0-SD3 0x08-0x14 (0x52), SS 0x18 (0x5A).
PADS_RESET = {0x00: 0x00, 0x04: 0x56, 0x08: 0x52, 0x0C: 0x52, 0x10: 0x52, 0x14: 0x52, 0x18: 0x5A}
#: The fastest SCK, Hz, the model takes the QSPI pads at their reset values to carry: the 31.25 MHz
#: piflash ran the flash at with them (an assumption: no datasheet figure). Above it, a transfer
#: counts in ``QspiPins.untuned_transfers`` unless the pads are as boot stage 2 sets them before
#: it runs the flash at clk_sys / 2 (pico-sdk boot2_w25q080.S: SCLK 8 mA with fast slew, the
#: data lines' Schmitt triggers off "to reduce delay").
FAST_SCK_HZ = 31.25e6


class QspiPins:
    """The flash's /CS as the SSI and the IO_QSPI override drive it.

    :param flash: The serial flash on the pins.
    """

    def __init__(self, flash: SpiNorFlash) -> None:
        self.flash = flash
        self.override = 0  # OUTOVER of GPIO_QSPI_SS_CTRL
        #: The pads (:class:`PadsQspi`), once attached; the chip's clock (a callable, Hz).
        self.pads: "PadsQspi | None" = None
        self.clock_hz = None
        #: Transfers made at an SCK above :data:`FAST_SCK_HZ` on pads not set up for it.
        self.untuned_transfers = 0

    def note_transfer(self, divider: int) -> None:
        """A transfer at SCK = clk_sys / ``divider``: counted in :attr:`untuned_transfers`
        when that is above :data:`FAST_SCK_HZ` and the pads are not set up for it."""
        if (
            self.clock_hz is not None
            and self.pads is not None
            and self.clock_hz() / divider > FAST_SCK_HZ
            and not self.pads.tuned()
        ):
            self.untuned_transfers += 1

    def set_override(self, outover: int) -> None:
        """A write of OUTOVER: 2 holds /CS low, 3 high; 0/1 hand it back to the SSI."""
        self.override = outover & 3
        if self.override == 2:
            if not self.flash.selected:
                self.flash.select()
        elif self.flash.selected:
            self.flash.deselect()

    def command(self, out: bytes, read: int = 0) -> bytes:
        """An instruction driven by the ROM (it owns the pins while it runs)."""
        return self.flash.command(out, read)


class Ssi(RegisterDevice):
    """The XIP SSI, enough for a boot stage 2 and a debugger to talk to the flash.

    In serial (standard SPI) frames, bytes written to DR0 are shifted out and their answers
    queued for DR0 reads. With /CS under the SSI's control, the frames queued since the last
    status read form one transfer (/CS low for all of them, as when the FIFO is filled faster
    than it drains). In quad frames in EEPROM-read mode (CTRLR0 SPI_FRF 2, TMOD 3), the FIFO's
    entries are an instruction (SPI_CTRLR0.INST_L 8 bits) and a 32-bit address field (ADDR_L 8:
    the 24-bit address, then 8 mode bits), then CTRLR1.NDF + 1 frames are read: what boot stage
    2 sends to put the flash in EBh's continuous read mode (pico-sdk
    ``src/rp2040/boot_stage2/boot2_w25q080.S``: EBh, then A0h as the address field, with
    WAIT_CYCLES 4); the flash's answer is :meth:`SpiNorFlash.quad_io_read`'s. Any other
    dual or quad frame is not sent to the flash. SER does not gate /CS: the RP2040's SSI has
    the one flash (boot stage 2 never writes SER)."""

    def __init__(self, pins: QspiPins) -> None:
        self.pins = pins
        self.regs: Dict[int, int] = {}
        self.tx: List[int] = []
        self.rx: List[int] = []
        #: Bytes shifted to the flash through DR0 so far (their SPI time is the caller's to
        #: charge: the simulated BOOTSEL device does for code its EXEC runs).
        self.shifted = 0
        self.reset()

    def reset(self) -> None:
        """Reset values (4.10.13): disabled, 8-bit frames, no XIP set up."""
        self.regs = {CTRLR0: 0x00070000, BAUDR: 0, SSIENR: 0, SER: 0, SPI_CTRLR0: SPI_CTRLR0_RESET}
        self.tx, self.rx = [], []

    def xip_ready(self) -> bool:
        """Whether XIP reads are served: the SSI enabled in EEPROM-read mode with 32-bit frames,
        as ``flash_enter_cmd_xip`` (serial 03h) and boot stage 2 (quad EBh) leave it. After
        ``flash_exit_xip`` (8-bit transmit-and-receive frames) or a reset it is not."""
        ctrlr0 = self.regs.get(CTRLR0, 0)
        return (
            bool(self.regs.get(SSIENR, 0) & 1)
            and (ctrlr0 >> 8) & 3 == 3
            and (ctrlr0 >> 16) & 0x1F == 31
            and self.read_phases() is not None
        )

    def read_phases(self):
        """SCK cycles of one 8-byte XIP read in the SSI's set-up, or None when the flash does
        not answer it: in standard and dual SPI frames (CTRLR0.SPI_FRF 0, 1) the instruction
        and 24-bit address on one line (SPI_CTRLR0: INST_L 8 bits, ADDR_L 24 bits, TRANS_TYPE 0),
        XIP_CMD and WAIT_CYCLES as the flash's instruction wants them
        (``SpiNorFlash.read_cycles``); in quad frames boot stage 2's EBh continuous read
        (:meth:`continuous_read`): no instruction, the 24-bit address and the mode bits
        (XIP_CMD, appended to the address when INST_L is 0: RP2040 datasheet 4.10.13) on four
        lines, 4 dummy clocks, 64 data bits on four lines (W25Q16JV datasheet 8.2.12: 28 SCK),
        answered only while the flash is in its continuous read mode."""
        frf = (self.regs.get(CTRLR0, 0) >> 21) & 3
        spi = self.regs.get(SPI_CTRLR0, SPI_CTRLR0_RESET)
        if frf == 2:
            flash = self.pins.flash
            if self.continuous_read() and flash.continuous and flash.quad_enabled:
                return 12, 16
            return None
        if frf == 3 or (spi >> 8) & 3 != 2 or (spi >> 2) & 0xF != 6 or spi & 3:
            return None
        return self.pins.flash.read_cycles(spi >> 24, 1, (spi >> 11) & 0x1F, 2 if frf == 1 else 1)

    def continuous_read(self) -> bool:
        """Whether SPI_CTRLR0 holds boot stage 2's XIP set-up for EBh's continuous read mode:
        TRANS_TYPE 2 (address in the frame format), ADDR_L 8 (32 bits: address and mode
        bits), INST_L 0 (no instruction), WAIT_CYCLES 4 (pico-sdk boot2_w25q080.S)."""
        spi = self.regs.get(SPI_CTRLR0, SPI_CTRLR0_RESET)
        return spi & 3 == 2 and (spi >> 2) & 0xF == 8 and (spi >> 8) & 3 == 0 and (spi >> 11) & 0x1F == 4

    def line_filled(self) -> None:
        """An XIP cache line was read from the flash: in the continuous read set-up its mode
        bits (XIP_CMD) tell the flash whether to stay in that mode. (One debugger access is
        told once: a block read across lines with mode bits other than A0h returns every line,
        where the part would answer only the first; only a one-word read ends the mode here.)"""
        self.pins.note_transfer(self.divider())
        if (self.regs.get(CTRLR0, 0) >> 21) & 3 == 2 and self.continuous_read():
            self.pins.flash.quad_io_read(False, self.regs.get(SPI_CTRLR0, 0) >> 24)

    def divider(self) -> int:
        """clk_sys cycles per SCK: BAUDR.SCKDV (even, at least 2; 4.10.13)."""
        return max(2, self.regs.get(BAUDR, 0) & 0xFFFE)

    def miss_cycles(self, sequential: bool = False) -> int:
        """clk_sys cycles of one XIP cache-line fill (8 bytes): the SCK cycles of
        :meth:`read_phases` (03h: 32 of instruction and address, 64 of data), each fill a
        transfer of its own, ``sequential`` or not (the SSI keeps no chip select between them),
        one SCK per BAUDR clk_sys cycles (4.10.13)."""
        phases = self.read_phases() or (32, 64)
        return sum(phases) * self.divider()

    def _flush(self) -> None:
        if not self.tx:
            return
        data, self.tx = self.tx, []
        self.pins.note_transfer(self.divider())
        frf = (self.regs[CTRLR0] >> 21) & 3
        if frf == 2 and (self.regs[CTRLR0] >> 8) & 3 == 3:
            self._quad_read(data)
            return
        if frf:  # other dual/quad frames: not modelled
            self.rx += [0] * len(data)
            return
        data = [b & 0xFF for b in data]
        flash = self.pins.flash
        self.shifted += len(data)
        if self.pins.override == 2:  # /CS held low by software
            self.rx += [flash.exchange(b) for b in data]
        elif self.pins.override == 3:
            self.rx += [0xFF] * len(data)  # nobody selected: the line floats high
        else:
            flash.select()
            self.rx += [flash.exchange(b) for b in data]
            flash.deselect()
        del self.rx[:-16]  # 16-entry RX FIFO: older entries overrun

    def _quad_read(self, frames: List[int]) -> None:
        """Quad frames in EEPROM-read mode (see the class docstring): an EBh read with its
        instruction (INST_L 8 bits) or, in the continuous read mode, without (INST_L 0), a
        32-bit address field (ADDR_L 8) and 4 wait cycles. The NDF + 1 frames read are the
        flash's bytes, the first in the top byte, when it answers, else 0."""
        spi = self.regs.get(SPI_CTRLR0, SPI_CTRLR0_RESET)
        inst = (spi >> 8) & 3 == 2
        count = (self.regs.get(CTRLR1, 0) & 0xFFFF) + 1
        flash = self.pins.flash
        answered = False
        # TRANS_TYPE: 1 sends the instruction on one line and the address on four (EBh's
        # form), 2 both on four (no instruction then); anything else is not an EBh the flash takes.
        if (
            len(frames) == 1 + inst
            and (spi >> 2) & 0xF == 8
            and (spi >> 11) & 0x1F == 4
            and spi & 3 == (1 if inst else 2)
            and (not inst or frames[0] & 0xFF == 0xEB)
        ):
            field = frames[-1]
            answered = flash.quad_io_read(inst, field & 0xFF)
            address = (field >> 8) & 0xFFFFFF
        self.shifted += len(frames) + 4 * count
        if answered:
            data = flash.read(address % flash.nvm.size, 4 * count) or bytes(4 * count)
            self.rx += [int.from_bytes(data[i : i + 4], "big") for i in range(0, len(data), 4)]
        else:
            self.rx += [0] * count
        del self.rx[:-16]

    def read32(self, offset: int) -> int:
        if offset == SR:
            self._flush()
            return SR_TFNF | SR_TFE | (SR_RFNE if self.rx else 0)
        if offset == DR0:
            self._flush()
            return self.rx.pop(0) if self.rx else 0
        if offset == RXFLR:
            self._flush()
            return len(self.rx)
        if offset == TXFLR:
            return 0
        return self.regs.get(offset, 0)

    def write32(self, offset: int, value: int) -> None:
        if offset == DR0:
            if self.regs[SSIENR] & 1:  # one frame of DFS_32 + 1 bits
                self.tx.append(value & ((2 << ((self.regs[CTRLR0] >> 16) & 0x1F)) - 1))
            return
        if offset == SSIENR and not value & 1:
            self.tx, self.rx = [], []  # disabling the SSI clears its FIFOs
        self.regs[offset] = value & 0xFFFFFFFF


class IoQspi(RegisterDevice):
    """IO_QSPI: only GPIO_QSPI_SS_CTRL matters to the model (the /CS override); with the APB
    atomic aliases (offset bits [13:12]: 0 write, 1 XOR, 2 set, 3 clear)."""

    def __init__(self, pins: QspiPins) -> None:
        self.pins = pins
        self.regs: Dict[int, int] = {}

    def read32(self, offset: int) -> int:
        return self.regs.get(offset & 0xFFF, 0)

    def write32(self, offset: int, value: int) -> None:
        reg, alias = offset & 0xFFF, (offset >> 12) & 3
        old = self.regs.get(reg, 0)
        new = (value, old ^ value, old | value, old & ~value)[alias] & 0xFFFFFFFF
        self.regs[reg] = new
        if reg == SS_CTRL:
            self.pins.set_override((new >> 8) & 3)


class PadsQspi(RegisterDevice):
    """PADS_QSPI (datasheet 2.19.6.4), with the APB atomic aliases: registers that read back
    what was written, reset by a chip reset and by the boot ROM's ``connect_internal_flash``
    (which resets IO_QSPI and PADS_QSPI: pico-bootrom-rp2040 program_flash_generic.c)."""

    def __init__(self) -> None:
        self.regs: Dict[int, int] = dict(PADS_RESET)

    def reset(self) -> None:
        """The reset values (:data:`PADS_RESET`)."""
        self.regs = dict(PADS_RESET)

    def tuned(self) -> bool:
        """Whether the pads are as boot stage 2 sets them for clk_sys / 2: SCLK's drive 8 mA or
        more with fast slew, no data line's Schmitt trigger on (boot2_w25q080.S)."""
        sclk = self.regs.get(0x04, 0)
        return (sclk >> 4) & 3 >= 2 and sclk & 1 and not any(self.regs.get(o, 0) & 2 for o in (0x08, 0x0C, 0x10, 0x14))

    def read32(self, offset: int) -> int:
        return self.regs.get(offset & 0xFFF, 0)

    def write32(self, offset: int, value: int) -> None:
        reg, alias = offset & 0xFFF, (offset >> 12) & 3
        old = self.regs.get(reg, 0)
        self.regs[reg] = (value, old ^ value, old | value, old & ~value)[alias] & 0xFF


class _Port(RomPortBase):
    """The RP2040 as the boot ROM's native functions see it: the SSI's BAUDR times the SPI
    (SCKDV, 4.10.13: even, at least 2)."""

    def __init__(self, board: ChipBoard, pins: QspiPins, ssi: "Ssi") -> None:
        super().__init__(board, pins)
        self.ssi = ssi

    def sck_divider(self) -> int:
        return max(2, self.ssi.regs.get(BAUDR, 0) & 0xFFFE)

    def reset_qspi_pads(self) -> None:
        if self.pins.pads is not None:
            self.pins.pads.reset()

    def ssi_write(self, offset: int, value: int) -> None:
        self.ssi.write32(offset, value)

    def release_cs(self) -> None:
        self.pins.set_override(0)


def attach(board: ChipBoard) -> None:
    """Add the RP2040's ROM, flash interface, SIO/SYSINFO registers and multi-drop DPs."""
    flash_nvm = board.nvm["flash"]
    flash = SpiNorFlash(flash_nvm, board.target_uid)
    pins = QspiPins(flash)
    ssi = Ssi(pins)
    rom = BootRom(_Port(board, pins, ssi))
    board.chip = rom  # for tests and the PICOBOOT model

    # The no-allocate / no-cache aliases at 0x11, 0x12, 0x13 << 24 (RP2040 datasheet 2.6.3) repeat
    # the 2 MiB as the window does (W25Q16JV: A23-A21 ignored): 0x10FFD000 reads 0x1FD000.
    xip = attach_rom_and_xip(board, rom, ssi, XIP_WINDOWS, XIP_WINDOW_SIZE, uncached=(0x12, 0x13))

    board.add_reset_hook(ssi.reset)  # XIP is set up again by boot stage 2
    board.bus.add(DeviceRegion(XIP_SSI_BASE, 0x1000, ssi, "xip-ssi"))
    board.bus.add(DeviceRegion(XIP_CTRL_BASE, 0x1000, XipCtrl(xip), "xip-ctrl"))
    board.cpu.map_mmio(XIP_CTRL_BASE, 0x1000)
    board.cpu.map_mmio(XIP_SSI_BASE, 0x1000)
    board.bus.add(DeviceRegion(IO_QSPI_BASE, 0x4000, IoQspi(pins), "io-qspi"))
    pads = PadsQspi()
    pins.pads = pads
    board.bus.add(DeviceRegion(PADS_QSPI_BASE, 0x4000, pads, "pads-qspi"))
    board.add_reset_hook(pads.reset)
    clocks = Clocks(RP2040_CLOCKS)
    for base, device, name in clocks.devices():
        board.bus.add(DeviceRegion(base, 0x4000, device, name))
    board.add_reset_hook(clocks.reset)  # the model resets them with every system reset
    board.clock_hz = clocks.sys_hz
    pins.clock_hz = clocks.sys_hz
    board.bus.add(DeviceRegion(SYSINFO_BASE, 0x1000, ValueRegisters({0x00: CHIP_ID, 0x04: 0x2}), "sysinfo"))
    board.bus.add(DeviceRegion(SIO_BASE, 0x1000, ValueRegisters({0x00: 0}), "sio"))  # CPUID: core 0
    board.cpu.map_mmio(SIO_BASE, 0x1000)

    def rescue(powered: bool) -> None:
        # 2.3.4.2: the Rescue DP's CDBGPWRUPREQ resets the chip; the boot ROM then halts the
        # core (CHIP_RESET.PSM_RESTART_FLAG), so a debugger gets in before broken firmware runs.
        if not powered:
            rom.rescue = True
            board.system_reset()

    def debug_port(aps: Dict[int, AccessPortModel]) -> SwDp:
        dpidr = board.spec.dpidr
        return MultidropWire(
            [
                MultidropDp(dpidr, TARGETID, 0x0, aps),
                MultidropDp(dpidr, TARGETID, 0x1, {}),
                MultidropDp(dpidr, TARGETID, 0xF, {}, on_power=rescue),
            ]
        )

    board.set_debug_port(debug_port)
