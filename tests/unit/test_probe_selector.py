"""One probe, one board: the probe selector matches whole IDs, or a prefix written as one.

The parser and the matching rule on their own, then the wrong-board cases through the real stack:
a ``sim:`` board that is unplugged while another whose name contains it is there, a name inside
another board's name, a station slot whose probe is gone, and USB serial numbers (simulated
probes below pyusb) one of which is the start of the other.
"""

from __future__ import annotations

import time

import pytest

from piflash.errors import ExitCode, NoProbeError, ProbeSyntaxError, SeveralProbesError
from piflash.probe.selector import (
    MAX_SELECTOR_LENGTH,
    PROBE_KINDS,
    ProbeSelector,
    kind_of,
    near_matches,
    no_probe_error,
    parse_selector,
    several_probes_error,
)


# -- the parser ------------------------------------------------------------------------------------
@pytest.mark.parametrize("text, kind, value, prefix", [
    ("0240000032044e45", "usb", "0240000032044e45", False),
    ("0240*", "usb", "0240", True),
    ("sim:bay1", "sim", "bay1", False),
    ("SIM:Bay1", "sim", "Bay1", False),
    ("sim:bay*", "sim", "bay", True),
    ("remote:127.0.0.1:5555", "remote", "127.0.0.1:5555", False),
    ("remote:localhost", "remote", "localhost", False),
    ("picoboot", "picoboot", "", True),
    ("picoboot:1-1.2", "picoboot", "1-1.2", False),
    ("picoboot:E0C9125B0D9B", "picoboot", "E0C9125B0D9B", False),
    ("  sim:bay1  ", "sim", "bay1", False),
])
def test_each_form_parses_to_its_kind(text, kind, value, prefix):
    sel = ProbeSelector.parse(text)
    assert (sel.kind.name, sel.value, sel.prefix) == (kind, value, prefix)
    assert ProbeSelector.parse(sel) is sel                       # parsed once: a selector passes through
    assert ProbeSelector.parse(str(sel)) == sel                  # and its text reads back as itself


@pytest.mark.parametrize("text, words", [
    ("", "empty"),
    ("   ", "empty"),
    ("*", "'*' alone"),
    ("sim:b*y", "may only end"),
    ("02*40*", "may only end"),
    ("remote:host*", "whole address"),
    ("remote:", "names no remote probe"),
    ("remote::5555", "names no host"),
    ("remote:host:99999", "not a TCP port"),
    ("remote:host:http", "not a TCP port"),
    ("sim:", "names no sim probe"),
    ("sim:bay\n1", "control character"),
    ("x" * (MAX_SELECTOR_LENGTH + 1), "at most"),
])
def test_what_cannot_be_a_probe_id_is_a_usage_error(text, words):
    with pytest.raises(ProbeSyntaxError) as err:
        ProbeSelector.parse(text)
    assert words in err.value.message and err.value.exit_code == ExitCode.USAGE


def test_none_means_the_only_probe_and_a_non_string_is_refused():
    assert parse_selector(None) is None
    with pytest.raises(ProbeSyntaxError, match="text, not int"):
        ProbeSelector.parse(240)


# -- the matching rule -----------------------------------------------------------------------------
def test_a_whole_id_matches_only_itself_in_any_case():
    sel = ProbeSelector.parse("sim:bay1")
    assert sel.matches("sim:bay1") and sel.matches("SIM:BAY1")
    assert not sel.matches("sim:bay10") and not sel.matches("sim:xbay1") and not sel.matches("sim:bay")
    usb = ProbeSelector.parse("E6614103")
    assert usb.matches("e6614103") and not usb.matches("E6614103E7A2") and not usb.matches("0E6614103")


def test_a_prefix_matches_only_when_written_and_only_its_own_kind():
    assert ProbeSelector.parse("sim:bay1*").matches("sim:bay10")
    assert ProbeSelector.parse("sim:bay1*").matches("sim:bay1")
    assert not ProbeSelector.parse("sim:bay1*").matches("sim:xbay10")
    # "sim*" is a USB serial number's start: no simulated board's ID is a USB serial number.
    assert not ProbeSelector.parse("sim*").matches("sim:bay1")
    assert not ProbeSelector.parse("picoboot:1-1*").matches("1-1.2")
    assert ProbeSelector.parse("picoboot:1-1*").matches("picoboot:1-1.2")


