"""Every environment variable piflash reads, declared once, and the one way to read it.

One table of :class:`Setting` objects (after pyOCD's ``pyocd/core/options.py``, whose
``OptionInfo`` table declares every session option once): the name, the type, the default, a
one-line doc, what kind of variable it is and who reads it. :data:`SETTINGS` lists them all;
docs/environment.md documents them and tests/unit/test_settings.py checks the two against each other.

Kinds (:attr:`Setting.kind`):

- :data:`USER`: a setting a user or a service unit sets (``PIFLASH_HISTORY``, ...);
- :data:`SEAM`: a test seam, which points piflash at a fake system or makes it misbehave on
  purpose (``PIFLASH_SYSFS_ROOT``, ``PIFLASH_TEST_KILL_AT``, ...): never needed in production;
- :data:`SYSTEM`: set by the system for every program, piflash only reads it (systemd's
  ``STATE_DIRECTORY`` and ``NOTIFY_SOCKET``, the XDG base directories, sudo's ``SUDO_USER``).

Readers (:attr:`Setting.readers`): :data:`PIFLASH` (the product, through :meth:`Setting.value`);
:data:`OPTION` (click, for a command-line option whose ``envvar=`` names the variable: the CLI
writes the name, without importing this module, so that ``piflash --help`` does not load it;
tests/unit/test_settings.py checks that the option's name and default are the ones declared here);
:data:`SIMULATOR` (``piflash.sim``, which knows nothing of piflash and cannot import this module:
it reads its own variables, and they are declared here so that one list holds every name).

Nothing is read at import time: each call of :meth:`Setting.value` reads the environment then,
so a test's ``monkeypatch.setenv`` takes effect at once. Standard library only (``piflash.errors``
and ``piflash.limits`` are imported when a bad value has to be refused), so importing it costs
nothing at ``piflash --help``. Outside this module and the simulator, the product never touches
``os.environ``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Dict, Optional, Tuple

__all__ = [
    "Setting",
    "SETTINGS",
    "USER",
    "SEAM",
    "SYSTEM",
    "PIFLASH",
    "OPTION",
    "SIMULATOR",
    "OFF",
    "by_name",
    "environment",
]

#: :attr:`Setting.kind`: a setting for users and service units.
USER = "setting"
#: :attr:`Setting.kind`: a test seam (a fake system root, a deliberate crash); never needed in production.
SEAM = "test seam"
#: :attr:`Setting.kind`: set by the system (systemd, sudo, the XDG base directories); piflash only reads it.
SYSTEM = "system"
#: :attr:`Setting.readers`: read by the product.
PIFLASH = "piflash"
#: :attr:`Setting.readers`: read by click for a command-line option (``envvar=``), which shows it in ``--help``.
OPTION = "option"
#: :attr:`Setting.readers`: read by the simulator (``piflash.sim``), with its own ``os.environ`` reads.
SIMULATOR = "simulator"


class _Off:
    """The type of :data:`OFF`."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "OFF"


#: What :meth:`Setting.value` returns for a ``path or off`` setting turned off (``PIFLASH_HISTORY=off``).
OFF = _Off()

Parser = Callable[["Setting", Optional[str]], Any]


