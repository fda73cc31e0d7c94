"""Job bundles and the ledger on a real PostgreSQL (issue 40, items 3-5): a bundle's count limit
(``max_boards``) across the line, the last place given to one station only, and ``ledger report
--by bundle``. Keys made by ssh-keygen (tests/support/bundlekit.py); Debian's postgresql started in
a temporary folder (tests/support/pgserver.py)."""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path

import pytest
from support.bundlekit import allowed_signers, make_bundle, make_key, need_ssh_keygen, write_profile

from piflash.errors import BundleError, ExitCode

pytest.importorskip("unicorn")
pytest.importorskip("psycopg")


from piflash.sim import SimStore  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def kit(tmp_path, firmware_dir):
    need_ssh_keygen()
    key = make_key(tmp_path, "owner")
    signers = allowed_signers(tmp_path / "allowed_signers", ("owner@line", key, 'namespaces="piflash-bundle"'))
    profile = write_profile(tmp_path / "src", firmware_dir / "nrf52840" / "firmware.hex")
    return key, signers, profile


def test_count_limit_counts_passed_boards_across_the_line(cli, kit, tmp_path, pg, monkeypatch, firmware_dir):
    key, signers, profile = kit
    monkeypatch.delenv("PIFLASH_LEDGER", raising=False)
    store = SimStore()
    for name in ("a", "b", "c"):
        store.create(name, "nrf52840")
    job = make_bundle(cli, profile, tmp_path / "job.pfb", key=key, extra=("--max-boards", "2"))
    for name in ("a", "b"):
        cli("flash", job, "--allowed-signers", signers, "-u", f"sim:{name}", "-q", "--ledger", pg.url, check=0)
    before = store.read_flash("c")
    proc = cli("flash", job, "--allowed-signers", signers, "-u", "sim:c", "-q", "--ledger", pg.url,
               check=ExitCode.BUNDLE)
    assert "allows at most 2 boards across line widget: 2 passed" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    assert store.read_flash("c") == before  # nothing written
    from piflash.record.ledger import Ledger

    with Ledger(pg.url) as db:
        assert db.bundle_count("widget", hashlib.sha256(job.read_bytes()).hexdigest()) == (2, 0)
    # a new bundle (another SHA-256) has a count of its own
    more = make_bundle(cli, profile, tmp_path / "v2.pfb", version=2, key=key, extra=("--max-boards", "1"))
    cli("flash", more, "--allowed-signers", signers, "-u", "sim:c", "-q", "--ledger", pg.url, check=0)
    assert store.read_flash("c") != before

    # ledger report --by bundle: one group per bundle, and the boards flashed without one
    store.create("d", "nrf52840")
    cli("flash", firmware_dir / "nrf52840" / "firmware.hex", "-t", "nrf52840", "-u", "sim:d", "-q", "--ledger", pg.url, check=0)
    out = cli.json("ledger", "report", "--by", "bundle", "--ledger", pg.url)
    import fastjsonschema

    schema = json.loads((REPO / "docs" / "result.schema.json").read_text())
    fastjsonschema.compile(schema)(out)
    got = [(r["bundle_version"], r["bundle_sha256"], r["boards"], r["passed"]) for r in out["report"]]
    sha1, sha2 = (hashlib.sha256(p.read_bytes()).hexdigest() for p in (job, more))
    assert got == [(None, None, 1, 1), (1, sha1, 2, 2), (2, sha2, 1, 1)]
    assert all(len(r["stations"]) == 1 and r["stations"][0].startswith("one-off:") for r in out["report"])
    text = cli("ledger", "report", "--by", "bundle", "--ledger", pg.url, check=0).stdout
    groups = [g.splitlines() for g in text.split("\n\n")]
    assert [g[0].split(";")[0] for g in groups] == ["no bundle", f"bundle v1 {sha1}", f"bundle v2 {sha2}"], text
    assert [g[-2].split(",")[:2] for g in groups] == [["  1 boards", " 1 passed"], ["  2 boards", " 2 passed"],
                                                      ["  1 boards", " 1 passed"]], text
    assert max(len(line) for g in groups for line in g) <= 80, text
    csv = cli("ledger", "report", "--by", "bundle", "--csv", "--ledger", pg.url, check=0).stdout.splitlines()
    assert csv[0].startswith("bundle_sha256,bundle_version,stations,boards,passed") and len(csv) == 4


def test_the_last_place_goes_to_one_station_only(pg):
    """Eight stations (threads, each its own connection) race for three places: exactly three turns
    are granted, a failed board frees its place, a passed one keeps it, an expired turn frees it."""
    from piflash.record.ledger import Ledger

    sha = "ab" * 32
    granted, refused, start = [], [], threading.Barrier(8)

    def station(i):
        with Ledger(pg.url) as db:
            start.wait()
            try:
                granted.append((i, db.take_turn("line-x", sha, 4, 3, f"st{i}", f"uid{i}")))
            except BundleError as exc:
                refused.append(exc.message)

    threads = [threading.Thread(target=station, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(granted) == 3 and len(refused) == 5
    assert all("allows at most 3 boards across the line: 0 passed and 3 being flashed" in m for m in refused)
    with Ledger(pg.url) as db:
        assert db.bundle_count("line-x", sha) == (0, 3)
        (_, t0), (_, t1), (_, t2) = granted
        db.settle_turn(t0, True)
        db.settle_turn(t0, True)  # twice: counted once
        db.settle_turn(t1, False)  # its place is free again
        assert db.bundle_count("line-x", sha) == (1, 1)
        t3 = db.take_turn("line-x", sha, 4, 3, "st9", "uid9")
        with pytest.raises(BundleError, match="1 passed and 2 being flashed"):
            db.take_turn("line-x", sha, 4, 3, "st9", "uid10")
        db.settle_turn(t2, True)
        db.settle_turn(t3, True)
        with pytest.raises(BundleError, match="3 passed: refused"):
            db.take_turn("line-x", sha, 4, 3, "st9", "uid11")
        # a turn its station never settles (crashed) frees its place when it expires
        other = "cd" * 32
        db.take_turn("line-x", other, 5, 1, "st1", "u1", ttl=0.0)
        db.take_turn("line-x", other, 5, 1, "st2", "u2")
        assert db.bundle_count("line-x", other) == (0, 1)
