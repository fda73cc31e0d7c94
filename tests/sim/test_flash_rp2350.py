"""``piflash`` on a simulated Raspberry Pi Pico 2 (RP2350): pico-examples blink (pyOCD's
test/data/binaries/rp2350.bin, not ours) as .uf2, the chip's OTP ID as the board's, the
datasheet's memory map instead of pyOCD's RP2040 one, the RP2350's own clock and QMI registers
(never the RP2040's), a chip erase through the QMI, and ``protect`` reading OTP CRITICAL."""

from __future__ import annotations

import pytest

pytest.importorskip("unicorn")

from support.uf2kit import RP2040_FAMILY, RP2350_ARM_S_FAMILY, to_uf2  # noqa: E402

from piflash.sim import SimStore  # noqa: E402


@pytest.fixture
def pico2(pyocd_binaries):
    store = SimStore()
    info = store.create("pico2", "rp2350")
    return store, info, (pyocd_binaries / "rp2350.bin").read_bytes()


def test_flash_blink_uf2_with_the_otp_chip_id_and_refuse_another_family(cli, pico2, tmp_path):
    store, info, blink = pico2
    uf2 = tmp_path / "blink.uf2"
    uf2.write_bytes(to_uf2(blink, 0x10000000, RP2350_ARM_S_FAMILY))
    out = cli.json("flash", uf2, "--probe", "sim:pico2", "-t", "rp2350")
    assert out["ok"] and out["verified"] and out["target"] == "rp2350"
    # The board is told apart by the chip's OTP ID (CHIPID3..0), as pico_get_unique_board_id.
    assert out["target_uid"] == info.target_uid.lower()
    padded = blink + b"\0" * (-len(blink) % 256)
    flash = store.read_flash("pico2")
    assert flash[:len(padded)] == padded and flash[len(padded):] == b"\xff" * (len(flash) - len(padded))
    again = cli.json("flash", uf2, "--probe", "sim:pico2", "-t", "rp2350")
    assert again["program"]["programmed_bytes"] == 0 and again["program"]["erased_bytes"] == 0

    other = tmp_path / "pico.uf2"
    other.write_bytes(to_uf2(blink, 0x10000000, RP2040_FAMILY))
    bad = cli.json("flash", other, "--probe", "sim:pico2", "-t", "rp2350", check=4)
    assert "0xe48bff56" in bad["error"]["message"]
    assert store.read_flash("pico2")[:len(padded)] == padded           # the board was not touched


def test_info_has_the_datasheet_memory_map_not_the_rp2040s(cli, pico2):
    out = cli.json("info", "--probe", "sim:pico2", "-t", "rp2350")
    assert out["target"] == "rp2350" and out["target_uid"] == pico2[1].target_uid.lower()
    regions = {r["name"]: (r["start"], r["size"]) for r in out["regions"]}
    assert regions["bootrom"] == (0, 0x8000)
    assert regions["sram0_7"] == (0x20000000, 0x80000) and regions["sram8_9"] == (0x20080000, 0x2000)
    assert regions["xip"] == (0x10000000, 0x1000000)
    assert not any(start == 0x21000000 or start == 0x51000000 for start, _ in regions.values())


def test_the_rp2350_gets_its_own_pll_and_qmi_registers(pico2):
    """pyOCD's one RP2 algorithm runs on both chips: piflash tells them apart by the boot ROM's
    header, starts the RP2350's crystal and PLL_SYS at its addresses (150 MHz) and sets the QMI's
    divider; none of the RP2040's SSI or clock registers is written (on an RP2350 0x40028000 is
    IO_BANK0)."""
    from piflash.targets.connect import open_session
    from piflash.targets.families import rp2_flash as rp2
    from piflash.targets.families.rp2 import chip_of

    with open_session("sim:pico2", "rp2350") as session:
        target = session.target
        assert chip_of(target) == "rp2350"
        flash = target.memory_map.get_boot_memory().flash
        flash.init(flash.Operation.PROGRAM)
        assert (target.read32(0x400D0000) >> 22) & 0xFF == 12           # the ROM's default divider
        assert target.read32(0x40010044) == 1                           # clk_sys from clk_ref
        assert rp2.faster_spi(flash)
        assert target.read32(0x40010044) == 2                           # aux: PLL_SYS
        assert target.read32(0x40050000) & (1 << 31)                    # PLL_SYS locked
        assert target.read32(0x4005000C) == (5 << 16) | (2 << 12)       # 1500 MHz / 5 / 2
        assert (target.read32(0x400D0000) >> 22) & 0xFF == rp2.QMI_PLL_CLKDIV
        assert target.read32(0x400D000C) & 0xFF == rp2.QMI_PLL_CLKDIV
        assert target.read32(0x400D0010) == rp2.QMI_READ_RFMT                # 3Bh dual output
        assert target.read32(0x400D0014) & 0xFF == 0x3B
        assert not target.read32(0x400D0000) & 1                         # direct mode off again
        flash.uninit()
        assert rp2.enable_xip(flash)                                    # only the divider: XIP reads
        assert target.read_memory_block8(0x10000000, 4) == [0xFF] * 4


