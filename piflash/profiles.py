"""Board profiles: YAML files that say how to flash one board.

A profile is a small YAML mapping (``docs/profiles.md`` has the full story)::

    # piflash profile
    target: nrf52840            # pyOCD target type (required)
    probe: "0240000032044e45"   # probe unique ID (optional; the whole ID, or a prefix written 0240*)
    frequency: 4MHz             # SWD clock in Hz: an int, or "4MHz", "400kHz", "1000000"
    erase: auto                 # auto | sector | chip (default auto)
    firmware: build/app.hex     # required; relative to this file's directory
    sha256: 3a7b...             # optional; 64 hex digits the firmware must match
    base_address: 0x08000000    # required for .bin firmware, refused otherwise
    verify: true                # optional bool, default true
    reset: true                 # optional bool, default true
    description: "..."          # optional
    memory_guard: refuse        # optional: refuse | warn | off (see piflash/host/memguard.py)
    pack: packs/Vendor.DFP.pack # optional CMSIS pack(s) describing the target; a path or a list
    serial: {...}               # optional: per-board serial number (piflash/firmware/patch.py, docs/production.md)
    patch: [...]                # optional: more per-board bytes from templates
    protect: lock               # optional: lock | off -- read-out protection after a passed verify
    boot_check: {rtt: "PASS", timeout: 3}  # optional: prove the board starts (docs/boot-check.md)

Loading is strict: an unknown key, a value of the wrong type, a missing
required key or broken YAML raises :class:`~piflash.errors.ProfileError`
naming the file, the 1-based line and the key.  A key whose value is empty
(``null``) counts as absent.  Loading never reads the firmware file; call
:meth:`Profile.check_firmware` for that.

Profiles named without a path are searched for, in order, in ``./piflash.d/``,
``$XDG_CONFIG_HOME/piflash/profiles/`` (default ``~/.config/...``) and
:data:`SYSTEM_PROFILE_DIR`; ``$PIFLASH_PROFILE_PATH`` (``os.pathsep``-separated)
replaces that list when set.  This module does not import pyOCD.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import os
import re
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, List, NoReturn, Optional, Tuple, Union

from piflash import settings
from piflash.errors import (
    ChecksumError,
    FirmwareError,
    PackError,
    PiflashError,
    ProfileError,
)
from piflash.firmware.image import ALL_SUFFIXES, format_for_name, open_firmware
from piflash.firmware.patch import PatchPlan, parse_plan
from piflash.jobs.options import ERASE_MODES
from piflash.production.bootcheck import BootCheck, boot_check_from_mapping

if TYPE_CHECKING:
    from piflash.firmware.image import FirmwareImage
    from piflash.host.memguard import MemoryVerdict

#: System-wide profile directory, searched last (tests may monkeypatch it).
SYSTEM_PROFILE_DIR = Path("/etc/piflash/profiles")
#: Environment variable that, when set, replaces the profile search list.
PROFILE_PATH_ENV = settings.PIFLASH_PROFILE_PATH.name

#: Every key a profile may contain.
ALLOWED_KEYS = (
    "target",
    "probe",
    "frequency",
    "erase",
    "firmware",
    "sha256",
    "base_address",
    "verify",
    "reset",
    "description",
    "memory_guard",
    "pack",
    "serial",
    "patch",
    "protect",
    "boot_check",
)
#: Accepted values of ``protect`` (piflash/production/protect.py): lock after a passed verify, or leave open.
PROTECT_MODES = ("lock", "off")
#: Accepted values of ``memory_guard`` (as piflash.host.memguard.GUARD_MODES; kept here so loading a
#: profile does not import the guard).
MEMORY_GUARD_MODES = ("refuse", "warn", "off")
REQUIRED_KEYS = ("target", "firmware")

_SHA256_RE = re.compile(r"[0-9a-fA-F]{64}")
_FREQ_RE = re.compile(r"(\d+(?:\.\d+)?)\s*([km]?)(?:hz)?", re.IGNORECASE)
_CHUNK = 1 << 20  # bytes read at a time when hashing firmware
#: Bytes a profile or station config may have. The largest in the docs and tests is under 4 KiB; a
#: profile with a few hundred patch entries stays far below this. Checked before the file is read.
MAX_YAML_BYTES = 1 << 20
#: Values (scalars, lists, mappings) a profile or station config may hold once YAML's aliases are
#: expanded. An alias repeats a node without copying it, so nine aliases of nine lists make a
#: billion values from a few hundred bytes (the "billion laughs"); every piflash key is read
#: and printed expanded. Counted on the composed nodes, each alias once per use, before any
#: value is built.
MAX_YAML_VALUES = 50_000

PathLike = Union[str, "os.PathLike[str]"]


@dataclasses.dataclass(frozen=True)
class Profile:
    """One validated profile.  Units: ``frequency`` in Hz, ``base_address`` a byte address."""

    name: str  #: file stem, e.g. "nrf52-dk"
    path: Path  #: the profile file, resolved
    target: str  #: pyOCD target type
    probe: Optional[str]  #: probe unique ID, or None for "the only probe"
    frequency: Optional[int]  #: SWD/JTAG clock in Hz, or None for the target's default (piflash/targets/clocks.py)
    erase: str  #: "auto", "sector" or "chip"
    firmware: Path  #: firmware file, absolute and resolved
    sha256: Optional[str]  #: expected digest, 64 lowercase hex digits, or None
    base_address: Optional[int]  #: load address of a .bin image, else None
    verify: bool = True  #: read back and compare after programming
    reset: bool = True  #: reset and run the target afterwards
    description: Optional[str] = None
    memory_guard: Optional[str] = None  #: "refuse", "warn", "off", or None for the default
    pack: Optional[Tuple[str, ...]] = None  #: CMSIS pack paths (absolute), pyOCD's ``pack`` option
    patch_plan: Optional[PatchPlan] = None  #: per-board serial / patch entries, or None
    protect: Optional[str] = None  #: "lock" after a passed verify, or None / "off"
    boot_check: Optional[BootCheck] = None  #: what proves the board starts after the reset, or None
    #: the checked list of per-unit values (``list:``: :class:`piflash.production.unitlist.UnitList`), or None
    unit_list: Optional[Any] = dataclasses.field(default=None, repr=False, compare=False)

    @property
    def firmware_format(self) -> str:
        """``"hex"``, ``"elf"``, ``"bin"`` or ``"uf2"``, from the firmware file's extension."""
        return format_for_name(self.firmware)

    def session_options(self) -> Optional[dict]:
        """The pyOCD session options this profile sets: ``{"pack": [paths]}`` when it names a
        pack, else None."""
        return {"pack": list(self.pack)} if self.pack else None

    def check_firmware(self) -> str:
        """Hash the firmware file and compare it with :attr:`sha256` (if set).

        :returns: the file's SHA-256 as 64 lowercase hex digits.
        :raises FirmwareError: the file is missing, not a regular file (a directory, FIFO, device)
            or unreadable.
        :raises ChecksumError: :attr:`sha256` is set and differs from the file's digest.
        """
        digest = hashlib.sha256()
        if not os.path.lexists(self.firmware):
            raise FirmwareError(
                f"firmware file not found: {self.firmware}", hint=f"build it, or fix 'firmware' in {self.path}"
            )
        try:
            with open_firmware(self.firmware) as f:  # refuses a FIFO or device (it would block)
                for chunk in iter(lambda: f.read(_CHUNK), b""):
                    digest.update(chunk)
        except OSError as e:
            raise FirmwareError(f"cannot read firmware file {self.firmware}: {e.strerror or e}") from None
        return self.check_digest(digest.hexdigest())

    def check_digest(self, actual: str) -> str:
        """Compare a firmware SHA-256 (64 hex digits) with :attr:`sha256`, if set.

        :returns: ``actual``.
        :raises ChecksumError: :attr:`sha256` is set and differs.
        """
        if self.sha256 is not None and actual != self.sha256:
            raise ChecksumError(
                f"firmware {self.firmware} has SHA-256 {actual}, but profile {self.path} expects {self.sha256}",
                hint=f"if this firmware is the intended one, set 'sha256: {actual}' in the profile "
                f"('piflash profile check {self.name}' prints the actual digest)",
            )
        return actual

    def load_image(self) -> "FirmwareImage":
        """Load the firmware and check it: the one place a profile's image is made ready.

        Parses the whole file, compares its SHA-256 with :attr:`sha256` (if set) and, for a
        target with a memory map known before connecting (a builtin class's, or a part of
        :attr:`pack`), checks the image lies in its flash.

        :returns: the :class:`piflash.firmware.image.FirmwareImage`.
        :raises FirmwareError: missing, unreadable, corrupt or empty file (exit 3).
        :raises ChecksumError: the digest differs from :attr:`sha256` (exit 6).
        :raises ImageRangeError: data outside the target's flash (exit 4).
        :raises UnknownTargetError, PackError: the target is neither builtin nor in :attr:`pack`
            (exit 2; :func:`load_profile` with ``check_target`` reports them at their line).
        """
        from piflash.firmware.image import check_fits, load_image
        from piflash.targets.catalog import resolve_target

        try:
            regions = resolve_target(self.target, self.pack).flash_regions
        except PiflashError:
            regions = None  # raised again below, after the file's own errors, as before
        image = load_image(
            self.firmware, self.base_address, flash_regions=regions, target=self.target, on_digest=self.check_digest
        )
        regions = resolve_target(self.target, self.pack).flash_regions
        if regions is not None:
            check_fits(image, regions, self.target)
        return image

    def with_overrides(self, **overrides: Any) -> "Profile":
        """A copy with every override that is not None applied (e.g. from command-line options).

        Values are normalised as in a file: ``frequency`` may be a string like "4MHz",
        ``firmware`` a str/path (relative to the current directory), ``sha256`` any case.
        Overriding ``firmware`` drops the profile's ``sha256`` (it pinned the old file)
        unless ``sha256`` is overridden too, and drops ``base_address`` if the new file
        is not a .bin.

        :raises ProfileError: (with ``path`` None, as no file is at fault) an override is
            invalid: bad frequency, erase mode, sha256 or firmware extension, or a .bin
            firmware without a base address (or a base address for a non-.bin firmware).
        :raises TypeError: an override names no field of :class:`Profile`.
        """
        changes = {k: v for k, v in overrides.items() if v is not None}
        if "frequency" in changes:
            changes["frequency"] = parse_frequency(changes["frequency"])
        if "erase" in changes and changes["erase"] not in ERASE_MODES:
            raise ProfileError(f"must be one of {', '.join(ERASE_MODES)}, got {changes['erase']!r}", key="erase")
        if "sha256" in changes:
            changes["sha256"] = _check_sha256(changes["sha256"], None, None)
        if "firmware" in changes:
            changes["firmware"] = Path(changes["firmware"]).expanduser().resolve()
            if _firmware_format(changes["firmware"], None, None) != "bin":
                changes.setdefault("base_address", None)
            changes.setdefault("sha256", None)
        new = dataclasses.replace(self, **changes)
        if (new.firmware_format == "bin") != (new.base_address is not None):
            raise ProfileError(
                f"a base address is needed for a .bin firmware and only for one; "
                f"got {new.firmware.name} with base address {new.base_address}",
                key="base_address",
            )
        return new


