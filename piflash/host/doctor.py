"""``piflash doctor``: check that this machine can flash, and say how to fix what cannot.

Each check is a plain function taking a :class:`Context` and returning a
:class:`Check`, a list of them, or None (nothing to report). :data:`CHECKS` is the
list :func:`run_checks` runs, in order; adding a check is adding one function to it.
A ``fail`` means flashing would fail here as things stand; ``warn`` means it may
work but something is off (with a fix); ``ok`` includes facts worth knowing, such
as an optional package that is absent.

Light to import: pyOCD is imported by :func:`check_pyocd` only; capstone and
cmsis-pack-manager are looked up, never imported.
"""

from __future__ import annotations

import importlib.util
import json
import os
import pwd
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, List, Optional, Sequence, Tuple, Union

from piflash import settings
from piflash.probe import permissions, probetable, usbscan

OK, WARN, FAIL = "ok", "warn", "fail"

#: The station service's unit (written by the station's installer).
STATION_UNIT = "piflash-station.service"
#: Where scripts/install.sh records an install, relative to sys.prefix.
INSTALL_RECORD = "piflash-install.json"
#: Directories udev reads rules from, relative to the root, highest precedence first (udev(7)).
RULES_DIRS = ("etc/udev/rules.d", "run/udev/rules.d", "usr/lib/udev/rules.d", "lib/udev/rules.d")
#: Directories systemd reads system units from, relative to the root.
UNIT_DIRS = ("etc/systemd/system", "usr/lib/systemd/system", "lib/systemd/system")


@dataclass(frozen=True)
class Check:
    """The result of one check.

    :ivar name: what was checked (str), e.g. ``"udev rules"``.
    :ivar status: ``"ok"``, ``"warn"`` or ``"fail"`` (fail: flashing here would fail).
    :ivar detail: what was found (str).
    :ivar fix: a command or action that fixes it (str), or None.
    """

    name: str
    status: str
    detail: str
    fix: Optional[str] = None

    def to_dict(self) -> dict:
        """JSON-friendly dict."""
        return asdict(self)


@dataclass(frozen=True)
class Context:
    """Where the checks look: every root is a parameter so tests can use fake trees.

    :ivar sysroot: prefix of /etc, /usr/lib, /lib (str, default ``/``).
    :ivar sysfs_root: where sysfs is (str, default ``/sys``).
    :ivar dev_root: where device nodes are (str, default ``/dev``).
    :ivar prefix: the Python environment's prefix (str, default ``sys.prefix``).
    :ivar boot_config: the Raspberry Pi boot config (str path), or None to look under ``sysroot``.
    :ivar pin_probes: probe IDs whose Pi pins :func:`check_pins` checks (``spidev:0.0``...).
    :ivar station_gpio: the station's ``gpio:`` pins, (role, BCM GPIO) pairs.
    """

    sysroot: str = "/"
    sysfs_root: str = "/sys"
    dev_root: str = "/dev"
    prefix: str = field(default_factory=lambda: sys.prefix)
    boot_config: Optional[str] = None
    pin_probes: Tuple[str, ...] = ()
    station_gpio: Tuple[Tuple[str, int], ...] = ()

    @classmethod
    def from_env(cls, pin_probes: Sequence[str] = (), station_gpio: Sequence[Tuple[str, int]] = ()) -> "Context":
        """Roots from ``PIFLASH_SYSROOT``, ``PIFLASH_SYSFS_ROOT``, ``PIFLASH_DEV_ROOT``, the boot
        config from ``PIFLASH_BOOT_CONFIG``; ``pin_probes`` (probe IDs) and ``station_gpio``
        (role, BCM GPIO) for :func:`check_pins`."""
        return cls(
            **usbscan.roots_from_env(),
            boot_config=settings.PIFLASH_BOOT_CONFIG.value(),
            pin_probes=tuple(pin_probes),
            station_gpio=tuple(station_gpio),
        )


CheckResult = Union[Check, List[Check], None]
CheckFunction = Callable[[Context], CheckResult]


