"""Find USB debug probes without pyOCD, and say why one cannot be opened.

pyOCD reports a probe it may not open as "no probe" (pyOCD issues #1719, #267,
#312). This module reads ``/sys/bus/usb/devices/*`` directly, matches each device
against :mod:`piflash.probe.probetable`, and checks the kernel's verdict on its node
``/dev/bus/usb/BBB/DDD`` with ``os.access(R_OK | W_OK)`` (what libusb needs to
open it). For a probe that cannot be opened it explains why (the node's owner,
group and mode; whether the user is in that group in ``/etc/group`` and in this
process's groups) and gives the command that fixes it.

All three roots are parameters, so tests run it on fake trees:
``sysfs_root`` (``/sys``), ``dev_root`` (``/dev``) and ``sysroot`` (``/``, for
``etc/group`` and ``etc/udev/rules.d``). :func:`roots_from_env` reads them from
``PIFLASH_SYSFS_ROOT``, ``PIFLASH_DEV_ROOT`` and ``PIFLASH_SYSROOT``.
Standard library only.
"""

from __future__ import annotations

import errno
import os
import pwd
import stat
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple, Union

if TYPE_CHECKING:
    from piflash.probe.selector import ProbeSelector

from piflash import settings
from piflash.probe import permissions, probetable


@dataclass(frozen=True)
class UsbProbe:
    """A USB debug probe seen in sysfs.

    :ivar name: probe model (str), from :mod:`piflash.probe.probetable`.
    :ivar vid: USB vendor ID (int). :ivar pid: USB product ID (int).
    :ivar busnum: USB bus number (int). :ivar devnum: device number on that bus (int).
    :ivar product: USB product string (str or None); likewise ``manufacturer`` and ``serial``
        (the serial is what pyOCD uses as the probe's unique ID).
    :ivar node: the device node libusb opens (str), ``<dev_root>/bus/usb/BBB/DDD``.
    :ivar accessible: whether this process may open the node read-write (bool).
    :ivar reason: why not (str), or None when accessible.
    :ivar fix: the command or action that fixes it (str), or None.
    :ivar port: the sysfs port path (str, e.g. ``"1-1.2"``: bus 1, root port 1, hub port 2), or
        None (a simulated probe).
    :ivar speed_mbps: the link speed sysfs reports, Mbit/s (float: 1.5, 12, 480...), or None.
    """

    name: str
    vid: int
    pid: int
    busnum: int
    devnum: int
    product: Optional[str]
    manufacturer: Optional[str]
    serial: Optional[str]
    node: str
    accessible: bool
    reason: Optional[str] = None
    fix: Optional[str] = None
    port: Optional[str] = None
    speed_mbps: Optional[float] = None

    @property
    def vid_pid(self) -> str:
        """``"vvvv:pppp"`` in lowercase hex."""
        return f"{self.vid:04x}:{self.pid:04x}"

    @property
    def label(self) -> str:
        """One line naming the probe: model, VID:PID, serial, bus and device number."""
        serial = f" serial {self.serial}" if self.serial else ""
        return f"{self.name} ({self.vid_pid}{serial}, bus {self.busnum} device {self.devnum})"

    def to_dict(self) -> Dict[str, Any]:
        """JSON-friendly dict with ``vid_pid`` added."""
        out = asdict(self)
        out["vid_pid"] = self.vid_pid
        return out


def roots_from_env() -> Dict[str, str]:
    """``{"sysfs_root", "dev_root", "sysroot"}`` from the environment (defaults /sys, /dev, /)."""
    return {
        "sysfs_root": settings.PIFLASH_SYSFS_ROOT.value(),
        "dev_root": settings.PIFLASH_DEV_ROOT.value(),
        "sysroot": settings.PIFLASH_SYSROOT.value(),
    }


def _read(path: Path) -> Optional[str]:
    try:
        return path.read_text(errors="replace").strip() or None
    except OSError:
        return None


def _user_name() -> str:
    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return str(os.geteuid())


