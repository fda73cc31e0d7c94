"""What piflash does around pyOCD's RP2040/RP2350 flash algorithm: a faster SPI clock.

The RP2040 and RP2350 families' flash speed-ups (:class:`Rp2FlashSpeedups`, what
:mod:`piflash.flashing.plan` and :mod:`piflash.flashing.program` ask through
:func:`piflash.targets.families.flash_speedups`).

pyOCD's algorithm (``pyocd/target/family/target_rp2.py``) calls the boot ROM, whose
``flash_exit_xip`` sets the SSI to one SPI clock per 6 system clocks (``flash_init_spi``:
BAUDR = 6, pico-bootrom-rp2040 ``bootrom/program_flash_generic.c``, "hopefully-conservative baud
rate for boot and programming") and whose other flash functions leave BAUDR as they find it:
"this makes it possible for the debugger or user code to edit SPI settings, e.g. baud rate"
(the same file). After a debugger's reset the system clock is the ring oscillator (nominally
6.5 MHz, RP2040 datasheet 2.17), so each 256-byte page program spends about 1.9 ms shifting
its 260 bytes, against the flash's 0.4 ms typical page program time (W25Q16JV datasheet 9.6).

:func:`faster_spi` first runs the system clock from PLL_SYS at 125 MHz off the board's 12 MHz
crystal (:func:`pll_clock`, what pico-sdk's clocks_init does; the next reset returns to the ring
oscillator), then sets BAUDR to 2: 62.5 MHz, what pico-sdk's boot stage 2 runs the Pico's flash at
(``PICO_FLASH_SPI_CLKDIV`` 2 in the Pico's board header), with the QSPI pads as boot stage 2 sets
them for that speed (SCLK at 8 mA with fast slew, the data lines' Schmitt triggers off; the ROM's
``connect_internal_flash``, in every Init, resets them); within the W25Q16JV's 133 MHz for every
instruction the ROM's program sends and for the fast reads below (datasheet 9.6, F_R), but above
the 50 MHz of 03h Read Data (f_R), the read ``flash_enter_cmd_xip`` sets up. So before the algorithm's UnInit
(which calls it and keeps BAUDR) piflash puts BAUDR back to 4, 31.25 MHz
(:func:`cmd_xip_divider`), and a read phase ends the same way (:func:`end_reads`): whatever runs
from XIP afterwards without a reset reads within the flash's limits. A board whose crystal does
not start stays on the ring oscillator with BAUDR 2, the smallest divider the SSI takes (SCKDV is
even, 4.10.13). It is done after each initialisation of the algorithm for programming
(``flash_exit_xip`` sets 6 again every time), and :func:`enable_xip` does the same for reading.

Reading the flash: the algorithm's Init calls the ROM's ``flash_exit_xip`` for every operation,
verify included, and only its UnInit calls ``flash_enter_cmd_xip``; between the two the SSI
serves no XIP, so a debugger read of 0x10000000, or an on-target CRC over it, returns no flash
data (and after a reset-and-halt XIP is not set up at all: boot stage 2 has not run). pyOCD's
own page-read analysis reads flash in that state. :func:`enable_xip` puts the SSI in a fast XIP
mode from the debugger: on a Winbond W25Q whose Quad Enable bit is set (JEDEC ID and status
register 2, read once per session: :func:`quad_enabled`; the Pico's W25Q16JV...IQ ships with it
set), boot stage 2's own set-up
(pico-sdk ``src/rp2040/boot_stage2/boot2_w25q080.S``): an EBh Fast Read Quad I/O with the mode
bits A0h through the SSI's FIFO puts the flash in its continuous read mode, and XIP then reads
without an instruction, address and mode bits on four lines (28 SCK per 8-byte line against 03h's
96; W25Q16JV datasheet 8.2.12); on any other flash 3Bh Fast Read Dual Output (72 SCK). The XIP cache is
flushed. :func:`end_reads` ends the continuous read mode (one read with mode bits 00h) and leaves
what ``flash_enter_cmd_xip`` leaves, at BAUDR 4: the ROM's functions, a reset's boot and pyOCD
all expect a flash that takes instructions.

:func:`reads_without_init` tells, before a read, whether the algorithm's Init is needed at all:
when the SSI holds exactly ``flash_enter_cmd_xip``'s serial 03h set-up (after the unique-ID read
of the connect, a program's UnInit, or :func:`end_reads`), the flash takes instructions and the
QSPI pins are the SSI's, so :func:`enable_xip` alone makes it readable and the Init and UnInit
calls (about 9 ms of USB round trips on the Debug Probe) are saved. Anything else (a reset board
whose SSI is at its reset values, an application's boot stage 2 in quad XIP) goes through the
Init, whose ``flash_exit_xip`` sends the XIP exit sequence first.

On an RP2350 the same algorithm runs (one blob for both chips), but the flash sits behind the
QMI and every register above is elsewhere (on an RP2350 0x40028000 is IO_BANK0, 0x18000000 the
XIP maintenance window): :func:`piflash.targets.families.rp2.chip_of` tells the chips apart by the boot
ROM's header and only the RP2040 gets those writes. The RP2350's ``flash_exit_xip`` leaves XIP
readable (serial 03h reads at the QMI divider 12, pico-bootrom-rp2350 ``flash_init_spi``;
datasheet 5.4.8.4), so there is nothing to re-enable; :func:`qmi_divider` sets the divider the
ROM's program and erase use, and the XIP reads' format and divider, after :func:`pll_clock` has
run clk_sys from PLL_SYS at 150 MHz with the RP2350's addresses (:data:`RP2350_CLOCK_REGS`).
Reads go by 3Bh Fast Read Dual Output (:data:`QMI_READ_RFMT`), which the flash answers at up to
133 MHz where 03h stops at 50 MHz, with the QMI's cooldown at its longest, so that the
sequential line fills of a CRC or blank check continue one burst instead of each sending an
instruction and an address (qmi.h M0_TIMING.COOLDOWN): about 8 clk_sys cycles a byte where
serial 03h at 37.5 MHz took 48.

A chip erase: pyOCD's RP2 algorithm has no EraseAll (its ``pc_eraseAll``, 0x120000003, lies
outside the algorithm, so ``Flash.is_erase_all_supported`` is False and pyOCD erases the whole
16 MiB ``xip`` region by 4,096 sector erases: about 3 minutes at the W25Q16JV's 45 ms each, over
a 2 MiB flash that repeats through the window). :func:`erase_chip` erases the flash with its own
Chip Erase instruction instead (:func:`piflash.targets.families.rp2.chip_erase`; 5 s typical) and reports
the flash's real size.

Sector erases: the algorithm's EraseSector erases 4 KiB (45 ms typical, 400 ms maximum on the
W25Q16JV), while the flash erases an aligned 32 KiB block in 120 ms and a 64 KiB block in 150 ms
(datasheet 9.6). :func:`plan_block_erases` turns the sectors a plan must erase into the fewest
such blocks, and :func:`erase_blocks` erases them with the flash's own instructions: what the
boot ROM's ``flash_range_erase`` does when given a block size, which pyOCD's algorithm never
gives it.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from piflash.targets.algorithms import RP2_ALGORITHM, algorithm_digest
from piflash.targets.families.base import FlashSpeedups
from piflash.targets.families.rp2 import QMI_DIRECT_CSR, chip_of

if TYPE_CHECKING:
    from pyocd.core.target import Target
    from pyocd.flash.flash import Flash

__all__ = [
    "faster_spi",
    "enable_xip",
    "end_reads",
    "cmd_xip_divider",
    "reads_without_init",
    "quad_enabled",
    "pll_clock",
    "spi_divider",
    "qmi_divider",
    "is_rp2",
    "erase_chip",
    "plan_block_erases",
    "erase_blocks",
    "RP2_ALGORITHM",
    "FAST_BAUDR",
    "PLL_BAUDR",
    "QMI_CLKDIV",
    "QMI_PLL_CLKDIV",
    "CMD_XIP_BAUDR",
    "QMI_READ_RFMT",
    "QMI_READ_RCMD",
    "QMI_READ_TIMING",
    "ClockRegs",
    "CLOCK_REGS",
    "RP2040_CLOCK_REGS",
    "RP2350_CLOCK_REGS",
    "Rp2FlashSpeedups",
    "SPEEDUPS",
    "speedups_for",
]

#: (:data:`piflash.targets.algorithms.RP2_ALGORITHM`: the key of pyOCD 0.46's RP2 algorithm.)
#: SSI clock divider piflash programs with on the ring oscillator (RP2040 datasheet 4.10.13
#: BAUDR.SCKDV: even, >= 2).
FAST_BAUDR = 2
#: ... and on PLL_SYS at 125 MHz: 62.5 MHz, what the Pico's board header gives boot stage 2
#: (pico-sdk ``src/boards/include/boards/pico.h``: ``PICO_FLASH_SPI_CLKDIV`` 2; boot2_w25q080.S's
#: own default is 4), within the W25Q16JV's 133 MHz for the ROM's program instructions and for
#: EBh and 3Bh reads (datasheet 9.6, F_R), not for 03h (f_R, 50 MHz): see :data:`CMD_XIP_BAUDR`.
#: The QSPI pads are set as boot stage 2 sets them for it (:func:`_tune_pads`).
PLL_BAUDR = 2
#: The divider on PLL_SYS whenever the SSI may serve 03h XIP reads (the algorithm's UnInit,
#: ``flash_enter_cmd_xip``, leaves them at whatever BAUDR it finds, until the next Init or reset,
#: and a core resumed without a reset would run from it): 31.25 MHz, within 03h's 50 MHz.
CMD_XIP_BAUDR = 4
#: Longest wait for the crystal, the PLL or a clock mux, seconds (XOSC: about 1 ms with pico-sdk's
#: STARTUP delay; PLL lock: tens of us; RP2040 datasheet 2.16.3, 2.18.2).
CLOCK_TIMEOUT = 0.1
# The APB atomic set/clear aliases (RP2040 datasheet 2.1.2; the same on RP2350, 2.1.3).
_SET, _CLR = 0x2000, 0x3000
_XOSC_ENABLE, _XOSC_RANGE_1_15MHZ = 0xFAB << 12, 0xAA0
_CLK_REF_SRC_XOSC = 2


@dataclass(frozen=True)
class ClockRegs:
    """Where a chip's RESETS, XOSC, CLOCKS and PLL_SYS are, and the 150/125 MHz settings: the
    registers inside the blocks sit at the same offsets on both chips (RESET 0x0, RESET_DONE
    0x8; XOSC CTRL 0x0, STATUS 0x4, STARTUP 0xC; CLK_REF_CTRL 0x30, CLK_REF_SELECTED 0x38,
    CLK_SYS_CTRL 0x3C, CLK_SYS_SELECTED 0x44; PLL CS 0x0, PWR 0x4, FBDIV_INT 0x8, PRIM 0xC).

    :ivar pll_sys_bit: PLL_SYS's bit in RESET / RESET_DONE.
    :ivar xosc_startup: STARTUP.DELAY for the 12 MHz crystal.
    :ivar prim: PRIM (POSTDIV1 [18:16], POSTDIV2 [14:12]) for the target clock from a 1500 MHz VCO.
    :ivar hz: that clock, Hz.
    """

    resets: int
    xosc: int
    clocks: int
    pll_sys: int
    pll_sys_bit: int
    xosc_startup: int
    prim: int
    hz: float


#: RP2040 datasheet 2.14-2.18: PLL_SYS reset bit 12; STARTUP (12 MHz / 1000 + 128) / 256 = 47
#: (pico-sdk xosc_init, 1 ms); 1500 MHz / 6 / 2 = 125 MHz, pico-sdk's clk_sys.
RP2040_CLOCK_REGS = ClockRegs(0x4000C000, 0x40024000, 0x40008000, 0x40028000, 12, 47, (6 << 16) | (2 << 12), 125e6)
#: RP2350 (pico-sdk src/rp2350 hardware_regs addressmap.h, resets.h): PLL_SYS reset bit 14;
#: STARTUP 47 x 6 = 282 (pico-sdk xosc_init: hardware_xosc/include/hardware/xosc.h multiplies the
#: 1 ms delay by 6 by default);
#: 1500 MHz / 5 / 2 = 150 MHz, the RP2350's rated clk_sys (datasheet 8.1; pico-sdk SYS_CLK_HZ).
RP2350_CLOCK_REGS = ClockRegs(0x40020000, 0x40048000, 0x40010000, 0x40050000, 14, 282, (5 << 16) | (2 << 12), 150e6)
CLOCK_REGS = {"rp2040": RP2040_CLOCK_REGS, "rp2350": RP2350_CLOCK_REGS}
_PLL_PWR_PD, _PLL_PWR_POSTDIVPD, _PLL_PWR_VCOPD = 1 << 0, 1 << 3, 1 << 5
_SSI_CTRLR0, _SSI_CTRLR1, _SSI_SSIENR, _SSI_BAUDR, _SSI_RX_SAMPLE_DLY, _SSI_SPI_CTRLR0 = (
    0x18000000,
    0x18000004,
    0x18000008,
    0x18000014,
    0x180000F0,
    0x180000F4,
)
#: XIP by 3Bh Fast Read Dual Output (W25Q16JV datasheet 8.2.8: instruction and 24-bit address on
#: one line, 8 dummy clocks, data on two), in the SSI's registers (RP2040 datasheet 4.10.13):
#: CTRLR0 SPI_FRF dual (1) [22:21], DFS_32 31 (32-bit frames), TMOD 3 (EEPROM read); SPI_CTRLR0
#: XIP_CMD 3Bh [31:24], WAIT_CYCLES 8 [15:11], INST_L 8 bits (2) [9:8], ADDR_L 24 bits (6) [5:2],
#: TRANS_TYPE 0 (instruction and address in standard SPI). What ``flash_enter_cmd_xip`` sets is
#: the same with standard frames, 03h and no wait: 96 SCK per 8-byte line, against 72 here.
_DUAL_XIP_CTRLR0 = (1 << 21) | (31 << 16) | (3 << 8)
_DUAL_XIP_SPI_CTRLR0 = (0x3B << 24) | (8 << 11) | (2 << 8) | (6 << 2)
#: Boot stage 2's quad set-up (pico-sdk boot2_w25q080.S, RP2040 datasheet 4.10.13): CTRLR0
#: SPI_FRF quad (2) [22:21], 32-bit frames, EEPROM read. The entry, sent through DR0: SPI_CTRLR0
#: WAIT_CYCLES 4, INST_L 8 bits, ADDR_L 32 bits (8), TRANS_TYPE 1 (instruction on one line,
#: address on four); then XIP: XIP_CMD A0h (the mode bits, appended to the address when INST_L is
#: 0), WAIT_CYCLES 4, INST_L 0, ADDR_L 32 bits, TRANS_TYPE 2 (address on four lines).
_QUAD_CTRLR0 = (2 << 21) | (31 << 16) | (3 << 8)
_QUAD_ENTRY_SPI_CTRLR0 = (4 << 11) | (2 << 8) | (8 << 2) | 1
_QUAD_XIP_SPI_CTRLR0 = (0xA0 << 24) | (4 << 11) | (8 << 2) | 2
#: EBh Fast Read Quad I/O, and the address field that follows it: address 0, mode bits A0h
#: (M5-4 = 10b: stay in the continuous read mode; W25Q16JV datasheet 8.2.12).
_QUAD_READ, _CONTINUOUS_FIELD = 0xEB, 0xA0
#: What ``flash_enter_cmd_xip`` leaves (pico-bootrom-rp2040 program_flash_generic.c): serial
#: frames of 32 bits in EEPROM-read mode, XIP_CMD 03h, INST_L 8 bits, ADDR_L 24 bits.
_CMD_XIP_CTRLR0 = (31 << 16) | (3 << 8)
_CMD_XIP_SPI_CTRLR0 = (0x03 << 24) | (2 << 8) | (6 << 2)
_SSI_SR, _SSI_DR0 = 0x18000028, 0x18000060
_SR_BUSY, _SR_TFE = 1 << 0, 1 << 2
#: SR reads before an SSI that stays busy is an error: each is a round trip through the probe,
#: the entry's 28 SCK a fraction of a microsecond.
_SSI_BUSY_READS = 8
#: The XIP window that bypasses the cache and allocates nothing (RP2040 datasheet 2.6.3.1): a read
#: there is always a transfer from the flash, whatever the cache holds.
_XIP_NOCACHE_NOALLOC = 0x13000000
#: PADS_QSPI (RP2040 datasheet 2.19.6.4): GPIO_QSPI_SCLK DRIVE 8 mA [5:4] = 2 and SLEWFAST [0];
#: SCHMITT [1] of each pad.
_PADS_QSPI, _SCLK_8MA_FAST, _PAD_SCHMITT = 0x40020000, (2 << 4) | 1, 1 << 1
#: Status register 2's Quad Enable bit (W25Q16JV datasheet 7.1.4), read by 35h.
_SR2_QE = 0x02
#: The first two bytes of a Winbond W25Q's JEDEC ID (9Fh): manufacturer EFh, memory type 40h
#: (W25Q16JV datasheet table 8.1.1; the W25Q080's and W25Q32/64/128JV's the same).
_W25Q_JEDEC = bytes((0xEF, 0x40))
_QUAD: weakref.WeakKeyDictionary[Target, bool] = weakref.WeakKeyDictionary()
#: RX_SAMPLE_DLY with SCK = clk_sys / 2: data sampled one clk_sys cycle late, as pico-sdk's boot
#: stage 2 sets it for PICO_FLASH_SPI_CLKDIV 2 (src/rp2040/boot_stage2/boot2_w25q080.S).
_RX_SAMPLE_DLY = 1
#: XIP_CTRL FLUSH (datasheet 2.6.3.6): a write empties the cache; a read waits for the flush.
_XIP_CTRL_FLUSH = 0x14000004
#: RP2350: the QMI clock divider piflash programs and reads with (SCK = clk_sys / 2). After a
#: reset clk_sys is the ring oscillator, 11 MHz nominal and at most 24 MHz on an A2, 96 MHz on
#: A3 and later (RP2350 datasheet 8.3.1): SCK stays within the W25Q32RV's 50 MHz for 03h reads
#: (the Winbond JV/RV family's f_R) at any of them.
QMI_CLKDIV = 2
#: ... and on PLL_SYS at 150 MHz: 75 MHz, within the 133 MHz of every instruction the ROM's
#: program and erase send and of 3Bh reads (the JV/RV family's F_R, W25Q32JV datasheet 9.6; the
#: W25Q32RV's own table was not found). No 03h read runs at it: the window reads by 3Bh, and the
#: algorithm's UnInit (``flash_enter_cmd_xip`` = ``flash_select_xip_read_mode(0, 12)``) puts back
#: 03h at the ROM's own divider.
QMI_PLL_CLKDIV = 2
#: M0_RFMT of 3Bh Fast Read Dual Output (pico-sdk hardware/regs/qmi.h fields; W25Q32JV datasheet
#: 8.2.8: instruction and 24-bit address on one line, 8 dummy clocks, data on two lines):
#: PREFIX_LEN 8 bits [12], DUMMY_LEN 8 bits [18:16] = 2, DATA_WIDTH dual [9:8] = 1, every other
#: width single.
QMI_READ_RFMT = (1 << 12) | (2 << 16) | (1 << 8)
QMI_READ_RCMD = 0x3B
#: M0_TIMING: COOLDOWN 3 [31:30] (chip select held 192 clk_sys cycles after a transfer, so the next
#: sequential line continues it), RXDELAY 2 [10:8] (data sampled one clk_sys later, what board
#: configurations pair with CLKDIV 2: PICO_FLASH_SPI_RXDELAY), no PAGEBREAK, no MAX_SELECT; CLKDIV
#: is or-ed in.
QMI_READ_TIMING = (3 << 30) | (2 << 8)
_QMI_M0_TIMING, _QMI_M0_RFMT, _QMI_M0_RCMD = 0x400D000C, 0x400D0010, 0x400D0014
_QMI_CSR_EN, _QMI_CSR_BUSY = 1 << 0, 1 << 1
#: DIRECT_CSR reads before a QMI that stays busy is an error: each is a round trip through the
#: probe (tens of microseconds at least), the cooldown at most 192 clk_sys cycles.
_QMI_BUSY_READS = 8


def faster_spi(flash: Flash) -> bool:
    """Raise the system clock (:func:`pll_clock`) and set the SSI's clock divider to the one
    that goes with it (:func:`spi_divider`) when ``flash`` (a pyOCD ``Flash``, initialised) runs
    pyOCD's RP2 algorithm; the SSI is disabled while BAUDR changes.

    :returns: whether it did (False for every other algorithm).
    :raises pyocd.core.exceptions.TransferError: a register write failed.
    """
    if not is_rp2(flash):
        return False
    target = flash.target
    if chip_of(target) == "rp2350":
        return qmi_divider(target)
    _set_divider(target, spi_divider(pll_clock(target)))
    return True


def qmi_divider(target: Target) -> bool:
    """RP2350: run clk_sys from PLL_SYS at 150 MHz (:func:`pll_clock`), then set the QMI's
    clock divider for the boot ROM's flash functions (DIRECT_CSR.CLKDIV,
    which ``flash_range_program`` and ``flash_range_erase`` use as they find it) and for XIP
    reads (M0_TIMING.CLKDIV) to :data:`QMI_PLL_CLKDIV` (:data:`QMI_CLKDIV` when the clock
    stays on the ring oscillator; the ROM's ``flash_exit_xip`` leaves 12,
    BOOTROM_SPI_CLKDIV_DEFAULT, pico-bootrom-rp2350 ``native_generic_flash.h``), and the window's
    read format to 3Bh (:data:`QMI_READ_RFMT`, :data:`QMI_READ_TIMING`). The memory window's
    format may change only while the QMI is idle (qmi.h M0_TIMING): it is written with direct
    mode on, which pauses XIP, once DIRECT_CSR.BUSY shows the last XIP transfer's cooldown over,
    as pico-sdk does. Direct mode is off again after.

    :returns: True.
    :raises pyocd.core.exceptions.TransferError: a register access failed, or the QMI stayed
        busy for :data:`_QMI_BUSY_READS` reads (its cooldown is at most 192 clk_sys cycles).
    """
    from pyocd.core.exceptions import TransferError

    div = QMI_PLL_CLKDIV if pll_clock(target, regs=RP2350_CLOCK_REGS) else QMI_CLKDIV
    csr = target.read32(QMI_DIRECT_CSR) & ~((0xFF << 22) | 0x7 | _QMI_CSR_BUSY)
    target.write32(QMI_DIRECT_CSR, csr | (div << 22) | _QMI_CSR_EN)
    for _ in range(_QMI_BUSY_READS):
        if not target.read32(QMI_DIRECT_CSR) & _QMI_CSR_BUSY:
            break
    else:
        target.write32(QMI_DIRECT_CSR, csr | (div << 22))
        raise TransferError("the RP2350's QMI stayed busy (DIRECT_CSR.BUSY) after %d reads" % _QMI_BUSY_READS)
    target.write32(_QMI_M0_TIMING, QMI_READ_TIMING | div)
    target.write32(_QMI_M0_RFMT, QMI_READ_RFMT)
    target.write32(_QMI_M0_RCMD, QMI_READ_RCMD)
    target.write32(QMI_DIRECT_CSR, csr | (div << 22))
    return True


def spi_divider(on_pll: bool) -> int:
    """BAUDR for the system clock: :data:`FAST_BAUDR` (SCK = clk_sys / 2, at most about 6 MHz)
    on the ring oscillator, :data:`PLL_BAUDR` (125 MHz / 2 = 62.5 MHz) on PLL_SYS."""
    return PLL_BAUDR if on_pll else FAST_BAUDR


def _on_pll(target: Target) -> bool:
    """Whether the RP2040's clk_sys runs from PLL_SYS (read, not changed)."""
    regs = RP2040_CLOCK_REGS
    selected, ctrl = (r() for r in [target.read_memory(regs.clocks + off, 32, now=False) for off in (0x44, 0x3C)])
    return selected == 1 << 1 and ctrl & 0xE0 == 0


