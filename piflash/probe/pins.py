"""Probe IDs of the Pi's own pins as an SWD probe (issue 43): ``spidev:B.C`` and ``gpio:CHIP:...``.

Two kinds of probe ID name the Pi's pins, parsed here once (standard library only, so the station's
config check and the CLI parse them before pyOCD is imported):

=============================================  ==================================================
``spidev:0.0``, ``spidev:1.0``                 SWD over the SPI controller: ``/dev/spidevB.C``
                                               (SPI bus B, chip select C), MOSI through a resistor
                                               to SWDIO, MISO straight to SWDIO, SCLK to SWCLK
``spidev:0.0:nreset=13``                       the same with an open-drain nRESET on line 13 of
``spidev:0.0:nreset=gpiochip4/13``             ``/dev/gpiochip0``, or of another chip named
``gpio:gpiochip0:swclk=5,swdio=6[,nreset=13]`` SWD bit-banged on two lines of ``/dev/gpiochipN``
                                               (line offsets, which on a Pi are the BCM GPIO
                                               numbers), with an optional open-drain nRESET line
=============================================  ==================================================

A probe ID is matched as a whole (:mod:`piflash.probe.selector`), so each has one spelling: the
keys of a ``gpio:`` ID in the order ``swclk``, ``swdio``, ``nreset``, numbers in decimal without
leading zeros; a ``spidev:`` nRESET on ``gpiochip0`` (the header's chip on a Pi) without the chip's
name, on any other chip with it. :func:`parse_pin_probe_id` accepts only that spelling and, for any
other that means the same pins, names the one to write.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, Optional, Union

from piflash.errors import ProbeSyntaxError

__all__ = [
    "GPIO_TAG",
    "SPIDEV_TAG",
    "GpioSpec",
    "SpidevSpec",
    "ACCEPTED_FORMS",
    "parse_pin_probe_id",
]

SPIDEV_TAG = "spidev:"
GPIO_TAG = "gpio:"
#: What an error names as the accepted forms.
ACCEPTED_FORMS = "spidev:BUS.CS[:nreset=N] (e.g. spidev:0.0, spidev:1.0:nreset=13) or gpio:CHIP:swclk=N,swdio=N[,nreset=N] (e.g. gpio:gpiochip0:swclk=5,swdio=6,nreset=13)"
#: Highest line offset accepted: a GPIO chip has at most 65536 lines in the v2 uAPI's u32 offsets,
#: but the BCM2835/BCM2711 chips have 54 and 58 lines; the bound only keeps nonsense out.
MAX_LINE = 65535
#: Highest SPI bus / chip-select number: spidev names ``spidevB.C`` with the kernel's ``u16 bus_num``
#: and ``u8 chip_select`` (``include/linux/spi/spi.h``, ``drivers/spi/spidev.c``).
MAX_SPI_BUS = 65535
MAX_SPI_CS = 255

_NUMBER = r"(0|[1-9][0-9]*)"
_SPIDEV = re.compile(rf"^{_NUMBER}\.{_NUMBER}$")
_CHIP = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
#: The chip of a ``spidev:`` nRESET line when the ID names none: the header's on a Pi.
DEFAULT_CHIP = "gpiochip0"
_GPIO_KEYS = ("swclk", "swdio", "nreset")


@dataclass(frozen=True)
class SpidevSpec:
    """SWD over ``/dev/spidevBUS.CS``, with an optional open-drain nRESET on a GPIO line.

    :ivar bus: the SPI bus number (int, 0 for SPI0, 1 for SPI1).
    :ivar cs: the chip select (int).
    :ivar nreset: line offset of nRESET on ``nreset_chip`` (int; on a Pi's ``gpiochip0`` the BCM
        GPIO number), or None: no reset line.
    :ivar nreset_chip: the GPIO chip's device name under ``/dev`` of that line (str).
    """

    bus: int
    cs: int
    nreset: Optional[int] = None
    nreset_chip: str = DEFAULT_CHIP

    @property
    def probe_id(self) -> str:
        """The probe ID (str): ``spidev:0.0``, ``spidev:0.0:nreset=13``,
        ``spidev:0.0:nreset=gpiochip4/13``."""
        text = f"{SPIDEV_TAG}{self.bus}.{self.cs}"
        if self.nreset is None:
            return text
        chip = "" if self.nreset_chip == DEFAULT_CHIP else f"{self.nreset_chip}/"
        return f"{text}:nreset={chip}{self.nreset}"

    @property
    def device(self) -> str:
        """The device file's name under ``/dev`` (str): ``spidev0.0``."""
        return f"spidev{self.bus}.{self.cs}"


