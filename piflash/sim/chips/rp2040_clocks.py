"""The RP2040's resets and clocks as far as a debugger (or pico-sdk's start-up) drives them:
RESETS, XOSC, PLL_SYS and the clk_ref / clk_sys muxes of CLOCKS, and the system clock they give.

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

Modelled: the crystal is stable, a powered PLL locked, and a mux switched, at once; the rest of
CLOCKS (the other clocks, dividers other than clk_sys's integer part) reads back what was written.
"""

from __future__ import annotations

from typing import Dict

from piflash.sim.memory.bus import RegisterDevice

__all__ = ["Clocks", "RESETS_BASE", "CLOCKS_BASE", "XOSC_BASE", "PLL_SYS_BASE", "ROSC_HZ", "XOSC_HZ"]

RESETS_BASE, CLOCKS_BASE, XOSC_BASE, PLL_SYS_BASE = 0x4000C000, 0x40008000, 0x40024000, 0x40028000
#: The ring oscillator's nominal frequency (2.17) and the Pico's crystal (Pico datasheet 2.1), Hz.
ROSC_HZ, XOSC_HZ = 6.5e6, 12e6
_RESET_ALL = 0x01FFFFFF
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
        if offset & 0xFFF == 0x8:                   # RESET_DONE: the blocks out of reset
            return ~self.regs.get(0x0, _RESET_ALL) & _RESET_ALL
        return super().read32(offset)


class _Xosc(_Block):
    def read32(self, offset: int) -> int:
        if offset & 0xFFF == 0x4:                   # STATUS: ENABLED [12], STABLE [31]
            on = self.clocks.xosc_on()
            return (1 << 31 | 1 << 12) if on else 0
        return super().read32(offset)


class _Pll(_Block):
    def read32(self, offset: int) -> int:
        if offset & 0xFFF == 0x0:                   # CS: LOCK [31] once the VCO runs
            return self.regs.get(0x0, 1) | ((1 << 31) if self.clocks.vco_hz() else 0)
        return super().read32(offset)


class _ClocksBlock(_Block):
    def read32(self, offset: int) -> int:
        reg = offset & 0xFFF
        if reg == 0x38:                             # CLK_REF_SELECTED
            return 1 << (self.regs.get(0x30, 0) & 3)
        if reg == 0x44:                             # CLK_SYS_SELECTED
            return 1 << (self.regs.get(0x3C, 0) & 1)
        return super().read32(offset)


class Clocks:
    """The four blocks and the system clock they give (:meth:`sys_hz`).

    Attributes ``resets``, ``clocks``, ``xosc``, ``pll_sys``: the register devices to map at
    :data:`RESETS_BASE`, :data:`CLOCKS_BASE`, :data:`XOSC_BASE`, :data:`PLL_SYS_BASE` (16 KiB
    each, the aliases included).
    """

    _RESET_VALUES = {"resets": {0x0: _RESET_ALL},
                     "clocks": {0x40: 1 << 8},                          # CLK_SYS_DIV INT 1
                     "xosc": {0x0: 0xAA0},                              # FREQ_RANGE 1-15 MHz
                     "pll_sys": {0x0: 1, 0x4: 0x2D, 0xC: 0x77000}}      # PWR: all powered down

    def __init__(self) -> None:
        self.resets = _Resets(self, {})
        self.clocks = _ClocksBlock(self, {})
        self.xosc = _Xosc(self, {})
        self.pll_sys = _Pll(self, {})
        self.reset()

    def reset(self) -> None:
        """A chip reset: every block's registers back to their reset values (in place: the bus
        keeps the same devices)."""
        for name, values in self._RESET_VALUES.items():
            getattr(self, name).regs = dict(values)

    def xosc_on(self) -> bool:
        """Whether the crystal oscillator runs (CTRL.ENABLE = 0xFAB)."""
        return (self.xosc.regs.get(0x0, 0) >> 12) & 0xFFF == _XOSC_ENABLE

    def vco_hz(self) -> float:
        """PLL_SYS's VCO, Hz (0 while it is held in reset, powered down (PD, VCOPD) or without
        a reference); CS.LOCK reads 1 while it runs."""
        if self.resets.regs.get(0x0, _RESET_ALL) & (1 << 12):           # RESET.PLL_SYS
            return 0.0
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
        ref = XOSC_HZ if ref_src == 2 and self.xosc_on() else ROSC_HZ
        ctrl = self.clocks.regs.get(0x3C, 0)
        src = ref
        if ctrl & 1 and (ctrl >> 5) & 7 == 0:                           # aux: PLL_SYS
            src = self.pll_hz() or ref
        div = (self.clocks.regs.get(0x40, 1 << 8) >> 8) or 1
        return src / div
