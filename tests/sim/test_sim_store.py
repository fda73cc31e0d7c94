"""Tests of piflash.sim's pure-Python parts: board store, faults, target tables, plugin gate."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from piflash.sim import (
    SIM_TARGETS,
    BoardExistsError,
    SimStore,
    UnknownBoardError,
    auto_target_for_name,
    default_root,
    valid_board_name,
)
from piflash.sim.faults import Faults
from piflash.sim.specs import TARGETS


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setenv("PIFLASH_SIM_DIR", str(tmp_path / "sim"))
    return SimStore()


def test_sim_targets_exported():
    assert SIM_TARGETS == ("nrf51", "nrf52840", "stm32f103rc", "rp2040", "rp2350")
    assert set(TARGETS) == set(SIM_TARGETS)


def test_default_root_precedence(monkeypatch, tmp_path):
    monkeypatch.delenv("PIFLASH_SIM_DIR", raising=False)
    monkeypatch.delenv("XDG_STATE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_root() == tmp_path / "home" / ".local" / "state" / "piflash" / "sim"
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert default_root() == tmp_path / "xdg" / "piflash" / "sim"
    monkeypatch.setenv("PIFLASH_SIM_DIR", str(tmp_path / "explicit"))
    assert default_root() == tmp_path / "explicit"


def test_board_names():
    for good in ("a", "nrf52840", "bench-1", "x_y.z"):
        assert valid_board_name(good)
    for bad in ("", "-a", "A", "a/b", "a b", ".x", "ü"):
        assert not valid_board_name(bad)
    assert auto_target_for_name("nrf52840") == "nrf52840"
    assert auto_target_for_name("nrf52840-2") == "nrf52840"
    assert auto_target_for_name("stm32f103rc-left") == "stm32f103rc"
    assert auto_target_for_name("nrf52840x") is None
    assert auto_target_for_name("nrf52840-") is None
    assert auto_target_for_name("bench") is None


@pytest.mark.parametrize("target", SIM_TARGETS)
def test_create_get_read_flash(store, target):
    info = store.create("b1", target)
    spec = TARGETS[target]
    assert info.name == "b1" and info.target == target and info.present
    assert info.unique_id == "sim:b1"
    assert len(info.target_uid) == 2 * spec.uid_length
    bytes.fromhex(info.target_uid)
    flash = store.read_flash("b1")
    assert len(flash) == spec.flash.size and set(flash) == {0xFF}
    again = store.get("b1")
    assert again.target_uid == info.target_uid and again.target == target
    assert [b.name for b in store.list()] == ["b1"]
    on_disk = json.loads((store.root / "b1" / "board.json").read_text())
    assert on_disk["target"] == target and on_disk["target_uid"] == info.target_uid
    # No temporary files are left behind by the atomic writes.
    assert not [p for p in (store.root / "b1").iterdir() if p.name.startswith(".")]


def test_unique_ids_random_and_explicit(store):
    a = store.create("a", "nrf52840")
    b = store.create("b", "nrf52840")
    assert a.target_uid != b.target_uid
    c = store.create("c", "stm32f103rc", target_uid="00112233445566778899aabb")
    assert c.target_uid == "00112233445566778899aabb"
    with pytest.raises(ValueError):
        store.create("d", "stm32f103rc", target_uid="0011")
    with pytest.raises(ValueError):
        store.create("e", "nrf51", target_uid="zz" * 8)


def test_create_errors(store):
    store.create("x", "nrf51")
    with pytest.raises(BoardExistsError):
        store.create("x", "nrf51")
    assert store.create("x", "nrf51", exist_ok=True).target == "nrf51"
    with pytest.raises(BoardExistsError):
        store.create("x", "nrf52840", exist_ok=True)
    with pytest.raises(ValueError):
        store.create("Bad", "nrf51")
    with pytest.raises(ValueError):
        store.create("y", "stm32f407")
    with pytest.raises(UnknownBoardError):
        store.get("nope")
    with pytest.raises(UnknownBoardError):
        store.read_flash("nope")
    with pytest.raises(UnknownBoardError):
        store.remove("nope")


def test_remove_and_list_empty(store):
    assert store.list() == []          # root does not even exist yet
    store.create("x", "nrf51")
    store.remove("x")
    assert store.list() == [] and not store.exists("x")


def test_insert_eject(store):
    store.create("x", "nrf51")
    assert store.eject("x").present is False
    assert store.get("x").present is False
    assert store.insert("x").present is True


def test_write_flash_helper(store):
    store.create("x", "stm32f103rc")
    store.write_flash("x", b"\x01\x02\x03", offset=0x800)
    flash = store.read_flash("x")
    assert flash[0x800:0x803] == b"\x01\x02\x03" and flash[0x7FF] == 0xFF
    with pytest.raises(ValueError):
        store.write_flash("x", b"\x00", offset=0x80000)


def test_faults_set_clear_validate(store):
    store.create("n", "nrf52840")
    info = store.set_faults("n", write_protect=[0x1234, 0x3000], stuck_busy=True,
                            bit_flip={"address": 0x10, "bit": 7}, disconnect_after=5, absent=True)
    f = info.faults
    assert f.write_protect == [0x1000, 0x3000]      # rounded down to the 4 KiB page
    assert f.stuck_busy and f.absent and f.disconnect_after == 5
    assert f.bit_flip == {"address": 0x10, "bit": 7}
    assert store.get("n").faults == f
    assert store.set_faults("n", stuck_busy=None).faults.stuck_busy is False
    assert store.clear_faults("n", "absent").faults.absent is False
    cleared = store.clear_faults("n").faults
    assert cleared == Faults()
    for bad in ({"nonsense": 1}, {"write_protect": [0x2000_0000]}, {"bit_flip": {"address": 0, "bit": 8}},
                {"bit_flip": 3}, {"disconnect_after": -1}, {"stuck_busy": "yes"}):
        with pytest.raises(ValueError):
            store.set_faults("n", **bad)
    # UICR pages can be protected on nRF.
    assert store.set_faults("n", write_protect=0x10001004).faults.write_protect == [0x10001000]


def test_faults_roundtrip():
    f = Faults.from_dict({"write_protect": [8, 4], "bit_flip": {"address": 1, "bit": 0}})
    assert f.write_protect == [4, 8]
    assert Faults.from_dict(f.to_dict()) == f
    assert Faults().to_dict() == {}


def test_plugin_gate(monkeypatch):
    import importlib.util

    from piflash.sim.probes import plugin
    p = plugin.SimProbePlugin()
    assert p.name == "sim"
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "unicorn" else real(name, *a))
    assert p.should_load() is False
    monkeypatch.setattr(importlib.util, "find_spec", real)
    if real("unicorn") is not None:
        assert p.should_load() is True
        from piflash.sim.probes.simprobe import SimProbe
        assert p.load() is SimProbe


def test_package_import_is_light():
    # Importing the package (what pyOCD does for every probe scan) must not pull in the emulator.
    import subprocess
    import sys
    code = ("import sys, piflash.sim, piflash.sim.probes.plugin; "
            "print('unicorn' in sys.modules, 'piflash.sim.board' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_no_piflash_imports_outside_sim():
    root = Path(__file__).resolve().parents[2] / "piflash" / "sim"
    for path in root.rglob("*.py"):
        text = path.read_text()
        for line in text.splitlines():
            s = line.strip()
            if s.startswith(("import ", "from ")):
                assert "click" not in s and "rich" not in s, (path.name, s)
                if "piflash" in s:
                    assert s.startswith(("from piflash.sim", "import piflash.sim")), (path.name, s)
                assert not s.startswith("from .." ), (path.name, s)
    assert os.path.exists(root / "probes" / "plugin.py")
