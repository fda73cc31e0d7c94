"""Per-unit values from a CSV list (issue 39 item 2): the list's checks, the rows handed out once
from the station's own database, given back before programming, never after; the secret
column recorded only as its SHA-256; a used-up list refused before any board is touched."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

import pytest

from piflash.errors import ListUsedUpError, ProfileError, SerialError
from piflash.firmware.patch import PatchEntry
from piflash.production.unitlist import LocalRowSource, RowAllocator, read_list

MAC = PatchEntry("mac", 0x10001080, "hex", 6, "{value}", list="x", column="mac")
KEY = PatchEntry("key", 0xFF100, "hex", 16, "{value}", list="x", column="key", secret=True)
SECRET_KEY = "00112233445566778899aabbccddeeff"


def _csv(tmp_path: Path, rows: int, name: str = "macs.csv", extra: str = "") -> Path:
    path = tmp_path / name
    lines = ["mac,key,label"] + [
        f"00:1B:2C:3D:{i // 256:02X}:{i % 256:02X},{i:032x},SN-{i:04d}" for i in range(1, rows + 1)
    ]
    path.write_text("\n".join(lines) + "\n" + extra)
    return path


def _list(tmp_path: Path, rows: int = 5, **kw):
    return read_list(_csv(tmp_path, rows, **kw), {"mac": MAC, "key": KEY})


# -- the list's checks ------------------------------------------------------------------------
def test_a_good_list_is_read_with_its_rows_lines_and_sha256(tmp_path):
    path = _csv(tmp_path, 3)
    ulist = read_list(path, {"mac": MAC, "key": KEY})
    assert len(ulist) == 3 and ulist.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert ulist.values(2) == {"mac": "00:1B:2C:3D:00:02", "key": f"{2:032x}"}
    assert ulist.source(3) == {"list": "macs.csv", "list_sha256": ulist.sha256, "row": 3, "line": 4}


@pytest.mark.parametrize("text, line, words", [
    ("mac,key\n00:1B:2C:3D:4E:5F\n", 2, "1 fields, the header has 2"),
    ("mac,key\n00:1B:2C:3D:4E:5F,%s\n00:1B:2C:3D:4E:60,\n" % SECRET_KEY, 3, "column 'key' is empty"),
    ("mac,key\n00:1B:2C:3D:4E,%s\n" % SECRET_KEY, 2, "column 'mac': patch 'mac': '00:1B:2C:3D:4E' is 5 bytes"),
    ("mac,key\n00:1B:2C:3D:4E:ZZ,%s\n" % SECRET_KEY, 2, "is not hex digits"),
    ("mac,cert\n00:1B:2C:3D:4E:5F,1\n", 1, "no column 'key' (the list has mac, cert)"),
    ("mac,mac\n", 1, "must name every column once"),
    ("", None, "the list is empty"),
    ("mac,key\n", None, "a header but no rows"),
    ('mac,key\n"00:1B:2C:3D:4E:5F,%s\n' % SECRET_KEY, 2, "not a CSV list"),
])
def test_a_malformed_list_is_a_profile_error_naming_its_line(tmp_path, text, line, words):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(ProfileError) as info:
        read_list(path, {"mac": MAC, "key": KEY})
    assert info.value.exit_code == 5 and info.value.line == line, info.value.message
    assert words in info.value.message and str(path) in info.value.message


def test_a_duplicate_value_names_both_lines_but_never_a_secret(tmp_path):
    path = tmp_path / "dup.csv"
    path.write_text(f"mac,key\n00:00:00:00:00:01,{SECRET_KEY}\n00:00:00:00:00:02,{'1' * 32}\n"
                    f"00:00:00:00:00:03,{SECRET_KEY}\n00:00:00:00:00:01,{'2' * 32}\n")
    with pytest.raises(ProfileError) as info:
        read_list(path, {"mac": MAC, "key": KEY})
    assert info.value.line == 4 and "column 'key': its value is on line 2 too" in info.value.message
    assert SECRET_KEY not in info.value.message + (info.value.hint or "")
    path.write_text(path.read_text().replace(f"00:00:00:00:00:03,{SECRET_KEY}", f"00:00:00:00:00:03,{'3' * 32}"))
    with pytest.raises(ProfileError) as info:
        read_list(path, {"mac": MAC, "key": KEY})
    assert info.value.line == 5 and "'00:00:00:00:00:01' is on line 2 too" in info.value.message


def test_a_list_is_bounded_and_must_be_utf8(tmp_path, monkeypatch):
    import piflash.production.unitlist as unitlist

    path = _csv(tmp_path, 20)
    monkeypatch.setattr(unitlist, "LIST_MAX_BYTES", path.stat().st_size - 1)
    with pytest.raises(ProfileError, match="larger than"):
        read_list(path, {"mac": MAC})
    monkeypatch.setattr(unitlist, "LIST_MAX_BYTES", 1 << 20)
    monkeypatch.setattr(unitlist, "LIST_MAX_ROWS", 10)
    with pytest.raises(ProfileError, match="more than 10 rows") as info:
        read_list(path, {"mac": MAC})
    assert info.value.line == 12
    path.write_bytes(b"mac\n00:1B:2C:3D:4E:5F\n\xff\xfe\n")
    with pytest.raises(ProfileError, match="not UTF-8") as info:
        read_list(path, {"mac": MAC})
    assert info.value.line == 3
    with pytest.raises(ProfileError, match="not a regular file"):
        read_list(tmp_path, {"mac": MAC})


# -- the profile --------------------------------------------------------------------------------
def _profile(tmp_path: Path, firmware_dir: Path, body: str) -> Path:
    path = tmp_path / "profiles" / "listed.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(f"target: nrf52840\nfirmware: {firmware_dir / 'nrf52840' / 'firmware.hex'}\n" + body)
    return path


LISTED = """serial:
  address: 0x000FF000
  encoding: ascii
  length: 16
  list: ../macs.csv
  column: label
