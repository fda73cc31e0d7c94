"""``piflash`` on a simulated Raspberry Pi Pico (RP2040): pico-examples blink (pyOCD's
test/data/binaries/rp2040.bin, not ours) as .bin and as .uf2, the flash's unique ID as the
board's, the unchanged re-flash, the history, and ``protect`` telling the truth (no protection)."""

from __future__ import annotations

from contextlib import contextmanager

import pytest

pytest.importorskip("unicorn")

from support.uf2kit import RP2040_FAMILY, RP2350_ARM_S_FAMILY, to_uf2  # noqa: E402

from piflash.sim import SimStore  # noqa: E402


@pytest.fixture
def pico(pyocd_binaries):
    store = SimStore()
    info = store.create("pico", "rp2040")
    return store, info, (pyocd_binaries / "rp2040.bin").read_bytes()


def test_flash_blink_bin_then_unchanged_and_the_flash_unique_id(cli, pico, pyocd_binaries, tmp_path):
    store, info, blink = pico
    out = cli.json("flash", pyocd_binaries / "rp2040.bin", "--base-address", "0x10000000",
                   "--probe", "sim:pico", "-t", "rp2040")
    assert out["ok"] and out["verified"] and out["program"]["programmed_bytes"] == 8704
    # The board is told apart by its flash's 64-bit unique ID (W25Q16JV 4Bh), read by piflash.
    assert out["target_uid"] == info.target_uid.lower()
    flash = store.read_flash("pico")
    assert flash[:len(blink)] == blink and flash[len(blink):] == b"\xff" * (len(flash) - len(blink))

    again = cli.json("flash", pyocd_binaries / "rp2040.bin", "--base-address", "0x10000000",
                     "--probe", "sim:pico", "-t", "rp2040")
    assert again["program"]["programmed_bytes"] == 0 and again["program"]["erased_bytes"] == 0
    assert again["program"]["skipped_bytes"] == 8704        # known unchanged by an on-target CRC
    rows = cli.json("history")["operations"]
    assert [(r["target_uid"], r["outcome"]) for r in rows] == [(info.target_uid.lower(), "pass")] * 2


def test_flash_blink_uf2_and_refuse_another_family(cli, pico, tmp_path):
    store, info, blink = pico
    uf2 = tmp_path / "blink.uf2"
    uf2.write_bytes(to_uf2(blink, 0x10000000, RP2040_FAMILY))
    out = cli.json("flash", uf2, "--probe", "sim:pico", "-t", "rp2040")
    assert out["ok"] and out["firmware_format"] == "uf2"
    padded = blink + b"\0" * (-len(blink) % 256)             # UF2 payloads are whole 256-byte blocks
    assert store.read_flash("pico")[:len(padded)] == padded

    other = tmp_path / "pico2.uf2"
    other.write_bytes(to_uf2(blink, 0x10000000, RP2350_ARM_S_FAMILY))
    bad = cli.json("flash", other, "--probe", "sim:pico", "-t", "rp2040", check=4)
    assert "0xe48bff59" in bad["error"]["message"] and "rp2040" in bad["error"]["message"]


def test_protect_says_the_rp2040_has_no_protection(cli, pico):
    out = cli.json("protect", "status", "--probe", "sim:pico", "-t", "rp2040")
    assert out["ok"] and out["status"]["locked"] is False and out["status"]["family"] == "rp2040"
    assert "no read-out protection" in out["status"]["detail"]
    refused = cli.json("protect", "lock", "--probe", "sim:pico", "-t", "rp2040", check=21)
    assert "no read-out protection to set" in refused["error"]["message"]


