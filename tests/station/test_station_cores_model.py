"""The station model of benchmarks/station_cores.py (issue 20, deliverable 4): each shared
resource takes over where it should, so the predictions in docs/benchmarks.md cannot come from a
wrong formula."""

from __future__ import annotations

import importlib.util
from pathlib import Path

spec = importlib.util.spec_from_file_location(
    "station_cores", Path(__file__).resolve().parents[2] / "benchmarks" / "station_cores.py")
model = importlib.util.module_from_spec(spec)
spec.loader.exec_module(model)


def _row(table, workers, hub, n):
    return next(r for r in table if (r["workers"], r["hub"], r["probes"]) == (workers, hub, n))


def test_host_bound_threads_and_probe_bound_processes():
    host = [("host", i * 0.01, 0.008) for i in range(100)]          # 0.8 s of CPU in a 1 s board
    table = model.rates({"board_s": 1.0, "timeline": host + [("bus", 0.5, 0.05)]}, cores=4, detect_s=0.0)
    assert _row(table, "threads", "multi-TT", 1)["boards_per_hour"] == 3600
    threads = _row(table, "threads", "multi-TT", 4)
    assert threads["bound"].startswith("waits: host")
    assert abs(threads["boards_per_hour"] - 4500) < 4500 * 0.05                     # 1 / 0.8 s
    procs = _row(table, "processes", "multi-TT", 4)
    assert (procs["bound"], procs["boards_per_hour"]) == ("probes", 14400)


def test_single_tt_hub_shares_the_full_speed_bus():
    fig = {"board_s": 1.0, "timeline": [("bus", 0.0, 0.5), ("host", 0.6, 0.1)]}
    table = model.rates(fig, cores=4, detect_s=0.26)
    single = _row(table, "processes", "single-TT", 4)
    assert single["bound"] == "waits: bus %s s" % single["waits_s"]["bus"]
    # in step the four share the bus packet by packet: each one's 0.5 s of packets ends at 2 s,
    # then all four run their 0.5 s off the bus and the 0.26 s between boards together, and stay
    # in step: 4 boards per 2.76 s, where the bound 1 / bus_s (7,200/h) assumed them out of step
    assert abs(single["boards_per_hour"] - 3600 * 4 / 2.76) < 3600 * 4 / 2.76 * 0.01
    multi = _row(table, "processes", "multi-TT", 4)
    assert multi["bound"] == "probes" and multi["boards_per_hour"] == round(3600 * 4 / 1.26)
    assert _row(table, "processes", "multi-TT", 2)["boards_per_hour"] == round(3600 * 2 / 1.26)


def test_shell_loops_are_processes_bound_by_cores_and_the_bus():
    """N shell loops of ``pyocd flash`` are N processes: each board's start-up is CPU, spread over
    the host's cores, and a single-TT hub still shares one bus."""
    fig = {"board_s": 4.0, "host_s": 3.0, "bus_s": 0.1}
    loops = model.shell_rates(fig, cores=2)
    assert loops[("multi-TT", 1)] == 900                                 # 1 / 4 s
    assert loops[("multi-TT", 2)] == 1800
    assert loops[("multi-TT", 4)] == 2400                                # 2 cores / 3 s of CPU
    assert model.shell_rates({"board_s": 4.0, "host_s": 0.1, "bus_s": 1.0}, cores=4)[("single-TT", 4)] == 3600
