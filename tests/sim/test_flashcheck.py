"""piflash's on-target blank check and CRC-32 (targetcode/flashcheck.c, piflash/flashing/flashcheck.py).

The simulated core executes the binary's real instructions on the simulated flash, so a result
that matches here is what the code computes on a Cortex-M0, M3 and M4F.
"""

from __future__ import annotations

import binascii
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from piflash.flashing import flashcheck
from piflash.flashing import plan as flashplan

ROOT = Path(__file__).resolve().parents[2]
BASE = {"nrf51": 0x0, "nrf52840": 0x0, "stm32f103rc": 0x08000000}
PAGE = {"nrf51": 1024, "nrf52840": 4096, "stm32f103rc": 2048}
TARGETS = list(BASE)


def _session(target: str, board: str):
    from piflash.targets.connect import open_session

    return open_session(f"sim:{board}", target)


def _board(target: str, board: str, flash: bytes = b""):
    from piflash.sim.store import SimStore

    store = SimStore()
    store.create(board, target, exist_ok=True)
    if flash:
        store.write_flash(board, flash)


def _check(session):
    flash = session.target.memory_map.get_boot_memory().flash
    flash.init(flash.Operation.VERIFY)
    check = flashcheck.FlashCheck.for_flash(flash)
    assert check is not None
    return flash, check


@pytest.mark.skipif(shutil.which("arm-none-eabi-gcc") is None or shutil.which("make") is None,
                    reason="needs make and gcc-arm-none-eabi (scripts/build-test-firmware.sh installs them)")
def test_the_committed_binaries_are_built_from_their_source(tmp_path):
    subprocess.run(["make", "-s", "-C", str(ROOT / "targetcode"), f"OUT={tmp_path}"], check=True)
    built = (tmp_path / "flashcheck.bin").read_bytes()
    assert built == flashcheck.binary(), "run `make -C targetcode` and commit piflash/data/flashcheck.bin"
    from piflash.flashing import (
        multipage,  # the run caller (targetcode/runcall.S) is built alongside
    )

    assert (tmp_path / "runcall.bin").read_bytes() == multipage.run_caller(), \
        "run `make -C targetcode` and commit piflash/data/runcall.bin"
    from piflash.probe import (
        picoboot,  # the PICOBOOT helper (targetcode/picoboot_ops.c) too
    )

    assert (tmp_path / "picoboot_ops.bin").read_bytes() == picoboot._ops_code(), \
        "run `make -C targetcode` and commit piflash/data/picoboot_ops.bin"


def test_runs_join_contiguous_blocks_of_one_size():
    blocks = [(0, 1024), (1024, 1024), (2048, 1024), (8192, 1024), (9216, 4096), (13312, 4096)]
    assert flashcheck.runs_of(blocks) == [(0, 1024, 3), (8192, 1024, 1), (9216, 4096, 2)]
    with pytest.raises(ValueError, match="not whole words"):
        flashcheck.runs_of([(2, 1024)])