def test_faster_spi_runs_the_chip_from_the_pll_and_the_spi_faster(pico):
    """The ROM's flash_exit_xip (run by the algorithm's Init) sets BAUDR 6 at the ring
    oscillator's clock; piflash starts the crystal and PLL_SYS, runs clk_sys at 125 MHz and
    sets BAUDR 2 (62.5 MHz SCK, RX sample delay 1), which the ROM's later flash functions keep;
    before the UnInit it sets BAUDR 4, so the 03h XIP reads the UnInit sets up stay within the
    flash's 50 MHz; a page programmed then reads back; another target's algorithm is left
    alone."""
    from piflash.targets.connect import open_session
    from piflash.targets.families.rp2_flash import cmd_xip_divider, faster_spi

    with open_session("sim:pico", "rp2040") as session:
        target = session.target
        flash = target.memory_map.get_boot_memory().flash
        flash.init(flash.Operation.PROGRAM)
        assert target.read32(0x18000014) == 6
        assert target.read32(0x40008044) == 1                  # CLK_SYS_SELECTED: clk_ref
        assert [target.read32(0x40020000 + o) for o in (0x04, 0x08, 0x14)] == [0x56, 0x52, 0x52]
        assert faster_spi(flash) and target.read32(0x18000014) == 2 and target.read32(0x180000F0) == 1
        # the pads as boot stage 2 sets them for clk_sys / 2: SCLK 8 mA fast slew, no Schmitt
        assert [target.read32(0x40020000 + o) for o in (0x04, 0x08, 0x0C, 0x10, 0x14)] == [0x21] + [0x50] * 4
        assert target.read32(0x40008044) == 2                  # aux: PLL_SYS
        assert target.read32(0x40028000) & (1 << 31)           # PLL_SYS locked
        assert faster_spi(flash)                                # again: nothing to start
        assert target.read32(0x18000008) == 1                  # the SSI is enabled again
        flash.program_page(0x10000000, list(range(256)))
        assert cmd_xip_divider(flash) and target.read32(0x18000014) == 4
        flash.uninit()
        assert target.read32(0x18000014) == 4 and target.read32(0x180000F4) >> 24 == 0x03
        flash.init(flash.Operation.PROGRAM)                     # the ROM's connect_internal_flash
        assert target.read32(0x40020004) == 0x56                # resets the pads
        flash.uninit()
        flash.cleanup()
        assert target.read_memory_block8(0x10000000, 256) == list(range(256))
    SimStore().create("nrf", "nrf52840")
    with open_session("sim:nrf", "nrf52840") as session:
        assert not faster_spi(session.target.memory_map.get_boot_memory().flash)


#: What the boot ROM's flash_enter_cmd_xip leaves in the SSI: SSIENR, CTRLR0, SPI_CTRLR0, and
#: BAUDR 4 on PLL_SYS (piflash.targets.families.rp2_flash.CMD_XIP_BAUDR).
CMD_XIP = [1, 0x001F0300, 0x03000218]


def _spy_inits(flash) -> list:
    """The names of the operations ``flash.init`` is called for from now on (passed through)."""
    inits = []
    real_init = type(flash).init
    flash.init = lambda op, *a, **k: (inits.append(op.name), real_init(flash, op, *a, **k))[1]
    return inits


@contextmanager
def _blink_session(store, blink):
    """A session on the simulated Pico holding ``blink``: (session, target, its boot flash's
    pyOCD ``Flash``, the simulated serial flash)."""
    from piflash.targets.connect import open_session

    store.write_flash("pico", blink)
    with open_session("sim:pico", "rp2040") as session:
        target = session.target
        yield (session, target, target.memory_map.get_boot_memory().flash,
               session.probe.board.chip.port.pins.flash)


def _ssi(target):
    return [target.read32(0x18000000 + off) for off in (0x08, 0x00, 0xF4)]


