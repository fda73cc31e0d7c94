"""Test helpers: a strict udev rules parser and a small evaluator of parsed rules.

The parser accepts only what udev(7) documents: every line is blank, a comment, or
comma-separated ``KEY[{attr}] OP "value"`` pairs with an operator the key allows.
The evaluator applies parsed rules to a described device (its chain of sysfs parents)
the way udev does for the keys piflash's rules use (ACTION, SUBSYSTEM, ENV, ATTRS,
GOTO/LABEL, MODE, GROUP, TAG), so a test can ask "what mode and group does this
node get?" without a running udev.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

#: Keys that only match (udev(7), "Rule syntax"), with or without an {attribute}.
MATCH_ONLY = {"ACTION", "DEVPATH", "KERNEL", "KERNELS", "SUBSYSTEM", "SUBSYSTEMS", "DRIVER",
              "DRIVERS", "ATTRS", "TAGS", "CONST", "TEST", "PROGRAM", "RESULT"}
#: Keys that only assign.
ASSIGN_ONLY = {"OWNER", "GROUP", "MODE", "SECLABEL", "RUN", "LABEL", "GOTO", "IMPORT", "OPTIONS"}
#: Keys that do both.
BOTH = {"NAME", "SYMLINK", "ATTR", "SYSCTL", "ENV", "TAG"}
#: Keys that take an {attribute}.
WITH_ATTR = {"ATTR", "ATTRS", "SYSCTL", "ENV", "CONST", "TEST", "SECLABEL", "RUN", "IMPORT"}

_PAIR = re.compile(r'(?P<key>[A-Z]+)(?:\{(?P<attr>[A-Za-z0-9_.:/-]+)\})?'
                   r'(?P<op>==|!=|\+=|-=|:=|=)"(?P<value>[^"\\]*)"')
_HEX4 = re.compile(r"[0-9a-f]{4}")


class RulesSyntaxError(ValueError):
    """A line of a rules file that udev would reject or that breaks piflash's conventions."""


@dataclass(frozen=True)
class Pair:
    key: str
    attr: Optional[str]
    op: str
    value: str

    @property
    def is_match(self) -> bool:
        return self.op in ("==", "!=")


@dataclass
class Rule:
    line: int
    pairs: List[Pair]


