"""Production features (issue 13): per-board serial / patch data, the serial counter with leases,
and read-out protection (status / lock / recover), through the real pyOCD stack on simulated
boards where a board is involved."""

from __future__ import annotations

import sqlite3
import textwrap
from pathlib import Path

import pytest

from piflash.errors import ExitCode, ProfileError, SerialError
from piflash.firmware.image import image_from_bytes
from piflash.firmware.patch import CounterSpec
from piflash.production.serials import SerialAllocator
from piflash.profiles import load_profile

REPO = Path(__file__).resolve().parents[2]


def _profile(tmp_path: Path, body: str, target: str = "nrf52840", name: str = "numbered") -> Path:
    path = tmp_path / "profiles" / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"target: {target}\nfirmware: fw.hex\n" + textwrap.dedent(body))
    return path


# -- profile keys --------------------------------------------------------------------------------

@pytest.mark.parametrize("body, line, key, message", [
    ("serial:\n  address: 0x1000\n  encoding: u16\n", 3, "serial.encoding", "must be one of u32, u64"),
    ("serial:\n  encoding: u32\n", 3, "serial", "not where"),
    ("verify: true\nserial:\n  address: 0x1000\n  encoding: ascii\n", 4, "serial.length", "needs a length"),
    ("serial:\n  address: 0x1000\n  encoding: u32\n  template: '{n.real}'\n", 3, "serial.template",
     "unknown field {n.real}"),
    ("serial:\n  address: 0x1000\n  encoding: u32\n  end: 0x100000000\n", 3, "serial.end", "does not fit in u32"),
    ("serial:\n  address: 0x1000\n  encoding: u32\n  step: 0\n", 3, "serial.step", "must be >= 1"),
    ("serial:\n  uicr_customer: 31\n  encoding: u64\n", 3, "serial.uicr_customer", "runs past CUSTOMER[31]"),
    ("patch:\n  - address: 0x1000\n    encoding: u32\n  - address: 0x1002\n    encoding: u32\n", 3, "patch",
     "overlap at 0x00001002"),
    ("protect: lock\nverify: false\n", 3, "protect", "only after a passed verify"),
    ("protect: always\n", 3, "protect", "must be one of lock, off"),
])
def test_profile_errors_name_file_line_key(tmp_path, body, line, key, message):
    path = _profile(tmp_path, body)
    with pytest.raises(ProfileError) as info:
        load_profile(path)
    assert (info.value.line, info.value.key) == (line, key)
    assert message in info.value.message and f"{path}:{line}: key '{key}'" in info.value.message


def test_stm32f1_otp_is_refused_and_uicr_is_nrf_only(tmp_path):
    with pytest.raises(ProfileError, match="STM32F1 has none"):
        load_profile(_profile(tmp_path, "serial:\n  otp: 0\n  encoding: u32\n", target="stm32f103rc"))
    with pytest.raises(ProfileError, match="nRF feature"):
        load_profile(_profile(tmp_path, "serial:\n  uicr_customer: 0\n  encoding: u32\n", target="stm32f103rc"))


def test_plan_renders_templates_and_overlays_the_image(tmp_path):
    prof = load_profile(_profile(tmp_path, """\
        serial:
          uicr_customer: 2
          encoding: u32
          start: 7
        patch:
          - name: label
            address: 0x0FF0
            encoding: ascii
            length: 24
            pad: 0xFF
            template: "SN-{n:06d}-{target_uid}"
          - name: made
            address: 0x2000
            encoding: utf-8
            length: 10
            template: "{date}"
        """))
    plan = prof.patch_plan
    assert plan.counter == CounterSpec("numbered", 7, 1, None) and plan.uses_serial
    image = image_from_bytes(bytes(range(256)) * 16, 0)          # 0x0000-0x0FFF
    import datetime
    patched, values = plan.apply(image, 42, "00aa", now=datetime.datetime(2026, 11, 22))
    data = {s.address: s.data for s in patched.segments}
    assert data[0x10001088] == (42).to_bytes(4, "little")
    # Replaced inside the image (0xFF0-0xFFF), added beyond it (0x1000-0x1007): one segment.
    assert data[0][:0xFF0] == image.segments[0].data[:0xFF0]
    assert data[0][0xFF0:] == b"SN-000042-00aa" + b"\xff" * 10
    assert data[0x2000] == b"2026-11-22"
    assert values["label"] == {"address": "0x00000ff0", "value": "SN-000042-00aa",
                               "bytes": (b"SN-000042-00aa" + b"\xff" * 10).hex()}
    assert patched.sha256 == image.sha256 and patched.size == image.size + 4 + 24 - 16 + 10
    with pytest.raises(SerialError, match="does not fit in u32"):
        plan.apply(image, 1 << 32, "00aa")
    with pytest.raises(SerialError, match="more than its length"):
        plan.apply(image, 42, "00aa" * 8)
    with pytest.raises(SerialError, match="needs a serial number"):
        plan.apply(image, None, "00aa")