def test_bare_picoboot_names_any_bootsel_device_and_nothing_else():
    sel = ProbeSelector.parse("picoboot")
    assert sel.transport == "picoboot" and sel.lookup_id is None
    assert sel.matches("picoboot:1-1.2") and sel.matches(None, "picoboot:E0C9125B0D9B")
    assert not sel.matches("sim:picoboot") and not sel.matches("picoboot2")


def test_every_kind_has_one_tag_and_ids_fall_to_their_kind():
    tags = [k.tag for k in PROBE_KINDS.values()]
    assert len(tags) == len(set(tags)) and tags.count(None) == 1
    assert kind_of("sim:x").name == "sim" and kind_of("REMOTE:h:1").name == "remote"
    assert kind_of("picoboot:1-1").name == "picoboot" and kind_of("0240000032044e45").name == "usb"


# -- the errors ------------------------------------------------------------------------------------
def test_no_probe_names_the_id_the_near_matches_and_what_is_attached():
    attached = ["sim:stm32f103rc-a", "sim:bay10", "0240000032044e45"]
    err = no_probe_error(ProbeSelector.parse("sim:bay1"), attached)
    assert isinstance(err, NoProbeError) and err.exit_code == ExitCode.NO_PROBE
    assert err.message.startswith("no probe sim:bay1 is attached; did you mean sim:bay10?")
    assert "attached: sim:stm32f103rc-a, sim:bay10, 0240000032044e45" in err.message
    assert "write sim:bay1* for a prefix" in err.hint
    # The "f1" inside stm32f103rc-a is no near match, and no prefix hint is given.
    err = no_probe_error(ProbeSelector.parse("sim:f1"), attached)
    assert "did you mean" not in err.message and "prefix" not in err.hint
    assert no_probe_error(ProbeSelector.parse("sim:x"), []).message == "no probe sim:x is attached (attached: none)"


def test_near_matches_never_offer_a_match_and_stay_few():
    ids = [f"sim:bay{i}" for i in range(10, 40)]
    near = near_matches(ProbeSelector.parse("sim:bay1"), ids)
    assert len(near) == 3 and all(n.startswith("sim:bay1") for n in near)
    assert not any(n.startswith("sim:bay1") for n in near_matches(ProbeSelector.parse("sim:bay1*"), ids))


def test_several_probes_lists_them_and_says_how_to_choose():
    err = several_probes_error(ProbeSelector.parse("0240*"), ["02400001", "02400002"])
    assert isinstance(err, SeveralProbesError) and err.exit_code == ExitCode.SEVERAL_PROBES
    assert err.message == "2 probes match 0240*: 02400001, 02400002"
    assert err.unique_ids == ["02400001", "02400002"] and "--probe 02400001" in err.hint
    many = several_probes_error(None, [f"sim:b{i}" for i in range(12)])
    assert many.message.endswith("sim:b7 and 4 more")


# -- through the real stack: simulated boards --------------------------------------------------
@pytest.fixture
def store(sim_dir):
    pytest.importorskip("unicorn")
    from piflash.sim import SimStore
    return SimStore()


@pytest.fixture
def firmware(firmware_dir):
    return firmware_dir / "nrf52840" / "firmware.hex"


def _untouched(store, name, flash: bytes) -> bool:
    """Whether board ``name`` saw no erase and no program, and holds ``flash`` still."""
    stats = store.get(name).stats
    return (stats["erase_ops"], stats["program_ops"]) == (0, 0) and store.read_flash(name) == flash


