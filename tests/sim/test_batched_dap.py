"""Several DAP packets per USB transfer (piflash.probe.batched_dap, on pyOCD's own link:
``PIFLASH_DAP_LEAN=0``; the lean link batches the same way, tests/sim/test_lean_dap.py) on the simulated Raspberry Pi
Debug Probe, whose firmware executes each 64-byte packet as one command: the flash is byte-exact,
most transfers carry several packets, the virtual clock shows the saved waits; probes whose
firmware reads a byte stream keep one packet per transfer; the simulated probe refuses a batch its
firmware would misread."""

from __future__ import annotations

import errno
import os

import pytest

pytest.importorskip("unicorn")

import usb.core  # noqa: E402

from piflash.firmware.image import load_image  # noqa: E402
from piflash.jobs.workflow import FlashOptions, flash_firmware  # noqa: E402
from piflash.probe.batched_dap import BATCH_ENV, frames_by_packet  # noqa: E402
from piflash.probe.lean_dap import LEAN_ENV  # noqa: E402
from piflash.sim import SimStore  # noqa: E402
from piflash.sim.probes import usb as sim_usb  # noqa: E402

XIP = 0x10000000


def test_which_firmware_frames_commands_by_packet():
    # debugprobe v2.0 and later (bcdDevice is its version): src/tusb_edpt_handler.c
    assert frames_by_packet(0x2E8A, 0x000C, "Debug Probe (CMSIS-DAP)", 0x0231)
    assert frames_by_packet(0x2E8A, 0x000C, "Debug Probe (CMSIS-DAP)", 0x0200)
    assert frames_by_packet(0x2E8A, 0x000C, "Picoprobe (CMSIS-DAP)", 0x0210)
    # picoprobe 1.x read a byte FIFO; yapicoprobe (same VID:PID) parses a stream of commands
    assert not frames_by_packet(0x2E8A, 0x000C, "Picoprobe (CMSIS-DAP)", 0x0103)
    assert not frames_by_packet(0x2E8A, 0x000C, "YAPicoprobe CMSIS-DAP", 0x0110)
    assert not frames_by_packet(0x0D28, 0x0204, "DAPLink CMSIS-DAP", 0x0257)


def _flash(store, board, preset, path, monkeypatch, batch: bool, frequency=None):
    monkeypatch.setenv(BATCH_ENV, "1" if batch else "0")
    monkeypatch.setenv(LEAN_ENV, "0")  # pyOCD's own link, which the batching interface serves
    spec = "%s@%s" % (board, preset)
    monkeypatch.setenv(sim_usb.ENV_VAR, spec)
    device = sim_usb.install(spec, store).devices[0]
    try:
        result = flash_firmware(load_image(str(path), base_address=XIP), probe=device.serial,
                                target="rp2040", job=FlashOptions(frequency=frequency))
    finally:
        sim_usb.uninstall()
    assert result.ok and result.verify is not None
    return device.clock


def test_debug_probe_flashes_blink_byte_exact_in_batches(pyocd_binaries, monkeypatch):
    """pico-examples blink (pyOCD's test/data/binaries/rp2040.bin) through batches."""
    blink = pyocd_binaries / "rp2040.bin"
    data = blink.read_bytes()
    store = SimStore()
    store.create("pico", "rp2040")
    clock = _flash(store, "pico", "debugprobe", blink, monkeypatch, batch=True)
    flash = store.read_flash("pico")
    assert flash[:len(data)] == data and flash[len(data):] == b"\xff" * (len(flash) - len(data))
    counts = clock.requests
    # One response per DAP packet, fewer OUT transfers than packets: several packets per transfer.
    packets = counts["usb_in"]
    assert packets > 300 and counts["usb_out"] < packets * 0.75


def test_batches_save_the_waits_of_one_transfer_per_packet(tmp_path, monkeypatch):
    """The same 64 KiB, batched and not: the same DAP packets answered, fewer transfers, less
    virtual time (each transfer's scheduling latency is paid once per batch). At 15.625 MHz SWD,
    where the probe's wire is faster than one 64-byte transfer per USB round trip."""
    path = tmp_path / "image.bin"
    path.write_bytes(os.urandom(64 * 1024))
    store = SimStore()
    clocks = {}
    for batch in (False, True):
        board = "pico%d" % batch
        store.create(board, "rp2040")
        clocks[batch] = _flash(store, board, "debugprobe", path, monkeypatch, batch, 15_625_000)
        assert store.read_flash(board)[:64 * 1024] == path.read_bytes()
    plain, batched = clocks[False].requests, clocks[True].requests
    assert plain["usb_out"] == plain["usb_in"]
    assert batched["DAP_TransferBlock"] == plain["DAP_TransferBlock"]
    assert batched["usb_out"] < plain["usb_out"] / 2
    assert clocks[True].now < 0.8 * clocks[False].now


