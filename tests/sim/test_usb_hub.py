"""Several devices on one hub (piflash/sim/probes/usb/hub.py): the replay of recorded bus and host
intervals against shared resources, on traces whose answers are known, and on the timeline a
real PICOBOOT flash records."""

from __future__ import annotations

import pytest

from piflash.sim.probes.usb.hub import PACKET_S, replay, station_rates

PIECES = 2000          # a board of 2000 packets' worth of time


def _trace(busy_from: float, busy_to: float):
    """A board of PIECES packet times holding the bus over [busy_from, busy_to) of it."""
    board = PIECES * PACKET_S
    return [("bus", busy_from * board, (busy_to - busy_from) * board)], board


def test_one_device_keeps_its_own_time():
    timeline, board = _trace(0.2, 0.7)
    row = replay(timeline, board, devices=1, boards=5, capacity={"bus": 1})
    assert row["wait_s"] == 0
    assert row["boards_per_hour"] == pytest.approx(3600 / board)
    gap = replay(timeline, board, devices=1, boards=5, capacity={"bus": 1}, gap_s=board)
    assert gap["boards_per_hour"] == pytest.approx(3600 / (2 * board))


def test_a_bus_bound_board_gains_nothing_from_more_devices_on_one_tt():
    timeline, board = _trace(0.0, 1.0)
    rows = station_rates(timeline, board, (1, 2, 4), {"bus": 1}, boards=4)
    for row in rows:
        assert row["vs_one"] == pytest.approx(1.0, rel=0.01)
    # each device's boards take N times as long: the waits are the other devices' packets
    assert rows[2]["wait_s"] == pytest.approx(3 * board, rel=0.01)
    multi = station_rates(timeline, board, (1, 2, 4), {}, boards=4)       # a TT per port
    assert [round(r["vs_one"], 6) for r in multi] == [1, 2, 4]


def test_half_busy_boards_share_when_out_of_step_and_queue_in_step():
    timeline, board = _trace(0.0, 0.5)
    staggered = replay(timeline, board, devices=2, boards=6, capacity={"bus": 1}, stagger=True)
    assert staggered["wait_s"] == pytest.approx(0, abs=2 * PACKET_S)
    assert staggered["boards_per_hour"] == pytest.approx(2 * 3600 / board, rel=0.01)
    in_step = replay(timeline, board, devices=2, boards=6, capacity={"bus": 1})
    # packet by packet the two share the bus: both finish their bus half at 1.0 of a board,
    # then run free; from the second board on the first one's lead has them out of step
    assert 0.0 < in_step["wait_s"] <= 0.5 * board
    assert in_step["boards_per_hour"] < staggered["boards_per_hour"]
    assert in_step["waits_s"]["bus"] == pytest.approx(in_step["wait_s"])


def test_worker_threads_share_the_host_and_processes_do_not():
    board = 1.0
    timeline = [("host", i * 0.01, 0.008) for i in range(100)]      # 80 % host CPU
    threads = replay(timeline, board, devices=4, boards=3, capacity={"host": 1})
    processes = replay(timeline, board, devices=4, boards=3, capacity={"host": 4})
    assert processes["wait_s"] == 0 and processes["boards_per_hour"] == pytest.approx(4 * 3600)
    assert threads["boards_per_hour"] == pytest.approx(3600 / 0.8, rel=0.05)   # one lock: 0.8 s a board
    two_cores = replay(timeline, board, devices=4, boards=3, capacity={"host": 2})
    assert threads["boards_per_hour"] < two_cores["boards_per_hour"] < processes["boards_per_hour"]


def test_replay_refuses_no_devices():
    with pytest.raises(ValueError):
        replay([], 1.0, devices=0, boards=1, capacity={})


@pytest.fixture
def pico(pyocd_binaries, monkeypatch):
    from piflash.sim import SimStore
    store = SimStore()
    store.create("pico", "rp2040")
    monkeypatch.setenv("PIFLASH_SIM_USB", "pico@bootsel")
    return store


def test_a_picoboot_flash_records_its_bus_and_host_time(pico, tmp_path):
    """The recorded timeline of a real flash: its bus time is the bytes it moved on the wire, it
    replays alone to the board's own time, and four boards behind one TT wait for each other."""
    pytest.importorskip("unicorn")
    import random

    from piflash.firmware.image import load_image
    from piflash.jobs.bootsel import flash_bootsel
    from piflash.jobs.options import FlashOptions
    from piflash.sim.probes import usb as sim_usb

    data = random.Random("hub").randbytes(64 * 1024)
    path = tmp_path / "app.bin"
    path.write_bytes(data)
    device = sim_usb.install().devices[0]
    device.clock.timeline = []
    try:
        flash_bootsel(load_image(str(path), base_address=0x10000000), "picoboot",
                      job=FlashOptions(verify=True, reset=True))
    finally:
        sim_usb.uninstall()
    timeline, board = device.clock.timeline, device.clock.now
    req = device.clock.requests
    bus = sum(s for r, _, s in timeline if r == "bus")
    moved = req["bytes_out"] + req["bytes_in"]
    assert moved >= len(data)
    # every byte at 12 Mbit/s plus 13 bytes per 64-byte packet, and no more than one packet's
    # overhead per transfer on top
    fs = 12e6 / 8
    assert moved / fs * 77 / 64 <= bus * 1.001
    assert bus <= (moved * 77 / 64 + 13 * (req["usb_out"] + req["usb_in"])) / fs * 1.001
    host = sum(s for r, _, s in timeline if r == "host")
    assert host > 0
    assert host == pytest.approx((req["usb_out"] + req["usb_in"]) * device.host_transfer_s, rel=0.5)
    alone = replay(timeline, board, devices=1, boards=2, capacity={"bus": 1, "host": 1})
    assert alone["wait_s"] == 0 and alone["boards_per_hour"] == pytest.approx(3600 / board)
    four = replay(timeline, board, devices=4, boards=2, capacity={"bus": 1, "host": 1})
    assert four["waits_s"]["bus"] > 0
    assert 3600 / board * 2 < four["boards_per_hour"] < 4 * 3600 / board