def _user() -> str:
    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return str(os.geteuid())


#: Where scripts/install.sh puts a user's venv, relative to the user's home.
USER_VENV = ".local/share/piflash/venv"


def _user_venv(user: Optional[str]) -> Optional[Path]:
    """``user``'s own piflash venv (scripts/install.sh's user location), if it exists."""
    try:
        path = Path(pwd.getpwnam(user).pw_dir, USER_VENV) if user else None
    except KeyError:
        return None
    return path if path is not None and path.is_dir() else None


def check_python(ctx: Context) -> List[Check]:
    """Which Python environment runs piflash, as whom, and whether ``pyocd``/``piflash`` on PATH
    belong to it (root's and a user's environments differ: ``sudo pip``/``sudo pyocd`` use root's,
    the confusion behind pyOCD issues #267 and #312)."""
    venv = sys.prefix != sys.base_prefix
    version = ".".join(map(str, sys.version_info[:3]))
    who = _user()
    detail = f"{'venv' if venv else 'system Python'} {sys.prefix} (Python {version}), running as {who}"
    out = []
    if os.geteuid() == 0:
        sudo_user = settings.SUDO_USER.value()
        by = f" via sudo from {sudo_user}" if sudo_user else ""
        theirs = _user_venv(sudo_user)
        if theirs is not None and theirs.resolve() != Path(sys.prefix).resolve():
            by += f"; {sudo_user}'s own piflash is another environment, {theirs}"
        out.append(
            Check(
                "Python environment",
                WARN,
                f"{detail}{by}: root's environment is not the user's, and flashing does "
                "not need root once permissions are set up",
                f"run piflash as {sudo_user or 'the user who flashes'}; set up access with: "
                f"{permissions.setup_command(sudo_user)}",
            )
        )
    else:
        out.append(Check("Python environment", OK, detail))
    own_bin = Path(sys.prefix, "bin")
    for tool in ("pyocd", "piflash"):
        found = shutil.which(tool)
        if found and Path(found).resolve().parent != own_bin.resolve():  # a symlink into it is fine
            out.append(
                Check(
                    f"{tool} on PATH",
                    WARN,
                    f"{found} is not this environment's ({own_bin}): the '{tool}' you type "
                    "runs another Python environment",
                    f"use {own_bin / tool}, or put {own_bin} first on PATH",
                )
            )
    return out


def check_install(ctx: Context) -> Check:
    """What ``scripts/install.sh`` recorded in ``<prefix>/piflash-install.json``."""
    path = Path(ctx.prefix, INSTALL_RECORD)
    if not path.exists():
        return Check("install", OK, "not installed by scripts/install.sh (development install?)")
    try:
        rec = json.loads(path.read_text())
        profile, venv = rec["profile"], rec["venv"]
        where = "system (service)" if rec.get("system") else "user"
        detail = f"{profile} profile, {where} install in {venv}, {rec.get('installed_at', '?')}" + (
            f", from wheelhouse {rec['wheelhouse']}" if rec.get("wheelhouse") else ""
        )
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return Check(
            "install", WARN, f"{path} is unreadable ({type(exc).__name__}: {exc})", "run scripts/install.sh again"
        )
    if Path(venv).resolve() != Path(ctx.prefix).resolve():
        return Check(
            "install",
            WARN,
            f"{detail}; but this piflash runs from {ctx.prefix}",
            f"run {Path(venv, 'bin', 'piflash')} instead",
        )
    return Check("install", OK, detail)


