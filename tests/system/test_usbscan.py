"""Probes pyOCD cannot open: the USB scan, `piflash probes`, `piflash doctor` and the
connect path, on fake sysfs and /dev trees, run as an unprivileged user (setpriv) so the
kernel's own access check decides.

The bench: an ST-Link whose node is root:plugdev 0660 (openable by plugdev members), a
DAPLink whose node is root:root 0664 (no rule applied: nobody but root may write it), an
unknown USB device (a mouse receiver) and a root hub.
"""

from __future__ import annotations

import json
import os
import shutil

import pytest
from support.usbfake import DAPLINK_SERIAL, NOBODY, STLINK_SERIAL, make_bench, make_fake_system, plugdev_gid

from piflash.errors import ExitCode
from piflash.probe import usbscan

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"),
                                reason="needs root and setpriv (util-linux) to act as another user")



@pytest.fixture
def bench():
    fake = make_bench()
    yield fake
    shutil.rmtree(fake.base)


def test_scan_as_root_sees_probes_only(bench):
    found = usbscan.scan(str(bench.sysfs), str(bench.dev), str(bench.sysroot))
    assert [(p.vid_pid, p.name, p.serial) for p in found] == [
        ("0483:374b", "ST-Link/V2-1", STLINK_SERIAL),
        ("0d28:0204", "Arm DAPLink (micro:bit, Mbed boards)", DAPLINK_SERIAL)]
    assert all(p.accessible for p in found)  # root may open anything
    assert found[1].node == str(bench.dev / "bus/usb/001/003")


def test_generic_cmsis_dap_by_interface_string_and_missing_node():
    fake = make_fake_system()
    try:
        fake.add_device("2-1", 0x1234, 0x5678, 2, 7, product="Gadget", interfaces=["XYZ CMSIS-DAP v2"],
                        mode=None)
        (p,) = usbscan.scan(str(fake.sysfs), str(fake.dev), str(fake.sysroot))
        assert p.name.startswith("CMSIS-DAP probe") and not p.accessible
        assert "does not exist" in p.reason
    finally:
        shutil.rmtree(fake.base)


def test_probes_lists_the_probe_it_cannot_open(bench):
    proc = bench.piflash("probes", "--json", groups=[plugdev_gid()])
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)["probes"]
    assert len(rows) == 1, rows  # the ST-Link is openable (pyOCD sees no fake device); the mouse is no probe
    (row,) = rows
    assert row["accessible"] is False and row["probe_id"] == DAPLINK_SERIAL
    assert row["vid_pid"] == "0d28:0204" and row["node"].endswith("bus/usb/001/003")
    assert "root:root mode 0664" in row["reason"] and "no udev rule" in row["reason"]
    assert "setup permissions --user nobody" in row["fix"]

    text = bench.piflash("probes", groups=[plugdev_gid()])
    assert text.returncode == 0
    assert f"{DAPLINK_SERIAL}" in text.stdout and "[cannot open]" in text.stdout
    assert "    reason: " in text.stdout and "    fix: sudo " in text.stdout, text.stdout
    assert STLINK_SERIAL not in text.stdout and "Receiver" not in text.stdout


def test_rules_installed_but_not_applied(bench):
    bench.install_rules("# piflash rules\n")
    proc = bench.piflash("probes", "--json", groups=[plugdev_gid()])
    (row,) = json.loads(proc.stdout)["probes"]
    assert "rules are installed" in row["reason"] and "replug" in row["fix"]


def test_not_in_plugdev(bench):
    rows = json.loads(bench.piflash("probes", "--json").stdout)["probes"]  # no supplementary groups
    by_id = {r["vid_pid"]: r for r in rows}
    assert set(by_id) == {"0483:374b", "0d28:0204"}
    st = by_id["0483:374b"]
    assert "nobody is not in group plugdev" in st["reason"] and "root:plugdev mode 0660" in st["reason"]
    assert "setup permissions --user nobody" in st["fix"] and "log out" in st["fix"]


def test_another_rule_chose_another_group(bench):
    bench.add_device("1-4", 0x2e8a, 0x000c, 1, 5, product="Debugprobe on Pico (CMSIS-DAP)", group=20,
                     mode=0o660)  # e.g. a serial-port rule that sets dialout
    rows = json.loads(bench.piflash("probes", "--json", groups=[plugdev_gid()]).stdout)["probes"]
    pico = next(r for r in rows if r["vid_pid"] == "2e8a:000c")
    assert "root:dialout mode 0660 and nobody is not in group dialout (a udev rule other than" in pico["reason"]
    assert pico["fix"].startswith("sudo gpasswd --add nobody dialout")


def test_added_to_plugdev_but_not_logged_in_again(bench):
    bench.set_plugdev_members(["alice", "nobody"])
    rows = json.loads(bench.piflash("probes", "--json").stdout)["probes"]
    st = next(r for r in rows if r["vid_pid"] == "0483:374b")
    assert "added to plugdev in /etc/group, but this session started before that" in st["reason"]
    assert st["fix"].startswith("log out and back in")