def _set_divider(target: Target, divider: int) -> None:
    """BAUDR (and the RX sample delay and QSPI pads that go with SCK = clk_sys / 2:
    :func:`_tune_pads`) with the SSI off."""
    if divider == 2:
        _tune_pads(target)
    target.write32(_SSI_SSIENR, 0)
    target.write32(_SSI_BAUDR, divider)
    target.write32(_SSI_RX_SAMPLE_DLY, _RX_SAMPLE_DLY if divider == 2 else 0)
    target.write32(_SSI_SSIENR, 1)


def _tune_pads(target: Target) -> None:
    """The QSPI pads as boot stage 2 sets them before it runs the flash at clk_sys / 2 (pico-sdk
    boot2_w25q080.S; RP2040 datasheet 2.19.6.4): SCLK at 8 mA with fast slew (GPIO_QSPI_SCLK =
    0x21), the Schmitt triggers of SD0-SD3 off (through the atomic clear alias, 2.1.2). The
    algorithm's Init undoes it: the ROM's ``connect_internal_flash`` resets PADS_QSPI."""
    target.write32(_PADS_QSPI + 0x04, _SCLK_8MA_FAST)
    for offset in (0x08, 0x0C, 0x10, 0x14):
        target.write32(_PADS_QSPI + _CLR + offset, _PAD_SCHMITT)