@pytest.mark.parametrize("flash_kind", ["w25q16jv", "qe-clear", "macronix"])
def test_reads_in_the_continuous_quad_mode_without_the_init_then_as_the_rom_leaves_xip(pico, flash_kind):
    """After a power-up blink's boot stage 2 has the flash in quad XIP, so a read needs the
    algorithm's Init (its flash_exit_xip). After the connect's unique-ID read (Init and UnInit:
    the SSI as flash_enter_cmd_xip leaves it) a read phase needs no call of the algorithm: the
    SSI is set up from the debugger, with the flash's
    QE bit set as boot stage 2 does it (EBh, mode bits A0h: the continuous read mode, 28 SCK a
    line), else (QE clear, or a flash that is no Winbond W25Q) for 3Bh dual reads; blink and its
    CRC read back. The phase's end puts the flash
    back to taking instructions and the SSI back to the ROM's 03h set-up at BAUDR 4."""
    import binascii

    from piflash.flashing import plan
    from piflash.flashing.flashcheck import FlashCheck
    from piflash.targets.connect import read_target_uid
    from piflash.targets.families import rp2_flash as rp2

    store, _info, blink = pico
    with _blink_session(store, blink) as (session, target, flash, chip_flash):
        assert chip_flash.continuous and not rp2.reads_without_init(flash)      # boot stage 2's XIP
        assert read_target_uid(session, intrusive=True) == _info.target_uid.lower()
        assert not chip_flash.continuous
        assert _ssi(target) == CMD_XIP and rp2.reads_without_init(flash)
        quad = flash_kind == "w25q16jv"
        if flash_kind == "qe-clear":
            chip_flash.sr2 = 0                                  # a flash without QE set
        elif flash_kind == "macronix":
            chip_flash.jedec = bytes((0xC2, 0x20, 0x15))        # MX25L1606E: no 35h status read
        inits = _spy_inits(flash)
        cycles = []
        observer = chip_flash.nvm.observer
        chip_flash.nvm.observer = lambda op, n: (cycles.append(n) if op == "spi_cycles" else None,
                                                 observer and observer(op, n))
        with plan.reading(flash):
            assert chip_flash.continuous is quad
            assert (target.read32(0x18000000) >> 21) & 3 == (2 if quad else 1)
            assert target.read32(0x18000014) == 2                       # 62.5 MHz
            cycles.clear()
            assert bytes(target.read_memory_block8(0x10000000, 1024)) == blink[:1024]
            assert sum(cycles) == 128 * (28 if quad else 72) * 2
            check = FlashCheck.for_flash(flash)
            assert check.crc32([(0x10000000, 4096)]) == [binascii.crc32(blink[:4096])]
        assert inits == [] and not chip_flash.continuous
        assert _ssi(target) == CMD_XIP and target.read32(0x18000014) == 4
        assert bytes(target.read_memory_block8(0x10000000, 256)) == blink[:256]   # 03h XIP
        assert rp2.reads_without_init(flash)


@pytest.mark.parametrize("verify", [True, False])
def test_a_flash_without_reset_leaves_the_rom_xip_and_a_flash_that_takes_instructions(pico, verify):
    """A whole flash, with and without verify, and no reset: the board is left as the boot ROM
    leaves it (03h XIP at 31.25 MHz, the flash out of the continuous read mode), every transfer
    at 62.5 MHz ran on pads set up for it, so a core resumed without a
    reset reads its flash, and after the connect's unique-ID read neither the blank check nor
    the verify called the algorithm's Init (the verify's reads follow the program's UnInit)."""
    from piflash.firmware.image import image_from_bytes
    from piflash.jobs.workflow import FlashOptions, flash_session
    from piflash.record.result import OperationResult
    from piflash.targets.connect import open_session, read_target_uid

    _store, _info, blink = pico
    with open_session("sim:pico", "rp2040") as session:
        target = session.target
        flash = target.memory_map.get_boot_memory().flash
        assert read_target_uid(session, intrusive=True)       # what flash_firmware's connect does
        inits = _spy_inits(flash)
        result = OperationResult(operation="flash")
        flash_session(session, image_from_bytes(blink, 0x10000000), result,
                      job=FlashOptions(verify=verify, reset=False))
        if verify:      # blink: two whole 4 KiB sectors by a CRC each, a whole page by its own CRC,
            #             the last page's 24 bytes (8,472 = 33 x 256 + 24) read back
            assert result.verify.crc_pages == 33 and result.verify.readback_bytes == len(blink) % 256 == 24
        else:
            assert result.verify is None
        assert inits == ["PROGRAM"]                 # neither the blank check nor the verify
        assert _ssi(target) == CMD_XIP and target.read32(0x18000014) == 4
        pins = session.probe.board.chip.port.pins
        assert not pins.flash.continuous
        assert pins.untuned_transfers == 0          # nothing above 31.25 MHz on untuned pads
        assert bytes(target.read_memory_block8(0x10000000, len(blink))) == blink


