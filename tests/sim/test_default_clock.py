"""Issue 42 items 3 and 5 through a real session: open_session asks the probe for the target's
default SWD clock (piflash/targets/clocks.py), an explicit clock wins, and the family's
reset.post_delay reaches the pyOCD session."""

from __future__ import annotations

import pytest

pytest.importorskip("unicorn")

from piflash.sim import SimStore  # noqa: E402
from piflash.sim.probes import usb as sim_usb  # noqa: E402
from piflash.targets.connect import open_session  # noqa: E402

DAP_SWJ_CLOCK = 0x11


@pytest.fixture
def usb_board(monkeypatch):
    """``usb_board(board, target)``: the board behind a simulated Debug Probe, recording its packets."""
    store = SimStore()

    def plug(board, target):
        store.create(board, target, exist_ok=True)
        spec = f"{board}@debugprobe"
        monkeypatch.setenv(sim_usb.ENV_VAR, spec)
        device = sim_usb.install(spec, store).devices[0]
        device.recording = []
        return device

    yield plug
    sim_usb.uninstall()


def clocks_asked(device):
    """The SWD clocks (Hz) the host asked the probe firmware for, in order (DAP_SWJ_Clock)."""
    return [int.from_bytes(p[1:5], "little") for p, _ in device.recording if p[:1] == bytes([DAP_SWJ_CLOCK])]


@pytest.mark.parametrize("target, hz", [("rp2040", 24_000_000), ("nrf52840", 1_000_000)])
def test_the_probe_is_asked_for_the_tables_clock(usb_board, target, hz):
    device = usb_board("clk", target)
    with open_session(device.serial, target) as session:
        assert session.options.get("frequency") == hz
    assert clocks_asked(device)[-1] == hz
    assert device.firmware.swd_hz <= hz                 # the probe runs at most what was asked


@pytest.mark.parametrize("how", ["argument", "option"])
def test_an_explicit_clock_wins(usb_board, how):
    device = usb_board("clk", "rp2040")
    kwargs = {"frequency": 2_000_000} if how == "argument" else {"options": {"frequency": 2_000_000}}
    with open_session(device.serial, "rp2040", **kwargs) as session:
        assert session.options.get("frequency") == 2_000_000
    assert clocks_asked(device)[-1] == 2_000_000


@pytest.mark.parametrize("target, delay", [("nrf52840", 0.0), ("nrf51", 0.0), ("stm32f103rc", 0.0),
                                           ("rp2040", 0.0), ("rp2350", 0.1)])
def test_the_familys_reset_post_delay_reaches_the_session(target, delay):
    SimStore().create("pd", target, exist_ok=True)
    with open_session("sim:pd", target) as session:
        assert session.options.get("reset.post_delay") == delay
        session.target.reset()                           # and the reset still works without the sleep
    with open_session("sim:pd", target, options={"reset.post_delay": 0.25}) as session:
        assert session.options.get("reset.post_delay") == 0.25       # the user's option wins


def test_info_shows_the_clock_asked_for(cli):
    cli("sim", "create", "clk", "-t", "rp2040", check=0)
    out = cli.json("info", "-u", "sim:clk", "-t", "rp2040")
    assert out["swd_hz"] == 24_000_000
    assert cli.json("info", "-u", "sim:clk", "-t", "rp2040", "-f", "2MHz")["swd_hz"] == 2_000_000
    assert "SWD clock:  24 MHz asked" in cli("info", "-u", "sim:clk", "-t", "rp2040").stdout
    import json
    from pathlib import Path

    import fastjsonschema

    schema = json.loads((Path(__file__).parents[2] / "docs" / "result.schema.json").read_text())
    fastjsonschema.compile(schema)(out)              # swd_hz is part of the info object's schema
