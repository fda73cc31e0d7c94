"""Per-board data patched into the image: a serial number and other ``patch:`` entries.

A profile may say (``docs/production.md``)::

    serial:                       # the board's number, from a counter
      uicr_customer: 0            # where: nRF UICR CUSTOMER[0] (or address: / otp:)
      encoding: u32               # u32 | u64 (little-endian) | ascii | utf-8
      start: 1000                 # the counter: first number, step, last number
      step: 1
      end: 99999
    patch:                        # more per-board bytes, rendered from a template
      - name: label
        address: 0x000FF000
        encoding: ascii
        length: 16                # fixed length, padded with 'pad' (default 0x00)
        template: "SN-{n:06d}-{date}"

Where: ``address:`` any byte address in flash; ``uicr_customer: N`` the nRF UICR customer
registers CUSTOMER[0..31] at 0x10001080 + 4*N (nRF52840 Product Specification v1.7 section 4.5 and
nRF51 Series Reference Manual v3.0 section 8.1, UICR register tables, offset 0x080); ``otp: OFFSET``
the STM32 one-time-programmable area where the part has one (F2/F4: 0x1FFF7800, RM0090 section
3.8) -- the STM32F1 has none (RM0008 has no OTP area) and is refused.
Templates take ``{n}`` (the serial number, an int: ``{n:06d}``, ``{n:x}``), ``{target_uid}``
(the chip's unique ID, hex), ``{date}`` (UTC, YYYY-MM-DD) and, for an entry with ``list:``,
``{value}`` (its column's value in the board's row); nothing else (no attributes, no indexing: a
profile string never reaches Python beyond ``str.format`` of those).

Per-unit values from a list: an entry (``serial:`` or a ``patch:`` entry) with ``list: FILE``
takes its value from ``column:`` (default: the entry's name) of a CSV file; every board takes one
row of that file (:mod:`piflash.production.unitlist` reads it and hands the rows out, each once).
``secret: true`` records the value only as its SHA-256. The ``hex`` encoding writes the value's
hex digits as bytes (``:``, ``-`` and spaces between them allowed: a MAC address
``00:1B:2C:3D:4E:5F``), exactly ``length`` of them.

The patched image (:meth:`PatchPlan.apply`) is the image with these bytes laid over it (or added
where the image has none); it is what is programmed and verified, and it is checked against
the target's flash map like any image. No click, no pyOCD.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import string
from pathlib import Path
from types import MappingProxyType
from typing import Any, Callable, Dict, List, Mapping, NoReturn, Optional, Tuple

from piflash.errors import SerialError
from piflash.firmware.image import FirmwareImage, merge_segments

#: Encodings and their fixed sizes in bytes (None: text, ``length`` required).
ENCODINGS = {"u32": 4, "u64": 8, "ascii": None, "utf-8": None, "hex": None}
#: Template fields and what they are.
TEMPLATE_FIELDS = {
    "n": "the serial number (int)",
    "target_uid": "the chip's unique ID (hex str)",
    "date": "today, UTC (YYYY-MM-DD)",
    "value": "the entry's value in the board's row of its list (str; entries with list: only)",
}

#: No extra keys (``parse_entry``'s default): read-only, so one shared instance is safe.
_NO_KEYS: Mapping[str, Tuple[type, str]] = MappingProxyType({})

#: The keys of one patch entry (table-driven: type check and meaning, as docs/profiles.md lists).
ENTRY_KEYS: Dict[str, Tuple[type, str]] = {
    "name": (str, "a name for the history (default 'serial' or 'patch[i]')"),
    "address": (int, "byte address in flash"),
    "uicr_customer": (int, "nRF UICR CUSTOMER register index 0..31"),
    "otp": (int, "byte offset in the STM32 OTP area"),
    "encoding": (str, "u32 | u64 | ascii | utf-8 | hex"),
    "length": (int, "bytes, for ascii / utf-8 / hex"),
    "template": (str, "text with {n}, {target_uid}, {date}, {value}; default '{n}', or '{value}' with list:"),
    "pad": (int, "pad byte for text, default 0x00"),
    "list": (str, "a CSV file (UTF-8, a header row) giving each board one row: path relative to the profile"),
    "column": (str, "the list's column holding this entry's value (default: the entry's name)"),
    "secret": (bool, "true: the value is recorded only as its SHA-256 (default false)"),
}
#: Extra keys of ``serial:``: the counter.
COUNTER_KEYS: Dict[str, Tuple[type, str]] = {
    "start": (int, "first number (default 1)"),
    "step": (int, "increment (default 1)"),
    "end": (int, "last number (optional)"),
    "counter": (str, "counter name shared by stations (default: the profile's name)"),
    "numbering": (str, "which boards use up a number: every (default) or passed"),
}

#: ``serial: numbering:`` values. ``every``: each board that takes a number keeps it, whatever its
#: outcome (gaps where boards failed). ``passed``: the number of a board that fails goes to the
#: next board, so the passed boards carry consecutive numbers (the failed board, recorded with its
#: number and outcome, must be flashed again before it ships).
NUMBERING = ("every", "passed")

Fail = Callable[[str, str], NoReturn]


@dataclasses.dataclass(frozen=True)
class PatchEntry:
    """One per-board patch: ``length`` bytes at ``address``, rendered from ``template``."""

    name: str
    address: int
    encoding: str
    length: int
    template: str = "{n}"
    pad: int = 0
    #: The CSV file (absolute path, str) whose rows give this entry's value, or None.
    list: Optional[str] = None
    #: The list's column holding the value (None without ``list``).
    column: Optional[str] = None
    #: Record the value only as its SHA-256 (history, ``--json``, messages).
    secret: bool = False

    @property
    def uses_serial(self) -> bool:
        """Whether the template takes the serial number ``{n}``."""
        return "n" in _fields(self.template)

    def render(
        self, n: Optional[int], target_uid: Optional[str], date: str, value: Optional[str] = None
    ) -> Tuple[str, bytes]:
        """The entry's text value and its bytes for one board.

        :param value: the entry's value from its list's row (str), for an entry with ``list``.
        :raises SerialError: a value the encoding cannot hold (too long, out of range, not hex),
            or a field that is unknown for this board (no serial number, unreadable unique ID,
            no row of the list). A secret entry's messages never show its value.
        """
        if n is None and self.uses_serial:
            raise SerialError(
                f"patch '{self.name}' needs a serial number",
                hint="give one with --serial N, or run the station (it uses the counter)",
            )
        if target_uid is None and "target_uid" in _fields(self.template):
            raise SerialError(f"patch '{self.name}' needs the target unique ID, which could not be read")
        if self.list is not None and value is None:
            raise SerialError(f"patch '{self.name}' takes its value from the list {self.list}: no row was taken")
        text = self.template.format(n=n, target_uid=target_uid, date=date, value=value)
        shown = "its value" if self.secret else repr(text)
        if self.encoding in ("u32", "u64"):
            try:
                number = int(text, 0)
            except ValueError:
                raise SerialError(f"patch '{self.name}': {shown} is not a number for {self.encoding}") from None
            if not 0 <= number < 1 << (8 * self.length):
                raise SerialError(f"patch '{self.name}': {shown} does not fit in {self.encoding}")
            return text, number.to_bytes(self.length, "little")
        if self.encoding == "hex":
            digits = "".join(text.replace(":", " ").replace("-", " ").split())
            try:
                raw = bytes.fromhex(digits)
            except ValueError:
                raise SerialError(
                    f"patch '{self.name}': {shown} is not hex digits (pairs, ':' or '-' between)"
                ) from None
            if len(raw) != self.length:
                raise SerialError(
                    f"patch '{self.name}': {shown} is {len(raw)} bytes of hex, its length is {self.length}",
                    hint="a hex value fills its length exactly",
                )
            return text, raw
        data = text.encode(self.encoding)
        if len(data) > self.length:
            raise SerialError(
                f"patch '{self.name}': {shown} is {len(data)} bytes, more than its length {self.length}",
                hint="raise 'length' or shorten the template",
            )
        return text, data + bytes([self.pad]) * (self.length - len(data))

    def recorded(self, text: str, data: bytes) -> Dict[str, Any]:
        """What the history and ``--json`` keep of this entry's value: ``address`` (hex str),
        ``value`` and ``bytes`` (hex), or for a secret entry each as ``"sha256:<64 hex>"`` (of
        the value's UTF-8 text and of the bytes written) with ``secret: true``."""
        if self.secret:
            return {
                "address": f"{self.address:#010x}",
                "value": "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest(),
                "bytes": "sha256:" + hashlib.sha256(data).hexdigest(),
                "secret": True,
            }
        return {"address": f"{self.address:#010x}", "value": text, "bytes": data.hex()}


@dataclasses.dataclass(frozen=True)
class CounterSpec:
    """Where serial numbers come from: ``start``, ``start + step``, ... up to ``end`` (inclusive);
    ``numbering`` is one of :data:`NUMBERING` (whether a failed board's number goes to the next)."""

    name: str
    start: int = 1
    step: int = 1
    end: Optional[int] = None
    numbering: str = "every"


@dataclasses.dataclass(frozen=True)
class PatchPlan:
    """A profile's per-board data: the serial entry (if any), the other entries, the counter."""

    entries: Tuple[PatchEntry, ...]
    counter: Optional[CounterSpec] = None
    #: The board's row of the list, once taken (:meth:`with_row`): ``(column, value)`` pairs.
    row_values: Tuple[Tuple[str, str], ...] = ()
    #: ...and where it came from: ``(("list", file name), ("list_sha256", hex), ("row", int), ("line", int))``.
    row_source: Tuple[Tuple[str, Any], ...] = ()

    @property
    def uses_serial(self) -> bool:
        """Whether any entry takes the serial number."""
        return any(e.uses_serial for e in self.entries)

    @property
    def list_path(self) -> Optional[str]:
        """The CSV list (absolute path) the entries with ``list:`` share, or None."""
        return next((e.list for e in self.entries if e.list is not None), None)

    @property
    def list_columns(self) -> Dict[str, PatchEntry]:
        """The list's columns the entries take, each with its entry."""
        return {e.column: e for e in self.entries if e.column is not None}

    @property
    def serial_from_list(self) -> bool:
        """Whether ``serial:`` takes its value (a printed serial string) from the list."""
        return any(e.name == "serial" and e.list is not None for e in self.entries) and self.counter is None

    def with_row(self, values: Mapping[str, str], source: Mapping[str, Any]) -> "PatchPlan":
        """This plan for one board: its row of the list (``values``: column -> value; ``source``:
        list, list_sha256, row, line), laid in by :meth:`apply`."""
        return dataclasses.replace(self, row_values=tuple(values.items()), row_source=tuple(source.items()))

    def render(
        self, n: Optional[int], target_uid: Optional[str], now: Optional[datetime.datetime] = None
    ) -> List[Tuple[PatchEntry, str, bytes]]:
        """Every entry's (entry, text, bytes) for one board. :raises SerialError:"""
        date = (now or datetime.datetime.now(datetime.timezone.utc)).strftime("%Y-%m-%d")
        values = dict(self.row_values)
        return [
            (e, *e.render(n, target_uid, date, values.get(e.column) if e.column is not None else None))
            for e in self.entries
        ]

    def apply(
        self, image: FirmwareImage, n: Optional[int], target_uid: Optional[str], now: Optional[datetime.datetime] = None
    ) -> Tuple[FirmwareImage, Dict[str, Dict[str, str]]]:
        """The image with this board's bytes laid over it, and the values for the history.

        :returns: ``(patched image, {name: {"address": "0x...", "value": text, "bytes": hex}})``
            (a secret entry's value and bytes as their SHA-256, :meth:`PatchEntry.recorded`; an
            entry from a list also names its ``list``, ``list_sha256``, ``row`` and ``line``);
            the patched image keeps the file's path and SHA-256 (the file is the same; the
            per-board bytes are recorded beside it).
        :raises SerialError: see :meth:`PatchEntry.render`.
        """
        rendered = self.render(n, target_uid, now)
        source = dict(self.row_source)
        return (
            overlay(image, [(e.address, data) for e, _, data in rendered]),
            {
                e.name: dict(e.recorded(text, data), **(source if e.list is not None else {}))
                for e, text, data in rendered
            },
        )


def overlay(image: FirmwareImage, patches: List[Tuple[int, bytes]]) -> FirmwareImage:
    """``image`` with each ``(address, bytes)`` replacing what the image holds there (or added)."""
    chunks = [(s.address, bytearray(s.data)) for s in image.segments]
    extra = []
    for addr, data in patches:
        rest = []  # parts of the patch no segment covers
        todo = [(addr, data)]
        for seg_addr, buf in chunks:
            nxt = []
            for a, d in todo:
                lo, hi = max(a, seg_addr), min(a + len(d), seg_addr + len(buf))
                if lo >= hi:
                    nxt.append((a, d))
                    continue
                buf[lo - seg_addr : hi - seg_addr] = d[lo - a : hi - a]
                if a < lo:
                    nxt.append((a, d[: lo - a]))
                if hi < a + len(d):
                    nxt.append((hi, d[hi - a :]))
            todo = nxt
        rest.extend(todo)
        extra.extend(rest)
    segments = merge_segments([(a, bytes(b)) for a, b in chunks] + extra)
    return dataclasses.replace(image, segments=segments)


def _fields(template: str) -> List[str]:
    return [f for _, f, _, _ in string.Formatter().parse(template) if f is not None]


def parse_entry(
    raw: Any,
    where: str,
    target: str,
    fail: Fail,
    default_name: str,
    extra_keys: Mapping[str, Tuple[type, str]] = _NO_KEYS,
    base: Optional[Path] = None,
) -> Tuple[PatchEntry, Dict[str, Any]]:
    """Validate one entry mapping from a profile.

    :param where: the dotted key for messages ("serial", "patch[2]").
    :param fail: ``fail(dotted_key, message)`` raises the caller's ProfileError (file:line:key).
    :param base: the folder a relative ``list:`` path is taken from (the profile's); default the
        current directory.
    :returns: the entry and the values of ``extra_keys`` found.
    """
    if not isinstance(raw, dict):
        fail(where, f"expected a mapping with an address and an encoding, got {type(raw).__name__}")
    allowed = dict(ENTRY_KEYS, **extra_keys)
    for key, value in raw.items():
        if key not in allowed:
            fail(f"{where}.{key}", f"unknown key; allowed: {', '.join(allowed)}")
        kind = allowed[key][0]
        if kind is bool:
            if not isinstance(value, bool):
                fail(f"{where}.{key}", f"expected true or false ({allowed[key][1]}), got {value!r}")
        elif not isinstance(value, kind) or isinstance(value, bool):
            fail(
                f"{where}.{key}",
                f"expected {'an integer' if kind is int else 'a string'} ({allowed[key][1]}), got {value!r}",
            )
    listed = raw.get("list")
    for key in ("column", "secret"):
        if key in raw and listed is None:
            fail(f"{where}.{key}", "goes with list: (the CSV file the value comes from)")
    if listed is not None and not listed.strip():
        fail(f"{where}.list", "expected the path of a CSV file")
    places = [k for k in ("address", "uicr_customer", "otp") if k in raw]
    if len(places) != 1:
        fail(
            where,
            "give exactly one of address:, uicr_customer:, otp:"
            if places
            else "says what but not where: add address:, uicr_customer: or otp:",
        )
    encoding = raw.get("encoding")
    if encoding not in ENCODINGS:
        fail(f"{where}.encoding", f"must be one of {', '.join(ENCODINGS)}, got {encoding!r}")
    size = ENCODINGS[encoding]
    length = raw.get("length", size)
    if size is not None and length != size:
        fail(f"{where}.length", f"{encoding} is {size} bytes; leave length out")
    if length is None or length <= 0:
        fail(f"{where}.length", f"{encoding} needs a length in bytes (the field is fixed-size)")
    address = _place(raw, places[0], length, where, target.lower(), fail)
    template = raw.get("template", "{n}" if listed is None else "{value}")
    try:
        fields = _fields(template)
        for f in fields:
            if f not in TEMPLATE_FIELDS:
                fail(
                    f"{where}.template",
                    f"unknown field {{{f}}}; templates take " + ", ".join("{%s}" % k for k in TEMPLATE_FIELDS),
                )
        if "value" in fields and listed is None:
            fail(f"{where}.template", "{value} is the value from a list: add list: (and column:)")
        if listed is not None and "value" not in fields:
            fail(f"{where}.template", "an entry with list: writes its {value}: the template leaves it out")
        template.format(n=1, target_uid="0" * 16, date="2000-01-01", value="0")
    except (KeyError, IndexError) as exc:  # a field inside a format spec: "{n:{x}}"
        fail(
            f"{where}.template",
            f"unknown field {{{exc.args[0] if exc.args else ''}}} in a format "
            "spec; templates take " + ", ".join("{%s}" % k for k in TEMPLATE_FIELDS),
        )
    except (ValueError, TypeError, AttributeError) as exc:
        fail(f"{where}.template", f"not a valid template: {exc}")
    pad = raw.get("pad", 0)
    if not 0 <= pad <= 0xFF:
        fail(f"{where}.pad", f"a pad byte is 0..0xFF, got {pad}")
    name = raw.get("name", default_name)
    path = None
    if listed is not None:
        path = str(((base or Path.cwd()) / Path(listed.strip()).expanduser()).resolve())
    entry = PatchEntry(
        name,
        address,
        encoding,
        length,
        template,
        pad,
        list=path,
        column=raw.get("column", name) if listed is not None else None,
        secret=bool(raw.get("secret", False)),
    )
    return entry, {k: raw[k] for k in extra_keys if k in raw}


def _place(raw: dict, kind: str, length: int, where: str, target: str, fail: Fail) -> int:
    value = raw[kind]
    if kind == "address":
        if not 0 <= value <= 0xFFFFFFFF - length:
            fail(f"{where}.address", f"must be a 32-bit address, got {value:#x}")
        return value
    from piflash.targets.families import family_for

    family = family_for(target)
    if kind == "uicr_customer":
        if family.uicr_customer is None:
            fail(f"{where}.uicr_customer", f"UICR customer registers are an nRF feature, not {target}'s")
        base, words = family.uicr_customer
        if not 0 <= value < words or value * 4 + length > words * 4:
            fail(
                f"{where}.uicr_customer",
                f"CUSTOMER[{value}] with {length} byte(s) runs past "
                f"CUSTOMER[{words - 1}] (0..{words - 1}, 4 bytes each)",
            )
        return base + 4 * value
    otp = family.otp_area(target)
    if otp is None:
        fail(f"{where}.otp", f"{target} has no OTP area piflash knows{family.no_otp_hint}")
    base, size = otp
    if not 0 <= value or value + length > size:
        fail(f"{where}.otp", f"offset {value} with {length} byte(s) is outside the {size}-byte OTP area")
    return base + value


def parse_plan(
    serial: Any, patch: Any, target: str, profile_name: str, fail: Fail, base: Optional[Path] = None
) -> Optional[PatchPlan]:
    """Build a :class:`PatchPlan` from a profile's ``serial:`` and ``patch:`` values (either may be
    None). Entries may not overlap; entries with ``list:`` share one file and take different
    columns; a ``serial:`` with ``list:`` has no counter (its printed serial string is the list's).
    ``base``: the profile's folder, for relative ``list:`` paths. :raises: via ``fail`` (a ProfileError)."""
    entries: List[PatchEntry] = []
    counter = None
    if isinstance(serial, dict) and "list" in serial:
        entry, _ = parse_entry(serial, "serial", target, fail, "serial", base=base)
        if entry.secret:
            fail("serial.secret", "the serial is the board's public name: it cannot be secret")
        entries.append(entry)
        serial = None
    if serial is not None:
        entry, extra = parse_entry(serial, "serial", target, fail, "serial", COUNTER_KEYS)
        start, step, end = extra.get("start", 1), extra.get("step", 1), extra.get("end")
        if start < 0:
            fail("serial.start", f"must be >= 0, got {start}")
        if step < 1:
            fail("serial.step", f"must be >= 1, got {step}")
        if end is not None and end < start:
            fail("serial.end", f"must be >= start ({start}), got {end}")
        if entry.encoding in ("u32", "u64") and entry.template == "{n}":
            top = end if end is not None else start
            if top >= 1 << (8 * entry.length):
                fail("serial.end" if end is not None else "serial.start", f"{top} does not fit in {entry.encoding}")
        numbering = extra.get("numbering", "every")
        if numbering not in NUMBERING:
            fail("serial.numbering", f"must be one of {', '.join(NUMBERING)}, got {numbering!r}")
        entries.append(entry)
        counter = CounterSpec(extra.get("counter", profile_name), start, step, end, numbering)
    if patch is not None:
        if not isinstance(patch, list) or not patch:
            fail("patch", "expected a list of entries (each a mapping with address and encoding)")
        for i, raw in enumerate(patch):
            entry, _ = parse_entry(raw, f"patch[{i}]", target, fail, f"patch[{i}]", base=base)
            entries.append(entry)
    if not entries:
        return None
    listed = [e for e in entries if e.list is not None]
    if len({e.list for e in listed}) > 1:
        fail("patch", "entries with list: take their columns from one CSV file (one row per board), not several")
    columns = [str(e.column) for e in listed]
    if len(set(columns)) != len(columns):
        fail("patch", f"two entries take the list's column {sorted({c for c in columns if columns.count(c) > 1})[0]!r}")
    if counter is None and any(e.name == "serial" for e in listed) and any(e.uses_serial for e in entries):
        fail("patch", "an entry uses {n}, the counter's number, but 'serial:' takes its value from a list")
    names = [e.name for e in entries]
    if len(set(names)) != len(names):
        fail("patch", f"two entries share a name: {', '.join(sorted({n for n in names if names.count(n) > 1}))}")
    spans = sorted((e.address, e.address + e.length, e.name) for e in entries)
    for (_a0, a1, n0), (b0, _b1, n1) in zip(spans, spans[1:]):
        if b0 < a1:
            fail("patch", f"'{n0}' and '{n1}' overlap at {b0:#010x}")
    return PatchPlan(tuple(entries), counter)


__all__ = [
    "PatchEntry",
    "PatchPlan",
    "CounterSpec",
    "ENCODINGS",
    "ENTRY_KEYS",
    "COUNTER_KEYS",
    "NUMBERING",
    "TEMPLATE_FIELDS",
    "parse_plan",
    "overlay",
]
