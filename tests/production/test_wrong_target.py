"""A wrong target is never read as read-out protection (issue 19, items 1 and 2): before any
protection verdict the chip's ID registers prove it is the one named (piflash.targets.identify); a mismatch
is exit 10 naming the chip found and the target type to use, nothing is erased or programmed, and a
locked nRF52840 is exit 20 with or without --target. Through the real CLI and pyOCD, on the
``sim:`` probe and behind a simulated USB CMSIS-DAP probe (piflash.sim.probes.usb)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("unicorn")

from support.stationkit import rows  # noqa: E402

from piflash.errors import ExitCode  # noqa: E402
from piflash.sim import SimStore  # noqa: E402
from piflash.sim.probes import usb as sim_usb  # noqa: E402
from piflash.sim.probes.usb.device import serial_for  # noqa: E402
from piflash.sim.probes.usb.presets import get_preset  # noqa: E402
from piflash.targets.identify import expected_parts  # noqa: E402

CONNECT, PROTECTED = int(ExitCode.CONNECT), int(ExitCode.PROTECTED)
UNTOUCHED = "nothing was read as protection, erased or programmed"


@pytest.fixture
def board(monkeypatch):
    """``board(name, target, via)``: create a simulated board and return the ``-u`` arguments
    that reach it: ``via="sim"`` the sim: probe, ``via="usb"`` a simulated Raspberry Pi Debug
    Probe (``PIFLASH_SIM_USB``, seen by pyOCD's own USB discovery in the CLI's process)."""
    store = SimStore()

    def make(name: str, target: str, via: str = "sim", preset: str = "debugprobe"):
        store.create(name, target, exist_ok=True)
        if via == "sim":
            return ["-u", f"sim:{name}"]
        monkeypatch.setenv(sim_usb.ENV_VAR, f"{name}@{preset}")
        return ["-u", serial_for(get_preset(preset), name, target)]

    return make


def _history() -> list:
    import os

    return rows(Path(os.environ["PIFLASH_HISTORY"]))


VIA = ["sim", "usb"]


@pytest.mark.parametrize("via", VIA)
def test_nrf52840_named_on_an_open_nrf51_is_never_called_protected(via, board, cli, firmware_dir):
    """The issue's run: exit 20 "read-out protected", LOCKED, and a recover that mass-erased an
    open nRF51 and recorded 'recover-mass-erase'."""
    u = board("n51", "nrf51", via)
    store = SimStore()
    store.write_flash("n51", b"\x11" * 4096)                    # something a mass erase would lose
    before = store.read_flash("n51")
    fw = firmware_dir / "nrf52840" / "firmware.hex"
    for args in (["flash", fw], ["verify", fw], ["erase", "--chip", "--yes"], ["protect", "status"],
                 ["protect", "recover", "--yes"]):
        out = cli(*args, *u, "-t", "nrf52840", check=CONNECT)
        assert "the chip is not what --target nrf52840 names: it is an nRF51" in out.stderr, args
        assert "--target nrf51 " in out.stderr and UNTOUCHED in out.stderr, args
        assert "protected" not in out.stderr.replace("read as protection", "") and "LOCKED" not in out.stdout
    assert store.read_flash("n51") == before                    # nothing erased or programmed
    ops = [(r["operation"], r["outcome"]) for r in _history()]
    assert "recover-mass-erase" not in [op for op, _ in ops]
    assert all(outcome == "fail" for _, outcome in ops)
    json_err = cli.json("protect", "status", *u, "-t", "nrf52840", check=CONNECT)["error"]
    assert json_err["kind"] == "WrongTargetError" and json_err["exit_code"] == CONNECT


@pytest.mark.parametrize("via", VIA)
def test_nrf51_named_on_an_nrf52840_does_not_flash(via, board, cli, microbit_hex):
    """The issue's run: flashed nRF51 firmware with the nRF51 algorithm and recorded nrf51 PASS."""
    u = board("n52", "nrf52840", via)
    out = cli("flash", microbit_hex, *u, "-t", "nrf51", check=CONNECT)
    assert "it is an nRF52840" in out.stderr and "FICR INFO.PART 0x52840" in out.stderr
    assert "use --target nrf52840" in out.stderr
    assert set(SimStore().read_flash("n52")) == {0xFF}
    assert [(r["target"], r["outcome"]) for r in _history()] == [("nrf51", "fail")]


def test_stm32_named_on_an_nrf51_is_a_wrong_target_not_a_flash_failure(board, cli, firmware_dir):
    """The issue's run: exit 11 "protection check failed ... check power and wiring"."""
    u = board("n51", "nrf51")
    out = cli("flash", firmware_dir / "stm32f103rc" / "firmware.hex", *u, "-t", "stm32f103rc", check=CONNECT)
    assert "it is an nRF51" in out.stderr and "--target nrf51 " in out.stderr
    assert "power and wiring" not in out.stderr


