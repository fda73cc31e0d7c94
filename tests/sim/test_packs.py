"""CMSIS-pack targets end to end: a pack built in the test (tests/firmware/pack: our .pdsc and
our FLM for the nRF52840 NVMC), given with ``-O pack=FILE`` or a profile's ``pack``, flashed onto
a simulated nRF52840 by the real pyOCD stack, which loads the FLM into the simulated RAM and runs
it on the emulated core as it runs a builtin algorithm."""

from __future__ import annotations

import subprocess
import zipfile
from pathlib import Path

import pytest
from conftest import REPO, expected_flash

pytest.importorskip("unicorn")

PACK_SRC = REPO / "tests" / "firmware" / "pack"
PDSC = PACK_SRC / "piflash.PIFLASH_TEST_DFP.pdsc"
#: As the .pdsc names it, and as pyOCD normalises it.
PART = "PIFLASH-NRF52840-PACK"
TARGET = "piflash_nrf52840_pack"
FLASH_SIZE = 0x100000
MIB = 1024 * 1024


@pytest.fixture(scope="session")
def flm(firmware_dir):
    """The test pack's flash algorithm, built by tests/firmware/Makefile."""
    path = firmware_dir / "pack" / "piflash_nrf52840.FLM"
    if not path.exists():  # a build tree from before the pack sources existed
        subprocess.run(["make", "-s", "-C", str(REPO / "tests" / "firmware")], check=True)
    return path


def build_pack(dest: Path, flm: Path, pdsc: bytes = None, with_flm: bool = True) -> Path:
    """Zip a .pdsc (default: the test pack's) and the FLM into ``dest``, as a vendor's .pack is."""
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("piflash.PIFLASH_TEST_DFP.pdsc", PDSC.read_bytes() if pdsc is None else pdsc)
        if with_flm:
            z.write(flm, "Flash/piflash_nrf52840.FLM")
    return dest


@pytest.fixture
def pack(tmp_path, flm):
    return build_pack(tmp_path / "piflash.PIFLASH_TEST_DFP.1.0.0.pack", flm)


@pytest.fixture
def firmware(firmware_dir):
    return firmware_dir / "nrf52840" / "firmware.hex"


def dump(cli, board, tmp_path) -> bytes:
    out = tmp_path / f"{board}.bin"
    cli("sim", "dump", board, "--out", out, check=0)
    return out.read_bytes()


# --- the flash algorithm and the pack, as pyOCD reads them -----------------------------------

def test_pyocd_loads_our_flm(flm):
    from pyocd.core.memory_map import RamRegion
    from pyocd.target.pack.flash_algo import PackFlashAlgo

    algo = PackFlashAlgo(str(flm))
    info = algo.flash_info
    assert (info.start, info.size, info.page_size, info.value_empty) == (0, FLASH_SIZE, 0x1000, 0xFF)
    assert info.sector_info_list == [(0, 0x1000)] and info.version == 0x0101
    assert set(algo.symbols) == {"Init", "UnInit", "EraseSector", "ProgramPage", "EraseChip"}
    assert algo.ro_start == 0 and algo.ro_size > 0
    blob = algo.get_pyocd_flash_algo(0x1000, RamRegion(start=0x20000000, length=0x4000))
    assert 0x20000000 <= blob["load_address"] < blob["pc_init"] < 0x20004000
    assert len(blob["page_buffers"]) == 2  # room for double buffering in 16 KiB


def test_resolve_target_from_the_pack(pack):
    from piflash.errors import ExitCode, PackError
    from piflash.targets.catalog import UnknownTargetError, check_target, resolve_target

    found = resolve_target(PART, str(pack))
    assert (found.name, found.part_number, found.pack) == (TARGET, PART, str(pack))
    assert found.flash_regions == [(0, FLASH_SIZE, "IROM1")]  # no UICR, unlike builtin nrf52840
    assert check_target("piflash-nrf52840-pack", [pack]) == TARGET
    # A builtin name wins, as in pyOCD, and its regions are the builtin class's.
    assert resolve_target("nrf52840", str(pack)).flash_regions == [(0, FLASH_SIZE, "flash"),
                                                                   (0x10001000, 0x10001400, "flash_1")]
    with pytest.raises(UnknownTargetError) as typo:
        check_target("PIFLASH-NRF52840-PAK", str(pack))
    assert typo.value.exit_code == ExitCode.USAGE and TARGET in typo.value.hint
    with pytest.raises(UnknownTargetError) as far:
        check_target("completely-else", str(pack))
    assert far.value.hint == f"the pack(s) given describe {TARGET}"
    with pytest.raises(UnknownTargetError) as nopack:
        check_target(PART)
    assert "-O pack=FILE.pack" in nopack.value.hint
    with pytest.raises(PackError) as missing:
        check_target("nrf52840", str(pack) + ".gone")  # checked even for a builtin name
    assert missing.value.exit_code == ExitCode.USAGE and "No such file" in missing.value.message