# -- the counter ---------------------------------------------------------------------------------

def _numbers(path: Path):
    db = sqlite3.connect(path)
    try:
        return db.execute("SELECT n, state FROM numbers ORDER BY n").fetchall()
    finally:
        db.close()


def test_leases_hand_out_each_number_once_and_a_restart_loses_only_the_block(tmp_path):
    path = tmp_path / "serials.sqlite3"
    counter = CounterSpec("board", start=100, step=10, end=100 + 10 * 40)
    a = SerialAllocator(counter, "line-1", path, block=4)
    got = [a.take() for _ in range(6)]                             # two leases: 100..130, 140..170
    assert got == [100, 110, 120, 130, 140, 150]
    a.finish(100, True)
    a.finish(110, False, "uid-2")                                  # a failed board keeps its number
    # A second station on the same counter leases its own block.
    b = SerialAllocator(counter, "line-2", path, block=4)
    assert b.take() == 180
    a.close()
    # line-1 "crashes" (no finish for 120..150) and starts again: 160, 170 are lost, never reused.
    a2 = SerialAllocator(counter, "line-1", path, block=4)
    assert a2.lost == {"unused": 2, "interrupted": 4}
    assert a2.take() == 220
    states = dict(_numbers(path))
    assert states[100] == "pass" and states[110] == "fail" and states[120] == "interrupted"
    assert 160 not in states and 170 not in states
    # The end of the range: the last numbers, then a clear error with exit code 21.
    rest = [a2.take() for _ in range(28)]                          # 230..500
    assert rest == list(range(230, 501, 10))
    with pytest.raises(SerialError, match="used up") as info:
        a2.take()
    assert info.value.exit_code == ExitCode.SERIAL == 22


def test_counter_definition_conflict_is_refused(tmp_path):
    path = tmp_path / "serials.sqlite3"
    SerialAllocator(CounterSpec("c", 1, 1, None), "s", path).take()
    with pytest.raises(SerialError, match="exists with start 1, step 1"):
        SerialAllocator(CounterSpec("c", 5, 1, None), "s", path).take()


# -- boards: flash --serial, protection ------------------------------------------------------------

pytest.importorskip("unicorn")

from piflash.sim import SimStore  # noqa: E402


@pytest.fixture
def store(sim_dir):
    return SimStore()


def _nrf_profile(tmp_path, firmware_dir, extra=""):
    fw = firmware_dir / "nrf52840" / "firmware.hex"
    return _profile(tmp_path, """\
        serial:
          uicr_customer: 0
          encoding: u32
          start: 1000
        patch:
          - name: label
            address: 0x000FF000
            encoding: ascii
            length: 16
            template: "SN-{n:06d}"
        """ + extra).read_text().replace("fw.hex", str(fw))


def test_flash_serial_one_off_programs_and_verifies_the_patched_image(tmp_path, firmware_dir, store, cli):
    prof = tmp_path / "profiles" / "numbered.yaml"
    prof.parent.mkdir(parents=True, exist_ok=True)
    prof.write_text(_nrf_profile(tmp_path, firmware_dir))
    store.create("nb", "nrf52840")
    out = cli.json("flash", "-p", "numbered", "-u", "sim:nb", "--serial", "4242")
    assert out["ok"] and out["serial"] == "4242" and out["protection"] == "open"
    assert out["patch"]["label"]["value"] == "SN-004242"
    assert store.read_nvm("nb", "uicr")[0x80:0x84] == (4242).to_bytes(4, "little")
    assert store.read_flash("nb")[0xFF000:0xFF010] == b"SN-004242" + bytes(7)
    dump = tmp_path / "dump.bin"
    cli("sim", "dump", "nb", "-o", dump, check=0)
    assert dump.read_bytes()[0xFF000:0xFF009] == b"SN-004242"
    # The patched bytes are verified too: a bit that programs wrong in the label fails the board.
    store.set_faults("nb", bit_flip={"address": 0xFF003, "bit": 1})
    bad = cli("flash", "-p", "numbered", "-u", "sim:nb", "--serial", "4243", check=int(ExitCode.VERIFY))
    assert "first at 0x000ff003" in bad.stderr
    # Without --serial a numbering profile refuses (usage), and --serial needs such a profile.
    cli("flash", "-p", "numbered", "-u", "sim:nb", check=2)
    cli("flash", firmware_dir / "nrf52840" / "firmware.hex", "-u", "sim:nb", "--serial", "1", check=2)


@pytest.mark.parametrize("target", ["nrf52840", pytest.param("nrf51", marks=pytest.mark.slow),
                                    pytest.param("stm32f103rc", marks=pytest.mark.slow)])