def _checks(proc):
    data = json.loads(proc.stdout)
    return data, {c["name"]: c for c in data["checks"]}


def test_doctor_fails_on_a_probe_it_cannot_open(bench):
    proc = bench.piflash("doctor", "--json", groups=[plugdev_gid()])
    assert proc.returncode == ExitCode.DOCTOR, proc.stderr
    data, checks = _checks(proc)
    assert data["ok"] is False
    assert checks["probe 0483:374b"]["status"] == "ok"
    dap = checks["probe 0d28:0204"]
    assert dap["status"] == "fail" and "no udev rule" in dap["detail"] and "setup permissions" in dap["fix"]
    assert not any("Receiver" in c["detail"] for c in data["checks"])
    assert checks["plugdev group"]["status"] == "ok"
    assert checks["udev rules"]["status"] == "warn"
    assert checks["Python environment"]["status"] == "ok" and "running as nobody" in \
        checks["Python environment"]["detail"]
    assert "1 problem blocks flashing" in data["verdict"] and "probe 0d28:0204" in data["verdict"]

    table = bench.piflash("doctor", groups=[plugdev_gid()])
    assert table.returncode == ExitCode.DOCTOR
    lines = table.stdout.splitlines()
    assert lines[0].split() == ["Check", "Status", "Detail"]
    assert any(line.startswith("probe 0d28:0204") and " FAIL " in line for line in lines)
    assert any(line.startswith("probe 0483:374b") and " ok " in line for line in lines)
    fixes = [line for line in lines if line.startswith("fix ")]
    assert len(fixes) == 1  # the rules row and the probe row share one fix, printed once
    assert fixes[0].startswith("fix udev rules, probe 0d28:0204: sudo ")
    assert fixes[0].endswith("setup permissions --user nobody, then log out and back in")
    assert lines[-1].startswith("NOT READY: 1 problem blocks flashing")


def test_doctor_new_member_must_log_in_again(bench):
    bench.set_plugdev_members(["nobody"])
    data, checks = _checks(bench.piflash("doctor", "--json"))
    assert checks["plugdev group"]["status"] == "warn"
    assert "this session started before that" in checks["plugdev group"]["detail"]
    assert checks["probe 0483:374b"]["status"] == "fail"


def test_doctor_passes_when_every_probe_opens(bench):
    shutil.rmtree(bench.sysfs / "bus/usb/devices/1-2")  # unplug the DAPLink
    bench.install_rules((usbscan.probetable.packaged_rules_path()).read_text())
    proc = bench.piflash("doctor", "--json", groups=[plugdev_gid()])
    assert proc.returncode == 0, proc.stdout
    data, checks = _checks(proc)
    assert data["ok"] is True and checks["udev rules"]["status"] == "ok"
    assert [c["status"] for c in data["checks"]].count("fail") == 0


@pytest.mark.parametrize("probe_arg, code", [
    ((), ExitCode.PERMISSION),                        # the pyOCD #1719 trap: not "no probe"
    (("-u", DAPLINK_SERIAL), ExitCode.PERMISSION),
    (("-u", DAPLINK_SERIAL[:10].lower() + "*"), ExitCode.PERMISSION),   # a prefix written as one
    (("-u", DAPLINK_SERIAL[:10]), ExitCode.NO_PROBE),                 # a part of a serial names nothing
    (("-u", "nosuchprobe"), ExitCode.NO_PROBE),
])
def test_connect_says_permission_not_no_probe(bench, probe_arg, code):
    proc = bench.piflash("info", "-t", "nrf52840", *probe_arg, groups=[plugdev_gid()])
    assert proc.returncode == code, proc.stderr
    if code == ExitCode.PERMISSION:
        assert "Arm DAPLink" in proc.stderr and "may not be opened" in proc.stderr
        assert "hint: sudo " in proc.stderr and "setup permissions --user nobody" in proc.stderr


def test_connect_without_blocked_probes_is_still_no_probe(bench):
    shutil.rmtree(bench.sysfs / "bus/usb/devices/1-2")
    proc = bench.piflash("info", "-t", "nrf52840", groups=[plugdev_gid()])
    assert proc.returncode == ExitCode.NO_PROBE, proc.stderr
    assert "piflash doctor" in proc.stderr


def test_fake_tree_is_really_unreadable_for_nobody(bench):
    """The premise of these tests: as nobody without plugdev the kernel refuses the ST-Link node."""
    import subprocess

    node = bench.dev / "bus/usb/001/002"
    refused = subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
                              "sh", "-c", f"echo x >> {node}"], capture_output=True)
    allowed = subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}",
                              f"--groups={plugdev_gid()}", "sh", "-c", f"echo x >> {node}"],
                             capture_output=True)
    assert refused.returncode != 0 and allowed.returncode == 0