#: Accepted SWD clock range, Hz. The wire protocols do not bound it usefully: CMSIS-DAP's
#: DAP_SWJ_Clock command carries any 32-bit Hz value (CMSIS-DAP 2.x, "DAP_SWJ_Clock") and a probe
#: silently rounds what it cannot do. 100 MHz is above the fastest SWD clock of any probe pyOCD
#: drives (ST-LINK/V3: 24 MHz, UM2448; DAPLink and other CMSIS-DAP firmware: tens of MHz at
#: most); 1 kHz is below the slowest setting any of them offers (ST-LINK/V2: 5 kHz). A value
#: outside the range is a typo (a missing "k"/"M" or extra zeros), not a wish.
FREQUENCY_MIN = 1_000
FREQUENCY_MAX = 100_000_000


def parse_frequency(value: Any, path: Optional[str] = None, line: Optional[int] = None) -> int:
    """Convert a clock frequency to whole Hz.

    :param value: a positive int (Hz) or a string such as "4000000", "4MHz", "400 kHz",
        "1.5M" (k/M prefixes, "Hz" optional, case-insensitive).
    :returns: frequency in Hz (int, :data:`FREQUENCY_MIN` to :data:`FREQUENCY_MAX`).
    :raises ProfileError: (key "frequency") anything else, including bools, floats, 0 and values
        outside that range.
    """
    hz: Optional[Decimal] = None
    if isinstance(value, int) and not isinstance(value, bool):
        hz = Decimal(value)
    elif isinstance(value, str):
        m = _FREQ_RE.fullmatch(value.strip())
        if m:
            hz = Decimal(m.group(1)) * {"": 1, "k": 1000, "m": 1000000}[m.group(2).lower()]
    if hz is None:
        raise ProfileError(
            f"expected a frequency in Hz (an integer, or a string like '4MHz' or '400kHz'), got {_describe(value)}",
            path=path,
            line=line,
            key="frequency",
        )
    if hz <= 0 or hz != hz.to_integral_value():
        raise ProfileError(
            f"must be a positive whole number of Hz, got {_describe(value)}", path=path, line=line, key="frequency"
        )
    if not FREQUENCY_MIN <= hz <= FREQUENCY_MAX:
        raise ProfileError(
            f"must be between 1 kHz and 100 MHz (the SWD clocks probes support), got {_describe(value)}",
            path=path,
            line=line,
            key="frequency",
        )
    return int(hz)


