"""Real pyOCD (in-process, no mocks) against simulated boards: connect, flash with pyOCD's own
flash algorithms, smart-flash skipping, unique IDs, enumeration and every injected fault."""

from __future__ import annotations

import os
import struct
import time

import pytest

pytest.importorskip("unicorn")

from pyocd.core import exceptions  # noqa: E402
from pyocd.core.helpers import ConnectHelper  # noqa: E402
from pyocd.core.target import Target  # noqa: E402
from pyocd.flash.file_programmer import FileProgrammer  # noqa: E402
from pyocd.probe.aggregator import DebugProbeAggregator  # noqa: E402

from piflash.sim import SIM_TARGETS, SimStore  # noqa: E402
from piflash.sim.probes import simprobe as sim_probe  # noqa: E402
from piflash.sim.probes.simprobe import SimProbe  # noqa: E402
from piflash.sim.specs import TARGETS  # noqa: E402

IMAGE_SIZE = 64 * 1024


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setenv("PIFLASH_SIM_DIR", str(tmp_path / "sim"))
    return SimStore()


def open_session(name, target=None, **options):
    kwargs = {"target_override": target} if target else {}
    session = ConnectHelper.session_with_chosen_probe(unique_id="sim:" + name, blocking=False,
                                                      options=options, **kwargs)
    assert session is not None, "no probe sim:%s" % name
    return session


def program_bin(session, path, target):
    FileProgrammer(session, progress=lambda _p: None).program(str(path), base_address=TARGETS[target].flash.start)


def flash_image(name, target, data, tmp_path, **options):
    path = tmp_path / ("%s.bin" % name)
    path.write_bytes(data)
    with open_session(name, target, **options) as session:
        program_bin(session, path, target)


@pytest.mark.parametrize("target", SIM_TARGETS)
def test_flash_each_target_and_skip_unchanged(store, tmp_path, target):
    data = os.urandom(IMAGE_SIZE)
    flash_image(target, target, data, tmp_path)        # the board is created on first use
    flash = store.read_flash(target)
    assert flash[:IMAGE_SIZE] == data
    assert flash[IMAGE_SIZE:] == b"\xff" * (len(flash) - IMAGE_SIZE)
    stats = store.get(target).stats
    spec = TARGETS[target]
    assert stats["program_bytes"] == IMAGE_SIZE and stats["erase_ops"] == IMAGE_SIZE // spec.flash.page_size

    # Second flash of the same image: pyOCD's CRC analyzer runs on the target and every page is
    # skipped -- no erase, no program.
    with open_session(target) as session:
        region = session.target.memory_map.get_boot_memory()
        builder = region.flash.get_flash_builder()
        builder.add_data(region.start, data)
        builder.erase()
        info = builder.program()
        region.flash.cleanup()
    pages = IMAGE_SIZE // region.page_size      # pyOCD's program page (RP2040: 256 bytes)
    # pyOCD's RP2 algorithm has no analyzer: pyOCD reads the pages back instead of a CRC, and
    # reads them while the algorithm's Init has taken the flash out of XIP (flash_exit_xip), so
    # it sees no flash data and programs every page again, as on a Pico.
    crc = region.algo.get("analyzer_supported", True)
    assert info.analyze_type == (builder.FLASH_ANALYSIS_CRC32 if crc else builder.FLASH_ANALYSIS_PARTIAL_PAGE_READ)
    if target == "rp2040":
        assert info.program_page_count == pages and store.read_flash(target)[:IMAGE_SIZE] == data
        return
    assert info.program_page_count == 0 and info.skipped_page_count == pages
    assert store.get(target).stats == stats

    # A one-byte change reprograms exactly one page.
    changed = bytearray(data)
    changed[5000] ^= 0xFF
    with open_session(target) as session:
        region = session.target.memory_map.get_boot_memory()
        builder = region.flash.get_flash_builder()
        builder.add_data(region.start, bytes(changed))
        builder.erase()
        info = builder.program()
        region.flash.cleanup()
    # The changed sector is erased and all its pages programmed again.
    assert info.erase_sector_count == 1 and info.program_page_count == region.sector_size // region.page_size
    assert store.read_flash(target)[:IMAGE_SIZE] == bytes(changed)


