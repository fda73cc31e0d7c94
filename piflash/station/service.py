"""Install and remove the station's systemd unit (``piflash station install-service``).

The unit ships as package data (``piflash/data/piflash-station.service``); installing it means
writing it to ``<root>/etc/systemd/system`` with the absolute path of the piflash executable on
its ``ExecStart=`` line, optionally copying a station config to ``<root>/etc/piflash/station.yaml``
and enabling it. ``root`` is ``/`` on a running Pi, or an image being built.

systemd is only asked to act (``systemctl daemon-reload``, ``enable``, ``--now``) when ``root`` is
``/`` and systemd is running (``/run/systemd/system`` exists, as sd_booted(3) checks). Otherwise
enabling is done the way ``systemctl --root enable`` does it: a symlink in
``multi-user.target.wants``. Every step is idempotent: a file already holding the right bytes is
left alone, and the plan says so.

Nothing here runs a shell; systemctl is called with an argument list.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, List, Optional, Sequence

from piflash.errors import PiflashError, ProfileError, ServiceError

UNIT_NAME = "piflash-station.service"
#: Where locally installed units live (systemd.unit(5), "System Unit Search Path").
UNIT_DIR = "etc/systemd/system"
#: The unit's ``[Install] WantedBy=`` target; enabling links the unit into its ``.wants`` directory.
WANTED_BY = "multi-user.target"
#: The station config the unit's ``ExecStart=`` names (inside ``ConfigurationDirectory=piflash``).
CONFIG_PATH = "etc/piflash/station.yaml"
#: The mode of an installed config that holds a password: read-write for root, read for the
#: station's group (:func:`station_group`), nothing for others.
SECRET_MODE = 0o640
#: The drop-in a station on the Pi's own pins gets (``SupplementaryGroups=spi gpio`` and
#: ``DeviceAllow=`` for spidev and gpiochip), shipped as ``piflash/data/piflash-station-pins.conf``.
PINS_DROPIN = f"{UNIT_DIR}/{UNIT_NAME}.d/pins.conf"
#: The groups that drop-in names: they must exist on the root, or systemd will not start the unit.
PIN_GROUPS = ("spi", "gpio")
#: Probe IDs on the Pi's own pins (issue 43: ``spidev:B.C``, ``gpio:CHIP:...``; parsed by
#: :mod:`piflash.probe.pins`).
PIN_PROBE_TAGS = ("spidev:", "gpio:")
#: Characters that would need quoting or escaping on an ``ExecStart=`` line (``%`` specifiers,
#: ``$`` variables, quotes, backslashes, white space): refused rather than escaped.
_UNSAFE_PATH = re.compile(r"[\s%$\"'\\;]")

Runner = Callable[[Sequence[str]], "subprocess.CompletedProcess"]


@dataclass
class Step:
    """One change install-service makes.

    :ivar text: what the step does, for the user (str), e.g. ``"write /etc/piflash/station.yaml"``.
    :ivar run: callable doing it, or None when nothing needs doing (the text says why).
    """

    text: str
    run: Optional[Callable[[], None]] = None


def unit_template() -> str:
    """The unit file as shipped in the package (str), before the executable is filled in."""
    from importlib import resources

    return resources.files("piflash").joinpath("data", UNIT_NAME).read_text(encoding="utf-8")


def render_unit(executable: str, template: Optional[str] = None) -> str:
    """The unit text with ``executable`` as the program of its ``ExecStart=`` line.

    :param executable: absolute path of the piflash console script, as seen on the machine that
        runs the unit (e.g. ``/opt/piflash/bin/piflash``).
    :param template: unit text to fill (default: :func:`unit_template`).
    :raises ServiceError: the path is relative or holds characters systemd would interpret.
    """
    if not os.path.isabs(executable):
        raise ServiceError(
            f"the piflash executable must be an absolute path, not '{executable}'",
            hint="pass --executable /opt/piflash/bin/piflash",
        )
    if _UNSAFE_PATH.search(executable):
        raise ServiceError(
            f"'{executable}' holds characters systemd would interpret on ExecStart=",
            hint="install piflash in a path without spaces, quotes, '%' or '$'",
        )
    text = template if template is not None else unit_template()
    lines = text.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if line.startswith("ExecStart="):
            args = line[len("ExecStart=") :].split(None, 1)
            lines[i] = f"ExecStart={executable} {args[1]}" if len(args) > 1 else f"ExecStart={executable}\n"
            return "".join(lines)
    raise ServiceError(f"the packaged {UNIT_NAME} has no ExecStart= line (a broken install)")


def running_executable() -> str:
    """Absolute path of the piflash console script running now (str).

    ``sys.argv[0]`` when piflash was started as ``piflash``; otherwise (``python -m piflash``)
    the ``piflash`` script next to the running interpreter, as a venv has it.

    :raises ServiceError: neither exists (pass ``--executable``).
    """
    argv0 = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if argv0 is not None and argv0.name == "piflash" and argv0.is_file():
        return os.path.abspath(argv0)
    sibling = Path(sys.executable).with_name("piflash")
    if sibling.is_file():
        return str(sibling)
    raise ServiceError(
        "cannot tell where the piflash executable is",
        hint="pass --executable with its absolute path, e.g. /opt/piflash/bin/piflash",
    )


def systemd_running(root: Path) -> bool:
    """True when ``root`` is this machine's ``/`` and systemd is its init (sd_booted(3)'s test)."""
    return root.resolve() == Path("/") and Path("/run/systemd/system").is_dir()


def _under(root: Path, path: str) -> Path:
    return root / path.lstrip("/")


def _write_step(
    dest: Path,
    shown: str,
    data: bytes,
    mode: int,
    check: Optional[Callable[[Path], object]] = None,
    gid: Optional[int] = None,
) -> Step:
    """A step writing ``data`` to ``dest`` (atomically, by rename), or nothing if it is there.

    ``check`` is called with the new file in place beside ``dest`` (so relative paths in it mean
    what they will mean) before the rename; if it raises, ``dest`` is left as it was. With
    ``gid``, the file is owned by root and that group (set before the rename: never readable by
    others in between, it is created 0600).
    """
    try:
        st = dest.stat()
        if (
            dest.is_file()
            and dest.read_bytes() == data
            and (st.st_mode & 0o777) == mode
            and (gid is None or (st.st_uid, st.st_gid) == (0, gid))
        ):
            return Step(f"{shown}: up to date")
    except OSError:
        pass

    def run():
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(f".{dest.name}.piflash-tmp")
        tmp.unlink(missing_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        if gid is not None:
            os.chown(tmp, 0, gid)
        os.chmod(tmp, mode)
        try:
            if check is not None:
                check(tmp)
        except BaseException:
            tmp.unlink()
            raise
        os.replace(tmp, dest)

    return Step(f"write {shown}", run)


def _systemctl_step(args: List[str], runner: Runner) -> Step:
    cmd = ["systemctl", *args]

    def run():
        try:
            proc = runner(cmd)
        except OSError as exc:
            raise ServiceError(f"cannot run systemctl: {exc.strerror or exc}") from None
        if proc.returncode != 0:
            err = (proc.stderr or "").strip() if isinstance(proc.stderr, str) else ""
            raise ServiceError(
                f"'{' '.join(cmd)}' failed (exit {proc.returncode})" + (f": {err}" if err else ""),
                hint="journalctl -xe shows what systemd said",
            )

    return Step("run " + " ".join(cmd), run)


def _default_runner(cmd: Sequence[str]) -> "subprocess.CompletedProcess":
    return subprocess.run(list(cmd), capture_output=True, text=True, timeout=120)


def _check_root(root: Path, dry_run: bool, again: Sequence[str] = ()) -> None:
    """Refuse a root that is not a directory, and an install on ``/`` by a user who is not root.

    :param again: the options the command was given (``--config FILE`` ...), which the hint's
        ``sudo`` command repeats, each quoted for the shell.
    :raises ServiceError: with the command to run again under sudo as its hint.
    """
    if not root.is_dir():
        raise ServiceError(f"--root {root}: no such directory")
    if not dry_run and root.resolve() == Path("/") and os.geteuid() != 0:
        raise ServiceError(
            "installing the station service needs root (it writes /etc/systemd/system and asks systemd to reload)",
            hint="run it with sudo, naming the executable to install: "
            + " ".join([f"sudo {running_executable_or('piflash')} station install-service", *map(shlex.quote, again)]),
        )


def running_executable_or(default: str) -> str:
    """:func:`running_executable`, or ``default`` when it cannot be told (for messages)."""
    try:
        return running_executable()
    except ServiceError:
        return default


def _check_config(config: Path) -> bytes:
    """The config file's bytes, after checking it is a YAML mapping (not the whole schema)."""
    from piflash.profiles import MAX_YAML_BYTES, read_bounded

    data = read_bounded(config, MAX_YAML_BYTES, "the station config")
    import yaml

    try:
        parsed = yaml.safe_load(data)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise ProfileError(
            f"not valid YAML: {getattr(exc, 'problem', None) or exc}",
            path=str(config),
            line=mark.line + 1 if mark else None,
        ) from None
    if not isinstance(parsed, dict):
        raise ProfileError("a station config is a YAML mapping (key: value lines)", path=str(config))
    return data