def test_chip_erase_uses_the_flash_instruction_and_its_real_size(cli, pico, pyocd_binaries):
    """pyOCD's RP2 algorithm has no EraseAll: piflash erases the chip with the flash's C7h and
    reports the W25Q16JV's 2 MiB (from its JEDEC ID), not pyOCD's 16 MiB XIP window."""
    store, info, blink = pico
    store.write_flash("pico", b"\x00" * 4096, offset=0x1FF000)      # data at the flash's end
    out = cli.json("erase", "--chip", "--yes", "--probe", "sim:pico", "-t", "rp2040")
    assert out["ok"] and out["program"]["erased_bytes"] == 2 * 1024 * 1024
    assert store.read_flash("pico") == b"\xff" * (2 * 1024 * 1024)
    assert store.get("pico").stats["erase_ops"] == 1                  # one chip erase, no sectors

    flashed = cli.json("flash", pyocd_binaries / "rp2040.bin", "--base-address", "0x10000000",
                       "--probe", "sim:pico", "-t", "rp2040", "--erase", "chip")
    assert flashed["ok"] and flashed["program"]["erase_mode"] == "chip"
    assert flashed["program"]["erased_bytes"] == 2 * 1024 * 1024
    assert store.read_flash("pico")[:len(blink)] == blink


def test_sectors_of_whole_blocks_are_erased_by_block(cli, pico, tmp_path):
    """A board full of other data: the sectors a 72 KiB image covers are erased as one 64 KiB
    block (D8h) and two 4 KiB sectors, not 18 sector erases; the data after it is kept."""
    store, info, blink = pico
    store.write_flash("pico", b"\x00" * 0x20000)
    image = (blink * 9)[:72 * 1024]
    path = tmp_path / "image.bin"
    path.write_bytes(image)
    out = cli.json("flash", path, "--base-address", "0x10000000", "--probe", "sim:pico", "-t", "rp2040")
    assert out["ok"] and out["program"]["erased_bytes"] == 72 * 1024
    assert store.get("pico").stats["erase_ops"] == 3
    flash = store.read_flash("pico")
    assert flash[:len(image)] == image and flash[len(image):0x20000] == b"\x00" * (0x20000 - len(image))


def test_serial_and_patch_bytes_into_the_picos_flash(cli, pico, tmp_path):
    """A profile numbers the board and writes a label with its unique ID (the flash's, read by
    piflash) into the Pico's flash, next to blink; both are verified with the image."""
    store, info, blink = pico
    fw = tmp_path / "blink.uf2"
    fw.write_bytes(to_uf2(blink, 0x10000000))
    profiles = tmp_path / "profiles"
    profiles.mkdir(exist_ok=True)
    (profiles / "pico-line.yaml").write_text(
        f"target: rp2040\nfirmware: {fw}\n"
        "serial:\n  address: 0x1001F000\n  encoding: u32\n  start: 500\n"
        "patch:\n  - name: label\n    address: 0x1001F010\n    encoding: ascii\n    length: 32\n"
        "    template: \"PICO-{n}-{target_uid}\"\n")
    out = cli.json("flash", "-p", "pico-line", "-u", "sim:pico", "--serial", "507")
    uid = info.target_uid.lower()
    assert out["ok"] and out["serial"] == "507" and out["target_uid"] == uid
    assert out["patch"]["label"]["value"] == f"PICO-507-{uid}"
    flash = store.read_flash("pico")
    assert flash[0x1F000:0x1F004] == (507).to_bytes(4, "little")
    assert flash[0x1F010:0x1F030] == f"PICO-507-{uid}".encode().ljust(32, b"\0")
    assert flash[:len(blink)] == blink