def test_parts_of_installed_packs_are_known(pack, monkeypatch):
    """A part from a pack installed with 'pyocd pack install' needs no -O pack= (pyOCD looks in
    them too). cmsis-pack-manager is not installed here, so its list is stood in for by our pack."""
    from pyocd.target.pack.cmsis_pack import CmsisPack
    from pyocd.target.pack.pack_target import ManagedPacks

    from piflash.targets.catalog import UnknownTargetError, resolve_target

    with pytest.raises(UnknownTargetError):
        resolve_target(PART)
    monkeypatch.setattr(ManagedPacks, "get_installed_targets",
                        staticmethod(lambda cache=None: CmsisPack(str(pack)).devices))
    found = resolve_target(PART)
    assert (found.name, found.pack, found.flash_regions) == (TARGET, str(pack), [(0, FLASH_SIZE, "IROM1")])


def test_targets_lists_the_packs_parts(cli, pack):
    rows = cli.json("targets", "nrf52840", "--pack", pack, check=0)["targets"]
    assert rows[-1] == {"name": TARGET, "vendor": "Generic", "flash_bytes": FLASH_SIZE, "pack": str(pack)}
    assert {"name": "nrf52840", "pack": None}.items() <= rows[0].items()
    assert f"{TARGET:<24} Generic                  1,024 KiB flash  (pack {pack})" in \
        cli("targets", "pack", "--pack", pack, check=0).stdout
    assert "cannot read CMSIS pack" in cli("targets", "--pack", f"{pack}.gone", check=2).stderr


def test_unpacked_pack_directory(tmp_path, flm):
    from piflash.targets.catalog import resolve_target

    unpacked = tmp_path / "unpacked"
    (unpacked / "Flash").mkdir(parents=True)
    (unpacked / PDSC.name).write_bytes(PDSC.read_bytes())
    (unpacked / "Flash" / "piflash_nrf52840.FLM").write_bytes(flm.read_bytes())
    assert resolve_target(PART, str(unpacked)).flash_regions == [(0, FLASH_SIZE, "IROM1")]


# --- through the CLI, onto a simulated board ------------------------------------------------

def test_flash_erase_through_pack_target(cli, pack, firmware, tmp_path):
    cli("sim", "create", "bay", "--target", "nrf52840", check=0)
    result = cli.json("flash", firmware, "-t", PART, "-O", f"pack={pack}", "-u", "sim:bay")
    assert result["ok"] and result["target"] == TARGET
    assert result["verify"]["mismatched_bytes"] == 0 and result["verify"]["verified_bytes"] == 12748
    assert result["program"]["programmed_pages"] == 4 and result["reset"] is True
    assert dump(cli, "bay", tmp_path) == expected_flash(firmware, FLASH_SIZE)
    cli("verify", firmware, "-t", PART, "-O", f"pack={pack}", "-u", "sim:bay", check=0)
    info = cli.json("info", "-t", PART, "-O", f"pack={pack}", "-u", "sim:bay")
    assert info["target"] == TARGET
    assert [(r["name"], r["type"], r["start"], r["size"], r.get("sector_size")) for r in info["regions"]] == \
        [("IROM1", "flash", 0, FLASH_SIZE, 0x1000), ("IRAM1", "ram", 0x20000000, 0x40000, None)]
    # EraseSector on page 1 only, then EraseChip.
    cli("erase", "--sector", "0x1000+1", "-t", PART, "-O", f"pack={pack}", "-u", "sim:bay", check=0)
    after = dump(cli, "bay", tmp_path)
    image = expected_flash(firmware, FLASH_SIZE)
    assert after[0x1000:0x2000] == b"\xff" * 0x1000
    assert after[:0x1000] == image[:0x1000] and after[0x2000:] == image[0x2000:]
    erased = cli.json("erase", "--chip", "--yes", "-t", PART, "-O", f"pack={pack}", "-u", "sim:bay")
    assert erased["program"]["erased_bytes"] == FLASH_SIZE
    assert dump(cli, "bay", tmp_path) == b"\xff" * FLASH_SIZE


