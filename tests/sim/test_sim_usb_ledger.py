"""The virtual clock's ledger (``PIFLASH_SIM_USB_LEDGER``, piflash/sim/probes/usb/ledger.py): another process's
clock, read from a file; and the station-vs-shell benchmark built on it
(benchmarks/station_vs_shell_usb.py)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("unicorn")

from pyocd.core import exceptions  # noqa: E402
from pyocd.core.helpers import ConnectHelper  # noqa: E402
from pyocd.flash.file_programmer import FileProgrammer  # noqa: E402

from piflash.sim import SimStore
from piflash.sim.probes import usb as sim_usb  # noqa: E402
from piflash.sim.probes.usb.ledger import LEDGER_ENV_VAR, read_ledger  # noqa: E402
from piflash.sim.probes.usb.timing import TARGET_TIMING  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
IMAGE = 16 * 1024


def _image(tmp_path: Path) -> Path:
    path = tmp_path / "image.bin"
    path.write_bytes(bytes(range(256)) * (IMAGE // 256))
    return path


def test_off_by_default(tmp_path, monkeypatch):
    monkeypatch.delenv(LEDGER_ENV_VAR, raising=False)
    SimStore().create("b1", "nrf52840")
    try:
        device = sim_usb.install("b1@debugprobe").devices[0]
        assert device.ledger is None
    finally:
        sim_usb.uninstall()


def test_sessions_and_the_board_change_are_recorded(tmp_path, monkeypatch):
    ledger = tmp_path / "ledger.jsonl"
    monkeypatch.setenv(LEDGER_ENV_VAR, str(ledger))
    store = SimStore()
    store.create("b1", "nrf52840")
    monkeypatch.setenv(sim_usb.ENV_VAR, "b1@daplink")
    device = sim_usb.install().devices[0]
    try:
        session = ConnectHelper.session_with_chosen_probe(unique_id=device.serial, blocking=False,
                                                          target_override="nrf52840")
        with session:
            FileProgrammer(session).program(str(_image(tmp_path)), base_address=0)
            done = device.clock.snapshot()
            store.swap("b1")
            time.sleep(0.06)            # the probe looks at the store at most every 0.05 s
            with pytest.raises(exceptions.TransferError):
                session.probe.read_dp(0)
    finally:
        sim_usb.uninstall()
    events = read_ledger(str(ledger))
    kinds = [e["event"] for e in events]
    assert kinds[-3:] == ["claim", "board_changed", "release"], kinds
    changed = events[-2]
    # The snapshot is taken before the noticing transfer: when the last transfer on the old board ended.
    assert changed["clock"]["now_s"] == done["now_s"]
    assert changed["clock"]["requests"]["usb_out"] == done["requests"]["usb_out"]
    assert changed["generation"] == 0 and changed["serial"] == device.serial
    assert [e["seq"] for e in events] == list(range(len(events)))


def test_a_pyocd_flash_process_ledger_is_identical_across_runs(tmp_path):
    """The stock ``pyocd flash`` command over the USB sim, twice on a fresh board: its whole
    session's virtual seconds (the ``exit`` event) are the same."""
    store = SimStore()
    store.create("b1", "nrf52840")
    env = dict(os.environ, **{sim_usb.ENV_VAR: "b1@debugprobe"})
    env.pop(LEDGER_ENV_VAR, None)
    listed = subprocess.run([sys.executable, "-m", "piflash", "probes", "--json"], env=env,
                            capture_output=True, text=True, check=True, timeout=120)
    serial = __import__("json").loads(listed.stdout)["probes"][0]["probe_id"]
    image, figures = _image(tmp_path), []
    for run in range(2):
        store.swap("b1")
        ledger = tmp_path / f"run{run}.jsonl"
        subprocess.run([sys.executable, "-m", "pyocd", "flash", "-t", "nrf52840", "-u", serial,
                        "--base-address", "0", str(image)], env=dict(env, **{LEDGER_ENV_VAR: str(ledger)}),
                       check=True, capture_output=True, timeout=300)
        exits = [e for e in read_ledger(str(ledger)) if e["event"] == "exit"]
        assert len(exits) == 1
        figures.append((exits[0]["clock"]["now_s"], exits[0]["clock"]["requests"]))
    assert figures[0] == figures[1]
    # At least the flash's own (typical) time: 4 page erases and 4,096 words written.
    timing = TARGET_TIMING["nrf52840"]
    flash_s = IMAGE // 4096 * timing.erase_page_s + IMAGE // 4 * timing.program_s
    assert figures[0][1]["erase_page"] == IMAGE // 4096 and figures[0][0] > flash_s
    assert store.read_flash("b1")[:IMAGE] == image.read_bytes()


def _benchmark():
    path = REPO / "benchmarks" / "station_vs_shell_usb.py"
    spec = importlib.util.spec_from_file_location("station_vs_shell_usb", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_station_over_the_usb_probe_records_every_board(tmp_path):
    """The benchmark's station run: a ``piflash station`` process over the simulated USB probe
    flashes three boards the script swaps in; the two counted give the same virtual seconds."""
    bench = _benchmark()
    store = SimStore()
    store.create("st", "nrf52840")
    env = dict(os.environ, **{sim_usb.ENV_VAR: "st@mculink"})
    env.pop(LEDGER_ENV_VAR, None)
    serial = bench.probe_serial(env)
    result = bench.run_station(store, "st", serial, env, tmp_path, "nrf52840", _image(tmp_path), 0,
                               boards=2, poll=0.2)
    first, second = (p["usb_s"] for p in result["per_board"])
    # The same work on each board: within 1 us (the cut between boards may fall a fraction of a
    # microsecond apart in the link's pipeline; one USB transfer alone costs tens of us of host time: timing.HOST_TRANSFER_S).
    assert first == pytest.approx(second, abs=1e-6) and first > IMAGE / 4 * 41e-6
    assert result["seconds"][0] == pytest.approx(first + 0.1 + 0.01)
    assert result["per_board"][0]["requests"]["DAP_Connect"] == 1      # one new session per board
