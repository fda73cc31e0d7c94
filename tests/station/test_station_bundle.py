"""A station flashing a signed job bundle (issue 40, items 2 and 5): real ``piflash station run``
subprocesses, keys made by ssh-keygen, simulated nRF52840 boards. The bundle is verified once per
load (counted through a logging ``ssh-keygen`` wrapper on PATH), every board's row carries the
bundle, and a refused bundle, or a plain profile where ``allowed_signers:`` is set, is exit 28
at ``station check`` and at start with the boards' flash byte-exact."""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
from pathlib import Path

import pytest
from support.bundlekit import allowed_signers, make_bundle, make_key, need_ssh_keygen, write_profile

from piflash.errors import ExitCode

pytest.importorskip("unicorn")

from support.stationkit import StationProcess, rows, wait_rows  # noqa: E402

from piflash.sim import SimStore  # noqa: E402

BOARDS = ("bay1", "bay2")


@pytest.fixture
def kit(tmp_path, firmware_dir, cli):
    need_ssh_keygen()
    store = SimStore()
    for name in BOARDS:
        store.create(name, "nrf52840")
    key = make_key(tmp_path, "owner")
    signers = allowed_signers(tmp_path / "allowed_signers", ("owner@line", key, 'namespaces="piflash-bundle"'))
    profile = write_profile(tmp_path / "src", firmware_dir / "nrf52840" / "firmware.hex")
    return store, key, signers, profile


def config(tmp_path: Path, *lines: str, name: str = "station.yaml") -> Path:
    path = tmp_path / name
    probes = ", ".join(f'"sim:{b}"' for b in BOARDS)
    path.write_text("\n".join(["station: test-line", f"probes: [{probes}]", "poll_interval: 0.1",
                               f"history: {os.environ['PIFLASH_HISTORY']}", *lines]) + "\n")
    return path


def counting_ssh_keygen(tmp_path: Path, monkeypatch) -> Path:
    """Put a ``ssh-keygen`` on PATH that logs each ``-Y verify`` and runs the real one."""
    real = shutil.which("ssh-keygen")
    bindir, log = tmp_path / "bin", tmp_path / "verify.log"
    bindir.mkdir()
    wrapper = bindir / "ssh-keygen"
    wrapper.write_text(f'#!/bin/sh\ncase " $* " in *" -Y verify "*) echo verify >> "{log}";; esac\n'
                       f'exec "{real}" "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    return log


def test_station_flashes_a_signed_bundle_verified_once_per_load(tmp_path, kit, cli, monkeypatch, firmware_dir):
    store, key, signers, profile = kit
    job = make_bundle(cli, profile, tmp_path / "job.pfb", version=2, key=key)
    log = counting_ssh_keygen(tmp_path, monkeypatch)
    cfg = config(tmp_path, f"bundle: {job}", f"allowed_signers: {signers}")
    assert "line widget version 2, signed by owner@line" in cli("station", "check", "--config", cfg, check=0).stdout
    log.unlink()
    station = StationProcess(cfg, tmp_path / "station.log")
    try:
        got = wait_rows(Path(os.environ["PIFLASH_HISTORY"]), 2, station)
        assert log.read_text().count("verify") == 1                      # one load, two boards
        station.signal(signal.SIGHUP)
        station.wait_output("config reloaded")
        assert log.read_text().count("verify") == 2                      # a reload is a load
    finally:
        assert station.stop() == 0
    digest = hashlib.sha256(job.read_bytes()).hexdigest()
    assert {(r["bundle_sha256"], r["bundle_version"], r["outcome"]) for r in got} == {(digest, 2, "pass")}
    from conftest import expected_flash

    for name in BOARDS:
        flash = store.read_flash(name)
        assert flash == expected_flash(firmware_dir / "nrf52840" / "firmware.hex", len(flash))


def test_station_refuses_unsigned_and_foreign_bundles_and_plain_profiles(tmp_path, kit, cli):
    store, key, signers, profile = kit
    before = {name: store.read_flash(name) for name in BOARDS}
    stranger = make_key(tmp_path, "stranger")
    foreign = make_bundle(cli, profile, tmp_path / "foreign.pfb", key=stranger)
    unsigned = make_bundle(cli, profile, tmp_path / "unsigned.pfb")
    cases = [
        ((f"bundle: {foreign}", f"allowed_signers: {signers}"), "not in the allowed signers"),
        ((f"bundle: {unsigned}", f"allowed_signers: {signers}"), "unsigned (no manifest.json.sig)"),
        ((f"bundle: {foreign}",), "only taken verified"),
        ((f"profile: {profile}", f"allowed_signers: {signers}"), "is unsigned firmware: refused"),
    ]
    for i, (lines, why) in enumerate(cases):
        cfg = config(tmp_path, *lines, name=f"station-{i}.yaml")
        checked = cli("station", "check", "--config", cfg, check=ExitCode.BUNDLE)
        assert why in checked.stderr, checked.stderr
        station = StationProcess(cfg, tmp_path / f"station-{i}.log")
        assert station.wait() == ExitCode.BUNDLE, station.output()
        assert why in station.output()
    assert {name: store.read_flash(name) for name in BOARDS} == before
    assert rows(Path(os.environ["PIFLASH_HISTORY"]), with_open=True) == []
