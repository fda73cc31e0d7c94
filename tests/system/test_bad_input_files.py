"""Firmware files that must never reach a board (issue 19, items 3 and 4), through the real CLI.

A FIFO, a device or a socket is refused at once (a FIFO used to block the read for ever); an
ELF for another architecture than Arm, or one cut short, is refused before any probe is opened
and records nothing in the history.
"""

from __future__ import annotations

import os
import resource
import shutil
import socket
import sqlite3
import struct
import subprocess
import sys
import tempfile

import pytest

from piflash.errors import ExitCode

NRF = ["-t", "nrf52840", "-u", "sim:nrf52840"]
#: Far more than the CLI needs to refuse a file (it never gets to pyOCD), far less than a test run.
QUICK = 30


def run_limited(*args, timeout=QUICK, memory=1 << 30):
    """``python -m piflash ARGS`` with its address space capped (``memory`` bytes), so a CLI that
    reads ``/dev/zero`` to its end fails fast instead of filling the machine's memory."""
    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    return subprocess.run([sys.executable, "-m", "piflash", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, env=os.environ.copy(), preexec_fn=cap)


def history_rows():
    path = os.environ["PIFLASH_HISTORY"]
    if not os.path.exists(path):
        return 0
    with sqlite3.connect(path) as db:
        return db.execute("SELECT count(*) FROM operations").fetchone()[0]


# --- item 4: not a regular file --------------------------------------------------------------

@pytest.mark.parametrize("command", ["flash", "verify"])
def test_fifo_is_refused_at_once(cli, tmp_path, command):
    fifo = tmp_path / "fw.hex"
    os.mkfifo(fifo)
    proc = cli(command, fifo, *NRF, timeout=QUICK)   # the old code blocked here for ever
    assert proc.returncode == ExitCode.FIRMWARE, proc.stderr
    assert "is a FIFO (named pipe), not a regular file" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert history_rows() == 0


@pytest.mark.parametrize("device, args", [
    ("/dev/null", []),
    ("/dev/zero", ["--base-address", "0"]),
])
def test_character_device_is_refused(tmp_path, device, args):
    if not os.path.exists(device):
        pytest.skip(f"{device} does not exist here")
    link = tmp_path / ("fw.bin" if args else "fw.hex")     # a firmware name, a device behind it
    link.symlink_to(device)
    for path in (device, link):
        proc = run_limited("flash", path, *args, *NRF)
        assert proc.returncode == ExitCode.FIRMWARE, proc.stderr
        assert "is a character device, not a regular file" in proc.stderr
        assert "Traceback" not in proc.stderr


def test_socket_is_refused(tmp_path):
    # AF_UNIX paths are limited to 108 bytes: bind in a short folder, not in tmp_path.
    folder = tempfile.mkdtemp(prefix="pf-sock-")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        path = os.path.join(folder, "fw.hex")
        sock.bind(path)
        sock.listen(1)
        proc = run_limited("flash", path, *NRF)
        assert proc.returncode == ExitCode.FIRMWARE, proc.stderr
        assert "is a socket, not a regular file" in proc.stderr
    finally:
        sock.close()
        shutil.rmtree(folder)


def test_fifo_in_a_profile_is_refused(cli, tmp_path):
    fifo = tmp_path / "fw.hex"
    os.mkfifo(fifo)
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "pipe.yaml").write_text(f"target: nrf52840\nprobe: sim:nrf52840\nfirmware: {fifo}\n")
    for args in (["flash", "-p", "pipe"], ["profile", "check", "pipe"]):
        proc = cli(*args, timeout=QUICK)
        assert proc.returncode == ExitCode.FIRMWARE, proc.stderr
        assert "FIFO" in proc.stderr


# --- item 3: foreign and truncated ELF files -------------------------------------------------

@pytest.fixture
def arm_elf(firmware_dir):
    """The real Arm ELF tests/firmware builds for the nRF52840."""
    return firmware_dir / "nrf52840" / "firmware.elf"


def refused(cli, path, *message):
    proc = cli("flash", path, *NRF, timeout=QUICK)
    assert proc.returncode == ExitCode.FIRMWARE, proc.stdout + proc.stderr
    for text in message:
        assert text in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    assert history_rows() == 0            # refused before any probe: nothing touched, nothing recorded
    return proc


@pytest.mark.parametrize("name", ["x.elf", "x"])     # by suffix, and sniffed from the ELF magic
def test_host_program_is_not_flashed(cli, tmp_path, name):
    elf = tmp_path / name
    shutil.copy("/bin/true", elf)          # the machine's own program: x86-64, AArch64, ...
    proc = refused(cli, elf, "not for Arm", "e_machine")
    machine = {"x86_64": "x86-64 (e_machine 62)", "aarch64": "AArch64 (e_machine 183)",
               "i686": "i386 (e_machine 3)", "riscv64": "RISC-V (e_machine 243)"}.get(os.uname().machine)
    if machine:
        assert machine in proc.stderr


