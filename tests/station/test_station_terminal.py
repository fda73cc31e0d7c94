"""The station in a real terminal (issue 19, item 16), at 80 and 120 columns: each probe keeps its
last result and the reason until its next board; Ctrl-C shows "stopping", which never flips back
to "flashing" while the board in hand is finished, and the "station stopped: ..." summary stays
on the screen after the live view ends, as ``--plain`` prints it."""

from __future__ import annotations

import sys

import pytest

pytest.importorskip("unicorn")

from support.stationkit import rows, wait_rows, write_config, write_profile  # noqa: E402
from support.tmuxscreen import Screen  # noqa: E402

from piflash.sim import SimStore  # noqa: E402


@pytest.fixture
def station_screen(tmp_path, firmware_dir):
    made = []

    def start(width: int, history, probes=("sim:bay",), firmware=None, target="nrf52840"):
        profile = write_profile(tmp_path, firmware or firmware_dir / "nrf52840" / "firmware.hex",
                                name="blinky", target=target)
        config = write_config(tmp_path, profile, list(probes), history, poll_interval=0.05)
        screen = Screen([sys.executable, "-m", "piflash", "station", "run", "--config", str(config)],
                        width, 30)
        made.append(screen)
        return screen

    yield start
    for screen in made:
        screen.close()


@pytest.mark.parametrize("width", [80, 120])
def test_last_result_and_reason_stay_until_the_next_board(width, tmp_path, station_screen):
    store = SimStore()
    history = tmp_path / "history.sqlite3"
    store.create("bay", "nrf52840")
    screen = station_screen(width, history)
    wait_rows(history, 1)
    store.swap("bay", faults={"write_protect": [0x1000]})           # fails verify
    wait_rows(history, 2)
    store.pull("bay")                                               # the operator takes it away
    text = screen.wait(lambda t: "waiting for board" in t and "FAIL" in t, "FAIL kept after the pull")
    assert "verify failed" in text.replace("\n", " ") or "verify" in text, text
    assert rows(history)[1]["outcome"] == "fail"
    screen.keys("C-c")
    text = screen.wait(lambda t: "[exit 0]" in t, "the station's exit")
    assert "station stopped: 1 passed, 1 failed, 0 skipped" in text
    assert all(len(line) <= width for shown in screen.screens for line in shown)


def test_stopping_never_flips_back_to_flashing(tmp_path, station_screen, microbit_hex):
    """Ctrl-C while a board is being flashed (MicroPython into an nRF51: its progress goes on
    while the station finishes the board): from the first screen that says "stopping", no state is
    a bare "flashing", and the board's result is the last result."""
    store = SimStore()
    history = tmp_path / "history.sqlite3"
    store.create("bay", "nrf51")
    screen = station_screen(120, history, firmware=microbit_hex, target="nrf51")
    screen.wait(lambda t: "flashing" in t, "the board being flashed")
    screen.keys("C-c")
    screen.wait(lambda t: "[exit 0]" in t, "the station's exit", deadline=90)
    seen_stopping = False
    for shown in screen.screens:
        text = "\n".join(shown)
        if "stopping" in text:
            seen_stopping = True
        if seen_stopping and "[exit" not in text:
            bare = [ln for ln in shown if "flashing" in ln and "stopping" not in ln]
            assert not bare, text
    assert seen_stopping
    assert "station stopped: 1 passed, 0 failed, 0 skipped" in screen.text()
    assert [r["outcome"] for r in rows(history)] == ["pass"]