def test_an_unplugged_board_is_not_found_and_the_board_whose_name_contains_it_is_untouched(
        store, firmware, cli):
    store.create("bay1", "nrf52840")
    store.create("bay10", "nrf52840")
    cli("sim", "unplug", "bay1", check=0)
    before = store.read_flash("bay10")
    proc = cli("flash", firmware, "-u", "sim:bay1", "-t", "nrf52840", check=ExitCode.NO_PROBE)
    assert "no probe sim:bay1 is attached; did you mean sim:bay10?" in proc.stderr
    assert "write sim:bay1* for a prefix" in proc.stderr
    assert _untouched(store, "bay10", before)
    out = cli.json("flash", firmware, "-u", "sim:bay1", "-t", "nrf52840", check=ExitCode.NO_PROBE)
    assert (out["error"]["kind"], out["error"]["exit_code"]) == ("NoProbeError", 7)
    # Written as a prefix, it reaches the one board it matches.
    out = cli.json("flash", firmware, "-u", "sim:bay1*", "-t", "nrf52840")
    assert out["ok"] and out["probe_id"] == "sim:bay10"
    cli("sim", "plug", "bay1", check=0)
    out = cli.json("flash", firmware, "-u", "sim:bay1*", "-t", "nrf52840", check=ExitCode.SEVERAL_PROBES)
    assert "2 probes match sim:bay1*" in out["error"]["message"]
    out = cli.json("flash", firmware, "-u", "SIM:BAY1", "-t", "nrf52840")       # any case, whole
    assert out["probe_id"] == "sim:bay1"


def test_a_name_inside_another_board_name_reaches_no_board(store, firmware, cli):
    store.create("stm32f103rc-a", "stm32f103rc")
    before = store.read_flash("stm32f103rc-a")
    proc = cli("flash", firmware, "-u", "sim:f1", "-t", "nrf52840", check=ExitCode.NO_PROBE)
    assert "no probe sim:f1 is attached" in proc.stderr and "outside the flash" not in proc.stderr
    for command in (("info", "-u", "sim:f1"), ("reset", "-u", "sim:f1", "-t", "stm32f103rc"),
                    ("erase", "--chip", "--yes", "-u", "sim:f1", "-t", "stm32f103rc")):
        proc = cli(*command)
        assert proc.returncode == ExitCode.NO_PROBE, (command, proc.stderr)
    assert _untouched(store, "stm32f103rc-a", before)


def test_a_malformed_probe_is_a_usage_error_before_anything_opens(store, firmware, cli):
    proc = cli("flash", firmware, "-u", "sim:b*y", "-t", "nrf52840", check=ExitCode.USAGE)
    assert "'*' may only end a probe ID" in proc.stderr


@pytest.mark.parametrize("probes", [["sim:bay1"], ["sim:bay1", "sim:bay10"]], ids=["alone", "beside-bay10"])
def test_a_station_slot_whose_probe_is_gone_never_flashes_another(tmp_path, store, firmware, probes):
    from support.stationkit import (
        StationProcess,
        rows,
        wait_for,
        wait_rows,
        write_config,
        write_profile,
    )

    store.create("bay1", "nrf52840")
    bay10 = store.create("bay10", "nrf52840")
    before = store.read_flash("bay10")
    store.eject("bay1")                                   # 'piflash sim unplug bay1'
    history = tmp_path / "history.sqlite3"
    config = write_config(tmp_path, write_profile(tmp_path, firmware), probes, history)
    station = StationProcess(config, tmp_path / "station.log")
    try:
        if "sim:bay10" in probes:
            wait_rows(history, 1, station)
        else:
            wait_for(lambda: "probes sim:bay1," in station.output() or station.proc.poll() is not None,
                     "the station to start", deadline=60)
        time.sleep(3.0)            # 15 to 30 poll intervals more: bay1's worker keeps waiting for its own probe
        got = rows(history, with_open=True)
        assert station.stop() == 0
    finally:
        station.kill()
    if "sim:bay10" in probes:
        assert [(r["slot"], r["probe_id"], r["target_uid"], r["outcome"]) for r in got] == \
            [("sim:bay10", "sim:bay10", bay10.target_uid.lower(), "pass")]
        assert store.get("bay10").stats["program_bytes"] == got[0]["programmed_bytes"]   # flashed once
    else:
        assert got == [] and _untouched(store, "bay10", before)