def test_the_plan_proves_whole_sectors_by_one_crc_and_goes_by_page_where_one_differs(pico):
    """An RP2040's 4 KiB sectors of 256-byte pages: a sector that holds the image is proven by
    one CRC (not 16); a sector with a page of other data beside the image's pages is learnt page
    by page and kept, with nothing erased or written; a sector wholly the image's whose bytes
    differ is erased without a CRC per page; the flash then holds exactly what it should."""
    import random

    from piflash.flashing import plan as flashplan
    from piflash.targets.connect import open_session

    store, _info, _blink = pico
    rnd = random.Random(21)
    image = rnd.randbytes(3 * 4096 - 256)               # sector 2's last page is not the image's
    other = rnd.randbytes(256)
    old = bytearray(image + other + rnd.randbytes(4096))  # sector 3: not the image's at all
    old[4096 + 100] ^= 0xFF                              # sector 1 differs from the image
    store.write_flash("pico", bytes(old))
    with open_session("sim:pico", "rp2040") as session:
        flash = session.target.memory_map.get_boot_memory().flash
        plan = flashplan.plan_region(flash, [(0x10000000, image)])
        flash.cleanup()
        s0, s1, s2 = plan.sectors
        assert [p.evidence for p in s0.pages] == ["crc"] * 16 and not s0.erase
        assert [p.evidence for p in s1.pages] == [None] * 16 and s1.erase
        assert [p.evidence for p in s2.pages] == ["crc"] * 15 + [None] and not s2.erase
        assert not any(p.write for p in s0.pages + s2.pages)
        assert plan.crc_blocks == 3 + 16                 # three sectors, then sector 2 by page
        plan.erase()
        plan.program()
        want = image + other + bytes(old[3 * 4096:])
        assert bytes(session.target.read_memory_block8(0x10000000, len(want))) == want


@pytest.mark.parametrize("quick", [True, False])
def test_a_differing_byte_is_found_by_page_within_the_sector(pico, quick):
    """A sector whose one CRC differs is searched by its pages' CRCs: the quick verify names the
    page that differs, not the sector's first; the full verify reads back that page alone and
    gives the byte."""
    from piflash.errors import VerifyError
    from piflash.firmware.image import image_from_bytes
    from piflash.flashing.verify import verify_image
    from piflash.targets.connect import open_session, read_target_uid

    store, _info, blink = pico
    bad = bytearray(blink)
    bad[0x520] ^= 0xFF
    store.write_flash("pico", bytes(bad))
    with open_session("sim:pico", "rp2040") as session:
        target = session.target
        read_target_uid(session, intrusive=True)
        read_back = []
        real_read = target.read_memory_block8
        target.read_memory_block8 = lambda addr, n: (read_back.append(n), real_read(addr, n))[1]
        with pytest.raises(VerifyError) as err:
            verify_image(session, image_from_bytes(blink, 0x10000000), quick=quick)
    if quick:
        assert err.value.first_address == 0x10000500 and read_back == []
    else:
        assert err.value.first_address == 0x10000520 and err.value.differing_bytes == 1
        assert sum(read_back) == 256 + len(blink) % 256      # the page, and the partial last page


