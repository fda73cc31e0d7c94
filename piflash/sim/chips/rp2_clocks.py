"""The RP2040's and RP2350's resets and clocks as far as a debugger (or pico-sdk's start-up)
drives them: RESETS, XOSC, PLL_SYS and the clk_ref / clk_sys muxes of CLOCKS, and the system
clock they give. The two chips have the same blocks at other addresses (:class:`ClockLayout`).

Sources: RP2040 datasheet (build 2024-05) 2.14 "Subsystem Resets" (RESETS at 0x4000C000: RESET,
WDSEL, RESET_DONE; every block but the ones the boot ROM needs held in reset after power-on, the
reset value of RESET being 0x01FFFFFF), 2.15 "Clocks" (CLOCKS at 0x40008000: CLK_REF_CTRL 0x30
SRC [1:0] 0 ROSC, 1 AUX, 2 XOSC; CLK_REF_SELECTED 0x38, one-hot; CLK_SYS_CTRL 0x3C SRC [0] 0
clk_ref, 1 aux, AUXSRC [7:5] 0 PLL_SYS; CLK_SYS_DIV 0x40 INT [31:8]; CLK_SYS_SELECTED 0x44),
2.16 "Crystal Oscillator" (XOSC at 0x40024000: CTRL ENABLE [23:12] 0xFAB enable / 0xD1E disable,
STATUS 0x04 STABLE [31]; the Pico's 12 MHz crystal), 2.17 "Ring Oscillator" (nominal 6.5 MHz)
and 2.18 "PLL" (PLL_SYS at 0x40028000: CS 0x0 LOCK [31] REFDIV [5:0], PWR 0x4 PD [0] DSMPD [2]
POSTDIVPD [3] VCOPD [5], FBDIV_INT 0x8, PRIM 0xC POSTDIV1 [18:16] POSTDIV2 [14:12]; output
XOSC / REFDIV x FBDIV / (POSTDIV1 x POSTDIV2)). The APB atomic aliases (+0x1000 XOR, +0x2000 set,
+0x3000 clear, 2.1.2) apply to all of them.

RP2350 (datasheet sections 7.5 "Resets", 8.1 "Clocks", 8.2 "Crystal Oscillator", 8.3 "Ring
Oscillator", 8.6 "PLL"; pico-sdk ``src/rp2350/hardware_regs``: ``addressmap.h``, ``resets.h``,
``clocks.h``, ``xosc.h``, ``pll.h``): RESETS at 0x40020000 (RESET resets to 0x1FFFFFFF, PLL_SYS
is bit 14), CLOCKS at 0x40010000 (the same CLK_REF/CLK_SYS offsets and fields, CLK_SYS_DIV INT
[31:16]), XOSC at 0x40048000 and PLL_SYS at 0x40050000 (the same registers); the ring
oscillator's nominal 11 MHz at boot (8.3.1); CLK_SYS_CTRL resets to clk_ref on an A2 (A3 moved it
to the ring oscillator through the aux mux: datasheet appendix C).

Modelled: the crystal is stable, a powered PLL locked, and a mux switched, at once; the rest of
CLOCKS (the other clocks, dividers other than clk_sys's integer part) reads back what was written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict

from piflash.sim.memory.bus import RegisterDevice

__all__ = ["Clocks", "ClockLayout", "RP2040_CLOCKS", "RP2350_CLOCKS", "XOSC_HZ"]


@dataclass(frozen=True)
class ClockLayout:
    """Where one chip has the clock blocks, and what differs between the chips.

    :param resets: / clocks: / xosc: / pll_sys: the blocks' base addresses.
    :param reset_all: RESET's reset value (every block held in reset).
    :param pll_sys_bit: PLL_SYS's bit in RESET and RESET_DONE.
    :param rosc_hz: the ring oscillator's nominal frequency, Hz.
    :param sys_div_shift: where CLK_SYS_DIV's integer part starts (bit).
    """

    resets: int
    clocks: int
    xosc: int
    pll_sys: int
    reset_all: int
    pll_sys_bit: int
    rosc_hz: float
    sys_div_shift: int


#: RP2040 datasheet 2.14-2.18 (the ring oscillator: 6.5 MHz nominal, 2.17).
RP2040_CLOCKS = ClockLayout(0x4000C000, 0x40008000, 0x40024000, 0x40028000, 0x01FFFFFF, 12, 6.5e6, 8)
#: RP2350 datasheet 7.5, 8.1-8.6 (the ring oscillator: 11 MHz nominal at boot, 8.3.1).
RP2350_CLOCKS = ClockLayout(0x40020000, 0x40010000, 0x40048000, 0x40050000, 0x1FFFFFFF, 14, 11e6, 16)
#: The Pico's and the Pico 2's crystal (Pico datasheet 2.1, Pico 2 datasheet), Hz.
XOSC_HZ = 12e6
_XOSC_ENABLE, _XOSC_DISABLE = 0xFAB, 0xD1E


def _alias(old: int, value: int, offset: int) -> int:
    """The register's new value for a write through alias ``offset >> 12`` (2.1.2)."""
    return (value, old ^ value, old | value, old & ~value)[(offset >> 12) & 3] & 0xFFFFFFFF


