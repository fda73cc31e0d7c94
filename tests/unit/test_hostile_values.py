"""Malformed values everywhere a user gives one, generated (issue 38, "0 tracebacks"): hypothesis
draws profiles, station configs and command lines of every shape and type, and each must end in
its documented exit code, never in a traceback or exit 1 (reserved for real bugs).

- A profile: every key of ``piflash.profiles.ALLOWED_KEYS`` (and unknown ones) with values of any
  YAML type: ``load_profile`` loads it or raises ``ProfileError`` (exit 5); a missing firmware
  file is ``FirmwareError`` (exit 3) and an unknown target ``UnknownTargetError`` (exit 2).
- A station config: every key of ``piflash.station.config.ALLOWED_KEYS``: ``load_config`` loads
  it or raises ``ProfileError`` (exit 5).
- The command line: ``piflash flash``'s and ``piflash rtt``'s options with drawn values, through
  the real click command in this process (``CliRunner``), with no probe present: exit 2 for a
  value the option refuses, else whatever the command reaches with a good value (no probe: 7;
  a missing file: 2 or 3), never 1 and never an exception out of the command.

Each case is bounded: the files are small and written once, the values are drawn small or
huge, and hypothesis's deadline is off only because a first import of pyOCD takes seconds.
"""

from __future__ import annotations

import math

import pytest

hypothesis = pytest.importorskip("hypothesis")
import yaml  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from piflash.errors import ExitCode, PiflashError  # noqa: E402
from piflash.profiles import ALLOWED_KEYS as PROFILE_KEYS  # noqa: E402
from piflash.station.config import ALLOWED_KEYS as STATION_KEYS  # noqa: E402

CASES = settings(max_examples=120, deadline=None, derandomize=True,
                 suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

#: YAML scalars of every kind, including the edges of number parsing.
SCALARS = st.one_of(
    st.none(), st.booleans(),
    st.integers(min_value=-(2 ** 70), max_value=2 ** 70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["", " ", "0x", "0x1g", "-0", "1e999", "nan", "inf", "4MHz", "4 mhz", "1.5k", "-1",
                     "0xFFFFFFFF", "0x100000000", "sim:", "sim:*", "*", "picoboot:", "remote:", "remote:h:0",
                     "rtt:", "rtt:a{99999999999}", "word:0xFFFFFFFC=1", "semihost:", "../../etc/passwd",
                     "\x00", "\u202e", "a" * 300]),
    st.text(max_size=20),
)
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                      max_leaves=12)


def _dump(mapping: dict) -> str:
    """The mapping as YAML; floats YAML cannot write as themselves (NaN, inf) are written as
    YAML's own spellings, which the loader reads back as floats."""
    def clean(v):
        if isinstance(v, float) and not math.isfinite(v):
            return v
        if isinstance(v, dict):
            return {str(k): clean(x) for k, x in v.items()}
        if isinstance(v, list):
            return [clean(x) for x in v]
        return v
    return yaml.safe_dump(clean(mapping), allow_unicode=True)


def _error_code(exc: BaseException) -> int:
    assert isinstance(exc, PiflashError), f"{type(exc).__name__}: {exc}"
    return int(exc.exit_code)


@CASES
@given(data=st.dictionaries(st.sampled_from(PROFILE_KEYS + ("unknown_key",)), VALUES, max_size=6))
def test_any_profile_loads_or_is_a_profile_error(tmp_path_factory, data):
    from piflash.profiles import load_profile

    folder = tmp_path_factory.mktemp("profile")
    (folder / "fw.hex").write_text(":00000001FF\n")
    path = folder / "p.yaml"
    path.write_text(_dump(data))
    try:
        load_profile(path)
    except Exception as exc:  # noqa: BLE001 - the assertion is about the kind
        assert _error_code(exc) in (ExitCode.PROFILE, ExitCode.FIRMWARE, ExitCode.USAGE), repr(exc)
        assert "Traceback" not in str(exc)