patch:
  - name: mac
    uicr_customer: 0
    encoding: hex
    length: 6
    list: ../macs.csv
  - name: key
    address: 0x000FF100
    encoding: hex
    length: 16
    list: ../macs.csv
    secret: true
"""


def test_a_profile_takes_serial_and_patches_from_one_list(tmp_path, firmware_dir):
    from piflash.profiles import load_profile, profile_to_dict

    _csv(tmp_path, 4)
    prof = load_profile(_profile(tmp_path, firmware_dir, LISTED))
    plan = prof.patch_plan
    assert plan.counter is None and plan.serial_from_list and not plan.uses_serial
    assert plan.list_path == str(tmp_path / "macs.csv") and set(plan.list_columns) == {"label", "mac", "key"}
    assert len(prof.unit_list) == 4
    assert profile_to_dict(prof)["unit_list"]["rows"] == 4
    bound = plan.with_row(prof.unit_list.values(2), prof.unit_list.source(2))
    _, values = bound.apply(prof.load_image(), None, "ab" * 8)
    assert values["serial"]["value"] == "SN-0002" and values["mac"]["bytes"] == "001b2c3d0002"
    assert values["key"] == {
        "address": "0x000ff100",
        "value": "sha256:" + hashlib.sha256(f"{2:032x}".encode()).hexdigest(),
        "bytes": "sha256:" + hashlib.sha256(bytes.fromhex(f"{2:032x}")).hexdigest(),
        "secret": True, "list": "macs.csv", "list_sha256": prof.unit_list.sha256, "row": 2, "line": 3,
    }


@pytest.mark.parametrize("change, key, words", [
    (("    secret: true\n", "    secret: yes please\n"), "patch[1].secret", "expected true or false"),
    (("  column: label\n", "  column: label\n  secret: true\n"), "serial.secret", "cannot be secret"),
    (("  list: ../macs.csv\n  column: label\n", "  column: label\n"), "serial.column", "goes with list:"),
    (("    list: ../macs.csv\n    secret", "    list: ../other.csv\n    secret"), "patch", "one CSV file"),
    (("  - name: key\n", "  - name: key\n    template: 'k'\n"), "patch[1].template", "leaves it out"),
    (("    uicr_customer: 0\n", "    uicr_customer: 0\n    template: '{value}{n}'\n"), "patch", "{n}"),
])
def test_list_keys_are_checked(tmp_path, firmware_dir, change, key, words):
    from piflash.profiles import load_profile

    _csv(tmp_path, 2)
    _csv(tmp_path, 2, name="other.csv")
    with pytest.raises(ProfileError) as info:
        load_profile(_profile(tmp_path, firmware_dir, LISTED.replace(*change)))
    assert info.value.key == key and words in info.value.message, info.value.message


def test_a_profile_with_a_malformed_list_names_the_list_line(tmp_path, firmware_dir):
    from piflash.profiles import load_profile

    _csv(tmp_path, 3, extra="00:1B:2C:3D:00:09,zz,SN-9\n")
    with pytest.raises(ProfileError) as info:
        load_profile(_profile(tmp_path, firmware_dir, LISTED))
    assert info.value.path == str(tmp_path / "macs.csv") and info.value.line == 5
    assert "column 'key'" in info.value.message and "zz" not in info.value.message


# -- rows handed out once (local database) ------------------------------------------------------
def test_each_row_once_across_holders_and_a_failed_board_before_programming_gives_it_back(tmp_path):
    ulist = _list(tmp_path, 6)
    db = tmp_path / "unitlists.sqlite3"
    a, b = RowAllocator(ulist, "st-a", db, block=2), RowAllocator(ulist, "st-b", db, block=2)
    r1 = a.take("b1")
    r2 = b.take("b2")
    assert (r1.row, r2.row) == (1, 3)                   # blocks of 2: a holds 1-2, b holds 3-4
    assert a.finish(r1.row, False, "b1") == "leased"    # failed before programming: given back
    again = a.take("b3")
    assert again.row == 1 and again.values == ulist.values(1)
    a.programming(again.row)
    assert a.finish(again.row, False, "b3") == "fail"   # failed after programming started: used for good
    rows = [a.take(f"b{i}") for i in range(4, 7)]
    assert [r.row for r in rows] == [2, 5, 6]
    for r in rows:
        a.programming(r.row)
        a.finish(r.row, True)
    with pytest.raises(ListUsedUpError) as info:
        a.take("b7")                                    # 4 is b's; nothing else is left
    assert info.value.exit_code == 22 and "the list macs.csv is used up" in info.value.message
    assert b.release() == 1                             # 4 was never taken: it goes back ...
    b.programming(r2.row)
    b.finish(r2.row, True, "b2")                        # ... once b's lease is settled
    assert a.take("b8").row == 4
    states = {r["row"]: r["state"] for r in a.rows()}
    assert states == {1: "fail", 2: "pass", 3: "pass", 4: "taken", 5: "pass", 6: "pass"}


def test_a_crash_gives_untouched_rows_back_and_keeps_programmed_ones(tmp_path):
    ulist = _list(tmp_path, 8)
    db = tmp_path / "unitlists.sqlite3"
    a = RowAllocator(ulist, "st", db, block=4)
    taken, programmed = a.take("b1"), a.take("b2")
    a.programming(programmed.row)                       # then the process dies (never finished)
    a._db.close()
    again = RowAllocator(ulist, "st", db, block=4)
    assert again.recovered == {"back": 3, "interrupted": 1}   # rows 1, 3, 4 back; 2 interrupted
    got = [again.take(f"c{i}").row for i in range(7)]
    assert programmed.row not in got and taken.row in got
    assert sorted(got) == [1, 3, 4, 5, 6, 7, 8]
    assert {r["row"]: r["state"] for r in again.rows()}[programmed.row] == "interrupted"


def test_a_lease_granted_but_never_recorded_is_given_back_at_the_next_start(tmp_path):
    ulist = _list(tmp_path, 4)
    db = tmp_path / "unitlists.sqlite3"
    a = RowAllocator(ulist, "st", db, block=3)
    lost = a.source.lease(ulist, "st", a.owner, 3)     # as if the process died right after the grant
    assert lost.rows == (1, 2, 3)
    other = RowAllocator(ulist, "other", db, block=3)
    assert other.take().row == 4                        # the orphan's rows are not free yet ...
    a._db.close()
    again = RowAllocator(ulist, "st", db, block=3)
    assert again.recovered["back"] == 3                 # ... until its holder starts again
    assert [again.take().row for _ in range(3)] == [1, 2, 3]


def test_an_edited_list_is_refused_once_rows_of_it_were_used(tmp_path):
    path = _csv(tmp_path, 3)
    db = tmp_path / "unitlists.sqlite3"
    a = RowAllocator(read_list(path, {"mac": MAC}), "st", db)
    a.take()
    path.write_text(path.read_text() + "00:1B:2C:3D:00:09,9,SN-9\n")
    with pytest.raises(ProfileError, match="the list macs.csv changed") as info:
        RowAllocator(read_list(path, {"mac": MAC}), "st", db)
    assert "new file with a new name" in info.value.hint


def test_an_unwritable_database_is_a_serial_error(tmp_path):
    (tmp_path / "ro").mkdir()
    (tmp_path / "ro" / "unitlists.sqlite3").mkdir()    # a folder where the file should be
    with pytest.raises(SerialError, match="cannot open the list rows database"):
        RowAllocator(_list(tmp_path, 2), "st", tmp_path / "ro" / "unitlists.sqlite3")


def test_local_source_counts_what_is_left(tmp_path):
    ulist = _list(tmp_path, 5)
    a = RowAllocator(ulist, "st", tmp_path / "u.sqlite3", block=2)
    assert a.remaining() == 5
    a.take()
    assert a.remaining() == 4 and isinstance(a.source, LocalRowSource)


# -- the one-off flash ---------------------------------------------------------------------------
def test_one_off_flashes_take_rows_in_turn_record_secrets_as_hashes_and_stop_when_used_up(
        tmp_path, firmware_dir, cli):
    from piflash.sim import SimStore

    _csv(tmp_path, 2)
    _profile(tmp_path, firmware_dir, LISTED)
    store = SimStore()
    store.create("b1", "nrf52840")
    first = cli.json("flash", "-p", "listed", "-u", "sim:b1")
    assert first["serial"] == "SN-0001" and first["patch"]["mac"]["bytes"] == "001b2c3d0001"
    # A board that fails before programming (its connect fails) gives its row back.
    cli("sim", "fault", "b1", "--absent", check=0)
    cli("flash", "-p", "listed", "-u", "sim:b1", "-q", check=10)
    cli("sim", "fault", "b1", "--clear", check=0)
    second = cli.json("flash", "-p", "listed", "-u", "sim:b1")
    assert second["serial"] == "SN-0002"
    flash = store.read_flash("b1")
    assert flash[0xFF100:0xFF110] == bytes.fromhex(f"{2:032x}")          # the key is on the board ...
    assert store.read_nvm("b1", "uicr")[0x80:0x86] == bytes.fromhex("001b2c3d0002")
    history = sqlite3.connect(tmp_path / "history.sqlite3")
    patches = [json.loads(p) for (p,) in history.execute("SELECT patch FROM operations WHERE patch IS NOT NULL")]
    text = history.execute("SELECT group_concat(coalesce(patch, '') || coalesce(error, ''), ' ') "
                           "FROM operations").fetchone()[0]
    assert f"{2:032x}" not in text and f"{1:032x}" not in text           # ... never in the history
    assert [p["key"]["row"] for p in patches] == [1, 2]
    assert patches[1]["key"]["value"] == "sha256:" + hashlib.sha256(f"{2:032x}".encode()).hexdigest()
    out = cli("flash", "-p", "listed", "-u", "sim:b1", check=22)
    assert "the list macs.csv is used up: all its 2 rows are used" in out.stderr
    assert history.execute("SELECT count(*) FROM operations").fetchone()[0] == 3   # the last touched no board


def test_a_dead_one_offs_row_goes_back_and_a_live_ones_stays(tmp_path):
    from piflash.production.unitlist import one_off_holder, recover_one_offs

    ulist = _list(tmp_path, 4)
    db = tmp_path / "unitlists.sqlite3"
    live = RowAllocator(ulist, one_off_holder(), db, block=1)       # this process: alive
    mine = live.take("b1")
    dead = RowAllocator(ulist, "cli/999999999/no-such-boot/1", db, block=1)
    lost = dead.take("b2")                                          # then its process died
    dead._db.close()
    assert recover_one_offs(ulist, db) == 1
    states = {r["row"]: r["state"] for r in live.rows()}
    assert states == {mine.row: "taken"}                           # the live one-off's row stays taken
    assert RowAllocator(ulist, "cli/other", db, block=1).take().row == lost.row   # the dead one's is free