def read_bounded(path: Path, limit: int, what: str) -> bytes:
    """The bytes of ``path``, refused before reading when it has more than ``limit`` bytes.

    Reads at most ``limit + 1`` bytes whatever the file claims (a FIFO or a file that grows).

    :raises ProfileError: (exit 5) unreadable, not a regular file, or too large.
    """
    import stat

    try:
        # Opened without blocking: opening a FIFO for reading would wait for a writer for ever.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        with open(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise ProfileError(f"cannot read {what}: not a regular file", path=str(path))
            data = f.read(limit + 1)
    except OSError as e:
        raise ProfileError(f"cannot read {what}: {e.strerror or e}", path=str(path)) from None
    if len(data) > limit:
        raise ProfileError(f"{what} is larger than {limit:,} bytes: not a piflash {what}", path=str(path))
    return data


def expanded_size(node, limit: int) -> int:
    """How many values (scalars, sequences, mappings: keys and values) the composed YAML ``node``
    holds with every alias expanded, counted up to just past ``limit`` (int) and no further:
    the time is bounded by the distinct nodes and ``limit``, not by the expansion."""
    import yaml

    memo: dict = {}

    def size(n, depth: int) -> int:
        key = id(n)
        if key in memo:
            return memo[key]
        if depth > 200:  # a self-referencing alias, or absurd nesting
            return limit + 1
        total = 1
        if isinstance(n, yaml.SequenceNode):
            for child in n.value:
                total += size(child, depth + 1)
                if total > limit:
                    break
        elif isinstance(n, yaml.MappingNode):
            for k, v in n.value:
                total += size(k, depth + 1) + size(v, depth + 1)
                if total > limit:
                    break
        memo[key] = min(total, limit + 1)
        return memo[key]

    return size(node, 0)