def cmd_xip_divider(flash: Flash) -> bool:
    """RP2040 on PLL_SYS: BAUDR :data:`CMD_XIP_BAUDR` before the algorithm's UnInit, whose
    ``flash_enter_cmd_xip`` keeps it for 03h XIP reads (see the module docstring).

    :returns: whether it wrote BAUDR (False for other chips and algorithms and on the ring
        oscillator, where every divider is within 03h's 50 MHz).
    :raises pyocd.core.exceptions.TransferError: a register access failed.
    """
    if not is_rp2(flash) or chip_of(flash.target) != "rp2040" or not _on_pll(flash.target):
        return False
    _set_divider(flash.target, CMD_XIP_BAUDR)
    return True


def quad_enabled(target: Target) -> bool:
    """Whether piflash reads the RP2040's boot flash in boot stage 2's quad mode: a Winbond
    W25Q serial flash (JEDEC ID by 9Fh: manufacturer EFh, memory type 40h; the W25Q16JV of the
    Pico, the W25Q080 and their larger siblings, whose EBh has the continuous read mode
    boot2_w25q080.S relies on: W25Q16JV datasheet 8.2.12) with its Quad Enable bit set (status
    register 2 by 35h, 7.1.4: IO2 and IO3 are data lines, not /WP and /HOLD). Read once per
    target object. Another maker's flash is read by 3Bh: 35h is not a status read everywhere
    (ISSI's IS25LP and Macronix's MX25L take it as "enter QPI"), and some quad flashes have no
    continuous read mode (pico-sdk ships other boot stage 2s for them). piflash never writes QE
    (a non-volatile bit: boot stage 2 sets it on boards that need it). The flash must take
    instructions (see :func:`piflash.targets.families.rp2.flash_command`).

    :raises pyocd.core.exceptions.TransferError: a transfer failed.
    :raises ValueError: the SSI returned no byte for one sent.
    """
    try:
        return _QUAD[target]
    except (KeyError, TypeError):
        pass
    from piflash.targets.families.rp2 import flash_command

    quad = flash_command(target, b"\x9f", 2) == _W25Q_JEDEC and bool(flash_command(target, b"\x35", 1)[0] & _SR2_QE)
    try:
        _QUAD[target] = quad
    except TypeError:
        pass
    return quad