class Setting:
    """One environment variable: its declaration and its typed getter.

    :param name: the variable's name (str, ``"PIFLASH_HISTORY"``).
    :param type: its type as docs/environment.md names it (str: ``"path"``, ``"seconds"``, ``"flag"``, ...).
    :param default: what :meth:`value` returns when the variable is unset (or blank, for most types).
    :param doc: one line: what it does.
    :param shown_default: the default as docs/environment.md writes it (str); default ``str(default)``,
        or ``"unset"`` for None.
    :param kind: :data:`USER`, :data:`SEAM` or :data:`SYSTEM`.
    :param readers: who reads it: :data:`PIFLASH`, :data:`OPTION`, :data:`SIMULATOR` (tuple of str).
    :param parse: ``parse(setting, raw) -> value``, raw being the text or None when unset; it may
        raise the error the product gives for a bad value (:mod:`piflash.errors`).
    :param choices: the accepted words of a ``choice`` setting, the words meaning "off" of a
        ``path or off`` one (tuple of str).
    :param maximum: the largest value of a ``seconds`` setting: the name of its bound in
        :mod:`piflash.limits` (str, ``"PROBE_TIMEOUT_MAX_S"``), looked up when a value is read.
    :param error: name of the :mod:`piflash.errors` class raised for a bad value (exit code and
        ``error.kind`` as before this table existed).
    :param hint: the hint that error carries (``{name}`` is replaced by the variable's name).
    """

    __slots__ = (
        "name",
        "type",
        "default",
        "doc",
        "shown_default",
        "kind",
        "readers",
        "choices",
        "maximum",
        "error",
        "hint",
        "_parse",
    )

    def __init__(
        self,
        name: str,
        type: str,
        default: Any,
        doc: str,
        *,
        parse: Parser,
        shown_default: Optional[str] = None,
        kind: str = USER,
        readers: Tuple[str, ...] = (PIFLASH,),
        choices: Tuple[str, ...] = (),
        maximum: Optional[str] = None,
        error: Optional[str] = None,
        hint: Optional[str] = None,
    ) -> None:
        self.name = name
        self.type = type
        self.default = default
        self.doc = doc
        self.shown_default = (
            shown_default if shown_default is not None else ("unset" if default is None else str(default))
        )
        self.kind = kind
        self.readers = readers
        self.choices = choices
        self.maximum = maximum
        self.error = error
        self.hint = hint
        self._parse = parse

    def __repr__(self) -> str:
        return f"Setting({self.name!r})"

    @property
    def seam(self) -> bool:
        """Whether this is a test seam (:data:`SEAM`)."""
        return self.kind == SEAM

    def raw(self) -> Optional[str]:
        """The variable's text as the environment holds it now, or None when unset."""
        return os.environ.get(self.name)

    def value(self) -> Any:
        """The variable's value now, typed and checked (see :attr:`type` and the module docstring).

        :raises PiflashError: the subclass named by :attr:`error` for a value its type refuses
            (``PIFLASH_PROBE_TIMEOUT=abc``: ``ProbeSyntaxError``, exit 2).
        """
        return self._parse(self, self.raw())

    def refuse(self, message: str) -> Exception:
        """The error for a bad value: :attr:`error` of :mod:`piflash.errors` with ``message`` and :attr:`hint`."""
        from piflash import errors

        hint = self.hint.replace("{name}", self.name) if self.hint else None
        return getattr(errors, self.error or "PiflashError")(message, hint=hint)


# The types: each a parse(setting, raw) function. "Blank" is set to the empty string.


def _text(setting: Setting, raw: Optional[str]) -> Any:
    """Text; unset or blank gives the default."""
    return raw or setting.default


def _text_as_given(setting: Setting, raw: Optional[str]) -> Any:
    """Text; unset gives the default, blank stays blank (as ``os.environ.get(name, default)``)."""
    return setting.default if raw is None else raw


def _stripped(setting: Setting, raw: Optional[str]) -> Any:
    """Text without surrounding white space; unset or all white space gives the default."""
    return (raw or "").strip() or setting.default


def _flag(setting: Setting, raw: Optional[str]) -> bool:
    """False for ``0``, ``no``, ``off`` or ``false`` (any case, white space ignored), else True;
    unset gives the default."""
    if raw is None:
        return bool(setting.default)
    return raw.strip().lower() not in ("0", "no", "off", "false")


def _seconds(setting: Setting, raw: Optional[str]) -> Any:
    """A number of seconds checked by :func:`piflash.limits.seconds` (more than 0, at most the
    bound :attr:`Setting.maximum` names); unset or blank gives the default."""
    if not raw:
        return setting.default
    from piflash import limits

    try:
        return limits.seconds(raw, f"{setting.name}={raw!r:.40}", getattr(limits, str(setting.maximum)))
    except ValueError as exc:
        raise setting.refuse(str(exc).replace(f", not {raw!r:.40}", "")) from None


