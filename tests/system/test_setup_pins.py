"""`piflash setup pins` and `piflash doctor` on the Pi's own pins (issue 43, item 3), against a
fake Pi root in a temp folder: its boot/firmware/config.txt, dev/ nodes, sys/kernel/debug/gpio and
proc/device-tree/model. Exit 0 when flashing through the pins could work, 15 (DOCTOR) when not."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from piflash.errors import ExitCode

REPO = Path(__file__).resolve().parents[2]
DEBUGFS = """\
gpiochip0: GPIOs 512-565, parent: platform/3f200000.gpio, pinctrl-bcm2835:
 gpio-517 (GPIO5               |sysfs               ) in  hi
 gpio-518 (GPIO6               )
"""


@pytest.fixture
def pi(tmp_path):
    root = tmp_path / "pi"
    for d in ("boot/firmware", "dev", "proc/device-tree", "sys/kernel/debug"):
        (root / d).mkdir(parents=True)
    (root / "proc/device-tree/model").write_bytes(b"Raspberry Pi Zero 2 W Rev 1.0\0")
    (root / "boot/firmware/config.txt").write_text("dtparam=audio=on\n#dtparam=spi=on\n")
    (root / "sys/kernel/debug/gpio").write_text(DEBUGFS)
    return root


def run(*args, env=None):
    full = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200", "PIFLASH_STATION_CONFIG": "/nonexistent",
            **(env or {})}
    return subprocess.run([sys.executable, "-m", "piflash", *map(str, args)], capture_output=True, text=True,
                          env=full, timeout=120)


def rows(proc):
    return {c["name"]: c for c in json.loads(proc.stdout)["checks"]}


def test_spi_off_fails_with_the_line_to_add(pi):
    proc = run("setup", "pins", "--root", pi, "-u", "spidev:0.0", "--json")
    assert proc.returncode == ExitCode.DOCTOR, proc.stderr
    got = rows(proc)
    assert got["SPI0"]["status"] == "fail" and "spidev:0.0 needs it" in got["SPI0"]["detail"]
    assert got["SPI0"]["fix"] == f"add the line 'dtparam=spi=on' under [all] in {pi}/boot/firmware/config.txt (sudo), then reboot"
    assert got["spidev0.0 node"]["status"] == "fail" and "SPI0 is off" in got["spidev0.0 node"]["detail"]
    assert got["SPI1"]["status"] == "ok"  # off, and nothing asks for it


def test_spi_on_and_node_present_passes(pi):
    (pi / "boot/firmware/config.txt").write_text("[all]\ndtparam=spi=on\n")
    (pi / "dev/spidev0.0").touch()
    proc = run("setup", "pins", "--root", pi, "-u", "spidev:0.0")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "on, by dtparam=spi=on (config.txt line 2)" in proc.stdout
    assert "OK: ready to flash through the Pi's pins" in proc.stdout


def test_on_but_not_rebooted(pi):
    (pi / "boot/firmware/config.txt").write_text("dtoverlay=spi1-1cs\n")
    got = rows(run("setup", "pins", "--root", pi, "-u", "spidev:1.0", "--json"))
    assert got["spidev1.0 node"]["fix"] == "sudo reboot"
    got = rows(run("setup", "pins", "--root", pi, "-u", "spidev:1.1", "--json"))
    assert "makes chip selects 0..0 only" in got["spidev1.1 node"]["detail"]


def test_2cs_claims_17_against_the_station_pass_led(pi, tmp_path):
    (pi / "boot/firmware/config.txt").write_text("dtoverlay=spi1-2cs\n")
    (pi / "dev/spidev1.0").touch()
    station = tmp_path / "station.yaml"
    station.write_text('profile: app\nprobes: ["spidev:1.0"]\ngpio:\n  pass_led: 17\n  fail_led: 27\n')
    proc = run("setup", "pins", "--root", pi, "--config", station, "--json")
    assert proc.returncode == ExitCode.DOCTOR
    collision = rows(proc)["pin collision"]
    assert collision["detail"] == ("GPIO 17 (pin 11) is station gpio.pass_led and also SPI1 CE1, claimed by "
                                   "dtoverlay=spi1-2cs (config.txt line 1)")
    assert collision["fix"].startswith("use dtoverlay=spi1-1cs (its one chip select is GPIO 18), or move gpio.pass_led")
    (pi / "boot/firmware/config.txt").write_text("dtoverlay=spi1-1cs\n")
    assert run("setup", "pins", "--root", pi, "--config", station).returncode == 0


def test_gpio_probe_lines_held_and_colliding(pi):
    (pi / "dev/gpiochip0").touch()
    got = rows(run("setup", "pins", "--root", pi, "-u", "gpio:gpiochip0:swclk=5,swdio=6,nreset=13", "--json"))
    assert got["gpiochip0 lines"]["status"] == "fail"
    assert "swclk GPIO 5 (pin 29) is held by 'sysfs'" in got["gpiochip0 lines"]["detail"]
    (pi / "boot/firmware/config.txt").write_text("dtparam=spi=on\n")
    proc = run("setup", "pins", "--root", pi, "-u", "gpio:gpiochip0:swclk=11,swdio=12", "--json")
    assert "GPIO 11 (pin 23) is SPI0 SCLK, claimed by dtparam=spi=on (config.txt line 1) and also " \
           "gpio:gpiochip0:swclk=11,swdio=12 swclk" in rows(proc)["pin collision"]["detail"]


def test_bad_probe_id_and_nothing_to_check(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = run("setup", "pins", "--root", empty)
    assert proc.returncode == 0 and "nothing to check" in proc.stdout
    proc = run("setup", "pins", "--root", empty, "-u", "gpio:gpiochip0:swclk=5")
    assert proc.returncode == ExitCode.DOCTOR and "swdio=N is missing" in proc.stdout


def test_doctor_has_the_rows_with_a_boot_config_only(pi):
    env = {"PIFLASH_BOOT_CONFIG": str(pi / "boot/firmware/config.txt"), "PIFLASH_DEV_ROOT": str(pi / "dev")}
    proc = run("doctor", "--json", "-u", "spidev:0.0", env=env)
    got = rows(proc)
    assert got["SPI0"]["status"] == "fail" and proc.returncode == ExitCode.DOCTOR
    plain = run("doctor", "--json", env={"PIFLASH_SYSROOT": str(pi.parent / "nothing")})
    assert not {"SPI0", "boot config", "pin collisions"} & set(rows(plain))


def test_wiring_page_transcripts_are_runs(tmp_path):
    """docs/wiring.md's three `piflash setup pins` transcripts are what the command prints after the
    page's own commands (the doc walk, tests/docs/test_doc_commands.py, only checks they run)."""
    import re
    import textwrap

    page = (REPO / "docs" / "wiring.md").read_text()
    fences = re.findall(r"^```(\w*)\n(.*?)^```", page, re.S | re.M)
    work = tmp_path / "w"
    work.mkdir()
    transcripts = []
    for lang, body in fences:
        if lang == "sh" and "piflash doctor" not in body:
            subprocess.run(["bash", "-e", "-c", body], cwd=work, check=True)
        elif lang == "yaml":
            (work / body.splitlines()[0][2:]).write_text(textwrap.dedent(body))
        elif lang == "console" and body.startswith("$ piflash setup pins"):
            command, *shown = body.splitlines()
            said = subprocess.run(["bash", "-c", command[2:].replace("piflash", f"{sys.executable} -m piflash", 1)],
                                  cwd=work, capture_output=True, text=True,
                                  env={**os.environ, "PYTHONPATH": str(REPO), "PIFLASH_STATION_CONFIG": "/nonexistent"})
            assert said.stdout.splitlines() == shown, said.stdout + said.stderr
            transcripts.append(command)
    assert len(transcripts) == 3


def test_wiring_picture():
    """The page shows the wiring as a picture: an SVG that parses, referenced from the page, with
    the header pins the tables wire (19, 21, 23, 25, 33) and the resistor."""
    import xml.etree.ElementTree as ET

    svg = REPO / "docs" / "img" / "wiring-spi0.svg"
    assert "](img/wiring-spi0.svg)" in (REPO / "docs" / "wiring.md").read_text()
    root = ET.parse(svg).getroot()
    texts = [t.text or "" for t in root.iter("{http://www.w3.org/2000/svg}text")]
    assert [str(n) for n in range(1, 41)] == [t for t in texts if t.isdigit()]
    for label in ("MOSI · GPIO 10", "MISO · GPIO 9 · pin 21", "SCLK · GPIO 11 · pin 23", "GND · pin 25",
                  "nRESET · GPIO 13 · pin 33", "1 kΩ"):
        assert label in texts, label
