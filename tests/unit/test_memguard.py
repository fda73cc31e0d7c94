"""Board facts and the memory guard: fake /proc trees for a Pi Zero 2W, a Pi 4 and a PC, and the
guard through the real CLI against simulated boards (PIFLASH_PROC_ROOT points at a fake tree)."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from conftest import expected_flash

from piflash.errors import ExitCode, MemoryGuardError
from piflash.host import memguard
from piflash.host.machine import MachineFacts, parse_meminfo, read_machine
from piflash.host.memguard import (
    BASELINE,
    IMAGE_SLOPE,
    MARGIN,
    MIB,
    GuardConfigError,
    assess_memory,
    check_memory,
    pack_description_bytes,
)
from piflash.profiles import check_job

KIB = 1024

#: /proc/meminfo of a Pi Zero 2W on 64-bit Raspberry Pi OS bookworm (Lite), a few minutes after
#: boot: 512 MB less the GPU's share leaves MemTotal about 427 MiB; dphys-swapfile's default
#: 100 MB of swap.
ZERO2W_MEMINFO = """\
MemTotal:         437228 kB
MemFree:          212604 kB
MemAvailable:     338512 kB
Buffers:           17448 kB
Cached:           128164 kB
SwapCached:            0 kB
Active:            74636 kB
Inactive:         104736 kB
Active(anon):        980 kB
Inactive(anon):    44512 kB
Active(file):      73656 kB
Inactive(file):    60224 kB
Unevictable:           0 kB
Mlocked:               0 kB
SwapTotal:        102396 kB
SwapFree:         102396 kB
Dirty:                20 kB
Writeback:             0 kB
AnonPages:         33800 kB
Mapped:            48616 kB
Shmem:              6244 kB
KReclaimable:      12912 kB
Slab:              29052 kB
SReclaimable:      12912 kB
SUnreclaim:        16140 kB
KernelStack:        1808 kB
PageTables:         1536 kB
CommitLimit:      321008 kB
Committed_AS:     261000 kB
VmallocTotal:   135288315904 kB
VmallocUsed:        8696 kB
CmaTotal:          65536 kB
CmaFree:           58988 kB
HugePages_Total:       0
Hugepagesize:       2048 kB
"""

#: A Pi 4 Model B with 4 GB.
PI4_MEMINFO = """\
MemTotal:        3885092 kB
MemFree:         3052140 kB
MemAvailable:    3430504 kB
Buffers:           38220 kB
Cached:           412396 kB
SwapTotal:        102396 kB
SwapFree:         102396 kB
"""

#: A PC: 16 GiB, 2 GiB swap, no device tree.
PC_MEMINFO = """\
MemTotal:       16307176 kB
MemFree:         9021344 kB
MemAvailable:   12806472 kB
Buffers:          402344 kB
Cached:          3411556 kB
SwapTotal:       2097148 kB
SwapFree:        2097148 kB
"""


def fake_root(base: Path, meminfo: str, model: str | None = None, sysfs_model: bool = False) -> Path:
    """A directory laid out like / with proc/meminfo and, for a Pi, the device-tree model."""
    (base / "proc").mkdir(parents=True, exist_ok=True)
    (base / "proc" / "meminfo").write_text(meminfo)
    if model is not None:
        rel = "sys/firmware/devicetree/base" if sysfs_model else "proc/device-tree"
        (base / rel).mkdir(parents=True, exist_ok=True)
        (base / rel / "model").write_bytes(model.encode() + b"\0")
    return base


def meminfo(available: int, swap_free: int = 0, total: int = 437228 * KIB) -> str:
    """A Zero 2W-sized meminfo with the given MemAvailable and SwapFree (bytes)."""
    return (f"MemTotal:       {total // KIB} kB\nMemFree:        {available // 2 // KIB} kB\n"
            f"MemAvailable:   {available // KIB} kB\nSwapTotal:      {max(swap_free, 102396 * KIB) // KIB} kB\n"
            f"SwapFree:       {swap_free // KIB} kB\n")


@pytest.fixture
def zero(tmp_path):
    return fake_root(tmp_path / "zero2w", ZERO2W_MEMINFO, "Raspberry Pi Zero 2 W Rev 1.0")


@pytest.fixture
def pi4(tmp_path):
    return fake_root(tmp_path / "pi4", PI4_MEMINFO, "Raspberry Pi 4 Model B Rev 1.4", sysfs_model=True)


@pytest.fixture
def pc(tmp_path):
    return fake_root(tmp_path / "pc", PC_MEMINFO)


@pytest.fixture(autouse=True)
def no_guard_env(monkeypatch):
    monkeypatch.delenv("PIFLASH_MEMORY_GUARD", raising=False)
    monkeypatch.delenv("PIFLASH_PROC_ROOT", raising=False)


# --- board facts -----------------------------------------------------------------------------

def test_zero2w_facts(zero):
    b = read_machine(zero)
    assert b.model == "Raspberry Pi Zero 2 W Rev 1.0"
    assert b.short_model == "Raspberry Pi Zero 2 W" and b.is_raspberry_pi
    assert b.mem_total == 437228 * KIB and 420 * MIB < b.mem_total < 430 * MIB
    assert (b.mem_available, b.swap_total, b.swap_free) == (338512 * KIB, 102396 * KIB, 102396 * KIB)
    assert b.available == b.mem_available and b.cgroup_limit is None
    assert json.loads(json.dumps(b.to_dict()))["short_model"] == "Raspberry Pi Zero 2 W"


def test_pi4_facts_from_sysfs_model(pi4):
    b = read_machine(pi4)
    assert (b.model, b.short_model, b.is_raspberry_pi) == (
        "Raspberry Pi 4 Model B Rev 1.4", "Raspberry Pi 4 Model B", True)
    assert b.mem_total == 3885092 * KIB and b.mem_available == 3430504 * KIB


def test_pc_has_no_model(pc):
    b = read_machine(pc)
    assert b.model is None and not b.is_raspberry_pi and b.short_model == "unknown"
    assert b.mem_total == 16307176 * KIB and b.swap_free == 2097148 * KIB


def test_root_from_environment(zero, monkeypatch):
    monkeypatch.setenv("PIFLASH_PROC_ROOT", str(zero))
    assert read_machine().model == "Raspberry Pi Zero 2 W Rev 1.0"


def test_meminfo_without_memavailable_and_junk():
    mem = parse_meminfo("MemTotal: 1000 kB\nMemFree: 10 kB\nbroken line\nCached: 5 kB\n"
                        "HugePages_Total:       3\n")
    assert mem == {"MemTotal": 1024000, "MemFree": 10240, "Cached": 5120, "HugePages_Total": 3}


def test_old_kernel_estimates_available(tmp_path):
    root = fake_root(tmp_path, "MemTotal: 1000 kB\nMemFree: 100 kB\nBuffers: 20 kB\nCached: 30 kB\n")
    assert read_machine(root).mem_available == 150 * KIB


def test_cgroup_v2_limit_caps_available(zero):
    (zero / "proc" / "self").mkdir()
    (zero / "proc" / "self" / "cgroup").write_text("0::/system.slice/piflash-station.service\n")
    d = zero / "sys" / "fs" / "cgroup" / "system.slice" / "piflash-station.service"
    d.mkdir(parents=True)
    (d / "memory.max").write_text(f"{200 * MIB}\n")
    (d / "memory.current").write_text(f"{150 * MIB}\n")
    b = read_machine(zero)
    assert (b.cgroup_limit, b.cgroup_usage, b.available) == (200 * MIB, 150 * MIB, 50 * MIB)
    (d / "memory.max").write_text("max\n")
    assert read_machine(zero).cgroup_limit is None


def test_cgroup_v1_limit(zero):
    (zero / "proc" / "self").mkdir()
    (zero / "proc" / "self" / "cgroup").write_text("5:devices:/\n4:memory:/capped\n0::/\n")
    d = zero / "sys" / "fs" / "cgroup" / "memory" / "capped"
    d.mkdir(parents=True)
    (d / "memory.limit_in_bytes").write_text(f"{400 * MIB}\n")
    (d / "memory.usage_in_bytes").write_text(f"{100 * MIB}\n")
    assert read_machine(zero).available == 300 * MIB


def v2_cgroup(root: Path, limit: int, current: int, stat: str = "") -> Path:
    (root / "proc" / "self").mkdir(parents=True, exist_ok=True)
    (root / "proc" / "self" / "cgroup").write_text("0::/system.slice/piflash-station.service\n")
    d = root / "sys" / "fs" / "cgroup" / "system.slice" / "piflash-station.service"
    d.mkdir(parents=True, exist_ok=True)
    (d / "memory.max").write_text(f"{limit}\n")
    (d / "memory.current").write_text(f"{current}\n")
    (d / "memory.stat").write_text(stat)
    return d


def test_cgroup_v2_page_cache_is_not_counted_as_used(zero):
    """A station under MemoryMax=200M that just wrote a 120 MiB file: usage 190 MiB of which
    120 MiB is inactive page cache the kernel drops at the limit. 130 MiB are available, not 10."""
    v2_cgroup(zero, 200 * MIB, 190 * MIB,
              f"anon {40 * MIB}\nfile {150 * MIB}\nactive_file {30 * MIB}\ninactive_file {120 * MIB}\n"
              f"inactive_anon {40 * MIB}\n")
    b = read_machine(zero)
    assert (b.cgroup_limit, b.cgroup_usage, b.cgroup_reclaimable) == (200 * MIB, 190 * MIB, 120 * MIB)
    assert b.available == 130 * MIB
    assert assess_memory("flash", 16 * KIB, image_format="bin", root=zero).status == "ok"


def test_cgroup_v1_page_cache_uses_the_hierarchy_total(zero):
    (zero / "proc" / "self").mkdir()
    (zero / "proc" / "self" / "cgroup").write_text("4:memory:/capped\n0::/\n")
    d = zero / "sys" / "fs" / "cgroup" / "memory" / "capped"
    d.mkdir(parents=True)
    (d / "memory.limit_in_bytes").write_text(f"{200 * MIB}\n")
    (d / "memory.usage_in_bytes").write_text(f"{190 * MIB}\n")
    # v1 lists the cgroup's own figure and, with the total_ prefix, its whole subtree's.
    (d / "memory.stat").write_text(f"cache {150 * MIB}\ninactive_file {5 * MIB}\nactive_file {10 * MIB}\n"
                                   f"total_cache {150 * MIB}\ntotal_inactive_file {120 * MIB}\n")
    assert read_machine(zero).available == 130 * MIB
    # Never more reclaimable than used (memory.stat and usage are read at different moments).
    (d / "memory.stat").write_text(f"total_inactive_file {400 * MIB}\n")
    b = read_machine(zero)
    assert b.cgroup_reclaimable == 190 * MIB and b.available == min(b.mem_available, 200 * MIB)
    (d / "memory.stat").unlink()                  # no memory.stat: nothing counted reclaimable
    assert read_machine(zero).available == 10 * MIB


def test_own_memory_is_counted_once(tmp_path):
    """The checking process already holds part of the peak (its resident set): a need that fits
    only when that part is not counted twice is admitted; the same need from another process
    (doctor asking for a future flash) is not."""
    root = fake_root(tmp_path, meminfo(BASELINE["flash"] + MARGIN - 30 * MIB, 0))
    (root / "proc" / "self").mkdir()
    (root / "proc" / "self" / "status").write_text("Name:\tpython3\nVmPeak:\t  99999 kB\n"
                                                   f"VmRSS:\t   {40 * 1024} kB\nRssAnon:\t  30000 kB\n")
    v = check_memory("flash", root=root, warn=lambda s: None)
    assert (v.status, v.held, v.more) == ("ok", 40 * MIB, BASELINE["flash"] - 40 * MIB), v.message
    assert "40 MiB of it already in use by this process" in v.message
    assert assess_memory("flash", root=root).status == "refuse"          # held=0: a new process
    with pytest.raises(MemoryGuardError):
        check_memory("flash", root=root, held=0)


# --- verdicts ---------------------------------------------------------------------------------

def test_verdicts_on_the_three_machines(zero, pi4, pc):
    for root in (zero, pi4, pc):
        v = assess_memory("flash", 256 * KIB, image_format="bin", root=root)
        assert v.status == "ok" and v.need == BASELINE["flash"] + int(IMAGE_SLOPE["bin"] * 256 * KIB)
    # A 1 MiB image as Intel HEX (2.75 MiB of file) does not fit a Zero 2W that is busy.
    busy = fake_root(zero.parent / "busy", meminfo(60 * MIB, 20 * MIB), "Raspberry Pi Zero 2 W Rev 1.0")
    v = assess_memory("flash", 2_883_852, image_format="hex", root=busy)
    assert v.status == "refuse" and v.need > v.available + v.swap_free - MARGIN
    assert assess_memory("flash", 2_883_852, image_format="hex", root=pi4).status == "ok"


@pytest.mark.parametrize("operation", sorted(BASELINE))
def test_borders(tmp_path, operation):
    need = BASELINE[operation]

    def facts(avail, swap):
        return MachineFacts("Raspberry Pi Zero 2 W Rev 1.0", 427 * MIB, avail, 100 * MIB, swap)

    assert assess_memory(operation, facts=facts(need + MARGIN, 0)).status == "ok"
    # Inside the margin: tight when swap makes up the difference, refused without swap.
    inside = assess_memory(operation, facts=facts(need + MARGIN - 1, 1))
    assert inside.status == "tight" and f"less than {MARGIN // MIB} MiB would be left" in inside.message
    assert assess_memory(operation, facts=facts(need + MARGIN - 1, 0)).status == "refuse"
    swapping = assess_memory(operation, facts=facts(need - 10 * MIB, 10 * MIB + MARGIN))
    assert swapping.status == "tight" and "it fits only by swapping" in swapping.message
    assert assess_memory(operation, facts=facts(need - 10 * MIB, 10 * MIB + MARGIN - 1)).status == "refuse"


def test_image_format_matters():
    slope = {fmt: assess_memory("flash", MIB, image_format=fmt, facts=MachineFacts(None, 0, 0, 0, 0)).image
             for fmt in ("bin", "hex", "elf")}
    assert all(v > 0 for v in slope.values())
    unknown = assess_memory("flash", MIB, image_format=None, facts=MachineFacts(None, 0, 0, 0, 0)).image
    assert unknown == max(slope.values())
    with pytest.raises(ValueError):
        assess_memory("dance", facts=MachineFacts(None, 0, 0, 0, 0))


def test_pack_description_bytes(tmp_path):
    pdsc = b"<package>" + b" " * 5000 + b"</package>"
    pack = tmp_path / "Vendor.DFP.1.0.pack"
    with zipfile.ZipFile(pack, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("Vendor.DFP.pdsc", pdsc)
        z.writestr("SVD/big.svd", b"x" * 100000)
    assert pack_description_bytes(pack) == len(pdsc)
    unpacked = tmp_path / "unpacked"
    unpacked.mkdir()
    (unpacked / "Vendor.DFP.pdsc").write_bytes(pdsc)
    assert pack_description_bytes([str(pack), unpacked]) == 2 * len(pdsc)
    assert pack_description_bytes(None) == 0 and pack_description_bytes(tmp_path / "none.pack") == 0


def test_refusal_message_and_exit_code(tmp_path):
    root = fake_root(tmp_path, meminfo(40 * MIB, 0), "Raspberry Pi Zero 2 W Rev 1.0")
    with pytest.raises(MemoryGuardError) as info:
        check_memory("flash", 256 * KIB, image_format="hex", root=root)
    err = info.value
    assert err.exit_code == ExitCode.MEMORY == 14
    need = BASELINE["flash"] + int(IMAGE_SLOPE["hex"] * 256 * KIB)
    assert f"needs about {need / MIB:.0f} MiB" in err.message
    assert "MemAvailable 40 MiB" in err.message and "swap free 0 MiB" in err.message
    assert "Raspberry Pi Zero 2 W" in err.message
    for advice in ("close other programs", "CONF_SWAPSIZE in /etc/dphys-swapfile", "smaller image", "--force"):
        assert advice in err.hint
    assert err.verdict.status == "refuse"


def test_overrides_in_python(tmp_path, monkeypatch):
    root = fake_root(tmp_path, meminfo(20 * MIB, 0))
    said = []
    assert check_memory("erase", root=root, force=True, warn=said.append).status == "refuse"
    assert check_memory("erase", root=root, mode="warn", warn=said.append).status == "refuse"
    assert len(said) == 2 and all("going on anyway" in s for s in said)
    assert check_memory("erase", root=tmp_path / "nothing-here", mode="off") is None
    assert check_memory("erase", root=tmp_path / "nothing-here") is None  # no /proc: cannot judge
    monkeypatch.setenv("PIFLASH_MEMORY_GUARD", "warn")
    assert check_memory("erase", root=root, warn=said.append).status == "refuse"
    monkeypatch.setenv("PIFLASH_MEMORY_GUARD", "sometimes")
    with pytest.raises(GuardConfigError) as info:
        check_memory("erase", root=root)
    assert info.value.exit_code == ExitCode.USAGE


def test_check_job_reads_sizes_and_profile(tmp_path, monkeypatch):
    root = fake_root(tmp_path / "root", meminfo(BASELINE["flash"] + MARGIN + 4 * MIB, 100 * MIB))
    fw = tmp_path / "fw.hex"
    fw.write_bytes(b":" + b"0" * (MIB - 1))  # size is all that matters here: 1 MiB of hex
    v = check_job("flash", fw, root=root, warn=lambda s: None)
    assert (v.status, v.image) == ("tight", int(IMAGE_SLOPE["hex"] * MIB))
    prof_dir = tmp_path / "profiles"
    prof_dir.mkdir()
    (prof_dir / "board.yaml").write_text("target: nrf52840\nfirmware: ../fw.hex\nmemory_guard: off\n")
    monkeypatch.setenv("PIFLASH_PROFILE_PATH", str(prof_dir))
    assert check_job("flash", profile="board", root=root) is None
    monkeypatch.setenv("PIFLASH_MEMORY_GUARD", "refuse")  # the environment beats the profile
    assert check_job("flash", profile="board", root=root, warn=lambda s: None).image == v.image
    assert check_job("erase", fw, profile="board", root=root).image == 0  # erase loads no image
    pack = tmp_path / "x.pack"
    with zipfile.ZipFile(pack, "w") as z:
        z.writestr("x.pdsc", b"<package/>" * 100)
    v = check_job("info", options={"pack": str(pack)}, root=root)
    assert v.pack == memguard.PACK_FIXED + int(memguard.PACK_SLOPE * 1000)


# --- through the CLI ---------------------------------------------------------------------------

NRF = "nrf52840"
FLASH_SIZE = 1024 * 1024


@pytest.fixture
def starved(tmp_path, monkeypatch):
    """PIFLASH_PROC_ROOT at a Zero 2W with 30 MiB available and no swap: every operation refused."""
    root = fake_root(tmp_path / "starved", meminfo(30 * MIB, 0), "Raspberry Pi Zero 2 W Rev 1.0")
    monkeypatch.setenv("PIFLASH_PROC_ROOT", str(root))
    return root


def board_flash(cli, board, tmp_path):
    out = tmp_path / f"{board}.bin"
    cli("sim", "dump", board, "--out", out, check=0)
    return out.read_bytes()


def test_cli_refuses_and_flashes_nothing(cli, starved, tmp_path, firmware_dir):
    cli("sim", "create", "b", "--target", NRF, check=0)
    fw = firmware_dir / NRF / "firmware.hex"
    proc = cli("flash", fw, "-t", NRF, "-u", "sim:b", check=14)
    assert "error: not enough memory: flash needs about" in proc.stderr
    assert "MemAvailable 30 MiB, swap free 0 MiB on Raspberry Pi Zero 2 W" in proc.stderr
    assert "hint: close other programs" in proc.stderr and "CONF_SWAPSIZE" in proc.stderr
    assert board_flash(cli, "b", tmp_path) == b"\xff" * FLASH_SIZE
    out = cli.json("flash", fw, "-t", NRF, "-u", "sim:b", check=14)
    assert out["ok"] is False and out["error"]["kind"] == "MemoryGuardError"
    assert out["error"]["exit_code"] == 14


@pytest.mark.parametrize("args", [["verify", "{fw}"], ["erase", "--chip", "--yes"], ["info"], ["reset"]])
def test_every_pyocd_command_is_guarded(cli, starved, firmware_dir, args):
    fw = firmware_dir / NRF / "firmware.hex"
    proc = cli(*[a.format(fw=fw) for a in args], "-t", NRF, "-u", "sim:b", check=14)
    assert f"error: not enough memory: {args[0]} needs about" in proc.stderr


def test_refusal_happens_before_pyocd_is_imported(starved, firmware_dir):
    code = ("import sys\nfrom piflash.cli import cli\n"
            "try:\n    cli.main(sys.argv[1:], standalone_mode=False)\n"
            "except SystemExit as e:\n    print(e.code, 'pyocd' in sys.modules, 'unicorn' in sys.modules)\n")
    proc = subprocess.run([sys.executable, "-c", code, "flash", str(firmware_dir / NRF / "firmware.hex"),
                           "-t", NRF, "-u", "sim:b"], capture_output=True, text=True, timeout=60)
    assert proc.stdout.split() == ["14", "False", "False"], proc.stderr


def test_force_and_env_let_it_through(cli, starved, tmp_path, firmware_dir, monkeypatch):
    fw = firmware_dir / NRF / "firmware.hex"
    proc = cli("flash", fw, "-t", NRF, "-u", "sim:f", "--force", check=0)
    assert "warning: not enough memory" in proc.stderr and "going on anyway (--force)" in proc.stderr
    assert board_flash(cli, "f", tmp_path) == expected_flash(fw, FLASH_SIZE)
    cli("erase", "--chip", "--yes", "-t", NRF, "-u", "sim:f", "--force", check=0)
    assert board_flash(cli, "f", tmp_path) == b"\xff" * FLASH_SIZE
    monkeypatch.setenv("PIFLASH_MEMORY_GUARD", "off")
    proc = cli("flash", fw, "-t", NRF, "-u", "sim:f", check=0)
    assert "memory" not in proc.stderr
    assert board_flash(cli, "f", tmp_path) == expected_flash(fw, FLASH_SIZE)
    monkeypatch.setenv("PIFLASH_MEMORY_GUARD", "bogus")
    assert "PIFLASH_MEMORY_GUARD='bogus'" in cli("info", "-t", NRF, "-u", "sim:f", check=2).stderr


def test_tight_warns_and_succeeds(cli, tmp_path, firmware_dir, monkeypatch):
    fw = firmware_dir / NRF / "firmware.hex"
    need = BASELINE["flash"] + int(IMAGE_SLOPE["hex"] * fw.stat().st_size)
    root = fake_root(tmp_path / "tight", meminfo(need - 8 * MIB, 200 * MIB), "Raspberry Pi Zero 2 W Rev 1.0")
    monkeypatch.setenv("PIFLASH_PROC_ROOT", str(root))
    proc = cli("flash", fw, "-t", NRF, "-u", "sim:t", check=0)
    assert "warning: memory is tight: flash needs about" in proc.stderr
    assert "it fits only by swapping" in proc.stderr
    assert board_flash(cli, "t", tmp_path) == expected_flash(fw, FLASH_SIZE)


def test_zero2w_at_rest_is_ok(cli, zero, tmp_path, firmware_dir, monkeypatch):
    monkeypatch.setenv("PIFLASH_PROC_ROOT", str(zero))
    fw = firmware_dir / NRF / "firmware.hex"
    proc = cli("flash", fw, "-t", NRF, "-u", "sim:z", check=0)
    assert "memory" not in proc.stderr


def test_profile_key(cli, starved, tmp_path, firmware_dir, monkeypatch):
    fw = firmware_dir / NRF / "firmware.hex"
    prof = tmp_path / "profiles" / "board.yaml"
    prof.parent.mkdir(parents=True, exist_ok=True)
    prof.write_text(f"target: {NRF}\nprobe: sim:p\nfirmware: {fw}\nmemory_guard: warn\n")
    proc = cli("flash", "--profile", "board", check=0)
    assert "going on anyway (PIFLASH_MEMORY_GUARD/memory_guard is warn)" in proc.stderr
    assert board_flash(cli, "p", tmp_path) == expected_flash(fw, FLASH_SIZE)
    monkeypatch.setenv("PIFLASH_MEMORY_GUARD", "refuse")
    cli("verify", "--profile", "board", check=14)
    prof.write_text(f"target: {NRF}\nfirmware: {fw}\nmemory_guard: sometimes\n")
    monkeypatch.delenv("PIFLASH_MEMORY_GUARD")
    assert "key 'memory_guard': must be one of refuse, warn, off" in \
        cli("flash", "--profile", "board", check=5).stderr


# --- doctor's memory row ---------------------------------------------------------------------

def _memory_row(cli, root, monkeypatch, check):
    monkeypatch.setenv("PIFLASH_PROC_ROOT", str(root))
    proc = cli("doctor", "--json", check=check)
    rows = [r for r in json.loads(proc.stdout)["checks"] if r["name"] == "memory"]
    assert len(rows) == 1
    return rows[0]


def test_doctor_memory_row(cli, pi4, tmp_path, monkeypatch):
    row = _memory_row(cli, pi4, monkeypatch, None)
    assert row["status"] == "ok" and row["detail"].startswith("Raspberry Pi 4 Model B: RAM 3,794 MiB")
    starved = fake_root(tmp_path / "starved", meminfo(40 * MIB), "Raspberry Pi Zero 2 W Rev 1.0")
    row = _memory_row(cli, starved, monkeypatch, ExitCode.DOCTOR)
    assert row["status"] == "fail" and "would refuse" in row["detail"] and "CONF_SWAPSIZE" in row["fix"]
    tight = fake_root(tmp_path / "tight", meminfo(60 * MIB, swap_free=200 * MIB),
                      "Raspberry Pi Zero 2 W Rev 1.0")
    row = _memory_row(cli, tight, monkeypatch, None)
    assert row["status"] == "warn" and "it would swap" in row["detail"]
