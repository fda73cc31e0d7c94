"""Shared fixtures: an isolated simulator state per test, the test firmware, a CLI runner.

Everything runs the real pyOCD stack against piflash.sim; the CLI is run as a
subprocess so exit codes, stdout/stderr and persistence across processes are real.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from support.pgserver import pg  # noqa: F401  (fixtures kept in tests/support, shared from here;
from support.pinskit import pins_env  # noqa: F401  a file's own fixture of the name wins)
from support.simserver import SimServer
from support.stationkit import stations, store  # noqa: F401

REPO = Path(__file__).resolve().parent.parent

# A shell without job control starts background commands with SIGINT ignored, and every process
# inherits that: the tests that press Ctrl-C on a piflash child (SIGINT) would then wait out the
# flash's timeouts. A Python handler is not inherited across exec (the child starts at SIG_DFL
# and installs its KeyboardInterrupt), so this process takes one.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
FIRMWARE_BUILD = Path(os.environ.get("PIFLASH_TEST_FIRMWARE", REPO / "tests" / "firmware" / "build"))
#: Released MicroPython for the BBC micro:bit v1 (nRF51822), from Debian's firmware-microbit-micropython.
MICROBIT_HEX = Path("/usr/share/firmware-microbit-micropython/firmware.hex")


def pytest_configure(config):
    """With ``PYTHONDONTWRITEBYTECODE`` set (some shells and containers set it), no Python the
    tests start writes bytecode, so each of the thousands of ``python -m piflash`` runs compiled
    piflash's modules again (about a quarter of their CPU time: tests/production/test_wrong_target.py
    took 58 s of user time, 44 s with the bytecode there). Compile them once, into the
    ``__pycache__`` folders Python itself would write (ignored by git), in the controller only, and
    only in a checkout this user owns (files root leaves in someone's checkout are
    scripts/lib-owner.sh's trouble). Python checks each file's timestamp, so an edit is seen."""
    if not os.environ.get("PYTHONDONTWRITEBYTECODE") or hasattr(config, "workerinput"):
        return
    if REPO.stat().st_uid != os.getuid():
        return
    import compileall

    compileall.compile_dir(REPO / "piflash", quiet=1)


def pytest_xdist_auto_num_workers(config):
    """``-n auto`` (pyproject.toml's addopts): one worker more than there are CPUs (pytest-xdist's
    hook; ``--maxprocesses`` still caps it). Many tests wait on a process, a socket or a time-out
    for part of their time, and a core stays idle meanwhile: on this project's 2-core test
    machine the quick run took 8:02 with 2 workers and 7:13 with 3 (``scripts/test.sh -m "not
    slow"``, idle, as root)."""
    return (os.cpu_count() or 1) + 1


@pytest.fixture(autouse=True)
def sim_dir(tmp_path, monkeypatch):
    """Each test gets its own simulated boards and history (and no profiles from the machine)."""
    d = tmp_path / "sim"
    monkeypatch.setenv("PIFLASH_SIM_DIR", str(d))
    monkeypatch.setenv("PIFLASH_PROFILE_PATH", str(tmp_path / "profiles"))
    monkeypatch.setenv("PIFLASH_HISTORY", str(tmp_path / "history.sqlite3"))
    monkeypatch.setenv("PIFLASH_CACHE", str(_image_cache(tmp_path)))
    return d


def _image_cache(tmp_path: Path) -> Path:
    """One parsed-image cache (piflash/firmware/cache.py) for the tests of this worker, beside
    their temporary folders: nothing written into the user's ~/.cache."""
    return tmp_path.parent.parent / "piflash-image-cache"


@pytest.fixture(scope="session")
def firmware_dir():
    """Build directory of tests/firmware (built by scripts/build-test-firmware.sh)."""
    if not (FIRMWARE_BUILD / "stm32f103rc" / "firmware.hex").exists():
        subprocess.run(["make", "-s", "-C", str(REPO / "tests" / "firmware")], check=True)
    return FIRMWARE_BUILD


@pytest.fixture(scope="session")
def microbit_hex():
    assert MICROBIT_HEX.exists(), ("apt-get install firmware-microbit-micropython "
                                  "(scripts/test.sh does it)")
    return MICROBIT_HEX


@pytest.fixture(scope="session")
def pyocd_binaries():
    """pyOCD's own test binaries (``rp2040.bin``, ``rp2350.bin``: pico-examples blink), fetched
    from pyOCD's source distribution by scripts/build-test-firmware.sh."""
    d = FIRMWARE_BUILD / "pyocd" / "binaries"
    assert (d / "rp2040.bin").exists(), "run scripts/build-test-firmware.sh (scripts/test.sh does it)"
    return d


def firmware_for(target: str, firmware_dir: Path, microbit: Path, ext: str = "hex") -> Path:
    """The real image each simulated target is flashed with."""
    if target == "nrf51":
        return microbit
    return firmware_dir / target / f"firmware.{ext}"


_FORK_SERVER = None
#: The environment before any test changed it: the fork server's (it starts at the first CLI run,
#: inside some test whose monkeypatched variables must not become every later run's).
_START_ENV = dict(os.environ)


def _fork_server():
    """This worker's :class:`support.forkserver.ForkServer`, started at the first CLI run (None:
    switched off by ``PIFLASH_TEST_FORKSERVER=0``, or it could not start)."""
    global _FORK_SERVER
    if _FORK_SERVER is None and os.environ.get("PIFLASH_TEST_FORKSERVER", "1") != "0":
        from support.forkserver import ForkServer

        try:
            _FORK_SERVER = ForkServer(_START_ENV)
        except (OSError, RuntimeError):
            _FORK_SERVER = False
    return _FORK_SERVER or None


def pytest_unconfigure(config):
    if _FORK_SERVER:
        _FORK_SERVER.close()


class Cli:
    """Runs ``python -m piflash`` in a process of its own with the test's environment: a fork of
    a server that has imported piflash and pyOCD already (tests/support/forkserver.py), or a fresh
    interpreter where a fork would differ."""

    def __call__(self, *args, timeout=120, check=None, env=None):
        """``env``: variables set on top of the test's environment (e.g. ``{"COLUMNS": "80"}``)."""
        argv, full = list(map(str, args)), os.environ | (env or {})
        server = _fork_server()
        if server is not None and server.fits(full):
            proc = server.run(argv, full, timeout)
        else:
            proc = subprocess.run([sys.executable, "-m", "piflash", *argv],
                                  capture_output=True, text=True, timeout=timeout, env=full)
        if check is not None:
            assert proc.returncode == check, (
                f"exit {proc.returncode} != {check}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
        return proc

    def json(self, *args, check=0, **kw):
        proc = self(*args, "--json", check=check, **kw)
        return json.loads(proc.stdout)


@pytest.fixture
def cli():
    return Cli()


@pytest.fixture
def sim_server():
    servers = []

    def start(board, target):
        server = SimServer(board, target)
        servers.append(server)
        return server

    yield start
    for s in servers:
        s.stop()


def expected_flash(image_path: Path, flash_size: int, base: int = 0, base_address=None) -> bytes:
    """The whole flash as it must be after flashing only ``image_path`` into erased flash."""
    from piflash.firmware.image import load_image

    image = load_image(image_path, base_address)
    buf = bytearray(b"\xff" * flash_size)
    for seg in image.segments:
        if base <= seg.address < base + flash_size:
            buf[seg.address - base: seg.end - base] = seg.data
    return bytes(buf)
