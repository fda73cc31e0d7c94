"""piflash's programming engine (piflash/flashing/plan.py) through the real pyOCD stack on simulated boards.

Each test flashes with ``flash_firmware`` (erase, program, read-back verify, reset) and checks two
things: the board's flash equals what it must hold byte for byte, and the flash controller did
only the work needed (its erase and program operation counts, kept by the simulator).
"""

from __future__ import annotations

import random

import pytest

from piflash.firmware.image import FirmwareImage, Segment, image_from_bytes, load_image
from piflash.jobs.workflow import FlashOptions, flash_firmware
from piflash.progress import ProgressSink

FLASH_BASE = {"nrf52840": 0x0, "nrf51": 0x0, "stm32f103rc": 0x08000000}
SECTOR = {"nrf52840": 4096, "nrf51": 1024, "stm32f103rc": 2048}


def _store():
    from piflash.sim.store import SimStore

    return SimStore()


class _Summaries(ProgressSink):
    def __init__(self):
        self.ends = {}

    def phase_end(self, phase, summary=""):
        self.ends[str(phase)] = summary


def _flash(image, target, board=None, erase="auto", progress=None):
    """Flash ``image``; return (result, flash controller operations this run)."""
    board = board or target
    store = _store()
    if not store.exists(board):
        store.create(board, target)
    before = dict(store.get(board).stats)
    result = flash_firmware(image, probe=f"sim:{board}", target=target, job=FlashOptions(erase=erase),
                            progress=progress)
    after = store.get(board).stats
    return result, {k: after.get(k, 0) - before.get(k, 0) for k in ("erase_ops", "program_ops", "program_bytes")}


def _rand(n, seed=1):
    return random.Random(seed).randbytes(n)


@pytest.mark.parametrize("target", ["nrf52840", "stm32f103rc"])
def test_fresh_board_is_programmed_without_erasing(target):
    data = _rand(16 * 1024)
    seen = _Summaries()
    result, ops = _flash(image_from_bytes(data, FLASH_BASE[target]), target, progress=seen)
    assert ops["erase_ops"] == 0                  # every sector was blank: nothing to erase
    assert seen.ends["erase"].startswith("nothing to erase")
    assert ops["program_bytes"] == len(data)
    assert result.program.erased_bytes == 0 and result.program.programmed_bytes == len(data)
    assert _store().read_flash(target)[:len(data)] == data
    assert result.verify.verified_bytes == len(data)


@pytest.mark.parametrize("target", ["nrf52840", "stm32f103rc"])
def test_reflash_of_the_same_image_writes_nothing(target):
    image = image_from_bytes(_rand(16 * 1024), FLASH_BASE[target])
    _flash(image, target)
    result, ops = _flash(image, target)
    assert ops == {"erase_ops": 0, "program_ops": 0, "program_bytes": 0}
    assert result.program.programmed_bytes == 0 and result.program.skipped_bytes == 16 * 1024


def test_microbit_uicr_is_not_rewritten_on_reflash(microbit_hex):
    """MicroPython writes 28 bytes into the nRF51 UICR, which the CRC analyzer cannot address:
    pyOCD's FlashBuilder erased and rewrote it on every flash; the engine reads it back instead."""
    image = load_image(microbit_hex)
    assert any(s.address >= 0x10001000 for s in image.segments)
    _, first = _flash(image, "nrf51")
    assert first["erase_ops"] == 0                # fresh board: UICR and flash blank
    _, again = _flash(image, "nrf51")
    assert again == {"erase_ops": 0, "program_ops": 0, "program_bytes": 0}


def test_one_changed_page_erases_one_sector():
    data = bytearray(_rand(32 * 1024))
    _flash(image_from_bytes(bytes(data), 0), "nrf52840")
    data[5 * 4096 + 17] ^= 0xFF
    seen = _Summaries()
    result, ops = _flash(image_from_bytes(bytes(data), 0), "nrf52840", progress=seen)
    assert ops["erase_ops"] == 1 and ops["program_bytes"] == 4096
    assert seen.ends["erase"].startswith("1 sector(s) erased (4,096 B)")
    assert result.program.erased_bytes == 4096 and result.program.skipped_pages == 7
    assert _store().read_flash("nrf52840")[:len(data)] == bytes(data)


def test_bytes_outside_the_image_in_an_erased_sector_are_kept():
    old = _rand(8 * 1024, seed=2)
    _flash(image_from_bytes(old, 0), "nrf52840")
    patch = _rand(100, seed=3)
    result, ops = _flash(image_from_bytes(patch, 0x1010), "nrf52840")
    assert ops["erase_ops"] == 1                  # the sector at 0x1000 held other data
    want = bytearray(old)
    want[0x1010:0x1010 + 100] = patch
    assert _store().read_flash("nrf52840")[:len(want)] == bytes(want)


