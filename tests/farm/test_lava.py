"""LAVA's ``pyocd`` boot method running piflash (issue 45, docs/ci.md "LAVA"): the command line
built exactly as LAVA's dispatcher builds it (``lava_dispatcher/actions/boot/pyocd.py``,
``FlashPyOCDAction.validate`` and ``run``: ``[command, "flash", *options, "--uid", board_id,
image]``, joined with spaces and split on them again before it runs), with the device-type
parameters docs/ci.md shows, against a simulated board."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def lava_command(command: str, options: list, board_id: str, image: str) -> list:
    """The argv LAVA runs for one image (``pyocd`` boot, a ``command`` not ``pyocd-flashtool``)."""
    base = [command, "flash", *options, "--uid", board_id, image]
    return " ".join(base).split(" ")


def page_parameters():
    """command, options and board_id from docs/ci.md's device dictionary and device-type snippet."""
    text = (REPO / "docs" / "ci.md").read_text()
    command = re.search(r"\{% set pyocd_command = '([^']+)' %\}", text).group(1)
    options = re.search(r"\{% set pyocd_options = (\[.*?\]) %\}", text).group(1)
    board_id = re.search(r"\{% set board_id = '([^']+)' %\}", text).group(1)
    return command, eval(options, {}), board_id  # a Python list literal, as Jinja2 reads it


def test_the_pages_parameters_are_lavas(firmware_dir):
    command, options, board_id = page_parameters()
    assert command == "piflash" and board_id.startswith("sim:")
    argv = lava_command(command, options, board_id, "/var/lib/lava/dispatcher/tmp/1/deploy/app.elf")
    assert argv[:2] == ["piflash", "flash"] and argv[-3:-1] == ["--uid", board_id]


def test_lava_runs_piflash_as_it_runs_pyocd(cli, firmware_dir):
    command, options, board_id = page_parameters()
    image = firmware_dir / "boot" / "nrf52840" / "rtt.elf"
    argv = lava_command(command, options, board_id, str(image))
    proc = cli(*argv[1:], check=0)
    assert "boot check passed" in proc.stdout + proc.stderr
    rows = cli.json("history")["operations"]
    assert len(rows) == 1 and rows[0]["probe_id"] == board_id and rows[0]["outcome"] == "pass"


def test_a_uid_is_matched_whole_unlike_pyocds(cli, firmware_dir):
    """pyOCD's --uid takes any probe whose ID contains it; piflash's only the whole ID (exit 7)."""
    command, options, board_id = page_parameters()
    cli("sim", "create", board_id.split(":", 1)[1], "--target", "nrf52840", check=0)
    argv = lava_command(command, options, board_id[:-1], str(firmware_dir / "nrf52840" / "firmware.hex"))
    proc = cli(*argv[1:], check=7)
    assert board_id in proc.stderr
