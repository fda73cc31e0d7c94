"""The probe table and the udev rules generated from it.

The rules are checked three ways: the committed file is what the generator makes now, a strict
parser accepts every line, and every VID:PID the installed pyOCD recognises as a USB probe (read
from pyOCD's own modules, not copied) gets mode 0660, group plugdev and the uaccess tag on both
its usb and hidraw nodes when the rules are applied by tests/udevrules.py.
"""

from __future__ import annotations

import importlib.metadata
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.udevrules import RulesSyntaxError, evaluate, parse_rules, pin_device, usb_device

from piflash.probe import probetable

REPO = Path(__file__).resolve().parents[2]
PACKAGED = REPO / "piflash" / "data" / probetable.RULES_NAME

#: pyOCD's probe plugins (entry points of the pyocd distribution) and how this test reads
#: their USB IDs. A new plugin in a pyOCD release fails the test until it is looked at.
PYOCD_PLUGINS = {"cmsisdap", "stlink", "picoprobe", "jlink", "remote"}


def pyocd_probe_ids():
    """Every (vid, pid) the installed pyOCD's USB probe drivers match, read from its modules."""
    from pyocd.probe.cmsis_dap_probe import CMSISDAPProbe
    from pyocd.probe.picoprobe import FindPicoprobe
    from pyocd.probe.pydapaccess.interface import common
    from pyocd.probe.stlink.usb import STLinkUSBInterface

    ids = set(common.KNOWN_CMSIS_DAP_IDS)
    ids |= set(common.CMSIS_DAP_IDS_TO_FILTER_BY_USAGE_PAGE)
    ids.add(CMSISDAPProbe.DAPLINK_VIDPID)
    ids |= {(STLinkUSBInterface.USB_VID, pid) for pid in STLinkUSBInterface.USB_PID_EP_MAP}
    ids.add(tuple(FindPicoprobe.VID_PID_CLASS[:2]))
    # jlink: pyOCD reaches J-Link through SEGGER's library (pylink), no VID:PID in pyOCD;
    # remote: TCP. Both are in the table from the probe-rs/OpenOCD rule sets, checked below.
    return sorted(ids)


def test_pyocd_plugins_are_all_known():
    dist = importlib.metadata.distribution("pyocd")
    names = {ep.name for ep in dist.entry_points if ep.group == "pyocd.probe"}
    assert names == PYOCD_PLUGINS, (
        f"pyOCD {dist.version} has probe plugins {sorted(names - PYOCD_PLUGINS)} this test does not "
        "read USB IDs from (or lost {sorted(PYOCD_PLUGINS - names)}): update pyocd_probe_ids()")