def test_pyocd_runs_the_packs_algorithm(pack, firmware, sim_dir):
    """The session's flash region carries the FLM's algorithm (loaded into the simulated RAM),
    not pyOCD's builtin nRF52840 one."""
    from pyocd.target.pack.flash_algo import PackFlashAlgo

    from piflash.sim import SimStore
    from piflash.targets.connect import open_session

    SimStore().create("api", "nrf52840")
    with open_session("sim:api", PART, options={"pack": str(pack)}) as session:
        region = session.target.memory_map.get_boot_memory()
        assert isinstance(region.flm, PackFlashAlgo) and region.flm.flash_info.name.startswith(b"piflash")
        assert region.algo["load_address"] >= 0x20000000 and region.algo["pc_eraseAll"] != 0xFFFFFFFF
        assert session.target.part_number == PART


def test_misplaced_image_is_refused_by_the_packs_memory_map(cli, pack, tmp_path):
    """16 bytes for the UICR: builtin nrf52840 has a flash region there, the pack's part has none.
    The check runs before any probe is opened: the board 'sim:late' (which the simulator would
    create on first use) is never created."""
    uicr = tmp_path / "uicr.bin"
    uicr.write_bytes(bytes(range(16)))
    proc = cli("flash", uicr, "-a", "0x10001000", "-t", PART, "-O", f"pack={pack}", "-u", "sim:late",
               check=4)
    assert f"outside the flash of {TARGET} (flash: IROM1 0x00000000-0x000fffff)" in proc.stderr
    assert "sim:late" not in cli("sim", "list", check=0).stdout
    cli("flash", uicr, "-a", "0x10001000", "-t", "nrf52840", "-O", f"pack={pack}", "-u", "sim:late",
        check=0)  # the builtin part's map has the UICR


def test_unknown_part_and_broken_packs(cli, pack, firmware, tmp_path, flm):
    proc = cli("flash", firmware, "-t", "PIFLASH-NRF52840-PAK", "-O", f"pack={pack}", "-u", "sim:x", check=2)
    assert "unknown target type 'PIFLASH-NRF52840-PAK'" in proc.stderr
    assert f"hint: did you mean {TARGET}?" in proc.stderr
    proc = cli("flash", firmware, "-t", PART, "-u", "sim:x", check=2)
    assert "-O pack=FILE.pack" in proc.stderr
    proc = cli("flash", firmware, "-t", PART, "-O", f"pack={firmware}", "-u", "sim:x", check=2)
    assert "neither a zip file (.pack) nor an unpacked pack directory" in proc.stderr
    no_flm = build_pack(tmp_path / "no-flm.pack", flm, with_flm=False)
    proc = cli("flash", firmware, "-t", PART, "-O", f"pack={no_flm}", "-u", "sim:x", check=2)
    assert f"lacks a file that part {PART} needs" in proc.stderr and "Flash/piflash_nrf52840.FLM" in proc.stderr
    bad_xml = build_pack(tmp_path / "bad.pack", flm, pdsc=PDSC.read_bytes()[:-40])
    proc = cli("flash", firmware, "-t", PART, "-O", f"pack={bad_xml}", "-u", "sim:x", check=2)
    assert "its .pdsc is not well-formed XML" in proc.stderr
    for command in (["flash", firmware], ["info"]):  # -O makes 5 an int: the option check says so
        proc = cli(*command, "-t", "nrf52840", "-O", "pack=5", "-u", "sim:x", check=2)
        assert "error: pyOCD option 'pack' takes str or list, not 5" in proc.stderr
        assert "Traceback" not in proc.stderr


# --- profiles --------------------------------------------------------------------------------