def explain_access(node: Path, sysroot: str = "/") -> Tuple[Optional[str], Optional[str]]:
    """Why this process may not open ``node`` read-write, and the fix.

    :returns: ``(reason, fix)`` (both str), or ``(None, None)`` when it may.
    """
    if os.access(node, os.R_OK | os.W_OK):
        return None, None
    user = _user_name()
    try:
        st = node.stat()
    except FileNotFoundError:
        return (f"{node} does not exist", "unplug and replug the probe; is /dev a devtmpfs?")
    except OSError as exc:
        return f"cannot look at {node}: {exc.strerror}", "check the permissions of /dev/bus/usb"
    groups = permissions.read_groups(sysroot)
    by_gid = {gid: name for name, (gid, _) in groups.items()}
    gname = by_gid.get(st.st_gid, str(st.st_gid))
    try:
        owner = pwd.getpwuid(st.st_uid).pw_name
    except KeyError:
        owner = str(st.st_uid)
    mode = stat.S_IMODE(st.st_mode)
    where = f"{node} is {owner}:{gname} mode {mode:04o}"
    in_session = st.st_gid in set(os.getgroups()) | {os.getegid()}
    group_rw = mode & 0o060 == 0o060
    if group_rw and st.st_gid != 0:
        if in_session:
            return (
                f"{where} and {user} is in {gname}, yet access is denied (an ACL or a security module?)",
                f"getfacl {node}",
            )
        listed = gname in groups and user in groups[gname][1]
        if listed:
            return (
                f"{where}; {user} was added to {gname} in /etc/group, but this session started before that",
                f"log out and back in (or run: newgrp {gname}), then try again",
            )
        if gname != probetable.GROUP:  # another rule file chose this group
            return (
                f"{where} and {user} is not in group {gname} (a udev rule other than piflash's sets that group)",
                f"sudo gpasswd --add {user} {gname} and log in again, or remove the rule that sets it",
            )
        return f"{where} and {user} is not in group {gname}", permissions.fix_text(user)
    rules = Path(sysroot, permissions.RULES_DIR, probetable.RULES_NAME)
    if rules.exists():
        return (
            f"{where}: piflash's rules are installed ({rules}) but were not applied to this probe",
            "unplug and replug the probe, or: sudo udevadm control --reload && "
            "sudo udevadm trigger --subsystem-match=usb",
        )
    return (f"{where}: no udev rule gives the {probetable.GROUP} group access", permissions.fix_text(user))


def _open_refused_fix(sysroot: str = "/") -> str:
    """The fix for a probe whose opening was refused: ``setup permissions`` only when it has
    something to change (the rules missing, or the user not in the group); with both right, the
    node predates the rules or something else denies it."""
    user = _user_name()
    rules = Path(sysroot, permissions.RULES_DIR, probetable.RULES_NAME)
    groups = permissions.read_groups(sysroot)
    gid = groups.get(probetable.GROUP, (None, ()))[0]
    in_group = os.geteuid() == 0 or (gid is not None and gid in set(os.getgroups()) | {os.getegid()})
    if rules.exists() and in_group:
        return (
            f"piflash's rules ({rules}) and the {probetable.GROUP} group are in place: unplug and replug "
            "the probe (its device node may predate the rules), or look for an ACL or a security "
            "module denying it"
        )
    return permissions.fix_text(user)


def scan(sysfs_root: str = "/sys", dev_root: str = "/dev", sysroot: str = "/") -> List[UsbProbe]:
    """Every USB debug probe attached now, with whether this process may open it.

    :param sysfs_root: where sysfs is mounted (str); ``<sysfs_root>/bus/usb/devices`` is read.
    :param dev_root: where the device nodes are (str); ``<dev_root>/bus/usb/BBB/DDD`` is checked.
    :param sysroot: prefix of ``etc/group`` and ``etc/udev/rules.d`` for the explanation (str).
    :returns: the probes (list of :class:`UsbProbe`) sorted by bus and device number; empty when
        there is no USB sysfs (not Linux, or no USB controller).
    """
    base = Path(sysfs_root, "bus", "usb", "devices")
    if not base.is_dir():
        return []
    found = []
    for entry in sorted(base.iterdir()):
        vid, pid = _read(entry / "idVendor"), _read(entry / "idProduct")
        busnum, devnum = _read(entry / "busnum"), _read(entry / "devnum")
        if not (vid and pid and busnum and devnum):
            continue  # an interface, or a half-gone device
        try:
            vid_i, pid_i, bus_i, dev_i = int(vid, 16), int(pid, 16), int(busnum), int(devnum)
        except ValueError:
            continue
        product = _read(entry / "product")
        strings = [product] + [_read(p) for p in sorted(entry.glob("*:*/interface"))]
        model = probetable.lookup(vid_i, pid_i, [s for s in strings if s])
        if model is None:
            continue
        node = Path(dev_root, "bus", "usb", f"{bus_i:03d}", f"{dev_i:03d}")
        reason, fix = explain_access(node, sysroot)
        found.append(
            UsbProbe(
                model.name,
                vid_i,
                pid_i,
                bus_i,
                dev_i,
                product,
                _read(entry / "manufacturer"),
                _read(entry / "serial"),
                str(node),
                reason is None,
                reason,
                fix,
                entry.name,
                _speed(entry),
            )
        )
    return sorted(found, key=lambda p: (p.busnum, p.devnum))


def _speed(entry: Path) -> Optional[float]:
    try:
        return float(_read(entry / "speed") or "")
    except ValueError:
        return None


@dataclass(frozen=True)
class SharedHub:
    """A high-speed hub with full-speed probes behind it (:func:`hubs_of`).

    :ivar port: the hub's sysfs port path (str, e.g. ``"1-1"``).
    :ivar multi_tt: whether it has a Transaction Translator per port (bool): its device
        descriptor's ``bDeviceProtocol`` is 2 (USB 2.0 spec 11.23.1; 1 is a single TT shared
        by every full-speed and low-speed device behind it, 11.14.1.3).
    :ivar probes: the full- or low-speed probes behind it (list of :class:`UsbProbe`).
    """

    port: str
    multi_tt: bool
    probes: List[UsbProbe]


