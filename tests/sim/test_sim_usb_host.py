"""The host in the USB timing model (issue 20): presets measured on x86 and scaled by cited
factors, host times that add up under the interpreter lock, typical flash times for predictions
and maxima for timeouts."""

from __future__ import annotations

import pytest

from piflash.sim.probes.usb import timing
from piflash.sim.probes.usb.timing import (
    HOST_PRESETS,
    TARGET_TIMING,
    X86_MEASURED,
    get_host,
)


def test_x86_is_the_measurement_and_the_pis_are_it_scaled():
    x86 = HOST_PRESETS["x86"]
    assert x86.factor == 1.0 and x86.transfer_s == X86_MEASURED["transfer_s"]
    assert all(v > 0 for d in x86.transfer_s.values() for v in d.values()) and x86.startup_s > 0
    # every tool's figures name each phase its runs book time to, and "*" for the others
    assert set(x86.transfer_s["piflash"]) == {"*", "connect", "erase", "program", "verify", "reset"}
    assert set(x86.transfer_s["pyocd"]) == {"*", "connect", "program", "reset", "disconnect"}
    for name in ("zero2w", "pi4", "pi5"):
        host = get_host(name)
        low, high = host.factor_range
        assert low <= host.factor <= high and host.factor_source
        for tool in ("piflash", "pyocd"):
            for phase, seconds in x86.transfer_s[tool].items():
                assert host.transfer_s[tool][phase] == pytest.approx(seconds * host.factor)
            assert host.parse_s(tool, "hex", 1000) == \
                pytest.approx(x86.parse_s(tool, "hex", 1000) * host.factor)
        assert host.startup_s == pytest.approx(x86.startup_s * host.factor)
        assert host.sleep_s == x86.sleep_s          # sleeps are wall time: not scaled
    # Slower cores, slower host: Zero 2W (A53 1 GHz) > Pi 4 (A72) > Pi 5 (A76) > x86.
    assert HOST_PRESETS["zero2w"].factor > HOST_PRESETS["pi4"].factor > HOST_PRESETS["pi5"].factor > 1


def test_unknown_host_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown host preset 'pi3'.*zero2w"):
        get_host("pi3")


def test_typical_times_for_predictions_maxima_for_timeouts():
    for name, t in TARGET_TIMING.items():
        assert 0 < t.program_s <= t.program_max_s, name
        assert 0 < t.erase_page_s <= t.erase_page_max_s, name
        assert 0 < t.erase_all_s <= t.erase_all_max_s, name
        assert t.op_time("erase_page", 0) == t.erase_page_s
        assert t.op_timeout("erase_page", 0) == t.erase_page_max_s
        assert t.op_timeout("program", 4096) >= t.op_time("program", 4096)
        assert t.source
    # nRF52840: the PS gives only the 85 ms maximum; the prediction is the measured real erase.
    assert TARGET_TIMING["nrf52840"].erase_page_max_s == 85e-3
    nrf52 = TARGET_TIMING["nrf52840"]
    assert nrf52.erase_page_s < 85e-3 and "2299" in nrf52.notes["erase_page_s"]
    # STM32F103: DS5792's typical t_prog, its maxima for the timeouts.
    stm32 = TARGET_TIMING["stm32f103rc"]
    assert (stm32.program_s, stm32.program_max_s) == (52.5e-6, 70e-6)


def test_host_times_add_up_under_the_interpreter_lock():
    """Responses the host consumes in one go (pyOCD reading the packets it kept in flight) are
    handled one after the other: each costs its host time after the host finished the previous
    one. The old model took max(now, arrival + host time) per response, so the host time of
    responses that arrived while the host was busy vanished (here: 1.0002 + 2 ms, not 1.006)."""
    from piflash.sim import SimStore
    from piflash.sim.probes.usb.device import SimUsbDevice
    from piflash.sim.probes.usb.presets import get_preset
    device = SimUsbDevice(get_preset("mculink"), "nowhere", SimStore(), 2)
    device.host_transfer_s = 2e-3
    device._arrivals = [1.0, 1.0001, 1.0002]        # three responses 0.1 ms apart, all consumed
    device.sync()
    assert device.clock.now == pytest.approx(1.0 + 3 * 2e-3)
    device._arrivals.append(2.0)                     # a response long after: the host waited
    device.sync()
    assert device.clock.now == pytest.approx(2.0 + 2e-3)
    assert timing.HOST_TRANSFER_S == HOST_PRESETS["x86"].transfer_s["pyocd"]["*"]


