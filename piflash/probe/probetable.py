"""The USB debug probes piflash knows, and the udev rules generated from them.

This table is the one source of truth: ``piflash/data/60-piflash-probes.rules``
(also ``udev/60-piflash-probes.rules``) is generated from it with
``python -m piflash.probe.probetable --write``, :mod:`piflash.probe.usbscan` matches
``/sys/bus/usb/devices`` against it, and a test checks that the committed rules
equal what :func:`render_rules` produces and that every VID:PID the installed
pyOCD recognises as a probe is covered.

Standard library only: :mod:`piflash.probe.permissions` imports this module and must
run with the system ``python3`` when piflash is not installed.

Sources cited per entry: pyOCD paths are relative to the installed ``pyocd`` package
(0.46.0); "probe-rs/OpenOCD rules" are the public rule sets that, with pyOCD's, this table
is the union of: probe-rs's ``69-probe-rs.rules`` (probe-rs documentation, "Probe setup")
and OpenOCD's ``contrib/60-openocd.rules`` (openocd-org/openocd).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, List, Optional, Sequence, Tuple

#: File name of the rules: a number below 73 so ``TAG+="uaccess"`` is set before
#: systemd's 73-seat-late.rules turns it into an ACL (systemd, src/login/73-seat-late.rules.in).
RULES_NAME = "60-piflash-probes.rules"

#: The group given access to probes (Debian's and Raspberry Pi OS's convention).
GROUP = "plugdev"

#: Node mode: owner and group read/write, nobody else (never world-writable).
MODE = "0660"

#: The Raspberry Pi's own pins as an SWD probe (issue 43): the kernel nodes, the udev match that
#: finds each, and the group that may open it. The groups and matches are Raspberry Pi OS's own
#: (RPi-Distro/raspberrypi-sys-mods, etc.armhf/udev/rules.d/99-com.rules: ``SUBSYSTEM=="spidev",
#: GROUP="spi", MODE="0660"``, ``SUBSYSTEM=="gpio", GROUP="gpio", MODE="0660"``, and
#: ``bcm2835-gpiomem`` (``*gpiomem*`` in later releases) for the ``gpio`` group), so a plain
#: Debian or Ubuntu image gets what Pi OS has; on Pi OS both rule files agree.
#: ``KERNEL=="gpiomem*"`` covers ``/dev/gpiomem`` and the Pi 5's ``/dev/gpiomem0..4``.
PIN_NODES: Tuple[Tuple[str, str, str], ...] = (
    ("/dev/spidevB.C", 'SUBSYSTEM=="spidev", KERNEL=="spidev*"', "spi"),
    ("/dev/gpiochipN", 'SUBSYSTEM=="gpio", KERNEL=="gpiochip*"', "gpio"),
    ("/dev/gpiomem", 'KERNEL=="gpiomem*"', "gpio"),
)
#: The groups of :data:`PIN_NODES`, each once, in order (``piflash setup permissions`` creates
#: those that are missing and adds the user to them).
PIN_GROUPS: Tuple[str, ...] = tuple(dict.fromkeys(g for _, _, g in PIN_NODES))

#: Interface kinds of a probe: ``bulk`` (vendor or CMSIS-DAP v2 bulk endpoints, opened
#: through libusb at /dev/bus/usb/BBB/DDD) and ``hid`` (CMSIS-DAP v1, also visible as
#: /dev/hidrawN). pyOCD on Linux opens both kinds through libusb; the rules open the
#: ``usb`` node and every ``hidraw`` node of every probe, whatever its kinds, so a
#: firmware update that adds or drops an interface needs no new rule.
KINDS = ("bulk", "hid")

_PYOCD_CMSIS = "pyOCD probe/pydapaccess/interface/common.py KNOWN_CMSIS_DAP_IDS"
_PYOCD_STLINK = "pyOCD probe/stlink/usb.py STLinkUSBInterface.USB_PID_EP_MAP"
_RULES = "probe-rs/OpenOCD rules"


@dataclass(frozen=True)
class ProbeModel:
    """One kind of USB debug probe.

    :ivar name: what the probe is called (str), e.g. ``"ST-Link/V2-1"``.
    :ivar vid: USB vendor ID (int, 0..0xffff).
    :ivar pids: USB product IDs (tuple of int); a range in the source is expanded.
    :ivar kinds: interface kinds (tuple of ``"bulk"``/``"hid"``), see :data:`KINDS`.
    :ivar source: where the VID:PID comes from (str).
    """

    name: str
    vid: int
    pids: Tuple[int, ...]
    kinds: Tuple[str, ...]
    source: str

    def ids(self) -> Iterator[Tuple[int, int]]:
        """Yield every ``(vid, pid)`` pair of this model."""
        for pid in self.pids:
            yield self.vid, pid


def _span(first: int, last: int) -> Tuple[int, ...]:
    """PIDs ``first..last`` inclusive."""
    return tuple(range(first, last + 1))


#: Every probe model. The rules list them in this order.
PROBES: Tuple[ProbeModel, ...] = (
    ProbeModel("ST-Link/V2", 0x0483, (0x3748,), ("bulk",), f"{_PYOCD_STLINK}; {_RULES}"),
    ProbeModel("ST-Link/V2-1", 0x0483, (0x374A, 0x374B, 0x3752), ("bulk",), f"{_PYOCD_STLINK}; {_RULES}"),
    ProbeModel(
        "ST-Link/V3 (DFU mode)", 0x0483, (0x374D,), ("bulk",), f"{_RULES}; named in a comment of {_PYOCD_STLINK}"
    ),
    ProbeModel(
        "ST-Link/V3, V3PWR",
        0x0483,
        (0x374E, 0x374F, 0x3753, 0x3754, 0x3755, 0x3757),
        ("bulk",),
        f"{_PYOCD_STLINK}; {_RULES}",
    ),
    ProbeModel("STM32F103 CMSIS-DAP firmware", 0x0483, (0x572A,), ("hid", "bulk"), _RULES),
    ProbeModel(
        "Arm DAPLink (micro:bit, Mbed boards)",
        0x0D28,
        (0x0204,),
        ("hid", "bulk"),
        f"{_PYOCD_CMSIS} ARM_DAPLINK_ID; {_RULES}",
    ),
    ProbeModel(
        "Microchip EDBG, JTAGICE3, Atmel-ICE, Power Debugger, mEDBG, EDBGC, nEDBG",
        0x03EB,
        (0x2111, 0x2140, 0x2141, 0x2144, 0x2145, 0x216C, 0x2175),
        ("hid", "bulk"),
        f"{_PYOCD_CMSIS}; {_RULES}",
    ),
    ProbeModel(
        "Cypress/Infineon KitProg, MiniProg4",
        0x04B4,
        (0xF138, 0xF139, 0xF148, 0xF151, 0xF152, 0xF154, 0xF155, 0xF166),
        ("hid", "bulk"),
        f"{_PYOCD_CMSIS} (f139: {_RULES}); {_RULES}",
    ),
    ProbeModel(
        "SEGGER J-Link",
        0x1366,
        _span(0x0101, 0x0105) + (0x0107, 0x0108) + _span(0x1001, 0x102F) + _span(0x1050, 0x106F),
        ("bulk",),
        f"{_RULES} (pyOCD reaches J-Link through SEGGER's library, which uses libusb)",
    ),
    ProbeModel("WCH-Link", 0x1A86, (0x8010, 0x8011), ("hid", "bulk"), f"{_PYOCD_CMSIS} (8011); {_RULES}"),
    ProbeModel(
        "NXP LPC-Link2, MCU-Link",
        0x1FC9,
        (0x0090, 0x0143),
        ("hid", "bulk"),
        f"{_PYOCD_CMSIS} NXP_LPCLINK2_ID, NXP_MCULINK_ID; {_RULES}",
    ),
    ProbeModel("WCH-Link (clone VID)", 0x2A86, (0x8011,), ("hid", "bulk"), f"{_PYOCD_CMSIS}; {_RULES}"),
    ProbeModel(
        "Raspberry Pi picoprobe (legacy firmware)",
        0x2E8A,
        (0x0004,),
        ("bulk",),
        f"pyOCD probe/picoprobe.py FindPicoprobe.VID_PID_CLASS; {_RULES}",
    ),
    ProbeModel(
        "Raspberry Pi RP2040/RP2350 in USB BOOTSEL mode (boot ROM, PICOBOOT)",
        0x2E8A,
        (0x0003, 0x000F),
        ("bulk",),
        "RP2040 datasheet 2.8.4, RP2350 datasheet 5.6.1 (the boot ROMs' device descriptors)",
    ),
    ProbeModel(
        "Raspberry Pi Debug Probe, debugprobe on Pico (CMSIS-DAP)",
        0x2E8A,
        (0x000C,),
        ("hid", "bulk"),
        f"raspberrypi/debugprobe src/usb_descriptors.c; {_RULES} (pyOCD finds it by its CMSIS-DAP product string)",
    ),
    ProbeModel("Vega VT-LinkII", 0x30CC, (0x9527,), ("hid", "bulk"), f"{_PYOCD_CMSIS}; {_RULES}"),
    ProbeModel("Keil ULINK2, ULINKplus", 0xC251, (0x2710, 0x2750), ("hid", "bulk"), f"{_PYOCD_CMSIS} (2750); {_RULES}"),
)

#: Substrings of a USB product or interface string that identify any CMSIS-DAP probe,
#: whatever its VID:PID. "CMSIS-DAP" is required by Arm's CMSIS-DAP specification; the
#: others are what some cheap probes say instead (pyOCD
#: probe/pydapaccess/interface/common.py KNOWN_DEVICE_STRINGS).
PRODUCT_STRINGS: Tuple[str, ...] = ("CMSIS-DAP", "CMSIS_DAP", "WCH-Link")

#: The model reported for a device matched only by :data:`PRODUCT_STRINGS`.
GENERIC_CMSIS_DAP = ProbeModel(
    "CMSIS-DAP probe (by its product string)",
    0,
    (),
    ("hid", "bulk"),
    "Arm CMSIS-DAP specification; pyOCD KNOWN_DEVICE_STRINGS",
)


def lookup(vid: int, pid: int, strings: Sequence[str] = ()) -> Optional[ProbeModel]:
    """The probe model of a USB device, or None when it is not a probe.

    :param vid: USB vendor ID (int).
    :param pid: USB product ID (int).
    :param strings: the device's product and interface strings (str), for probes that
        are known only by a CMSIS-DAP product string.
    :returns: the matching :class:`ProbeModel`, :data:`GENERIC_CMSIS_DAP`, or None.
    """
    for model in PROBES:
        if model.vid == vid and pid in model.pids:
            return model
    if any(key in s for s in strings if s for key in PRODUCT_STRINGS):
        return GENERIC_CMSIS_DAP
    return None


def all_ids() -> List[Tuple[int, int]]:
    """Every ``(vid, pid)`` in :data:`PROBES`, sorted, without duplicates."""
    return sorted({pair for model in PROBES for pair in model.ids()})


_END = "piflash_probes_end"
_MARK = 'ENV{PIFLASH_PROBE}="1"'


def render_rules() -> str:
    """The udev rules file for every probe in :data:`PROBES` (str, ends with a newline).

    Structure: each known VID:PID (and each CMSIS-DAP product string) marks the USB
    device and everything below it (its hidraw and tty nodes) with
    ``ENV{PIFLASH_PROBE}="1"``; marked ``usb`` devices and ``hidraw`` nodes then get
    ``MODE="0660", GROUP="plugdev", TAG+="uaccess"``, and every marked device gets
    ``ENV{ID_MM_DEVICE_IGNORE}="1"`` so ModemManager leaves the probe's serial port alone.
    Conventions of the probe-rs and OpenOCD rule sets (MODE 660, GROUP plugdev, TAG uaccess).
    Before them, the Pi's SPI and GPIO nodes (:data:`PIN_NODES`) get mode 0660 and the ``spi`` or
    ``gpio`` group.
    """
    out = [
        f"# {RULES_NAME}: let the {GROUP} group (and the logged-in seat user) open USB debug probes,",
        "# and the spi and gpio groups the Raspberry Pi's SPI and GPIO nodes.",
        "# GENERATED from piflash/probe/probetable.py by `python -m piflash.probe.probetable --write`; do not edit.",
        '# Installed by `sudo "$(command -v piflash)" setup permissions` (or scripts/setup-probe-permissions.sh).',
        f"# Mode {MODE}: never world-writable. See docs/permissions.md.",
        "",
        f'ACTION=="remove", GOTO="{_END}"',
        "",
        "# The Raspberry Pi's own SPI and GPIO pins as an SWD probe (spidev:, gpio:): the groups and",
        "# modes of Raspberry Pi OS's 99-com.rules (raspberrypi-sys-mods), for images without it.",
    ]
    for node, match, group in PIN_NODES:
        out.append(f"# {node}")
        out.append(f'{match}, MODE="{MODE}", GROUP="{group}"')
    out += [
        "",
        f'SUBSYSTEM!="usb|hidraw|tty", GOTO="{_END}"',
        f'SUBSYSTEM=="usb", ENV{{DEVTYPE}}!="usb_device", GOTO="{_END}"',
        "",
        "# Known probes by VID:PID. ATTRS matches the USB device itself and, for its hidraw",
        "# and tty nodes, their USB parent.",
    ]
    for model in PROBES:
        out.append(f"# {model.name} (source: {model.source})")
        for vid, pid in model.ids():
            out.append(f'ATTRS{{idVendor}}=="{vid:04x}", ATTRS{{idProduct}}=="{pid:04x}", {_MARK}')
    out += ["", "# Any CMSIS-DAP probe, by its product string or (for hidraw) its interface string."]
    for key in PRODUCT_STRINGS:
        out.append(f'ATTRS{{product}}=="*{key}*", {_MARK}')
    for key in PRODUCT_STRINGS:
        out.append(f'SUBSYSTEM=="hidraw", ATTRS{{interface}}=="*{key}*", {_MARK}')
    out += [
        "",
        f'ENV{{PIFLASH_PROBE}}!="1", GOTO="{_END}"',
        'ENV{ID_MM_DEVICE_IGNORE}="1"',
        f'SUBSYSTEM=="usb|hidraw", MODE="{MODE}", GROUP="{GROUP}", TAG+="uaccess"',
        "",
        f'LABEL="{_END}"',
    ]
    return "\n".join(out) + "\n"


def packaged_rules_path() -> Path:
    """Path of the rules file shipped as package data (``piflash/data/60-piflash-probes.rules``)."""
    return Path(__file__).resolve().parents[1] / "data" / RULES_NAME


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``python -m piflash.probe.probetable``: print the rules, ``--write`` the packaged copy,
    or ``--check`` that it is current (exit 1 when not)."""
    parser = argparse.ArgumentParser(prog="python -m piflash.probe.probetable", description=main.__doc__)
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--write", action="store_true", help=f"regenerate {packaged_rules_path()}")
    group.add_argument("--check", action="store_true", help="exit 1 if the packaged rules are stale")
    args = parser.parse_args(argv)
    text = render_rules()
    path = packaged_rules_path()
    if args.write:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(f"wrote {path}", file=sys.stderr)
    elif args.check:
        current = path.read_text() if path.exists() else ""
        if current != text:
            print(f"{path} is stale: run python -m piflash.probe.probetable --write", file=sys.stderr)
            return 1
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
