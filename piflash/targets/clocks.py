"""piflash's default SWD clock per target family and probe, in one table with its sources
(issue 42 item 5).

The rule: piflash asks for the fastest SWD clock the chip's datasheet allows; where the datasheet
gives no SWD maximum, it keeps pyOCD's own default, 1 MHz (``frequency`` in
pyocd/core/options.py), and the row says so. A CMSIS-DAP probe runs the fastest clock it can at
or below the one asked for (CMSIS-DAP's DAP_SWJ_Clock sets a maximum: Arm CMSIS-DAP command
reference, DAP_SWJ_Clock; probe-rs documents the same for its CMSIS-DAP driver,
``CmsisDap::set_speed``), so the probe caps the request itself: :data:`PROBE_CLOCKS` says what
each probe model the simulator presets run (``piflash/sim/probes/usb/presets.py``) reaches, and
:func:`clock_table` gives every (family, probe) pair with the clock asked for and the one run.

An explicit choice always wins: ``--frequency``, a profile's ``frequency`` or ``-O frequency=``
(:func:`piflash.targets.connect.open_session`). Long or noisy SWD wires: give a lower one.

Nothing here opens a probe or imports pyOCD.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional

__all__ = [
    "PYOCD_DEFAULT_HZ",
    "ChipClock",
    "ProbeClock",
    "CHIP_CLOCKS",
    "PROBE_CLOCKS",
    "ClockRow",
    "default_frequency",
    "chip_clock",
    "clock_table",
]

#: pyOCD's default SWD clock, Hz (``OptionInfo('frequency', int, 1000000)``, pyocd/core/options.py,
#: pyOCD 0.46): piflash's default for a chip whose datasheet gives no SWD maximum.
PYOCD_DEFAULT_HZ = 1_000_000


@dataclass(frozen=True)
class ChipClock:
    """The SWD clock piflash asks for on one chip family.

    :ivar family: the family's name (:attr:`piflash.targets.families.base.Family.name`).
    :ivar parts: the parts the row was checked for (str, for the table).
    :ivar datasheet_max_hz: the SWD maximum the chip's documentation gives, Hz (int), or None
        where it gives none.
    :ivar request_hz: what piflash asks the probe for, Hz (int): ``datasheet_max_hz``, else
        :data:`PYOCD_DEFAULT_HZ`.
    :ivar source: where the figure comes from, or that there is none (document, version, section).
    """

    family: str
    parts: str
    datasheet_max_hz: Optional[int]
    request_hz: int
    source: str


@dataclass(frozen=True)
class ProbeClock:
    """What one probe model does with a DAP_SWJ_Clock request.

    :ivar name: the probe model, as the simulator's preset names it (``debugprobe``...).
    :ivar title: its product name.
    :ivar max_hz: the fastest SWCLK it runs, Hz (float).
    :ivar source: where that figure comes from.
    :ivar note: how it rounds a request below its maximum (str, may be empty).
    """

    name: str
    title: str
    max_hz: float
    source: str
    note: str = ""


_NO_MAXIMUM = "gives no SWD clock maximum: pyOCD's default 1 MHz (pyocd/core/options.py 'frequency')"

#: Family name -> the clock piflash asks for. Every family of
#: :data:`piflash.targets.families.FAMILIES` has a row (tests/unit/test_clocks.py checks it).
CHIP_CLOCKS: Dict[str, ChipClock] = {
    c.family: c
    for c in (
        ChipClock(
            "rp2040",
            "RP2040",
            24_000_000,
            24_000_000,
            "Raspberry Pi's stated maximum: 'We would recommend a maximum frequency of around 24MHz' "
            "(Raspberry Pi, raspberrypi/pico-feedback issue #139, 2021-04-13, the answer to 'What is max "
            "frequency of SWD'); the RP2040 datasheet's section 2.3.4 'Debug' names no SWCLK maximum",
        ),
        ChipClock(
            "rp2350",
            "RP2350",
            50_000_000,
            50_000_000,
            "RP2350 datasheet section 14.9.4, table 1440: SWCLK 50 MHz maximum (the SW-DP 'operates "
            "reliably up to 50 MHz'; the same note warns of the external signals' integrity)",
        ),
        ChipClock(
            "nrf52",
            "nRF52840 (and the nRF52 series)",
            None,
            PYOCD_DEFAULT_HZ,
            "nRF52840 Product Specification v1.7, 'Debug and trace' "
            + _NO_MAXIMUM
            + " (later Nordic parts state one, e.g. the nRF52820 PS section 4.8.4: fSWDCLK 0.125-8 MHz; "
            "not applied to another part)",
        ),
        ChipClock(
            "nrf51",
            "nRF51822 (and the nRF51 series)",
            None,
            PYOCD_DEFAULT_HZ,
            "nRF51822 Product Specification v3.4 and nRF51 Series Reference Manual v3.0 " + _NO_MAXIMUM,
        ),
        ChipClock(
            "stm32f1",
            "STM32F103 (and the STM32F1 series)",
            None,
            PYOCD_DEFAULT_HZ,
            "STM32F103xC/D/E datasheet DS5792 and reference manual RM0008 section 31 'Debug support' " + _NO_MAXIMUM,
        ),
        ChipClock(
            "generic",
            "any other target pyOCD knows",
            None,
            PYOCD_DEFAULT_HZ,
            "piflash has no datasheet figure for an unknown part: pyOCD's default 1 MHz "
            "(pyocd/core/options.py 'frequency')",
        ),
    )
}

#: The probe models of the simulator's presets and the fastest SWCLK each runs.
PROBE_CLOCKS: Dict[str, ProbeClock] = {
    p.name: p
    for p in (
        ProbeClock(
            "debugprobe",
            "Raspberry Pi Debug Probe (debugprobe firmware v2.3.1)",
            31_250_000.0,
            "clk_sys 125 MHz / 4 PIO cycles per bit: 'max speed is implicitly capped at 31.25Mhz' "
            "(raspberrypi/debugprobe PR #54, maintainer's comment)",
            "an integer PIO divider of 125 MHz after CMSIS-DAP's delay rounding "
            "(piflash/sim/probes/usb/presets.py ProbePreset.swclk_hz): 1 MHz runs 0.98 MHz, "
            "24 MHz runs 15.6 MHz",
        ),
        ProbeClock(
            "daplink",
            "Arm DAPLink on a KL26Z interface chip (micro:bit v1)",
            2_000_000.0,
            "software SWD tops out at about 2 MHz on these interface chips (ARMmbed/DAPLink issue "
            "#627, maintainer's comment)",
            "any request up to 2 MHz as asked",
        ),
        ProbeClock(
            "mculink",
            "NXP MCU-Link (CMSIS-DAP v2, USB high speed)",
            24_000_000.0,
            "the simulator preset's assumption (piflash/sim/probes/usb/presets.py; the firmware is "
            "closed and no published figure was found)",
            "any request up to 24 MHz as asked (assumed)",
        ),
    )
}


def chip_clock(target: Optional[str]) -> ChipClock:
    """The :data:`CHIP_CLOCKS` row of ``target``'s family (a pyOCD target type or pack part
    name, any case; None or an unknown name: the generic family's row)."""
    from piflash.targets.families import family_for

    return CHIP_CLOCKS.get(family_for(target).name, CHIP_CLOCKS["generic"])


