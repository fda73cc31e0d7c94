"""``piflash read`` (issue 41): a board's flash, or a range of it, into a .bin, .hex or .uf2,
checked against the flash by CRC32, over SWD (the ``sim:`` probe, through pyOCD) and over PICOBOOT
(a simulated Pico in BOOTSEL mode, below pyusb). The oracle is the simulated board's own flash
(``SimStore.read_flash``), holding firmware nobody here wrote: pyOCD's CI binaries."""

from __future__ import annotations

import json
import os
import sqlite3

import pytest

pytest.importorskip("unicorn")

from piflash.errors import ExitCode  # noqa: E402
from piflash.firmware.image import load_image  # noqa: E402
from piflash.sim import SimStore  # noqa: E402

XIP = 0x10000000


def _history_rows() -> int:
    path = os.environ["PIFLASH_HISTORY"]
    if not os.path.exists(path):
        return 0
    with sqlite3.connect(path) as db:
        return db.execute("SELECT count(*) FROM operations").fetchone()[0]


@pytest.fixture
def nrf(pyocd_binaries):
    """A simulated nRF52840 whose flash holds pyOCD's nRF52840-DK test binary at 0."""
    store = SimStore()
    store.create("r", "nrf52840")
    blob = (pyocd_binaries / "l1_nrf52840-dk.bin").read_bytes()
    store.write_flash("r", blob)
    return store, blob


def test_whole_flash_to_bin_hex_and_uf2_is_the_boards_flash(cli, tmp_path, nrf):
    store, blob = nrf
    flash = store.read_flash("r")
    assert flash[: len(blob)] == blob
    out = cli.json("read", tmp_path / "all.bin", "-u", "sim:r", "-t", "nrf52840")
    assert (tmp_path / "all.bin").read_bytes() == flash               # the whole 1 MiB main flash
    assert out["operation"] == "read" and out["ok"] and out["image_bytes"] == len(flash)
    assert out["firmware"] == str(tmp_path / "all.bin") and out["firmware_format"] == "bin"
    assert out["verify"]["crc_pages"] == len(flash) // 4096           # checked on the target by CRC32
    assert set(out["durations"]) >= {"connect", "read", "verify", "reset"}
    cli("read", tmp_path / "all.hex", "-u", "sim:r", "-t", "nrf52840", check=0)
    assert [(s.address, s.data) for s in load_image(tmp_path / "all.hex").segments] == [(0, flash)]
    # the .hex read back verifies against the board, and flashes another board to the same bytes
    cli("verify", tmp_path / "all.hex", "-u", "sim:r", "-t", "nrf52840", check=0)
    store.create("copy", "nrf52840")
    cli("flash", tmp_path / "all.hex", "-u", "sim:copy", "-t", "nrf52840", check=0)
    assert store.read_flash("copy") == flash


def test_ranges_and_the_uicr(cli, tmp_path, nrf):
    store, blob = nrf
    flash = store.read_flash("r")
    cli("read", tmp_path / "part.uf2", "-u", "sim:r", "-t", "nrf52840", "--range", "0x1000+0x300", check=0)
    image = load_image(tmp_path / "part.uf2")
    assert [(s.address, s.data) for s in image.segments] == [(0x1000, flash[0x1000:0x1300])]
    cli("read", tmp_path / "two.hex", "-u", "sim:r", "-t", "nrf52840", "--range", "0x0+0x10",
        "--range", "0x10001000+0x100", check=0)
    segments = [(s.address, s.data) for s in load_image(tmp_path / "two.hex").segments]
    assert segments == [(0, flash[:0x10]), (0x10001000, store.read_nvm("r", "uicr")[:0x100])]


def test_refusals_touch_nothing_and_write_nothing(cli, tmp_path, nrf):
    tmp_path = tmp_path / "out"
    tmp_path.mkdir()
    proc = cli("read", tmp_path / "x.txt", "-u", "sim:r", "-t", "nrf52840", check=int(ExitCode.USAGE))
    assert "unknown output format '.txt'" in proc.stderr
    proc = cli("read", tmp_path / "x.bin", "-u", "sim:r", "-t", "nrf52840", "--range", "0+4", "--range", "8+4",
               check=int(ExitCode.USAGE))
    assert "a .bin holds one range" in proc.stderr
    assert _history_rows() == 0                                        # refused before the probe
    proc = cli("read", tmp_path / "x.bin", "-u", "sim:r", "-t", "nrf52840", "--range", "0xff000+0x2000",
               check=int(ExitCode.IMAGE_RANGE))
    assert "range 0x000ff000-0x00100fff is not inside the flash of nrf52840" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert sorted(os.listdir(tmp_path)) == []                          # no file, no .part left


def test_over_picoboot_the_main_flash_is_the_size_the_jedec_id_gives(cli, tmp_path, pyocd_binaries,
                                                                     monkeypatch):
    store = SimStore()
    store.create("pico", "rp2040")
    blink = (pyocd_binaries / "rp2040.bin").read_bytes()
    store.write_flash("pico", blink)
    monkeypatch.setenv("PIFLASH_SIM_USB", "pico@bootsel")
    out = json.loads(cli("read", tmp_path / "pico.uf2", "-u", "picoboot", "--range", f"{XIP:#x}+0x4000",
                         "--json", check=0).stdout)
    assert out["target"] == "rp2040" and out["verify"]["crc_pages"] == 0x4000 // 256  # by the 256-byte page
    image = load_image(tmp_path / "pico.uf2")
    assert image.families == (0xE48BFF56,)                             # the RP2040's UF2 familyID
    assert [(s.address, s.data) for s in image.segments] == [(XIP, store.read_flash("pico")[:0x4000])]
    proc = cli("read", tmp_path / "big.bin", "-u", "picoboot", "--range", f"{XIP + (2 << 20) - 0x100:#x}+0x200",
               check=int(ExitCode.IMAGE_RANGE))
    assert "2 MiB as the flash's JEDEC ID" in proc.stderr              # the W25Q16JV's size, not 16 MiB