def read_yaml_mapping(
    src: str,
    allowed_keys: Tuple[str, ...],
    what: str = "profile",
    text_keys: Tuple[str, ...] = (),
    empty: Optional[str] = None,
) -> Tuple[dict, dict, int]:
    """Read a YAML file whose top level is a mapping of known keys, keeping each key's line.

    Shared by profiles and the station config (:mod:`piflash.station.config`).

    :param src: the file's path (str), as it should appear in messages.
    :param allowed_keys: the keys the file may contain (others are refused, with a suggestion).
    :param what: what the file is, for messages ("profile", "station config").
    :param text_keys: keys whose scalar value is kept as written (IDs and digests that YAML
        would otherwise read as numbers).
    :param empty: the message for an empty file.
    :returns: ``(values, lines, root_line)``: values by key (a null value counts as absent),
        the 1-based line of each key given, and the line where the mapping starts.
    :raises ProfileError: unreadable file, YAML syntax error, empty file, top level not a
        mapping, a key that is unknown, duplicated or not a plain word, or a bad value.
    """
    import yaml

    try:
        text = read_bounded(Path(src), MAX_YAML_BYTES, what).decode("utf-8")
    except UnicodeDecodeError as e:
        raise ProfileError(f"cannot read {what}: {e}", path=src) from None
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        problem = e.problem or e.context
        if e.context and e.problem and e.problem.startswith("but "):
            problem = f"{e.context}, {e.problem}"  # e.g. a second document in the file
        raise ProfileError(
            f"YAML syntax error: {problem}", path=src, line=_syntax_error_line(e, text) if mark else None
        ) from None
    except yaml.YAMLError as e:
        raise ProfileError(f"YAML error: {e}", path=src) from None
    if root is None or root.tag == "tag:yaml.org,2002:null":
        raise ProfileError(empty or f"{what} is empty", path=src)
    values_held = expanded_size(root, MAX_YAML_VALUES)
    if values_held > MAX_YAML_VALUES:
        raise ProfileError(
            f"{what} holds more than {MAX_YAML_VALUES:,} values once its YAML aliases "
            "(*name) are expanded: refused before reading them",
            path=src,
            hint="write the values out, or use fewer aliases; piflash's keys need few values",
        )
    if not isinstance(root, yaml.MappingNode):
        raise ProfileError(
            f"top level must be a mapping of keys to values, not a "
            f"{'list' if isinstance(root, yaml.SequenceNode) else 'single value'}",
            path=src,
            line=root.start_mark.line + 1,
        )

    constructor = yaml.SafeLoader("")
    values, lines = {}, {}
    for knode, vnode in root.value:
        kline = knode.start_mark.line + 1
        if not isinstance(knode, yaml.ScalarNode) or knode.tag != "tag:yaml.org,2002:str":
            raise ProfileError(
                f"keys must be plain words, got {knode.value!r}"
                if isinstance(knode, yaml.ScalarNode)
                else "keys must be plain words",
                path=src,
                line=kline,
            )
        key = knode.value
        if key not in allowed_keys:
            close = difflib.get_close_matches(key, allowed_keys, n=1)
            guess = f" (did you mean '{close[0]}'?)" if close else ""
            raise ProfileError(
                f"unknown key{guess}; allowed keys: {', '.join(allowed_keys)}", path=src, line=kline, key=key
            )
        if key in lines:
            raise ProfileError(f"duplicate key (first given on line {lines[key]})", path=src, line=kline, key=key)
        lines[key] = kline
        try:
            value = constructor.construct_object(vnode, deep=True)
        except yaml.MarkedYAMLError as e:
            raise ProfileError(f"bad value: {e.problem}", path=src, line=kline, key=key) from None
        # IDs and digests may look like numbers to YAML: keep their text as written.
        if key in text_keys and isinstance(vnode, yaml.ScalarNode) and value is not None:
            value = vnode.value
        if value is not None:
            values[key] = value

    return values, lines, root.start_mark.line + 1


