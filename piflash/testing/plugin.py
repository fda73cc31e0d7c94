"""The pytest plugin: a ``piflash_board`` fixture for hardware-in-the-loop tests, without labgrid.

Enabled by installing piflash (entry point ``pytest11`` named ``piflash.testing.plugin``),
or with ``pytest -p piflash.testing.plugin``. The board is named by ``--piflash-probe ID`` and
``--piflash-target TYPE``, or by ``--piflash-profile NAME|FILE`` (its ``probe:`` and ``target:``;
the options win). A test using ``piflash_board`` without a probe is skipped, with the reason.

``piflash_board.flash(path)``, ``.expect_rtt(regex, timeout)``, ``.read(addr, n)``, ``.reset()``
run piflash's own jobs (:mod:`piflash.jobs.workflow`, :mod:`piflash.jobs.readback`) in the test's
process. A failure fails the test with one message naming the probe, the phase and the board's RTT
output so far (no traceback into piflash or pyOCD).
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path
from typing import Any, List, Optional, Union

import pytest

#: Seconds ``expect_rtt`` waits by default (the boot check's default, docs/boot-check.md).
DEFAULT_RTT_TIMEOUT_S = 3.0


def pytest_addoption(parser: pytest.Parser) -> None:
    """The plugin's options, in their own group ``piflash``."""
    group = parser.getgroup("piflash", "piflash: the board under test (piflash_board fixture)")
    group.addoption(
        "--piflash-probe", metavar="ID", help="probe ID of the board under test (piflash -u), e.g. sim:nrf52840"
    )
    group.addoption("--piflash-target", metavar="TYPE", help="pyOCD target type of the board (piflash -t)")
    group.addoption(
        "--piflash-profile", metavar="NAME|FILE", help="a piflash profile giving the probe and target (piflash -p)"
    )