def station_group(template: Optional[str] = None) -> str:
    """The station's group: the first of the unit's ``SupplementaryGroups=`` (the udev rules'
    group, :data:`piflash.probe.probetable.GROUP`, through which its dynamic user opens probes)."""
    from piflash.probe.probetable import GROUP

    for line in (template if template is not None else unit_template()).splitlines():
        if line.startswith("SupplementaryGroups="):
            names = line.split("=", 1)[1].split()
            if names:
                return names[0]
    return GROUP


def _secret_gid(root: Path, data: bytes) -> Optional[int]:
    """The group id a config holding a password is installed with (root's ``/etc/group``), or None
    when it holds none (:func:`piflash.redact.passwords_in`, line by line, comments skipped).

    :raises ServiceError: it holds one and the root has no station group to give it to.
    """
    from piflash import redact
    from piflash.probe.permissions import read_group

    text = data.decode("utf-8", errors="replace")
    if not any(redact.passwords_in(line) for line in text.splitlines() if not line.lstrip().startswith("#")):
        return None
    group = station_group()
    found = read_group(str(root), group)
    if found is None:
        raise ServiceError(
            f"the config holds a password, to be readable by root and group {group} only (mode 0640), "
            f"but {_under(root, '/etc/group')} has no group {group}",
            hint="create it: sudo piflash setup permissions (or groupadd --system plugdev); or keep the "
            "password out of the config in a passfile (docs/ledger.md)",
        )
    return found[0]


