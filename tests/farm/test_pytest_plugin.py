"""The pytest plugin (piflash/testing/plugin.py, issue 45): run by pytester in a pytest of its own
(``-p piflash.testing.plugin``: the shared venv's piflash is another checkout's) against a
simulated nRF52840 and the boot-check test firmware."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parents[2]
PLUGIN = "piflash.testing.plugin"


@pytest.fixture
def rtt_elf(firmware_dir):
    """The boot-check test firmware (tests/firmware/boot): prints a banner and 'self-test: PASS'."""
    return Path(firmware_dir) / "boot" / "nrf52840" / "rtt.elf"


def run(pytester, *args):
    return pytester.runpytest_subprocess("-p", PLUGIN, "-p", "no:cacheprovider", "-n", "0", *args, timeout=300)


def test_pyproject_declares_the_entry_point():
    tomllib = pytest.importorskip("tomllib")
    meta = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert meta["project"]["entry-points"]["pytest11"] == {PLUGIN: PLUGIN}


def test_loading_the_plugin_imports_neither_piflash_nor_pyocd(pytester):
    pytester.makepyfile(
        """
        import sys
        def test_nothing_heavy(request):
            assert request.config.pluginmanager.has_plugin("piflash.testing.plugin")
            assert "pyocd" not in sys.modules
            assert not [m for m in sys.modules if m.startswith("piflash.jobs")]
        """
    )
    run(pytester).assert_outcomes(passed=1)


def test_without_a_probe_the_board_test_is_skipped_with_the_reason(pytester):
    pytester.makepyfile("def test_b(piflash_board):\n    pass\n")
    res = run(pytester, "-rs")
    res.assert_outcomes(skipped=1)
    res.stdout.fnmatch_lines(["*no board given (--piflash-probe ID*"])


def test_flash_expect_rtt_read_reset_on_a_simulated_board(pytester, rtt_elf):
    from piflash.firmware.image import load_image

    seg = load_image(rtt_elf).segments[0]
    pytester.makepyfile(
        f"""
        def test_board(piflash_board):
            res = piflash_board.flash({str(rtt_elf)!r})
            assert res.ok and res.verify is not None
            m = piflash_board.expect_rtt(r"self-test: (\\w+)", timeout=5)
            assert m.group(1) == "PASS"
            assert "piflash boot-check firmware: nrf52840" in piflash_board.rtt_output
            assert piflash_board.read({seg.address}, 16) == {bytes(seg.data[:16])!r}
            assert piflash_board.reset().reset
        """
    )
    run(pytester, "--piflash-probe", "sim:nrf52840", "--piflash-target", "nrf52840").assert_outcomes(passed=1)


def test_a_profile_names_the_board(pytester, rtt_elf):
    prof = pytester.path / "bench.yaml"
    prof.write_text(f"target: nrf52840\nprobe: sim:nrf52840-p\nfirmware: {rtt_elf}\n")
    pytester.makepyfile(
        """
        def test_board(piflash_board):
            assert (piflash_board.probe, piflash_board.target) == ("sim:nrf52840-p", "nrf52840")
        """
    )
    run(pytester, "--piflash-profile", str(prof)).assert_outcomes(passed=1)


def test_a_failure_shows_the_probe_the_phase_and_the_rtt_output(pytester, rtt_elf):
    pytester.makepyfile(
        f"""
        def test_board(piflash_board):
            piflash_board.flash({str(rtt_elf)!r})
            piflash_board.expect_rtt("self-test: FAIL", timeout=1)
        """
    )
    res = run(pytester, "--piflash-probe", "sim:nrf52840")
    res.assert_outcomes(failed=1)
    out = res.stdout.str()
    assert "piflash_board rtt failed on probe sim:nrf52840" in out
    assert "printed no text matching 'self-test: FAIL' within 1 s" in out
    assert "RTT output so far" in out and "self-test: PASS" in out
    assert "Traceback" not in out and "pyocd/" not in out


def test_a_flash_failure_names_the_phase(pytester):
    pytester.makepyfile(
        """
        def test_board(piflash_board, tmp_path):
            bad = tmp_path / "bad.hex"
            bad.write_text(":00000001FF\\n")
            piflash_board.flash(bad)
        """
    )
    res = run(pytester, "--piflash-probe", "sim:nrf52840")
    res.assert_outcomes(failed=1)
    res.stdout.fnmatch_lines(["*piflash_board flash failed on probe sim:nrf52840*"])



def test_installed_and_named_with_p_it_loads_once(pytester, monkeypatch):
    """As installed (an entry point in an installed distribution's metadata, as pip writes it),
    the plugin loads by itself, and ``-p piflash.testing.plugin`` as well finds it registered
    already: pluggy would refuse the same module registered under a second name."""
    tomllib = pytest.importorskip("tomllib")
    (name, value), = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["entry-points"]["pytest11"].items()
    site = pytester.path / "site"
    info = site / "piflash_plugin_check-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: piflash-plugin-check\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[pytest11]\n{name} = {value}\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), str(REPO), os.environ.get("PYTHONPATH", "")]))
    pytester.makepyfile(
        """
        def test_once(request):
            pm = request.config.pluginmanager
            mods = [p for p in pm.get_plugins() if getattr(p, "__name__", "") == "piflash.testing.plugin"]
            assert len(mods) == 1 and pm.get_name(mods[0]) == "piflash.testing.plugin"
        """
    )
    for extra in ((), ("-p", PLUGIN)):
        res = pytester.runpytest_subprocess("-p", "no:cacheprovider", *extra, timeout=120)
        res.assert_outcomes(passed=1)
