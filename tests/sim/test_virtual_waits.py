"""Issue 42 item 4 through the simulated USB probe: an RP2040's block erases (the flash's own
D8h/20h through piflash's _write_and_wait, as its C7h chip erase; BUSY on the probe's virtual
clock) succeed whatever the wall clock does, with the same transfers and virtual time each run.
(A chip erase takes the W25Q16JV's seconds of virtual time, tens of seconds of polls here.)"""

from __future__ import annotations

import time

import pytest

pytest.importorskip("unicorn")

from piflash.sim import SimStore  # noqa: E402
from piflash.sim.probes import usb as sim_usb  # noqa: E402


@pytest.fixture
def pico_usb(monkeypatch):
    """A Pico (RP2040) holding data behind a simulated Debug Probe."""
    store = SimStore()
    store.create("pico", "rp2040", exist_ok=True)
    store.write_flash("pico", b"\x00" * 0x20000)
    spec = "pico@debugprobe"
    monkeypatch.setenv(sim_usb.ENV_VAR, spec)
    device = sim_usb.install(spec, store).devices[0]
    yield store, device
    sim_usb.uninstall()


def _erase(device, mode, ranges=()):
    from piflash.flashing.program import erase_flash
    from piflash.targets.connect import open_session

    with open_session(device.serial, "rp2040") as session:
        before = device.clock.snapshot()
        erased = erase_flash(session, mode, ranges)
        after = device.clock.snapshot()
    return erased, after["now_s"] - before["now_s"], after["requests"]["usb_out"] - before["requests"]["usb_out"]


def _wall_clock_leaps(monkeypatch):
    """The wall clock as piflash's target code sees it (``time.monotonic`` called from a
    ``piflash.targets`` module) leaps 1000 s at every look, as on a host under heavy load, and a
    sleep there fails. pyOCD's and the simulator's own USB read timeouts keep the real clock:
    they are not what is tested."""
    import sys

    real_monotonic, real_sleep = time.monotonic, time.sleep
    leaps = [0.0]

    def from_targets() -> bool:
        return sys._getframe(2).f_globals.get("__name__", "").startswith("piflash.targets")

    def leaping():
        if not from_targets():
            return real_monotonic()
        leaps[0] += 1000.0
        return real_monotonic() + leaps[0]

    def sleep(seconds):
        if from_targets():
            raise AssertionError("a simulated flash slept")
        real_sleep(seconds)

    monkeypatch.setattr(time, "monotonic", leaping)
    monkeypatch.setattr(time, "sleep", sleep)


def test_block_erases_give_the_same_figures_with_and_without_a_leaping_clock(pico_usb, monkeypatch):
    store, device = pico_usb
    calm = _erase(device, "sector", [(0x10000000, 0x10012000)])   # one 64 KiB block, two sectors
    store.write_flash("pico", b"\x00" * 0x20000)
    _wall_clock_leaps(monkeypatch)
    loaded = _erase(device, "sector", [(0x10000000, 0x10012000)])
    assert calm[0] == loaded[0] == 0x12000
    assert store.read_flash("pico")[:0x12000] == b"\xff" * 0x12000
    assert loaded[1] > 0.15           # the 64 KiB block erase's time (150 ms typical) passed, virtually
    assert loaded[1:] == pytest.approx(calm[1:])      # the same virtual seconds and USB transfers
