"""A chip is mass-erased only when the user asked for it (issue 19, item 6), through the real CLI.

``erase`` needs ``--chip`` or ``--sector`` (as ``pyocd erase`` does); a mass erase (``erase
--chip``, ``protect recover``) asks on a terminal and needs ``--yes`` without one. A refusal or a
"no" touches nothing: the board's flash is byte for byte what it was, and the history holds no row.
"""

from __future__ import annotations

import os
import pty
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import expected_flash

from piflash.errors import ExitCode

U = ("-u", "sim:b", "-t", "nrf52840")


@pytest.fixture
def store(sim_dir):
    from piflash.sim import SimStore

    return SimStore()


@pytest.fixture
def flashed(store, firmware_dir):
    """A simulated nRF52840 "b" holding the test firmware (pre-loaded into the simulator's flash,
    not flashed: what is erased or kept is the point here); returns its flash as read back."""
    info = store.create("b", "nrf52840")
    store.write_flash("b", expected_flash(firmware_dir / "nrf52840" / "firmware.hex", info.spec.flash.size))
    before = store.read_flash("b")
    assert set(before) != {0xFF}
    return before


def piflash(*args, stdin=subprocess.DEVNULL, timeout=60):
    """``python -m piflash ARGS`` with stdin that is not a terminal (unless one is given)."""
    return subprocess.run([sys.executable, "-m", "piflash", *map(str, args)], stdin=stdin,
                          capture_output=True, text=True, timeout=timeout, env=os.environ.copy())


def on_terminal(*args, answer: str, timeout=60):
    """``python -m piflash ARGS`` with a pseudo-terminal as stdin, typing ``answer`` and Enter."""
    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen([sys.executable, "-m", "piflash", *map(str, args)], stdin=slave,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=os.environ.copy())
        os.write(master, answer.encode() + b"\n")
        out, err = proc.communicate(timeout=timeout)
    finally:
        os.close(slave)
        os.close(master)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def history_ops():
    path = Path(os.environ["PIFLASH_HISTORY"])
    if not path.exists():
        return []
    from support.stationkit import rows

    return [(r["operation"], r["outcome"]) for r in rows(path)]


def test_erase_without_chip_or_sector_is_a_usage_error(flashed, store):
    proc = piflash("erase", *U)
    assert proc.returncode == ExitCode.USAGE, proc.stderr
    assert "say what to erase: --chip" in proc.stderr and "--sector RANGE" in proc.stderr
    assert store.read_flash("b") == flashed          # the old code chip-erased here
    assert [op for op in history_ops() if op[0] == "erase"] == []


@pytest.mark.parametrize("args", [("erase", "--chip"), ("erase", "--chip", "--json")])
def test_chip_erase_without_a_terminal_needs_yes(flashed, store, args):
    proc = piflash(*args, *U)
    assert proc.returncode == ExitCode.USAGE, proc.stderr
    assert "mass-erases the chip" in proc.stderr and "add --yes" in proc.stderr
    assert store.read_flash("b") == flashed
    assert [op for op in history_ops() if op[0] == "erase"] == []
    assert piflash(*args, *U, "--yes").returncode == 0
    assert set(store.read_flash("b")) == {0xFF}


def test_chip_erase_asks_on_a_terminal(flashed, store):
    no = on_terminal("erase", "--chip", *U, answer="n")
    assert no.returncode == ExitCode.INTERRUPTED, no.stderr
    assert "mass-erases the chip" in no.stderr and "Go on? [y/N]" in no.stderr
    assert "not confirmed: nothing was erased" in no.stderr
    assert store.read_flash("b") == flashed
    assert [op for op in history_ops() if op[0] == "erase"] == []
    yes = on_terminal("erase", "--chip", *U, answer="y")
    assert yes.returncode == 0, yes.stderr
    assert set(store.read_flash("b")) == {0xFF}
    assert [op for op in history_ops() if op[0] == "erase"] == [("erase", "pass")]


def test_sector_erase_does_not_ask(flashed, store):
    proc = piflash("erase", "--sector", "0x1000+0x1000", *U)
    assert proc.returncode == 0, proc.stderr
    after = store.read_flash("b")
    assert after[0x1000:0x2000] == b"\xff" * 0x1000
    assert after[:0x1000] == flashed[:0x1000] and after[0x2000:] == flashed[0x2000:]


def test_recover_needs_yes_without_a_terminal_and_asks_on_one(flashed, store):
    piflash("protect", "lock", *U).check_returncode()
    proc = piflash("protect", "recover", *U)
    assert proc.returncode == ExitCode.USAGE, proc.stderr
    assert "protect recover mass-erases the chip" in proc.stderr and "add --yes" in proc.stderr
    assert store.read_flash("b") == flashed
    no = on_terminal("protect", "recover", *U, answer="")     # Enter: the default is no
    assert no.returncode == ExitCode.INTERRUPTED, no.stderr
    assert store.read_flash("b") == flashed
    assert not any(op.startswith("recover") for op, _ in history_ops())
    status = piflash("protect", "status", *U, "--json")
    assert '"state": "locked"' in status.stdout
    yes = on_terminal("protect", "recover", *U, answer="y")
    assert yes.returncode == 0, yes.stderr
    assert "MASS ERASE done" in yes.stdout
    assert set(store.read_flash("b")) == {0xFF}


def test_profile_erase_setting_is_kept_without_asking(store, firmware_dir, tmp_path):
    # A profile's (and so the station's) explicit 'erase: chip' is the user's choice: flash
    # runs it without a prompt and without --yes.
    store.create("b", "nrf52840")
    profiles = tmp_path / "profiles"
    profiles.mkdir(exist_ok=True)
    (profiles / "chip.yaml").write_text(textwrap.dedent(f"""\
        target: nrf52840
        probe: sim:b
        firmware: {firmware_dir / "nrf52840" / "firmware.hex"}
        erase: chip
        """))
    proc = piflash("flash", "-p", "chip", "--json")
    assert proc.returncode == 0, proc.stderr
    assert '"erase_mode": "chip"' in proc.stdout
