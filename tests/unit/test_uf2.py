"""UF2 firmware (issue 21, deliverable 3): real firmware nobody here wrote, made UF2 by
Microsoft's own converter (uf2conv.py, PyPI ``adafruit-uf2``), flashed byte-exact through the real
CLI; every damaged or foreign file refused with its exit code and the block at fault."""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("unicorn")
pytest.importorskip("adafruit_uf2")

from piflash.errors import ExitCode  # noqa: E402
from piflash.firmware.image import load_image  # noqa: E402
from piflash.firmware.uf2 import family_name, target_families  # noqa: E402
from piflash.sim import SimStore  # noqa: E402

NRF52840, STM32F1 = 0xADA52840, 0x5EE21072


def uf2conv(src: Path, out: Path, family: int = 0) -> Path:
    """Microsoft's uf2conv.py (as adafruit-uf2 ships it): Intel HEX -> UF2 with ``family``."""
    subprocess.run([sys.executable, "-c", "from adafruit_uf2.uf2conv import main; main()", str(src), "-c",
                    "-f", hex(family), "-o", str(out)], check=True, capture_output=True)
    return out


def blocks(path: Path):
    raw = path.read_bytes()
    return [bytearray(raw[i:i + 512]) for i in range(0, len(raw), 512)]


def write_blocks(path: Path, bs) -> Path:
    path.write_bytes(b"".join(bytes(b) for b in bs))
    return path


@pytest.fixture
def nrf_uf2(firmware_dir, tmp_path):
    return uf2conv(firmware_dir / "nrf52840" / "firmware.hex", tmp_path / "app.uf2", NRF52840)


def test_micropython_for_the_microbit_as_uf2_flashes_byte_exact(microbit_hex, tmp_path, cli):
    """Debian's MicroPython (two segments, one in UICR) through uf2conv without a family: the
    flash and UICR are what the .hex itself gives."""
    uf2 = uf2conv(microbit_hex, tmp_path / "micropython.uf2")
    store = SimStore()
    store.create("a", "nrf51")
    store.create("b", "nrf51")
    res = cli.json("flash", uf2, "-u", "sim:a", "-t", "nrf51")
    assert res["firmware_format"] == "uf2" and res["verified"]
    cli.json("flash", microbit_hex, "-u", "sim:b", "-t", "nrf51")
    for region in ("flash", "uicr"):
        assert store.read_nvm("a", region) == store.read_nvm("b", region)
    image = load_image(uf2)                   # uf2conv pads each block's 256 bytes with 0xff
    assert image.families == ()
    data = {s.address: s for s in image.segments}
    for seg in load_image(microbit_hex).segments:
        holder = next(s for s in data.values() if s.address <= seg.address and seg.end <= s.end)
        assert holder.data[seg.address - holder.address:seg.end - holder.address] == seg.data


@pytest.mark.parametrize("target,family", [("nrf52840", NRF52840), ("stm32f103rc", STM32F1)])
def test_family_uf2_flashes_byte_exact_and_verifies(target, family, firmware_dir, tmp_path, cli):
    hexfile = firmware_dir / target / "firmware.hex"
    uf2 = uf2conv(hexfile, tmp_path / "app.uf2", family)
    store = SimStore()
    store.create("u", target)
    res = cli.json("flash", uf2, "-u", "sim:u", "-t", target)
    assert res["ok"] and res["firmware_format"] == "uf2"
    image = load_image(hexfile)
    flash = store.read_flash("u")
    base = 0x08000000 if target.startswith("stm32") else 0
    for seg in image.segments:
        assert flash[seg.address - base:seg.end - base] == seg.data
    assert cli.json("verify", uf2, "-u", "sim:u", "-t", target)["verified"]


def test_a_uf2_for_another_chip_is_refused_before_the_probe_is_opened(nrf_uf2, cli):
    proc = cli("flash", nrf_uf2, "-u", "sim:nowhere", "-t", "stm32f103rc", check=int(ExitCode.IMAGE_RANGE))
    assert "the UF2 file is for family 0xada52840 (NRF52840, Nordic nRF52840), not for stm32f103rc" in proc.stderr
    assert "0x5ee21072 (STM32F1" in proc.stderr


def test_the_family_is_checked_against_the_board_the_probe_names(nrf_uf2, cli):
    """Without --target the sim: probe says its board type: still refused, nothing written."""
    store = SimStore()
    store.create("st", "stm32f103rc")
    before = store.read_flash("st")
    cli("flash", nrf_uf2, "-u", "sim:st", check=int(ExitCode.IMAGE_RANGE))
    assert store.read_flash("st") == before


def _refused(cli, path: Path, *words):
    proc = cli("flash", path, "-u", "sim:nowhere", "-t", "nrf52840", check=int(ExitCode.FIRMWARE))
    for word in words:
        assert word in proc.stderr, proc.stderr
    return proc


