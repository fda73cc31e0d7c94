"""Jobs published to the line (issue 40, item 4): ``piflash ledger publish`` stores a verified
bundle in a real PostgreSQL, and two real ``piflash station run`` processes with
``job: ledger:LINE`` take the newest before their next board; a job that fails verification, or
one older than the job a station runs, is logged and the station keeps what it has. Keys made by
ssh-keygen, simulated nRF52840 boards."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

import pytest
from support.bundlekit import allowed_signers, make_bundle, make_key, need_ssh_keygen, write_profile

from piflash.errors import ExitCode

pytest.importorskip("unicorn")
pytest.importorskip("psycopg")

from support.pgserver import PgServer  # noqa: E402
from support.stationkit import StationProcess, rows, wait_rows  # noqa: E402

from piflash.sim import SimStore  # noqa: E402

STATIONS = ("st-a", "st-b")


@pytest.fixture
def pg():
    server = PgServer()
    yield server
    server.close()


def station_config(tmp_path: Path, name: str, url: str, signers: Path) -> Path:
    d = tmp_path / name
    d.mkdir()
    path = d / "station.yaml"
    path.write_text("\n".join([
        f"station: {name}", f'probes: ["sim:{name}"]', "poll_interval: 0.1", f"history: {d / 'history.sqlite3'}",
        f"ledger: {url}", f"allowed_signers: {signers}", "job: ledger:widget",
    ]) + "\n")
    return path


def test_a_job_published_reaches_both_stations_before_their_next_board(tmp_path, firmware_dir, pg, cli):
    need_ssh_keygen()
    store = SimStore()
    key, evil = make_key(tmp_path, "owner"), make_key(tmp_path, "evil")
    signers = allowed_signers(tmp_path / "allowed_signers", ("owner@line", key, 'namespaces="piflash-bundle"'))
    profile = write_profile(tmp_path / "src", firmware_dir / "nrf52840" / "firmware.hex")
    v1 = make_bundle(cli, profile, tmp_path / "v1.pfb", version=1, key=key)
    v2 = make_bundle(cli, profile, tmp_path / "v2.pfb", version=2, key=key)
    v3 = make_bundle(cli, profile, tmp_path / "v3.pfb", version=3, key=evil)
    sha = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in (v1, v2, v3)}

    # publishing: verified first, and only a newer version than the line's newest
    out = cli("ledger", "publish", v1, "--allowed-signers", signers, "--ledger", pg.url, check=0).stdout
    assert f"Published {v1}: line widget version 1, sha256 {sha['v1.pfb']}, signed by owner@line" in out
    proc = cli("ledger", "publish", v3, "--allowed-signers", signers, "--ledger", pg.url, check=ExitCode.BUNDLE)
    assert "not in the allowed signers" in proc.stderr
    proc = cli("ledger", "publish", v1, "--allowed-signers", signers, "--ledger", pg.url, check=ExitCode.BUNDLE)
    assert "version 1 of line widget is not newer than the line's newest in the ledger, version 1" in proc.stderr

    for name in STATIONS:
        store.create(name, "nrf52840")
    configs = [station_config(tmp_path, name, pg.url, signers) for name in STATIONS]
    stations = [StationProcess(c, c.parent / "station.log") for c in configs]
    histories = [c.parent / "history.sqlite3" for c in configs]

    def next_board(expected_version):
        """A new board on each station; both flash it with ``expected_version``."""
        counts = [len(rows(h)) for h in histories]
        for name in STATIONS:
            store.swap(name)
        for h, s, n in zip(histories, stations, counts):
            got = wait_rows(h, n + 1, s)
            assert (got[-1]["outcome"], got[-1]["bundle_version"]) == ("pass", expected_version), got[-1]

    try:
        for h, s in zip(histories, stations):
            got = wait_rows(h, 1, s)
            assert (got[0]["bundle_version"], got[0]["bundle_sha256"]) == (1, sha["v1.pfb"])
        # published while both run, their boards taken off (the workers wait for the next board
        # with the job they had): both switch, and their next board gets it
        for name in STATIONS:
            store.pull(name)
        time.sleep(1.0)  # ten poll intervals: each worker is back waiting for a board
        cli("ledger", "publish", v2, "--allowed-signers", signers, "--ledger", pg.url, check=0)
        for s in stations:
            s.wait_output("job: now running line widget version 2")
        next_board(2)

        # a job that fails verification (signed by a key not allowed: put in the ledger behind
        # publish's back) is logged once; both keep version 2
        from piflash.record.ledger import Ledger

        with Ledger(pg.url) as db:
            db.publish_bundle("widget", 3, sha["v3.pfb"], "evil", v3.read_bytes())
        for s in stations:
            s.wait_output("reload failed, keeping the previous config")
            assert "not in the allowed signers" in s.output()
        next_board(2)

        # the ledger's newest older than the job a station runs: logged, kept
        with Ledger(pg.url) as db:
            db.connection.execute("DELETE FROM ledger_bundles WHERE version >= 2")
        for s in stations:
            s.wait_output("older than version 2 this station runs: keeping version 2")
        next_board(2)
        for s in stations:
            assert s.output().count("switching to it") == 2  # v2, then the refused v3 only once
    finally:
        codes = [s.stop() for s in stations]
    assert codes == [0, 0]


def test_a_station_flashes_no_more_boards_than_the_bundles_count(tmp_path, firmware_dir, pg, cli):
    """``max_boards: 1`` with two probes: one board passes, the other is refused by its turn in the
    ledger (exit 28 in its row, naming the count) with its flash byte-exact."""
    need_ssh_keygen()
    store = SimStore()
    key = make_key(tmp_path, "owner")
    signers = allowed_signers(tmp_path / "allowed_signers", ("owner@line", key, 'namespaces="piflash-bundle"'))
    profile = write_profile(tmp_path / "src", firmware_dir / "nrf52840" / "firmware.hex")
    job = make_bundle(cli, profile, tmp_path / "one.pfb", version=1, key=key, extra=("--max-boards", "1"))
    for name in STATIONS:
        store.create(name, "nrf52840")
    before = {name: store.read_flash(name) for name in STATIONS}
    history = tmp_path / "history.sqlite3"
    config = tmp_path / "station.yaml"
    config.write_text("\n".join([
        "station: st", f"probes: [{', '.join(f'sim:{n}' for n in STATIONS)}]", "poll_interval: 0.1",
        f"history: {history}", f"ledger: {pg.url}", f"allowed_signers: {signers}", f"bundle: {job}",
    ]) + "\n")
    station = StationProcess(config, tmp_path / "station.log")
    try:
        got = wait_rows(history, 2, station)
    finally:
        assert station.stop() == 0
    assert sorted(r["outcome"] for r in got) == ["fail", "pass"], got
    failed = next(r for r in got if r["outcome"] == "fail")
    assert failed["error_kind"] == "BundleError", failed
    assert "allows at most 1 boards across the line: 1 passed" in failed["error"] or \
        "allows at most 1 boards across the line: 0 passed and 1 being flashed" in failed["error"], failed
    board = next(n for n in STATIONS if store.get(n).target_uid.lower() == str(failed["target_uid"]).lower())
    assert store.read_flash(board) == before[board]