class PiflashBoard:
    """The board under test (the ``piflash_board`` fixture).

    :ivar probe: the probe ID (str) every call goes to.
    :ivar target: the pyOCD target type (str or None: a ``sim:`` probe names its own).
    :ivar rtt_output: (str) everything :meth:`expect_rtt` has read from RTT channel 0 so far.
    :ivar last_result: the :class:`piflash.record.result.OperationResult` of the last call, or None.
    """

    def __init__(self, probe: str, target: Optional[str]) -> None:
        self.probe = probe
        self.target = target
        self.rtt_output = ""
        self.last_result: Any = None
        self._firmware: Optional[str] = None

    def _fail(self, phase: str, exc: BaseException) -> BaseException:
        """The test's failure for ``exc`` (a :class:`piflash.errors.PiflashError`) in ``phase``
        (``flash``: the phase piflash was in, ``connect``, ``erase``, ``program``, ``verify``, ...)."""
        result = getattr(exc, "result", None)
        if phase == "flash":
            phase = getattr(result, "phase", None) or phase
        hint = getattr(exc, "hint", None)
        text = f"piflash_board {phase} failed on probe {self.probe}"
        text += f" ({self.target})" if self.target else ""
        text += f": {exc}"
        text += f"\nhint: {hint}" if hint else ""
        boot = getattr(result, "boot_check", None) or {}
        output = self.rtt_output + (boot.get("output") or "")
        text += f"\nRTT output so far ({len(output)} characters):\n{output[-2000:]}"
        return pytest.fail.Exception(text, pytrace=False)

    def flash(self, path: Union[str, "os.PathLike[str]"], base_address: Optional[int] = None) -> Any:
        """Flash the file ``path`` (.hex, .elf, .uf2; .bin with ``base_address``), verify it and
        reset the board; returns the :class:`~piflash.record.result.OperationResult`.
        Clears :attr:`rtt_output` (a new firmware prints anew)."""
        from piflash.errors import PiflashError
        from piflash.firmware.image import load_image
        from piflash.jobs.options import FlashOptions
        from piflash.jobs.workflow import flash_firmware

        self.rtt_output = ""
        try:
            image = load_image(os.fspath(path), base_address)
            self.last_result = flash_firmware(image, probe=self.probe, target=self.target, job=FlashOptions())
        except PiflashError as exc:
            raise self._fail("flash", exc) from None
        self._firmware = os.fspath(path)
        return self.last_result

    def expect_rtt(self, regex: str, timeout: float = DEFAULT_RTT_TIMEOUT_S) -> "re.Match[str]":
        """Read RTT up-channel 0 until its text (all read so far) matches ``regex`` (Python
        ``re``), for at most ``timeout`` seconds; returns the match. The control block is found
        at the flashed ELF's ``_SEGGER_RTT``, else in RAM (:func:`piflash.jobs.workflow.monitor_rtt`).
        Fails the test when the text does not match in time, with what was read."""
        from piflash.errors import PiflashError
        from piflash.jobs.workflow import monitor_rtt

        found = re.search(regex, self.rtt_output)
        if found:
            return found
        chunks: List[bytes] = []
        elf = self._firmware if self._firmware and self._firmware.endswith(".elf") else None
        try:
            self.last_result = monitor_rtt(
                probe=self.probe,
                target=self.target,
                write=chunks.append,
                firmware_path=elf,
                find_timeout=timeout,
                duration=timeout,
                until=regex,
            )
        except PiflashError as exc:
            self.rtt_output += b"".join(chunks).decode("utf-8", "replace")
            raise self._fail("rtt", exc) from None
        self.rtt_output += b"".join(chunks).decode("utf-8", "replace")
        found = re.search(regex, self.rtt_output)
        if not found:  # the search matched across reads in a way re.search here does not: say so
            raise self._fail("rtt", AssertionError(f"RTT text does not match {regex!r}"))
        return found

    def read(self, addr: int, n: int) -> bytes:
        """``n`` bytes of the board's flash from address ``addr`` (inside one flash region), read
        as ``piflash read --range`` reads them (checked by CRC32; the board is reset afterwards)."""
        from piflash.errors import PiflashError
        from piflash.jobs.readback import read_flash

        with tempfile.TemporaryDirectory(prefix="piflash-board-") as tmp:
            out = Path(tmp) / "read.bin"
            try:
                self.last_result = read_flash(out, probe=self.probe, target=self.target, ranges=[(addr, addr + n)])
            except PiflashError as exc:
                raise self._fail("read", exc) from None
            return out.read_bytes()

    def reset(self) -> Any:
        """Reset the board (it runs afterwards); returns the operation's result."""
        from piflash.errors import PiflashError
        from piflash.jobs.workflow import reset_board

        try:
            self.last_result = reset_board(probe=self.probe, target=self.target)
        except PiflashError as exc:
            raise self._fail("reset", exc) from None
        return self.last_result


def board_from_options(config: pytest.Config) -> Optional[PiflashBoard]:
    """The board the options (and profile) name, or None when no probe is named.

    :raises pytest.UsageError: the profile cannot be read (piflash's message).
    """
    probe = config.getoption("piflash_probe")
    target = config.getoption("piflash_target")
    profile = config.getoption("piflash_profile")
    if profile:
        from piflash.errors import PiflashError
        from piflash.profiles import load_profile

        try:
            prof = load_profile(profile)
        except PiflashError as exc:
            raise pytest.UsageError(f"--piflash-profile {profile}: {exc}") from None
        probe = probe or prof.probe
        target = target or prof.target
    if not probe:
        return None
    return PiflashBoard(probe, target)


@pytest.fixture
def piflash_board(request: pytest.FixtureRequest) -> PiflashBoard:
    """The board under test (:class:`PiflashBoard`); the test is skipped when no probe is given
    (``--piflash-probe`` or a ``--piflash-profile`` with ``probe:``)."""
    board = board_from_options(request.config)
    if board is None:
        pytest.skip("piflash_board: no board given (--piflash-probe ID, or --piflash-profile with a probe)")
    return board