def test_nrf52840_named_on_an_stm32f103_names_the_stm32(board, cli):
    u = board("st", "stm32f103rc")
    out = cli("protect", "status", *u, "-t", "nrf52840", check=CONNECT)
    assert "it is an STM32F10x high-density part" in out.stderr and "DBGMCU_IDCODE 0x10036414" in out.stderr
    assert "use --target stm32f103rc" in out.stderr


@pytest.mark.parametrize("via", VIA)
def test_a_locked_nrf52840_named_as_another_chip_is_not_erased(via, board, cli, firmware_dir):
    """A locked nRF52 hides its part number, but its CTRL-AP IDR proves the family: -t nrf51 or
    -t stm32f103rc is a mismatch (exit 10), and recover under the wrong type erases nothing."""
    u = board("l52", "nrf52840", via)
    fw = firmware_dir / "nrf52840" / "firmware.hex"
    cli("flash", fw, *u, "-t", "nrf52840", check=0)
    cli("protect", "lock", *u, "-t", "nrf52840", check=0)
    before = SimStore().read_flash("l52")
    for target in ("nrf51", "stm32f103rc"):
        out = cli("protect", "recover", "--yes", *u, "-t", target, check=CONNECT)
        assert "it is an nRF52-series chip" in out.stderr and "nRF52 CTRL-AP" in out.stderr
        assert "locked: FICR INFO.PART hidden" in out.stderr
    out = cli("flash", fw, *u, "-t", "nrf51", check=CONNECT)
    assert "it is an nRF52-series chip" in out.stderr
    assert SimStore().read_flash("l52") == before
    assert cli.json("protect", "status", *u, "-t", "nrf52840")["status"]["state"] == "locked"


@pytest.mark.parametrize("via,preset", [("sim", "debugprobe"), ("usb", "daplink")])
def test_a_locked_nrf52840_without_target_is_protected_with_a_true_hint(via, preset, board, cli, firmware_dir):
    """Item 2: the probe says which board it carries (a sim: board; a DAPLink whose board ID 1102
    is the nRF52840-DK in pyOCD's board_ids.py), so no -t is needed; a locked chip was exit 10
    "connect sequence failed ... SWD wired?". Now exit 20, and the hint's command works as given."""
    u = board("l52", "nrf52840", via, preset)
    if via == "usb":
        assert u[1].startswith("1102")
    fw = firmware_dir / "nrf52840" / "firmware.hex"
    cli("protect", "lock", *u, "-t", "nrf52840", check=0)
    for args in (["flash", fw], ["verify", fw], ["erase", "--chip", "--yes"]):
        out = cli(*args, *u, check=PROTECTED)
        assert "nrf52840 is read-out protected" in out.stderr, args
        assert "'piflash protect recover --target nrf52840' unlocks it" in out.stderr, args
        assert "connect sequence failed" not in out.stderr
    assert [r["protection"] for r in _history()][-3:] == ["locked"] * 3
    cli("protect", "recover", "--target", "nrf52840", *u, "--yes", check=0)   # the hint, as given (--yes: no terminal to ask on)
    cli("flash", fw, *u, check=0)


@pytest.mark.parametrize("via,named", [("sim", True), ("sim", False), ("usb", True)])
def test_info_on_a_locked_nrf52840_is_protected_like_every_other_command(via, named, board, cli):
    """``info`` on a locked nRF52840 was exit 10, "target type probably does not match"; every
    other command gives 20 with the recover hint. Now ``info`` does too, with or without -t where
    the probe names its board (a ``sim:`` probe does; a Debug Probe does not, so it needs -t)."""
    u = board("l52", "nrf52840", via)
    cli("protect", "lock", *u, "-t", "nrf52840", check=0)
    out = cli("info", *u, *(["-t", "nrf52840"] if named else []), check=PROTECTED)
    assert "nrf52840 is read-out protected (CTRL-AP APPROTECTSTATUS = 0x0" in out.stderr
    assert "'piflash protect recover --target nrf52840' unlocks it" in out.stderr
    assert "does not match" not in out.stderr and "connect sequence failed" not in out.stderr


@pytest.mark.parametrize("target,parts", [
    ("nrf52840", {0x52840}), ("nrf52", {0x52832}), ("nrf52833", {0x52833}), ("nrf51", None),
    ("stm32f103rc", {0x414}), ("stm32f103c8", {0x410}), ("stm32f103c6", {0x412}),
    ("stm32f103zg", {0x430}), ("stm32f107vc", {0x418}), ("stm32f100rb", {0x420}), ("stm32f100ze", {0x428}),
])
def test_target_types_name_their_part_numbers(target, parts):
    """The part a target type allows (nRF52 FICR INFO.PART; STM32F1 DEV_ID by density)."""
    assert expected_parts(target) == (frozenset(parts) if parts else None)