def _choice(setting: Setting, raw: Optional[str]) -> Any:
    """One of :attr:`Setting.choices` (any case, white space ignored); unset or blank gives the default."""
    word = (raw or "").strip().lower()
    if not word:
        return setting.default
    if word not in setting.choices:
        raise setting.refuse(f"{setting.name}={raw!r} is not one of {', '.join(setting.choices)}")
    return word


def _path_or_off(setting: Setting, raw: Optional[str]) -> Any:
    """:data:`OFF` for one of :attr:`Setting.choices` (any case, white space ignored; an empty
    word there makes blank mean off), else a :class:`~pathlib.Path`; unset (or blank, when it
    does not mean off) gives the default."""
    if raw is None:
        return setting.default
    if raw.strip().lower() in setting.choices:
        return OFF
    return Path(raw) if raw else setting.default


def _path_list(setting: Setting, raw: Optional[str]) -> Any:
    """``os.pathsep``-separated entries (list of str, empty ones dropped); unset or blank gives the default."""
    if not raw:
        return setting.default
    return [entry for entry in raw.split(os.pathsep) if entry]


def _first_of_list(setting: Setting, raw: Optional[str]) -> Any:
    """The first of colon-separated entries (systemd passes one per directory in the unit); unset
    or blank gives the default."""
    return raw.split(":")[0] if raw else setting.default


# The table. Product code reads a setting as settings.PIFLASH_HISTORY.value(), never os.environ.

PIFLASH_HISTORY = Setting(
    "PIFLASH_HISTORY",
    "path or off",
    None,
    "The history database; off, 0, no or false records nothing (a station then needs 'history:').",
    parse=_path_or_off,
    choices=("off", "0", "no", "false"),
    shown_default="$STATE_DIRECTORY/history.sqlite3, else $XDG_STATE_HOME/piflash/history.sqlite3",
)
PIFLASH_SERIALS = Setting(
    "PIFLASH_SERIALS",
    "path",
    None,
    "The serial-number database.",
    parse=_text,
    shown_default="serials.sqlite3 beside the history",
)
PIFLASH_CACHE = Setting(
    "PIFLASH_CACHE",
    "path or off",
    None,
    "The folder of parsed firmware images; off, 0, no or blank turns the cache off.",
    parse=_path_or_off,
    choices=("", "off", "0", "no"),
    shown_default="$CACHE_DIRECTORY, else $XDG_CACHE_HOME/piflash",
)
PIFLASH_LEDGER = Setting(
    "PIFLASH_LEDGER",
    "url",
    None,
    "The central ledger, postgresql://USER@HOST[:PORT]/DATABASE; --ledger or a station's 'ledger:' comes first.",
    parse=_text,
    readers=(PIFLASH, OPTION),
)
PIFLASH_STATION = Setting(
    "PIFLASH_STATION",
    "text",
    None,
    "The origin under which this machine's one-off rows (commands run with a ledger) go up to the ledger.",
    parse=_text,
    shown_default="one-off:HOST:ID8",
)
PIFLASH_STATION_CONFIG = Setting(
    "PIFLASH_STATION_CONFIG",
    "path",
    "/etc/piflash/station.yaml",
    "The station config when --config is not given (doctor and 'setup pins' check its pins when it exists).",
    parse=_text,
    readers=(PIFLASH, OPTION),
)
PIFLASH_PROFILE_PATH = Setting(
    "PIFLASH_PROFILE_PATH",
    "path list",
    None,
    "Directories searched for profiles (os.pathsep-separated), instead of the default list.",
    parse=_path_list,
    shown_default="./piflash.d, $XDG_CONFIG_HOME/piflash/profiles, /etc/piflash/profiles",
)
PIFLASH_MEMORY_GUARD = Setting(
    "PIFLASH_MEMORY_GUARD",
    "choice",
    None,
    "The memory guard: refuse, warn (never refuse) or off (do not check); overrides a profile's 'memory_guard'.",
    parse=_choice,
    choices=("refuse", "warn", "off"),
    error="GuardConfigError",
    hint="unset it, or set {name}=warn to never refuse",
    shown_default="the profile's, else refuse",
)
PIFLASH_PROBE_TIMEOUT = Setting(
    # Why 10 s: the comment on piflash.probe.remote.REPLY_TIMEOUT, which is this default.
    "PIFLASH_PROBE_TIMEOUT",
    "seconds",
    10.0,
    "Seconds to wait for one reply of a remote:HOST:PORT probe server (more than 0, at most 3600).",
    parse=_seconds,
    maximum="PROBE_TIMEOUT_MAX_S",
    error="ProbeSyntaxError",
    shown_default="10",
)
PIFLASH_DAP_BATCH = Setting(
    "PIFLASH_DAP_BATCH",
    "flag",
    True,
    "0 (or no, off, false) sends each CMSIS-DAP packet to a Debug Probe in its own USB transfer, as pyOCD does.",
    parse=_flag,
    shown_default="1",
)
PIFLASH_DAP_LEAN = Setting(
    "PIFLASH_DAP_LEAN",
    "flag",
    True,
    "0 (or no, off, false) leaves the DAP transfers of USB CMSIS-DAP probes to pyOCD's own encoding instead of piflash's lean one.",
    parse=_flag,
    shown_default="1",
)
PIFLASH_SETUP_SCRIPT = Setting(
    "PIFLASH_SETUP_SCRIPT",
    "text",
    "python3 -m piflash.probe.permissions",
    "The command named in the permission setup's 'run it with sudo' hint (set by scripts/setup-probe-permissions.sh).",
    parse=_text_as_given,
)
PIFLASH_SIM_DIR = Setting(
    "PIFLASH_SIM_DIR",
    "path",
    None,
    "Where the simulator keeps its boards.",
    parse=_text,
    readers=(SIMULATOR,),
    shown_default="$XDG_STATE_HOME/piflash/sim",
)

