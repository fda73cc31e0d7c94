"""``piflash station install-service`` into a --root directory: files, idempotence, errors.

The live path (systemctl daemon-reload / enable --now on a running systemd) is exercised for
real in tests/station/test_station_systemd.py.
"""

from __future__ import annotations

import os

import pytest

from piflash.errors import ExitCode
from piflash.station.service import render_unit

EXE = "/opt/piflash/bin/piflash"
UNIT = "etc/systemd/system/piflash-station.service"
LINK = "etc/systemd/system/multi-user.target.wants/piflash-station.service"


@pytest.fixture
def root(tmp_path):
    """An image root holding a piflash executable at /opt/piflash/bin/piflash."""
    r = tmp_path / "root"
    exe = r / EXE.lstrip("/")
    exe.parent.mkdir(parents=True)
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    return r


@pytest.fixture
def config(tmp_path):
    path = tmp_path / "station.yaml"
    path.write_text("station: bay-1\nprofile: app\nprobes: any\n")
    return path


def install(cli, root, *args, check=0):
    return cli("station", "install-service", "--root", root, *args, check=check)


def test_install_writes_unit_config_and_link_then_changes_nothing(cli, root, config):
    out = install(cli, root, "--executable", EXE, "--config", config, "--enable").stdout
    unit = root / UNIT
    assert unit.read_text() == render_unit(EXE)
    assert f"ExecStart={EXE} station run --config /etc/piflash/station.yaml\n" in unit.read_text()
    assert oct(unit.stat().st_mode & 0o777) == "0o644"
    assert (root / "etc/piflash/station.yaml").read_bytes() == config.read_bytes()
    assert os.readlink(root / LINK) == "/etc/systemd/system/piflash-station.service"
    assert "no daemon-reload" in out and "next boot" in out
    assert "apt-get install procps" in out  # this root has no /bin/kill for ExecReload=

    before = {p: p.stat().st_mtime_ns for p in (unit, root / "etc/piflash/station.yaml")}
    again = install(cli, root, "--executable", EXE, "--config", config, "--enable").stdout
    assert "up to date" in again and "already enabled" in again, again
    assert not [line for line in again.splitlines() if line.startswith("write ")], again
    assert {p: p.stat().st_mtime_ns for p in before} == before


def test_a_changed_executable_rewrites_the_unit(cli, root):
    install(cli, root, "--executable", EXE)
    other = root / "usr/local/bin/piflash"
    other.parent.mkdir(parents=True)
    other.write_text("#!/bin/sh\n")
    other.chmod(0o755)
    out = install(cli, root, "--executable", "/usr/local/bin/piflash").stdout
    assert out.startswith("write ")
    assert "ExecStart=/usr/local/bin/piflash station run" in (root / UNIT).read_text()


def test_dry_run_changes_nothing(cli, root, config):
    out = install(cli, root, "--executable", EXE, "--config", config, "--enable",
                  "--dry-run").stdout
    assert "would write" in out and "would enable" in out
    assert not (root / "etc").exists()


def test_uninstall_removes_unit_and_link_keeps_config(cli, root, config):
    install(cli, root, "--executable", EXE, "--config", config, "--enable")
    out = install(cli, root, "--uninstall").stdout
    assert not (root / UNIT).exists() and not os.path.lexists(root / LINK)
    assert (root / "etc/piflash/station.yaml").exists()
    assert "kept" in out
    assert "not installed" in install(cli, root, "--uninstall").stdout


def test_executable_missing_inside_root(cli, root):
    proc = install(cli, root, "--executable", "/usr/bin/piflash", check=ExitCode.SERVICE)
    assert "is not an executable file" in proc.stderr and "--executable" in proc.stderr


@pytest.mark.parametrize("exe,why", [("bin/piflash", "absolute"),
                                     ("/opt/pi flash/bin/piflash", "characters systemd")])
def test_executable_path_refused(cli, root, exe, why):
    assert why in install(cli, root, "--executable", exe, check=ExitCode.SERVICE).stderr


@pytest.mark.parametrize("text,msg", [("profile: [app\n", "not valid YAML"),
                                      ("- a list\n", "YAML mapping")])
def test_bad_config_is_a_profile_error(cli, root, tmp_path, text, msg):
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    proc = install(cli, root, "--executable", EXE, "--config", bad, check=ExitCode.PROFILE)
    assert msg in proc.stderr and str(bad) in proc.stderr
    assert not (root / UNIT).exists()


