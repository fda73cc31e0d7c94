"""`piflash doctor`'s checks on fake roots: the install record, the rules in effect, world-writable
rules left by other tools, the station unit, and the check list itself. The probe and group rows,
which need an unprivileged user, are in test_usbscan.py."""

from __future__ import annotations

import json
import shutil
import sys

import pytest
from support.usbfake import make_fake_system

from piflash.host import doctor
from piflash.probe import probetable


@pytest.fixture
def fake():
    f = make_fake_system()
    yield f
    shutil.rmtree(f.base)


def ctx_for(fake, prefix=None):
    return doctor.Context(sysroot=str(fake.sysroot), sysfs_root=str(fake.sysfs), dev_root=str(fake.dev),
                          prefix=str(prefix or fake.base / "prefix"))


def test_install_record(fake):
    prefix = fake.base / "prefix"
    prefix.mkdir()
    assert doctor.check_install(ctx_for(fake)).detail == \
        "not installed by scripts/install.sh (development install?)"
    record = {"profile": "minimal", "venv": str(prefix), "system": True,
              "installed_at": "2026-11-21T03:00:00+00:00", "wheelhouse": None}
    (prefix / "piflash-install.json").write_text(json.dumps(record))
    check = doctor.check_install(ctx_for(fake))
    assert check.status == "ok"
    assert check.detail == f"minimal profile, system (service) install in {prefix}, 2026-11-21T03:00:00+00:00"
    record.update(venv="/opt/piflash", system=False, wheelhouse="/media/wheels")
    (prefix / "piflash-install.json").write_text(json.dumps(record))
    check = doctor.check_install(ctx_for(fake))
    assert check.status == "warn" and "from wheelhouse /media/wheels" in check.detail
    assert f"this piflash runs from {prefix}" in check.detail and check.fix == "run /opt/piflash/bin/piflash instead"
    (prefix / "piflash-install.json").write_text("{not json")
    check = doctor.check_install(ctx_for(fake))
    assert check.status == "warn" and "unreadable" in check.detail


def test_rules_in_effect_current_outdated_and_world_writable(fake):
    (check,) = doctor.check_rules(ctx_for(fake))
    assert check.status == "warn" and "not installed" in check.detail and "setup permissions" in check.fix
    packaged = probetable.packaged_rules_path().read_text()
    lib = fake.sysroot / "usr/lib/udev/rules.d" / probetable.RULES_NAME
    lib.parent.mkdir(parents=True)
    lib.write_text(packaged)
    (check,) = doctor.check_rules(ctx_for(fake))
    assert check.status == "ok" and str(lib) in check.detail
    etc = fake.install_rules(packaged.replace('ATTRS{idVendor}=="30cc"', 'ATTRS{idVendor}=="30cd"'))
    (check,) = doctor.check_rules(ctx_for(fake))  # /etc overrides /usr/lib, and it is outdated
    assert check.status == "warn" and f"{etc} differs" in check.detail
    other = etc.parent / "99-stlink.rules"
    other.write_text('# MODE="0666" in a comment is fine\n'
                     'SUBSYSTEMS=="usb", ATTRS{idVendor}=="0483", ATTRS{idProduct}=="374b", MODE="0666"\n')
    rules, bad = doctor.check_rules(ctx_for(fake))
    assert bad.name == "world-writable rule" and str(other) in bad.detail and bad.fix == f"sudo rm {other}"


def test_station_unit(fake):
    assert doctor.check_station(ctx_for(fake)) is None  # not installed: no row
    unit = fake.sysroot / "etc/systemd/system" / doctor.STATION_UNIT
    unit.parent.mkdir(parents=True)
    unit.write_text("[Service]\nExecStart=/opt/piflash/bin/piflash station run\n")
    check = doctor.check_station(ctx_for(fake))
    assert check.status == "ok" and check.detail == f"{unit} installed (state not checked here)"


def test_optional_packages_cost_nothing_when_absent(monkeypatch, fake):
    monkeypatch.setattr(doctor, "OPTIONAL", doctor.OPTIONAL + (
        ("nothing-here", "piflash_no_such_module", "absent: costs nothing"),))
    rows = {c.name: c for c in doctor.check_optional(ctx_for(fake))}
    assert rows["nothing-here"].status == "ok" and rows["nothing-here"].detail == "absent: costs nothing"
    for name, _module, _ in doctor.OPTIONAL[:2]:
        assert rows[name].status == "ok"  # present or absent, never a failure
    assert "disasm" in doctor.OPTIONAL[0][2] and "--pack FILE still works" in doctor.OPTIONAL[1][2]


def test_python_row_names_the_environment(fake):
    rows = doctor.check_python(ctx_for(fake))
    assert rows[0].name == "Python environment" and sys.prefix in rows[0].detail
    assert ("venv" if sys.prefix != sys.base_prefix else "system Python") in rows[0].detail


def test_pyocd_on_path_from_another_environment(fake, monkeypatch):
    other = fake.base / "other-env/bin"
    other.mkdir(parents=True)
    (other / "pyocd").write_text("#!/bin/sh\n")
    (other / "pyocd").chmod(0o755)
    monkeypatch.setenv("PATH", f"{other}:/usr/bin:/bin")
    rows = {c.name: c for c in doctor.check_python(ctx_for(fake))}
    assert rows["pyocd on PATH"].status == "warn" and str(other / "pyocd") in rows["pyocd on PATH"].detail