def check_pyocd(ctx: Context) -> Check:
    """pyOCD importable, its version, and pylink (pyOCD imports it when listing probes)."""
    import importlib.metadata

    try:
        import pyocd  # noqa: F401

        version = importlib.metadata.version("pyocd")
    except Exception as exc:  # any import failure blocks flashing
        return Check(
            "pyOCD",
            FAIL,
            f"cannot import pyocd: {type(exc).__name__}: {exc}",
            "install piflash with scripts/install.sh",
        )
    if importlib.util.find_spec("pylink") is None:
        return Check(
            "pyOCD",
            FAIL,
            f"pyOCD {version}, but pylink is missing: pyOCD imports it "
            "whenever it lists probes (pyocd/probe/jlink_probe.py)",
            "pip install pylink-square",
        )
    major_minor = tuple(int(v) for v in version.split(".")[:2] if v.isdigit())
    if major_minor < (0, 46):
        return Check("pyOCD", WARN, f"pyOCD {version}: piflash needs 0.46 or later", "pip install 'pyocd>=0.46'")
    return Check("pyOCD", OK, f"pyOCD {version} ({Path(pyocd.__file__).parent})")


#: Optional pyOCD dependencies a minimal install leaves out, and what their absence costs.
OPTIONAL = (
    (
        "capstone",
        "capstone",
        "absent: only 'pyocd commander' disassembly (disasm) is unavailable; flashing never needs it",
    ),
    (
        "cmsis-pack-manager",
        "cmsis_pack_manager",
        "absent: 'pyocd pack' (the CMSIS-Pack index and downloads) is unavailable; an explicit --pack FILE still works",
    ),
)


def check_optional(ctx: Context) -> List[Check]:
    """capstone and cmsis-pack-manager: present or not (looked up, never imported)."""
    return [Check(name, OK, "present" if importlib.util.find_spec(module) else cost) for name, module, cost in OPTIONAL]


def check_simulator(ctx: Context) -> Check:
    """The simulator (piflash's ``sim`` extra, :data:`piflash.errors.EXTRAS`): present or how to
    install it (looked up, never imported). Never a problem: a station with real probes does
    not need it."""
    from piflash.errors import EXTRAS, extra_available

    module, purpose, how = EXTRAS["sim"]
    if extra_available("sim"):
        return Check("simulator", OK, f"present ({module}): 'piflash sim' and sim: probes work")
    return Check(
        "simulator", OK, f"not installed: {purpose} ('piflash sim', sim: probes) needs {module}; install it {how}"
    )


def check_libusb(ctx: Context) -> Check:
    """libusb-1.0 found the way pyOCD finds it: libusb-package's copy, else pyusb's search."""
    try:
        if importlib.util.find_spec("libusb_package"):
            import libusb_package

            backend, how = libusb_package.get_libusb1_backend(), "libusb-package"
        else:
            backend, how = None, ""
        if backend is None:
            import usb.backend.libusb1

            backend, how = usb.backend.libusb1.get_backend(), "the system's, through pyusb"
    except Exception as exc:
        return Check(
            "libusb", FAIL, f"cannot load libusb: {type(exc).__name__}: {exc}", "sudo apt install libusb-1.0-0"
        )
    if backend is None:
        return Check(
            "libusb", FAIL, "libusb-1.0 not found: USB probes cannot be opened", "sudo apt install libusb-1.0-0"
        )
    name = getattr(getattr(backend, "lib", None), "_name", "libusb-1.0")
    return Check("libusb", OK, f"{name} ({how})")


def check_rules(ctx: Context) -> List[Check]:
    """piflash's udev rules installed (the copy udev uses) and equal to the packaged copy;
    and no world-writable rule for a known probe elsewhere."""
    packaged = probetable.packaged_rules_path().read_text()
    installed = [Path(ctx.sysroot, d, probetable.RULES_NAME) for d in RULES_DIRS]
    in_effect = next((p for p in installed if p.exists()), None)
    if in_effect is None:
        out = [
            Check(
                "udev rules",
                WARN,
                f"{probetable.RULES_NAME} not installed: probes can be opened "
                "by root only (or by the desktop user if another rule tags them)",
                permissions.fix_text(None if os.geteuid() == 0 else _user()),
            )
        ]
    elif in_effect.read_text() != packaged:
        out = [
            Check(
                "udev rules",
                WARN,
                f"{in_effect} differs from this piflash's copy "
                f"({probetable.packaged_rules_path()}): an older or edited version",
                permissions.setup_command(),
            )
        ]
    else:
        out = [Check("udev rules", OK, f"{in_effect} is current")]
    vids = {f"{vid:04x}" for vid, _ in probetable.all_ids()}
    for d in RULES_DIRS:
        for path in sorted(Path(ctx.sysroot, d).glob("*.rules")):
            try:
                text = path.read_text(errors="replace")
            except OSError:
                continue
            bad = [
                line
                for line in text.splitlines()
                if not line.lstrip().startswith("#") and "0666" in line and any(f'"{v}"' in line for v in vids)
            ]
            if bad:
                out.append(
                    Check(
                        "world-writable rule",
                        WARN,
                        f"{path} makes a probe world-writable (MODE 0666): any local program can reprogram your boards",
                        f"sudo rm {path}",
                    )
                )
    return out