def parse_rules(text: str) -> List[Rule]:
    """Parse a rules file strictly; raise :class:`RulesSyntaxError` naming the line."""
    rules = []
    labels, gotos = set(), []
    for number, raw in enumerate(text.split("\n"), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if raw.endswith("\\"):
            raise RulesSyntaxError(f"line {number}: continuation lines are not allowed here")
        pairs, pos = [], 0
        while True:
            m = _PAIR.match(line, pos)
            if not m:
                raise RulesSyntaxError(f"line {number}: cannot parse at column {pos + 1}: {line[pos:]!r}")
            pair = Pair(m["key"], m["attr"], m["op"], m["value"])
            _check_pair(pair, number)
            pairs.append(pair)
            pos = m.end()
            if pos == len(line):
                break
            sep = re.compile(r",\s*").match(line, pos)
            if not sep or sep.end() == len(line):
                raise RulesSyntaxError(f"line {number}: expected ', KEY' at column {pos + 1}")
            pos = sep.end()
        for p in pairs:
            if p.key == "LABEL":
                labels.add(p.value)
            if p.key == "GOTO":
                gotos.append((number, p.value))
        rules.append(Rule(number, pairs))
    for number, label in gotos:
        if label not in labels:
            raise RulesSyntaxError(f"line {number}: GOTO to a missing LABEL {label!r}")
    return rules


def _check_pair(p: Pair, number: int) -> None:
    where = f"line {number}: {p.key}"
    if p.key not in MATCH_ONLY | ASSIGN_ONLY | BOTH:
        raise RulesSyntaxError(f"{where}: unknown key")
    if (p.attr is not None) != (p.key in WITH_ATTR):
        if not (p.key in ("RUN", "IMPORT") and p.attr is None):
            raise RulesSyntaxError(f"{where}: {'needs' if p.attr is None else 'takes no'} {{attribute}}")
    if p.is_match and p.key in ASSIGN_ONLY:
        raise RulesSyntaxError(f"{where}: cannot be matched with {p.op}")
    if not p.is_match and p.key in MATCH_ONLY:
        raise RulesSyntaxError(f"{where}: cannot be assigned with {p.op}")
    if p.op in ("+=", "-=") and p.key in ("LABEL", "GOTO", "MODE", "OWNER", "GROUP"):
        raise RulesSyntaxError(f"{where}: does not take {p.op}")
    if p.attr in ("idVendor", "idProduct"):
        for alt in p.value.split("|"):
            if not _HEX4.fullmatch(alt):
                raise RulesSyntaxError(f"{where}{{{p.attr}}}: {alt!r} is not four lowercase hex digits")
    if p.key == "MODE":
        if not re.fullmatch(r"0[0-7]{3}", p.value):
            raise RulesSyntaxError(f"{where}: {p.value!r} is not an octal mode")
        if int(p.value, 8) & 0o002:
            raise RulesSyntaxError(f"{where}: {p.value} is world-writable")


@dataclass
class Device:
    """A device event as udev sees it: the device, then its parents (nearest first).

    Each entry of ``chain`` is ``{"subsystem": str, "devtype": str, "attrs": {name: value}}``, and
    optionally ``"kernel"``: the device's kernel name (``spidev0.0``), for ``KERNEL==``.
    """

    chain: List[Dict]
    action: str = "add"
    env: Dict[str, str] = field(default_factory=dict)


@dataclass
class Outcome:
    mode: Optional[str] = None
    group: Optional[str] = None
    tags: Tuple[str, ...] = ()
    env: Dict[str, str] = field(default_factory=dict)


def _glob(value: Optional[str], pattern: str) -> bool:
    if value is None:
        return False
    return any(fnmatch.fnmatchcase(value, alt) for alt in pattern.split("|"))


def _holds(p: Pair, ok: bool) -> bool:
    return ok if p.op == "==" else not ok


def evaluate(rules: List[Rule], device: Device) -> Outcome:
    """Apply ``rules`` to ``device``; the keys piflash's rules use, with udev's semantics."""
    out = Outcome(env=dict(device.env))
    if device.chain[0].get("devtype"):
        out.env.setdefault("DEVTYPE", device.chain[0]["devtype"])
    me = device.chain[0]
    goto = None
    for rule in rules:
        if goto is not None:
            if any(p.key == "LABEL" and p.value == goto for p in rule.pairs):
                goto = None
            continue
        matches = [p for p in rule.pairs if p.is_match]
        parent_keys = [p for p in matches if p.key in ("ATTRS", "SUBSYSTEMS")]
        ok = True
        for p in matches:
            if p.key == "ACTION":
                ok = _holds(p, _glob(device.action, p.value))
            elif p.key == "SUBSYSTEM":
                ok = _holds(p, _glob(me["subsystem"], p.value))
            elif p.key == "KERNEL":
                ok = _holds(p, _glob(me.get("kernel"), p.value))
            elif p.key == "ENV":
                ok = _holds(p, _glob(out.env.get(p.attr, ""), p.value))
            elif p.key == "ATTR":
                ok = _holds(p, _glob(me["attrs"].get(p.attr), p.value))
            elif p.key in ("ATTRS", "SUBSYSTEMS"):
                continue
            else:
                raise NotImplementedError(p.key)
            if not ok:
                break
        if ok and parent_keys:  # all parent keys must match on one device of the chain
            ok = any(all(_holds(p, _glob(dev["attrs"].get(p.attr) if p.key == "ATTRS"
                                         else dev["subsystem"], p.value)) for p in parent_keys)
                     for dev in device.chain)
        if not ok:
            continue
        for p in rule.pairs:
            if p.is_match:
                continue
            if p.key == "MODE":
                out.mode = p.value
            elif p.key == "GROUP":
                out.group = p.value
            elif p.key == "TAG":
                out.tags = out.tags + (p.value,) if p.op == "+=" else (p.value,)
            elif p.key == "ENV":
                out.env[p.attr] = p.value
            elif p.key == "GOTO":
                goto = p.value
    return out


def usb_device(vid: int, pid: int, product: str = "", interface: str = "") -> Dict[str, Device]:
    """The device events of one USB probe: its usb_device, a usb_interface, a hidraw and a tty node."""
    dev = {"subsystem": "usb", "devtype": "usb_device",
           "attrs": {"idVendor": f"{vid:04x}", "idProduct": f"{pid:04x}", "product": product}}
    intf = {"subsystem": "usb", "devtype": "usb_interface", "attrs": {"interface": interface}}
    hub = {"subsystem": "usb", "devtype": "usb_device",
           "attrs": {"idVendor": "1d6b", "idProduct": "0002", "product": "xHCI Host Controller"}}
    hid = {"subsystem": "hid", "devtype": "", "attrs": {}}
    return {
        "usb": Device([dev, hub]),
        "usb_interface": Device([intf, dev, hub]),
        "hidraw": Device([{"subsystem": "hidraw", "devtype": "", "attrs": {}}, hid, intf, dev, hub]),
        "tty": Device([{"subsystem": "tty", "devtype": "", "attrs": {}}, intf, dev, hub]),
    }


def pin_device(subsystem: str, kernel: str) -> Device:
    """The event of one of the Pi's pin nodes (``spidev``/``spidev0.0``, ``gpio``/``gpiochip0``,
    ``bcm2835-gpiomem``/``gpiomem``) under its platform parent."""
    return Device([{"subsystem": subsystem, "devtype": "", "attrs": {}, "kernel": kernel},
                   {"subsystem": "platform", "devtype": "", "attrs": {}}])