PIFLASH_SYSFS_ROOT = Setting(
    "PIFLASH_SYSFS_ROOT",
    "path",
    "/sys",
    "The sysfs tree the USB scan and doctor read.",
    parse=_text_as_given,
    kind=SEAM,
)
PIFLASH_DEV_ROOT = Setting(
    "PIFLASH_DEV_ROOT",
    "path",
    "/dev",
    "The device nodes the USB scan and doctor check.",
    parse=_text_as_given,
    kind=SEAM,
)
PIFLASH_SYSROOT = Setting(
    "PIFLASH_SYSROOT",
    "path",
    "/",
    "The root whose etc/group and etc/udev/rules.d the USB scan and doctor read.",
    parse=_text_as_given,
    kind=SEAM,
)
PIFLASH_BOOT_CONFIG = Setting(
    "PIFLASH_BOOT_CONFIG",
    "path",
    None,
    "The Raspberry Pi boot config whose SPI lines the doctor and 'setup pins' read.",
    parse=_text,
    shown_default="$PIFLASH_SYSROOT/boot/firmware/config.txt, else $PIFLASH_SYSROOT/boot/config.txt",
    kind=SEAM,
)
PIFLASH_PROC_ROOT = Setting(
    "PIFLASH_PROC_ROOT",
    "path",
    "/",
    "The root of the /proc and /sys files the memory guard and the machine's facts read.",
    parse=_text,
    kind=SEAM,
)
PIFLASH_TEST_KILL_AT = Setting(
    "PIFLASH_TEST_KILL_AT",
    "step",
    None,
    "SIGKILL the process right after this step of a serialised flash "
    "(leased, taken, programmed, verified, finished, recorded).",
    parse=_text,
    kind=SEAM,
)
PIFLASH_SIM_USB = Setting(
    "PIFLASH_SIM_USB",
    "device list",
    None,
    "Simulated USB probes in place of the real bus: BOARD[@PRESET][#SERIAL][!noaccess], comma-separated.",
    parse=_stripped,
    kind=SEAM,
    readers=(PIFLASH, SIMULATOR),
)
PIFLASH_SIM_PINS = Setting(
    "PIFLASH_SIM_PINS",
    "device list",
    None,
    "Simulated boards on the Pi's pins in place of the real /dev: BOARD@spidev:BUS.CS[:nreset=N] or "
    "BOARD@gpio:CHIP:swclk=N,swdio=N[,nreset=N], comma-separated.",
    parse=_stripped,
    kind=SEAM,
    readers=(PIFLASH, SIMULATOR),
)
PIFLASH_SIM_USB_LEDGER = Setting(
    "PIFLASH_SIM_USB_LEDGER",
    "path",
    None,
    "A file to which each simulated USB device appends its virtual clock's events (JSON lines), for benchmarks.",
    parse=_text,
    kind=SEAM,
    readers=(SIMULATOR,),
)