def reads_without_init(flash: Flash) -> bool:
    """Whether ``flash`` (pyOCD's RP2 algorithm on an RP2040) can be read by :func:`enable_xip`
    without the algorithm's Init: its SSI holds exactly ``flash_enter_cmd_xip``'s serial 03h
    XIP set-up at a divider of 4 or more (one USB round trip for the four registers; see the
    module docstring). A divider of 2 is what a read phase that failed before :func:`end_reads`
    leaves after the UnInit, with the flash maybe still in its continuous read mode: the Init's
    exit sequence is needed then (on the ring oscillator, where :func:`end_reads` leaves 2 too,
    the Init runs as well).

    :raises pyocd.core.exceptions.TransferError: a register read failed.
    """
    if not is_rp2(flash) or chip_of(flash.target) != "rp2040":
        return False
    target = flash.target
    reads = [target.read_memory(a, now=False) for a in (_SSI_SSIENR, _SSI_CTRLR0, _SSI_SPI_CTRLR0, _SSI_BAUDR)]
    enabled, ctrlr0, spi_ctrlr0, baudr = (r() for r in reads)
    return [enabled, ctrlr0, spi_ctrlr0] == [1, _CMD_XIP_CTRLR0, _CMD_XIP_SPI_CTRLR0] and baudr >= CMD_XIP_BAUDR


