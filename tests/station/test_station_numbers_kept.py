"""Serial numbers a station must not lose track of (issue 19, items 9 and 10): real ``piflash
station run`` subprocesses over a simulated nRF52840, the history read back through the CLI."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

pytest.importorskip("unicorn")

from support.stationkit import rows, serial_numbers, wait_for, wait_rows, write_config  # noqa: E402

from piflash.sim import SimStore  # noqa: E402

START = 7000


def _profile(tmp_path: Path, firmware_dir: Path) -> Path:
    path = tmp_path / "numbered.yaml"
    path.write_text(f"""target: nrf52840
firmware: {firmware_dir / "nrf52840" / "firmware.hex"}
serial:
  uicr_customer: 0
  encoding: u32
  start: {START}
""")
    return path


@pytest.mark.parametrize("step", ["taken", "programmed"])
def test_interrupted_row_carries_the_serial_its_board_got(tmp_path, sim_dir, firmware_dir, stations, cli, step):
    """Killed right after the number was taken (or after programming), the board's row is
    interrupted and still names the number: ``piflash history --board N`` finds it."""
    history, serials = tmp_path / "history.sqlite3", tmp_path / "serials.sqlite3"
    config = write_config(tmp_path, _profile(tmp_path, firmware_dir), ["sim:bay"], history, serials=serials)
    SimStore().create("bay", "nrf52840")
    killed = stations(config, tmp_path / "killed.log", dict(os.environ, PIFLASH_TEST_KILL_AT=step))
    wait_for(lambda: killed.proc.poll() is not None, f"the station to kill itself at {step!r}")
    assert killed.proc.returncode == -9, killed.output()
    assert serial_numbers(serials) == [(START, "taken")]

    found = json.loads(cli("history", "--board", str(START), "--file", history, "--json", check=0).stdout)
    assert [(r["serial"], r["outcome"]) for r in found["operations"]] == [(str(START), "interrupted")], found


def test_clean_stop_returns_the_unused_rest_of_the_lease(tmp_path, sim_dir, firmware_dir, stations):
    """A SIGTERM'ed station gives back the numbers of its lease it did not use: the next start
    warns of nothing and its first board gets the next number, not one past the lease."""
    history, serials = tmp_path / "history.sqlite3", tmp_path / "serials.sqlite3"
    config = write_config(tmp_path, _profile(tmp_path, firmware_dir), ["sim:bay"], history, serials=serials,
                          serial_block=4)
    store = SimStore()
    store.create("bay", "nrf52840")
    first = stations(config, tmp_path / "first.log")
    wait_rows(history, 1, first)
    assert first.stop() == 0
    assert "station stopped" in first.output()

    store.swap("bay")
    second = stations(config, tmp_path / "second.log")
    wait_rows(history, 2, second)
    assert second.stop() == 0
    assert "left unused" not in second.output(), second.output()
    assert [r["serial"] for r in rows(history)] == [str(START), str(START + 1)]
    assert serial_numbers(serials) == [(START, "pass"), (START + 1, "pass")]