@pytest.mark.parametrize("target", TARGETS)
def test_blank_check_finds_one_programmed_byte_anywhere(target):
    """A block is blank until any one byte in it is not 0xFF: the first, one in the middle,
    the last (after the 16-byte unrolled loop), or a single bit cleared."""
    page, base = PAGE[target], BASE[target]
    image = bytearray(b"\xff" * (8 * page))
    image[1 * page] = 0x00                       # page 1: first byte
    image[3 * page + page // 2 + 5] = 0x7F       # page 3: the middle, one bit
    image[5 * page + page - 1] = 0xFE            # page 5: the last byte
    image[7 * page + 16] = 0xEF                  # page 7: just after the first 16 bytes
    _board(target, f"blank-{target}", bytes(image))
    with _session(target, f"blank-{target}") as session:
        _flash, check = _check(session)
        result = check.blank([(base + i * page, page) for i in range(8)])
        # Out of order and across a gap: blocks are taken as given.
        shuffled = check.blank([(base + 7 * page, page), (base + 2 * page, page), (base + page, page)])
    assert result == [True, False, True, False, True, False, True, False]
    assert shuffled == [False, True, False]


@pytest.mark.parametrize("target", TARGETS)
def test_crc32_equals_binascii_on_the_flash(target):
    page, base = PAGE[target], BASE[target]
    data = random.Random(target).randbytes(6 * page)
    _board(target, f"crc-{target}", data)
    blocks = [(base + i * page, page) for i in range(6)] + [(base, 2 * page), (base + 4, 12)]
    with _session(target, f"crc-{target}") as session:
        _flash, check = _check(session)
        crcs = check.crc32(blocks)
    expect = [binascii.crc32(data[a - base:a - base + n]) for a, n in blocks]
    assert crcs == expect


def test_batches_split_when_the_arguments_do_not_fit():
    """A small I/O area: many calls, the same answers, in order."""
    target, page = "nrf51", 1024
    data = bytearray(random.Random(7).randbytes(40 * page))
    for i in range(0, 40, 3):
        data[i * page:(i + 1) * page] = b"\xff" * page
    _board(target, "batches", bytes(data))
    blocks = [(i * page, page) for i in range(40)]
    with _session(target, "batches") as session:
        _flash, check = _check(session)
        check.io_bytes = 64                 # 4 runs + 4 results per call at most
        crcs = check.crc32(blocks)
        blank = check.blank(blocks)
    assert crcs == [binascii.crc32(bytes(data[a:a + n])) for a, n in blocks]
    assert blank == [i % 3 == 0 for i in range(40)]


def test_the_plan_uses_the_blank_check_and_crcs_only_what_is_not_blank():
    """A half-programmed nrf51: blank pages are known from the blank check, the rest by CRC."""
    target, page = "nrf51", 1024
    old = random.Random(3).randbytes(4 * page) + b"\xff" * (4 * page)
    _board(target, "plan", old)
    image = old[:4 * page] + random.Random(4).randbytes(4 * page)   # same 4 pages, 4 new ones
    with _session(target, "plan") as session:
        flash = session.target.memory_map.get_boot_memory().flash
        plan = flashplan.plan_region(flash, [(0, image)])
        flash.cleanup()
    pages = plan.image_pages()
    assert [p.evidence for p in pages] == ["crc"] * 4 + ["blank"] * 4
    assert [p.write for p in pages] == [False] * 4 + [True] * 4
    assert not any(s.erase for s in plan.sectors)


def test_a_routine_that_returns_the_wrong_count_is_an_error():
    """The code in RAM overwritten between the load and the call: a clear FlashFailure."""
    from pyocd.core.exceptions import FlashFailure

    _board("nrf51", "clobbered")
    with _session("nrf51", "clobbered") as session:
        flash, check = _check(session)
        check.blank([(0, 1024)])                 # loads the code
        # Make fc_blank return at once with R0 = 0: "movs r0, #0; bx lr" at its entry.
        session.target.write_memory_block8(check._entries["blank"] & ~1, [0x00, 0x20, 0x70, 0x47])
        with pytest.raises(FlashFailure, match=r"returned 0x0 for 1 blocks"):
            check.blank([(0, 1024)])


def test_the_quick_check_asks_one_block_first_then_doubles(monkeypatch):
    """The station's "is the image already there?" check: a fresh board costs one CRC of one
    block; a board that carries the image is proven block by block in calls of 1, 2, 4... ."""
    from piflash.errors import VerifyError
    from piflash.firmware.image import image_from_bytes
    from piflash.flashing.verify import verify_image

    page, pages = 1024, 20
    data = random.Random(9).randbytes(pages * page)
    asked = []
    real = flashcheck.FlashCheck.crc32

    def spy(self, blocks):
        asked.append(len(blocks))
        return real(self, blocks)

    monkeypatch.setattr(flashcheck.FlashCheck, "crc32", spy)
    image = image_from_bytes(data, 0)
    _board("nrf51", "quick-fresh")
    with _session("nrf51", "quick-fresh") as session:
        with pytest.raises(VerifyError) as err:
            verify_image(session, image, quick=True)
    assert asked == [1] and err.value.first_address == 0
    asked.clear()
    _board("nrf51", "quick-same", data)
    with _session("nrf51", "quick-same") as session:
        stats = verify_image(session, image, quick=True)
    assert asked == [1, 2, 4, 8, 5] and stats.crc_pages == pages


@pytest.mark.parametrize("target", TARGETS)
def test_memory_mapped_flash_is_checked_without_the_algorithm(target):
    """nRF5x and STM32F10x (multipage.MEMORY_MAPPED): init_for_read only halts the core, with no
    load of the flash algorithm and no call of its Init (about eight USB round trips on a
    CMSIS-DAP probe), and FlashCheck sets its own stack pointer and Thumb bit, so its CRCs are
    right whatever the core held: here SP 0 and xPSR 0."""
    page, base = PAGE[target], BASE[target]
    data = random.Random(f"noinit-{target}").randbytes(4 * page)
    _board(target, f"noinit-{target}", data)
    blocks = [(base + i * page, page) for i in range(4)]
    with _session(target, f"noinit-{target}") as session:
        core = session.target
        flash = core.memory_map.get_boot_memory().flash
        core.halt()
        core.write_core_registers_raw(["sp", "xpsr"], [0, 0])
        flashplan.init_for_read(flash)
        algo = flash.flash_algo
        loaded = core.read_memory_block32(algo["load_address"], len(algo["instructions"]))
        crcs = flashcheck.FlashCheck.for_flash(flash).crc32(blocks)
    assert loaded != list(algo["instructions"])
    assert crcs == [binascii.crc32(data[a - base:a - base + n]) for a, n in blocks]