COLUMNS = Setting(
    "COLUMNS",
    "text",
    None,
    "The width of the output in characters (a shell sets it): tables fit it; a positive number, else ignored.",
    parse=_stripped,
    kind=SYSTEM,
)
STATE_DIRECTORY = Setting(
    "STATE_DIRECTORY",
    "directory list",
    None,
    "systemd's StateDirectory= (the first of a colon-separated list): where the history goes.",
    parse=_first_of_list,
    kind=SYSTEM,
)
RUNTIME_DIRECTORY = Setting(
    "RUNTIME_DIRECTORY",
    "directory list",
    None,
    "systemd's RuntimeDirectory= (the first of a colon-separated list): where the station's status.json goes.",
    parse=_first_of_list,
    kind=SYSTEM,
)
CACHE_DIRECTORY = Setting(
    "CACHE_DIRECTORY",
    "directory list",
    None,
    "systemd's CacheDirectory= (the first of a colon-separated list): where the image cache goes.",
    parse=_first_of_list,
    kind=SYSTEM,
)
XDG_STATE_HOME = Setting(
    "XDG_STATE_HOME",
    "path",
    None,
    "XDG base directory of state: the history and the simulator's boards.",
    parse=_text,
    kind=SYSTEM,
    readers=(PIFLASH, SIMULATOR),
    shown_default="~/.local/state",
)
XDG_CACHE_HOME = Setting(
    "XDG_CACHE_HOME",
    "path",
    None,
    "XDG base directory of caches: the image cache.",
    parse=_text,
    kind=SYSTEM,
    shown_default="~/.cache",
)
XDG_CONFIG_HOME = Setting(
    "XDG_CONFIG_HOME",
    "path",
    None,
    "XDG base directory of configuration: profiles (ignored unless absolute).",
    parse=_text,
    kind=SYSTEM,
    shown_default="~/.config",
)
SUDO_USER = Setting(
    "SUDO_USER",
    "user name",
    None,
    "The user who ran sudo: the one the permission setup adds to the group, and doctor names.",
    parse=_text,
    kind=SYSTEM,
)
NOTIFY_SOCKET = Setting(
    "NOTIFY_SOCKET",
    "socket path",
    None,
    "systemd's notify socket (Type=notify): the station reports READY, STATUS and WATCHDOG there.",
    parse=_text,
    kind=SYSTEM,
)
WATCHDOG_USEC = Setting(
    "WATCHDOG_USEC",
    "microseconds",
    None,
    "systemd's WatchdogSec=: the station pings at half of it.",
    parse=_text,
    kind=SYSTEM,
)
WATCHDOG_PID = Setting(
    "WATCHDOG_PID",
    "process ID",
    None,
    "The process systemd's watchdog is for; another process's ID means not this one.",
    parse=_text,
    kind=SYSTEM,
)

#: Every declared variable, in the order docs/environment.md lists them within a kind.
SETTINGS: Tuple[Setting, ...] = tuple(v for v in globals().values() if isinstance(v, Setting))
_BY_NAME: Dict[str, Setting] = {s.name: s for s in SETTINGS}


def by_name(name: str) -> Setting:
    """The declared :class:`Setting` called ``name`` (``"PIFLASH_HISTORY"``).

    :raises KeyError: no such variable is declared.
    """
    return _BY_NAME[name]


def environment(*settings: Setting) -> Dict[str, str]:
    """``{name: text}`` of those of ``settings`` that are set now (raw text, unset ones left
    out): for code that takes an environment mapping, such as the station's systemd notifier."""
    out = {}
    for setting in settings:
        raw = setting.raw()
        if raw is not None:
            out[setting.name] = raw
    return out