def _syntax_error_line(error, text: str) -> int:
    """1-based line of a YAML syntax error, as a user counts it.

    PyYAML marks where it noticed the problem; for a construct left open (an unclosed ``[``,
    ``{`` or quote) that is the end of the stream, the line after the last one, while the
    mistake is where the construct started: its ``context_mark``.
    """
    mark = error.problem_mark or error.context_mark
    line = mark.line + 1
    if error.problem_mark is not None and mark.index >= len(text.rstrip()):
        line = error.context_mark.line + 1 if error.context_mark is not None else text.rstrip().count("\n") + 1
    return line


def load_profile(path: PathLike, check_target: Optional[Callable[[str], str]] = None) -> Profile:
    """Read and validate one profile file.

    :param path: the YAML file (str or path-like).
    :param check_target: optional validator of the target type (e.g.
        :func:`piflash.targets.catalog.check_target`, which imports pyOCD): returns the normalised name
        or raises a PiflashError, reported at the 'target' key's line. When the profile names
        a ``pack``, it is called as ``check_target(target, packs)`` and a
        :class:`~piflash.errors.PackError` is reported at the 'pack' key's line.
    :returns: a :class:`Profile`; the firmware file itself is not opened.
    :raises ProfileError: unreadable file, YAML syntax error, empty file, top level not a
        mapping, unknown/duplicate/missing key or bad value; the error's ``path``, ``line``
        (1-based) and ``key`` say where.
    """
    src = os.fspath(path)
    values, lines, root_line = read_yaml_mapping(
        src,
        ALLOWED_KEYS,
        "profile",
        text_keys=("probe", "sha256"),
        empty="profile is empty; it needs at least 'target' and 'firmware'",
    )

    def fail(key: str, message: str, hint: Optional[str] = None) -> NoReturn:
        raise ProfileError(message, path=src, line=lines.get(key, root_line), key=key, hint=hint)

    for key in REQUIRED_KEYS:
        if key not in values:
            fail(key, "required key is missing" if key not in lines else "must not be empty")

    def text(key: str, default: Optional[str] = None, blank_ok: bool = False) -> Optional[str]:
        value = values.get(key, default)
        if value is not None and not isinstance(value, str):
            scalar = isinstance(value, (int, float, bool))
            fail(
                key,
                f"expected a string, got {_describe(value)}",
                hint=f'quote it: {key}: "{value}"' if scalar else None,
            )
        if value is not None and not blank_ok and not value.strip():
            fail(key, "must not be empty")
        return value

    def flag(key: str) -> bool:
        value = values.get(key, True)
        if not isinstance(value, bool):
            fail(key, f"expected true or false, got {_describe(value)}", hint="write true or false, without quotes")
        return value

    pfile = Path(src).resolve()
    target, probe, description = text("target"), text("probe"), text("description", blank_ok=True)
    if probe is not None:
        from piflash.probe.selector import ProbeSelector

        try:
            probe = str(ProbeSelector.parse(probe))
        except PiflashError as e:
            fail("probe", e.message, e.hint)
    pack = None
    if "pack" in values:
        raw = values["pack"]
        items = raw if isinstance(raw, list) else [raw]
        if not items or not all(isinstance(p, str) and p.strip() for p in items):
            fail("pack", f"expected the path of a CMSIS pack, or a list of paths, got {_describe(raw)}")
        pack = tuple(str((pfile.parent / Path(p.strip()).expanduser()).resolve()) for p in items)
    if check_target is not None:
        try:
            target = check_target(target, pack) if pack else check_target(target)
        except PackError as e:
            fail("pack", e.message, e.hint)
        except PiflashError as e:
            fail("target", e.message, e.hint)
    firmware = (pfile.parent / Path(text("firmware")).expanduser()).resolve()
    fmt = _firmware_format(firmware, src, lines["firmware"])
    erase = text("erase", "auto")
    if erase not in ERASE_MODES:
        close = difflib.get_close_matches(erase, ERASE_MODES, n=1)
        fail(
            "erase",
            f"must be one of {', '.join(ERASE_MODES)}, got {erase!r}"
            + (f" (did you mean '{close[0]}'?)" if close else ""),
        )
    memory_guard = values.get("memory_guard")
    if memory_guard is False:  # YAML 1.1 reads a bare `off` as false
        memory_guard = "off"
    if memory_guard is not None and memory_guard not in MEMORY_GUARD_MODES:
        is_text = isinstance(memory_guard, str)
        close = difflib.get_close_matches(memory_guard, MEMORY_GUARD_MODES, n=1) if is_text else []
        fail(
            "memory_guard",
            f"must be one of {', '.join(MEMORY_GUARD_MODES)}, got "
            + (repr(memory_guard) if is_text else _describe(memory_guard))
            + (f" (did you mean '{close[0]}'?)" if close else ""),
        )
    frequency = None
    if "frequency" in values:
        frequency = parse_frequency(values["frequency"], path=src, line=lines["frequency"])
    sha256 = None
    if "sha256" in values:
        sha256 = _check_sha256(text("sha256"), src, lines["sha256"])
    base = values.get("base_address")
    if base is not None:
        if not isinstance(base, int) or isinstance(base, bool):
            fail("base_address", f"expected an integer address such as 0x08000000, got {_describe(base)}")
        if not 0 <= base <= 0xFFFFFFFF:
            fail("base_address", f"must be a 32-bit address (0 to 0xFFFFFFFF), got {base:#x}")
        if fmt != "bin":
            fail(
                "base_address",
                f"only a .bin firmware takes a base address; {firmware.name} carries its own addresses",
                hint="remove base_address from the profile",
            )
    elif fmt == "bin":
        fail(
            "firmware",
            f"a .bin firmware needs 'base_address' (where {firmware.name} goes in flash)",
            hint="add e.g. 'base_address: 0x08000000'",
        )

    def fail_nested(dotted: str, message: str) -> NoReturn:  # "serial.encoding": the line of serial:
        raise ProfileError(message, path=src, line=lines.get(dotted.split(".")[0].split("[")[0], root_line), key=dotted)

    plan = parse_plan(values.get("serial"), values.get("patch"), target, pfile.stem, fail_nested, pfile.parent)
    from piflash.production.unitlist import load_list

    unit_list = load_list(plan)  # checked now: a malformed list is a profile error (file:line)
    protect = values.get("protect")
    if protect is False:  # YAML 1.1 reads a bare `off` as false
        protect = "off"
    if protect is not None and protect not in PROTECT_MODES:
        fail("protect", f"must be one of {', '.join(PROTECT_MODES)}, got {protect!r}")
    if protect == "lock" and not flag("verify"):
        fail(
            "protect",
            "a board is locked only after a passed verify; 'verify: false' never passes one",
            hint="remove 'verify: false', or 'protect: lock'",
        )
    boot_check = None
    raw_check = values.get("boot_check")
    if raw_check is not None:
        if not isinstance(raw_check, dict):
            fail("boot_check", f"must be a mapping such as {{rtt: 'PASS', timeout: 3}}, got {_describe(raw_check)}")
        try:
            boot_check = boot_check_from_mapping(raw_check)
        except ValueError as exc:
            fail("boot_check", str(exc), hint="see docs/boot-check.md")
        if not flag("reset"):
            fail(
                "boot_check",
                "the boot check runs the firmware that the reset starts; 'reset: false' never starts it",
                hint="remove 'reset: false', or 'boot_check'",
            )
    return Profile(
        name=pfile.stem,
        path=pfile,
        target=target,
        probe=probe,
        frequency=frequency,
        erase=erase,
        firmware=firmware,
        sha256=sha256,
        base_address=base,
        verify=flag("verify"),
        reset=flag("reset"),
        description=description,
        memory_guard=memory_guard,
        pack=pack,
        patch_plan=plan,
        protect=protect if protect == "lock" else None,
        boot_check=boot_check,
        unit_list=unit_list,
    )


