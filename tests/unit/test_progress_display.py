"""The rich progress display as a terminal of a given width shows it (an 80-column Pi console
first): every phase keeps its mark, label, bar, bytes and time, program and verify their rate;
the detail is never cut to a stub, and sits below every row, or beside every row on a terminal
wide enough for all (issue 19 item 17: at 120 columns some sat beside and some below); an erase
shows no rate (one that erased nothing showed "193.9 KiB/s"); a phase that never ended (a failed
connect) leaves a ✗, not a frozen spinner."""

from __future__ import annotations

import io
import re
import time

import pytest

from piflash.cli.progress import BESIDE_WIDTH, PlainProgress, RichProgress
from piflash.progress import Phase

pytest.importorskip("rich")
from rich.console import Console  # noqa: E402

KIB = 1024
SPINNER = re.compile("[\u2800-\u28ff]")  # rich's dots spinner is braille
FLASH = [(Phase.ERASE, 243880, "sector erase"),
         (Phase.PROGRAM, 243880, "244,992 B written, 0 B unchanged"),
         (Phase.VERIFY, 243880, "all match: 238 pages by CRC32, 168 B read back")]


def final_screen(width: int, phases, fail_at=None) -> list:
    """Drive a RichProgress like a flash does; return the lines left on a ``width``-column screen."""
    live = Console(file=io.StringIO(), width=width, force_terminal=True, color_system=None)
    display = RichProgress(console=live)
    try:
        with display:
            for phase, total, summary in [(Phase.CONNECT, 0, "nrf51 on sim:microbit"), *phases,
                                          (Phase.RESET, 0, "running")]:
                display.phase_start(phase, total)
                if phase == fail_at:
                    raise ConnectionError("target not detected")
                for i in range(1, 5):   # 80 ms: long enough for a rate (shorter shows none)
                    time.sleep(0.02)
                    display.phase_update(phase, total * i // 4)
                display.phase_end(phase, summary)
    except ConnectionError:
        pass
    screen = Console(file=io.StringIO(), width=width, record=True, color_system=None)
    screen.print(display._progress.get_renderable())
    return screen.export_text().rstrip("\n").split("\n")


def test_80_columns_show_every_column_and_the_whole_detail():
    lines = final_screen(80, FLASH)
    assert all(len(line) <= 80 for line in lines), lines
    rows = {line.split()[1]: line for line in lines if line[:1] in "✓✗"}
    assert list(rows) == ["Connecting", "Erasing", "Programming", "Verifying", "Resetting"], lines
    for label in ("Erasing", "Programming", "Verifying"):
        row = rows[label]
        assert row.startswith(f"✓ {label}") and "━" in row and "238.2/238.2 KiB" in row, row
        assert bool(re.search(r"[\d,.]+ KiB/s 0:00:0\d$", row)) == (label != "Erasing"), row
    for detail in ("nrf51 on sim:microbit", "sector erase", "244,992 B written, 0 B unchanged",
                   "all match: 238 pages by CRC32, 168 B read back", "running"):
        assert f"  {detail}" in lines, (detail, lines)   # whole, on its own line under the label


@pytest.mark.parametrize("width", [100, 120, BESIDE_WIDTH - 1])
def test_details_all_below_until_all_fit_beside(width):
    lines = final_screen(width, FLASH)
    for detail in ("nrf51 on sim:microbit", "sector erase", "244,992 B written, 0 B unchanged",
                   "all match: 238 pages by CRC32, 168 B read back", "running"):
        assert f"  {detail}" in lines, (detail, lines)


def test_wide_terminal_puts_every_detail_beside():
    lines = final_screen(BESIDE_WIDTH, FLASH)
    rows = [line for line in lines if line[:1] in "✓✗"]
    assert len(rows) == len(lines) == 5, lines
    assert rows[1].startswith("✓ Erasing") and rows[1].endswith(" sector erase"), rows
    assert rows[3].endswith(" all match: 238 pages by CRC32, 168 B read back"), rows


def test_an_erase_gets_no_rate_in_plain_lines_either():
    out = io.StringIO()
    display = PlainProgress(out)
    display.phase_start(Phase.ERASE, 200 * KIB)
    time.sleep(0.06)
    display.phase_end(Phase.ERASE, "nothing to erase: the sectors are blank or unchanged")
    display.phase_start(Phase.PROGRAM, 200 * KIB)
    time.sleep(0.06)
    display.phase_end(Phase.PROGRAM, "204,800 B written")
    erase, program = [ln for ln in out.getvalue().splitlines() if " done: " in ln]
    assert "/s" not in erase and program.endswith(" KiB/s"), out.getvalue()


def test_chip_erase_shows_no_rate():
    lines = final_screen(80, [(Phase.ERASE, 1024 * KIB, "chip erase")])
    erase = next(line for line in lines if line.startswith("✓ Erasing"))
    assert "1.0/1.0 MiB" in erase and "/s" not in erase, erase
    assert "  chip erase" in lines


def test_failed_connect_leaves_no_spinner():
    lines = final_screen(80, FLASH, fail_at=Phase.CONNECT)
    assert lines[0].startswith("✗ Connecting") and not SPINNER.search("\n".join(lines)), lines
