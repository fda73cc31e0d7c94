"""``piflash flash`` in a real terminal (issue 19, item 17): at 80 columns the final line wraps
between words, never inside one; at 80 and 120 columns every phase's detail sits on its own line
under its row, and the erase shows no rate."""

from __future__ import annotations

import re
import sys

import pytest

pytest.importorskip("unicorn")

from support.tmuxscreen import Screen  # noqa: E402

from piflash.sim import SimStore  # noqa: E402

FINAL = re.compile(r"^Flashed [\d,]+ bytes to nrf51 \(sim:mb\): [\d,]+ programmed, [\d,]+ unchanged, "
                   r"verified, in [\d.]+ s$")


@pytest.mark.parametrize("width", [80, 120])
def test_flash_screen(width, microbit_hex):
    SimStore().create("mb", "nrf51")
    screen = Screen([sys.executable, "-m", "piflash", "flash", str(microbit_hex), "-u", "sim:mb", "-t", "nrf51"],
                    width, 40)
    try:
        text = screen.wait(lambda t: "[exit " in t, "the flash's exit")
    finally:
        screen.close()
    lines = text.split("\n")
    assert "[exit 0]" in lines, text
    start = next(i for i, ln in enumerate(lines) if ln.startswith("Flashed "))
    final = lines[start:lines.index("[exit 0]")]
    assert all(len(ln) <= width for ln in lines), text
    assert FINAL.match(" ".join(final)), final                 # words whole: the breaks are spaces
    rows = [i for i, ln in enumerate(lines) if ln.startswith(("✓", "✗"))]
    assert [lines[i].split()[1] for i in rows] == ["Connecting", "Erasing", "Programming", "Verifying",
                                                   "Resetting"], text
    for i in rows:                                             # every detail below its row
        assert lines[i + 1].startswith("  ") and lines[i + 1].strip(), text
    erase = lines[rows[1]]
    assert "/s" not in erase, erase