def test_a_stream_parsing_firmware_keeps_one_packet_per_transfer(tmp_path, monkeypatch):
    """YAPicoprobe has the Debug Probe's VID:PID but parses a byte stream: no batches."""
    path = tmp_path / "image.bin"
    path.write_bytes(os.urandom(8 * 1024))
    store = SimStore()
    store.create("pico", "rp2040")
    counts = _flash(store, "pico", "yapicoprobe", path, monkeypatch, batch=True).requests
    assert counts["usb_out"] == counts["usb_in"]


def test_the_simulated_probe_stalls_a_batch_its_firmware_would_misread(monkeypatch):
    store = SimStore()
    store.create("pico", "rp2040")
    monkeypatch.setenv(sim_usb.ENV_VAR, "pico@yapicoprobe")
    device = sim_usb.install("pico@yapicoprobe", store).devices[0]
    try:
        device.claim()
        info = bytes([0x00, 0xFE]).ljust(128, b"\0")        # two DAP_Info packets of 128 bytes
        with pytest.raises(usb.core.USBError) as err:
            device.write_out(info + info)
        assert err.value.errno == errno.EPIPE
        assert device.write_out(bytes([0x00, 0xFE])) == 2   # one command per transfer still works
    finally:
        sim_usb.uninstall()


def test_the_writer_thread_keeps_the_host_from_waiting_on_transfers(tmp_path, monkeypatch):
    """Batches go out from the interface's writer thread: the host builds the next packets while
    one crosses the bus, instead of waiting for each OUT transfer's scheduling and packets."""
    from piflash.sim.probes.usb.timing import BULK_LATENCY_S
    path = tmp_path / "image.bin"
    path.write_bytes(os.urandom(64 * 1024))
    store = SimStore()
    store.create("pico", "rp2040")
    clock = _flash(store, "pico", "debugprobe", path, monkeypatch, True, 15_625_000)
    counts = clock.requests
    # A lone packet to an idle probe goes from the host's own thread and the host waits for it;
    # every batch sent while others are in flight goes from the writer thread.
    assert counts["packets_waited"] < 0.5 * counts["usb_in"]      # one response per packet
    assert clock.busy["usb_out"] < counts["usb_out"] * BULK_LATENCY_S["v2-bulk-fs"]


def test_a_failed_batch_wakes_the_host_waiting_for_its_response(monkeypatch):
    """A batch the probe refuses (yapicoprobe's stream parser stalls a transfer of several
    packets: EPIPE) fails in the writer thread while the host waits for its response: the host's
    read raises the USB error as soon as the write fails, not after pyOCD's USB timeout, and the
    next write raises it too."""
    import threading
    import time

    from piflash.probe.batched_dap import _interface_class, _usb_device
    store = SimStore()
    store.create("pico", "rp2040")
    monkeypatch.setenv(sim_usb.ENV_VAR, "pico@yapicoprobe")
    device = sim_usb.install("pico@yapicoprobe", store).devices[0]
    try:
        interface = _interface_class()(_usb_device(device.serial))
        interface.open()
        interface.set_packet_size(64)
        interface.set_packet_count(8)
        info = bytes([0x00, 0xFE])                  # DAP_Info: packet count
        interface.write(info)                       # the probe is idle: sent at once
        writer = interface._writer
        writer.lock.acquire()                       # the writer waits until the host waits
        for _ in range(4):                          # held, then queued for the writer thread
            interface.write(info)
        assert interface.read()[:2] == bytes([0x00, 0x01])
        threading.Timer(0.3, writer.lock.release).start()
        started = time.monotonic()
        with pytest.raises(usb.core.USBError) as err:
            interface.read()
        assert err.value.errno == errno.EPIPE
        assert time.monotonic() - started < 2.0     # pyOCD's USB timeout is 10 s
        with pytest.raises(usb.core.USBError):      # the writer's failure, kept
            interface.write(info)
        writer.stop(2.0)                            # what close does first
        assert not writer.thread.is_alive()
    finally:
        sim_usb.uninstall()