def test_core_types_and_memory_map(store):
    for target, core in (("nrf51", "Cortex-M0"), ("nrf52840", "Cortex-M4"), ("stm32f103rc", "Cortex-M3")):
        with open_session(target) as session:      # no -t: the probe's board info names the target
            t = session.target
            assert session.board.target_type == target
            assert t.selected_core.name == core
            assert t.memory_map.get_boot_memory().start == TARGETS[target].flash.start


def test_unique_ids_differ_and_match_memory(store):
    a = store.create("nrf52840-a", "nrf52840")
    b = store.create("nrf52840-b", "nrf52840")
    c = store.create("stm", "stm32f103rc")
    assert a.target_uid != b.target_uid
    for info in (a, b, c):
        with open_session(info.name) as session:
            uid = bytes(session.target.read_memory_block8(info.spec.uid_address, info.spec.uid_length))
        assert uid.hex() == info.target_uid


def test_reset_runs_firmware_and_reset_halt(store, tmp_path):
    # Vector table + reset handler: movs r0,#0 ; adds r0,#1 ; b .-2
    firmware = struct.pack("<II", 0x20001000, 0x00000009) + struct.pack("<3H", 0x2000, 0x3001, 0xE7FD)
    flash_image("nrf52840", "nrf52840", firmware, tmp_path)
    with open_session("nrf52840") as session:
        t = session.target
        t.reset_and_halt()
        assert t.get_state() == Target.State.HALTED
        assert t.read_core_register("pc") == 0x8 and t.read_core_register("sp") == 0x20001000
        t.resume()
        assert t.get_state() == Target.State.RUNNING
        t.halt()
        assert t.read_core_register("pc") in (0xA, 0xC) and t.read_core_register("r0") > 0
        t.step()
        assert t.get_state() == Target.State.HALTED


def test_enumeration_and_auto_create(store):
    assert SimProbe.get_all_connected_probes() == []
    assert SimProbe.get_probe_with_id("nrf52840-2", is_explicit=False) is None   # only explicit IDs create
    assert not store.exists("nrf52840-2")
    probe = SimProbe.get_probe_with_id("nrf52840-2", is_explicit=True)
    assert probe.unique_id == "sim:nrf52840-2" and probe.vendor_name == "piflash"
    assert probe.product_name == "Simulated nRF52840 board"
    assert store.get("nrf52840-2").target == "nrf52840"
    assert DebugProbe_protocols(probe)
    store.create("other", "nrf51")
    ids = sorted(p.unique_id for p in DebugProbeAggregator.get_all_connected_probes())
    assert "sim:nrf52840-2" in ids and "sim:other" in ids
    assert [p.unique_id for p in DebugProbeAggregator.get_all_connected_probes("sim:other")] == ["sim:other"]
    store.eject("other")
    assert "sim:other" not in [p.unique_id for p in SimProbe.get_all_connected_probes()]
    assert SimProbe.get_probe_with_id("other", is_explicit=True) is None


def DebugProbe_protocols(probe):
    from pyocd.probe.debug_probe import DebugProbe
    protocols = probe.supported_wire_protocols
    return (DebugProbe.Protocol.DEFAULT in protocols and DebugProbe.Protocol.SWD in protocols
            and probe.capabilities == {DebugProbe.Capability.SWJ_SEQUENCE, DebugProbe.Capability.SWD_SEQUENCE})


def test_named_board_created_from_target_option(store):
    with open_session("bench", "nrf52840") as session:
        assert session.target.part_number == "NRF52840"
    assert store.get("bench").target == "nrf52840"
    with pytest.raises(exceptions.ProbeError):
        ConnectHelper.session_with_chosen_probe(unique_id="sim:nothing", blocking=False)
    # A part of an existing board's name is a normal (substring) match, not a new board.
    with ConnectHelper.session_with_chosen_probe(unique_id="sim:ben", blocking=False,
                                                 target_override="nrf52840") as session:
        assert session.probe.unique_id == "sim:bench"
    assert not store.exists("ben")


def test_board_busy_in_other_session(store, monkeypatch):
    monkeypatch.setattr(sim_probe, "SESSION_LOCK_TIMEOUT", 0.2)
    store.create("busy", "nrf51")
    with open_session("busy"):
        with pytest.raises(exceptions.ProbeError, match="in use"):
            with open_session("busy"):
                pass


