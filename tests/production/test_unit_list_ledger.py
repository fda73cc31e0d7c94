"""Per-unit values from one CSV list shared by the stations of a line through the central ledger
(issue 39 item 2) on a real PostgreSQL server (tests/support/pgserver.py): every row is used by
one board at most, none is lost, each used row names its board in the ledger, also when one
station is SIGKILLed mid-board and started again."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

pytest.importorskip("unicorn")
pytest.importorskip("psycopg")

from support.pgserver import PgServer  # noqa: E402
from support.stationkit import StationProcess, rows, wait_for, wait_rows, write_config  # noqa: E402

from piflash.errors import ListUsedUpError, ProfileError, SerialError  # noqa: E402
from piflash.firmware.patch import PatchEntry  # noqa: E402
from piflash.production.unitlist import PostgresRowSource, RowAllocator, read_list  # noqa: E402
from piflash.sim import SimStore  # noqa: E402

MAC = PatchEntry("mac", 0x10001080, "hex", 6, "{value}", list="x", column="mac")


@pytest.fixture
def pg():
    server = PgServer()
    yield server
    server.close()


def _units(path: Path, n: int) -> Path:
    path.write_text("mac,key\n" + "".join(f"02:00:00:00:{i // 256:02x}:{i % 256:02x},{i:032x}\n"
                                          for i in range(1, n + 1)))
    return path


def _station(tmp_path: Path, firmware_dir: Path, name: str, url: str, block: int = 2):
    d = tmp_path / name
    d.mkdir()
    profile = d / "listed.yaml"
    profile.write_text(f"""target: nrf52840
firmware: {firmware_dir / "nrf52840" / "firmware.hex"}
patch:
  - name: mac
    uicr_customer: 0
    encoding: hex
    length: 6
    list: ../units.csv
  - name: key
    address: 0x000FF100
    encoding: hex
    length: 16
    list: ../units.csv
    secret: true
