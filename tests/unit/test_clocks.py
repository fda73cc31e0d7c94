"""Issue 42 item 5: piflash's default SWD clock table (piflash/targets/clocks.py): a row for every
family, each with its source; the fastest within the datasheet, else pyOCD's default."""

from __future__ import annotations

import pytest

from piflash.targets.clocks import (
    CHIP_CLOCKS,
    PROBE_CLOCKS,
    PYOCD_DEFAULT_HZ,
    chip_clock,
    clock_table,
    default_frequency,
)
from piflash.targets.families import FAMILIES


def test_every_family_has_a_row_with_a_source():
    assert set(CHIP_CLOCKS) == set(FAMILIES)
    for name, row in CHIP_CLOCKS.items():
        assert row.family == name and row.parts and len(row.source) > 40, row
        if row.datasheet_max_hz is None:     # no maximum given: pyOCD's default, and the row says so
            assert row.request_hz == PYOCD_DEFAULT_HZ
            assert "pyOCD's default 1 MHz" in row.source
        else:                                # the fastest the documentation allows
            assert row.request_hz == row.datasheet_max_hz


def test_pyocd_default_is_pyocds():
    from pyocd.core.options import OPTIONS_INFO

    assert OPTIONS_INFO["frequency"].default == PYOCD_DEFAULT_HZ


@pytest.mark.parametrize("target, hz", [
    ("rp2040", 24_000_000), ("RP2040_core0", 24_000_000), ("rp2350", 50_000_000), ("nrf52840", 1_000_000),
    ("nrf51", 1_000_000), ("stm32f103rc", 1_000_000), ("lpc1768", 1_000_000), (None, 1_000_000)])
def test_default_frequency_by_target(target, hz):
    assert default_frequency(target) == hz
    assert chip_clock(target).request_hz == hz


def test_table_pairs_every_family_with_every_probe_and_the_sim_presets_agree():
    from piflash.sim.probes.usb.presets import PRESETS

    rows = clock_table()
    assert len(rows) == len(CHIP_CLOCKS) * len(PROBE_CLOCKS)
    for probe in PROBE_CLOCKS.values():          # the table's probe caps are the presets' maxima
        assert PRESETS[probe.name].max_swd_hz == probe.max_hz, probe.name
        assert probe.source
    rp2040 = {r.probe: r for r in rows if r.family == "rp2040"}
    assert rp2040["daplink"].capped_hz == 2e6 and rp2040["mculink"].capped_hz == 24e6
    # The Debug Probe runs a 24 MHz request at 15.6 MHz (its PIO divider), as the row's note says.
    assert PRESETS["debugprobe"].swclk_hz(24_000_000) == pytest.approx(15.625e6)
    assert "24 MHz runs 15.6 MHz" in PROBE_CLOCKS["debugprobe"].note