def test_adding_a_check_is_one_function_and_a_crash_is_a_row(fake):
    def check_memory(ctx):
        return doctor.Check("memory", "ok", "400 MB available")

    def check_broken(ctx):
        raise RuntimeError("boom")

    results = doctor.run_checks(ctx_for(fake), doctor.CHECKS + [check_memory, check_broken])
    names = [c.name for c in results]
    assert names[-2:] == ["memory", "broken"]
    assert results[-1].status == "fail" and "RuntimeError: boom" in results[-1].detail
    ok, text = doctor.verdict(results)
    assert not ok and text == "1 problem blocks flashing: broken"
    assert doctor.verdict(results[:-1])[0] is True


def test_root_is_told_the_sudo_users_environment_differs(fake, monkeypatch):
    """`sudo piflash` runs root's Python, not the user's (pyOCD issues #267, #312)."""
    import os

    if os.geteuid() != 0:
        pytest.skip("checks what root sees")
    home = fake.base / "alice"
    (home / doctor.USER_VENV).mkdir(parents=True)
    monkeypatch.setenv("SUDO_USER", "alice")
    monkeypatch.setattr(doctor.pwd, "getpwnam", lambda name: type("pw", (), {"pw_dir": str(home)})())
    row = doctor.check_python(ctx_for(fake))[0]
    assert row.status == "warn" and "running as root via sudo from alice" in row.detail
    assert f"alice's own piflash is another environment, {home / doctor.USER_VENV}" in row.detail
    assert row.fix.startswith("run piflash as alice")


def test_probes_behind_one_transaction_translator(fake):
    """Two full-speed probes behind a single-TT hub are a warning naming the hub and the fix; a
    multi-TT hub is fine; a high-speed probe and a probe on a root port share no TT."""
    fake.add_device("1-1", 0x1a40, 0x0101, 1, 2, product="USB 2.0 Hub", speed="480",
                    device_class="09", device_protocol="01")
    fake.add_device("1-1.1", 0x2e8a, 0x0003, 1, 3, product="RP2 Boot", speed="12", interfaces=["", ""])
    fake.add_device("1-1.2", 0x2e8a, 0x000c, 1, 4, product="Debugprobe on Pico (CMSIS-DAP)", speed="12",
                    interfaces=["CMSIS-DAP v2 Interface"])
    fake.add_device("1-1.3", 0x1fc9, 0x0143, 1, 5, product="MCU-LINK (r0FF) CMSIS-DAP V3.128", speed="480",
                    interfaces=["MCU-LINK CMSIS-DAP V3.128"])
    fake.add_device("2-1", 0x2e8a, 0x0003, 2, 2, product="RP2 Boot", speed="12", interfaces=["", ""])
    rows = [c for c in doctor.check_probes(ctx_for(fake)) if c.name.startswith("hub")]
    assert len(rows) == 1
    (row,) = rows
    assert row.name == "hub 1-1" and row.status == "warn"
    assert "2 full-speed probes (1-1.1, 1-1.2)" in row.detail and "single transaction translator" in row.detail
    assert "bDeviceProtocol 2" in row.fix
    (fake.sysfs / "bus/usb/devices/1-1/bDeviceProtocol").write_text("02\n")
    (row,) = [c for c in doctor.check_probes(ctx_for(fake)) if c.name.startswith("hub")]
    assert row.status == "ok" and "a transaction translator per port" in row.detail
    # behind a second, full-speed hub the TT is still the high-speed hub's
    (fake.sysfs / "bus/usb/devices/1-1/bDeviceProtocol").write_text("01\n")
    fake.add_device("1-1.4", 0x05e3, 0x0608, 1, 6, product="Full-speed hub", speed="12", device_class="09")
    fake.add_device("1-1.4.1", 0x2e8a, 0x0003, 1, 7, product="RP2 Boot", speed="12", interfaces=["", ""])
    (row,) = [c for c in doctor.check_probes(ctx_for(fake)) if c.name.startswith("hub")]
    assert "3 full-speed probes (1-1.1, 1-1.2, 1-1.4.1)" in row.detail


def test_a_world_readable_config_holding_a_password_is_a_warning(fake, monkeypatch, tmp_path):
    """Issue 39: named with the chmod that fixes it, never with the password."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.chdir(tmp_path)
    etc = fake.sysroot / "etc/piflash"
    (etc / "profiles").mkdir(parents=True)
    station = etc / "station.yaml"
    station.write_text("station: a\nledger: 'host=db dbname=l password=Hunter2Hunter'\n")
    station.chmod(0o644)
    profile = tmp_path / "xdg/piflash/profiles/board.yml"
    profile.parent.mkdir(parents=True)
    profile.write_text("name: board\n# ledger: postgresql://u:NotReal@db/l\n")  # a comment: no row
    profile.chmod(0o644)
    rows = doctor.check_secrets(ctx_for(fake))
    assert [(r.status, r.detail) for r in rows] == [
        ("warn", f"{station} holds a password and is readable by every user (mode 0644)")]
    assert rows[0].fix == f"sudo chgrp plugdev {station} && sudo chmod 640 {station}"
    assert "Hunter2Hunter" not in json.dumps([r.to_dict() for r in rows])
    assert doctor.check_secrets in doctor.CHECKS
    station.chmod(0o640)
    assert doctor.check_secrets(ctx_for(fake)) == []
