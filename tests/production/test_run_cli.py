"""``piflash run`` (issue 41 item 4): flash, reset, then RTT channel 0 to stdout until Ctrl-C,
``--until REGEX`` or ``--timeout``; its exit code follows the boot check's (26 when --until is not
seen in time). Through the real CLI and pyOCD on a simulated nRF52840, with the boot-check test
firmware (tests/firmware/boot/boot.c)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("unicorn")

from piflash.errors import ExitCode  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
NRF = ["-u", "sim:run", "-t", "nrf52840"]


@pytest.fixture(scope="module")
def rtt_elf(firmware_dir):
    path = firmware_dir / "boot" / "nrf52840" / "rtt.elf"
    if not path.exists():
        subprocess.run(["make", "-s", "-C", str(REPO / "tests" / "firmware")], check=True)
    return path


def _operations():
    with sqlite3.connect(os.environ["PIFLASH_HISTORY"]) as db:
        return [r[0] for r in db.execute("SELECT operation FROM operations ORDER BY id")]


def test_until_seen_ends_with_0_and_the_stream_on_stdout(cli, rtt_elf):
    proc = cli("run", rtt_elf, *NRF, "--until", "self-test: (PASS|FAIL)", "--timeout", "30", check=0)
    assert proc.stdout == "piflash boot-check firmware: nrf52840\nself-test: PASS\n"   # only the board's text
    assert "Flashed and verified" in proc.stderr and "RTT channel 0 follows" in proc.stderr
    assert _operations() == ["flash"]                                   # the flash is recorded, as flash's


def test_until_not_seen_in_time_is_the_boot_checks_exit(cli, rtt_elf):
    proc = cli("run", rtt_elf, *NRF, "--until", "never printed", "--timeout", "2", "-q",
               check=int(ExitCode.BOOT_CHECK))
    assert "self-test: PASS" in proc.stdout                             # what it printed, streamed
    assert "printed no text matching 'never printed' within 2 s" in proc.stderr


def test_a_bad_pattern_is_a_usage_error_before_any_probe(cli, rtt_elf):
    proc = cli("run", rtt_elf, *NRF, "--until", "(", check=int(ExitCode.USAGE))
    assert "--until" in proc.stderr and "Traceback" not in proc.stderr
    assert not os.path.exists(os.environ["PIFLASH_HISTORY"]) or _operations() == []