def profile_dirs(cwd: Optional[PathLike] = None) -> List[Path]:
    """The directories searched for profiles, in order.

    ``$PIFLASH_PROFILE_PATH`` (``os.pathsep``-separated; relative entries are taken
    from *cwd*) replaces the default list when set and non-empty.  Otherwise:
    ``<cwd>/piflash.d``, ``$XDG_CONFIG_HOME/piflash/profiles`` (``~/.config`` when
    unset or not absolute) and :data:`SYSTEM_PROFILE_DIR`.

    :param cwd: directory to take relative paths from; default the current directory.
    """
    base = Path(cwd) if cwd is not None else Path.cwd()
    entries = settings.PIFLASH_PROFILE_PATH.value()
    if entries is not None:
        return [base / Path(p).expanduser() for p in entries]
    xdg = settings.XDG_CONFIG_HOME.value()
    # expanduser, not Path.home(): a service's DynamicUser has no passwd entry and may have no $HOME
    config = Path(xdg) if xdg and os.path.isabs(xdg) else Path(os.path.expanduser("~")) / ".config"
    return [base / "piflash.d", config / "piflash" / "profiles", Path(SYSTEM_PROFILE_DIR)]


def find_profile(name_or_path: PathLike, cwd: Optional[PathLike] = None) -> Path:
    """Locate a profile by name or path.

    An existing file, or anything containing a path separator or ending in .yaml/.yml,
    is taken as a path (relative to *cwd*).  Otherwise ``<name>.yaml`` then
    ``<name>.yml`` is looked for in each of :func:`profile_dirs`, first match wins.

    :returns: the profile file's path (not loaded or validated).
    :raises ProfileError: the path does not exist, or the name is in no directory
        (the message lists the directories searched).
    """
    arg = os.fspath(name_or_path)
    base = Path(cwd) if cwd is not None else Path.cwd()
    candidate = base / Path(arg).expanduser()
    if arg and (candidate.is_file() or "/" in arg or os.sep in arg or arg.lower().endswith((".yaml", ".yml"))):
        if not candidate.is_file():
            raise ProfileError("profile file not found", path=arg)
        return candidate
    if not arg:
        raise ProfileError("no profile name given")
    dirs = profile_dirs(cwd)
    for d in dirs:
        for ext in (".yaml", ".yml"):
            if (d / (arg + ext)).is_file():
                return d / (arg + ext)
    raise ProfileError(
        f"profile '{arg}' not found; searched: {', '.join(map(str, dirs))}",
        hint="'piflash profile list' shows the profiles available",
    )


