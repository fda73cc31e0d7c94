"""systemd's notify protocol: the Notifier against a real AF_UNIX datagram socket, and the
station's READY/STATUS/WATCHDOG/RELOADING/STOPPING messages as a subprocess would send them."""

from __future__ import annotations

import os
import signal
import socket
import time

import pytest

from piflash.station.sdnotify import Notifier


@pytest.fixture
def listener(tmp_path):
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    path = str(tmp_path / "notify")
    sock.bind(path)
    sock.settimeout(30)
    yield sock, path
    sock.close()


def receive(sock, until, deadline=60.0):
    """Collect datagrams until one satisfies ``until`` (returns them all, decoded)."""
    got, end = [], time.monotonic() + deadline
    while time.monotonic() < end:
        sock.settimeout(max(0.1, end - time.monotonic()))
        try:
            got.append(sock.recv(4096).decode())
        except socket.timeout:
            break
        if until(got[-1]):
            return got
    raise AssertionError(f"no matching message; got {got}")


def test_notifier_messages(listener):
    sock, path = listener
    n = Notifier({"NOTIFY_SOCKET": path})
    assert n.enabled and n.watchdog_interval is None
    assert n.ready("waiting for board")
    assert sock.recv(4096) == b"READY=1\nSTATUS=waiting for board"
    n.status("flashing\n42%")
    assert sock.recv(4096) == b"STATUS=flashing 42%"
    n.watchdog()
    assert sock.recv(4096) == b"WATCHDOG=1"
    n.reloading()
    lines = sock.recv(4096).decode().split("\n")
    assert lines[0] == "RELOADING=1" and lines[1].startswith("MONOTONIC_USEC=") and int(lines[1][15:]) > 0
    n.stopping()
    assert sock.recv(4096) == b"STOPPING=1"
    n.close()


def test_notifier_abstract_namespace():
    name = f"piflash-test-{os.getpid()}"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind("\0" + name)
    sock.settimeout(10)
    try:
        assert Notifier({"NOTIFY_SOCKET": "@" + name}).status("PASS 0011 #1")
        assert sock.recv(4096) == b"STATUS=PASS 0011 #1"
    finally:
        sock.close()


def test_notifier_without_systemd_and_watchdog_env(tmp_path):
    off = Notifier({})
    assert not off.enabled and not off.ready() and not off.status("x")
    assert Notifier({"NOTIFY_SOCKET": "relative"}).enabled is False
    assert Notifier({"WATCHDOG_USEC": "3000000"}).watchdog_interval == 3.0
    assert Notifier({"WATCHDOG_USEC": "3000000", "WATCHDOG_PID": str(os.getpid())}).watchdog_interval == 3.0
    assert Notifier({"WATCHDOG_USEC": "3000000", "WATCHDOG_PID": "1"}).watchdog_interval is None
    assert Notifier({"WATCHDOG_USEC": "soon"}).watchdog_interval is None
    gone = Notifier({"NOTIFY_SOCKET": str(tmp_path / "nobody")})
    assert gone.enabled and gone.status("x") is False           # logged, never raised


def test_station_notify_protocol(tmp_path, listener, firmware_dir, sim_dir):
    pytest.importorskip("unicorn")
    from support.stationkit import (
        StationProcess,
        wait_rows,
        write_config,
        write_profile,
    )

    from piflash.sim import SimStore

    sock, path = listener
    history = tmp_path / "history.sqlite3"
    profile = write_profile(tmp_path, firmware_dir / "nrf52840" / "firmware.hex")
    config = write_config(tmp_path, profile, ["sim:bay"], history)
    env = dict(os.environ, NOTIFY_SOCKET=path, WATCHDOG_USEC="1000000")
    board = SimStore().create("bay", "nrf52840")
    SimStore().pull("bay")                                     # the fixture starts empty
    uid = board.target_uid.lower()
    station = StationProcess(config, tmp_path / "station.log", env)
    try:
        got = receive(sock, lambda m: m.startswith("READY=1"))
        # the worker may find the empty fixture before or after READY=1 goes out
        assert got[-1].split("\n")[1] in ("STATUS=waiting for probe", "STATUS=waiting for board")
        if not any("STATUS=waiting for board" in m for m in got):
            receive(sock, lambda m: m == "STATUS=waiting for board")
        SimStore().seat("bay")
        got = receive(sock, lambda m: m.startswith("STATUS=PASS"))
        statuses = [m for m in got if m.startswith("STATUS=")]
        flashing = [int(m[len("STATUS=flashing "):-1]) for m in statuses if m.startswith("STATUS=flashing ")]
        assert "STATUS=checking firmware" in statuses           # on_same_firmware: skip
        assert flashing and flashing == sorted(flashing) and max(flashing) > 50
        row = wait_rows(history, 1, station)[0]
        assert statuses[-1] == f"STATUS=PASS {uid} #{row['id']}"
        assert "WATCHDOG=1" in receive(sock, lambda m: m == "WATCHDOG=1")
        station.signal(signal.SIGHUP)
        got = receive(sock, lambda m: m.startswith("READY=1"))
        assert any(m.startswith("RELOADING=1\nMONOTONIC_USEC=") for m in got)
        SimStore().pull("bay")
        receive(sock, lambda m: m == "STATUS=waiting for board")
        station.signal(signal.SIGTERM)
        receive(sock, lambda m: m.startswith("STOPPING=1"))
        assert station.stop() == 0
    finally:
        station.kill()