@dataclass(frozen=True)
class GpioSpec:
    """SWD bit-banged on lines of a GPIO chip (GPIO character device, uAPI v2).

    :ivar chip: the chip's device name under ``/dev`` (str, ``gpiochip0``).
    :ivar swclk: line offset of SWCLK (int; on a Pi the BCM GPIO number).
    :ivar swdio: line offset of SWDIO (int).
    :ivar nreset: line offset of nRESET, driven open-drain (int), or None.
    """

    chip: str
    swclk: int
    swdio: int
    nreset: Optional[int] = None

    @property
    def probe_id(self) -> str:
        """The probe ID (str): ``gpio:gpiochip0:swclk=5,swdio=6,nreset=13``."""
        text = f"{GPIO_TAG}{self.chip}:swclk={self.swclk},swdio={self.swdio}"
        return text + (f",nreset={self.nreset}" if self.nreset is not None else "")

    @property
    def lines(self) -> Dict[str, int]:
        """The lines by role (``swclk``, ``swdio``, and ``nreset`` when given)."""
        out = {"swclk": self.swclk, "swdio": self.swdio}
        if self.nreset is not None:
            out["nreset"] = self.nreset
        return out


def _error(text: str, why: str) -> ProbeSyntaxError:
    return ProbeSyntaxError(f"'{text}' is not a pin probe ID: {why}", hint=f"write {ACCEPTED_FORMS}")


def _spidev(text: str, value: str) -> SpidevSpec:
    device, sep, extra = value.partition(":")
    m = _SPIDEV.match(device)
    if not m:
        raise _error(text, "spidev: takes BUS.CS, two decimal numbers")
    bus, cs = int(m.group(1)), int(m.group(2))
    if bus > MAX_SPI_BUS or cs > MAX_SPI_CS:
        raise _error(text, f"the bus is at most {MAX_SPI_BUS} and the chip select at most {MAX_SPI_CS}")
    if not sep:
        return SpidevSpec(bus, cs)
    key, eq, line = extra.partition("=")
    if key.strip().lower() != "nreset" or not eq:
        raise _error(text, f"after BUS.CS only nreset=N (or nreset=CHIP/N) may follow, not '{extra}'")
    chip, slash, number = line.strip().rpartition("/")
    chip = chip.strip() if slash else DEFAULT_CHIP
    number = number.strip()
    if not _CHIP.match(chip):
        raise _error(text, f"'{chip}' is not a GPIO chip's name (gpiochip0)")
    if not number.isdigit() or int(number) > MAX_LINE:
        raise _error(text, f"nreset={number} is not a line offset (0-{MAX_LINE})")
    spec = SpidevSpec(bus, cs, int(number), chip)
    if spec.probe_id != SPIDEV_TAG + value:
        raise ProbeSyntaxError(
            f"'{text}' names these pins, but a probe ID has one spelling",
            hint=f"write {spec.probe_id}",
        )
    return spec


def _gpio(text: str, value: str) -> GpioSpec:
    chip, sep, pins = value.partition(":")
    if not sep or not chip or not _CHIP.match(chip):
        raise _error(text, "gpio: takes a chip name (gpiochip0), a ':' and the lines")
    found: Dict[str, int] = {}
    for item in pins.split(","):
        key, eq, number = item.partition("=")
        key = key.strip().lower()
        if key not in _GPIO_KEYS or not eq:
            raise _error(text, f"'{item}' is not one of swclk=N, swdio=N, nreset=N")
        if key in found:
            raise _error(text, f"{key} is given twice")
        number = number.strip()
        if not number.isdigit() or int(number) > MAX_LINE:
            raise _error(text, f"{key}={number} is not a line offset (0-{MAX_LINE})")
        found[key] = int(number)
    for key in ("swclk", "swdio"):
        if key not in found:
            raise _error(text, f"{key}=N is missing")
    if len(set(found.values())) != len(found):
        raise _error(text, "one line is given two roles")
    spec = GpioSpec(chip, found["swclk"], found["swdio"], found.get("nreset"))
    if spec.probe_id != text.strip():
        raise ProbeSyntaxError(
            f"'{text}' names these pins, but a probe ID has one spelling",
            hint=f"write {spec.probe_id}",
        )
    return spec


def parse_pin_probe_id(text: str) -> Union[SpidevSpec, GpioSpec]:
    """Parse a pin probe ID: ``spidev:BUS.CS[:nreset=[CHIP/]N]`` or ``gpio:CHIP:swclk=N,swdio=N[,nreset=N]``.

    :param text: the probe ID (str); the tags ``spidev:`` and ``gpio:`` in any case.
    :returns: a :class:`SpidevSpec` or a :class:`GpioSpec`.
    :raises ProbeSyntaxError: (exit 2) not one of the forms, naming the accepted forms; a ``gpio:``
        or ``spidev:`` ID that names pins in another spelling names the one to write.
    """
    raw = text.strip()
    low = raw.lower()
    if low.startswith(SPIDEV_TAG):
        return _spidev(text, raw[len(SPIDEV_TAG) :])
    if low.startswith(GPIO_TAG):
        return _gpio_whole(raw)
    raise _error(text, "it begins with neither spidev: nor gpio:")


def _gpio_whole(raw: str) -> GpioSpec:
    # The tag in any case, the rest as written (a chip name is case-sensitive in /dev).
    return _gpio(GPIO_TAG + raw[len(GPIO_TAG) :], raw[len(GPIO_TAG) :])
