"""Signed job bundles through the real CLI on a simulated board (issue 40, items 1, 2, 5): keys made
by ssh-keygen; every refusal is exit 28 naming why, before any probe is opened, and leaves the
board's flash byte-exact and the history without a row."""

from __future__ import annotations

import io
import json
import os
import sqlite3
import tarfile
from pathlib import Path

import pytest
from support.bundlekit import allowed_signers, make_bundle, make_key, need_ssh_keygen, write_profile

from piflash.errors import ExitCode

pytest.importorskip("unicorn")

from piflash.sim import SimStore  # noqa: E402

BOARD = "bay"


@pytest.fixture
def kit(tmp_path, firmware_dir, cli):
    need_ssh_keygen()
    store = SimStore()
    store.create(BOARD, "nrf52840")
    key = make_key(tmp_path, "owner")
    signers = allowed_signers(tmp_path / "allowed_signers", ("owner@line", key, 'namespaces="piflash-bundle"'))
    profile = write_profile(tmp_path / "src", firmware_dir / "nrf52840" / "firmware.hex")
    return store, key, signers, profile


def history_rows():
    path = Path(os.environ["PIFLASH_HISTORY"])
    if not path.exists():
        return []
    with sqlite3.connect(path) as db:
        db.row_factory = sqlite3.Row
        return [dict(r) for r in db.execute("SELECT * FROM operations ORDER BY id")]


def refused(cli, store, job, signers, why, *extra):
    """``flash job`` must be exit 28 naming ``why``, the board's flash byte-exact, no history row."""
    before, rows = store.read_flash(BOARD), len(history_rows())
    proc = cli("flash", job, "--allowed-signers", signers, "-u", f"sim:{BOARD}", "-q", *extra,
               check=ExitCode.BUNDLE)
    assert why in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    assert store.read_flash(BOARD) == before
    assert len(history_rows()) == rows
    return proc


def rewrite(job: Path, out: Path, change) -> Path:
    """A copy of the bundle ``job`` with its members passed through ``change(dict) -> dict``."""
    with tarfile.open(job) as tar:
        members = {m.name: tar.extractfile(m).read() for m in tar.getmembers()}
    members = change(members)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    out.write_bytes(buf.getvalue())
    return out


def test_signed_bundle_flashes_and_is_recorded(cli, kit, tmp_path, firmware_dir):
    store, key, signers, profile = kit
    job = make_bundle(cli, profile, tmp_path / "job.pfb", version=3, key=key)
    out = cli.json("flash", job, "--allowed-signers", signers, "-u", f"sim:{BOARD}", "-q")
    import hashlib

    digest = hashlib.sha256(job.read_bytes()).hexdigest()
    assert out["ok"] and (out["bundle_sha256"], out["bundle_version"]) == (digest, 3)
    from conftest import expected_flash

    flash = store.read_flash(BOARD)
    assert flash == expected_flash(firmware_dir / "nrf52840" / "firmware.hex", len(flash))
    (row,) = history_rows()
    assert (row["bundle_sha256"], row["bundle_version"], row["outcome"]) == (digest, 3, "pass")
    # a plain firmware file records no bundle
    plain = cli.json("flash", firmware_dir / "nrf52840" / "firmware.hex", "-t", "nrf52840", "-u", f"sim:{BOARD}",
                     "-q")
    assert (plain["bundle_sha256"], plain["bundle_version"]) == (None, None)
    assert history_rows()[-1]["bundle_sha256"] is None
    assert cli("history", "verify-chain", check=0).returncode == 0


def test_unsigned_is_refused(cli, kit, tmp_path):
    store, key, signers, profile = kit
    job = make_bundle(cli, profile, tmp_path / "job.pfb")
    refused(cli, store, job, signers, "unsigned (no manifest.json.sig)")
    # and without --allowed-signers nothing is taken, signed or not
    make_bundle(cli, profile, job, key=key)
    proc = cli("flash", job, "-u", f"sim:{BOARD}", check=ExitCode.BUNDLE)
    assert "--allowed-signers" in proc.stderr


def test_foreign_signer_is_refused(cli, kit, tmp_path):
    store, key, signers, profile = kit
    stranger = make_key(tmp_path, "stranger")
    job = make_bundle(cli, profile, tmp_path / "job.pfb", key=stranger)
    refused(cli, store, job, signers, "signed by a key that is not in the allowed signers")


def test_key_allowed_only_for_another_namespace_is_refused(cli, kit, tmp_path):
    store, key, _, profile = kit
    git_only = allowed_signers(tmp_path / "git_signers", ("owner@line", key, 'namespaces="git"'))
    job = make_bundle(cli, profile, tmp_path / "job.pfb", key=key)
    refused(cli, store, job, git_only, 'key is not permitted for use in signature namespace "piflash-bundle"')