class _Block(RegisterDevice):
    """Registers that read back what was written, through the atomic aliases."""

    def __init__(self, clocks: "Clocks", resets: Dict[int, int]) -> None:
        self.clocks = clocks
        self.regs = dict(resets)

    def read32(self, offset: int) -> int:
        return self.regs.get(offset & 0xFFF, 0)

    def write32(self, offset: int, value: int) -> None:
        reg = offset & 0xFFF
        self.regs[reg] = _alias(self.regs.get(reg, 0), value, offset)


class _Resets(_Block):
    def read32(self, offset: int) -> int:
        if offset & 0xFFF == 0x8:  # RESET_DONE: the blocks out of reset
            every = self.clocks.layout.reset_all
            return ~self.regs.get(0x0, every) & every
        return super().read32(offset)


class _Xosc(_Block):
    def read32(self, offset: int) -> int:
        if offset & 0xFFF == 0x4:  # STATUS: ENABLED [12], STABLE [31]
            on = self.clocks.xosc_on()
            return (1 << 31 | 1 << 12) if on else 0
        return super().read32(offset)


class _Pll(_Block):
    def read32(self, offset: int) -> int:
        if offset & 0xFFF == 0x0:  # CS: LOCK [31] once the VCO runs
            return self.regs.get(0x0, 1) | ((1 << 31) if self.clocks.vco_hz() else 0)
        return super().read32(offset)


class _ClocksBlock(_Block):
    def read32(self, offset: int) -> int:
        reg = offset & 0xFFF
        if reg == 0x38:  # CLK_REF_SELECTED
            return 1 << (self.regs.get(0x30, 0) & 3)
        if reg == 0x44:  # CLK_SYS_SELECTED
            return 1 << (self.regs.get(0x3C, 0) & 1)
        return super().read32(offset)


class Clocks:
    """The four blocks and the system clock they give (:meth:`sys_hz`).

    :param layout: the chip's (:data:`RP2040_CLOCKS`, :data:`RP2350_CLOCKS`).

    Attributes ``resets``, ``clocks``, ``xosc``, ``pll_sys``: the register devices to map at the
    layout's addresses (16 KiB each, the aliases included); :meth:`devices` lists them so.
    """

    def __init__(self, layout: ClockLayout = RP2040_CLOCKS) -> None:
        self.layout = layout
        self._reset_values = {
            "resets": {0x0: layout.reset_all},
            "clocks": {0x40: 1 << layout.sys_div_shift},  # CLK_SYS_DIV INT 1
            "xosc": {0x0: 0xAA0},  # FREQ_RANGE 1-15 MHz
            "pll_sys": {0x0: 1, 0x4: 0x2D, 0xC: 0x77000},
        }  # PWR: all powered down
        self.resets = _Resets(self, {})
        self.clocks = _ClocksBlock(self, {})
        self.xosc = _Xosc(self, {})
        self.pll_sys = _Pll(self, {})
        self.reset()

    def reset(self) -> None:
        """A chip reset: every block's registers back to their reset values (in place: the bus
        keeps the same devices)."""
        for name, values in self._reset_values.items():
            getattr(self, name).regs = dict(values)

    def devices(self):
        """``(base, device, name)`` for each block, to map on the bus."""
        lay = self.layout
        return (
            (lay.resets, self.resets, "resets"),
            (lay.clocks, self.clocks, "clocks"),
            (lay.xosc, self.xosc, "xosc"),
            (lay.pll_sys, self.pll_sys, "pll-sys"),
        )

    def xosc_on(self) -> bool:
        """Whether the crystal oscillator runs (CTRL.ENABLE = 0xFAB)."""
        return (self.xosc.regs.get(0x0, 0) >> 12) & 0xFFF == _XOSC_ENABLE

    def vco_hz(self) -> float:
        """PLL_SYS's VCO, Hz (0 while it is held in reset, powered down (PD, VCOPD) or without
        a reference); CS.LOCK reads 1 while it runs."""
        if self.resets.regs.get(0x0, self.layout.reset_all) & (1 << self.layout.pll_sys_bit):
            return 0.0  # RESET.PLL_SYS
        if self.pll_sys.regs.get(0x4, 0x2D) & 0x21 or not self.xosc_on():
            return 0.0
        refdiv = self.pll_sys.regs.get(0x0, 1) & 0x3F or 1
        return XOSC_HZ / refdiv * (self.pll_sys.regs.get(0x8, 0) & 0xFFF)

    def pll_hz(self) -> float:
        """PLL_SYS's output, Hz: the VCO divided by POSTDIV1 x POSTDIV2 (0 while POSTDIVPD)."""
        if self.pll_sys.regs.get(0x4, 0x2D) & 0x8:
            return 0.0
        prim = self.pll_sys.regs.get(0xC, 0x77000)
        return self.vco_hz() / (max(1, (prim >> 16) & 7) * max(1, (prim >> 12) & 7))

    def sys_hz(self) -> float:
        """clk_sys, Hz: clk_ref (ROSC or XOSC) or PLL_SYS, divided by CLK_SYS_DIV's integer
        part."""
        ref_src = self.clocks.regs.get(0x30, 0) & 3
        ref = XOSC_HZ if ref_src == 2 and self.xosc_on() else self.layout.rosc_hz
        ctrl = self.clocks.regs.get(0x3C, 0)
        src = ref
        if ctrl & 1 and (ctrl >> 5) & 7 == 0:  # aux: PLL_SYS
            src = self.pll_hz() or ref
        shift = self.layout.sys_div_shift
        div = ((self.clocks.regs.get(0x40, 1 << shift) >> shift) & 0xFFFF) or 1
        return src / div
