"""The stock pyOCD command line against simulated boards, in separate processes: ``-u sim:NAME``
(board state shared through the state directory) and pyOCD's remote probe protocol served by
:func:`piflash.sim.probes.server.serve`."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

pytest.importorskip("unicorn")

from piflash.sim import SimStore  # noqa: E402
from piflash.sim.probes.server import serve, start_server  # noqa: E402

PYOCD = shutil.which("pyocd", path=str(Path(sys.executable).parent)) or "pyocd"


@pytest.fixture
def sim_env(tmp_path, monkeypatch):
    monkeypatch.setenv("PIFLASH_SIM_DIR", str(tmp_path / "sim"))
    return dict(os.environ)


def pyocd(*args, env, timeout=60):
    return subprocess.run([PYOCD, *args], env=env, capture_output=True, text=True, timeout=timeout)


def write_hex(path: Path, base: int, data: bytes) -> None:
    from intelhex import IntelHex
    ih = IntelHex()
    ih.frombytes(data, offset=base)
    ih.write_hex_file(str(path))


def test_pyocd_flash_from_nothing_and_list(sim_env, tmp_path):
    data = os.urandom(40 * 1024)
    fw = tmp_path / "fw.bin"
    fw.write_bytes(data)
    result = pyocd("flash", "-t", "nrf52840", "-u", "sim:nrf52840", str(fw), env=sim_env)
    assert result.returncode == 0, result.stdout + result.stderr
    flash = SimStore().read_flash("nrf52840")
    assert flash[:len(data)] == data and set(flash[len(data):]) == {0xFF}
    listing = pyocd("list", env=sim_env)
    assert "sim:nrf52840" in listing.stdout and "Simulated nRF52840 board" in listing.stdout


def test_pyocd_flash_reports_injected_fault(sim_env, tmp_path):
    store = SimStore()
    store.create("st", "stm32f103rc")
    store.set_faults("st", write_protect=[0x08000000])
    fw = tmp_path / "fw.bin"
    fw.write_bytes(os.urandom(4096))
    result = pyocd("flash", "-t", "stm32f103rc", "-u", "sim:st", str(fw), env=sim_env)
    assert result.returncode != 0
    assert "flash program page failure" in (result.stdout + result.stderr)
    assert set(store.read_flash("st")) == {0xFF}


def test_remote_probe_protocol(sim_env, tmp_path):
    data = os.urandom(24 * 1024)
    fw = tmp_path / "fw.hex"
    write_hex(fw, 0x0, data)
    with start_server("nrf52840-remote") as srv:
        assert srv.port > 0
        result = pyocd("flash", "-t", "nrf52840", "-u", "remote:127.0.0.1:%d" % srv.port, str(fw), env=sim_env)
        assert result.returncode == 0, result.stdout + result.stderr
        # Saved when the client closed the probe, while the server keeps running.
        assert SimStore().read_flash("nrf52840-remote")[:len(data)] == data


def test_serve_until_stopped(sim_env, tmp_path):
    store = SimStore()
    store.create("served", "stm32f103rc")
    ready = threading.Event()
    stop = threading.Event()
    ports = []

    def on_ready(srv):
        ports.append(srv.port)
        ready.set()

    thread = threading.Thread(target=lambda: ports.append(serve("served", on_ready=on_ready, stop_event=stop)))
    thread.start()
    try:
        assert ready.wait(10)
        data = os.urandom(6000)
        fw = tmp_path / "fw.hex"
        write_hex(fw, 0x08000000, data)
        result = pyocd("flash", "-t", "stm32f103rc", "-u", "remote:127.0.0.1:%d" % ports[0], str(fw), env=sim_env)
        assert result.returncode == 0, result.stdout + result.stderr
    finally:
        stop.set()
        thread.join(10)
    assert ports[1] == ports[0]
    assert store.read_flash("served")[:len(data)] == data


def test_start_server_argument_checks(sim_env):
    with pytest.raises(ValueError):
        start_server("x", host="192.0.2.1")
    with pytest.raises(ValueError):
        start_server("not-a-target")             # unknown board, no target type
    SimStore().create("n", "nrf51")
    with pytest.raises(ValueError):
        start_server("n", target="nrf52840")
