"""Test helpers: fake sysfs, /dev and /etc trees for the USB scan, and running piflash as
an unprivileged user so the kernel's own permission check decides (tests run as root in CI,
where ``os.access`` always succeeds).

The trees live in one world-readable temporary directory (pytest's ``tmp_path`` is
private to root), laid out as the real ones are:

    sys/bus/usb/devices/1-1/{idVendor,idProduct,busnum,devnum,product,manufacturer,serial}
    sys/bus/usb/devices/1-1/1-1:1.0/interface
    dev/bus/usb/001/002        (a regular file carrying the node's owner, group and mode)
    root/etc/group             (what the explanation reads for group names and members)

Owners (nobody's home, a node's owner and group) are only set when the tests run as root; a
normal user cannot give files away, and the tests that depend on owners (running piflash as
nobody) need root anyway and skip without it (:data:`AS_ROOT`, :func:`need_root`).
"""

from __future__ import annotations

import grp
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from support import unprivileged

NOBODY = unprivileged.NOBODY
#: The tests run as root: files can be given to other users and piflash run as nobody.
AS_ROOT = os.geteuid() == 0


def need_root(why: str = "to run piflash as another user and give fake /dev nodes their owners") -> None:
    """Skip the calling test unless it runs as root (with setpriv), saying why."""
    import pytest

    if not AS_ROOT or not shutil.which("setpriv"):
        pytest.skip(f"needs root and setpriv (util-linux) {why}")


def _chown(path: Path, uid: int, gid: int) -> None:
    """``os.chown`` as root; as a normal user the file stays this user's (see the module doc)."""
    if AS_ROOT:
        os.chown(path, uid, gid)


def plugdev_gid() -> int:
    """The host's plugdev gid (the fake /etc/group uses the same number)."""
    try:
        return grp.getgrnam("plugdev").gr_gid
    except KeyError:
        return 46  # Debian's base-passwd number


