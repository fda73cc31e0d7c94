"""Issue 43 item 3: the boot config's SPI settings, the header's pin map, and pin collisions
(piflash/host/spi.py, piflash/host/pins.py), against config.txt files written in a temp folder."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from piflash.host import pins, spi

ZERO2W = "Raspberry Pi Zero 2 W Rev 1.0"


def buses(tmp_path: Path, text: str, model=ZERO2W, name="config.txt"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return spi.spi_buses(spi.parse_boot_config(path, model))


def test_spi0_on_and_its_pins(tmp_path):
    b = buses(tmp_path, "dtparam=audio=on\ndtparam=spi=on\n")
    assert b[0].enabled and b[0].by == "dtparam=spi=on (config.txt line 2)"
    assert b[0].claimed() == {11: "SPI0 SCLK", 10: "SPI0 MOSI", 9: "SPI0 MISO", 8: "SPI0 CE0", 7: "SPI0 CE1"}
    assert not b[1].enabled and b[1].claimed() == {}


@pytest.mark.parametrize("text", [
    "", "#dtparam=spi=on\n", "  # dtparam=spi=on\n", "dtparam=spi=off\n", "dtparam=spi=on\ndtparam=spi=off\n",
    "dtparam=spix=on\n", "dtparams=spi=on\n",
])
def test_spi0_off(tmp_path, text):
    assert not buses(tmp_path, text)[0].enabled


@pytest.mark.parametrize("text", ["dtparam=spi\n", "dtparam=i2c_arm=on,spi=on\n", "dtparam=spi=on # SWD\n",
                                  "DTPARAM=spi=yes\n", "dtparam=spi=off\ndtparam=spi=on\n"])
def test_spi0_on_forms(tmp_path, text):
    assert buses(tmp_path, text)[0].enabled


def test_spi1_variants_claim_17_and_16(tmp_path):
    one = buses(tmp_path, "dtoverlay=spi1-1cs\n")[1]
    assert one.enabled and one.chip_selects == (18,)
    assert set(one.claimed()) == {19, 20, 21, 18}
    two = buses(tmp_path, "dtoverlay=spi1-2cs\n")[1]
    assert two.chip_selects == (18, 17) and two.claimed()[17] == "SPI1 CE1"
    three = buses(tmp_path, "dtoverlay=spi1-3cs\n")[1]
    assert three.chip_selects == (18, 17, 16) and three.claimed()[16] == "SPI1 CE2"
    assert three.by == "dtoverlay=spi1-3cs (config.txt line 1)"


def test_cs_pins_moved_on_the_line_or_by_a_dtparam_after_it(tmp_path):
    assert buses(tmp_path, "dtoverlay=spi1-2cs,cs1_pin=26\n")[1].chip_selects == (18, 26)
    b = buses(tmp_path, "dtoverlay=spi1-2cs\ndtparam=cs0_pin=12\ndtparam=spi=on\n")
    assert b[1].chip_selects == (12, 17) and b[0].enabled  # spi is the base tree's parameter
    assert buses(tmp_path, "dtoverlay=spi0-1cs\n")[0].claimed()[8] == "SPI0 CE0"
    assert 7 not in buses(tmp_path, "dtparam=spi=on\ndtoverlay=spi0-1cs\n")[0].claimed()


def test_sections_model_filters(tmp_path):
    text = "[pi4]\ndtoverlay=spi1-1cs\n[pi02]\ndtparam=spi=on\n[all]\n"
    b = buses(tmp_path, text)
    assert b[0].enabled and not b[1].enabled
    assert "[pi02]" in spi.parse_boot_config(tmp_path / "config.txt", ZERO2W)[0].section
    pi4 = buses(tmp_path, text, model="Raspberry Pi 4 Model B Rev 1.4")
    assert pi4[1].enabled and not pi4[0].enabled
    assert not buses(tmp_path, text, model=None)[0].enabled  # not a Pi: no model section applies
    assert buses(tmp_path, "[pi0]\ndtparam=spi=on\n")[0].enabled  # [pi0] is every Zero
    assert not buses(tmp_path, "[pi0w]\ndtparam=spi=on\n")[0].enabled  # the Zero W only
    assert not buses(tmp_path, "[none]\ndtparam=spi=on\n")[0].enabled
    assert buses(tmp_path, "[pi4]\n[all]\ndtparam=spi=on\n")[0].enabled
    assert buses(tmp_path, "[pi4]\n[pi02]\ndtparam=spi=on\n")[0].enabled  # a model filter replaces the last


def test_filters_that_cannot_be_judged_are_conditional(tmp_path):
    b = buses(tmp_path, "[HDMI:1]\ndtparam=spi=on\n[gpio4=1]\ndtoverlay=spi1-1cs\n")
    assert not b[0].enabled and not b[1].enabled
    assert b[0].conditional == ("dtparam=spi=on (config.txt line 2, under [HDMI:1])",)
    assert b[1].conditional == ("dtoverlay=spi1-1cs (config.txt line 4, under [HDMI:1][gpio4=1])",)


def test_include_is_followed(tmp_path):
    (tmp_path / "extra.txt").write_text("dtoverlay=spi1-1cs\n")
    (tmp_path / "loop.txt").write_text("include loop.txt\n")
    b = buses(tmp_path, "include extra.txt\ninclude missing.txt\ninclude loop.txt\n")
    assert b[1].enabled and b[1].by == "dtoverlay=spi1-1cs (extra.txt line 1)"


def test_find_boot_config_prefers_bookworms(tmp_path):
    assert spi.find_boot_config(str(tmp_path)) is None
    (tmp_path / "boot").mkdir()
    (tmp_path / "boot/config.txt").write_text("# moved to /boot/firmware/config.txt\n")
    assert spi.find_boot_config(str(tmp_path)) == tmp_path / "boot/config.txt"
    (tmp_path / "boot/firmware").mkdir()
    (tmp_path / "boot/firmware/config.txt").write_text("dtparam=spi=on\n")
    assert spi.find_boot_config(str(tmp_path)) == tmp_path / "boot/firmware/config.txt"


def test_model_filters():
    assert spi.model_filters_for(ZERO2W) == {"pi0", "pi02"}
    assert spi.model_filters_for("Raspberry Pi Zero W Rev 1.1") == {"pi0", "pi0w"}
    assert spi.model_filters_for("Raspberry Pi 400 Rev 1.0") == {"pi4", "pi400"}
    assert spi.model_filters_for(None) == frozenset() and spi.model_filters_for("QEMU") == frozenset()


def test_header_map_is_the_40_pin_header():
    assert len(pins.HEADER_GPIO) + len(pins.HEADER_POWER) == 40
    assert sorted(pins.HEADER_GPIO.values()) == list(range(28))
    assert [pins.header_pin(g) for g in (11, 10, 9, 8, 7)] == [23, 19, 21, 24, 26]
    assert [pins.header_pin(g) for g in (21, 20, 19, 18, 17, 16)] == [40, 38, 35, 12, 11, 36]
    assert pins.header_pin(40) is None and pins.describe(17) == "GPIO 17 (pin 11)"


def test_swd_pins_of_probe_ids():
    assert pins.swd_pins_of("0240000032044e45") is None and pins.swd_pins_of("sim:bay") is None
    s = pins.swd_pins_of("spidev:1.0")
    assert s.kind == "spidev" and s.device == "spidev1.0" and dict(s.pins) == {"sclk": 21, "mosi": 20, "miso": 19}
    g = pins.swd_pins_of("gpio:gpiochip0:swclk=5,swdio=6,nreset=13")
    assert g.device == "gpiochip0" and dict(g.pins) == {"swclk": 5, "swdio": 6, "nreset": 13}
    for bad in ("spidev:2.0", "gpio:gpiochip0:swclk=5", "gpio:gpiochip0:swclk=5,swdio=5", "gpio:gpiochip0:swclk=5,swdio=30",
                "gpio:gpiochip0:clk=5,swdio=6", "spidev:0", "spidev:0.0,nreset=25", "gpio:gpiochip0:swdio=6,swclk=5"):
        with pytest.raises(ValueError):
            pins.swd_pins_of(bad)
    r = pins.swd_pins_of("spidev:0.0:nreset=25")
    assert r.probe_id == "spidev:0.0:nreset=25" and r.device == "spidev0.0"
    assert dict(r.pins) == {"sclk": 11, "mosi": 10, "miso": 9, "nreset": 25}
    assert dict(pins.swd_pins_of("spidev:0.0:nreset=gpiochip4/40").pins) == {"sclk": 11, "mosi": 10, "miso": 9}
    for bad in ("spidev:0.0:nreset=30", "spidev:0.0:nreset=gpiochip0/25", "spidev:0.0:nreset=10"):
        with pytest.raises(ValueError):
            pins.swd_pins_of(bad)
    other = pins.swd_pins_of("gpio:gpiochip4:swclk=40,swdio=41")  # not the header's chip: any line
    assert other.device == "gpiochip4" and pins.probe_uses(other) == []


def test_collisions_between_groups_only():
    g = pins.swd_pins_of("gpio:gpiochip0:swclk=17,swdio=6")
    uses = pins.station_uses({"pass_led": 17, "fail_led": 27}) + pins.probe_uses(g)
    found = pins.collisions(uses)
    assert len(found) == 1 and found[0].gpio == 17
    assert found[0].message() == "GPIO 17 (pin 11) is station gpio.pass_led and also gpio:gpiochip0:swclk=17,swdio=6 swclk"
    assert pins.collisions(pins.probe_uses(pins.swd_pins_of("spidev:0.0"))) == []
    assert pins.free_gpios([4, 5], 3) == [6, 7, 8]


DEBUGFS = """\
gpiochip0: GPIOs 512-565, parent: platform/3f200000.gpio, pinctrl-bcm2835:
 gpio-512 (ID_SDA              )
 gpio-517 (GPIO5               |sysfs               ) in  hi
 gpio-518 (GPIO6               )
 gpio-519 (SPI_CE1_N           |spi0 CS1            ) out hi ACTIVE LOW

