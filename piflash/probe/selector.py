"""The probe selector: what ``-u``, a profile's ``probe:`` and a station's ``probes:`` name, parsed once.

A selector names one probe, matched exactly. Its forms (one :class:`ProbeKind` each, registered in
:data:`PROBE_KINDS`):

===============================  ===========================================================
``0240000032044e45``             a USB serial number, as pyOCD reports it (kind ``usb``)
``sim:NAME``                     a simulated board of ``piflash sim`` (kind ``sim``)
``remote:HOST:PORT``             a probe behind pyOCD's remote probe server (kind ``remote``)
``picoboot``                     the one Pico in USB BOOTSEL mode (kind ``picoboot``)
``picoboot:SERIAL``,             a Pico in BOOTSEL mode by its USB serial number or by its USB
``picoboot:BUS-PORT[.PORT...]``  port (``1-1.2``)
``spidev:0.0``                   SWD over the Pi's SPI pins (kind ``spidev``,
                                 :mod:`piflash.probe.pins`)
``gpio:gpiochip0:swclk=5,...``   SWD bit-banged on the Pi's GPIO lines (kind ``gpio``)
===============================  ===========================================================

The rule, for every kind: a selector matches a probe ID when the two are the same string, without
regard to case (pyOCD compares IDs ignoring case too, ``pyocd/probe/aggregator.py``), and only of
the same kind. A trailing ``*`` makes it a prefix (``-u 0240*``, ``sim:bay*``), which must match
exactly one probe. Nothing else is a pattern: pyOCD's own ``--uid`` matches any substring of any
ID (``unique_id in probe.unique_id.lower()`` in the aggregator), so ``sim:bay1`` would reach
``sim:bay10`` when bay1 is not there; piflash never hands pyOCD the ID string for that reason.

The model is probe-rs's ``DebugProbeSelector`` (``probe-rs/src/probe/selector.rs``), parsed once,
and pyOCD's ``TYPE:ID`` form parsed against the probe types that plugins register
(``pyocd/probe/aggregator.py``).

Standard library and :mod:`piflash.errors` only: the station's config check and the CLI parse
selectors before pyOCD is imported.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Union

from piflash.errors import NoProbeError, ProbeSyntaxError, SeveralProbesError

__all__ = [
    "ProbeKind",
    "ProbeSelector",
    "PROBE_KINDS",
    "register_kind",
    "parse_selector",
    "kind_of",
    "no_probe_error",
    "several_probes_error",
    "parse_remote_address",
    "MAX_SELECTOR_LENGTH",
    "REMOTE_DEFAULT_PORT",
]

#: Characters a selector may have at most. A USB serial number is at most 126 UTF-16 characters
#: (a string descriptor's bLength is one byte: (255 - 2) // 2, USB 2.0 9.6.7); a ``remote:`` host
#: name at most 253 (RFC 1035 2.3.4) plus its port. Anything longer is not a probe ID.
MAX_SELECTOR_LENGTH = 300
#: pyOCD's port for ``remote:HOST`` without one (``TCPClientProbe.DEFAULT_PORT``,
#: ``pyocd/probe/tcp_client_probe.py``).
REMOTE_DEFAULT_PORT = 5555
#: The mark of a prefix, at the end of a selector only.
PREFIX_MARK = "*"


@dataclass(frozen=True)
class ProbeKind:
    """One kind of probe a selector can name.

    :ivar name: the kind's name (str): ``"usb"``, ``"sim"``, ``"remote"``, ``"picoboot"``.
    :ivar tag: what its probe IDs begin with (str, ``"sim:"``), or None for the kind whose IDs
        carry no tag (a USB serial number, as pyOCD's USB probe plugins report it).
    :ivar transport: how piflash reaches a board through it (str): ``"pyocd"`` (a debug probe
        opened through pyOCD) or ``"picoboot"`` (the RP2040/RP2350 boot ROM's USB interface).
    :ivar description: one line for help and errors (str).
    :ivar bare: whether the kind's name alone (``picoboot``) selects the one probe of that kind.
    :ivar prefixes: whether a ``*`` prefix may be written (an address, ``remote:``, is no pattern).
    :ivar check: called with the part after the tag; raises :class:`ProbeSyntaxError` when it
        cannot be an ID of this kind (``remote:`` without a port number), or None.
    """

    name: str
    tag: Optional[str]
    transport: str
    description: str
    bare: bool = False
    prefixes: bool = True
    check: Optional[Callable[[str], None]] = None


def parse_remote_address(text: str) -> Tuple[str, int]:
    """Split ``remote:HOST[:PORT]`` (or ``HOST[:PORT]``) into (host, port), as pyOCD reads it.

    :raises ProbeSyntaxError: (exit 2) no host, or a port that is not a number in 1..65535.
    """
    whole = text if text.lower().startswith("remote:") else "remote:" + text
    rest = whole[len("remote:") :]
    host, sep, port_text = rest.partition(":")
    if not host:
        raise ProbeSyntaxError(f"'{whole}' names no host: use remote:HOST:PORT, e.g. remote:127.0.0.1:5555")
    if not sep:
        return host, REMOTE_DEFAULT_PORT
    try:
        port = int(port_text, 10)
    except ValueError:
        port = -1
    if not 1 <= port <= 65535:
        raise ProbeSyntaxError(
            f"'{whole}': the port '{port_text}' is not a TCP port number (1-65535)",
            hint="use remote:HOST:PORT, e.g. remote:127.0.0.1:5555",
        )
    return host, port


def _check_remote(value: str) -> None:
    parse_remote_address(value)


#: Every kind of probe a selector can name, by name. The kind without a tag (``usb``) takes every
#: selector whose text names no other kind. A new kind (the Pi's own pins) is one more entry.
PROBE_KINDS: Dict[str, ProbeKind] = {}


def register_kind(kind: ProbeKind) -> ProbeKind:
    """Add ``kind`` to :data:`PROBE_KINDS` (replacing one of the same name); returns it.

    :raises ValueError: its tag is another kind's, or a tag does not end in ``:``.
    """
    if kind.tag is not None and not kind.tag.endswith(":"):
        raise ValueError(f"probe kind {kind.name}: tag {kind.tag!r} must end in ':'")
    for other in PROBE_KINDS.values():
        if other.name != kind.name and other.tag == kind.tag:
            raise ValueError(f"probe kinds {other.name} and {kind.name} share the tag {kind.tag!r}")
    PROBE_KINDS[kind.name] = kind
    return kind


USB = register_kind(
    ProbeKind("usb", None, "pyocd", "a USB debug probe by its serial number (CMSIS-DAP, ST-Link, J-Link)")
)
register_kind(ProbeKind("sim", "sim:", "pyocd", "a simulated board ('piflash sim')"))
register_kind(
    ProbeKind("remote", "remote:", "pyocd", "a probe behind a pyOCD probe server", prefixes=False, check=_check_remote)
)
register_kind(ProbeKind("picoboot", "picoboot:", "picoboot", "a Pico in USB BOOTSEL mode", bare=True))


def _check_pins(tag: str) -> Callable[[str], None]:
    def check(value: str) -> None:
        from piflash.probe.pins import parse_pin_probe_id

        parse_pin_probe_id(tag + value)

    return check


register_kind(
    ProbeKind("spidev", "spidev:", "pyocd", "SWD over the Pi's SPI pins (/dev/spidevB.C)", check=_check_pins("spidev:"))
)
register_kind(ProbeKind("gpio", "gpio:", "pyocd", "SWD bit-banged on the Pi's GPIO lines", check=_check_pins("gpio:")))


def kind_of(probe_id: str) -> ProbeKind:
    """The kind whose tag ``probe_id`` (str) begins with (any case), else the untagged ``usb``."""
    low = probe_id.lower()
    for kind in PROBE_KINDS.values():
        if kind.tag is not None and low.startswith(kind.tag):
            return kind
    return USB


@dataclass(frozen=True)
class ProbeSelector:
    """A parsed probe selector (see the module). Made by :meth:`parse`.

    :ivar kind: its :class:`ProbeKind`.
    :ivar text: the ID as written, without a prefix's ``*`` (str, e.g. ``"sim:bay1"``,
        ``"0240000032044e45"``; ``"picoboot"`` for the bare kind name).
    :ivar prefix: whether it was written with a trailing ``*`` (a bare ``picoboot`` is a prefix
        of every BOOTSEL device's ID).
    """

    kind: ProbeKind
    text: str
    prefix: bool = False

    @classmethod
    def parse(cls, text: Union[str, "ProbeSelector"]) -> "ProbeSelector":
        """Parse ``text`` (str), or return it unchanged when it is already a selector.

        :raises ProbeSyntaxError: (exit 2) empty, too long, control characters, a ``*`` that is
            not last, a ``*`` alone or after an address, or a kind's own check failed.
        """
        if isinstance(text, ProbeSelector):
            return text
        if not isinstance(text, str):
            raise ProbeSyntaxError(f"a probe ID is text, not {type(text).__name__} ({text!r:.60})")
        raw = text.strip()
        if not raw:
            raise ProbeSyntaxError(
                "an empty probe ID names no probe",
                hint="give a unique ID from 'piflash probes', or leave --probe out to use the only probe attached",
            )
        if len(raw) > MAX_SELECTOR_LENGTH:
            raise ProbeSyntaxError(
                f"a probe ID of {len(raw):,} characters ({raw[:40]!r}...) is not one: "
                f"IDs have at most {MAX_SELECTOR_LENGTH}"
            )
        if any(ord(c) < 0x20 or ord(c) == 0x7F for c in raw):
            raise ProbeSyntaxError(f"the probe ID {raw!r} holds a control character")
        prefix = raw.endswith(PREFIX_MARK)
        body = raw[:-1] if prefix else raw
        if PREFIX_MARK in body:
            raise ProbeSyntaxError(f"'{raw}': '*' may only end a probe ID, to make it a prefix (e.g. 0240*)")
        kind = kind_of(body)
        bare = next((k for k in PROBE_KINDS.values() if k.bare and body.lower() == k.name), None)
        if bare is not None:  # "picoboot": any one of its kind
            return cls(bare, bare.name, True)
        value = body[len(kind.tag) :] if kind.tag else body
        if prefix and not kind.prefixes:
            raise ProbeSyntaxError(f"'{raw}': a {kind.name} probe is named by its whole address, not a prefix")
        if not value and not (prefix and kind.tag):
            if prefix:
                raise ProbeSyntaxError(
                    "'*' alone names no probe",
                    hint="leave --probe out to use the only probe attached, or write the start of an ID, e.g. 0240*",
                )
            raise ProbeSyntaxError(
                f"'{raw}' names no {kind.name} probe: write {kind.tag}ID"
                + (" or " + kind.name + " alone" if kind.bare else "")
            )
        if kind.check is not None and not prefix:
            kind.check(value)
        return cls(kind, body, prefix)

    @property
    def value(self) -> str:
        """The part after the kind's tag (str): the board name of ``sim:NAME``, a serial number."""
        if self.kind.tag and self.text.lower().startswith(self.kind.tag):
            return self.text[len(self.kind.tag) :]
        return "" if self.kind.bare and self.text.lower() == self.kind.name else self.text

    @property
    def lookup_id(self) -> Optional[str]:
        """The one whole ID this selector names (str), or None for a prefix."""
        return None if self.prefix else self.text

    @property
    def transport(self) -> str:
        """``"pyocd"`` or ``"picoboot"``: see :attr:`ProbeKind.transport`."""
        return self.kind.transport

    def matches(self, *probe_ids: Optional[str]) -> bool:
        """Whether any of ``probe_ids`` (str; None skipped: the names one probe goes by, such as a
        BOOTSEL device's port ID and serial ID) is the ID this selector names: the same kind and
        the same text without regard to case, or, for a prefix, beginning with its text."""
        want = self.text.lower()
        if self.kind.bare and want == self.kind.name:
            want = self.kind.tag or want
        for probe_id in probe_ids:
            if not probe_id or kind_of(probe_id) is not self.kind:
                continue
            have = probe_id.lower()
            if have == want or (self.prefix and have.startswith(want)):
                return True
        return False

    def __str__(self) -> str:
        return self.text + (PREFIX_MARK if self.prefix and not self.kind.bare else "")


def parse_selector(text: Union[str, ProbeSelector, None]) -> Optional[ProbeSelector]:
    """:meth:`ProbeSelector.parse`, with None (no ``-u``: the only probe) passed through.

    :raises ProbeSyntaxError: see :meth:`ProbeSelector.parse`.
    """
    return None if text is None else ProbeSelector.parse(text)


#: Probe IDs an error names at most before "and N more" (a rack of 40 sim boards stays readable).
LISTED_IDS = 8


def _listing(ids: Sequence[str]) -> str:
    shown = ", ".join(ids[:LISTED_IDS])
    return shown + (f" and {len(ids) - LISTED_IDS} more" if len(ids) > LISTED_IDS else "")


def near_matches(selector: ProbeSelector, probe_ids: Iterable[str], n: int = 3) -> List[str]:
    """Up to ``n`` IDs of ``probe_ids`` (str) that the user may have meant: those of the selector's
    kind that begin with its text, then the closest by :func:`difflib.get_close_matches` on the
    part after the kind's tag (``bay1`` against ``bay10``: a shared ``sim:`` is no likeness);
    never one the selector matches."""
    ids = [p for p in dict.fromkeys(probe_ids) if p and not selector.matches(p)]
    want = selector.text.lower()
    longer = [p for p in ids if kind_of(p) is selector.kind and p.lower().startswith(want)]
    tag = len(selector.kind.tag or "")
    by_value: Dict[str, str] = {}
    for p in ids:
        by_value.setdefault(p.lower()[len(kind_of(p).tag or "") :], p)
    value = want[tag:] if selector.kind.tag and want.startswith(selector.kind.tag) else want
    close = [by_value[m] for m in difflib.get_close_matches(value, list(by_value), n=n, cutoff=0.6)] if value else []
    return list(dict.fromkeys(longer + close))[:n]


def no_probe_error(selector: ProbeSelector, probe_ids: Sequence[str], hint: Optional[str] = None) -> NoProbeError:
    """The error (exit 7) for a selector that matches none of the probes attached.

    :param probe_ids: the IDs of every probe attached now (str), named in the message.
    :param hint: what to do when there is no near match; the default points at ``piflash probes``.
    """
    near = near_matches(selector, probe_ids)
    what = (
        "no Pico in BOOTSEL mode"
        if selector.kind.bare and selector.text == selector.kind.name
        else f"no probe {selector}"
    )
    message = f"{what} is attached"
    if near:
        message += f"; did you mean {' or '.join(near)}?"
    attached = list(dict.fromkeys(probe_ids))
    message += f" (attached: {_listing(attached) if attached else 'none'})"
    longer = [p for p in near if p.lower().startswith(selector.text.lower())]
    if longer and not selector.prefix and selector.kind.prefixes:
        hint = (
            f"write {selector.text}* for a prefix (it must then match exactly one probe); "
            "'piflash probes' lists the probes piflash can see"
        )
    return NoProbeError(message, hint=hint or "'piflash probes' lists the probes piflash can see")


def several_probes_error(
    selector: Optional[ProbeSelector], probe_ids: Sequence[str], hint: Optional[str] = None
) -> SeveralProbesError:
    """The error (exit 8) for several probes where one is needed: a prefix that matches more than
    one, or no selector with more than one probe attached.

    :param probe_ids: the IDs that matched (str).
    """
    ids = list(dict.fromkeys(probe_ids))
    if selector is None:
        message = f"{len(ids)} debug probes found: {_listing(ids)}"
        hint = hint or "choose one with --probe UNIQUE_ID (or 'probe:' in the profile)"
    else:
        message = f"{len(ids)} probes match {selector}: {_listing(ids)}"
        hint = hint or f"write the whole ID of one, e.g. --probe {ids[0]}"
    return SeveralProbesError(message, ids, hint=hint)