class FakeSystem:
    """Fake ``/sys``, ``/dev`` and ``/etc`` trees under ``base`` (a world-readable directory)."""

    def __init__(self, base: Path, plugdev_members: Sequence[str] = ()):
        self.base = base
        self.sysfs = base / "sys"
        self.dev = base / "dev"
        self.sysroot = base / "root"
        self.home = base / "home"
        for d in (self.sysfs / "bus/usb/devices", self.dev / "bus/usb", self.sysroot / "etc", self.home):
            d.mkdir(parents=True, exist_ok=True)
        _chown(self.home, NOBODY, NOBODY)
        self.set_plugdev_members(plugdev_members)
        # Root hubs are USB devices too; they must never be taken for probes.
        self.add_device("usb1", 0x1d6b, 0x0002, 1, 1, product="xHCI Host Controller")

    def set_plugdev_members(self, members: Sequence[str]) -> None:
        (self.sysroot / "etc/group").write_text(
            "root:x:0:\n"
            "dialout:x:20:\n"
            f"plugdev:x:{plugdev_gid()}:{','.join(members)}\n"
            f"nogroup:x:{NOBODY}:\n")

    def add_device(self, name: str, vid: int, pid: int, busnum: int, devnum: int,
                   product: Optional[str] = None, manufacturer: Optional[str] = None,
                   serial: Optional[str] = None, interfaces: Sequence[str] = (),
                   owner: int = 0, group: int = 0, mode: Optional[int] = 0o664,
                   speed: Optional[str] = None, device_class: Optional[str] = None,
                   device_protocol: Optional[str] = None) -> Path:
        """Add a USB device; ``mode=None`` leaves its /dev node out. ``speed`` (Mbit/s),
        ``device_class`` and ``device_protocol`` (two hex digits, as sysfs shows them: "09" a
        hub, "01"/"02" one TT or a TT per port) go to sysfs when given. Returns the node path."""
        d = self.sysfs / "bus/usb/devices" / name
        d.mkdir(parents=True)
        attrs = {"idVendor": f"{vid:04x}", "idProduct": f"{pid:04x}", "busnum": str(busnum),
                 "devnum": str(devnum), "product": product, "manufacturer": manufacturer,
                 "serial": serial, "speed": speed, "bDeviceClass": device_class,
                 "bDeviceProtocol": device_protocol}
        for key, value in attrs.items():
            if value is not None:
                (d / key).write_text(value + "\n")
        for i, text in enumerate(interfaces):
            intf = d / f"{name}:1.{i}"
            intf.mkdir()
            (intf / "interface").write_text(text + "\n")
            (intf / "bInterfaceNumber").write_text(f"{i:02x}\n")
            # the kernel lists interfaces beside devices too
            (self.sysfs / "bus/usb/devices" / intf.name).symlink_to(intf)
        node = self.dev / "bus/usb" / f"{busnum:03d}" / f"{devnum:03d}"
        if mode is not None:
            node.parent.mkdir(parents=True, exist_ok=True)
            node.write_bytes(b"")
            _chown(node, owner, group)
            os.chmod(node, mode)
        return node

    def install_rules(self, text: str) -> Path:
        path = self.sysroot / "etc/udev/rules.d/60-piflash-probes.rules"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return path

    def env(self, **extra: str) -> Dict[str, str]:
        """The environment that points piflash at these trees (and at an empty simulator)."""
        env = dict(os.environ, PIFLASH_SYSFS_ROOT=str(self.sysfs), PIFLASH_DEV_ROOT=str(self.dev),
                   PIFLASH_SYSROOT=str(self.sysroot), HOME=str(self.home),
                   PIFLASH_SIM_DIR=str(self.home / "sim"),
                   PIFLASH_PROFILE_PATH=str(self.home / "profiles"), PYTHONDONTWRITEBYTECODE="1")
        env.update(extra)
        return env

    def piflash(self, *args: str, uid: Optional[int] = NOBODY, groups: Optional[List[int]] = None,
                timeout: float = 120) -> subprocess.CompletedProcess:
        """Run ``python -m piflash ARGS`` as ``uid`` (gid nogroup) with exactly ``groups`` as
        supplementary groups (none when empty or None); ``uid=None`` runs as this process.
        An unprivileged run uses the world-readable copy of :mod:`unprivileged`."""
        env = self.env()
        cmd = [sys.executable, "-m", "piflash", *map(str, args)]
        if uid is not None:
            need_root()
            rt = unprivileged.runtime()
            env = rt.env(env)
            ids = ["--groups=" + ",".join(map(str, groups))] if groups else ["--clear-groups"]
            cmd = [shutil.which("setpriv") or "setpriv", f"--reuid={uid}", f"--regid={NOBODY}",
                   *ids, *rt.piflash(), *map(str, args)]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env,
                              cwd=str(self.home))


def make_fake_system(plugdev_members: Sequence[str] = ()) -> FakeSystem:
    """A :class:`FakeSystem` in a fresh world-readable directory under the temp dir."""
    base = Path(tempfile.mkdtemp(prefix="piflash-usbfake-"))
    os.chmod(base, 0o755)
    return FakeSystem(base, plugdev_members)


#: The serials of :func:`make_bench`'s probes (an ST-Link/V2-1's and a micro:bit DAPLink's form).
STLINK_SERIAL = "066DFF495157808667153840"
DAPLINK_SERIAL = "0240000034544e45001b00028aa9001e8f91000097969900"


def make_bench() -> FakeSystem:
    """The test bench of tests/system/test_usbscan.py and docs/permissions.md's doctor transcript
    (scripts/doctor-bench.py): an ST-Link whose node is ``root:plugdev 0660`` (bus 1 device 2), a
    DAPLink whose node no rule touched (``root:root 0664``, device 3) and a mouse (no probe)."""
    fake = make_fake_system()
    fake.add_device("1-1", 0x0483, 0x374b, 1, 2, product="STM32 STLink", manufacturer="STMicroelectronics",
                    serial=STLINK_SERIAL, group=plugdev_gid(), mode=0o660)
    fake.add_device("1-2", 0x0d28, 0x0204, 1, 3, product="DAPLink CMSIS-DAP", manufacturer="ARM",
                    serial=DAPLINK_SERIAL, interfaces=["CMSIS-DAP v1", "mbed Serial Port", "USB_MSC"])
    fake.add_device("1-3", 0x046d, 0xc52b, 1, 4, product="USB Receiver", manufacturer="Logitech")
    return fake