def _real_probe():
    import importlib.util
    from pathlib import Path
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "real_probe.py"
    spec = importlib.util.spec_from_file_location("real_probe", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_real_probe_adds_each_hosts_fixed_costs(tmp_path):
    """``real_probe.py --host``: the file parse becomes a ``load`` phase and pyOCD's reset
    sleeps go into ``reset``, at the host's figures (the parse scaled, the sleeps not)."""
    rp = _real_probe()
    image = tmp_path / "fw.hex"
    image.write_bytes(b"x" * 100_000)
    run = {"seconds": 2.0, "phases": {"connect": 0.1, "reset": 0.01}}
    for name in ("x86", "zero2w"):
        host = get_host(name)
        out = rp.add_host_costs(run, host, "piflash", image)
        load = host.parse_s("piflash", "hex", 100_000)
        assert out["phases"]["load"] == pytest.approx(load, abs=1e-6)
        assert out["phases"]["reset"] == pytest.approx(0.01 + host.sleep_s["piflash"])
        assert out["seconds"] == pytest.approx(2.0 + load + host.sleep_s["piflash"], abs=1e-6)
    assert run["phases"] == {"connect": 0.1, "reset": 0.01}       # the input is left alone
    # a re-flash: piflash reads the file back from its parsed-image cache, pyOCD parses it again
    for name in ("x86", "zero2w"):
        host = get_host(name)
        again = rp.add_host_costs(run, host, "piflash", image, "reflash")["phases"]["load"]
        assert again == pytest.approx(host.cached_load_s_per_byte["hex"] * 100_000, abs=1e-6)
        assert again < host.parse_s("piflash", "hex", 100_000) / 5  # 7x since the block reader (ihex.py)
        assert rp.add_host_costs(run, host, "pyocd", image, "reflash")["phases"]["load"] == \
            pytest.approx(host.parse_s("pyocd", "hex", 100_000), abs=1e-6)
    fresh = {"case": "fresh", "piflash_s": 3.0, "pyocd_s": 6.0, "pyocd_default_s": 9.0, "floor_s": 2.0,
             "load_cached_s": 0.1,
             "phases": {"piflash": {"connect": 0.1, "verify": 0.2, "reset": 0.1, "load": 0.5},
                        "pyocd": {"load": 1.0}}}
    assert rp.goals(fresh, fresh) == {"piflash_over_floor": 1.5, "piflash_over_pyocd": 0.5,
                                      "piflash_over_pyocd_default": 0.333,
                                      "piflash_over_floor_cached": 1.3, "piflash_over_pyocd_cached": 0.433,
                                      "piflash_over_floor_noload": 1.25,
                                      "piflash_over_pyocd_noload": 0.5}
    reflash = dict(fresh, case="reflash", piflash_s=0.9)
    assert rp.goals(reflash, fresh) == {"reference_s": 0.4, "piflash_over_reference": 2.25,
                                        "piflash_over_reference_noload": 1.0}


def test_each_host_states_its_band_and_runs_at_either_end():
    """Issue 42: a preset's factor is a band (low / mid / high, each with its source);
    ``get_host(name, end)`` scales every CPU figure by that end's factor (sleeps are wall time)."""
    zero2w = {end: get_host("zero2w", end) for end in timing.HOST_FACTORS}
    assert [zero2w[end].factor for end in timing.HOST_FACTORS] == [6.2, 8.4, 11.3]
    assert zero2w["mid"] is HOST_PRESETS["zero2w"]
    x86 = HOST_PRESETS["x86"]
    for name in HOST_PRESETS:
        mid = get_host(name)
        assert set(mid.band) == set(timing.HOST_FACTORS)
        assert mid.band["low"][0] <= mid.band["mid"][0] <= mid.band["high"][0]
        assert all(source for _, source in mid.band.values())
        for end in timing.HOST_FACTORS:
            host = get_host(name, end)
            assert (host.host_factor, host.factor, host.band) == (end, mid.band[end][0], mid.band)
            assert host.factor_range == (mid.band["low"][0], mid.band["high"][0])
            assert host.factor_source == mid.band[end][1]
            assert host.transfer_at("piflash", "program") == \
                pytest.approx(x86.transfer_at("piflash", "program") * host.factor)
            assert host.startup_s == pytest.approx(x86.startup_s * host.factor)
            assert host.sleep_s == x86.sleep_s
    assert zero2w["high"].transfer_at("pyocd") > zero2w["mid"].transfer_at("pyocd") > zero2w["low"].transfer_at("pyocd")
    assert "band low 6.2 / mid 8.4 / high 11.3" in zero2w["high"].describe()
    with pytest.raises(ValueError, match="unknown host factor 'max'.*low, mid, high"):
        get_host("zero2w", "max")


def test_phase_cost_takes_the_phase_figure_else_the_default():
    figure = {"*": 1e-3, "program": 2e-4}
    assert timing.phase_cost(figure, "program") == 2e-4
    assert timing.phase_cost(figure, "connect") == 1e-3          # not named: the "*" figure
    assert timing.phase_cost(5e-5, "program") == 5e-5             # a plain float: every phase
    from piflash.progress import Phase
    assert timing.phase_cost(figure, Phase.PROGRAM) == 2e-4      # piflash's phases are str enums
    with pytest.raises(KeyError):
        timing.phase_cost({"program": 1.0}, "connect")


def _bare_device():
    from piflash.sim import SimStore
    from piflash.sim.probes.usb.device import SimUsbDevice
    from piflash.sim.probes.usb.presets import get_preset
    return SimUsbDevice(get_preset("mculink"), "nowhere", SimStore(), 2)


def test_the_device_charges_the_figure_of_the_clocks_phase():
    """Per-phase host cost (issue 42): a packet sent and a response consumed in a phase with a
    higher figure cost that much more virtual time, to the microsecond, every time."""
    figures = {"*": 1e-3, "program": 5e-3}
    ends = {}
    for phase in ("connect", "program", "program"):
        device = _bare_device()
        device.host_transfer_s = figures
        device.clock.set_phase(phase)
        device.write_out(bytes([0x00, 0x04]))      # DAP_Info: protocol version (no board needed)
        device.read_in(64, 10)
        device.sync()                               # the response consumed: its host time too
        ends.setdefault(phase, []).append(device.clock.now)
    assert ends["program"][0] == ends["program"][1]                     # deterministic
    # one packet out and one response in, each 4 ms dearer in "program"
    assert ends["program"][0] - ends["connect"][0] == pytest.approx(2 * 4e-3, abs=1e-12)
    # responses consumed before a phase change are charged at the phase they were consumed in
    device = _bare_device()
    device.host_transfer_s = figures
    device.clock.set_phase("connect")
    device._arrivals = [1.0]
    device.clock.set_phase("program")               # syncs first: the response is connect's
    assert device.clock.now == pytest.approx(1.0 + 1e-3)
    device._arrivals.append(2.0)
    device.sync()
    assert device.clock.now == pytest.approx(2.0 + 5e-3)
    # a plain float still works (other benchmarks and tests set one)
    device = _bare_device()
    device.host_transfer_s = 2e-3
    device._arrivals = [1.0]
    device.sync()
    assert device.clock.now == pytest.approx(1.0 + 2e-3)


def test_each_target_states_the_reset_it_needs():
    """The floor's reset is the chip's (issue 42), with its source: never a tool's fixed sleep
    (pyOCD's reset.post_delay is 0.1 s)."""
    for name, t in TARGET_TIMING.items():
        assert 0.0 <= t.reset_s < 0.01 and t.reset_source, name
    assert TARGET_TIMING["stm32f103rc"].reset_s == 20e-6
    assert "RM0008" in TARGET_TIMING["stm32f103rc"].reset_source


def _small_bench(rp, monkeypatch, tmp_path, host_factor):
    """real_probe's rows for a 4 KiB STM32F103RC image through the MCU-Link on the zero2w preset,
    in a fresh board store (the boards of an earlier call would not be blank)."""
    monkeypatch.setitem(rp.SIZES, "stm32f103rc", 4096)
    monkeypatch.setenv("PIFLASH_SIM_DIR", str(tmp_path / host_factor))
    # bench() sets PIFLASH_SIM_USB in os.environ itself: a value set here first is what the
    # teardown restores (removes), so no later test of this worker sees a simulated bus.
    monkeypatch.setenv("PIFLASH_SIM_USB", "")
    # --frequency 4000000: four times pyOCD's default, so the two pyOCD runs differ
    return rp.bench(["mculink"], ["stm32f103rc"], "zero2w", ("fresh", "reflash"), 4_000_000, host_factor)


def test_real_probe_rows_say_their_band_run_pyocd_at_pifashs_clock_and_a_floor_of_the_chip(monkeypatch, tmp_path):
    """Issue 42 in one small run at each end of the zero2w band: the rows name the band end and
    its factor; pyOCD runs at the clock piflash asked the probe for (``pyocd_s``) and at its own
    1 MHz default (``pyocd_default_s``); the floor is the same for both piflash runs, though
    piflash's own connect phase (and every other) differs between them."""
    import logging

    rp = _real_probe()
    logging.disable(logging.WARNING)
    try:
        low = _small_bench(rp, monkeypatch, tmp_path, "low")
        high = _small_bench(rp, monkeypatch, tmp_path, "high")
    finally:
        logging.disable(logging.NOTSET)
    for rows, end, factor in ((low, "low", 6.2), (high, "high", 11.3)):
        assert [r["case"] for r in rows] == ["fresh", "reflash"]
        for r in rows:
            assert (r["host"], r["host_factor"], r["host_factor_value"]) == ("zero2w", end, factor)
            assert r["host_band"] == {"low": 6.2, "mid": 8.4, "high": 11.3}
            assert r["pyocd_hz"] == r["swd_hz_requested"] == 4_000_000      # the clock piflash was given
            assert r["pyocd_default_hz"] == 1_000_000                       # pyOCD's own default
            assert set(r["phases"]) == {"piflash", "pyocd", "pyocd_default"}
            assert r["pyocd_default_s"] > r["pyocd_s"] > 0                  # a quarter of the clock
        fresh = rows[0]
        assert fresh["goals"]["piflash_over_pyocd"] == round(fresh["piflash_s"] / fresh["pyocd_s"], 3)
        assert fresh["goals"]["piflash_over_pyocd_default"] == \
            round(fresh["piflash_s"] / fresh["pyocd_default_s"], 3)
    # the two piflash runs differ, their floors do not
    assert high[0]["phases"]["piflash"]["connect"] > low[0]["phases"]["piflash"]["connect"]
    assert high[0]["piflash_s"] > low[0]["piflash_s"]
    for a, b in zip(low, high):
        assert (a["floor_s"], a["floor_framed_s"], a["floor_parts"]) == (b["floor_s"], b["floor_framed_s"],
                                                                         b["floor_parts"])
    parts = low[0]["floor_parts"]
    assert low[0]["floor_s"] == pytest.approx(
        max(parts["chip_s"], parts["usb_s"], parts["swd_s"]) + parts["connect_s"] + parts["reset_s"], abs=1e-3)
    # a re-flash moves nothing: connect and reset alone, far below piflash's own connect + reset
    assert low[1]["floor_s"] == pytest.approx(parts["connect_s"] + parts["reset_s"], abs=1e-3)
    assert low[1]["floor_s"] < 0.01


def test_floor_comes_from_the_chip_the_link_and_the_clock(tmp_path):
    """floor_parts: the SWD term is the image's words at 46 SWCLK cycles each at the probe's
    clock for the request; connect is 3 link round trips, reset 1 plus the chip's reset."""
    from piflash.sim.probes.usb.presets import get_preset

    rp = _real_probe()
    image = tmp_path / "fw.bin"
    image.write_bytes(bytes(8192))
    preset = get_preset("mculink")
    slow = rp.floor_parts(preset, "stm32f103rc", image, "fresh", 1_000_000)
    fast = rp.floor_parts(preset, "stm32f103rc", image, "fresh", 4_000_000)
    assert slow["swd_s"] == pytest.approx(2048 * 46 / 1e6)
    assert fast["swd_s"] == pytest.approx(slow["swd_s"] / 4)
    assert slow["chip_s"] == fast["chip_s"] == pytest.approx(4096 * 52.5e-6)
    trip = rp.link_round_trips(preset, 1)
    assert 0 < trip < 1e-3 and rp.link_round_trips(preset, 3) == pytest.approx(3 * trip)   # bulk: back to back
    assert slow["connect_s"] == pytest.approx(3 * trip)
    assert slow["reset_s"] == pytest.approx(trip + 20e-6)
    assert rp.floor_seconds(preset, "stm32f103rc", image, "fresh", 1_000_000) == pytest.approx(
        slow["chip_s"] + 4 * trip + 20e-6)                               # the flash's time at 1 MHz
    crawl = rp.floor_parts(preset, "stm32f103rc", image, "fresh", 100_000)
    assert crawl["swd_s"] > crawl["chip_s"]
    assert rp.floor_seconds(preset, "stm32f103rc", image, "fresh", 100_000) == pytest.approx(
        crawl["swd_s"] + 4 * trip + 20e-6)                               # the wire's at 100 kHz
    # HID: one round trip per 1 ms frame (the answer at the same frame's IN poll, half a frame on)
    hid = get_preset("daplink")
    first = rp.link_round_trips(hid, 1)
    assert 0.5e-3 < first < 1e-3
    assert rp.link_round_trips(hid, 3) == pytest.approx(2e-3 + first)


def test_real_probe_text_prints_the_host_with_its_band(monkeypatch, capsys):
    """``real_probe.py --host zero2w --host-factor high`` (text output): the preset, the factor
    it ran at and the band, then a row with both pyOCD columns."""
    rp = _real_probe()
    seen = {}

    def fake_bench(presets, targets, host_name, cases, frequency, host_factor):
        seen.update(host=host_name, factor=host_factor)
        return [{"probe": "mculink", "link": "v2-bulk-hs", "target": "nrf52840", "case": "fresh",
                 "host": host_name, "host_factor": host_factor, "host_factor_value": 11.3,
                 "host_band": {"low": 6.2, "mid": 8.4, "high": 11.3}, "swd_hz_requested": 4000000,
                 "piflash_s": 2.979, "pyocd_s": 5.28, "pyocd_default_s": 6.165, "floor_s": 2.687,
                 "floor_framed_s": 2.687, "goals": {"piflash_over_pyocd": 0.564}}]

    monkeypatch.setattr(rp, "bench", fake_bench)
    import logging

    try:
        assert rp.main(["--host", "zero2w", "--host-factor", "high", "--presets", "mculink"]) == 0
    finally:
        logging.disable(logging.NOTSET)       # main silences pyOCD's warnings process-wide
    out = capsys.readouterr().out
    assert seen == {"host": "zero2w", "factor": "high"}
    assert out.splitlines()[0] == "host preset: zero2w, factor 11.3 (high; band low 6.2 / mid 8.4 / high 11.3)"
    assert "pyocd_dflt" in out and "6.17" in out and "piflash_over_pyocd=0.564" in out
    with pytest.raises(SystemExit):
        rp.main(["--host-factor", "max"])
