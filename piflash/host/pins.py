"""The Raspberry Pi's 40-pin header, its SPI pins, and who uses which GPIO (issue 43, item 3).

Pure data and logic, no hardware access except :func:`line_claims`, which only *reads* who
holds a GPIO line (never requests, drives or clocks one: a HAT or a board's reset line may be
attached).

Sources of the numbers:

- GPIO to physical pin: the Raspberry Pi documentation, "GPIO and the 40-pin header"
  (https://www.raspberrypi.com/documentation/computers/raspberry-pi.html#gpio), the same on every
  40-pin model including the Zero 2 W; and pinout.xyz.
- SPI0 and SPI1 pins (ALT0 for SPI0, ALT4 for SPI1): BCM2835 ARM Peripherals, section 6.2
  "Alternative Function Assignments", table 6-31 (SPI0_CE1_N GPIO 7, SPI0_CE0_N 8, SPI0_MISO 9,
  SPI0_MOSI 10, SPI0_SCLK 11; SPI1_CE2_N 16, SPI1_CE1_N 17, SPI1_CE0_N 18, SPI1_MISO 19,
  SPI1_MOSI 20, SPI1_SCLK 21). The BCM2710A1 of the Zero 2 W has the same GPIO block.

A ``gpio:`` or ``spidev:`` probe ID is parsed by the probe layer (:mod:`piflash.probe.pins`)
and read here only for its pins (:func:`swd_pins_of`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

#: Physical header pin -> GPIO (BCM) number, for the pins that are GPIOs.
HEADER_GPIO: Dict[int, int] = {
    3: 2, 5: 3, 7: 4, 8: 14, 10: 15, 11: 17, 12: 18, 13: 27, 15: 22, 16: 23, 18: 24, 19: 10,
    21: 9, 22: 25, 23: 11, 24: 8, 26: 7, 27: 0, 28: 1, 29: 5, 31: 6, 32: 12, 33: 13, 35: 19,
    36: 16, 37: 26, 38: 20, 40: 21,
}  # fmt: skip
#: Physical header pins that are power or ground.
HEADER_POWER: Dict[int, str] = {
    1: "3V3", 17: "3V3", 2: "5V", 4: "5V",
    6: "GND", 9: "GND", 14: "GND", 20: "GND", 25: "GND", 30: "GND", 34: "GND", 39: "GND",
}  # fmt: skip
#: GPIO -> physical header pin.
GPIO_HEADER: Dict[int, int] = {gpio: pin for pin, gpio in HEADER_GPIO.items()}

#: SPI0's signals and their GPIOs (BCM2835 ARM Peripherals, table 6-31, ALT0).
SPI0_PINS: Dict[str, int] = {"MISO": 9, "MOSI": 10, "SCLK": 11, "CE0": 8, "CE1": 7}
#: SPI1's signals and their GPIOs (BCM2835 ARM Peripherals, table 6-31, ALT4).
SPI1_PINS: Dict[str, int] = {"MISO": 19, "MOSI": 20, "SCLK": 21, "CE0": 18, "CE1": 17, "CE2": 16}
#: Bus number -> its signals.
SPI_PINS: Dict[int, Dict[str, int]] = {0: SPI0_PINS, 1: SPI1_PINS}

#: GPIOs on the header a user may give a probe or the station (BCM 0..27).
HEADER_GPIOS = tuple(sorted(GPIO_HEADER))


def header_pin(gpio: int) -> Optional[int]:
    """The physical header pin (int, 1..40) of BCM ``gpio``, or None when it is not on the header."""
    return GPIO_HEADER.get(gpio)


def describe(gpio: int) -> str:
    """``"GPIO 17 (pin 11)"``: a GPIO named with its header pin, as messages show it."""
    pin = header_pin(gpio)
    return f"GPIO {gpio}" + (f" (pin {pin})" if pin else "")


@dataclass(frozen=True)
class PinUse:
    """One GPIO and what uses it.

    :ivar gpio: BCM GPIO number (int).
    :ivar owner: who uses it, as a message names it (str), e.g. ``"station gpio.pass_led"``,
        ``"SPI1 CE1 (dtoverlay=spi1-2cs, config.txt line 9)"``, ``"gpio:gpiochip0 swclk"``.
    :ivar group: what the use belongs to (str); uses of one group never collide with each
        other (SPI1's MOSI and MISO both being SWDIO is the wiring, not a collision).
    """

    gpio: int
    owner: str
    group: str


@dataclass(frozen=True)
class Collision:
    """Two uses of one GPIO from different groups.

    :ivar gpio: the BCM GPIO number (int).
    :ivar first: the first use (:class:`PinUse`), in the order given.
    :ivar second: the other use.
    """

    gpio: int
    first: PinUse
    second: PinUse

    def message(self) -> str:
        """``"GPIO 17 (pin 11) is station gpio.pass_led and SPI1 CE1 (...)"`` (str)."""
        return f"{describe(self.gpio)} is {self.first.owner} and also {self.second.owner}"


def collisions(uses: Iterable[PinUse]) -> List[Collision]:
    """Every pair of uses of one GPIO from different groups, in the order given (list)."""
    seen: Dict[int, List[PinUse]] = {}
    out = []
    for use in uses:
        for other in seen.get(use.gpio, []):
            if other.group != use.group:
                out.append(Collision(use.gpio, other, use))
        seen.setdefault(use.gpio, []).append(use)
    return out


def free_gpios(used: Iterable[int], count: int = 3) -> List[int]:
    """Up to ``count`` header GPIOs not in ``used``, avoiding the I2C pins (GPIO 2, 3), UART
    (14, 15) and the ID EEPROM pins (0, 1) that HATs use; lowest first (list of int)."""
    avoid = set(used) | {0, 1, 2, 3, 14, 15}
    return [g for g in HEADER_GPIOS if g not in avoid][:count]


@dataclass(frozen=True)
class SwdPins:
    """The pins of one Pi-pin SWD probe, as its probe ID gives them.

    :ivar probe_id: the ID as written (str), e.g. ``"spidev:0.0"``.
    :ivar kind: ``"spidev"`` or ``"gpio"``.
    :ivar device: ``/dev`` name of the device (str): ``"spidev0.0"`` or ``"gpiochip0"``.
    :ivar bus: the SPI bus (int) of a spidev probe, else None.
    :ivar pins: (signal, line) pairs: for ``gpio:`` its ``swclk``, ``swdio`` and optional
        ``nreset`` (line offsets; BCM GPIO numbers on ``gpiochip0``); for ``spidev:`` the bus's
        ``sclk``, ``mosi``, ``miso`` (SWCLK, and SWDIO through the resistor), and its ``nreset``
        GPIO when that is on ``gpiochip0`` (a line of another chip is not the header's).
    """

    probe_id: str
    kind: str
    device: str
    bus: Optional[int]
    pins: Tuple[Tuple[str, int], ...]


def swd_pins_of(probe_id: str) -> Optional[SwdPins]:
    """The pins of a ``spidev:B.C[:nreset=N]`` or ``gpio:gpiochipN:swclk=A,swdio=B[,nreset=C]`` probe ID
    (issue 43), parsed by the probe layer (:func:`piflash.probe.pins.parse_pin_probe_id`), or
    None for any other probe ID (USB, ``sim:``, ``remote:``).

    A ``spidev:`` probe's pins are its bus's SCLK, MOSI and MISO, and its nRESET GPIO; a
    ``gpio:`` probe's on ``gpiochip0`` (the header's chip on a Pi, line offset = BCM GPIO number),
    and a ``spidev:`` probe's nRESET there, must be header GPIOs 0..27.

    :raises ValueError: a ``spidev:``/``gpio:`` ID the probe layer refuses (its message and hint),
        a bus other than SPI0/SPI1, a ``gpiochip0`` line that is not a header GPIO, or a
        ``spidev:`` nRESET on its own bus's SCLK, MOSI or MISO.
    """
    from piflash.errors import ProbeSyntaxError
    from piflash.probe.pins import GPIO_TAG, SPIDEV_TAG, SpidevSpec, parse_pin_probe_id

    if not probe_id.lower().startswith((SPIDEV_TAG, GPIO_TAG)):
        return None
    try:
        spec = parse_pin_probe_id(probe_id)
    except ProbeSyntaxError as exc:
        raise ValueError(exc.message + (f" ({exc.hint})" if exc.hint else "")) from None
    if isinstance(spec, SpidevSpec):
        if spec.bus not in SPI_PINS:
            raise ValueError(f"{probe_id}: SPI bus {spec.bus} is not on the 40-pin header (SPI0 and SPI1 are)")
        spi = SPI_PINS[spec.bus]
        pins: Tuple[Tuple[str, int], ...] = (("sclk", spi["SCLK"]), ("mosi", spi["MOSI"]), ("miso", spi["MISO"]))
        if spec.nreset is not None and spec.nreset_chip == "gpiochip0":
            if spec.nreset not in GPIO_HEADER:
                raise ValueError(f"{probe_id}: nreset={spec.nreset} is not a GPIO of the 40-pin header (0..27)")
            for name, gpio in pins:
                if gpio == spec.nreset:
                    raise ValueError(f"{probe_id}: nreset={gpio} is SPI{spec.bus} {name.upper()}, one pin in two roles")
            pins += (("nreset", spec.nreset),)
        return SwdPins(spec.probe_id, "spidev", spec.device, spec.bus, pins)
    lines = tuple(spec.lines.items())
    if spec.chip == "gpiochip0":
        for name, gpio in lines:
            if gpio not in GPIO_HEADER:
                raise ValueError(f"{probe_id}: {name}={gpio} is not a GPIO of the 40-pin header (0..27)")
    return SwdPins(spec.probe_id, "gpio", spec.chip, None, lines)


def probe_uses(probe: SwdPins) -> List[PinUse]:
    """The header GPIOs ``probe`` drives, as :class:`PinUse` (group: the probe ID); none for a
    ``gpio:`` probe on a chip other than ``gpiochip0``, whose lines are not the header's."""
    if probe.kind == "gpio" and probe.device != "gpiochip0":
        return []
    return [PinUse(g, f"{probe.probe_id} {name}", probe.probe_id) for name, g in probe.pins]


def station_uses(gpio: Mapping[str, int]) -> List[PinUse]:
    """The station's LED, buzzer and button pins (station.yaml ``gpio:``, role -> BCM GPIO)."""
    return [PinUse(pin, f"station gpio.{role}", "station") for role, pin in gpio.items()]


# -- who holds a line: read, never requested ---------------------------------------------------

#: Where debugfs lists gpiolib's lines, relative to the sysfs root's parent (``/sys``).
DEBUGFS_GPIO = "kernel/debug/gpio"

_CHIP = re.compile(r"^(gpiochip\d+): GPIOs (\d+)-(\d+)")
_LINE = re.compile(r"^\s*gpio-(\d+)\s+\(([^|)]*)(?:\|([^)]*))?\)")


@dataclass(frozen=True)
class LineState:
    """Who holds one GPIO line, as the kernel says.

    :ivar offset: the line's offset on its chip (int; BCM GPIO number on gpiochip0 of a Pi).
    :ivar used: True (a consumer holds it), False (free), or None (could not tell).
    :ivar consumer: the holder's name (str, ``""`` when free or unknown).
    :ivar source: how it was read (str): ``"gpiod"``, ``"debugfs"`` or the reason it was not.
    """

    offset: int
    used: Optional[bool]
    consumer: str
    source: str


def parse_debugfs_gpio(text: str, chip: str) -> Dict[int, Tuple[bool, str]]:
    """Lines of ``chip`` in ``/sys/kernel/debug/gpio`` text: offset -> (used, consumer).

    The file lists each chip (``gpiochip0: GPIOs 512-565, parent: platform/...``) and the lines
    that have a name or a consumer (`` gpio-529 (SPI_MISO |spi0 CS0 ) out hi``); the number is
    the global one, the chip's base plus the offset (gpiolib's ``gpiolib_dbg_show``, Linux
    drivers/gpio/gpiolib.c). A line with a consumer after ``|`` is held.
    """
    out: Dict[int, Tuple[bool, str]] = {}
    base = None
    for line in text.splitlines():
        m = _CHIP.match(line)
        if m:
            base = int(m.group(2)) if m.group(1) == chip else None
            continue
        m = _LINE.match(line)
        if m and base is not None:
            consumer = (m.group(3) or "").strip()
            out[int(m.group(1)) - base] = (bool(consumer), consumer)
    return out


def line_claims(chip: str, offsets: Sequence[int], dev_root: str = "/dev", sysfs_root: str = "/sys") -> List[LineState]:
    """Who holds each of ``offsets`` on ``chip`` (e.g. ``"gpiochip0"``), read passively.

    First the GPIO character device's line info through gpiod (v2's ``Chip.get_line_info``, v1's
    ``Line.is_used``), when that library is installed: reading line info requests nothing.
    Else ``<sysfs_root>/kernel/debug/gpio`` when it is readable (root, debugfs mounted). Else
    every state is unknown (``used`` None), with the reason in ``source``.

    :returns: one :class:`LineState` per offset, in order.
    """
    path = Path(dev_root, chip)
    try:
        import gpiod  # type: ignore[import-not-found]
    except ImportError:
        gpiod = None
    if gpiod is not None and path.exists():
        try:
            return _gpiod_claims(gpiod, str(path), offsets)
        except (OSError, AttributeError, ValueError):
            pass
    debug = Path(sysfs_root, DEBUGFS_GPIO)
    try:
        lines = parse_debugfs_gpio(debug.read_text(errors="replace"), chip)
    except OSError as exc:
        why = f"unknown: no gpiod library, and {debug} is not readable ({exc.strerror or exc})"
        return [LineState(o, None, "", why) for o in offsets]
    return [LineState(o, *lines.get(o, (False, "")), source="debugfs") for o in offsets]


def _gpiod_claims(gpiod, path: str, offsets: Sequence[int]) -> List[LineState]:
    out = []
    chip = gpiod.Chip(path)
    try:
        for o in offsets:
            if hasattr(chip, "get_line_info"):  # libgpiod v2 bindings
                info = chip.get_line_info(o)
                out.append(LineState(o, bool(info.used), info.consumer or "", "gpiod"))
            else:  # v1 bindings
                line = chip.get_line(o)
                out.append(LineState(o, bool(line.is_used()), line.consumer() or "", "gpiod"))
    finally:
        chip.close()
    return out