def test_uninstall_takes_no_install_options(cli, root, config):
    install(cli, root, "--uninstall", "--config", config, check=ExitCode.USAGE)


def test_needs_root_on_the_real_system(monkeypatch, capsys):
    from piflash.errors import ServiceError
    from piflash.station import service

    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(ServiceError) as err:
        service.plan_install()
    assert "needs root" in err.value.message and "sudo" in err.value.hint
    assert service.plan_install(dry_run=True)  # anyone may preview


PASSWORD = "Sekr1tLine"


@pytest.mark.skipif(os.geteuid() != 0, reason="giving the config to root:plugdev needs root (CI runs it as root)")
@pytest.mark.parametrize("ledger", [f"postgresql://line:{PASSWORD}@db/ledger",
                                    f"'host=db dbname=ledger password={PASSWORD}'"])
def test_a_config_holding_a_password_is_0640_root_and_the_station_group(cli, root, tmp_path, ledger):
    """Issue 39: the ledger's password is readable by root and the station's group only."""
    (root / "etc").mkdir(parents=True)
    (root / "etc/group").write_text("root:x:0:\nplugdev:x:46:pi\n")
    config = tmp_path / "secret.yaml"
    config.write_text(f"station: bay-1\nprofile: app\nprobes: any\nledger: {ledger}\n")
    out = install(cli, root, "--executable", EXE, "--config", config).stdout
    installed = root / "etc/piflash/station.yaml"
    st = installed.stat()
    assert oct(st.st_mode & 0o777) == "0o640" and (st.st_uid, st.st_gid) == (0, 46), out
    assert "holds a password: mode 0640, owner root, group plugdev" in out and PASSWORD not in out
    assert "up to date" in install(cli, root, "--executable", EXE, "--config", config).stdout


def test_a_password_for_a_root_without_the_station_group_is_refused(cli, root, tmp_path):
    config = tmp_path / "secret.yaml"
    config.write_text(f"station: bay-1\nprofile: app\nprobes: any\nledger: postgresql://u:{PASSWORD}@db/l\n")
    proc = install(cli, root, "--executable", EXE, "--config", config, check=int(ExitCode.SERVICE))
    assert "has no group plugdev" in proc.stderr and PASSWORD not in proc.stderr + proc.stdout
    assert not (root / "etc/piflash/station.yaml").exists()


def test_a_station_on_the_pis_pins_gets_the_spi_and_gpio_drop_in(cli, root, tmp_path):
    """Issue 43: a config naming spidev:/gpio: probes installs piflash-station.service.d/pins.conf
    (SupplementaryGroups=spi gpio, DeviceAllow= spidev and gpiochip) beside the unit, only when
    the root has those groups (systemd would refuse the unit otherwise); uninstall removes it."""
    dropin = root / "etc/systemd/system/piflash-station.service.d/pins.conf"
    config = tmp_path / "pins.yaml"
    config.write_text('station: bay-1\nprofile: app\nprobes: ["spidev:0.0", "gpio:gpiochip0:swclk=5,swdio=6"]\n')
    (root / "etc").mkdir(parents=True)
    (root / "etc/group").write_text("root:x:0:\nplugdev:x:46:pi\nspi:x:999:pi\n")
    proc = install(cli, root, "--executable", EXE, "--config", config, check=int(ExitCode.SERVICE))
    assert "needs the group gpio" in proc.stderr and "setup permissions" in proc.stderr
    assert not dropin.exists() and not (root / UNIT).exists()

    (root / "etc/group").write_text("root:x:0:\nplugdev:x:46:pi\nspi:x:999:pi\ngpio:x:997:pi\n")
    out = install(cli, root, "--executable", EXE, "--config", config).stdout
    assert f"write {dropin}" in out
    text = dropin.read_text()
    assert "\nSupplementaryGroups=spi gpio\n" in text and "\nDeviceAllow=char-spidev rw\n" in text
    assert "\nDeviceAllow=char-gpiochip rw\n" in text and "[Service]" in text
    assert "up to date" in install(cli, root, "--executable", EXE, "--config", config).stdout

    install(cli, root, "--uninstall")
    assert not dropin.exists() and not dropin.parent.exists() and not (root / UNIT).exists()

    usb = tmp_path / "usb.yaml"
    usb.write_text("station: bay-1\nprofile: app\nprobes: any\n")
    install(cli, root, "--executable", EXE, "--config", usb)
    assert not dropin.parent.exists()