gpiochip1: GPIOs 566-573, parent: platform/soc:firmware:gpio, raspberrypi-exp-gpio, can sleep:
 gpio-566 (BT_ON               |shutdown            ) out hi
"""


def test_debugfs_lines(tmp_path):
    assert pins.parse_debugfs_gpio(DEBUGFS, "gpiochip0") == {0: (False, ""), 5: (True, "sysfs"), 6: (False, ""),
                                                             7: (True, "spi0 CS1")}
    assert pins.parse_debugfs_gpio(DEBUGFS, "gpiochip1") == {0: (True, "shutdown")}
    (tmp_path / "kernel/debug").mkdir(parents=True)
    (tmp_path / "kernel/debug/gpio").write_text(DEBUGFS)
    states = pins.line_claims("gpiochip0", [5, 6, 13], dev_root=str(tmp_path / "nodev"), sysfs_root=str(tmp_path))
    assert [(s.offset, s.used, s.consumer, s.source) for s in states] == [
        (5, True, "sysfs", "debugfs"), (6, False, "", "debugfs"), (13, False, "", "debugfs")]
    unknown = pins.line_claims("gpiochip0", [5], dev_root=str(tmp_path), sysfs_root=str(tmp_path / "none"))
    assert unknown[0].used is None and "not readable" in unknown[0].source


def _setup(tmp_path, config, probes, debugfs=None, **kw):
    from piflash.host.pinsetup import PinSetup

    (tmp_path / "boot/firmware").mkdir(parents=True, exist_ok=True)
    (tmp_path / "boot/firmware/config.txt").write_text(config)
    (tmp_path / "dev").mkdir(exist_ok=True)
    if debugfs is not None:
        (tmp_path / "sys/kernel/debug").mkdir(parents=True, exist_ok=True)
        (tmp_path / "sys/kernel/debug/gpio").write_text(debugfs)
    return PinSetup(sysroot=str(tmp_path), dev_root=str(tmp_path / "dev"), sysfs_root=str(tmp_path / "sys"),
                    model=ZERO2W, probes=tuple(probes), **kw)


def test_spi_pins_held_by_another_driver(tmp_path):
    """SPI0's own chip select consumer is fine; a gpio-led on MOSI is another driver."""
    from piflash.host.pinsetup import check_rows

    text = ("gpiochip0: GPIOs 512-565, parent: platform/3f200000.gpio, pinctrl-bcm2835:\n"
            " gpio-519 (SPI_CE1_N |spi0 CS1 ) out hi ACTIVE LOW\n")
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev/spidev0.0").touch()
    rows = {r[0]: r for r in check_rows(_setup(tmp_path, "dtparam=spi=on\n", ["spidev:0.0"], text))}
    assert rows["spidev0.0 lines"][1] == "ok"
    held = text + " gpio-522 (SPI_MOSI |led0 ) out lo\n"
    rows = {r[0]: r for r in check_rows(_setup(tmp_path, "dtparam=spi=on\n", ["spidev:0.0"], held))}
    assert rows["spidev0.0 lines"][1] == "fail" and "mosi GPIO 10 (pin 19) is held by 'led0'" in rows["spidev0.0 lines"][2]
    rows = {r[0]: r for r in check_rows(_setup(tmp_path / "x", "dtparam=spi=on\n", ["spidev:0.0"]))}
    assert "spidev0.0 lines" not in rows  # cannot tell: no row for the SPI block's own pins


