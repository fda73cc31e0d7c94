"""Tests for piflash.profiles: loading, validation errors, checksums and search."""

import hashlib
import json
import os
import re
from pathlib import Path

import pytest

from piflash import profiles
from piflash.errors import ChecksumError, ExitCode, FirmwareError, ProfileError
from piflash.profiles import (
    Profile,
    find_profile,
    list_profiles,
    load_profile,
    parse_frequency,
    profile_dirs,
    profile_to_dict,
)

GOOD = """\
# piflash profile
target: stm32f103rc
probe: "0240000032044e45"
frequency: 4MHz
erase: sector
firmware: build/app.bin
base_address: 0x08000000
verify: false
reset: true
description: "Blue pill"
"""


def write(directory: Path, name: str, text: str) -> Path:
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def error_of(path: Path) -> ProfileError:
    with pytest.raises(ProfileError) as info:
        load_profile(path)
    err = info.value
    assert err.exit_code == ExitCode.PROFILE
    assert err.path == str(path)
    return err


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    monkeypatch.delenv("PIFLASH_PROFILE_PATH", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setattr(profiles, "SYSTEM_PROFILE_DIR", tmp_path / "etc")


# --- valid profiles ------------------------------------------------------------------------

def test_valid_profile_round_trip(tmp_path):
    path = write(tmp_path, "bluepill.yaml", GOOD)
    p = load_profile(path)
    assert p == Profile(name="bluepill", path=path.resolve(), target="stm32f103rc",
                        probe="0240000032044e45", frequency=4_000_000, erase="sector",
                        firmware=(tmp_path / "build" / "app.bin").resolve(), sha256=None,
                        base_address=0x08000000, verify=False, reset=True,
                        description="Blue pill")
    assert p.firmware_format == "bin"
    d = profile_to_dict(p)
    assert json.loads(json.dumps(d)) == d
    assert d["base_address"] == 0x08000000 and d["firmware"] == str(p.firmware)
    assert d["path"] == str(path.resolve()) and d["frequency"] == 4_000_000


def test_defaults_and_minimal_profile(tmp_path):
    p = load_profile(write(tmp_path, "m.yml", "target: nrf52840\nfirmware: app.hex\n"))
    assert (p.name, p.probe, p.frequency, p.erase, p.sha256, p.base_address) == \
        ("m", None, None, "auto", None, None)
    assert p.verify is True and p.reset is True and p.description is None
    assert p.firmware_format == "hex"


def test_null_value_counts_as_absent(tmp_path):
    p = load_profile(write(tmp_path, "n.yaml", "target: t\nfirmware: a.elf\nprobe:\nverify: ~\n"))
    assert p.probe is None and p.verify is True


@pytest.mark.parametrize("text, hz", [
    ("4000000", 4_000_000), ('"1000000"', 1_000_000), ("4MHz", 4_000_000),
    ("400kHz", 400_000), ("400 khz", 400_000), ("1.5M", 1_500_000), ("10k", 10_000),
    ("1_000_000", 1_000_000),
])
def test_frequency_forms(tmp_path, text, hz):
    p = load_profile(write(tmp_path, "f.yaml", f"target: t\nfirmware: a.hex\nfrequency: {text}\n"))
    assert p.frequency == hz


def test_numeric_looking_probe_and_sha_kept_as_written(tmp_path):
    digits = "1" * 64
    p = load_profile(write(tmp_path, "p.yaml",
                           f"target: t\nfirmware: a.hex\nprobe: 000683123456\nsha256: {digits}\n"))
    assert p.probe == "000683123456" and p.sha256 == digits


def test_probe_unique_id_forms(tmp_path):
    for uid in ("sim:nrf52840", "remote:127.0.0.1:5555"):
        p = load_profile(write(tmp_path, "p.yaml", f"target: t\nfirmware: a.hex\nprobe: {uid}\n"))
        assert p.probe == uid


def test_sha256_lowercased(tmp_path):
    digest = "AB" * 32
    p = load_profile(write(tmp_path, "s.yaml", f"target: t\nfirmware: a.hex\nsha256: {digest}\n"))
    assert p.sha256 == "ab" * 32


def test_relative_firmware_resolved_against_profile_dir(tmp_path, monkeypatch):
    path = write(tmp_path / "boards", "b.yaml", "target: t\nfirmware: ../fw/app.elf\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    p = load_profile(path)
    assert p.firmware == (tmp_path / "fw" / "app.elf").resolve()
    assert p.firmware.is_absolute()


def test_absolute_firmware_kept(tmp_path):
    fw = tmp_path / "abs" / "app.hex"
    p = load_profile(write(tmp_path / "d", "b.yaml", f"target: t\nfirmware: {fw}\n"))
    assert p.firmware == fw.resolve()


# --- errors: exact line and key -----------------------------------------------------------

def test_unknown_key_with_suggestion(tmp_path):
    err = error_of(write(tmp_path, "u.yaml", "target: t\nfirmware: a.hex\nfrequncy: 4MHz\n"))
    assert (err.line, err.key) == (3, "frequncy")
    assert "did you mean 'frequency'?" in err.message
    for key in profiles.ALLOWED_KEYS:
        assert key in err.message
    assert err.message.startswith(f"{tmp_path / 'u.yaml'}:3: key 'frequncy': unknown key")


def test_unknown_key_without_close_match(tmp_path):
    err = error_of(write(tmp_path, "u.yaml", "target: t\nfirmware: a.hex\nzzz: 1\n"))
    assert err.key == "zzz" and "did you mean" not in err.message


@pytest.mark.parametrize("key, value, words", [
    ("target", "5", "expected a string"),
    ("firmware", "[a, b]", "expected a string"),
    ("description", "12", "expected a string"),
    ("probe", "{a: 1}", "expected a string"),
    ("frequency", "fast", "expected a frequency"),
    ("frequency", "0", "positive"),
    ("frequency", "-5", "positive"),
    ("frequency", "true", "expected a frequency"),
    ("frequency", "4.5", "expected a frequency"),
    ("frequency", "1.0001kHz", "whole number"),
    ("erase", "mass", "must be one of auto, sector, chip"),
    ("erase", "1", "expected a string"),
    ("sha256", "abc123", "64 hexadecimal digits"),
    ("sha256", "g" * 64, "64 hexadecimal digits"),
    ("base_address", "'0x08000000'", "expected an integer address"),
    ("base_address", "0x100000000", "32-bit"),
    ("base_address", "true", "expected an integer address"),
    ("verify", '"yes"', "expected true or false"),
    ("verify", "1", "expected true or false"),
    ("reset", "on-board", "expected true or false"),
])
def test_wrong_type_reports_exact_line(tmp_path, key, value, words):
    lines = {"target": "target: t", "firmware": "firmware: a.bin",
             "base_address": "base_address: 0x0"}
    lines[key] = f"{key}: {value}"
    text = "# comment\n\n" + "\n".join(v for k, v in lines.items() if k != key) + \
        f"\n# another comment\n{lines[key]}\n"
    expected_line = text.splitlines().index(lines[key]) + 1
    err = error_of(write(tmp_path, "w.yaml", text))
    assert (err.line, err.key) == (expected_line, key)
    assert words in err.message
    assert f"w.yaml:{expected_line}: key '{key}': " in err.message


def test_erase_suggestion(tmp_path):
    err = error_of(write(tmp_path, "e.yaml", "target: t\nfirmware: a.hex\nerase: chipp\n"))
    assert "did you mean 'chip'?" in err.message


@pytest.mark.parametrize("missing", ["target", "firmware"])
def test_missing_required_key(tmp_path, missing):
    text = "\n".join(line for line in ["# c", "verify: true", "target: t", "firmware: a.hex"]
                     if not line.startswith(missing)) + "\n"
    err = error_of(write(tmp_path, "m.yaml", text))
    assert (err.key, err.line) == (missing, 2)
    assert "required key is missing" in err.message


def test_required_key_empty(tmp_path):
    err = error_of(write(tmp_path, "m.yaml", "target:\nfirmware: a.hex\n"))
    assert (err.key, err.line) == ("target", 1) and "must not be empty" in err.message
    err = error_of(write(tmp_path, "m.yaml", 'target: "  "\nfirmware: a.hex\n'))
    assert (err.key, err.line) == ("target", 1) and "must not be empty" in err.message


def test_duplicate_key(tmp_path):
    err = error_of(write(tmp_path, "d.yaml", "target: t\nfirmware: a.hex\ntarget: u\n"))
    assert (err.key, err.line) == ("target", 3) and "first given on line 1" in err.message


def test_yaml_syntax_error_line(tmp_path):
    err = error_of(write(tmp_path, "s.yaml", "target: t\nfirmware: a.hex\nverify: [true\nreset: x\n"))
    assert err.key is None and err.line == 4 and "YAML syntax error" in err.message
    err = error_of(write(tmp_path, "s.yaml", "target: t\n  firmware: a.hex\n"))
    assert err.line == 2 and "mapping values are not allowed here" in err.message


def test_unsafe_tag_refused(tmp_path):
    err = error_of(write(tmp_path, "t.yaml",
                         "target: !!python/object/apply:os.system ['true']\nfirmware: a.hex\n"))
    assert (err.key, err.line) == ("target", 1)


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n", "---\n"])
def test_empty_file(tmp_path, text):
    err = error_of(write(tmp_path, "e.yaml", text))
    assert "profile is empty" in err.message and err.line is None


@pytest.mark.parametrize("text, kind, line", [
    ("- target: t\n- firmware: a.hex\n", "list", 1),
    ("# c\njust a string\n", "single value", 2),
])
def test_top_level_not_mapping(tmp_path, text, kind, line):
    err = error_of(write(tmp_path, "n.yaml", text))
    assert "top level must be a mapping" in err.message and kind in err.message
    assert err.line == line


def test_non_string_key(tmp_path):
    err = error_of(write(tmp_path, "k.yaml", "target: t\nfirmware: a.hex\n5: x\n"))
    assert err.line == 3 and "keys must be plain words" in err.message


def test_unreadable_or_missing_profile(tmp_path):
    err = error_of(tmp_path / "nope.yaml")
    assert "cannot read profile" in err.message
    (tmp_path / "bad.yaml").write_bytes(b"target: \xff\xfe\n")
    assert "cannot read profile" in error_of(tmp_path / "bad.yaml").message


@pytest.mark.parametrize("fw", ["a.hex", "a.elf", "a.axf", "a.HEX"])
def test_base_address_refused_for_non_bin(tmp_path, fw):
    err = error_of(write(tmp_path, "b.yaml", f"target: t\nfirmware: {fw}\nbase_address: 0x1000\n"))
    assert (err.key, err.line) == ("base_address", 3)
    assert "only a .bin firmware takes a base address" in err.message


def test_bin_needs_base_address(tmp_path):
    err = error_of(write(tmp_path, "b.yaml", "target: t\nfirmware: app.bin\n"))
    assert (err.key, err.line) == ("firmware", 2) and "needs 'base_address'" in err.message


def test_unknown_firmware_extension(tmp_path):
    err = error_of(write(tmp_path, "b.yaml", "target: t\nfirmware: app.s19\n"))
    assert (err.key, err.line) == ("firmware", 2) and "app.s19" in err.message


# --- checksums ----------------------------------------------------------------------------

def _fw_profile(tmp_path, data: bytes, digest: str) -> Profile:
    (tmp_path / "app.hex").write_bytes(data)
    return load_profile(write(tmp_path, "c.yaml", f"target: t\nfirmware: app.hex\nsha256: {digest}\n"))


def test_checksum_ok(tmp_path):
    data = os.urandom(3 << 20 | 123)  # more than one read chunk
    digest = hashlib.sha256(data).hexdigest()
    assert _fw_profile(tmp_path, data, digest.upper()).check_firmware() == digest


def test_checksum_mismatch(tmp_path):
    wrong = "0" * 64
    p = _fw_profile(tmp_path, b"firmware", wrong)
    with pytest.raises(ChecksumError) as info:
        p.check_firmware()
    actual = hashlib.sha256(b"firmware").hexdigest()
    assert actual in info.value.message and wrong in info.value.message
    assert info.value.exit_code == ExitCode.CHECKSUM
    assert "piflash profile check" in info.value.hint and actual in info.value.hint


def test_checksum_without_pin_returns_digest(tmp_path):
    (tmp_path / "a.hex").write_bytes(b"x")
    p = load_profile(write(tmp_path, "c.yaml", "target: t\nfirmware: a.hex\n"))
    assert p.check_firmware() == hashlib.sha256(b"x").hexdigest()


def test_missing_firmware_is_firmware_error(tmp_path):
    p = load_profile(write(tmp_path, "c.yaml", "target: t\nfirmware: gone.hex\n"))
    with pytest.raises(FirmwareError, match="not found"):
        p.check_firmware()
    (tmp_path / "dir.hex").mkdir()
    with pytest.raises(FirmwareError, match="is a directory, not a regular file"):
        p.with_overrides(firmware=tmp_path / "dir.hex").check_firmware()


# --- overrides ----------------------------------------------------------------------------

def test_with_overrides(tmp_path):
    p = load_profile(write(tmp_path, "o.yaml", GOOD))
    q = p.with_overrides(frequency="1MHz", probe=None, verify=True, erase="chip")
    assert (q.frequency, q.probe, q.verify, q.erase) == (1_000_000, p.probe, True, "chip")
    assert p.frequency == 4_000_000  # original untouched
    r = p.with_overrides(firmware=str(tmp_path / "other.hex"))
    assert r.base_address is None and r.firmware_format == "hex"
    s = p.with_overrides(firmware=tmp_path / "new.bin")
    assert s.base_address == 0x08000000
    with pytest.raises(ProfileError):
        p.with_overrides(erase="mass")
    with pytest.raises(ProfileError):
        p.with_overrides(frequency="fast")
    with pytest.raises(TypeError):
        p.with_overrides(colour="red")


def test_overriding_firmware_drops_pin(tmp_path):
    (tmp_path / "app.hex").write_bytes(b"a")
    p = load_profile(write(tmp_path, "o.yaml", f"target: t\nfirmware: app.hex\nsha256: {'0' * 64}\n"))
    assert p.with_overrides(firmware=tmp_path / "app.hex").sha256 is None
    assert p.with_overrides(firmware=tmp_path / "app.hex", sha256="A" * 64).sha256 == "a" * 64


def test_parse_frequency_direct():
    assert parse_frequency(1000) == 1000 and parse_frequency(" 2 MHz ") == 2_000_000
    with pytest.raises(ProfileError):
        parse_frequency(False)


# --- search -------------------------------------------------------------------------------

def _dirs(tmp_path):
    return (tmp_path / "work" / "piflash.d", tmp_path / "xdg" / "piflash" / "profiles",
            tmp_path / "etc")


def test_profile_dirs_default_order(tmp_path):
    local, xdg, etc = _dirs(tmp_path)
    assert profile_dirs(tmp_path / "work") == [local, xdg, etc]


def test_profile_dirs_xdg_unset_uses_home(tmp_path, monkeypatch):
    monkeypatch.delenv("XDG_CONFIG_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert profile_dirs(tmp_path)[1] == tmp_path / "home" / ".config" / "piflash" / "profiles"
    monkeypatch.setenv("XDG_CONFIG_HOME", "relative/ignored")
    assert profile_dirs(tmp_path)[1] == tmp_path / "home" / ".config" / "piflash" / "profiles"


def test_search_order(tmp_path):
    work = tmp_path / "work"
    local, xdg, etc = _dirs(tmp_path)
    for d in (local, xdg, etc):
        write(d, "board.yaml", "target: t\nfirmware: a.hex\n")
    write(xdg, "only-xdg.yml", "target: t\nfirmware: a.hex\n")
    write(etc, "only-xdg.yaml", "target: t\nfirmware: a.hex\n")
    assert find_profile("board", cwd=work) == local / "board.yaml"
    (local / "board.yaml").unlink()
    assert find_profile("board", cwd=work) == xdg / "board.yaml"
    (xdg / "board.yaml").unlink()
    assert find_profile("board", cwd=work) == etc / "board.yaml"
    assert find_profile("only-xdg", cwd=work) == xdg / "only-xdg.yml"  # directory order first


def test_yaml_beats_yml_in_same_dir(tmp_path):
    local = _dirs(tmp_path)[0]
    write(local, "b.yml", "x")
    write(local, "b.yaml", "x")
    assert find_profile("b", cwd=tmp_path / "work") == local / "b.yaml"


def test_find_by_path(tmp_path):
    path = write(tmp_path, "sub/x.yaml", "x")
    assert find_profile("sub/x.yaml", cwd=tmp_path) == path
    assert find_profile(str(path)) == path
    with pytest.raises(ProfileError, match="profile file not found"):
        find_profile("sub/missing.yaml", cwd=tmp_path)
    with pytest.raises(ProfileError, match="profile file not found"):
        find_profile("missing.yml", cwd=tmp_path)
    plain = write(tmp_path, "plainfile", "x")  # an existing file without extension
    assert find_profile("plainfile", cwd=tmp_path) == plain


def test_env_path_replaces_defaults(tmp_path, monkeypatch):
    a, b = tmp_path / "a", tmp_path / "b"
    write(_dirs(tmp_path)[0], "board.yaml", "x")
    write(b, "board.yaml", "x")
    monkeypatch.setenv("PIFLASH_PROFILE_PATH", os.pathsep.join([str(a), "", "b"]))
    assert profile_dirs(tmp_path) == [a, b]
    assert find_profile("board", cwd=tmp_path) == b / "board.yaml"
    write(a, "board.yml", "x")
    assert find_profile("board", cwd=tmp_path) == a / "board.yml"


def test_not_found_lists_dirs(tmp_path):
    with pytest.raises(ProfileError) as info:
        find_profile("ghost", cwd=tmp_path / "work")
    for d in _dirs(tmp_path):
        assert str(d) in info.value.message
    assert "'ghost' not found" in info.value.message
    assert info.value.hint and "piflash profile list" in info.value.hint


def test_list_profiles(tmp_path):
    local, xdg, etc = _dirs(tmp_path)
    write(local, "good.yaml", "target: t\nfirmware: a.hex\ndescription: nRF52 DK on bench 3\n")
    write(local, "broken.yml", "target: t\nfirmware: a.hex\nbogus: 1\n")
    write(xdg, "good.yaml", "broken: [\n")  # shadowed by piflash.d
    write(etc, "sys.yaml", "target: t\nfirmware: a.hex\n")
    write(etc, ".hidden.yaml", "x")
    write(etc, "notes.txt", "x")
    got = list_profiles(cwd=tmp_path / "work")
    assert [name for name, _, _, _ in got] == ["broken", "good", "sys"]
    by_name = {name: (path, err) for name, path, err, _ in got}
    assert by_name["good"] == (local / "good.yaml", None)
    assert by_name["sys"] == (etc / "sys.yaml", None)
    assert [d for _, _, _, d in got] == [None, "nRF52 DK on bench 3", None]   # what 'profile list' shows
    path, err = by_name["broken"]
    assert path == local / "broken.yml"
    assert err == f"{path}:3: key 'bogus': " + err.split(": key 'bogus': ", 1)[1]
    assert "unknown key" in err


def test_list_profiles_no_dirs(tmp_path):
    assert list_profiles(cwd=tmp_path) == []


# --- docs ---------------------------------------------------------------------------------

DOC = Path(__file__).resolve().parents[2] / "docs" / "profiles.md"
DOC_EXAMPLE = re.compile(r"```yaml\n([^`]*)```\n\n```\nerror: /tmp/station/"
                         r"(piflash\.d/nrf52-dk\.yaml[^\n]*)\n(?:hint: ([^\n]*)\n)?```", re.S)


def test_docs_error_examples_are_current(tmp_path, monkeypatch):
    """Each example is what the CLI prints, word for word (issue 19 item 18: the page showed a
    "ProfileError (exit 5): ..." text the CLI never prints)."""
    import subprocess
    import sys

    examples = DOC_EXAMPLE.findall(DOC.read_text())
    assert len(examples) >= 15
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PIFLASH_PROFILE_PATH", str(tmp_path / "piflash.d"))
    for text, message, hint in examples:
        write(tmp_path, "piflash.d/nrf52-dk.yaml", text)
        with pytest.raises(ProfileError) as info:
            load_profile("piflash.d/nrf52-dk.yaml")
        assert (info.value.message, info.value.hint or "") == (message, hint)
    # and through the CLI, for the first few (each is a process start)
    for text, message, hint in examples[:4]:
        write(tmp_path, "piflash.d/nrf52-dk.yaml", text)
        proc = subprocess.run([sys.executable, "-m", "piflash", "profile", "check", "nrf52-dk"],
                              capture_output=True, text=True)
        shown = proc.stderr.replace(str(tmp_path.resolve()), "/tmp/station")
        assert proc.returncode == 5
        assert shown == f"error: /tmp/station/{message}\n" + (f"hint: {hint}\n" if hint else ""), shown


# --- hostile files (issue 38) ----------------------------------------------------------------

def _alias_bomb(levels: int = 9) -> str:
    """The billion laughs: each list is nine aliases of the one before (9 ** levels values)."""
    lines = ['a0: &a0 ["lol"]']
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, levels)]
    return "\n".join(lines)


@pytest.mark.parametrize("key", ["pack", "description", "serial", "patch"])
def test_an_alias_bomb_under_any_key_is_refused_before_it_is_expanded(tmp_path, key):
    import resource
    import time

    bomb = _alias_bomb()
    body = "\n".join("  " + line for line in bomb.splitlines())
    text = f"target: nrf52840\nfirmware: a.hex\n{key}:\n  bomb:\n{body.replace('  a', '    a')}\n"
    path = write(tmp_path, "bomb.yaml", text)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.process_time()
    err = error_of(path)
    assert time.process_time() - start < 2.0
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 64 * 1024      # KiB: < 64 MiB more
    assert "more than 50,000 values once its YAML aliases" in err.message and len(str(err)) < 400


def test_a_file_too_large_or_not_a_file_is_refused_without_reading_it(tmp_path):
    big = write(tmp_path, "big.yaml", "target: nrf52840\nfirmware: a.hex\n# " + "x" * (1 << 20) + "\n")
    assert "larger than 1,048,576 bytes" in error_of(big).message
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    assert error_of(fifo).message.endswith("not a regular file")


def test_aliases_that_stay_small_still_load(tmp_path):
    text = ('target: nrf52840\nfirmware: a.hex\ndescription: &d "Blue pill"\n'
            'pack: [&p /tmp/a.pack]\n')
    assert load_profile(write(tmp_path, "ok.yaml", text)).description == "Blue pill"


def test_an_alias_bomb_in_a_station_config_is_refused_too(tmp_path):
    from piflash.station.config import load_config

    body = "\n".join("  " + line for line in _alias_bomb().splitlines())
    path = write(tmp_path, "station.yaml", f"station: s\nprofile: p.yaml\ngpio:\n{body}\n")
    with pytest.raises(ProfileError) as info:
        load_config(path)
    assert "more than 50,000 values" in info.value.message