def test_cut_short(nrf_uf2, cli):
    raw = nrf_uf2.read_bytes()
    nrf_uf2.write_bytes(raw[:-100])
    n = len(raw) // 512 - 1
    _refused(cli, nrf_uf2, "UF2 file cut short", f"block {n} has 412 of 512 bytes")


def test_missing_and_repeated_blocks(nrf_uf2, cli, tmp_path):
    bs = blocks(nrf_uf2)
    _refused(cli, write_blocks(tmp_path / "missing.uf2", bs[:2] + bs[3:]), "block(s) 2 missing")
    _refused(cli, write_blocks(tmp_path / "twice.uf2", bs[:3] + [bs[2]] + bs[3:]), "repeats block number 2")


def test_bad_magic_payload_and_numbers(nrf_uf2, cli, tmp_path):
    bs = blocks(nrf_uf2)
    bad = [bytearray(b) for b in bs]
    bad[1][508:512] = b"\0\0\0\0"
    _refused(cli, write_blocks(tmp_path / "magic.uf2", bad), "UF2 block 1 (at byte 512) has a wrong magic number")
    big = [bytearray(b) for b in bs]
    struct.pack_into("<I", big[0], 16, 477)
    _refused(cli, write_blocks(tmp_path / "big.uf2", big), "payload is 477 bytes: at most 476 fit")
    beyond = [bytearray(b) for b in bs]
    struct.pack_into("<I", beyond[0], 20, len(bs))
    _refused(cli, write_blocks(tmp_path / "beyond.uf2", beyond), f"is number {len(bs)} of {len(bs)}")
    container = [bytearray(b) for b in bs]
    struct.pack_into("<I", container[0], 8, 0x1000)
    _refused(cli, write_blocks(tmp_path / "files.uf2", container), "file container block")


def test_blocks_not_for_main_flash_are_skipped(nrf_uf2, cli, tmp_path):
    bs = blocks(nrf_uf2)
    flags, addr = struct.unpack_from("<II", bs[1], 8)
    struct.pack_into("<I", bs[1], 8, flags | 1)
    path = write_blocks(tmp_path / "skip.uf2", bs)
    image = load_image(path)
    assert not any(s.address <= addr < s.end for s in image.segments)
    store = SimStore()
    store.create("k", "nrf52840")
    cli.json("flash", path, "-u", "sim:k", "-t", "nrf52840")
    assert store.read_flash("k")[addr:addr + 256] == b"\xff" * 256


def test_family_table():
    assert target_families("rp2350") == (0xE48BFF59, 0xE48BFF5A, 0xE48BFF5B, 0xE48BFF57)
    assert target_families("nrf51") is None
    assert family_name(0x12345678) == "0x12345678"


def test_profile_with_a_uf2_and_a_serial(nrf_uf2, cli, tmp_path):
    """Per-board bytes are laid over a UF2 image as over the others."""
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "u.yaml").write_text(f"target: nrf52840\nfirmware: {nrf_uf2}\n"
                                     "serial: {uicr_customer: 0, encoding: u32, start: 500}\n")
    SimStore().create("p", "nrf52840")
    res = cli.json("flash", "-p", "u", "-u", "sim:p", "--serial", "500")
    assert res["serial"] == "500" and res["firmware_format"] == "uf2"
    assert SimStore().read_nvm("p", "uicr")[0x80:0x84] == struct.pack("<I", 500)


def test_a_block_count_of_four_billion_costs_what_the_file_does(nrf_uf2, tmp_path):
    """Issue 38: a total of 0xFFFFFFFF in every block drove the missing-block report to 23 GB and
    the OOM killer. The report is made from the blocks present: the CLI, under a 512 MiB
    address-space cap, refuses the file as incomplete (exit 3) naming the first missing blocks."""
    import resource

    bs = blocks(nrf_uf2)
    for b in bs:
        struct.pack_into("<I", b, 24, 0xFFFFFFFF)
    path = write_blocks(tmp_path / "bomb.uf2", bs)

    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (512 << 20, 512 << 20))

    proc = subprocess.run([sys.executable, "-m", "piflash", "flash", str(path), "-t", "nrf52840"],
                          capture_output=True, text=True, timeout=60, preexec_fn=cap)
    assert proc.returncode == ExitCode.FIRMWARE, proc.stderr
    assert f"has {len(bs)} of its 4294967295 blocks: block(s) {len(bs)}, {len(bs) + 1}, " in proc.stderr
    assert "Traceback" not in proc.stderr
    from piflash.firmware.uf2 import _first_missing

    assert _first_missing({0, 2, 5}, 7, 5) == [1, 3, 4, 6] and _first_missing(set(), 2**32, 2) == [0, 1]
