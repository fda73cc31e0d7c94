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
    assert all(v > 0 for v in x86.transfer_s.values()) and x86.startup_s > 0
    for name in ("zero2w", "pi4", "pi5"):
        host = get_host(name)
        low, high = host.factor_range
        assert low <= host.factor <= high and host.factor_source
        for tool in ("piflash", "pyocd"):
            assert host.transfer_s[tool] == pytest.approx(x86.transfer_s[tool] * host.factor)
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
    assert timing.HOST_TRANSFER_S == HOST_PRESETS["x86"].transfer_s["pyocd"]


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
        assert again < host.parse_s("piflash", "hex", 100_000) / 20
        assert rp.add_host_costs(run, host, "pyocd", image, "reflash")["phases"]["load"] == \
            pytest.approx(host.parse_s("pyocd", "hex", 100_000), abs=1e-6)
    fresh = {"case": "fresh", "piflash_s": 3.0, "pyocd_s": 6.0, "floor_s": 2.0, "load_cached_s": 0.1,
             "phases": {"piflash": {"connect": 0.1, "verify": 0.2, "reset": 0.1, "load": 0.5},
                        "pyocd": {"load": 1.0}}}
    assert rp.goals(fresh, fresh) == {"piflash_over_floor": 1.5, "piflash_over_pyocd": 0.5,
                                      "piflash_over_floor_cached": 1.3, "piflash_over_pyocd_cached": 0.433,
                                      "piflash_over_floor_noload": 1.25,
                                      "piflash_over_pyocd_noload": 0.5}
    reflash = dict(fresh, case="reflash", piflash_s=0.9)
    assert rp.goals(reflash, fresh) == {"reference_s": 0.4, "piflash_over_reference": 2.25,
                                        "piflash_over_reference_noload": 1.0}