@pytest.mark.parametrize("change, why", [
    (lambda m: {**m, "firmware.hex": m["firmware.hex"].replace(b":10", b":1F", 1)}, "changed after signing: firmware.hex"),
    (lambda m: {**m, "manifest.json": m["manifest.json"].replace(b'"version": 1', b'"version": 9')},
     "signature does not verify"),
    (lambda m: {**m, "extra.bin": b"\0" * 16}, "extra.bin is not in the signed manifest"),
    (lambda m: {k: v for k, v in m.items() if k != "firmware.hex"}, "firmware.hex, in the signed manifest, is missing"),
])
def test_changed_after_signing_is_refused(cli, kit, tmp_path, change, why):
    store, key, signers, profile = kit
    job = make_bundle(cli, profile, tmp_path / "job.pfb", key=key)
    refused(cli, store, rewrite(job, tmp_path / "changed.pfb", change), signers, why)


def test_another_target_is_refused(cli, kit, tmp_path):
    store, key, signers, profile = kit
    job = make_bundle(cli, profile, tmp_path / "job.pfb", key=key)
    refused(cli, store, job, signers, "the bundle is for target nrf52840, not stm32f103rc", "-t", "stm32f103rc")


def test_rollback_is_refused(cli, kit, tmp_path):
    store, key, signers, profile = kit
    new = make_bundle(cli, profile, tmp_path / "v5.pfb", version=5, key=key)
    old = make_bundle(cli, profile, tmp_path / "v4.pfb", version=4, key=key)
    cli("flash", new, "--allowed-signers", signers, "-u", f"sim:{BOARD}", "-q", check=0)
    refused(cli, store, old, signers, "version 4 of line widget is older than version 5")
    # verify reports it too, without accepting anything
    assert "older than version 5" in cli("bundle", "verify", old, "--allowed-signers", signers,
                                         check=ExitCode.BUNDLE).stderr
    # the same version again is accepted
    cli("flash", new, "--allowed-signers", signers, "-u", f"sim:{BOARD}", "-q", check=0)


def test_count_limit_without_ledger_is_refused(cli, kit, tmp_path, monkeypatch):
    store, key, signers, profile = kit
    monkeypatch.delenv("PIFLASH_LEDGER", raising=False)
    job = make_bundle(cli, profile, tmp_path / "job.pfb", key=key, extra=("--max-boards", "10"))
    refused(cli, store, job, signers, "at most 10 boards across line widget and there is no ledger")


@pytest.mark.parametrize("name, kind, why", [
    ("/etc/evil", tarfile.REGTYPE, "an absolute path"),
    ("../evil", tarfile.REGTYPE, "climbs out with '..'"),
    ("link", tarfile.SYMTYPE, "a symbolic link"),
    ("hard", tarfile.LNKTYPE, "a hard link"),
    ("dev", tarfile.CHRTYPE, "a character device"),
    ("manifest.json", tarfile.REGTYPE, "appears twice"),
])
def test_hostile_archive_is_refused(cli, kit, tmp_path, name, kind, why):
    store, key, signers, profile = kit
    job = make_bundle(cli, profile, tmp_path / "job.pfb", key=key)
    raw = job.read_bytes()
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, "/etc/passwd" if kind in (tarfile.SYMTYPE, tarfile.LNKTYPE) else ""
    info.size = 4 if kind == tarfile.REGTYPE else 0
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        with tarfile.open(fileobj=io.BytesIO(raw)) as src:
            for m in src.getmembers():
                tar.addfile(m, src.extractfile(m))
        tar.addfile(info, io.BytesIO(b"evil") if kind == tarfile.REGTYPE else None)
    bad = tmp_path / "bad.pfb"
    bad.write_bytes(buf.getvalue())
    refused(cli, store, bad, signers, why)
    assert not Path("/etc/evil-piflash-test").exists()


def test_not_a_tar_and_show(cli, kit, tmp_path):
    store, key, signers, profile = kit
    junk = tmp_path / "junk.pfb"
    junk.write_bytes(os.urandom(3000))
    refused(cli, store, junk, signers, "not a readable tar archive")
    job = make_bundle(cli, profile, tmp_path / "job.pfb", version=7, key=key)
    shown = json.loads(cli("bundle", "show", job, "--json", check=0).stdout)
    assert (shown["line"], shown["bundle_version"], shown["signed"], shown["target"]) == ("widget", 7, True, "nrf52840")
    assert [f["path"] for f in shown["files"]] == ["board.yaml", "firmware.hex"]
    assert "BEGIN OPENSSH PRIVATE KEY" not in cli("bundle", "sign", job, "-k", key, check=0).stdout


def test_passphrase_key_without_terminal_fails_at_once(cli, kit, tmp_path):
    store, key, signers, profile = kit
    locked = make_key(tmp_path, "locked", passphrase="correct horse")
    job = make_bundle(cli, profile, tmp_path / "job.pfb")
    proc = cli("bundle", "sign", job, "-k", locked, check=ExitCode.BUNDLE, timeout=60)
    assert "could not sign" in proc.stderr and "correct horse" not in proc.stderr + proc.stdout