def check_group(ctx: Context) -> Check:
    """The user in ``plugdev`` in /etc/group and in this process's groups (a new member must
    log in again)."""
    user = _user()
    group = probetable.GROUP
    if os.geteuid() == 0:
        return Check(f"{group} group", OK, "running as root: no group needed")
    groups = permissions.read_groups(ctx.sysroot)
    if group not in groups:
        return Check(f"{group} group", WARN, f"group {group} does not exist", permissions.fix_text(user))
    gid, members = groups[group]
    in_session = gid in set(os.getgroups()) | {os.getegid()}
    listed = user in members
    if in_session:
        return Check(f"{group} group", OK, f"{user} is in {group} (in /etc/group and in this session)")
    if listed:
        return Check(
            f"{group} group",
            WARN,
            f"{user} is in {group} in /etc/group, but this session started before that",
            f"log out and back in (or run: newgrp {group})",
        )
    return Check(f"{group} group", WARN, f"{user} is not in {group}", permissions.fix_text(user))


def check_probes(ctx: Context) -> List[Check]:
    """Each attached USB probe openable (:func:`piflash.probe.usbscan.scan`, plus the simulated
    bus of ``PIFLASH_SIM_USB``: :func:`piflash.probe.usbscan.scan_simulated_usb`)."""
    simulated = usbscan.scan_simulated_usb()
    if not simulated and not Path(ctx.sysfs_root, "bus", "usb", "devices").is_dir():
        return [Check("USB probes", OK, f"no USB devices in {ctx.sysfs_root} (no USB here)")]
    found = usbscan.scan(ctx.sysfs_root, ctx.dev_root, ctx.sysroot) + simulated
    if not found:
        return [Check("USB probes", OK, "no USB debug probe attached")]
    checks = [
        Check(
            f"probe {p.vid_pid}",
            OK if p.accessible else FAIL,
            f"{p.label}: " + (f"{p.node} can be opened" if p.accessible else p.reason),
            p.fix,
        )
        for p in found
    ]
    return checks + check_hubs(ctx, found)


def check_hubs(ctx: Context, found: List[usbscan.UsbProbe]) -> List[Check]:
    """Full-speed probes sharing one hub's Transaction Translator (:func:`usbscan.hubs_of`): a
    row per hub with two or more of them behind it; a warning for a single-TT hub, where they
    share 12 Mbit/s (four Picos flashed by BOOTSEL at once: 3.45x the boards/hour of one instead
    of 4x, docs/benchmarks.md, ``benchmarks/picoboot_usb.py``)."""
    rows = []
    for hub in usbscan.hubs_of(found, ctx.sysfs_root):
        if len(hub.probes) < 2:
            continue
        names = ", ".join(p.port for p in hub.probes)
        if hub.multi_tt:
            rows.append(
                Check(
                    f"hub {hub.port}",
                    OK,
                    f"a transaction translator per port for the {len(hub.probes)} full-speed probes on {names}",
                )
            )
        else:
            rows.append(
                Check(
                    f"hub {hub.port}",
                    WARN,
                    f"{len(hub.probes)} full-speed probes ({names}) share this hub's single "
                    "transaction translator (12 Mbit/s between them): boards flashed at once "
                    "wait for each other's USB packets",
                    "a multi-TT hub (lsusb -v: bDeviceProtocol 2, 'TT per port') gives each its "
                    "own; or seat boards one after another rather than all at once",
                )
            )
    return rows