def test_chip_erase_through_the_qmi(cli, pico2, tmp_path):
    store, info, blink = pico2
    store.write_flash("pico2", b"\x00" * 0x20000, offset=0x300000)     # something far away
    image = tmp_path / "blink.bin"
    image.write_bytes(blink)
    out = cli.json("flash", image, "--base-address", "0x10000000", "--erase", "chip",
                   "--probe", "sim:pico2", "-t", "rp2350")
    assert out["ok"] and out["verified"]
    flash = store.read_flash("pico2")
    assert flash[:len(blink)] == blink and flash[0x300000:0x320000] == b"\xff" * 0x20000
    assert len(flash) == 4 << 20


def test_protect_reads_otp_critical_and_refuses_to_program_otp(cli, pico2):
    out = cli.json("protect", "status", "--probe", "sim:pico2", "-t", "rp2350")
    status = out["status"]
    assert out["ok"] and status["family"] == "rp2350" and status["locked"] is False
    assert status["configured"] is False and "OTP CRITICAL = 0x0" in status["detail"]
    assert status["chip"].startswith("RP2350 (CHIP_ID 0x20004927")
    refused = cli.json("protect", "lock", "--probe", "sim:pico2", "-t", "rp2350", check=21)
    assert "OTP" in refused["error"]["message"] and "picotool" in refused["error"]["hint"]


def test_a_block_past_the_flash_it_reports_is_refused_before_anything_is_erased(cli, pico2, tmp_path):
    """Issue 38: the Pico 2's W25Q32RV is 4 MiB and ignores the address bits above; pyOCD's map
    gives the 16 MiB XIP window. As on the RP2040 (test_flash_rp2040), the flash's JEDEC ID, read
    through the QMI's direct mode, cuts the region: a UF2 block at 0x10401000 and an image 4.07 MiB
    long are exit 4 at connect, naming the block and the size, and the board is untouched."""
    store, info, blink = pico2
    first = tmp_path / "first.uf2"
    first.write_bytes(to_uf2(blink, 0x10000000, RP2350_ARM_S_FAMILY))
    cli.json("flash", first, "--probe", "sim:pico2", "-t", "rp2350")
    before = store.read_flash("pico2")
    stats = dict(store.get("pico2").stats)
    past = tmp_path / "past.uf2"
    past.write_bytes(to_uf2(blink[:512], 0x10401000, RP2350_ARM_S_FAMILY))
    long_ = tmp_path / "long.bin"
    long_.write_bytes(blink + b"\x5a" * (0x412000 - len(blink)))
    for command in (("flash", past), ("verify", past), ("flash", long_, "-a", "0x10000000")):
        out = cli.json(*command, "--probe", "sim:pico2", "-t", "rp2350", check=4)
        message = out["error"]["message"]
        assert "is outside the flash of rp2350" in message, message
        assert "4 MiB as the flash's JEDEC ID EF 40 16 says" in message, message
        assert out["phase"] == "connect" and out["program"]["erased_bytes"] == 0
    assert "image data at 0x10401000-0x104011ff" in cli.json("flash", past, "--probe", "sim:pico2", "-t", "rp2350",
                                                             check=4)["error"]["message"]
    assert store.read_flash("pico2") == before
    after = store.get("pico2").stats
    assert (after["erase_ops"], after["program_ops"]) == (stats["erase_ops"], stats["program_ops"])
