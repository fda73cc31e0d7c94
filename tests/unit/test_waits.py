"""Issue 42 item 4: a poll loop is bounded on the probe's clock (piflash/targets/families/base.py
Deadline): the wall clock on hardware, the count of polls on a simulated probe, which never reads
the wall clock and whose outcome does not depend on it; no sleeps."""

from __future__ import annotations

import math
import time
from types import SimpleNamespace

import pytest

from piflash.targets.families import base, rp2
from piflash.targets.families.base import MIN_POLL_S, Deadline, poll_until, simulated_probe, target_simulated


def _no_wall_clock(monkeypatch):
    def refuse(*_args):
        raise AssertionError("a simulated wait read the wall clock or slept")

    monkeypatch.setattr(time, "monotonic", refuse)
    monkeypatch.setattr(time, "sleep", refuse)


def _counter(true_after=None):
    calls = []

    def done():
        calls.append(1)
        return true_after is not None and len(calls) > true_after

    return done, calls


def test_simulated_wait_counts_polls_and_never_reads_the_wall_clock(monkeypatch):
    _no_wall_clock(monkeypatch)
    done, calls = _counter(true_after=500)
    assert poll_until(done, 0.4, simulated=True) and len(calls) == 501
    stuck, calls = _counter()
    assert not poll_until(stuck, 0.4, simulated=True)      # a poll that never succeeds still ends
    # ... after the polls that take the timeout at the fastest physical poll (one more to find it).
    assert len(calls) == math.floor(0.4 / MIN_POLL_S) + 1


def test_hardware_wait_is_bounded_by_the_wall_clock(monkeypatch):
    now = [1000.0]

    def jumping():
        now[0] += 1.0                       # one second per look: past a 0.4 s bound at once
        return now[0]

    monkeypatch.setattr(time, "monotonic", jumping)
    stuck, calls = _counter()
    assert not poll_until(stuck, 0.4, simulated=False) and len(calls) == 1
    deadline = Deadline(5.0)
    assert deadline.elapsed() == pytest.approx(1.0)


def test_which_probes_are_simulated(monkeypatch):
    monkeypatch.delenv("PIFLASH_SIM_USB", raising=False)
    # a sim: probe models no time: its polls take wall time, so the wall clock bounds them
    assert not simulated_probe(SimpleNamespace(unique_id="sim:bay1"))
    assert not simulated_probe(SimpleNamespace(unique_id="E6614103E7176A23"))
    assert not simulated_probe(None) and not target_simulated(object())
    monkeypatch.setenv("PIFLASH_SIM_USB", "bay1@debugprobe")   # the simulated bus replaces libusb
    assert simulated_probe(SimpleNamespace(unique_id="E6614103E7176A23"))
    target = SimpleNamespace(session=SimpleNamespace(probe=SimpleNamespace(unique_id="E6614103E7176A23")))
    assert target_simulated(target)


def test_min_poll_is_no_longer_than_any_simulated_round_trip():
    """Each simulated poll must move the virtual clock on by at least MIN_POLL_S (a USB round trip:
    one latency out, one in), else a simulated wait could give up before its virtual time."""
    from piflash.sim.probes.usb.timing import BULK_LATENCY_S, FRAME_S

    assert MIN_POLL_S <= 2 * min(BULK_LATENCY_S.values()) and MIN_POLL_S <= FRAME_S


def _stuck_rp2(monkeypatch, unique_id):
    """A target whose serial flash's BUSY never clears, behind a probe called ``unique_id``."""
    sent = []

    def flash_command(target, out, read=0):
        sent.append(bytes(out[:1]))
        return b"\x01" if out[:1] == b"\x05" else b""

    monkeypatch.setattr(rp2, "flash_command", flash_command)
    return SimpleNamespace(session=SimpleNamespace(probe=SimpleNamespace(unique_id=unique_id))), sent


def test_a_stuck_simulated_erase_ends_with_a_clear_error_without_the_wall_clock(monkeypatch):
    from pyocd.core.exceptions import FlashEraseFailure

    monkeypatch.setenv("PIFLASH_SIM_USB", "pico@debugprobe")  # the virtual-clock USB bus
    target, sent = _stuck_rp2(monkeypatch, "E6614103E7176A23")
    _no_wall_clock(monkeypatch)
    with pytest.raises(FlashEraseFailure, match=r"the flash's 4 KiB erase at offset 0x1000 did not finish in 0\.4 s"):
        rp2.erase_block(target, 0x1000, 0x1000)
    assert sent[:2] == [b"\x06", b"\x20"] and sent.count(b"\x05") == math.floor(0.4 / MIN_POLL_S) + 1


def test_a_stuck_erase_on_hardware_ends_at_the_wall_deadline(monkeypatch):
    from pyocd.core.exceptions import FlashEraseFailure

    monkeypatch.delenv("PIFLASH_SIM_USB", raising=False)
    target, sent = _stuck_rp2(monkeypatch, "E6614103E7176A23")
    now = [0.0]

    def jumping():
        now[0] += 0.3
        return now[0]

    monkeypatch.setattr(time, "monotonic", jumping)
    monkeypatch.setattr(time, "sleep", lambda _s: pytest.fail("no sleep between polls"))
    with pytest.raises(FlashEraseFailure, match="did not finish in 0.4 s") as info:
        rp2.erase_block(target, 0x0, 0x1000)
    assert info.value.address == 0x10000000 and sent.count(b"\x05") == 2


def test_wait_until_takes_the_ports_probe(monkeypatch):
    from piflash.errors import ProtectError

    monkeypatch.setenv("PIFLASH_SIM_USB", "n@daplink")
    _no_wall_clock(monkeypatch)
    port = base.Port(SimpleNamespace(probe=SimpleNamespace(unique_id="E6614103E7176A23")), int, None, None)
    with pytest.raises(ProtectError, match="the NVMC ERASEALL did not finish within 0.01 s"):
        base.wait_until(lambda: False, 0.01, "the NVMC ERASEALL did not finish", port)