def check_station(ctx: Context) -> Optional[Check]:
    """The station service's state, when its unit is installed (``systemctl is-active``)."""
    unit = next(
        (Path(ctx.sysroot, d, STATION_UNIT) for d in UNIT_DIRS if Path(ctx.sysroot, d, STATION_UNIT).exists()), None
    )
    if unit is None:
        return None
    systemctl = shutil.which("systemctl")
    if os.path.realpath(ctx.sysroot) != "/" or systemctl is None:
        return Check("station service", OK, f"{unit} installed (state not checked here)")
    try:
        proc = subprocess.run([systemctl, "is-active", STATION_UNIT], capture_output=True, text=True, timeout=10)
        state = proc.stdout.strip() or proc.stderr.strip()
    except (OSError, subprocess.TimeoutExpired) as exc:
        state = f"unknown ({exc})"
    if state == "active":
        return Check(
            "station service",
            OK,
            "active: it holds its probe; stop it before flashing by hand",
            f"sudo systemctl stop {STATION_UNIT}",
        )
    if state == "failed":
        return Check("station service", WARN, "failed", f"journalctl -u {STATION_UNIT} -n 50")
    return Check("station service", OK, f"{unit} installed, {state or 'state unknown'}")


#: Where piflash's configs live (the station config, ``/etc/piflash/station.yaml``, and the system
#: profiles), relative to the root; a user's own (``$XDG_CONFIG_HOME/piflash`` and its
#: ``profiles``, ``./piflash.d``) are looked at too. Sources: the default of
#: :data:`piflash.settings.PIFLASH_STATION_CONFIG`, :data:`piflash.profiles.SYSTEM_PROFILE_DIR`.
CONFIG_DIRS = ("etc/piflash", "etc/piflash/profiles")
#: A config larger than this is not read for secrets (a profile is a few hundred bytes).
MAX_CONFIG_BYTES = 1 << 20


def _config_files(ctx: Context) -> List[Path]:
    dirs = [Path(ctx.sysroot, d) for d in CONFIG_DIRS]
    xdg = settings.XDG_CONFIG_HOME.value()
    user = Path(xdg) if xdg and os.path.isabs(xdg) else Path(os.path.expanduser("~")) / ".config"
    dirs += [user / "piflash", user / "piflash" / "profiles", Path("piflash.d")]
    files: List[Path] = []
    for d in dirs:
        try:
            files += sorted(p for p in d.iterdir() if p.suffix in (".yaml", ".yml"))
        except OSError:
            continue
    return list(dict.fromkeys(files))


def check_secrets(ctx: Context) -> List[Check]:
    """A station config or profile that holds a password (a ledger connection string with one,
    :func:`piflash.redact.passwords_in`) and that every user of the machine can read: a warning
    naming the file and the chmod that fixes it, never the password. Nothing to report: no row."""
    from piflash import redact

    out: List[Check] = []
    for path in _config_files(ctx):
        try:
            mode = path.stat().st_mode
            if not (mode & 0o004) or path.stat().st_size > MAX_CONFIG_BYTES:
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if not any(redact.passwords_in(line) for line in text.splitlines() if not line.lstrip().startswith("#")):
            continue
        system = str(path).startswith(str(Path(ctx.sysroot, "etc")))
        out.append(
            Check(
                "secrets",
                WARN,
                f"{path} holds a password and is readable by every user (mode {mode & 0o777:04o})",
                f"sudo chgrp {probetable.GROUP} {path} && sudo chmod 640 {path}"
                if system
                else f"chmod 600 {path} (or keep the password in a passfile: docs/ledger.md)",
            )
        )
    return out


