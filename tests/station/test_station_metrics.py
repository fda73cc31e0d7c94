"""The station's Prometheus metrics (issue 24, deliverable 5): a node_exporter textfile written
after every board, parsed back with prometheus-client's own parser; the Grafana dashboard asks
only for metrics the station writes. Through a real station on simulated boards."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

pytest.importorskip("unicorn")
pytest.importorskip("prometheus_client")

from support.stationkit import (  # noqa: E402
    StationProcess,
    samples,
    wait_for,
    wait_rows,
    write_config,
    write_profile,
)

from piflash.errors import ExitCode  # noqa: E402
from piflash.sim import SimStore  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


def _scrape(port: int) -> dict:
    """{(name, sorted labels): value} of ``GET http://127.0.0.1:PORT/metrics`` (as Prometheus
    scrapes it), read by prometheus-client's parser."""
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
        text = answer.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_metrics_served_on_a_port_and_a_port_in_use_refused(tmp_path, firmware_dir, cli):
    """``metrics_port:`` serves the same metrics for Prometheus to scrape (no textfile needed);
    the port closes with the station; a port another program holds is exit 5 naming the key."""
    import socket

    store = SimStore()
    store.create("bay", "nrf52840")
    port = _free_port()
    profile = write_profile(tmp_path, firmware_dir / "nrf52840" / "firmware.hex")
    config = write_config(tmp_path, profile, ["sim:bay"], tmp_path / "history.sqlite3", metrics_port=port,
                          poll_interval=0.05)
    station = StationProcess(config, tmp_path / "station.log")
    key = ("piflash_boards_total", (("outcome", "pass"), ("probe", "sim:bay"), ("station", "test-line")))
    try:
        wait_rows(tmp_path / "history.sqlite3", 1, station)
        got = wait_for(lambda: (lambda m: m if m.get(key) == 1 else None)(_scrape(port)), "the board, scraped")
        assert got[("piflash_serials_issued_total", (("station", "test-line"),))] == 0
        # a second station on the same port: refused before any board, with the key and a hint
        other = write_config(tmp_path, profile, ["sim:none"], tmp_path / "h2.sqlite3", name="other.yaml",
                             metrics_port=port)
        proc = cli("station", "run", "--plain", "--config", other, check=int(ExitCode.PROFILE))
        assert "key 'metrics_port': cannot serve the metrics on port" in proc.stderr
        assert "pick a free port" in proc.stderr and "Traceback" not in proc.stderr
    finally:
        station.signal(signal.SIGTERM)
        assert station.wait() == 0, station.output()
    with socket.socket() as s:          # the station let it go (SO_REUSEADDR: past TIME_WAIT, not a listener)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("0.0.0.0", port))
        s.listen()


def test_metrics_after_each_board(tmp_path, firmware_dir):
    store = SimStore()
    store.create("bay", "nrf52840")
    prom = tmp_path / "piflash.prom"
    profile = write_profile(tmp_path, firmware_dir / "nrf52840" / "firmware.hex",
                            serial="{uicr_customer: 0, encoding: u32, start: 70}")
    config = write_config(tmp_path, profile, ["sim:bay"], tmp_path / "history.sqlite3", metrics=prom,
                          poll_interval=0.05)
    station = StationProcess(config, tmp_path / "station.log")
    try:
        wait_rows(tmp_path / "history.sqlite3", 1, station)
        store.swap("bay", faults={"write_protect": [0x1000]})      # the second board fails verify
        wait_rows(tmp_path / "history.sqlite3", 2, station)
        got = wait_for(lambda: (lambda s: s if s.get(("piflash_boards_total", (("outcome", "fail"),
                                ("probe", "sim:bay"), ("station", "test-line")))) == 1 else None)(samples(prom)),
                       "the failed board in the metrics")
    finally:
        station.signal(signal.SIGTERM)
        assert station.wait() == 0, station.output()
    labels = (("outcome", "pass"), ("probe", "sim:bay"), ("station", "test-line"))
    assert got[("piflash_boards_total", labels)] == 1
    assert got[("piflash_flash_duration_seconds_count", (("probe", "sim:bay"), ("station", "test-line")))] == 2
    assert got[("piflash_serials_issued_total", (("station", "test-line"),))] == 2
    assert got[("piflash_last_success_timestamp_seconds", (("probe", "sim:bay"), ("station", "test-line")))] > 0
    assert not list(tmp_path.glob("piflash.prom.*"))                # no temporary file left (atomic rename)


def test_the_dashboard_asks_for_metrics_the_station_writes():
    import re

    dash = json.loads((REPO / "dashboards" / "piflash-line.json").read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    used = {m for e in exprs for m in re.findall(r"\b(piflash_[a-z_]+)", e)}
    written = {"piflash_boards_total", "piflash_flash_duration_seconds_bucket", "piflash_ledger_queue_rows",
               "piflash_last_success_timestamp_seconds", "piflash_serials_issued_total"}
    assert used and used <= written, used - written
    assert any("outcome=\"pass\"" in e and "increase" in e for e in exprs)        # boards/hour
    assert any("/" in e and "outcome=~\"pass|fail\"" in e for e in exprs)         # yield


def test_metrics_config_errors(tmp_path, firmware_dir, cli):
    profile = write_profile(tmp_path, firmware_dir / "nrf52840" / "firmware.hex")
    for value, message in (("metrics.txt", "expected the path of a .prom file"),
                           ("nowhere/x.prom", "does not exist")):
        config = write_config(tmp_path, profile, ["sim:x"], tmp_path / "h.sqlite3", metrics=value)
        proc = cli("station", "run", "--plain", "--config", config, check=int(ExitCode.PROFILE))
        assert message in proc.stderr