# ---------------------------------------------------------------------------------------------
# Faults
# ---------------------------------------------------------------------------------------------
def test_fault_write_protect_stm32(store, tmp_path):
    store.create("st", "stm32f103rc")
    store.set_faults("st", write_protect=[0x08000800])
    with pytest.raises(exceptions.FlashProgramFailure) as err:
        flash_image("st", "stm32f103rc", os.urandom(8192), tmp_path)
    assert err.value.address == 0x08000800 and err.value.result_code == 1
    assert store.read_flash("st")[0x800:0x1000] == b"\xff" * 0x800


def test_fault_write_protect_nrf_leaves_flash_unchanged(store, tmp_path):
    store.create("n", "nrf52840")
    store.write_flash("n", b"\x00" * 4096, offset=0x1000)
    store.set_faults("n", write_protect=[0x1000])
    data = os.urandom(8192)
    flash_image("n", "nrf52840", data, tmp_path)        # pyOCD's nRF algorithm reports success
    flash = store.read_flash("n")
    assert flash[:0x1000] == data[:0x1000]
    assert flash[0x1000:0x2000] == b"\x00" * 4096     # neither erased nor programmed


def test_fault_stuck_busy_times_out(store, tmp_path):
    store.create("nrf51", "nrf51")
    store.set_faults("nrf51", stuck_busy=True)
    start = time.monotonic()
    with pytest.raises(exceptions.FlashEraseFailure, match="timed out"):
        flash_image("nrf51", "nrf51", os.urandom(2048), tmp_path,
                    **{"flash.timeout.erase_sector": 0.5, "flash.timeout.program": 0.5})
    assert time.monotonic() - start < 10
    assert set(store.read_flash("nrf51")) == {0xFF}


def test_fault_bit_flip(store, tmp_path):
    data = bytes([0xFF] * 64) + os.urandom(4032)
    store.create("st", "stm32f103rc")
    store.set_faults("st", bit_flip={"address": 0x08000010, "bit": 2})
    with pytest.raises(exceptions.FlashProgramFailure) as err:   # the algorithm reads back
        flash_image("st", "stm32f103rc", data, tmp_path)
    assert err.value.address == 0x08000000
    store.create("n", "nrf52840")
    store.set_faults("n", bit_flip={"address": 0x10, "bit": 2})
    flash_image("n", "nrf52840", data, tmp_path)                  # unnoticed by pyOCD...
    flash = store.read_flash("n")
    assert flash[0x10] == 0xFB and flash[:0x10] == data[:0x10] and flash[0x11:4096] == data[0x11:]
    with open_session("n") as session:                            # ...and read back wrong
        assert session.target.read8(0x10) == 0xFB


def test_fault_disconnect_after_saves_partial_state(store, tmp_path):
    data = os.urandom(IMAGE_SIZE)
    path = tmp_path / "img.bin"
    path.write_bytes(data)
    store.create("ref", "nrf52840")
    with open_session("ref") as session:
        after_connect = session.probe.transfer_count
        program_bin(session, path, "nrf52840")
        total = session.probe.transfer_count
    store.create("cut", "nrf52840")
    store.set_faults("cut", disconnect_after=(after_connect + total) // 2)
    with pytest.raises(exceptions.ProbeDisconnected):
        with open_session("cut") as session:
            program_bin(session, path, "nrf52840")
    flash = store.read_flash("cut")
    assert flash[:4096] == data[:4096]                  # what was written before the cut is kept
    assert flash[:IMAGE_SIZE] != data


def test_fault_absent_fails_connect(store):
    store.create("gone", "stm32f103rc")
    store.set_faults("gone", absent=True)
    start = time.monotonic()
    with pytest.raises(exceptions.Error, match="Target not detected"):
        with open_session("gone"):
            pass
    assert time.monotonic() - start < 5


def test_unmapped_access_is_transfer_fault(store):
    with open_session("nrf52840") as session:
        with pytest.raises(exceptions.TransferFaultError) as err:
            session.target.read32(0x30000000)
        assert err.value.fault_address == 0x30000000
        assert session.target.read32(0x20000000) is not None   # sticky error was cleared


def test_eject_mid_session_disconnects(store):
    store.create("usb", "nrf51")
    with pytest.raises(exceptions.ProbeDisconnected):
        with open_session("usb") as session:
            store.eject("usb")
            time.sleep(0.3)
            for _ in range(100):
                session.target.read32(0x20000000)