""")
    config = write_config(d, profile, [f"sim:{name}-bay"], d / "history.sqlite3", ledger=url,
                          serials=d / "serials.sqlite3", serial_block=block, poll_interval=0.05)
    config.write_text(config.read_text().replace("station: test-line", f"station: {name}"))
    return d, config


def _ledger(url: str, sql: str):
    import psycopg

    with psycopg.connect(url) as db:
        return db.execute(sql).fetchall()


def _used_rows_match_boards(url: str):
    """The ledger's list rows against its history rows: (used rows {row: (state, uid)}, rows free
    for the next lease: given back, or never leased)."""
    unit = {int(r): (state, uid) for r, state, uid in _ledger(url, "SELECT row, state, target_uid FROM ledger_unit_rows")}
    boards = {}
    for patch, uid, outcome in _ledger(url, "SELECT patch, target_uid, outcome FROM ledger_operations "
                                            "WHERE patch IS NOT NULL"):
        row = json.loads(patch)["mac"]["row"]
        assert row not in boards, f"row {row} on two boards"                  # a row once at most
        boards[row] = (outcome, uid)
    used = {r: s for r, s in unit.items() if s[0] in ("pass", "fail", "interrupted")}
    assert {r: uid for r, (_, uid) in used.items()} == {r: uid for r, (_, uid) in boards.items()}
    assert {r: s for r, (s, _) in used.items()} == {r: o for r, (o, _) in boards.items()}
    (total, granted), = _ledger(url, "SELECT rows, next FROM ledger_unit_lists")
    never = list(range(granted + 1, total + 1))                                # never leased yet
    return used, sorted([r for r, (s, _) in unit.items() if s == "free"] + never)


def test_two_stations_share_one_list_through_the_ledger(tmp_path, firmware_dir, pg):
    _units(tmp_path / "units.csv", 12)
    store = SimStore()
    stations = []
    for name in ("line-a", "line-b"):
        store.create(f"{name}-bay", "nrf52840")
        d, config = _station(tmp_path, firmware_dir, name, pg.url)
        stations.append((name, d, StationProcess(config, d / "station.log")))
    flip = {"bit_flip": {"address": 0x000FF101, "bit": 3}}            # the key's bytes: verify fails
    try:
        for n in range(1, 5):                                          # four boards on each station
            for name, d, st in stations:
                wait_rows(d / "history.sqlite3", n, st)
                if n < 4:
                    store.swap(f"{name}-bay", faults=flip if (n, name) == (2, "line-b") else None)
        wait_for(lambda: len(_ledger(pg.url, "SELECT id FROM ledger_operations")) == 8, "every row in the ledger")
    finally:
        for _, _, st in stations:
            st.signal(signal.SIGTERM)
            assert st.wait() == 0, st.output()
    used, free = _used_rows_match_boards(pg.url)
    assert len(used) == 8 and sorted(s for s, _ in used.values()).count("fail") == 1
    assert sorted(list(used) + free) == list(range(1, 13))              # none lost
    assert _ledger(pg.url, "SELECT count(*) FROM ledger_unit_leases WHERE state = 'open'") == [(0,)]
    texts = " ".join(p for (p,) in _ledger(pg.url, "SELECT patch FROM ledger_operations"))
    assert not any(f"{i:032x}" in texts for i in range(1, 13))       # no key in the ledger


def test_a_station_sigkilled_mid_board_loses_no_row_and_reuses_none(tmp_path, firmware_dir, pg):
    _units(tmp_path / "units.csv", 10)
    store = SimStore()
    made = {}
    for name in ("line-k", "line-m"):
        store.create(f"{name}-bay", "nrf52840")
        made[name] = _station(tmp_path, firmware_dir, name, pg.url, block=3)
    (k_dir, k_config), (m_dir, m_config) = made["line-k"], made["line-m"]
    k = StationProcess(k_config, k_dir / "k1.log", env=dict(os.environ, PIFLASH_TEST_KILL_AT="programmed"))
    m = StationProcess(m_config, m_dir / "m.log")
    try:
        wait_rows(m_dir / "history.sqlite3", 1, m)
        assert k.proc.wait(60) == -signal.SIGKILL                     # killed itself mid-board
        k = StationProcess(k_config, k_dir / "k2.log")                # started again
        wait_rows(k_dir / "history.sqlite3", 2, k)                    # interrupted row, then the board: skipped
        store.swap("line-k-bay")
        wait_rows(k_dir / "history.sqlite3", 3, k)
        store.swap("line-m-bay")
        wait_rows(m_dir / "history.sqlite3", 2, m)
        wait_for(lambda: len(_ledger(pg.url, "SELECT id FROM ledger_operations")) == 5, "every row in the ledger")
    finally:
        for st in (k, m):
            if st.proc.poll() is None:
                st.signal(signal.SIGTERM)
                assert st.wait() == 0, st.output()
    assert "list units.csv: 2 row(s) given back and 1 board(s) cut off while programming" in k.output()
    used, free = _used_rows_match_boards(pg.url)
    assert sorted(s for s, _ in used.values()) == ["interrupted", "pass", "pass", "pass"]
    assert sorted(list(used) + free) == list(range(1, 11))              # none lost
    k_rows = rows(k_dir / "history.sqlite3")
    assert [r["outcome"] for r in k_rows] == ["interrupted", "skip", "pass"]


def test_the_ledger_source_recovers_orphans_refuses_an_edited_list_and_says_when_used_up(tmp_path, pg):
    path = _units(tmp_path / "units.csv", 3)
    ulist = read_list(path, {"mac": MAC})
    a = RowAllocator(ulist, "st", tmp_path / "a.sqlite3", block=2, source=PostgresRowSource(pg.url))
    orphan = a.source.lease(ulist, "st", a.owner, 2)                  # granted, never recorded here
    b = RowAllocator(ulist, "st", tmp_path / "b.sqlite3", block=2, source=PostgresRowSource(pg.url))
    assert b.recovered["back"] == 0                                   # another database's: not b's to give back
    assert b.take().row == 3
    with pytest.raises(ListUsedUpError):
        b.take()
    a.close()
    a = RowAllocator(ulist, "st", tmp_path / "a.sqlite3", block=2, source=PostgresRowSource(pg.url))
    assert a.recovered["back"] == len(orphan.rows) == 2
    assert [a.take().row for _ in range(2)] == [1, 2]
    _units(path, 4)
    with pytest.raises(ProfileError, match="the list units.csv changed"):
        RowAllocator(read_list(path, {"mac": MAC}), "st", tmp_path / "c.sqlite3", source=PostgresRowSource(pg.url))
    pg.stop()
    with pytest.raises(SerialError, match="cannot"):
        RowAllocator(ulist, "st", tmp_path / "d.sqlite3", source=PostgresRowSource(pg.url))