def list_profiles(cwd: Optional[PathLike] = None) -> List[Tuple[str, Path, Optional[str], Optional[str]]]:
    """Every profile visible in :func:`profile_dirs`, sorted by name.

    Where a name appears more than once, the first in search order wins (as for
    :func:`find_profile`).  Broken profiles are listed too.

    :returns: ``(name, path, error, description)`` tuples; ``error`` is the ProfileError
        message (str) for a profile that does not load, else None; ``description`` the
        profile's ``description:`` (None when it has none or does not load).  Never raises
        ProfileError.
    """
    found = {}
    for d in profile_dirs(cwd):
        for ext in (".yaml", ".yml"):
            try:
                files = sorted(d.glob("*" + ext))
            except OSError:
                continue
            for f in files:
                if f.name.startswith(".") or f.stem in found or not f.is_file():
                    continue
                try:
                    found[f.stem] = (f.stem, f, None, load_profile(f).description)
                except ProfileError as e:
                    found[f.stem] = (f.stem, f, e.message, None)
    return [found[name] for name in sorted(found)]


def profile_to_dict(profile: Profile) -> dict:
    """The profile as a JSON-friendly dict: one entry per field, paths as str, ints as int."""
    out = dataclasses.asdict(dataclasses.replace(profile, unit_list=None))
    ulist = profile.unit_list
    out["unit_list"] = (
        {"path": str(ulist.path), "sha256": ulist.sha256, "rows": len(ulist), "columns": list(ulist.used)}
        if ulist is not None
        else None
    )
    out["path"], out["firmware"] = str(profile.path), str(profile.firmware)
    out["pack"] = list(profile.pack) if profile.pack is not None else None
    if out.get("patch_plan"):
        for entry in out["patch_plan"]["entries"]:
            entry["address"] = f"{entry['address']:#010x}"
        out["patch_plan"]["entries"] = list(out["patch_plan"]["entries"])
    if profile.boot_check is not None:
        out["boot_check"] = {"check": profile.boot_check.spec, "timeout": profile.boot_check.timeout}
    return out