def _check_station(path: Path) -> None:
    """Validate an installed station config as the station will: profile, firmware, SHA-256.

    :raises ProfileError, FirmwareError, ChecksumError, ImageRangeError: as
        ``piflash station check`` does.
    """
    from piflash.station.config import load_station

    load_station(path)


def plan_install(
    root: Path = Path("/"),
    executable: Optional[str] = None,
    config: Optional[Path] = None,
    enable: bool = False,
    now: bool = False,
    dry_run: bool = False,
    runner: Runner = _default_runner,
) -> List[Step]:
    """The steps installing the unit under ``root`` (nothing is changed until each ``run()``).

    :param root: file system root to install into (``/``, or an image being built).
    :param executable: absolute path of piflash as seen inside ``root`` (default: the running one).
    :param config: station config (YAML) to copy to ``<root>/etc/piflash/station.yaml``.
    :param enable: start the station at boot (``multi-user.target``).
    :param now: also start (or keep running) the station now; implies ``enable``; needs a running
        systemd on ``/``.
    :param dry_run: plan only; skips the root check so anyone can preview.
    :param runner: runs a systemctl argument list, returns a CompletedProcess (tests swap it).
    :raises ServiceError: not root, no such root, executable missing inside the root.
    :raises ProfileError: the config is unreadable or not a YAML mapping.
    """
    root = Path(root)
    again = [*(["--executable", executable] if executable else []), *(["--config", str(config)] if config else [])]
    _check_root(root, dry_run, again + (["--now"] if now else ["--enable"] if enable else []))
    exe = executable or running_executable()
    unit = render_unit(exe)
    inside = _under(root, exe)
    if not (inside.is_file() and os.access(inside, os.X_OK)):
        raise ServiceError(
            f"{inside} is not an executable file",
            hint="install piflash there first, or name it with --executable (a path as seen inside --root)",
        )
    live = systemd_running(root)
    enable = enable or now
    unit_rel = f"/{UNIT_DIR}/{UNIT_NAME}"
    steps = [_write_step(_under(root, unit_rel), _shown(root, unit_rel), unit.encode(), 0o644)]
    if config is not None:
        data = _check_config(Path(config))
        check = _check_station if root.resolve() == Path("/") else None
        gid = _secret_gid(root, data)
        mode = 0o644 if gid is None else SECRET_MODE
        shown = _shown(root, "/" + CONFIG_PATH)
        steps.append(_write_step(_under(root, CONFIG_PATH), shown, data, mode, check, gid))
        if gid is not None:
            steps.append(
                Step(f"note: {shown} holds a password: mode 0640, owner root, group {station_group()} (the station's)")
            )
        if check is None:
            steps.append(
                Step(
                    "note: the config's profile and firmware were not checked (they are "
                    "inside --root): run 'piflash station check' there"
                )
            )
        steps += _pins_steps(root, config)
    elif not _under(root, CONFIG_PATH).exists():
        steps.append(
            Step(
                f"note: {_shown(root, '/' + CONFIG_PATH)} does not exist yet: "
                "the station will not start until it does (--config FILE)"
            )
        )
    if not any(_under(root, k).exists() for k in ("/bin/kill", "/usr/bin/kill")):
        steps.append(
            Step(
                "note: no /bin/kill on this root: 'systemctl reload piflash-station' "
                "(ExecReload=) needs it: apt-get install procps"
            )
        )
    if live:
        steps.append(_systemctl_step(["daemon-reload"], runner))
        if enable:
            now_flag = ["--now"] if now else []
            steps.append(_systemctl_step(["enable", *now_flag, UNIT_NAME], runner))
    else:
        if enable:
            steps.append(_link_step(root))
        steps.append(
            Step(
                "note: systemd is not running on this root: no daemon-reload"
                + ("; the station starts at its next boot" if enable else "")
                + ("; not started now" if now else "")
            )
        )
    return steps


