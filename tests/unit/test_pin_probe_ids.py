"""The Pi's pins as a probe (issue 43): how ``spidev:`` and ``gpio:`` probe IDs parse."""

import pytest

from piflash.errors import ExitCode, ProbeSyntaxError
from piflash.probe.pins import GpioSpec, SpidevSpec, parse_pin_probe_id
from piflash.probe.selector import ProbeSelector


@pytest.mark.parametrize(
    "text, spec",
    [
        ("spidev:0.0", SpidevSpec(0, 0)),
        ("spidev:1.0", SpidevSpec(1, 0)),
        ("SPIDEV:1.2", SpidevSpec(1, 2)),
        ("spidev:0.0:nreset=25", SpidevSpec(0, 0, 25)),
        ("spidev:1.0:nreset=gpiochip4/13", SpidevSpec(1, 0, 13, "gpiochip4")),
        ("gpio:gpiochip0:swclk=5,swdio=6", GpioSpec("gpiochip0", 5, 6)),
        ("gpio:gpiochip0:swclk=5,swdio=6,nreset=13", GpioSpec("gpiochip0", 5, 6, 13)),
        ("GPIO:gpiochip4:swclk=0,swdio=27", GpioSpec("gpiochip4", 0, 27)),
    ],
)
def test_accepted_forms(text, spec):
    assert parse_pin_probe_id(text) == spec
    assert spec.probe_id.lower() == text.lower()


@pytest.mark.parametrize(
    "text, says",
    [
        ("spidev:0", "BUS.CS"),
        ("spidev:0.0.0", "BUS.CS"),
        ("spidev:a.0", "BUS.CS"),
        ("spidev:00.0", "BUS.CS"),
        ("spidev:0.256", "chip select at most 255"),
        ("spidev:0.0:", "only nreset=N"),
        ("spidev:0.0:swclk=5", "only nreset=N"),
        ("spidev:0.0:nreset", "only nreset=N"),
        ("spidev:0.0:nreset=x", "not a line offset"),
        ("spidev:0.0:nreset=65536", "not a line offset"),
        ("spidev:0.0:nreset=/13", "not a GPIO chip's name"),
        ("gpio:gpiochip0", "chip name"),
        ("gpio::swclk=5,swdio=6", "chip name"),
        ("gpio:gpiochip0:swclk=5", "swdio=N is missing"),
        ("gpio:gpiochip0:swclk=5,swdio=5", "two roles"),
        ("gpio:gpiochip0:swclk=5,swdio=6,swclk=7", "given twice"),
        ("gpio:gpiochip0:swclk=5,swdio=x", "not a line offset"),
        ("gpio:gpiochip0:swclk=5,swdio=6,tck=7", "not one of"),
        ("usb:1234", "neither spidev: nor gpio:"),
    ],
)
def test_refused_forms_name_the_accepted_ones(text, says):
    with pytest.raises(ProbeSyntaxError) as info:
        parse_pin_probe_id(text)
    assert says in str(info.value)
    assert info.value.exit_code == ExitCode.USAGE
    assert "spidev:0.0" in (info.value.hint or "")


def test_one_spelling_names_the_canonical_one():
    with pytest.raises(ProbeSyntaxError) as info:
        parse_pin_probe_id("gpio:gpiochip0:swdio=6,swclk=5")
    assert info.value.hint == "write gpio:gpiochip0:swclk=5,swdio=6"


@pytest.mark.parametrize(
    "text, canonical",
    [
        ("spidev:0.0:nreset=gpiochip0/25", "spidev:0.0:nreset=25"),
        ("spidev:0.0:NRESET=25", "spidev:0.0:nreset=25"),
        ("spidev:0.0:nreset=025", "spidev:0.0:nreset=25"),
    ],
)
def test_one_spidev_spelling_names_the_canonical_one(text, canonical):
    with pytest.raises(ProbeSyntaxError) as info:
        parse_pin_probe_id(text)
    assert info.value.hint == "write " + canonical


def test_spidev_nreset_is_part_of_the_identity():
    spec = parse_pin_probe_id("spidev:0.0:nreset=25")
    assert spec.device == "spidev0.0" and spec.nreset == 25 and spec.nreset_chip == "gpiochip0"
    sel = ProbeSelector.parse("spidev:0.0:nreset=25")
    assert sel.kind.name == "spidev"
    assert sel.matches("spidev:0.0:nreset=25") and not sel.matches("spidev:0.0")


def test_selector_kinds():
    sel = ProbeSelector.parse("spidev:0.0")
    assert sel.kind.name == "spidev" and sel.transport == "pyocd"
    assert sel.matches("SPIDEV:0.0") and not sel.matches("spidev:0.1")
    gpio = ProbeSelector.parse("gpio:gpiochip0:swclk=5,swdio=6")
    assert gpio.kind.name == "gpio"
    assert not gpio.matches("gpio:gpiochip0:swclk=5,swdio=6,nreset=13")
    with pytest.raises(ProbeSyntaxError):
        ProbeSelector.parse("spidev:zero")
    assert ProbeSelector.parse("spidev:*").prefix
