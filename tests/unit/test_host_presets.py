"""benchmarks/host_presets.py prints the host presets' tables that docs/benchmarks.md shows (issue 42)."""

from __future__ import annotations

import contextlib
import importlib.util
import io
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _script():
    spec = importlib.util.spec_from_file_location("host_presets", ROOT / "benchmarks" / "host_presets.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_page_shows_what_the_presets_hold():
    """A preset changed without re-printing the page's tables (or the reverse) fails here."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert _script().main([]) == 0
    page = (ROOT / "docs" / "benchmarks.md").read_text()
    rows = [line for line in out.getvalue().splitlines() if line.startswith("| `")]
    assert len(rows) == 8  # four presets, two tables
    missing = [row for row in rows if row not in page.splitlines()]
    assert not missing, f"docs/benchmarks.md lacks these rows of benchmarks/host_presets.py: {missing}"


def test_the_figures_follow_the_band():
    """Each end of the zero2w band is the x86 measurement times that end's factor."""
    figures = _script().collect()
    x86 = figures["x86"]["mid"]
    for end in ("low", "mid", "high"):
        pi = figures["zero2w"][end]
        for key in ("piflash_us", "pyocd_program_us", "piflash_hex_s", "pyocd_startup_s"):
            assert abs(pi[key] - x86[key] * pi["factor"]) < 1e-9 * max(1.0, pi[key])
    assert figures["zero2w"]["low"]["factor"] < figures["zero2w"]["mid"]["factor"] < figures["zero2w"]["high"]["factor"]