@pytest.mark.parametrize(
    "probe, gpio, other",
    [
        ("spidev:0.0:nreset=8", 8, "CE0"),  # SPI0's own chip select
        ("spidev:0.0:nreset=17", 17, "station gpio.pass_led"),
    ],
)
def test_a_spidev_nreset_colliding_is_reported(tmp_path, probe, gpio, other):
    """A spidev probe's nRESET GPIO is not one of its bus's pins: on a bus pin, a chip select or a
    station pin it is a collision (its SPI pins are the bus's own and are not)."""
    from piflash.host.pinsetup import check_rows

    (tmp_path / "dev").mkdir()
    (tmp_path / "dev/spidev0.0").touch()
    rows = [r for r in check_rows(_setup(tmp_path, "dtparam=spi=on\n", [probe], station_gpio={"pass_led": 17}))
            if r[0] == "pin collision"]
    assert len(rows) == 1 and rows[0][1] == "fail", rows
    assert pins.describe(gpio) in rows[0][2] and other in rows[0][2] and f"{probe} nreset" in rows[0][2]
    if other == "CE0":
        assert rows[0][3] == "wire nRESET to a free GPIO (4, 5, 6) and name it: spidev:0.0:nreset=4"
    fine = {r[0]: r for r in check_rows(_setup(tmp_path, "dtparam=spi=on\n", ["spidev:0.0:nreset=25"],
                                                station_gpio={"pass_led": 17}))}
    assert fine["pin collisions"][1] == "ok" and "pin collision" not in fine