def test_lock_status_flash_refused_recover_then_flash(target, firmware_dir, microbit_hex, store, cli):
    from conftest import firmware_for

    fw = firmware_for(target, firmware_dir, microbit_hex)
    store.create("b", target)
    u = ("-u", "sim:b", "-t", target)
    cli("flash", fw, *u, check=0)
    before = store.read_flash("b")
    assert cli.json("protect", "status", *u)["status"]["state"] == "open"
    assert cli.json("protect", "lock", *u)["protection"] == "locked"
    status = cli.json("protect", "status", *u)["status"]
    assert status["state"] == "locked" and status["configured"] is True
    assert "LOCKED" in cli("protect", "lock", *u, check=0).stdout   # already locked: left alone
    assert store.read_flash("b") == before                           # status erased nothing
    refused = cli("flash", fw, *u, check=int(ExitCode.PROTECTED))
    assert "read-out protected" in refused.stderr and "piflash protect recover" in refused.stderr
    assert store.read_flash("b") == before                           # nor did the refused flash
    out = cli("protect", "recover", *u, "--yes", check=0).stdout
    assert "MASS ERASE done" in out and "now OPEN" in out
    assert set(store.read_flash("b")) == {0xFF}                      # recover leaves flash erased
    assert "not locked: nothing erased" in cli("protect", "recover", *u, "--yes", check=0).stdout
    cli("flash", fw, *u, check=0)
    assert store.read_flash("b") == before
    from support.stationkit import rows
    ops = [(r["operation"], r["outcome"]) for r in rows(Path(store.root).parent / "history.sqlite3")]
    assert ("recover-mass-erase", "pass") in ops and ("recover", "pass") in ops
    assert ("flash", "fail") in ops and ops.count(("lock", "pass")) == 2


def test_lock_that_does_not_take_fails_the_board(tmp_path, firmware_dir, store, cli):
    prof = tmp_path / "profiles" / "numbered.yaml"
    prof.parent.mkdir(parents=True, exist_ok=True)
    prof.write_text(_nrf_profile(tmp_path, firmware_dir, "protect: lock\n"))
    store.create("nb", "nrf52840")
    store.set_faults("nb", lock_ignored=True)
    out = cli("flash", "-p", "numbered", "-u", "sim:nb", "--serial", "7", check=int(ExitCode.PROTECT_FAILED))
    assert "the lock did not take" in out.stderr and "do not ship this board" in out.stderr
    u = ("-u", "sim:nb", "-t", "nrf52840")
    status = cli.json("protect", "status", *u)["status"]
    assert (status["state"], status["configured"]) == ("open", True)     # written, not in effect
    store.clear_faults("nb")                  # a healthy part takes UICR.APPROTECT at power-on
    assert cli.json("protect", "status", *u)["status"]["state"] == "locked"
    cli("protect", "recover", *u, "--yes", check=0)
    ok = cli.json("flash", "-p", "numbered", "-u", "sim:nb", "--serial", "8")
    assert ok["protection"] == "locked"
    assert cli.json("protect", "status", "-u", "sim:nb", "-t", "nrf52840")["status"]["state"] == "locked"


@pytest.mark.parametrize("target", ["nrf52840", "stm32f103rc"])
def test_recover_that_times_out_fails_and_keeps_the_chip_locked(target, store, cli):
    store.create("b", target)
    u = ("-u", "sim:b", "-t", target)
    cli("protect", "lock", *u, check=0)
    store.set_faults("b", recover_stuck=True)
    out = cli("protect", "recover", *u, "--yes", "--timeout", "0.3", check=int(ExitCode.PROTECT_FAILED))
    assert "did not finish within 0.3 s" in out.stderr
    # the hint names the protection and how to read it back (issue 19 item 18)
    assert "read-out protection setting may or may not have been written" in out.stderr
    assert "'piflash protect status'" in out.stderr
    store.clear_faults("b")
    assert cli.json("protect", "status", *u)["status"]["state"] == "locked"


@pytest.mark.parametrize("template, message", [
    ("'{n:{x}}'", "unknown field {x} in a format spec"),
    ("'{n[0]}'", "unknown field {n[0]}"),
    ("'{}'", "unknown field {}"),
    ("'{n!z}'", "not a valid template: Unknown conversion specifier z"),
    ("'{n:q}'", "not a valid template: Unknown format code 'q'"),
])
def test_templates_take_only_their_three_fields(tmp_path, template, message):
    path = _profile(tmp_path, f"serial:\n  address: 0x1000\n  encoding: ascii\n  length: 8\n  template: {template}\n")
    with pytest.raises(ProfileError) as info:
        load_profile(path)
    assert info.value.key == "serial.template" and message in info.value.message
    assert "KeyError" not in info.value.message and "Traceback" not in info.value.message