def test_a_read_phase_that_fails_leaves_the_next_one_reading_right(pico, monkeypatch):
    """The body of a read phase raises and so does the end of the reads: the error is the
    body's, and the next read phase, finding the ROM's 03h set-up at the divider the failed
    phase left (2), calls the algorithm's Init (whose flash_exit_xip ends the flash's continuous
    read mode) instead of trusting the SSI; blink reads back."""
    from pyocd.core.exceptions import TransferError

    from piflash.flashing import plan
    from piflash.targets.connect import read_target_uid
    from piflash.targets.families import rp2_flash as rp2

    store, _info, blink = pico
    with _blink_session(store, blink) as (session, target, flash, chip_flash):
        read_target_uid(session, intrusive=True)
        flash.init(flash.Operation.VERIFY)          # a read phase through the Init...

        def broken(_flash):
            raise TransferError("probe gone")
        monkeypatch.setattr(rp2, "end_reads", broken)
        monkeypatch.setattr(plan, "init_for_read", lambda f: rp2.enable_xip(f))
        with pytest.raises(RuntimeError, match="the body's"):
            with plan.reading(flash):
                assert chip_flash.continuous
                raise RuntimeError("the body's")
        monkeypatch.undo()
        assert chip_flash.continuous and _ssi(target) == CMD_XIP      # the UnInit's 03h...
        assert target.read32(0x18000014) == 2 and not rp2.reads_without_init(flash)   # ...at 62.5 MHz
        inits = _spy_inits(flash)
        with plan.reading(flash):
            assert bytes(target.read_memory_block8(0x10000000, len(blink))) == blink
        assert inits == ["VERIFY"] and not chip_flash.continuous


def test_a_block_past_the_flash_it_reports_is_refused_before_anything_is_erased(cli, pico, tmp_path):
    """Issue 38: the Pico's W25Q16JV is 2 MiB and ignores the address bits above; pyOCD's map gives
    the 16 MiB XIP window. A UF2 block at 0x10201000 ran 30 s into exit 11 (or, by PICOBOOT, was
    written at 0x1000); an image 2.07 MiB long "crc32 timed out". Both are exit 4 at connect,
    naming the block and the size the flash's JEDEC ID gives, and the board is untouched."""
    store, info, blink = pico
    first = tmp_path / "first.uf2"
    first.write_bytes(to_uf2(blink, 0x10000000, RP2040_FAMILY))
    cli.json("flash", first, "--probe", "sim:pico", "-t", "rp2040")
    before = store.read_flash("pico")
    stats = dict(store.get("pico").stats)
    past = tmp_path / "past.uf2"
    past.write_bytes(to_uf2(blink[:512], 0x10201000, RP2040_FAMILY))
    long_ = tmp_path / "long.bin"
    long_.write_bytes(blink + b"\x5a" * (0x212000 - len(blink)))
    for command in (("flash", past), ("verify", past), ("flash", long_, "-a", "0x10000000"),
                    ("verify", long_, "-a", "0x10000000")):
        out = cli.json(*command, "--probe", "sim:pico", "-t", "rp2040", check=4)
        message = out["error"]["message"]
        assert "is outside the flash of rp2040" in message, message
        assert "2 MiB as the flash's JEDEC ID EF 40 15 says" in message, message
        assert out["phase"] == "connect" and out["program"]["erased_bytes"] == 0
    assert "image data at 0x10201000-0x102011ff" in cli.json("flash", past, "--probe", "sim:pico", "-t", "rp2040",
                                                             check=4)["error"]["message"]
    assert store.read_flash("pico") == before
    after = store.get("pico").stats
    assert (after["erase_ops"], after["program_ops"]) == (stats["erase_ops"], stats["program_ops"])


def test_info_shows_the_flash_unique_id(cli, pico):
    """Issue 41: ``info -t rp2040`` said "Target UID: unknown". The RP2040's ID is its flash's,
    read by the 4Bh instruction as pico-sdk's flash_get_unique_id sends it."""
    store, info, blink = pico
    assert f"Target UID: {info.target_uid.lower()}" in cli("info", "-u", "sim:pico", "-t", "rp2040").stdout
    out = cli.json("info", "-u", "sim:pico", "-t", "rp2040")
    assert out["target_uid"] == info.target_uid.lower()