def pll_clock(target: Target, timeout: float = CLOCK_TIMEOUT, regs: ClockRegs = RP2040_CLOCK_REGS) -> bool:
    """Run clk_sys from PLL_SYS at 125 MHz (RP2040) or 150 MHz (RP2350, ``regs`` =
    :data:`RP2350_CLOCK_REGS`), as pico-sdk's clocks_init does (RP2040 datasheet 2.15-2.18,
    RP2350 datasheet 8.1-8.6): the 12 MHz crystal oscillator started (XOSC STARTUP, CTRL enable,
    STATUS.STABLE), clk_ref switched to it, PLL_SYS taken out of reset and set to 12 MHz / 1 x
    125 = 1500 MHz VCO, then the post dividers (FBDIV_INT, PWR, CS.LOCK, PRIM, POSTDIVPD), then
    clk_sys's glitchless mux switched to it (SRC clk_ref, AUXSRC PLL_SYS, then SRC aux,
    CLK_SYS_SELECTED). Already on the PLL: nothing is written. A board whose crystal or PLL does
    not come up within ``timeout`` stays on the ring oscillator (the function returns False);
    the next reset undoes it all.

    :returns: whether clk_sys runs from PLL_SYS.
    :raises pyocd.core.exceptions.TransferError: a register access failed.
    """
    from piflash.targets.families.base import poll_until, target_simulated

    _CLK_REF_CTRL, _CLK_REF_SELECTED = regs.clocks + 0x30, regs.clocks + 0x38
    _CLK_SYS_CTRL, _CLK_SYS_SELECTED = regs.clocks + 0x3C, regs.clocks + 0x44
    _XOSC_CTRL, _XOSC_STATUS, _XOSC_STARTUP = regs.xosc, regs.xosc + 0x4, regs.xosc + 0xC
    _RESETS_RESET, _RESETS_RESET_DONE, _RESET_PLL_SYS = regs.resets, regs.resets + 0x8, 1 << regs.pll_sys_bit
    _PLL_CS, _PLL_PWR, _PLL_FBDIV_INT, _PLL_PRIM = (regs.pll_sys + off for off in (0x0, 0x4, 0x8, 0xC))
    selected, ctrl = (r() for r in [target.read_memory(a, 32, now=False) for a in (_CLK_SYS_SELECTED, _CLK_SYS_CTRL)])
    if selected == 1 << 1 and ctrl & 0xE0 == 0:
        return True

    simulated = target_simulated(target)

    def wait(done: Callable[[], object]) -> bool:  # on the probe's clock, never the wall's on a simulator
        return poll_until(done, timeout, simulated)

    target.write32(_XOSC_STARTUP, regs.xosc_startup)
    target.write32(_XOSC_CTRL, _XOSC_ENABLE | _XOSC_RANGE_1_15MHZ)
    if not wait(lambda: target.read32(_XOSC_STATUS) & (1 << 31)):
        return False
    target.write32(_CLK_REF_CTRL, _CLK_REF_SRC_XOSC)
    if not wait(lambda: target.read32(_CLK_REF_SELECTED) == 1 << _CLK_REF_SRC_XOSC):
        return False
    target.write32(_RESETS_RESET + _SET, _RESET_PLL_SYS)
    target.write32(_RESETS_RESET + _CLR, _RESET_PLL_SYS)
    if not wait(lambda: target.read32(_RESETS_RESET_DONE) & _RESET_PLL_SYS):
        return False
    target.write32(_PLL_CS, 1)  # REFDIV 1
    target.write32(_PLL_FBDIV_INT, 125)  # VCO 1500 MHz
    target.write32(_PLL_PWR + _CLR, _PLL_PWR_PD | _PLL_PWR_VCOPD)
    if not wait(lambda: target.read32(_PLL_CS) & (1 << 31)):
        return False
    target.write32(_PLL_PRIM, regs.prim)  # 125 or 150 MHz
    target.write32(_PLL_PWR + _CLR, _PLL_PWR_POSTDIVPD)
    target.write32(_CLK_SYS_CTRL + _CLR, 1)  # SRC clk_ref while AUXSRC changes
    if not wait(lambda: target.read32(_CLK_SYS_SELECTED) == 1):
        return False
    target.write32(_CLK_SYS_CTRL + _CLR, 0xE0)  # AUXSRC 0: PLL_SYS
    target.write32(_CLK_SYS_CTRL + _SET, 1)  # SRC aux
    return wait(lambda: target.read32(_CLK_SYS_SELECTED) == 1 << 1)