def default_frequency(target: Optional[str]) -> int:
    """The SWD clock, Hz (int), piflash asks for on ``target`` when the user gives none: the
    fastest its family's datasheet allows, else pyOCD's 1 MHz (:func:`chip_clock`). The probe runs
    the fastest it can at or below it (see the module docstring)."""
    return chip_clock(target).request_hz


@dataclass(frozen=True)
class ClockRow:
    """One row of :func:`clock_table`.

    :ivar family: / parts: the chip (:class:`ChipClock`). :ivar probe: the probe model's name.
    :ivar request_hz: what piflash asks for, Hz. :ivar probe_max_hz: the fastest the probe runs,
        Hz: the clock run is at most ``min(request_hz, probe_max_hz)`` (below it where the probe
        rounds, :attr:`ProbeClock.note`).
    :ivar source: the chip's source, then the probe's.
    """

    family: str
    parts: str
    probe: str
    request_hz: int
    probe_max_hz: float
    source: str

    @property
    def capped_hz(self) -> float:
        """``min(request_hz, probe_max_hz)``, Hz: the most the probe can run for the request."""
        return float(min(self.request_hz, self.probe_max_hz))


def clock_table() -> List[ClockRow]:
    """Every (family, probe model) pair, families in :data:`CHIP_CLOCKS` order, probes in
    :data:`PROBE_CLOCKS` order."""
    return [
        ClockRow(chip.family, chip.parts, probe.name, chip.request_hz, probe.max_hz, f"{chip.source}; {probe.source}")
        for chip in CHIP_CLOCKS.values()
        for probe in PROBE_CLOCKS.values()
    ]
