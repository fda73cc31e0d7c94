"""The replay of recorded probe traffic (piflash.sim.probes.usb.replay, issue 20): pyOCD's own
CMSIS-DAP driver runs against recorded responses with no simulated board, gets the board's data
back, and the replay stops loudly at any packet that differs from the recording."""

from __future__ import annotations

import pytest

pytest.importorskip("unicorn")

from pyocd.core.helpers import ConnectHelper  # noqa: E402

from piflash.sim import SimStore  # noqa: E402
from piflash.sim.probes import usb as sim_usb  # noqa: E402
from piflash.sim.probes.usb.replay import (  # noqa: E402
    Recording,
    ReplayDevice,
    ReplayMismatch,
    replay_backend,
)

RAM = 0x20000000


def read_ram(serial: str, address: int = RAM, words: int = 64) -> list:
    """Open a pyOCD session on the probe ``serial``, write a pattern to RAM, read it back."""
    session = ConnectHelper.session_with_chosen_probe(unique_id=serial, blocking=False,
                                                      target_override="nrf52840")
    assert session is not None
    with session:
        target = session.board.target
        target.write_memory_block32(address, list(range(words)))
        return target.read_memory_block32(address, words)


@pytest.fixture
def recording(monkeypatch):
    """A pyOCD session's traffic through a simulated Debug Probe on an nRF52840."""
    store = SimStore()
    store.create("rec", "nrf52840")
    spec = "rec@debugprobe"
    monkeypatch.setenv(sim_usb.ENV_VAR, spec)
    device = sim_usb.install(spec, store).devices[0]
    device.recording = []
    assert read_ram(device.serial) == list(range(64))
    sim_usb.uninstall()
    monkeypatch.delenv(sim_usb.ENV_VAR)
    rec = Recording(device.preset.name, device.serial, device.recording)
    yield rec
    sim_usb.uninstall()


def replay(rec: Recording) -> ReplayDevice:
    return sim_usb.install_backend(replay_backend(rec)).devices[0]


def test_replay_answers_pyocd_without_the_simulator(recording):
    assert len(recording.exchanges) > 10
    again = Recording.from_json(recording.to_json())
    assert again.exchanges == recording.exchanges and again.serial == recording.serial
    device = replay(again)
    assert read_ram(device.serial) == list(range(64))
    device.check_done()
    assert device.sent == len(recording.exchanges)


def test_a_packet_that_differs_from_the_recording_fails_loudly(recording):
    device = replay(recording)
    # pyOCD writes the same pattern to another address: the packet carrying it differs.
    with pytest.raises(Exception):
        read_ram(device.serial, address=RAM + 0x100)
    assert isinstance(device.mismatch, ReplayMismatch)
    assert "differs from the recording" in str(device.mismatch)
    with pytest.raises(ReplayMismatch):
        device.check_done()


def test_a_recording_cut_short_fails_loudly(recording):
    short = Recording(recording.preset, recording.serial, recording.exchanges[:len(recording.exchanges) // 2])
    device = replay(short)
    with pytest.raises(Exception):
        read_ram(device.serial)
    assert "past the end of the recording" in str(device.mismatch)


def test_packets_never_sent_are_reported(recording):
    extra = Recording(recording.preset, recording.serial,
                      recording.exchanges + recording.exchanges[-2:])
    device = replay(extra)
    assert read_ram(device.serial) == list(range(64))
    with pytest.raises(ReplayMismatch, match="were sent"):
        device.check_done()