def _pins_steps(root: Path, config: Path) -> List[Step]:
    """The drop-in :data:`PINS_DROPIN` for a config whose ``probes:`` name a ``spidev:`` or
    ``gpio:`` probe, else nothing.

    :raises ServiceError: (exit 16) the root has no ``spi`` or ``gpio`` group: systemd would
        refuse to start the unit (216/GROUP); ``piflash setup permissions`` creates them.
    """
    from piflash.probe.permissions import read_group
    from piflash.station.config import pin_uses

    ids, _ = pin_uses(config)
    pins = [i for i in ids if i.lower().startswith(PIN_PROBE_TAGS)]
    if not pins:
        return []
    missing = [g for g in PIN_GROUPS if read_group(str(root), g) is None]
    if missing:
        raise ServiceError(
            f"the config names {', '.join(pins)}, whose station needs the group{'s' if len(missing) > 1 else ''} "
            f"{', '.join(missing)}, and {_under(root, '/etc/group')} has none: systemd would not start the unit",
            hint="create them first: sudo piflash setup permissions (docs/wiring.md)",
        )
    data = (Path(__file__).resolve().parents[1] / "data" / "piflash-station-pins.conf").read_bytes()
    return [_write_step(_under(root, PINS_DROPIN), _shown(root, "/" + PINS_DROPIN), data, 0o644)]