def test_partial_page_on_a_blank_sector_needs_no_erase():
    patch = _rand(100, seed=4)
    _, ops = _flash(image_from_bytes(patch, 0x2010), "nrf52840")
    assert ops["erase_ops"] == 0
    flash = _store().read_flash("nrf52840")
    assert flash[0x2000:0x2010] == b"\xff" * 16 and flash[0x2010:0x2074] == patch
    assert flash[0x2074:0x3000] == b"\xff" * (0x3000 - 0x2074)


@pytest.mark.parametrize("target", ["nrf52840", "nrf51", "stm32f103rc"])
def test_a_different_image_over_an_old_one(target):
    """Sectors holding old data are erased; blank ones are not; the flash ends up as the image."""
    base, sector = FLASH_BASE[target], SECTOR[target]
    _flash(image_from_bytes(_rand(4 * sector, seed=5), base), target)
    new = _rand(8 * sector, seed=6)               # the first half over old data, the rest blank
    _, ops = _flash(image_from_bytes(new, base), target)
    assert ops["erase_ops"] == 4 and ops["program_bytes"] == len(new)
    assert _store().read_flash(target)[:len(new)] == new


def test_auto_never_mass_erases_a_settings_page_outside_the_image():
    """An image starting at the start of flash, mostly 0xFF (pyOCD's ``auto`` picks a chip erase
    for it, FlashBuilder.erase): data the user keeps after the image must survive."""
    settings = _rand(4096, seed=7)
    _flash(image_from_bytes(settings, 0x80000), "nrf52840")
    old = _rand(16 * 4096, seed=8)
    _flash(image_from_bytes(old, 0), "nrf52840")
    image = image_from_bytes(_rand(4096, seed=9) + b"\xff" * (15 * 4096), 0)
    result, _ = _flash(image, "nrf52840", erase="auto")
    flash = _store().read_flash("nrf52840")
    assert result.program.erase_mode == "sector"
    assert flash[0x80000:0x81000] == settings
    assert flash[:16 * 4096] == image.segments[0].data


def test_chip_erase_when_asked_wipes_outside_the_image():
    _flash(image_from_bytes(_rand(4096, seed=10), 0x80000), "nrf52840")
    data = _rand(8192, seed=11)
    result, ops = _flash(image_from_bytes(data, 0), "nrf52840", erase="chip")
    flash = _store().read_flash("nrf52840")
    assert result.program.erase_mode == "chip" and ops["erase_ops"] >= 1
    assert flash[:8192] == data and flash[0x80000:0x81000] == b"\xff" * 4096


def test_image_with_gaps_and_two_segments_in_one_sector():
    a, b = _rand(300, seed=12), _rand(200, seed=13)
    image = FirmwareImage(path=None, format="hex", segments=(Segment(0x100, a), Segment(0x800, b)), sha256="")
    _flash(image, "nrf52840")
    flash = _store().read_flash("nrf52840")
    assert flash[0x100:0x100 + 300] == a and flash[0x800:0x800 + 200] == b
    assert flash[:0x100] == b"\xff" * 0x100 and flash[0x100 + 300:0x800] == b"\xff" * (0x800 - 0x100 - 300)


def test_blank_check_tells_blank_from_written():
    # The one blank check (verify.blank_check, used after every erase): CRC proves the blank
    # blocks; the written one is read back and its first non-blank byte named.
    from piflash.flashing.verify import blank_check
    from piflash.targets.connect import open_session

    _flash(image_from_bytes(b"\x00" * 16, 0x1010), "nrf52840")
    with open_session("sim:nrf52840", "nrf52840") as session:
        blank = blank_check(session, [(0, 0x1000), (0x2000, 0x3000)])
        assert blank.dirty_bytes == 0 and blank.crc_bytes == 0x2000 and blank.readback_bytes == 0
        written = blank_check(session, [(0x1000, 0x2000)])
        assert written.dirty_bytes == 16 and written.first_dirty == 0x1010


def test_crc_unit_brings_stm32_blocks_under_16_bits():
    from pyocd.core.memory_map import FlashRegion

    from piflash.flashing.plan import crc_unit

    class _Flash:
        use_analyzer = True

    stm32 = FlashRegion(start=0x08000000, length=0x80000, blocksize=0x800)
    uicr = FlashRegion(start=0x10001000, length=0x400, blocksize=0x400)
    nrf52 = FlashRegion(start=0, length=0x100000, blocksize=0x1000)
    assert crc_unit(_Flash(), stm32, 0x800) == 0x1000
    assert crc_unit(_Flash(), uicr, 0x400) is None
    assert crc_unit(_Flash(), nrf52, 0x1000) == 0x1000