def test_a_station_refuses_a_prefix_or_a_probe_named_twice(tmp_path, firmware, cli):
    from support.stationkit import write_config, write_profile

    profile = write_profile(tmp_path, firmware)
    config = write_config(tmp_path, profile, ["sim:bay*"], tmp_path / "h.sqlite3")
    proc = cli("station", "check", "--config", config, check=ExitCode.PROFILE)
    assert "'sim:bay*' is not one probe: a station matches each probe exactly" in proc.stderr
    config = write_config(tmp_path, profile, ["sim:bay1", "SIM:BAY1"], tmp_path / "h.sqlite3")
    proc = cli("station", "check", "--config", config, check=ExitCode.PROFILE)
    assert "a probe is listed twice" in proc.stderr


# -- through the real stack: USB serial numbers, below pyusb -----------------------------------
def test_a_usb_serial_that_is_the_start_of_another_matches_only_itself(store, firmware, cli, monkeypatch):
    from piflash.sim.probes.usb import ENV_VAR

    short = store.create("short", "nrf52840")
    long_ = store.create("long", "nrf52840")
    long_flash = store.read_flash("long")
    monkeypatch.setenv(ENV_VAR, "long@debugprobe#E6614103E7A2")            # only the longer one
    proc = cli("flash", firmware, "-u", "E6614103", "-t", "nrf52840", check=ExitCode.NO_PROBE)
    assert "no probe E6614103 is attached; did you mean E6614103E7A2?" in proc.stderr
    assert _untouched(store, "long", long_flash)
    monkeypatch.setenv(ENV_VAR, "long@debugprobe#E6614103E7A2,short@debugprobe#E6614103")
    out = cli.json("flash", firmware, "-u", "e6614103", "-t", "nrf52840")
    assert (out["probe_id"], out["target_uid"]) == ("E6614103", short.target_uid.lower())
    assert _untouched(store, "long", long_flash)
    out = cli.json("flash", firmware, "-u", "E6614103E7A2", "-t", "nrf52840")
    assert (out["probe_id"], out["target_uid"]) == ("E6614103E7A2", long_.target_uid.lower())
    out = cli.json("flash", firmware, "-u", "E661*", "-t", "nrf52840", check=ExitCode.SEVERAL_PROBES)
    assert set(out["error"]["message"].split(": ", 1)[1].split(", ")) == {"E6614103E7A2", "E6614103"}


def test_a_profile_probe_is_checked_as_a_selector(tmp_path, firmware):
    from piflash.errors import ProfileError
    from piflash.profiles import load_profile

    for probe, words in (("sim:b*y", "'*' may only end"), ("remote:h:0", "not a TCP port")):
        path = tmp_path / "p.yaml"
        path.write_text(f'target: nrf52840\nfirmware: {firmware}\nprobe: "{probe}"\n')
        with pytest.raises(ProfileError) as err:
            load_profile(path)
        assert words in err.value.message and err.value.key == "probe" and err.value.line == 3
    path.write_text(f'target: nrf52840\nfirmware: {firmware}\nprobe: "0240*"\n')
    assert load_profile(path).probe == "0240*"


def test_a_missing_probe_costs_one_listing_of_the_probes(store, monkeypatch):
    """A station slot waiting for its probe asks at every poll: the miss lists the probes once,
    and the error names them from that listing."""
    from pyocd.core.helpers import ConnectHelper

    from piflash.probe.discovery import select_probe

    store.create("bay10", "nrf52840")
    calls = []
    real = ConnectHelper.get_all_connected_probes

    def counting(*args, **kwargs):
        calls.append(kwargs.get("unique_id"))
        return real(*args, **kwargs)

    monkeypatch.setattr(ConnectHelper, "get_all_connected_probes", staticmethod(counting))
    with pytest.raises(NoProbeError) as err:
        select_probe("sim:bay1")
    assert calls == [None]                              # one listing, and no ID handed to pyOCD
    assert "did you mean sim:bay10?" in err.value.message and "(attached: sim:bay10)" in err.value.message