def profile_yaml(data: dict) -> str:
    """``data`` (:func:`piflash.profiles.profile_to_dict`) as a YAML document, by PyYAML's
    ``safe_dump``: the same keys and values as ``--json`` (unset ones ``null``), in the same
    order, with addresses (``base_address``, the patch entries' ``address``) as plain hex
    integers (``0x10001080``), which YAML reads back as the numbers they are."""
    import json

    import yaml

    class Hex(int):
        """An address: written 0x%08x."""

    class Dumper(yaml.SafeDumper):
        pass

    Dumper.add_representer(
        Hex, lambda dumper, value: dumper.represent_scalar("tag:yaml.org,2002:int", f"{value:#010x}")
    )
    plain = json.loads(json.dumps(data))  # tuples as lists: what --json prints
    if plain.get("base_address") is not None:
        plain["base_address"] = Hex(plain["base_address"])
    for entry in (plain.get("patch_plan") or {}).get("entries", []):
        if isinstance(entry.get("address"), str):
            entry["address"] = Hex(int(entry["address"], 16))
    return yaml.dump(plain, Dumper=Dumper, sort_keys=False, allow_unicode=True, default_flow_style=False, width=100)


def _firmware_format(firmware: Path, src: Optional[str], line: Optional[int]) -> str:
    fmt = format_for_name(firmware)
    if fmt is None:
        raise ProfileError(
            f"firmware file name must end in {', '.join(ALL_SUFFIXES)}, got '{firmware.name}'",
            path=src,
            line=line,
            key="firmware",
        )
    return fmt


def _check_sha256(value: Any, src: Optional[str], line: Optional[int]) -> str:
    if not isinstance(value, str) or not _SHA256_RE.fullmatch(value.strip()):
        raise ProfileError(
            f"expected 64 hexadecimal digits (a SHA-256 digest), got {_describe(value)}",
            path=src,
            line=line,
            key="sha256",
        )
    return value.strip().lower()


def _describe(value: Any) -> str:
    """ "integer 5", "string 'yes'", ... for error messages (long values shortened)."""
    shown = repr(value)
    if len(shown) > 40:
        shown = shown[:37] + "..."
    kind = {bool: "boolean", int: "integer", float: "number", str: "string", list: "list", dict: "mapping"}.get(
        type(value), type(value).__name__
    )
    return f"{kind} {shown}"


# --- the memory guard for a job a profile describes ---------------------------------------------


def check_job(
    operation: str,
    firmware: Optional[PathLike] = None,
    profile: Optional[str] = None,
    options: Optional[dict] = None,
    *,
    force: bool = False,
    root: Optional[PathLike] = None,
    warn: Optional[Callable[[str], None]] = None,
) -> Optional["MemoryVerdict"]:
    """:func:`piflash.host.memguard.check_memory` for a job as the CLI and the station describe it.

    Works out the sizes without parsing anything heavy: for the operations that load an image
    (:data:`piflash.host.memguard.IMAGE_OPERATIONS`) the firmware file's size and format (``firmware``, else the
    profile's ``firmware``), the pack from pyOCD session ``options``
    (``{"pack": path or [paths]}``, as ``-O pack=FILE`` gives it), else the profile's ``pack``,
    and the mode (``$PIFLASH_MEMORY_GUARD``, else the profile's ``memory_guard``).
    ``PIFLASH_MEMORY_GUARD=off`` returns at once, before any file is read.

    :param profile: a profile name or path (:func:`find_profile`), or None.
    :raises MemoryGuardError: see :func:`piflash.host.memguard.check_memory`.
    :raises ProfileError: the profile cannot be found or is invalid (its target is not checked
        here: that needs pyOCD).
    """
    from piflash.host import memguard

    mode = memguard.guard_mode()
    if mode == "off":
        return None
    loads_image = operation in memguard.IMAGE_OPERATIONS
    if not loads_image:
        firmware = None
    packs = (options or {}).get("pack")
    env_mode = settings.PIFLASH_MEMORY_GUARD.raw()
    if profile and (not env_mode or (loads_image and not firmware) or packs is None):
        prof = load_profile(find_profile(profile))
        if not env_mode:
            mode = memguard.guard_mode(prof.memory_guard)
        if loads_image:
            firmware = firmware or prof.firmware
        if packs is None:
            packs = prof.pack
    image_bytes, image_format = 0, None
    if firmware:
        try:
            image_bytes = os.stat(firmware).st_size
        except OSError:
            image_bytes = 0  # loading it reports the problem
        image_format = format_for_name(firmware)
    pack_bytes = memguard.pack_description_bytes(packs)
    return memguard.check_memory(
        operation, image_bytes, pack_bytes, image_format, mode=mode, force=force, root=root, warn=warn
    )