def test_regions_with_unreadable_erased_sectors_go_to_flash_builder():
    from pyocd.core.memory_map import FlashRegion
    from pyocd.flash.flash import Flash

    from piflash.flashing.plan import (
        BuilderRegion,
        EngineRegion,
        make_region_programmer,
    )

    algo = {"load_address": 0x20000000, "instructions": [0] * 64, "pc_init": 0x20000001,
            "pc_erase_sector": 0x20000011, "pc_program_page": 0x20000021, "page_buffers": [0x20001000],
            "begin_stack": 0x20002000, "static_base": 0x20000100, "analyzer_supported": False}
    for readable, kind in ((False, BuilderRegion), (True, EngineRegion)):
        region = FlashRegion(start=0, length=0x10000, blocksize=0x1000, flash_class=Flash, algo=algo,
                             are_erased_sectors_readable=readable)
        flash = Flash(None, algo)
        flash.region = region
        assert isinstance(make_region_programmer(flash, [(0, b"\x01" * 16)]), kind)
    assert isinstance(make_region_programmer(flash, [(0, b"\x01" * 16)], smart_flash=False), BuilderRegion)


def test_reflash_verify_is_the_plans_check_when_nothing_was_written():
    """Nothing written: the plan compared every page in this session, so that check is the verify
    (one CRC pass, not two); its numbers say so."""
    image = image_from_bytes(_rand(16 * 1024), 0)
    seen = _Summaries()
    first, _ = _flash(image, "nrf52840", progress=seen)
    assert first.verify.crc_pages == 4 and "nothing written" not in seen.ends["verify"]
    again, ops = _flash(image, "nrf52840", progress=seen)
    assert ops["program_ops"] == 0 and ops["erase_ops"] == 0
    assert "nothing written" in seen.ends["verify"]
    assert again.verify.verified_bytes == 16 * 1024 and again.verify.crc_pages == 4
    assert again.verify.mismatched_bytes == 0


@pytest.mark.parametrize("target, offset", [("nrf52840", 0x2FFF), ("nrf51", 0x10), ("stm32f103rc", 0x1801)])
def test_a_flipped_bit_on_the_board_is_found_and_rewritten(target, offset):
    """A board whose flash lost one bit since the last flash: the plan's CRC sees the page
    differ, the sector is erased and rewritten, and the real verify after it passes."""
    data = _rand(4 * SECTOR[target] if target != "nrf52840" else 16 * 1024, seed=14)
    image = image_from_bytes(data, FLASH_BASE[target])
    _flash(image, target)
    _store().write_flash(target, bytes([data[offset] ^ 0x04]), offset)
    result, ops = _flash(image, target)
    assert ops["erase_ops"] >= 1 and ops["program_bytes"] >= SECTOR[target]
    assert result.verify.verified_bytes == len(data) and result.verify.crc_pages >= 1
    assert _store().read_flash(target)[:len(data)] == data


def _uicr_written(board):
    """Give the board's UICR data (CUSTOMER[0] at offset 0x80), bypassing the NVMC."""
    store = _store()
    _, images = store.load_state(board)
    uicr = bytearray(images["uicr"])
    uicr[0x80:0x84] = b"\x78\x56\x34\x12"
    store.save_state(board, {"uicr": bytes(uicr)}, {})


def test_chip_erase_runs_one_eraseall_when_it_clears_every_region():
    """nRF52840: NVMC ERASEALL clears the code flash and the UICR. pyOCD's chip erase runs
    EraseAll for each of the two regions (four NVM erases in the simulator: each ERASEALL
    clears both arrays); piflash runs it once and proves both regions blank."""
    from piflash.flashing.program import erase_flash
    from piflash.targets.connect import open_session

    store = _store()
    store.create("chip1", "nrf52840")
    store.write_flash("chip1", _rand(8192, 9))
    _uicr_written("chip1")
    before = store.get("chip1").stats["erase_ops"]
    with open_session("sim:chip1", "nrf52840") as session:
        erase_flash(session, "chip")
    assert store.get("chip1").stats["erase_ops"] - before == 2
    assert store.read_flash("chip1")[:8192] == b"\xff" * 8192
    assert set(store.read_nvm("chip1", "uicr")) == {0xFF}


def test_chip_erase_runs_eraseall_per_region_for_an_algorithm_not_listed(monkeypatch):
    """An algorithm not known to erase the whole chip gets pyOCD's EraseAll for every region."""
    from piflash.flashing import program
    from piflash.targets.connect import open_session

    monkeypatch.setattr(program, "CHIP_WIDE_ERASE_ALL", {})
    store = _store()
    store.create("chip2", "nrf52840")
    _uicr_written("chip2")
    before = store.get("chip2").stats["erase_ops"]
    with open_session("sim:chip2", "nrf52840") as session:
        program.erase_flash(session, "chip")
    assert store.get("chip2").stats["erase_ops"] - before == 4
    assert set(store.read_nvm("chip2", "uicr")) == {0xFF}