def _shown(root: Path, path: str) -> str:
    return str(_under(root, path)) if root.resolve() != Path("/") else path


def _wants_link(root: Path) -> Path:
    return _under(root, f"/{UNIT_DIR}/{WANTED_BY}.wants/{UNIT_NAME}")


def _link_step(root: Path) -> Step:
    """Enable offline: the symlink ``systemctl --root ROOT enable`` would make."""
    link = _wants_link(root)
    target = f"/{UNIT_DIR}/{UNIT_NAME}"
    shown = _shown(root, f"/{UNIT_DIR}/{WANTED_BY}.wants/{UNIT_NAME}")
    if link.is_symlink() and os.readlink(link) == target:
        return Step(f"{shown}: already enabled")

    def run():
        link.parent.mkdir(parents=True, exist_ok=True)
        if link.is_symlink() or link.exists():
            link.unlink()
        os.symlink(target, link)

    return Step(f"enable: link {shown} -> {target}", run)


def plan_uninstall(root: Path = Path("/"), dry_run: bool = False, runner: Runner = _default_runner) -> List[Step]:
    """The steps removing the unit (stopping and disabling it first when systemd runs).

    The station config (``/etc/piflash``) and the history (``/var/lib/piflash``) are kept.

    :raises ServiceError: not root, no such root.
    """
    root = Path(root)
    _check_root(root, dry_run)
    unit = _under(root, f"/{UNIT_DIR}/{UNIT_NAME}")
    link = _wants_link(root)
    live = systemd_running(root)
    steps: List[Step] = []
    if live and (unit.exists() or link.is_symlink()):
        steps.append(_systemctl_step(["disable", "--now", UNIT_NAME], runner))
    if link.is_symlink() or link.exists():
        steps.append(Step(f"remove {_shown(root, f'/{UNIT_DIR}/{WANTED_BY}.wants/{UNIT_NAME}')}", link.unlink))
    dropin = _under(root, PINS_DROPIN)
    if dropin.exists():

        def remove_dropin() -> None:
            dropin.unlink()
            if not any(dropin.parent.iterdir()):
                dropin.parent.rmdir()

        steps.append(Step(f"remove {_shown(root, '/' + PINS_DROPIN)}", remove_dropin))
    if unit.exists():
        steps.append(Step(f"remove {_shown(root, '/' + UNIT_DIR + '/' + UNIT_NAME)}", unit.unlink))
        if live:
            steps.append(_systemctl_step(["daemon-reload"], runner))
    else:
        steps.append(Step(f"{_shown(root, '/' + UNIT_DIR + '/' + UNIT_NAME)}: not installed"))
    steps.append(
        Step(f"kept: {_shown(root, '/etc/piflash')} (config) and {_shown(root, '/var/lib/piflash')} (history)")
    )
    return steps


def run_steps(steps: List[Step], echo: Callable[[str], None] = print) -> None:
    """Run each step in order, echoing its text first.

    :raises PiflashError: a step failed (OSError is turned into ServiceError).
    """
    for step in steps:
        echo(step.text)
        if step.run is None:
            continue
        try:
            step.run()
        except PiflashError:
            raise
        except OSError as exc:
            raise ServiceError(
                f"{step.text}: {exc.strerror or exc}",
                hint="run it as root (sudo)" if isinstance(exc, PermissionError) else None,
            ) from None