@pytest.mark.parametrize("number, name", [(3, "i386"), (243, "RISC-V"), (183, "AArch64"), (62, "x86-64"),
                                          (9999, "an unknown machine")])
def test_arm_elf_relabelled_for_another_machine(cli, tmp_path, arm_elf, number, name):
    raw = bytearray(arm_elf.read_bytes())
    assert struct.unpack_from("<H", raw, 18)[0] == 40           # e_machine of the real build: EM_ARM
    struct.pack_into("<H", raw, 18, number)                     # only e_machine changes
    elf = tmp_path / "other.elf"
    elf.write_bytes(bytes(raw))
    refused(cli, elf, f"ELF file for {name} (e_machine {number}), not for Arm")


def test_real_i386_elf(cli, tmp_path):
    gcc = shutil.which("gcc")
    src = tmp_path / "start.c"
    src.write_text("void _start(void) { for (;;) { } }\n")
    elf = tmp_path / "i386.elf"
    if gcc is None or subprocess.run([gcc, "-m32", "-nostdlib", "-static", "-o", elf, src],
                                     capture_output=True).returncode != 0:
        pytest.skip("no gcc that builds -m32 here (the relabelled ELF test covers i386)")
    refused(cli, elf, "ELF file for i386 (e_machine 3), not for Arm")


def test_arm_elf_cut_inside_its_loadable_segment(cli, tmp_path, arm_elf):
    from elftools.elf.elffile import ELFFile

    with open(arm_elf, "rb") as fh:
        first = next(s for s in ELFFile(fh).iter_segments() if s["p_type"] == "PT_LOAD")
        offset, size = first["p_offset"], first["p_filesz"]
    assert size > 256
    cut = tmp_path / "cut.elf"
    cut.write_bytes(arm_elf.read_bytes()[: offset + 256])
    refused(cli, cut, f"the file ends inside segment 0 (256 of {size:,} bytes")


@pytest.mark.parametrize("keep, where", [(40, "its ELF header (40 of 52 bytes)"),
                                         (60, "its program header table (8 of 64 bytes)"),
                                         (-10, "its section header table")])
def test_arm_elf_cut_outside_its_segments(cli, tmp_path, arm_elf, keep, where):
    cut = tmp_path / "cut.elf"
    cut.write_bytes(arm_elf.read_bytes()[:keep])
    refused(cli, cut, f"ELF file is truncated: the file ends inside {where}")


def test_whole_arm_elf_still_flashes(cli, arm_elf):
    cli("flash", arm_elf, *NRF, "-q", check=0)


# --- issue 38: a sparse Intel HEX is refused at its first record out of flash ---------------------

def _hex_record(kind, address, data):
    body = bytes((len(data), address >> 8 & 0xFF, address & 0xFF, kind)) + data
    return ":" + (body + bytes(((-sum(body)) & 0xFF,))).hex().upper() + "\n"


@pytest.mark.parametrize("profile", [False, True])
def test_sparse_hex_stops_at_its_first_record_out_of_flash(cli, tmp_path, profile):
    """16,384 records each behind an extended linear address record 64 KiB further (a file that
    spans 4 GiB): with the target known before the file is read, the parse stops at the first
    record out of the nRF52840's 1 MiB flash (line 34: the data record of the 17th pair, at 0x00100000), exit 4 naming
    that line, the flash and the file, before any probe is opened. Before, the file was read
    whole (bincopy's insert took seconds) and the fit named the first segment only."""
    lines = [_hex_record(4, 0, struct.pack(">H", n)) + _hex_record(0, 0, bytes(16)) for n in range(16384)]
    path = tmp_path / "sparse.hex"
    path.write_text("".join(lines) + ":00000001FF\n")
    if profile:
        (tmp_path / "p.yaml").write_text(f"target: nrf52840\nfirmware: {path}\n")
        proc = cli("flash", "-p", tmp_path / "p.yaml", "-u", "sim:nrf52840", timeout=QUICK)
    else:
        proc = cli("flash", path, *NRF, timeout=QUICK)
    assert proc.returncode == ExitCode.IMAGE_RANGE, proc.stdout + proc.stderr
    assert f"image data at 0x00100000 (line 34 of {path}) is outside the flash of nrf52840" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert history_rows() == 0


def test_pinned_digest_is_named_before_the_content(cli, tmp_path):
    """A profile that pins a SHA-256 names a different file as such (exit 6) before its content
    is judged, as before the early range check."""
    path = tmp_path / "sparse.hex"
    path.write_text(_hex_record(4, 0, b"\x10\x00") + _hex_record(0, 0, bytes(16)) + ":00000001FF\n")
    (tmp_path / "p.yaml").write_text(f"target: nrf52840\nfirmware: {path}\nsha256: {'0' * 64}\n")
    proc = cli("flash", "-p", tmp_path / "p.yaml", "-u", "sim:nrf52840", timeout=QUICK)
    assert proc.returncode == ExitCode.CHECKSUM, proc.stdout + proc.stderr