def test_a_node_this_user_may_not_open(tmp_path, monkeypatch):
    from piflash.host import pinsetup

    (tmp_path / "dev").mkdir()
    (tmp_path / "dev/gpiochip0").touch()
    monkeypatch.setattr(pinsetup.os, "geteuid", lambda: 1000)
    monkeypatch.setattr(pinsetup.os, "access", lambda path, mode: False)
    rows = {r[0]: r for r in pinsetup.check_rows(_setup(tmp_path, "", ["gpio:gpiochip0:swclk=5,swdio=6"]))}
    name, status, detail, fix = rows["gpiochip0 node"]
    assert status == "fail" and detail.endswith("may not be opened by this user (it needs group gpio)")
    assert "setup permissions" in fix


def test_a_spidev_nreset_needs_the_header_chip(tmp_path):
    from piflash.host.pinsetup import check_rows

    (tmp_path / "dev").mkdir()
    (tmp_path / "dev/spidev0.0").touch()
    rows = {r[0]: r for r in check_rows(_setup(tmp_path, "dtparam=spi=on\n", ["spidev:0.0:nreset=25"]))}
    assert rows["gpiochip0 node"][1] == "fail" and "spidev:0.0:nreset=25 needs it for nRESET" in rows["gpiochip0 node"][2]
    (tmp_path / "dev/gpiochip0").touch()
    rows = {r[0]: r for r in check_rows(_setup(tmp_path, "dtparam=spi=on\n", ["spidev:0.0:nreset=25"]))}
    assert rows["gpiochip0 node"][1] == "ok"
    plain = {r[0]: r for r in check_rows(_setup(tmp_path, "dtparam=spi=on\n", ["spidev:0.0"]))}
    assert "gpiochip0 node" not in plain


class _Info:
    def __init__(self, used, consumer):
        self.used, self.consumer = used, consumer


class _ChipV2:
    def __init__(self, path):
        self.path, self.closed = path, False

    def get_line_info(self, offset):
        return _Info(offset == 5, "sysfs" if offset == 5 else "")

    def close(self):
        self.closed = True


class _LineV1:
    def __init__(self, offset):
        self.offset = offset

    def is_used(self):
        return self.offset == 6

    def consumer(self):
        return "w1-gpio" if self.offset == 6 else None


class _ChipV1:
    def __init__(self, path):
        self.path = path

    def get_line(self, offset):
        return _LineV1(offset)

    def close(self):
        pass


@pytest.mark.parametrize("chip, expected", [
    (_ChipV2, [(5, True, "sysfs"), (6, False, "")]),
    (_ChipV1, [(5, False, ""), (6, True, "w1-gpio")]),
])
def test_line_info_through_gpiod_v2_and_v1(tmp_path, monkeypatch, chip, expected):
    """gpiod's line info is read (never a line request) through either bindings' API."""
    import sys
    import types

    fake = types.ModuleType("gpiod")
    fake.Chip = chip
    monkeypatch.setitem(sys.modules, "gpiod", fake)
    (tmp_path / "gpiochip0").touch()
    states = pins.line_claims("gpiochip0", [5, 6], dev_root=str(tmp_path), sysfs_root=str(tmp_path / "none"))
    assert [(s.offset, s.used, s.consumer) for s in states] == expected and {s.source for s in states} == {"gpiod"}