def hubs_of(probes: List[UsbProbe], sysfs_root: str = "/sys") -> List[SharedHub]:
    """The high-speed hubs that translate for the full- and low-speed ``probes`` (probes of
    :func:`scan`), nearest first: a device's hub is its port path without the last ``.N``
    (``1-1.2`` is port 2 of the hub at ``1-1``), and the TT is in the nearest hub upstream that
    runs at high speed. Probes on a root port, or behind full-speed hubs only, have no TT and
    are left out.

    :returns: list of :class:`SharedHub`, sorted by port path.
    """
    base = Path(sysfs_root, "bus", "usb", "devices")
    groups: Dict[str, List[UsbProbe]] = {}
    multi: Dict[str, bool] = {}
    for probe in probes:
        if probe.port is None or probe.speed_mbps is None or probe.speed_mbps >= 480:
            continue
        port = probe.port
        while "." in port:
            port = port.rsplit(".", 1)[0]
            if _speed(base / port) == 480 and _read(base / port / "bDeviceClass") == "09":
                groups.setdefault(port, []).append(probe)
                multi[port] = _read(base / port / "bDeviceProtocol") == "02"
                break
    return [SharedHub(port, multi[port], groups[port]) for port in sorted(groups)]


def usb_backend() -> Any:
    """The pyusb backend a registered hook puts in place of libusb (the simulated USB bus of
    ``piflash.sim``, switched on by ``PIFLASH_SIM_USB``), or None for the real bus.

    Hooks are the entry points of the group ``piflash.usb_backend`` (each a callable returning a
    pyusb backend or None); they are looked up only when ``PIFLASH_SIM_USB`` is set, so a real
    run imports nothing more. The simulated USB probes thereby stay below pyusb, where they test
    the most, and this module does not import the simulator.
    """
    if not settings.PIFLASH_SIM_USB.value():
        return None
    from importlib.metadata import entry_points

    for point in entry_points(group="piflash.usb_backend"):
        try:
            backend = point.load()()
        except ImportError:
            continue
        if backend is not None:
            return backend
    return None


def install_simulated_bus() -> None:
    """Put a registered USB backend (:func:`usb_backend`) in place of libusb for pyusb in this
    process, as loading pyOCD's ``sim`` plugin does: for callers of pyusb that never load pyOCD
    (the PICOBOOT transport). Nothing when none is switched on."""
    usb_backend()


def scan_simulated_usb() -> List[UsbProbe]:
    """The probes on a registered USB backend (:func:`usb_backend`: the simulated bus, switched
    on by ``PIFLASH_SIM_USB``), with whether pyusb can open each: such a device has no sysfs
    entry and no device node, so the verdict is pyusb's own (EACCES from opening it, as libusb
    gives for a node without permission). Empty when the simulation is off or not installed.
    """
    backend = usb_backend()
    try:
        import usb.core
    except ImportError:
        return []
    if backend is None:
        return []
    found = []
    for sim in backend.enumerate_devices():
        model = probetable.lookup(sim.preset.vid, sim.preset.pid)
        dev = usb.core.find(backend=backend, address=sim.address)
        if model is None or dev is None:
            continue
        reason = fix = None
        try:
            dev.get_active_configuration()  # opens the device, as pyOCD does
        except usb.core.USBError as err:
            if err.errno not in (errno.EACCES, errno.EPERM):
                continue
            reason = f"pyusb cannot open the device: {err.strerror or err}"
            fix = _open_refused_fix()
        found.append(
            UsbProbe(
                model.name,
                sim.preset.vid,
                sim.preset.pid,
                dev.bus,
                dev.address,
                sim.preset.product,
                sim.preset.manufacturer,
                sim.serial,
                f"simulated USB bus {dev.bus} device {dev.address}",
                reason is None,
                reason,
                fix,
            )
        )
    return found


def blocked_probes(unique_id: Union[str, ProbeSelector, None] = None) -> List[UsbProbe]:
    """Probes attached now that this process may not open (roots from the environment).

    :param unique_id: a probe selector (str or :class:`piflash.probe.ProbeSelector`): keep only the
        probes whose USB serial number it matches (the whole number, any case, or a written
        ``0240*`` prefix; :meth:`~piflash.probe.ProbeSelector.matches`); None keeps all.
    :raises ProbeSyntaxError: a selector that cannot be one.
    """
    from piflash.probe.selector import parse_selector

    selector = parse_selector(unique_id)
    out = [p for p in scan(**roots_from_env()) + scan_simulated_usb() if not p.accessible]
    if selector is not None:
        out = [p for p in out if selector.matches(p.serial)]
    return out