def test_committed_rules_are_generated_from_the_table():
    assert PACKAGED.read_text() == probetable.render_rules(), \
        "run: python -m piflash.probe.probetable --write"
    link = REPO / "udev" / probetable.RULES_NAME
    assert link.resolve() == PACKAGED.resolve()
    proc = subprocess.run([sys.executable, "-m", "piflash.probe.probetable", "--check"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    printed = subprocess.run([sys.executable, "-m", "piflash.probe.probetable"], capture_output=True,
                             text=True, check=True).stdout
    assert printed == PACKAGED.read_text()


def test_no_world_writable_mode_anywhere():
    for folder in (REPO / "udev", REPO / "piflash" / "data"):
        for path in folder.rglob("*"):
            if path.is_file():
                assert "0666" not in path.read_text(errors="replace"), path


def test_rules_file_number_below_73():
    assert int(probetable.RULES_NAME.split("-", 1)[0]) < 73  # before 73-seat-late.rules


def test_strict_parser_accepts_the_rules():
    rules = parse_rules(PACKAGED.read_text())
    pairs = [(p.key, p.attr) for r in rules for p in r.pairs]
    assert ("ATTRS", "idVendor") in pairs and ("MODE", None) in pairs
    for rule in rules:
        for p in rule.pairs:
            if p.attr in ("idVendor", "idProduct"):
                assert re.fullmatch(r"[0-9a-f]{4}", p.value)


@pytest.mark.parametrize("line, complaint", [
    ('ATTRS{idVendor}=="0D28", MODE="0660"', "four lowercase hex"),
    ('ATTRS{idVendor}=="d28", MODE="0660"', "four lowercase hex"),
    ('ATTRS{idVendor}=="0d28" MODE="0660"', "expected ', KEY'"),
    ('ATTRS{idVendor}="0d28"', "cannot be assigned"),
    ('MODE=="0660"', "cannot be matched"),
    ('SUBSYSTEM=="usb", MODE="0666"', "world-writable"),
    ('SUBSYSTEM=="usb", MODE="rw"', "not an octal mode"),
    ('FOO=="bar"', "unknown key"),
    ('ATTRS=="x"', "needs {attribute}"),
    ('SUBSYSTEM=="usb", GOTO="nowhere"', "missing LABEL"),
    ('SUBSYSTEM=="usb",', "expected ', KEY'"),
    ("SUBSYSTEM=='usb'", "cannot parse"),
])
def test_strict_parser_rejects(line, complaint):
    with pytest.raises(RulesSyntaxError, match=re.escape(complaint)):
        parse_rules(line + "\n")


def test_every_pyocd_probe_is_covered_by_the_rules():
    rules = parse_rules(PACKAGED.read_text())
    ids = pyocd_probe_ids()
    assert len(ids) > 25  # the CMSIS-DAP list alone has 22 entries in pyOCD 0.46
    table = set(probetable.all_ids())
    for vid, pid in ids:
        assert (vid, pid) in table, f"{vid:04x}:{pid:04x} missing from piflash/probe/probetable.py"
        events = usb_device(vid, pid, product="Some Probe")
        for node in ("usb", "hidraw"):
            out = evaluate(rules, events[node])
            assert (out.mode, out.group, out.tags) == ("0660", "plugdev", ("uaccess",)), \
                (f"{vid:04x}:{pid:04x}", node, out)
        assert evaluate(rules, events["tty"]).env.get("ID_MM_DEVICE_IGNORE") == "1"
        assert evaluate(rules, events["usb_interface"]).mode is None


def test_every_table_entry_and_product_string_is_covered():
    from pyocd.probe.pydapaccess.interface.common import KNOWN_DEVICE_STRINGS

    rules = parse_rules(PACKAGED.read_text())
    for vid, pid in probetable.all_ids():
        out = evaluate(rules, usb_device(vid, pid)["usb"])
        assert out.mode == "0660" and out.group == "plugdev", f"{vid:04x}:{pid:04x}"
    assert {0x1366} <= {vid for vid, _ in probetable.all_ids()}  # J-Link, from OpenOCD's contrib/60-openocd.rules
    for key in KNOWN_DEVICE_STRINGS:  # pyOCD's generic CMSIS-DAP match
        by_product = usb_device(0x1234, 0x5678, product=f"My {key} probe")
        assert evaluate(rules, by_product["usb"]).mode == "0660", key
        assert evaluate(rules, by_product["hidraw"]).mode == "0660", key
        by_interface = usb_device(0x1234, 0x5678, product="Gadget", interface=f"{key} v1")
        assert evaluate(rules, by_interface["hidraw"]).mode == "0660", key


def test_unknown_devices_and_removal_are_left_alone():
    rules = parse_rules(PACKAGED.read_text())
    for node, event in usb_device(0x046d, 0xc52b, product="USB Receiver").items():
        out = evaluate(rules, event)
        assert out.mode is None and out.group is None and "ID_MM_DEVICE_IGNORE" not in out.env, node
    removal = usb_device(0x0d28, 0x0204)["usb"]
    removal.action = "remove"
    assert evaluate(rules, removal).mode is None


def test_lookup():
    assert probetable.lookup(0x0483, 0x374b).name == "ST-Link/V2-1"
    assert probetable.lookup(0x1366, 0x1020).name == "SEGGER J-Link"
    assert probetable.lookup(0x1366, 0x1030) is None
    assert probetable.lookup(0x1234, 0x5678, ["Gadget", "XYZ CMSIS-DAP"]) is probetable.GENERIC_CMSIS_DAP
    assert probetable.lookup(0x1234, 0x5678, ["Gadget", None]) is None


def _udevadm_has_verify():
    exe = shutil.which("udevadm")
    if not exe:
        return None, "udevadm is not installed here"
    proc = subprocess.run([exe, "verify", "--help"], capture_output=True, text=True)
    if proc.returncode != 0:
        version = subprocess.run([exe, "--version"], capture_output=True, text=True).stdout.strip()
        return None, f"udevadm {version} has no 'verify' (added in systemd 253)"
    return exe, ""


def test_udevadm_verify():
    exe, why = _udevadm_has_verify()
    if exe is None:
        pytest.skip(why)
    proc = subprocess.run([exe, "verify", "--resolve-names=never", str(PACKAGED)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_setup_modules_need_only_the_standard_library():
    """scripts/setup-probe-permissions.sh runs these with the system python3, piflash not installed."""
    code = ("import sys; sys.path.insert(0, sys.argv[1]); "
            "import piflash.probe.permissions, piflash.probe.usbscan, piflash.probe.probetable, piflash.host.doctor; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & "
            "{'click', 'rich', 'yaml', 'pyocd', 'usb', 'libusb_package'}))")
    proc = subprocess.run([sys.executable, "-I", "-c", code, str(REPO)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


@pytest.mark.parametrize("subsystem, kernel, group", [
    ("spidev", "spidev0.0", "spi"), ("spidev", "spidev1.2", "spi"),
    ("gpio", "gpiochip0", "gpio"), ("gpio", "gpiochip4", "gpio"),
    ("bcm2835-gpiomem", "gpiomem", "gpio"), ("rpi-gpiomem", "gpiomem0", "gpio"),
])
def test_pi_pin_nodes_get_pi_os_groups(subsystem, kernel, group):
    """Issue 43: the Pi's SPI and GPIO nodes get Raspberry Pi OS's groups (99-com.rules), mode
    0660, no uaccess tag and no probe mark; their removal is left alone."""
    rules = parse_rules(PACKAGED.read_text())
    out = evaluate(rules, pin_device(subsystem, kernel))
    assert (out.mode, out.group, out.tags) == ("0660", group, ())
    assert "PIFLASH_PROBE" not in out.env and "ID_MM_DEVICE_IGNORE" not in out.env
    removal = pin_device(subsystem, kernel)
    removal.action = "remove"
    assert evaluate(rules, removal).group is None
    assert probetable.PIN_GROUPS == ("spi", "gpio")


def test_other_gpio_and_spi_devices_are_left_alone():
    rules = parse_rules(PACKAGED.read_text())
    for subsystem, kernel in (("gpio", "gpio17"), ("spi_master", "spi0"), ("i2c-dev", "i2c-1"), ("tty", "ttyAMA0")):
        assert evaluate(rules, pin_device(subsystem, kernel)).mode is None, kernel