def is_rp2(flash: Flash) -> bool:
    """Whether ``flash`` (a pyOCD ``Flash``) runs pyOCD's RP2 algorithm."""
    algo: Optional[Dict[str, Any]] = getattr(flash, "flash_algo", None)
    if not algo:
        return False
    return algorithm_digest(algo) == RP2_ALGORITHM


def erase_chip(flash: Flash) -> int:
    """Erase the boot flash behind ``flash`` (pyOCD's RP2 algorithm, initialised for erase) with
    the flash's Chip Erase instruction.

    :returns: the bytes erased: the flash's size from its JEDEC ID, or the region's length when
        the ID gives none.
    :raises pyocd.core.exceptions.FlashEraseFailure: the erase did not finish in time.
    :raises pyocd.core.exceptions.TransferError: a transfer failed.
    """
    from piflash.targets.families.rp2 import chip_erase, flash_size

    size = flash_size(flash.target) or flash.region.length
    chip_erase(flash.target)
    return size


def plan_block_erases(sectors: Iterable[int], base: int) -> Tuple[List[Tuple[int, int]], List[int]]:
    """Split 4 KiB sector addresses into aligned 64 KiB and 32 KiB blocks wholly made of them and
    the sectors left over.

    :param sectors: flash addresses of 4 KiB sectors to erase (ints, any order).
    :param base: the flash's first address (0x10000000): alignment is of the offset from it.
    :returns: ``(blocks, rest)``: ``blocks`` a list of ``(address, size)`` (64 KiB first where a
        whole one is there, then 32 KiB), ``rest`` the sector addresses not covered, sorted.
    """
    todo = set(sectors)
    blocks: List[Tuple[int, int]] = []
    for size in (0x10000, 0x8000):
        for start in sorted({base + (a - base) // size * size for a in todo}):
            inner = set(range(start, start + size, 0x1000))
            if inner <= todo:
                blocks.append((start, size))
                todo -= inner
    return sorted(blocks), sorted(todo)


def erase_blocks(flash: Flash, blocks: Iterable[Tuple[int, int]]) -> None:
    """Erase ``blocks`` ((address, size) from :func:`plan_block_erases`) with the flash's block
    erase instructions; ``flash`` (pyOCD's RP2 algorithm) must be initialised for erase.

    :raises pyocd.core.exceptions.FlashEraseFailure: an erase did not finish in time.
    """
    from piflash.targets.families.rp2 import erase_block

    base = flash.region.start
    for address, size in blocks:
        erase_block(flash.target, address - base, size)


def enable_xip(flash: Flash) -> bool:
    """Make the flash readable through XIP, fast, once it takes instructions (after the
    algorithm's Init, or where :func:`reads_without_init` says so; see the module docstring):
    clk_sys from PLL_SYS, the SSI at :func:`spi_divider`'s divider (the QSPI pads tuned for
    clk_sys / 2), in boot stage 2's quad continuous read mode where :func:`quad_enabled`, else
    in 3Bh dual-output XIP mode (RP2350: :func:`qmi_divider`); then the XIP cache flushed (it
    may hold lines from before an erase or program). End the reads with :func:`end_reads`.

    :returns: whether it did (False for every other algorithm).
    :raises pyocd.core.exceptions.TransferError: a register access failed, or the SSI stayed
        busy after the quad mode's entry.
    :raises ValueError: the SSI returned no byte for one sent (:func:`quad_enabled`).
    """
    if not is_rp2(flash):
        return False
    target = flash.target
    if chip_of(target) == "rp2350":
        return qmi_divider(target)  # its ROM leaves XIP readable: only the divider
    divider = spi_divider(pll_clock(target))
    quad = quad_enabled(target)
    if divider == 2:
        _tune_pads(target)
    target.write32(_SSI_SSIENR, 0)
    target.write32(_SSI_CTRLR0, _QUAD_CTRLR0 if quad else _DUAL_XIP_CTRLR0)
    target.write32(_SSI_CTRLR1, 0)
    target.write32(_SSI_SPI_CTRLR0, _QUAD_ENTRY_SPI_CTRLR0 if quad else _DUAL_XIP_SPI_CTRLR0)
    target.write32(_SSI_BAUDR, divider)
    target.write32(_SSI_RX_SAMPLE_DLY, _RX_SAMPLE_DLY if divider == 2 else 0)
    target.write32(_SSI_SSIENR, 1)
    if quad:  # boot stage 2's entry into the continuous read mode
        target.write32(_SSI_DR0, _QUAD_READ)
        target.write32(_SSI_DR0, _CONTINUOUS_FIELD)
        _wait_ssi_idle(target)
        target.write32(_SSI_SSIENR, 0)  # (also empties the RX FIFO of the entry's data)
        target.write32(_SSI_SPI_CTRLR0, _QUAD_XIP_SPI_CTRLR0)
        target.write32(_SSI_SSIENR, 1)
    target.write32(_XIP_CTRL_FLUSH, 1)
    target.read32(_XIP_CTRL_FLUSH)
    return True


def _wait_ssi_idle(target: Target) -> None:
    """Wait until the SSI has sent its FIFO (SR: TFE set, BUSY clear), as boot stage 2's
    ``wait_ssi_ready`` does.

    :raises pyocd.core.exceptions.TransferError: still busy after :data:`_SSI_BUSY_READS` reads.
    """
    from pyocd.core.exceptions import TransferError

    for _ in range(_SSI_BUSY_READS):
        if target.read32(_SSI_SR) & (_SR_TFE | _SR_BUSY) == _SR_TFE:
            return
    raise TransferError("the RP2040's SSI stayed busy (SR) after %d reads" % _SSI_BUSY_READS)


def end_reads(flash: Flash) -> bool:
    """After reading through :func:`enable_xip`'s XIP (RP2040): end the flash's continuous read
    mode, if the SSI set it up, by one read with the mode bits 00h (through the window that
    bypasses the cache, so that it is a transfer from the flash), then leave the SSI as ``flash_enter_cmd_xip``
    does (serial 03h XIP) at :data:`CMD_XIP_BAUDR` on PLL_SYS (see the module docstring). A
    later read can then skip the algorithm's Init (:func:`reads_without_init`), and its UnInit,
    a reset's boot and pyOCD find a flash that takes instructions.

    :returns: whether it did (False for other chips and algorithms).
    :raises pyocd.core.exceptions.TransferError: a register access failed.
    """
    if not is_rp2(flash) or chip_of(flash.target) != "rp2040":
        return False
    target = flash.target
    reads = [target.read_memory(a, now=False) for a in (_SSI_CTRLR0, _SSI_SPI_CTRLR0)]
    ctrlr0, spi_ctrlr0 = (r() for r in reads)
    if (ctrlr0 >> 21) & 3 == 2 and spi_ctrlr0 & ~(0xFF << 24) == _QUAD_XIP_SPI_CTRLR0 & ~(0xFF << 24):
        target.write32(_SSI_SSIENR, 0)
        target.write32(_SSI_SPI_CTRLR0, spi_ctrlr0 & ~(0xFF << 24))  # mode bits 00h
        target.write32(_SSI_SSIENR, 1)
        target.read32(_XIP_NOCACHE_NOALLOC)
    divider = CMD_XIP_BAUDR if _on_pll(target) else FAST_BAUDR
    target.write32(_SSI_SSIENR, 0)
    target.write32(_SSI_CTRLR0, _CMD_XIP_CTRLR0)
    target.write32(_SSI_SPI_CTRLR0, _CMD_XIP_SPI_CTRLR0)
    _set_divider(target, divider)
    return True


class Rp2FlashSpeedups(FlashSpeedups):
    """The speed-ups above, for a ``Flash`` that runs pyOCD's RP2 algorithm (:func:`speedups_for`)."""

    erases_chip = True
    erases_blocks = True

    def prepare_program(self, flash: Flash) -> bool:
        """:func:`faster_spi`."""
        return faster_spi(flash)

    def before_uninit(self, flash: Flash) -> bool:
        """:func:`cmd_xip_divider`."""
        return cmd_xip_divider(flash)

    def reads_without_init(self, flash: Flash) -> bool:
        """:func:`reads_without_init`."""
        return reads_without_init(flash)

    def enable_reads(self, flash: Flash) -> bool:
        """:func:`enable_xip`."""
        return enable_xip(flash)

    def end_reads(self, flash: Flash) -> bool:
        """:func:`end_reads`."""
        return end_reads(flash)

    def erase_chip(self, flash: Flash) -> int:
        """:func:`erase_chip`."""
        return erase_chip(flash)

    def erase_blocks(self, flash: Flash, sectors: Sequence[int]) -> Tuple[List[Tuple[int, int]], List[int]]:
        """:func:`plan_block_erases` from the region's start, then :func:`erase_blocks`."""
        blocks, rest = plan_block_erases(sectors, flash.region.start)
        erase_blocks(flash, blocks)
        return blocks, rest


#: The one instance (it keeps no state: what it caches is kept by target object).
SPEEDUPS = Rp2FlashSpeedups()


def speedups_for(flash: Flash) -> Optional[FlashSpeedups]:
    """:data:`SPEEDUPS` when ``flash`` (a pyOCD ``Flash``) runs pyOCD's RP2 algorithm, else None."""
    return SPEEDUPS if is_rp2(flash) else None
