"""The Python API without the CLI: result objects, verify details, errors with partial results."""

from __future__ import annotations

import json
import os

import pytest

from piflash.errors import FlashError, NoProbeError, VerifyError
from piflash.firmware.image import image_from_bytes, load_image
from piflash.jobs.workflow import FlashOptions, flash_firmware, verify_firmware
from piflash.progress import ProgressSink


class Recorder(ProgressSink):
    def __init__(self):
        self.events = []

    def phase_start(self, phase, total):
        self.events.append(("start", phase, total))

    def phase_update(self, phase, done):
        self.events.append(("update", phase, done))

    def phase_end(self, phase, summary=""):
        self.events.append(("end", phase, summary))


def test_flash_result_and_progress(firmware_dir):
    image = load_image(firmware_dir / "stm32f103rc" / "firmware.hex")
    rec = Recorder()
    result = flash_firmware(image, probe="sim:stm32f103rc", target="stm32f103rc", progress=rec)
    assert result.ok and result.reset and result.target == "stm32f103rc"
    assert len(result.target_uid) == 24  # 96-bit unique ID, hex
    assert result.program.programmed_bytes >= image.size
    assert result.verify.verified_bytes == image.size
    assert set(result.durations) == {"connect", "erase", "program", "verify", "reset"}
    assert result.durations["connect"] < result.duration - result.durations["program"]
    phases = [e[1] for e in rec.events if e[0] == "start"]
    assert phases == ["connect", "erase", "program", "verify", "reset"]
    for phase in ("erase", "program", "verify"):
        updates = [e[2] for e in rec.events if e[0] == "update" and e[1] == phase]
        assert updates == sorted(updates) and updates[-1] == image.size, phase
    json.dumps(result.to_dict())  # JSON-friendly


def test_partial_pages_are_read_back_not_crc(tmp_path):
    # 3 full 4 KiB pages plus 100 bytes of a fourth, at an odd offset into the first page.
    data = os.urandom(3 * 4096 + 100)
    image = image_from_bytes(data, 0x10010)
    result = flash_firmware(image, probe="sim:nrf52840", target="nrf52840")
    stats = result.verify
    assert stats.verified_bytes == len(data)
    assert stats.crc_pages == 2          # pages 0x11000 and 0x12000 are fully covered
    assert stats.readback_bytes == len(data) - 2 * 4096


def test_verify_reports_first_bad_address_and_count(tmp_path):
    from piflash.sim.store import SimStore

    SimStore().create("nrf52840", "nrf52840")
    SimStore().set_faults("nrf52840", bit_flip={"address": 0x2345, "bit": 0})
    image = image_from_bytes(bytes(range(256)) * 64, 0)
    with pytest.raises(VerifyError) as err:
        flash_firmware(image, probe="sim:nrf52840", target="nrf52840")
    assert err.value.first_address == 0x2345 and err.value.differing_bytes == 1
    result = err.value.result
    assert result.ok is False and result.phase == "verify" and result.error["exit_code"] == 12
    # verify alone (no write) sees the same thing
    with pytest.raises(VerifyError):
        verify_firmware(image, probe="sim:nrf52840", target="nrf52840")


@pytest.mark.parametrize("target, base, flip", [
    ("nrf52840", 0x0, 0x3010),            # inside the partial last page: read back, not CRC
    ("stm32f103rc", 0x08000000, 0x08000801),  # page index too large for the analyzer: read back
])
def test_bit_flip_on_read_back_pages(target, base, flip):
    from piflash.sim.store import SimStore

    SimStore().create(target, target)
    SimStore().set_faults(target, bit_flip={"address": flip, "bit": 7})
    image = image_from_bytes(bytes([0x00]) * (0x3020), base)  # 0x00 everywhere: any set bit is wrong
    with pytest.raises((VerifyError, FlashError)) as err:
        flash_firmware(image, probe=f"sim:{target}", target=target)
    if isinstance(err.value, VerifyError):
        assert err.value.first_address == flip and err.value.differing_bytes == 1
    else:  # STM32: pyOCD's own algorithm reads back each half-word and already fails
        assert err.value.result.phase == "program"


def test_write_protect_raises_flash_error_with_address():
    from piflash.sim.store import SimStore

    SimStore().create("stm32f103rc", "stm32f103rc")
    SimStore().set_faults("stm32f103rc", write_protect=[0x08000800])
    image = image_from_bytes(os.urandom(8192), 0x08000000)
    with pytest.raises(FlashError) as err:
        flash_firmware(image, probe="sim:stm32f103rc", target="stm32f103rc", job=FlashOptions(erase="sector"))
    assert err.value.result.phase == "program"


def test_no_probe_is_raised_before_anything():
    with pytest.raises(NoProbeError):
        flash_firmware(image_from_bytes(b"\x00" * 4, 0), probe="sim-nothing-here", target="nrf52840")


@pytest.mark.parametrize("offset", [0x0, 0x7FF, 0x800, 0x1803, 0x3FFF])
def test_stm32_pages_are_verified_by_crc_blocks_and_a_flipped_bit_is_caught(offset):
    """STM32F1 flash at 0x08000000 in 2 KiB pages: each page's index is too large for the
    analyzer, so verify CRCs 4 KiB blocks (index 0x8000) instead of reading 16 KiB back."""
    from piflash.sim.store import SimStore

    data = os.urandom(16 * 1024)
    image = image_from_bytes(data, 0x08000000)
    result = flash_firmware(image, probe="sim:stm32f103rc", target="stm32f103rc")
    assert result.verify.crc_pages == 8 and result.verify.readback_bytes == 0
    SimStore().write_flash("stm32f103rc", bytes([data[offset] ^ 0x10]), offset)
    with pytest.raises(VerifyError) as err:
        verify_firmware(image, probe="sim:stm32f103rc", target="stm32f103rc")
    assert err.value.first_address == 0x08000000 + offset and err.value.differing_bytes == 1


@pytest.mark.parametrize("target, frequency, options, expected", [
    ("rp2040", None, None, 24_000_000),                 # piflash's default (piflash/targets/clocks.py)
    ("nrf52840", None, None, 1_000_000),                # no datasheet maximum: pyOCD's default
    ("rp2040", 1_000_000, None, 1_000_000),             # --frequency / a profile wins
    ("rp2040", None, {"frequency": 2_000_000}, 2_000_000),  # so does -O frequency=
])
def test_swd_clock_asked_for(target, frequency, options, expected):
    from piflash.sim.store import SimStore
    from piflash.targets.connect import open_session

    SimStore().create("clk-" + target, target)
    with open_session("sim:clk-" + target, target, frequency, options) as session:
        assert session.options.get("frequency") == expected
        assert session.probe._clock == expected          # what the probe was told (DAP_SWJ_Clock)
