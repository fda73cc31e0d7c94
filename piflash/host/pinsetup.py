"""The checks of a Pi whose own pins are the SWD probe (issue 43, item 3), as rows for
``piflash doctor`` and ``piflash setup pins``.

What is checked, with the pure logic in :mod:`piflash.host.spi` and :mod:`piflash.host.pins`:

1. the boot config turns on the SPI bus each ``spidev:`` probe needs (``dtparam=spi=on`` for
   SPI0, ``dtoverlay=spi1-1cs`` for SPI1) and says which pins each enabled bus claims;
2. each probe's device node exists (``/dev/spidevB.C``, ``/dev/gpiochipN``) and this user may
   open it (the udev rules' ``spi``/``gpio`` groups, :mod:`piflash.probe.permissions`);
3. no other driver holds a probe's lines (:func:`piflash.host.pins.line_claims`: read, never
   requested or driven);
4. the station's LED, buzzer and button pins collide neither with a probe's pins nor with a pin
   an enabled SPI bus claims (``spi1-2cs``/``spi1-3cs`` take GPIO 17 and 16), nor do two probes.

Each row is ``(name, status, detail, fix)``, status ``"ok"``, ``"warn"`` or ``"fail"`` as in the
doctor (:class:`piflash.host.doctor.Check`). No row at all on a machine with no boot config and no
pin probe or station pins to check (a PC): nothing there concerns the Pi's pins.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from piflash.host import pins as pinmap
from piflash.host import spi
from piflash.probe import permissions

Row = Tuple[str, str, str, Optional[str]]
OK, WARN, FAIL = "ok", "warn", "fail"
#: The group each node kind belongs to under the udev rules (Raspberry Pi OS's groups).
NODE_GROUP = {"spidev": "spi", "gpio": "gpio"}


@dataclass(frozen=True)
class PinSetup:
    """What to check and where.

    :ivar sysroot: root of ``boot/`` and ``etc/group`` (str).
    :ivar dev_root: where device nodes are (str).
    :ivar sysfs_root: where sysfs is (str; debugfs's ``kernel/debug/gpio`` under it).
    :ivar boot_config: the boot config (str path), or None to look under ``sysroot``
        (:func:`piflash.host.spi.find_boot_config`).
    :ivar model: the device-tree model string (str) the config's ``[piN]`` sections are judged
        for, or None when unknown.
    :ivar probes: probe IDs to check (``spidev:0.0``, ``gpio:gpiochip0:swclk=5,swdio=6``);
        other IDs are ignored.
    :ivar station_gpio: the station's ``gpio:`` section, role -> BCM GPIO.
    """

    sysroot: str = "/"
    dev_root: str = "/dev"
    sysfs_root: str = "/sys"
    boot_config: Optional[str] = None
    model: Optional[str] = None
    probes: Tuple[str, ...] = ()
    station_gpio: Mapping[str, int] = field(default_factory=dict)


def _gpios(pins: Dict[int, str]) -> str:
    return ", ".join(f"{pinmap.describe(g)} {sig.split()[-1]}" for g, sig in sorted(pins.items()))


def check_rows(setup: PinSetup) -> List[Row]:
    """Every row for ``setup``, in order: boot config, SPI buses, device nodes, line holders,
    collisions. Empty when there is nothing to check (see the module's docstring)."""
    rows: List[Row] = []
    probes = []
    for pid in setup.probes:
        try:
            found = pinmap.swd_pins_of(pid)
        except ValueError as exc:
            rows.append(("probe ID", FAIL, str(exc), "write it as spidev:0.0 or gpio:gpiochip0:swclk=5,swdio=6"))
            continue
        if found is not None:
            probes.append(found)
    path = Path(setup.boot_config) if setup.boot_config else spi.find_boot_config(setup.sysroot)
    buses: Optional[Dict[int, spi.SpiBus]] = None
    if path is None or not path.is_file():
        if not probes and not setup.station_gpio:
            return rows
        wanted = sorted({p.bus for p in probes if p.bus is not None})
        where = str(path) if path else " or ".join(str(Path(setup.sysroot, r)) for r in spi.BOOT_CONFIGS)
        if wanted:
            rows.append(
                (
                    "boot config",
                    FAIL,
                    f"no boot config at {where}: SPI{'/'.join(map(str, wanted))} cannot be turned on "
                    "here (not a Raspberry Pi, or its boot partition is not mounted)",
                    "on a Raspberry Pi, mount the boot partition (Raspberry Pi OS: /boot/firmware)",
                )
            )
        else:
            rows.append(("boot config", OK, f"none at {where}: the SPI pins are not checked", None))
    else:
        try:
            buses = spi.spi_buses(spi.parse_boot_config(path, setup.model))
        except OSError as exc:
            rows.append(("boot config", FAIL, f"cannot read {path}: {exc.strerror or exc}", f"sudo chmod a+r {path}"))
        else:
            rows.append(("boot config", OK, f"{path}" + (f" (judged for {setup.model})" if setup.model else ""), None))
            rows += _bus_rows(path, buses, probes)
    rows += _node_rows(setup, probes, buses)
    rows += _claim_rows(setup, probes)
    rows += _collision_rows(setup, probes, buses or {})
    return rows


def _bus_rows(path: Path, buses: Dict[int, spi.SpiBus], probes: Sequence[pinmap.SwdPins]) -> List[Row]:
    rows: List[Row] = []
    for n, bus in sorted(buses.items()):
        users = [p.probe_id for p in probes if p.bus == n]
        if bus.enabled:
            rows.append((f"SPI{n}", OK, f"on, by {bus.by}: claims {_gpios(bus.claimed())}", None))
            continue
        maybe = (
            f"; {', '.join(bus.conditional)} would turn it on, under a filter not judged here"
            if bus.conditional
            else ""
        )
        if users:
            rows.append(
                (
                    f"SPI{n}",
                    FAIL,
                    f"off in {path}: {', '.join(users)} needs it{maybe}",
                    f"add the line '{spi.ENABLE_LINE[n]}' under [all] in {path} (sudo), then reboot",
                )
            )
        else:
            rows.append((f"SPI{n}", OK, f"off (only spidev:{n}.x probes need it: '{spi.ENABLE_LINE[n]}'){maybe}", None))
    return rows


def _node_rows(setup: PinSetup, probes: Sequence[pinmap.SwdPins], buses: Optional[Dict[int, spi.SpiBus]]) -> List[Row]:
    rows: List[Row] = []
    for p in probes:
        node = Path(setup.dev_root, p.device)
        name = f"{p.device} node"
        if not node.exists():
            if p.kind == "spidev" and buses is not None and p.bus is not None and buses[p.bus].enabled:
                bus = buses[p.bus]
                cs = int(p.device.rsplit(".", 1)[1])
                if bus.chip_selects and cs >= len(bus.chip_selects):
                    rows.append(
                        (
                            name,
                            FAIL,
                            f"{node} is missing: {bus.by} makes chip selects 0..{len(bus.chip_selects) - 1} only",
                            f"use spidev:{p.bus}.0",
                        )
                    )
                else:
                    rows.append(
                        (
                            name,
                            FAIL,
                            f"{node} is missing although {bus.by} turns SPI{p.bus} on: not rebooted since?",
                            "sudo reboot",
                        )
                    )
            elif p.kind == "spidev":
                rows.append(
                    (
                        name,
                        FAIL,
                        f"{node} is missing: SPI{p.bus} is off",
                        f"turn SPI{p.bus} on ('{spi.ENABLE_LINE[p.bus or 0]}'), then reboot",
                    )
                )
            else:
                rows.append(
                    (
                        name,
                        FAIL,
                        f"{node} is missing: no such GPIO chip here",
                        "ls /dev/gpiochip* (gpiochip0 is the header's on a Pi)",
                    )
                )
            continue
        if os.geteuid() != 0 and not os.access(node, os.R_OK | os.W_OK):
            group = NODE_GROUP[p.kind]
            rows.append(
                (
                    name,
                    FAIL,
                    f"{node} may not be opened by this user (it needs group {group})",
                    permissions.fix_text(_user()),
                )
            )
        else:
            rows.append((name, OK, f"{node} can be opened", None))
    rows += _nreset_chip_rows(setup, probes)
    return rows


def _nreset_chip_rows(setup: PinSetup, probes: Sequence[pinmap.SwdPins]) -> List[Row]:
    """A ``gpiochip0 node`` row for a ``spidev:...:nreset=N`` probe (its nRESET is a line of the
    header's chip, requested when the probe opens), unless a ``gpio:`` probe's row has it."""
    users = [p.probe_id for p in probes if p.kind == "spidev" and any(n == "nreset" for n, _ in p.pins)]
    if not users or any(p.device == "gpiochip0" for p in probes):
        return []
    node = Path(setup.dev_root, "gpiochip0")
    name = "gpiochip0 node"
    if not node.exists():
        return [
            (
                name,
                FAIL,
                f"{node} is missing: {', '.join(users)} needs it for nRESET",
                "ls /dev/gpiochip* (gpiochip0 is the header's on a Pi)",
            )
        ]
    if os.geteuid() != 0 and not os.access(node, os.R_OK | os.W_OK):
        return [
            (
                name,
                FAIL,
                f"{node} may not be opened by this user (it needs group gpio, for nRESET)",
                permissions.fix_text(_user()),
            )
        ]
    return [(name, OK, f"{node} can be opened (nRESET of {', '.join(users)})", None)]


def _user() -> Optional[str]:
    import pwd

    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return None


def _claim_rows(setup: PinSetup, probes: Sequence[pinmap.SwdPins]) -> List[Row]:
    rows: List[Row] = []
    for p in probes:
        chip = p.device
        lines = list(p.pins)
        if p.kind == "spidev":
            chip = "gpiochip0"  # the header's lines, which the SPI block takes over by pin mux
        states = pinmap.line_claims(chip, [g for _, g in lines], setup.dev_root, setup.sysfs_root)
        # The SPI controller muxes its pins without requesting them as GPIO lines; its own chip
        # selects show as "spi0 CS0"-like consumers. Anything else holding them is another driver.
        held = [
            (name, s)
            for (name, _), s in zip(lines, states)
            if s.used and not (p.kind == "spidev" and s.consumer.startswith(f"spi{p.bus}"))
        ]
        unknown = [s for s in states if s.used is None]
        label = f"{p.device} lines"
        if held:
            what = "; ".join(f"{name} {pinmap.describe(s.offset)} is held by '{s.consumer}'" for name, s in held)
            rows.append(
                (
                    label,
                    FAIL,
                    f"{what} ({held[0][1].source}): another driver or program has it",
                    "stop that program, or remove the overlay that claims the pin, or pick other pins",
                )
            )
        elif unknown and p.kind == "spidev":
            continue  # the SPI block's own pins: a row only when another holder is seen
        elif unknown:
            rows.append((label, WARN, f"{unknown[0].source}", "run it as root (debugfs), or install python3-libgpiod"))
        else:
            rows.append(
                (label, OK, f"{', '.join(pinmap.describe(s.offset) for s in states)} free ({states[0].source})", None)
            )
    return rows


def _collision_rows(setup: PinSetup, probes: Sequence[pinmap.SwdPins], buses: Dict[int, spi.SpiBus]) -> List[Row]:
    uses: List[pinmap.PinUse] = pinmap.station_uses(setup.station_gpio)
    for n, bus in sorted(buses.items()):
        uses += [pinmap.PinUse(g, f"{sig}, claimed by {bus.by}", f"SPI{n}") for g, sig in bus.claimed().items()]
    for p in probes:
        # A spidev probe's SPI pins are its bus's: the same group as the bus's claim, no
        # collision. Its nRESET GPIO is its own: on a bus pin, a chip select or a station pin, two
        # drivers would share one wire.
        for u in pinmap.probe_uses(p):
            spi_pin = p.kind == "spidev" and not u.owner.endswith(" nreset")
            uses.append(pinmap.PinUse(u.gpio, u.owner, f"SPI{p.bus}" if spi_pin else p.probe_id))
    if not setup.station_gpio and not probes:
        return []
    found = pinmap.collisions(uses)
    if not found:
        return [("pin collisions", OK, f"none among {len({u.gpio for u in uses})} GPIOs in use", None)]
    used = {u.gpio for u in uses}
    rows: List[Row] = []
    for c in found:
        rows.append(("pin collision", FAIL, c.message(), _collision_fix(c, used)))
    return rows


def _collision_fix(c: pinmap.Collision, used) -> str:
    free = ", ".join(map(str, pinmap.free_gpios(used)))
    for a, b in ((c.first, c.second), (c.second, c.first)):
        if a.group == "station" and " CE" in b.owner and "spi1-" in b.owner and c.gpio in (16, 17):
            return f"use dtoverlay=spi1-1cs (its one chip select is GPIO 18), or move {a.owner[8:]} to a free GPIO ({free})"
        if a.group == "station":
            return f"move {a.owner[8:]} to a free GPIO ({free}) in the station config"
    for a in (c.first, c.second):
        if a.owner.endswith(" nreset") and a.group.startswith("spidev:"):
            probe = a.group.split(":nreset=")[0]
            return f"wire nRESET to a free GPIO ({free}) and name it: {probe}:nreset={free.split(',')[0]}"
    return f"give the probe other pins, free ones: {free}"