def check_memory(ctx: Context) -> Check:
    """Memory and swap: would a flash of a 1 MiB .bin fit now (:func:`piflash.host.memguard.assess_memory`)?

    ``refuse`` is a fail (the guard would stop a flash), ``tight`` a warning. The proc root is
    ``$PIFLASH_PROC_ROOT`` (default ``/``), as for the guard itself.
    """
    from piflash.host.memguard import MIB, assess_memory

    verdict = assess_memory("flash", image_bytes=MIB, image_format="bin")
    facts = verdict.facts
    mib = lambda n: f"{n / MIB:,.0f} MiB"  # noqa: E731
    detail = (
        f"{facts.short_model if facts.model else 'this machine'}: RAM {mib(facts.mem_total)}, available {mib(verdict.available)}, "
        f"swap {mib(facts.swap_free)} free of {mib(facts.swap_total)}; "
        f"a 1 MiB flash needs about {mib(verdict.need)}"
    )
    swap_fix = "raise CONF_SWAPSIZE in /etc/dphys-swapfile, then: sudo systemctl restart dphys-swapfile"
    if verdict.status == "refuse":
        return Check(
            "memory", FAIL, detail + ": the memory guard would refuse it", "close other programs, or " + swap_fix
        )
    if verdict.status == "tight":
        return Check("memory", WARN, detail + ": tight, it would swap", swap_fix)
    return Check("memory", OK, detail)


def check_pins(ctx: Context) -> List[Check]:
    """The Pi's own pins as an SWD probe (issue 43): SPI on in the boot config, the probes'
    device nodes, who holds their lines, and the station's pins colliding with none of them
    (:func:`piflash.host.pinsetup.check_rows`). No row on a machine with nothing to check."""
    from piflash.host import machine, pinsetup

    setup = pinsetup.PinSetup(
        sysroot=ctx.sysroot,
        dev_root=ctx.dev_root,
        sysfs_root=ctx.sysfs_root,
        boot_config=ctx.boot_config,
        model=machine.read_model(),
        probes=ctx.pin_probes,
        station_gpio=dict(ctx.station_gpio),
    )
    return [Check(*row) for row in pinsetup.check_rows(setup)]


#: The checks :func:`run_checks` runs, in display order. Add a check by adding a function.
CHECKS: List[CheckFunction] = [
    check_python,
    check_install,
    check_pyocd,
    check_optional,
    check_simulator,
    check_libusb,
    check_rules,
    check_group,
    check_probes,
    check_pins,
    check_memory,
    check_station,
    check_secrets,
]


def run_checks(ctx: Optional[Context] = None, checks: Optional[Sequence[CheckFunction]] = None) -> List[Check]:
    """Run ``checks`` (default :data:`CHECKS`) and flatten their results.

    A check that raises becomes a ``fail`` row naming the exception: the doctor must not crash.
    """
    ctx = ctx or Context.from_env()
    out: List[Check] = []
    for fn in checks if checks is not None else CHECKS:
        try:
            result = fn(ctx)
        except Exception as exc:
            result = Check(
                fn.__name__.replace("check_", ""),
                FAIL,
                f"the check itself failed: {type(exc).__name__}: {exc}",
                "please report this with the output of 'piflash doctor --json'",
            )
        if isinstance(result, Check):
            out.append(result)
        elif result:
            out.extend(result)
    return out


def verdict(results: Sequence[Check]) -> Tuple[bool, str]:
    """``(ok, sentence)``: ok is False when any check failed (flashing is blocked)."""
    fails = [c.name for c in results if c.status == FAIL]
    warns = [c.name for c in results if c.status == WARN]
    if fails:
        many = len(fails) > 1
        return False, f"{len(fails)} problem{'s block' if many else ' blocks'} flashing: {', '.join(fails)}"
    if warns:
        return True, f"ready to flash, with {len(warns)} warning{'s' if len(warns) > 1 else ''}: {', '.join(warns)}"
    return True, "ready to flash"