@CASES
@given(data=st.dictionaries(st.sampled_from(STATION_KEYS + ("unknown_key",)), VALUES, max_size=6))
def test_any_station_config_loads_or_is_a_profile_error(tmp_path_factory, data):
    from piflash.station.config import load_config

    folder = tmp_path_factory.mktemp("station")
    (folder / "fw.hex").write_text(":00000001FF\n")
    (folder / "line.yaml").write_text("target: nrf52840\nfirmware: fw.hex\n")
    path = folder / "station.yaml"
    path.write_text(_dump(data))
    try:
        load_config(path)
    except Exception as exc:  # noqa: BLE001
        assert _error_code(exc) in (ExitCode.PROFILE, ExitCode.FIRMWARE, ExitCode.USAGE), repr(exc)


#: Options of 'piflash flash' that take a value, and a strategy of raw strings for each.
NUMBERS = st.one_of(st.integers(min_value=-(2 ** 66), max_value=2 ** 66).map(str),
                    st.floats(allow_nan=True, allow_infinity=True).map(repr),
                    st.sampled_from(["", "0x", "-0x5", "1e999", "nan", "inf", "-inf", "0b101", "1_000", "٣"]),
                    st.text(max_size=12))
FLASH_OPTIONS = {
    "--frequency": NUMBERS, "--base-address": NUMBERS, "--boot-timeout": NUMBERS, "--serial": NUMBERS,
    "--probe": st.one_of(st.text(max_size=24), st.sampled_from(["sim:", "*", "sim:*", "picoboot:x", "remote:h:99999"])),
    "--target": st.text(max_size=16), "--erase": st.text(max_size=8),
    "--boot-check": st.one_of(st.text(max_size=24),
                              st.sampled_from(["rtt:a{99999999999}", "rtt:(a+)+$", "word:0x1FFFFFFFF=1",
                                               "word:0xFFFFFFFC=1", "semihost:-1", "rtt:"])),
    "-O": st.one_of(st.text(max_size=24), st.sampled_from(["frequency=abc", "=1", "x", "auto_unlock=maybe"])),
}


#: The same for 'piflash rtt'.
RTT_OPTIONS = {"--address": NUMBERS, "--find-timeout": NUMBERS, "--duration": NUMBERS,
               "--probe": FLASH_OPTIONS["--probe"], "--target": FLASH_OPTIONS["--target"]}


def _command_lines(table):
    return (st.dictionaries(st.sampled_from(sorted(table)), st.just(None), min_size=1, max_size=4)
            .flatmap(lambda keys: st.fixed_dictionaries({k: table[k] for k in keys})))


def _run(tmp_path_factory, monkeypatch, command, options):
    from click.testing import CliRunner

    from piflash.cli import cli

    folder = tmp_path_factory.mktemp("cli")
    (folder / "fw.hex").write_text(":00000001FF\n")
    monkeypatch.setenv("PIFLASH_HISTORY", "off")
    monkeypatch.delenv("PIFLASH_SIM_USB", raising=False)
    args = [command, str(folder / "fw.hex")]
    for name, value in options.items():
        args += [name, value]
    if "--probe" not in options:
        args += ["--probe", "sim:nothing-here"]
    result = CliRunner().invoke(cli, args, catch_exceptions=True)
    assert result.exit_code != ExitCode.INTERNAL, (args, result.output, repr(result.exception))
    assert result.exit_code in {int(c) for c in ExitCode}, (args, result.exit_code, result.output)
    if result.exception is not None:
        assert isinstance(result.exception, SystemExit), (args, repr(result.exception))
    assert "Traceback" not in result.output, (args, result.output)


@CASES
@given(options=_command_lines(FLASH_OPTIONS))
def test_any_flash_command_line_ends_in_a_documented_exit_code(tmp_path_factory, monkeypatch, options):
    _run(tmp_path_factory, monkeypatch, "flash", options)


@CASES
@given(options=_command_lines(RTT_OPTIONS))
def test_any_rtt_command_line_ends_in_a_documented_exit_code(tmp_path_factory, monkeypatch, options):
    _run(tmp_path_factory, monkeypatch, "rtt", options)
