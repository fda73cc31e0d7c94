"""One job interface for every transport (piflash.jobs.transports, piflash.jobs.options): each
transport declares what it can do, and what it cannot is refused in one place, with one message
and exit 2, before anything is opened."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest

from piflash.errors import ExitCode, UnsupportedError
from piflash.jobs import transports
from piflash.jobs.options import ERASE_MODES, FlashOptions
from piflash.jobs.transports import (
    CAPABILITIES,
    PICOBOOT,
    PYOCD,
    TRANSPORTS,
    TransportCaps,
    caps_of,
    flash_needs,
    refusal,
    require,
)
from piflash.probe.selector import PROBE_KINDS
from piflash.production.bootcheck import BootCheck


def test_every_probe_kind_names_a_registered_transport():
    for kind in PROBE_KINDS.values():
        assert kind.transport in TRANSPORTS, kind.name
        assert caps_of(kind) is TRANSPORTS[kind.transport]


def test_the_capabilities_are_the_flags_of_transportcaps():
    flags = {f.name for f in dataclasses.fields(TransportCaps)} - {"name", "description", "short"}
    assert flags == set(CAPABILITIES)
    with pytest.raises(KeyError):
        PYOCD.can("teleport")


def test_what_each_transport_declares():
    assert all(PYOCD.can(c) for c in CAPABILITIES)
    picoboot = ["flash", "verify", "chip_erase", "sector_erase", "read", "reset", "identify"]
    assert [c for c in CAPABILITIES if PICOBOOT.can(c)] == picoboot     # issue 41: info and erase too
    assert PICOBOOT.does() == ["flash", "verify", "chip erase", "sector erase", "read", "reset", "target info"]


@pytest.mark.parametrize("probe, transport", [
    ("picoboot", "picoboot"), ("PICOBOOT:1-2", "picoboot"), ("picoboot:E6614C311B4C8E2A", "picoboot"),
    ("sim:nrf52840", "pyocd"), ("remote:127.0.0.1:5555", "pyocd"), ("0240*", "pyocd"),
    ("0240000032044e45", "pyocd"), (None, "pyocd"),
    ("remote:host:notaport", "pyocd"),          # malformed: taken by its tag, refused when opened
])
def test_caps_of_a_selector(probe, transport):
    assert caps_of(probe).name == transport


def test_flash_needs_follow_the_options():
    assert flash_needs(FlashOptions()) == ["flash", "verify", "reset"]
    assert flash_needs(FlashOptions(verify=False, reset=False)) == ["flash"]
    check = BootCheck("rtt", pattern="PASS")
    needs = flash_needs(FlashOptions(erase="chip", protect="lock", boot_check=check,
                                     session_options={"pack": ["x.pack"]}))
    assert needs[:5] == ["flash", "flash_chip_erase", "protect", "boot_check", "tool_options"]
    assert "sector_erase" not in flash_needs(FlashOptions(erase="sector"))    # a flash's own erase


def test_flash_options_refuse_what_cannot_be():
    assert FlashOptions().erase == "auto" and set(ERASE_MODES) >= {"auto", "sector", "chip"}
    with pytest.raises(ValueError, match="erase mode"):
        FlashOptions(erase="bulk")
    with pytest.raises(ValueError, match="protect"):
        FlashOptions(protect="open")
    with pytest.raises(ValueError, match="reset"):
        FlashOptions(reset=False, boot_check=BootCheck("rtt", pattern="PASS"))


def test_one_refusal_one_message_one_exit_code():
    assert refusal(PYOCD, CAPABILITIES) is None
    assert refusal(PICOBOOT, ["flash", "verify", "reset"]) is None
    err = refusal(PICOBOOT, ["flash", "flash_chip_erase", "protect"], "'piflash flash'")
    assert isinstance(err, UnsupportedError) and err.exit_code == ExitCode.USAGE == 2
    assert (err.transport, err.capability) == ("picoboot", "flash_chip_erase")       # the first one lacking
    assert err.message == ("'piflash flash': a chip erase as a flash's erase (--erase chip) needs a debug probe; "
                           "a Pico in BOOTSEL mode (PICOBOOT) does not do it (it does flash, verify, chip erase, "
                           "sector erase, read, reset, target info only)")
    assert err.hint == "do it through a debug probe"
    assert err.to_dict()["kind"] == "UnsupportedError"
    with pytest.raises(UnsupportedError, match="RTT"):
        require(PICOBOOT, ["rtt"], hint="RTT reads the target's RAM")


def test_a_new_transport_is_one_entry(monkeypatch):
    monkeypatch.setitem(TRANSPORTS, "pins", TransportCaps("pins", "the Pi's own pins (SWD by GPIO)", "the Pi's pins",
                                                           flash=True, verify=True, reset=True,
                                                           flash_chip_erase=True))
    err = refusal(PICOBOOT, ["flash_chip_erase"])
    assert "needs a debug probe or the Pi's pins" in err.message
    assert refusal(TRANSPORTS["pins"], ["rtt"]).message.startswith("RTT (reading the target's RAM while its "
                                                                     "firmware runs) needs a debug probe;")


def test_flash_bootsel_refuses_before_looking_for_a_device(monkeypatch):
    from piflash.firmware.image import image_from_bytes
    from piflash.jobs import bootsel

    def no_device(*args, **kwargs):
        raise AssertionError("the device was looked for")

    monkeypatch.setattr(bootsel.picoboot, "select_device", no_device)
    image = image_from_bytes(b"\0" * 16, 0x10000000)
    for job in (FlashOptions(erase="chip"), FlashOptions(protect="lock"),
                FlashOptions(session_options={"frequency": 1}),
                FlashOptions(boot_check=BootCheck("rtt", pattern="PASS"))):
        with pytest.raises(UnsupportedError) as err:
            bootsel.flash_bootsel(image, "picoboot", job=job)
        assert err.value.exit_code == 2


def test_the_station_refuses_with_the_same_words():
    from piflash.station.bootsel import unsupported

    profile = SimpleNamespace(erase="auto", verify=True, reset=True, frequency=None, boot_check=None,
                              patch_plan=None)
    assert unsupported(SimpleNamespace(profile=profile, protect=None)) is None
    text = unsupported(SimpleNamespace(profile=profile, protect="lock"))
    assert text == refusal(PICOBOOT, ["protect"], "the station's profile").message
    assert "read-out protection needs a debug probe" in text
    chip = unsupported(SimpleNamespace(profile=SimpleNamespace(**{**vars(profile), "erase": "chip"}), protect=None))
    assert "a chip erase as a flash's erase (--erase chip) needs a debug probe" in chip


def test_the_station_picks_its_worker_by_transport():
    from piflash.station.bootsel import BootselWorker, worker_class
    from piflash.station.worker import ProbeWorker

    assert worker_class("picoboot:1-2") is BootselWorker
    assert worker_class("sim:bay1") is ProbeWorker


@pytest.mark.parametrize("argv, what", [
    (("reset", "--halt"), "a reset that leaves the core halted needs a debug probe"),
    (("rtt",), "RTT (reading the target's RAM while its firmware runs) needs a debug probe"),
])
def test_the_cli_refuses_in_the_same_words(cli, argv, what):
    proc = cli(*argv, "-u", "picoboot", check=2)
    assert what in proc.stderr and "a Pico in BOOTSEL mode (PICOBOOT) does not do it" in proc.stderr


def test_a_flash_over_picoboot_with_pyocd_options_is_refused_in_json_too(cli, tmp_path):
    (tmp_path / "a.bin").write_bytes(b"\0" * 16)
    out = cli.json("flash", tmp_path / "a.bin", "--base-address", "0x10000000", "-u", "picoboot",
                   "-O", "frequency=1000000", check=2)
    assert out["error"]["kind"] == "UnsupportedError" and out["error"]["exit_code"] == 2
    assert "pyOCD session options (-O) needs a debug probe" in out["error"]["message"]


def test_transports_module_is_light():
    """The CLI asks it before any probe is opened: no pyOCD at import."""
    import subprocess
    import sys

    code = ("import sys, piflash.jobs.transports, piflash.jobs.options; "
            "print(any(m == 'pyocd' or m.startswith('pyocd.') for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
    assert transports.DEFAULT is PYOCD
