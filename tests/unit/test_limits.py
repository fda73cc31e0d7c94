"""Every length of time a user gives is finite and bounded (issue 38 item 3): ``inf``, ``1e308``
and ``nan`` were accepted by ``--boot-timeout`` and a profile's ``timeout: .inf`` and then waited
out for ever. Each is refused where it is given, with its documented exit code."""

from __future__ import annotations

import pytest

from piflash.errors import ExitCode, ProfileError
from piflash.limits import BOOT_TIMEOUT_MAX_S, seconds

ENDLESS = ["inf", "Infinity", "1e308", "nan", "-1", "0", "3601", "ten"]


@pytest.mark.parametrize("value", ENDLESS)
def test_the_check_refuses_what_is_not_a_bounded_wait(value):
    with pytest.raises(ValueError, match="must be"):
        seconds(value, "x", BOOT_TIMEOUT_MAX_S)
    assert seconds("2.5", "x", BOOT_TIMEOUT_MAX_S) == 2.5 and seconds(3600, "x", BOOT_TIMEOUT_MAX_S) == 3600.0
    for bad in (True, None, [1.0], float("inf")):
        with pytest.raises(ValueError):
            seconds(bad, "x", 10.0)


@pytest.mark.parametrize("args", [
    ("flash", "fw.hex", "-t", "nrf52840", "--boot-check", "rtt:ok", "--boot-timeout"),
    ("rtt", "-t", "nrf52840", "--duration"),
    ("rtt", "-t", "nrf52840", "--find-timeout"),
    ("protect", "recover", "-t", "nrf52840", "--yes", "--timeout"),
], ids=["boot-timeout", "rtt-duration", "rtt-find-timeout", "recover-timeout"])
@pytest.mark.parametrize("value", ["inf", "1e308", "nan"])
def test_an_endless_option_is_a_usage_error(cli, args, value):
    proc = cli(*args, value, check=ExitCode.USAGE, timeout=60)
    assert "must be" in proc.stderr and "seconds" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("value", [".inf", "1e308", ".nan", "-3", "true", '"soon"'])
def test_a_profiles_endless_boot_timeout_is_refused_on_its_line(tmp_path, value):
    from piflash.profiles import load_profile

    path = tmp_path / "p.yaml"
    path.write_text(f"target: nrf52840\nfirmware: a.hex\nboot_check:\n  rtt: ok\n  timeout: {value}\n")
    with pytest.raises(ProfileError) as err:
        load_profile(path)
    assert err.value.line == 3 and "timeout" in err.value.message
    assert err.value.exit_code == ExitCode.PROFILE


@pytest.mark.parametrize("value", ["inf", "nan", "0", "1e9"])
def test_an_endless_probe_timeout_variable_is_a_usage_error(cli, monkeypatch, value):
    monkeypatch.setenv("PIFLASH_PROBE_TIMEOUT", value)
    proc = cli("info", "-u", "remote:127.0.0.1:9", "-t", "nrf52840", check=ExitCode.USAGE, timeout=60)
    assert "PIFLASH_PROBE_TIMEOUT" in proc.stderr and "at most 3600 seconds" in proc.stderr


# -- numbers that are addresses (issue 38 item 4) ---------------------------------------------------
@pytest.mark.parametrize("args, words", [
    (("flash", "fw.bin", "-t", "nrf52840", "-a", "-5"), "is not a 32-bit address"),
    (("flash", "fw.bin", "-t", "nrf52840", "-a", "0x100000000"), "is not a 32-bit address"),
    (("rtt", "-t", "nrf52840", "--address", "-0x20"), "is not a 32-bit address"),
    (("flash", "fw.hex", "-t", "nrf52840", "--boot-check", "rtt:a{99999999999}"), "not a valid regular expression"),
    (("flash", "fw.hex", "-t", "nrf52840", "--boot-check", "word:0x100000000=1"), "is not a 32-bit address"),
    (("flash", "fw.hex", "-t", "nrf52840", "--boot-check", "word:-4=1"), "is not a 32-bit address"),
])
def test_an_impossible_address_or_pattern_is_a_usage_error(cli, args, words):
    proc = cli(*args, check=ExitCode.USAGE, timeout=60)
    assert words in proc.stderr and "Traceback" not in proc.stderr


@pytest.fixture
def flashed_nrf52840(sim_dir, firmware_dir, cli):
    pytest.importorskip("unicorn")
    from piflash.sim import SimStore

    SimStore().create("dk", "nrf52840")
    firmware = firmware_dir / "nrf52840" / "firmware.hex"
    cli("flash", firmware, "-u", "sim:dk", "-t", "nrf52840", check=0)
    return firmware


def test_a_word_outside_the_targets_memory_is_named_not_blamed_on_the_wiring(cli, flashed_nrf52840):
    out = cli.json("flash", flashed_nrf52840, "-u", "sim:dk", "-t", "nrf52840",
                   "--boot-check", "word:0xFFFFFFFC=1", check=ExitCode.BOOT_CHECK)
    message = out["error"]["message"]
    assert "the word at 0xfffffffc is in none of the target's memory" in message
    assert "power" not in message + (out["error"]["hint"] or "")


def test_rtt_at_an_address_outside_ram_is_exit_26_not_a_traceback(cli, flashed_nrf52840):
    proc = cli("rtt", "-u", "sim:dk", "-t", "nrf52840", "--address", "0xFFFFFFF0", "--find-timeout", "1",
               check=ExitCode.BOOT_CHECK, timeout=60)
    assert "no RTT control block can be at 0xfffffff0: it is not in the target's RAM" in proc.stderr
    assert "Traceback" not in proc.stderr