def test_profile_pack_key(cli, pack, firmware, tmp_path):
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "packed.yaml").write_text(
        f"target: {PART}\nprobe: sim:bay\nfirmware: {firmware}\npack: ../{pack.name}\n")
    cli("sim", "create", "bay", "--target", "nrf52840", check=0)
    result = cli.json("flash", "--profile", "packed")
    assert result["ok"] and result["target"] == TARGET
    assert dump(cli, "bay", tmp_path) == expected_flash(firmware, FLASH_SIZE)
    assert "packed.yaml: OK" in cli("profile", "check", "packed", check=0).stdout
    shown = cli.json("profile", "show", "packed", check=0)
    assert shown["pack"] == [str(pack)]
    # A list of packs works too; a missing one is reported at the 'pack' line.
    (profiles / "two.yaml").write_text(
        f"target: {PART}\nfirmware: {firmware}\npack:\n  - ../{pack.name}\n  - gone.pack\n")
    proc = cli("flash", "--profile", "two", check=5)
    assert f"two.yaml:3: key 'pack': cannot read CMSIS pack '{profiles / 'gone.pack'}'" in proc.stderr
    (profiles / "typo.yaml").write_text(f"firmware: {firmware}\npack: ../{pack.name}\ntarget: PIFLASH-NRF52840\n")
    proc = cli("flash", "--profile", "typo", check=5)
    assert "typo.yaml:3: key 'target': unknown target type" in proc.stderr and TARGET in proc.stderr
    (profiles / "bad.yaml").write_text(f"target: {PART}\nfirmware: {firmware}\npack: 5\n")
    proc = cli("profile", "check", "bad", check=5)
    assert "bad.yaml:3: key 'pack': expected the path of a CMSIS pack, or a list of paths" in proc.stderr


def test_station_flashes_a_pack_target(tmp_path, pack, firmware, sim_dir, cli):
    from support.stationkit import (
        StationProcess,
        rows,
        wait_rows,
        write_config,
        write_profile,
    )

    from piflash.sim import SimStore

    SimStore().create("bay", "nrf52840")
    history = tmp_path / "station.sqlite3"
    profile = write_profile(tmp_path, firmware, target=PART, pack=str(pack))
    station = StationProcess(write_config(tmp_path, profile, ["sim:bay"], history), tmp_path / "station.log")
    try:
        got = wait_rows(history, 1, station)
        assert [(r["target"], r["outcome"]) for r in got] == [(TARGET, "pass")]
        assert station.stop() == 0 and len(rows(history)) == 1
    finally:
        station.kill()
    assert dump(cli, "bay", tmp_path) == expected_flash(firmware, FLASH_SIZE)


# --- the memory guard counts the pack --------------------------------------------------------

def test_memory_guard_counts_the_pack(cli, pack, firmware, tmp_path, monkeypatch):
    """Memory enough for the flash without a pack but not with one: -O pack= and a profile's pack
    are both refused (exit 14, nothing flashed); --force goes through."""
    from piflash.host.memguard import BASELINE, IMAGE_SLOPE, MARGIN, PACK_FIXED

    need = BASELINE["flash"] + int(IMAGE_SLOPE["hex"] * firmware.stat().st_size)
    available = need + MARGIN + PACK_FIXED // 2  # fits without the pack's share, not with it
    root = tmp_path / "root"
    (root / "proc").mkdir(parents=True)
    (root / "proc" / "meminfo").write_text(
        f"MemTotal: 437228 kB\nMemFree: {available // 2048} kB\nMemAvailable: {available // 1024} kB\n"
        "SwapTotal: 0 kB\nSwapFree: 0 kB\n")
    monkeypatch.setenv("PIFLASH_PROC_ROOT", str(root))
    cli("sim", "create", "bay", "--target", "nrf52840", check=0)
    proc = cli("flash", firmware, "-t", PART, "-O", f"pack={pack}", "-u", "sim:bay", check=14)
    assert "+ pack 8 MiB" in proc.stderr and "or no pack" in proc.stderr
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "packed.yaml").write_text(
        f"target: {PART}\nprobe: sim:bay\nfirmware: {firmware}\npack: {pack}\n")
    assert "+ pack 8 MiB" in cli("flash", "--profile", "packed", check=14).stderr
    assert dump(cli, "bay", tmp_path) == b"\xff" * FLASH_SIZE
    cli("flash", firmware, "-t", "nrf52840", "-u", "sim:bay", "--no-verify", check=0)  # no pack: fits
    proc = cli("flash", "--profile", "packed", "--force", check=0)
    assert "going on anyway (--force)" in proc.stderr
