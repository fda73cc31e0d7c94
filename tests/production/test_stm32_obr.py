"""STM32F1 read-out protection is read from FLASH_OBR.RDPRT, the level in effect (RM0008, FLASH
registers), not from the option-byte block at 0x1FFFF800, which is information only (issue 19,
item 7): a part or simulator whose option-byte block faults still flashes. The simulated
STM32F103's ``option_bytes_fault`` makes every debugger access to that block fault, as in a
simulator that models FLASH_OBR but not the block. Through the real CLI and pyOCD, on the ``sim:``
probe and behind a simulated USB CMSIS-DAP probe."""

from __future__ import annotations

import pytest

pytest.importorskip("unicorn")

from piflash.errors import ExitCode  # noqa: E402
from piflash.sim import SimStore  # noqa: E402
from piflash.sim.probes import usb as sim_usb  # noqa: E402
from piflash.sim.probes.usb.device import serial_for  # noqa: E402
from piflash.sim.probes.usb.presets import get_preset  # noqa: E402


@pytest.fixture
def stm32(monkeypatch):
    """``stm32(via)``: a simulated STM32F103RC called "st"; returns the ``-u`` arguments for the
    ``sim:`` probe or a simulated Raspberry Pi Debug Probe over USB."""
    store = SimStore()

    def make(via: str):
        store.create("st", "stm32f103rc")
        if via == "sim":
            return ["-u", "sim:st"]
        monkeypatch.setenv(sim_usb.ENV_VAR, "st@debugprobe")
        return ["-u", serial_for(get_preset("debugprobe"), "st", "stm32f103rc")]

    return make


@pytest.mark.parametrize("via", ["sim", "usb"])
def test_an_unreadable_option_byte_block_does_not_fail_the_flash(via, stm32, cli, firmware_dir):
    from conftest import expected_flash

    u = [*stm32(via), "-t", "stm32f103rc"]
    store = SimStore()
    store.set_faults("st", option_bytes_fault=True)
    fw = firmware_dir / "stm32f103rc" / "firmware.hex"
    out = cli.json("flash", fw, *u)                       # was exit 11 "protection check failed"
    assert out["ok"] and out["protection"] == "open"
    assert store.read_flash("st") == expected_flash(fw, 512 * 1024, 0x08000000)
    status = cli.json("protect", "status", *u)["status"]
    assert (status["state"], status["configured"]) == ("open", None)
    assert "FLASH_OBR = " in status["detail"] and "option byte RDP unreadable (0x1ffff800)" in status["detail"]


def test_a_lock_that_cannot_read_the_option_bytes_refuses_before_writing(stm32, cli):
    """A lock programs the option bytes back with RDP changed, so it needs them: it says so
    (exit 21), not "check power and wiring" (exit 11), and writes nothing."""
    u = [*stm32("sim"), "-t", "stm32f103rc"]
    store = SimStore()
    store.set_faults("st", option_bytes_fault=True)
    out = cli("protect", "lock", *u, check=int(ExitCode.PROTECT_FAILED))
    assert "cannot lock stm32f103rc: the option-byte block at 0x1ffff800 cannot be read" in out.stderr
    assert "nothing was written" in out.stderr and "power and wiring" not in out.stderr
    assert store.read_nvm("st", "option")[:2] == b"\xa5\x5a"
    store.clear_faults("st")
    assert cli.json("protect", "status", *u)["status"]["state"] == "open"


def test_the_verdict_is_flash_obr_rdprt(stm32, cli, firmware_dir):
    """Locked (RDP level 1 loaded at reset): FLASH_OBR.RDPRT says so while the option-byte block
    faults, so a flash is refused as protected (exit 20), not failed as a transfer fault."""
    u = [*stm32("sim"), "-t", "stm32f103rc"]
    store = SimStore()
    cli("protect", "lock", *u, check=0)
    store.set_faults("st", option_bytes_fault=True)
    status = cli.json("protect", "status", *u)["status"]
    assert (status["state"], status["configured"]) == ("locked", None)
    assert "RDPRT=1" in status["detail"]
    out = cli("flash", firmware_dir / "stm32f103rc" / "firmware.hex", *u, check=int(ExitCode.PROTECTED))
    assert "stm32f103rc is read-out protected (FLASH_OBR = " in out.stderr


def test_the_option_bytes_fault_is_for_stm32f1_boards(cli):
    SimStore().create("n", "nrf52840")
    with pytest.raises(ValueError, match="for STM32F1 boards"):
        SimStore().set_faults("n", option_bytes_fault=True)
    cli("sim", "fault", "n", "--option-bytes-fault", check=2)


def test_lock_then_recover_keeps_the_user_and_data_option_bytes(stm32, cli, firmware_dir):
    """Issue 38 item 5: a recover programs USER, Data0 and Data1 back as a lock keeps them (it
    erased them: USER and Data read 0xFF afterwards). Its write protection it clears: the flash
    it guarded is erased, and the next flash must be able to write page 0 (WRP0 bit 0)."""
    from conftest import expected_flash

    u = [*stm32("sim"), "-t", "stm32f103rc"]
    store = SimStore()
    # RDP 0xA5 (open), USER 0xF9 (WDG_SW=1, nRST_STOP=0, nRST_STDBY=0: a reset on entering Stop or Standby),
    # Data0 0x12, Data1 0x34, WRP0 0xFE (pages 0-1 write-protected), WRP1-3 0xFF; each with its
    # complement (PM0075 2.5, table 5).
    low = [0xA5, 0xF9, 0x12, 0x34, 0xFE, 0xFF, 0xFF, 0xFF]
    store.save_state("st", {"option": bytes(b for x in low for b in (x, x ^ 0xFF))}, {})
    before = cli.json("protect", "status", *u)["status"]
    assert "USER=0xf9, Data0=0x12, Data1=0x34), FLASH_WRPR = 0xfffffffe" in before["detail"]

    locked = cli.json("protect", "lock", *u)["status"]
    assert locked["state"] == "locked" and "USER=0xf9, Data0=0x12, Data1=0x34" in locked["detail"]
    assert store.read_nvm("st", "option")[2:10] == bytes.fromhex("f906 12ed 34cb fe01".replace(" ", ""))

    out = cli("protect", "recover", *u, "--yes", check=0).stdout
    assert "now OPEN" in out
    assert "USER=0xf9, Data0=0x12, Data1=0x34), FLASH_WRPR = 0xffffffff" in out
    assert store.read_nvm("st", "option") == bytes.fromhex("a55a f906 12ed 34cb ffff ffff ffff ffff".replace(" ", ""))

    fw = firmware_dir / "stm32f103rc" / "firmware.hex"
    assert cli.json("flash", fw, *u)["ok"]  # page 0 is writable again
    assert store.read_flash("st") == expected_flash(fw, 512 * 1024, 0x08000000)
