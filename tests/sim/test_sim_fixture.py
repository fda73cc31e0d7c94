"""The board on a simulated probe's fixture: pulled, seated again, swapped for another board.

Real pyOCD sessions (in-process, and through ``piflash sim serve`` in another process) against
the simulated probe; the store is changed from outside the session, as a test or an operator does.
"""

from __future__ import annotations

import os
import time

import pytest

pytest.importorskip("unicorn")

from pyocd.core import exceptions  # noqa: E402

from piflash.errors import ConnectError  # noqa: E402
from piflash.sim import SimStore  # noqa: E402
from piflash.targets.connect import open_session, read_target_uid  # noqa: E402


@pytest.fixture
def store(sim_dir):
    return SimStore()


def wait_for_error(session, deadline=5.0):
    """Read the target until the debug port stops answering; return the exception."""
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        try:
            session.target.read32(0x20000000)
        except exceptions.Error as exc:
            return exc
        time.sleep(0.05)
    raise AssertionError("the target kept answering")


def test_store_pull_seat_swap(store):
    first = store.create("fx", "nrf52840")
    store.write_flash("fx", b"\x01\x02\x03\x04")
    store.set_faults("fx", write_protect=[0x1000], remove_after=99)
    pulled = store.pull("fx")
    assert not pulled.seated and pulled.present and pulled.faults.remove_after is None
    assert store.seat("fx").seated and store.read_flash("fx")[:4] == b"\x01\x02\x03\x04"
    new = store.swap("fx", flash=b"\xaa" * 8, faults={"bit_flip": {"address": 0, "bit": 1}})
    assert new.seated and new.generation == first.generation + 1
    assert new.target_uid != first.target_uid and len(new.target_uid) == 16
    assert new.faults.write_protect == [] and new.faults.bit_flip == {"address": 0, "bit": 1}
    flash = store.read_flash("fx")
    assert flash[:8] == b"\xaa" * 8 and flash[8:] == b"\xff" * (len(flash) - 8)
    assert store.read_nvm("fx", "uicr") == b"\xff" * len(store.read_nvm("fx", "uicr"))
    assert store.swap("fx", target_uid="00112233AABBCCDD").target_uid == "00112233aabbccdd"   # kept lower case
    with pytest.raises(ValueError):
        store.swap("fx", target_uid="12")
    with pytest.raises(ValueError):
        store.swap("fx", flash=b"\0" * (len(flash) + 1))


def test_swap_mid_session_loses_target_and_keeps_new_flash(store):
    store.create("fx", "nrf52840")
    with open_session("sim:fx") as session:
        old_uid = read_target_uid(session)
        session.target.write32(0x20000000, 0x12345678)     # the session works
        new = store.swap("fx")
        assert isinstance(wait_for_error(session), exceptions.TransferError)
        assert read_target_uid(session) is None
    # the old board's session closed without writing its flash into the new board
    assert store.get("fx").generation == new.generation
    with open_session("sim:fx") as session:
        assert read_target_uid(session) == new.target_uid.lower() != old_uid


def test_pull_mid_session_then_empty_fixture_then_seat(store):
    info = store.create("fx", "nrf52840")
    with open_session("sim:fx") as session:
        store.pull("fx")
        wait_for_error(session)
    start = time.monotonic()
    with pytest.raises(ConnectError, match="cannot connect"):
        with open_session("sim:fx"):
            pass
    assert time.monotonic() - start < 5
    store.seat("fx")
    with open_session("sim:fx") as session:
        assert read_target_uid(session) == info.target_uid.lower()


def test_remove_after_pulls_the_board_once(store, tmp_path):
    from piflash.firmware.image import load_image
    from piflash.flashing.program import ImageProgrammer

    data = os.urandom(16 * 1024)
    (tmp_path / "img.bin").write_bytes(data)
    image = load_image(tmp_path / "img.bin", 0)
    store.create("fx", "nrf52840")
    with open_session("sim:fx") as session:
        store.set_faults("fx", remove_after=session.probe.transfer_count + 3000)
        time.sleep(0.3)                                    # the open session reloads its faults
        with pytest.raises(exceptions.TransferError, match="pulled"):
            programmer = ImageProgrammer(session, image, "sector")
            programmer.erase()
            programmer.program()
    info = store.get("fx")
    assert not info.seated and info.faults.remove_after is None
    flash = store.read_flash("fx")
    assert flash[:len(data)] != data and flash[:1024] != b"\xff" * 1024   # part written, kept
    store.seat("fx")
    with open_session("sim:fx") as session:                 # spent: no second pull
        session.target.read_memory_block8(0, 32 * 1024)
        assert session.probe.transfer_count > 3000


def test_cli_board_commands(cli, store):
    cli("sim", "create", "fx", "--target", "nrf52840", check=0)
    assert "fixture empty" in cli("sim", "board", "pull", "fx", check=0).stdout
    assert "fixture empty" in cli("sim", "list", check=0).stdout
    assert "seated" in cli("sim", "board", "seat", "fx", check=0).stdout
    out = cli("sim", "board", "swap", "sim:fx", "--uid", "0102030405060708", check=0).stdout
    assert "0102030405060708" in out and "board #1" in out
    cli("sim", "fault", "fx", "--remove-after", "10", check=0)
    assert store.get("fx").faults.remove_after == 10
    cli("sim", "board", "swap", "fx", "--write-protect", "0x1000", "--remove-after", "7", check=0)
    faults = store.get("fx").faults
    assert faults.write_protect == [0x1000] and faults.remove_after == 7
    proc = cli("sim", "board", "swap", "fx", "--uid", "12", check=2)
    assert "16 hex digits" in proc.stderr
    assert store.get("fx").generation == 2


def test_swap_seen_through_sim_serve(store, sim_server):
    first = store.create("fx", "nrf52840")
    server = sim_server("fx", "nrf52840")
    with open_session(server.uid, "nrf52840") as session:
        assert read_target_uid(session) == first.target_uid.lower()
        new = store.swap("fx")                               # from this process, not the server's
        wait_for_error(session)
    with open_session(server.uid, "nrf52840") as session:
        assert read_target_uid(session) == new.target_uid.lower()
    store.pull("fx")
    with pytest.raises(ConnectError):
        with open_session(server.uid, "nrf52840"):
            pass


def test_cli_names_say_what_they_do_and_the_old_ones_still_work(cli, store):
    cli("sim", "create", "fx", "--target", "nrf52840", check=0)
    assert "unplugged" in cli("sim", "unplug", "fx", check=0).stdout
    assert not store.get("fx").present
    assert "plugged in" in cli("sim", "plug", "fx", check=0).stdout
    assert store.get("fx").present
    old = cli("sim", "board", "remove", "fx", check=0)     # the 0.1 name: hidden, still works
    assert "fixture empty" in old.stdout and "'piflash sim board pull' is the new name" in old.stderr
    assert not store.get("fx").seated
    help_text = cli("sim", "--help", check=0).stdout
    assert "delete" in help_text and "unplug" in help_text and "eject" not in help_text
    assert "deleted sim:fx" in cli("sim", "delete", "fx", check=0).stdout
    assert "fx" not in [b.name for b in store.list()]
