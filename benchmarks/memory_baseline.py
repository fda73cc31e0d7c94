#!/usr/bin/env python3
"""Peak RSS of piflash's pyOCD operations: the numbers behind piflash/host/memguard.py.

The memory guard (``piflash/host/memguard.py``) refuses an operation that would not fit in the
machine's free memory. What an operation needs is modelled as a baseline per operation plus
a slope per byte of firmware file (per format) and per byte of CMSIS-pack description. This
script measures them.

The measured process is pure piflash + pyOCD: the simulated board (whose unicorn CPU emulator
costs memory a real probe does not) runs in another process, ``piflash sim serve``, and the
measured ``piflash`` talks to it over pyOCD's remote probe protocol (``-u remote:127.0.0.1:PORT``).
Each figure is the peak RSS of that one child process (``ru_maxrss`` from ``os.wait4``).
For comparison the same flash is also measured with the simulator in-process (``-u sim:NAME``).

    python benchmarks/memory_baseline.py [--runs 1] [--sizes 16384,131072,262144,524288,1048576]
        [--parse-sizes 1048576,4194304,16777216]

Prints: peak RSS per operation, image format and size; the fitted baseline and slope per
operation and format; the guard's estimate next to each measured peak; the peak of loading
(only) a .hex of up to 16 MiB of data, larger than the simulated target's flash; the resident set of a
piflash process when the guard checks (the part of the peak it already holds); the simulator's
share; the pack slope; and what the guard itself costs (import and one check, timed in a fresh
interpreter).
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import struct
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from piflash.sim.probes.spawn import (
    ServedBoard,  # no pyOCD, no unicorn: keeps this process small
)

BIN = Path(sys.executable).parent
MIB = 1024 * 1024
TARGET = "nrf52840"  # 1 MiB of flash at 0x0: room for every size measured


def run(cmd, env):
    """Run cmd; return its peak RSS in bytes (from wait4). Fails loudly on a non-zero exit.

    Linux carries a process's peak RSS across exec, so a child's ``ru_maxrss`` is never below
    its parent's RSS at the fork: this script keeps itself small (no intelhex, no pyOCD until
    the end) so that floor stays far below what it measures. ``main`` prints the floor.
    """
    proc = subprocess.Popen(list(map(str, cmd)), env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    out, err = proc.communicate()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"failed: {' '.join(map(str, cmd))}\n{out.decode()}\n{err.decode()}")
    return usage.ru_maxrss * 1024  # Linux reports KiB


def peak(runs, cmd, env):
    return max(run(cmd, env) for _ in range(runs))


def hex_records(data: bytes):
    """Intel HEX lines for ``data`` at address 0: 16-byte data records, an extended linear
    address record every 64 KiB, an EOF record. Written by hand so this process stays small."""
    def line(kind, address, payload):
        body = bytes([len(payload), address >> 8 & 0xFF, address & 0xFF, kind]) + payload
        return f":{body.hex().upper()}{(-sum(body)) & 0xFF:02X}\n"
    for offset in range(0, len(data), 16):
        if offset % 0x10000 == 0:
            yield line(4, 0, (offset >> 16).to_bytes(2, "big"))
        yield line(0, offset & 0xFFFF, data[offset:offset + 16])
    yield line(1, 0, b"")


def write_images(directory: Path, size: int) -> dict:
    """The same random ``size`` bytes at address 0 as .bin, .hex and .elf; returns {format: path}."""
    data = random.Random(size).randbytes(size)
    paths = {fmt: directory / f"image-{size}.{fmt}" for fmt in ("bin", "hex", "elf")}
    paths["bin"].write_bytes(data)
    with open(paths["hex"], "w") as f:
        f.writelines(hex_records(data))
    # A minimal ELF32 (little-endian, ARM) with one PT_LOAD segment holding the data at 0.
    ehdr = struct.pack("<16sHHIIIIIHHHHHH", b"\x7fELF\x01\x01\x01" + bytes(9), 2, 40, 1, 0,
                       52, 0, 0x05000000, 52, 32, 1, 40, 0, 0)
    phdr = struct.pack("<8I", 1, 84, 0, 0, size, size, 5, 4)
    paths["elf"].write_bytes(ehdr + phdr + data)
    return paths


#: The test pack's flash algorithm (tests/firmware/pack, built by scripts/build-test-firmware.sh):
#: put in the synthetic packs so that their parts can be the target (piflash then reads the pack's
#: memory map before connecting, and pyOCD loads the algorithm).
FLM = Path(__file__).resolve().parent.parent / "tests" / "firmware" / "build" / "pack" / "piflash_nrf52840.FLM"


def write_pack(path: Path, devices: int) -> int:
    """A CMSIS pack (zip) whose .pdsc describes ``devices`` Cortex-M4 parts BENCH00000...;
    returns the .pdsc size. The parts' flash algorithm is :data:`FLM` when it is built."""
    parts = []
    for i in range(devices):
        parts.append(
            f'      <device Dname="BENCH{i:05d}">\n'
            f'        <processor Dcore="Cortex-M4" Dfpu="SP_FPU" Dendian="Little-endian" Dclock="64000000"/>\n'
            f'        <debug __ap="0"/>\n'
            f'        <description>Benchmark part {i}, 1 MiB flash, 256 KiB RAM</description>\n'
            f'        <memory name="IROM1" access="rx" start="0x00000000" size="0x100000" default="1" startup="1"/>\n'
            f'        <memory name="IRAM1" access="rwx" start="0x20000000" size="0x40000" default="1"/>\n'
            f'        <algorithm name="Flash/BENCH.FLM" start="0x00000000" size="0x100000" RAMstart="0x20000000" '
            f'RAMsize="0x1000" default="1"/>\n'
            f'      </device>\n')
    pdsc = ('<?xml version="1.0" encoding="UTF-8"?>\n'
            '<package schemaVersion="1.7" xmlns:xs="http://www.w3.org/2001/XMLSchema-instance">\n'
            '  <vendor>Bench</vendor>\n  <name>Bench_DFP</name>\n'
            '  <description>synthetic pack for benchmarks/memory_baseline.py</description>\n'
            '  <releases><release version="1.0.0">first</release></releases>\n'
            '  <devices>\n    <family Dfamily="Bench" Dvendor="Generic:5">\n'
            + "".join(parts) + '    </family>\n  </devices>\n</package>\n').encode()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("Bench.Bench_DFP.pdsc", pdsc)
        if FLM.exists():
            z.write(FLM, "Flash/BENCH.FLM")
    return len(pdsc)


def fit(points):
    """Least-squares line through (x, y) points: (intercept, slope)."""
    xs, ys = zip(*points)
    if len(set(xs)) < 2:
        return max(ys), 0.0
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    slope = sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x in xs)
    return my - slope * mx, slope


def guard_cost(env, runs=7):
    """Median seconds to import piflash.host.memguard (on top of piflash.cli, which every command
    imports anyway) and to run one check_memory against this machine's /proc, in fresh
    interpreters."""
    code = ("import time, piflash.cli; t0 = time.perf_counter(); import piflash.host.memguard as m; "
            "t1 = time.perf_counter(); m.check_memory('flash', image_bytes=262144, image_format='hex', "
            "mode='warn', warn=lambda s: None); t2 = time.perf_counter(); print(t1 - t0, t2 - t1)")
    imports, checks = [], []
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                             check=True).stdout.split()
        imports.append(float(out[0]))
        checks.append(float(out[1]))
    return statistics.median(imports), statistics.median(checks)


def held_at_check(env, runs=3):
    """Largest resident set (bytes) of a fresh interpreter that has imported what a piflash
    command has imported when the memory guard runs (piflash.cli, the guard): the part of the
    operation's peak the checking process already holds."""
    code = ("import piflash.cli, piflash.host.memguard\n"
            "from piflash.host.machine import read_self_rss\nprint(read_self_rss())")
    return max(int(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                  check=True).stdout) for _ in range(runs))


def parse_peaks(directory: Path, sizes, runs, env):
    """Peak RSS of a fresh interpreter loading a .hex of each size (bytes of data) with piflash's
    ``load_image``, the parsed-image cache off: ``[(size, file bytes, peak RSS bytes)]``. The
    parse runs before pyOCD is imported, so for images larger than any simulated target's flash
    this is the part of a flash's peak that grows with the file."""
    code = "import sys; from piflash.firmware.image import load_image; load_image(sys.argv[1])"
    out = []
    for size in sizes:
        path = directory / f"parse-{size}.hex"
        with open(path, "w") as f:
            f.writelines(hex_records(random.Random(size).randbytes(size)))
        out.append((size, path.stat().st_size,
                    peak(runs, [sys.executable, "-c", code, path], dict(env, PIFLASH_CACHE="off"))))
        path.unlink()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1, help="runs per point; the highest peak is kept")
    ap.add_argument("--sizes", default="16384,131072,262144,524288,1048576",
                    help="image sizes in bytes, comma-separated")
    ap.add_argument("--parse-sizes", default="1048576,4194304,16777216",
                    help="image sizes in bytes whose .hex is only loaded (no target holds 16 MiB)")
    ap.add_argument("--pack-devices", default="10,1000,4000",
                    help="device counts of the synthetic packs, comma-separated")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]

    rows = []  # (operation, format, file bytes, peak RSS bytes)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        env = dict(os.environ, PIFLASH_SIM_DIR=str(tmp / "sim"), PIFLASH_MEMORY_GUARD="off")
        env.pop("PIFLASH_PROFILE_PATH", None)
        server = ServedBoard([BIN / "piflash", "sim", "serve", "--board", "bench", "--target", TARGET,
                             "--port", "0"], env=env)
        try:
            remote = ["-t", TARGET, "-u", server.uid, "-q"]
            rows.append(("info", "-", 0, peak(args.runs, [BIN / "piflash", "info", *remote[:4]], env)))
            rows.append(("erase", "-", 0, peak(args.runs, [BIN / "piflash", "erase", "--chip", "--yes", *remote], env)))
            for size in sizes:
                images = write_images(tmp, size)
                for fmt, path in images.items():
                    extra = ["-a", "0"] if fmt == "bin" else []
                    nbytes = path.stat().st_size
                    for op in ("flash", "verify"):
                        rss = peak(args.runs, [BIN / "piflash", op, path, *extra, *remote], env)
                        rows.append((op, fmt, nbytes, rss))
            pack_rows = []
            for n in (int(d) for d in args.pack_devices.split(",")):
                pack = tmp / f"bench-{n}.pack"
                pdsc = write_pack(pack, n)
                rss = peak(args.runs, [BIN / "piflash", "info", *remote[:4], "-O", f"pack={pack}"], env)
                part = None
                if FLM.exists():  # a part of the pack as the target: piflash parses the pack too
                    part = peak(args.runs, [BIN / "piflash", "info", "-t", "BENCH00001", *remote[2:4],
                                            "-O", f"pack={pack}"], env)
                pack_rows.append((n, pack.stat().st_size, pdsc, rss, part))
        finally:
            server.stop()
        # The simulator's share: the same 256 KiB flash with the board in-process.
        mid = write_images(tmp, 262144)["bin"]
        in_process = peak(args.runs, [BIN / "piflash", "flash", mid, "-a", "0", "-t", TARGET,
                                      "-u", "sim:inproc", "-q"], env)
        import_s, check_s = guard_cost(env)
        held = held_at_check(env)
        parse_rows = parse_peaks(tmp, [int(s) for s in args.parse_sizes.split(",") if s], args.runs, env)

    import resource
    floor = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    import pyocd
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, {platform.platform()}, "
          f"Python {platform.python_version()}, pyOCD {pyocd.__version__}")
    print(f"target {TARGET} served by 'piflash sim serve' in another process; peak RSS of the "
          f"piflash process, max of {args.runs} run(s)")
    print(f"this script's own peak RSS (a floor under every figure): {floor / MIB:.1f} MiB\n")
    print(f"{'operation':<9} {'format':<6} {'file bytes':>11} {'peak RSS (MiB)':>15}")
    for op, fmt, nbytes, rss in rows:
        print(f"{op:<9} {fmt:<6} {nbytes:>11,} {rss / MIB:>15.1f}")

    print("\nfitted: need = baseline + slope x file bytes")
    print(f"{'operation':<9} {'format':<6} {'baseline (MiB)':>15} {'slope (B/B)':>12}")
    for op, fmt, _nbytes, rss in rows:
        if fmt == "-":
            print(f"{op:<9} {'-':<6} {rss / MIB:>15.1f} {'-':>12}")
    for op in ("flash", "verify"):
        for fmt in ("bin", "hex", "elf"):
            b, s = fit([(n, r) for o, f, n, r in rows if (o, f) == (op, fmt)])
            print(f"{op:<9} {fmt:<6} {b / MIB:>15.1f} {s:>12.2f}")

    from piflash.host.memguard import MARGIN, estimate_need

    print("\nthe guard's estimate (whole process peak) against the measured peak")
    print(f"{'operation':<9} {'format':<6} {'file bytes':>11} {'estimate (MiB)':>15} {'peak (MiB)':>11} "
          f"{'headroom':>9}")
    for op, fmt, nbytes, rss in rows:
        est = sum(estimate_need(op, nbytes, 0, None if fmt == "-" else fmt))
        print(f"{op:<9} {fmt:<6} {nbytes:>11,} {est / MIB:>15.1f} {rss / MIB:>11.1f} "
              f"{(est - rss) / MIB:>+9.1f}")
    print(f"resident set when the guard checks (already held, counted once): {held / MIB:.1f} MiB; "
          f"a memory cgroup admits flash (16 KiB) from limit - usage >= "
          f"{(sum(estimate_need('flash', 16384, 0, 'bin')) - held + MARGIN) / MIB:.1f} MiB")

    print(f"\nsimulator's share: flash of 256 KiB .bin in-process (-u sim:) {in_process / MIB:.1f} MiB "
          f"vs over remote: {next(r for o, f, n, r in rows if (o, f, n) == ('flash', 'bin', 262144)) / MIB:.1f} MiB"
          if 262144 in sizes else f"\nsimulator in-process flash of 256 KiB: {in_process / MIB:.1f} MiB")

    print("\npack (-O pack=FILE, 'piflash info'): need = info baseline + slope x .pdsc bytes; "
          f"target {TARGET} (builtin), and BENCH00001 (a part of the pack)")
    print(f"{'devices':>8} {'pack bytes':>11} {'pdsc bytes':>11} {'peak RSS (MiB)':>15} {'pack part (MiB)':>16}")
    for n, zbytes, pdsc, rss, part in pack_rows:
        shown = f"{part / MIB:>16.1f}" if part else f"{'-':>16}"
        print(f"{n:>8,} {zbytes:>11,} {pdsc:>11,} {rss / MIB:>15.1f} {shown}")
    b, s = fit([(pdsc, rss) for _, _, pdsc, rss, _ in pack_rows])
    print(f"fitted: baseline {b / MIB:.1f} MiB, slope {s:.2f} B per .pdsc byte")
    if all(part for *_, part in pack_rows):
        b, s = fit([(pdsc, part) for _, _, pdsc, _, part in pack_rows])
        print(f"fitted, pack part as target: baseline {b / MIB:.1f} MiB, slope {s:.2f} B per .pdsc byte")
    else:
        print(f"(pack part as target not measured: build {FLM} with scripts/build-test-firmware.sh)")

    print("\n.hex loaded only (load_image, parsed-image cache off: a flash parses before it connects),"
          " against the guard's estimate for flashing it")
    print(f"{'data bytes':>11} {'file bytes':>11} {'peak RSS (MiB)':>15} {'estimate (MiB)':>15}")
    for size, nbytes, rss in parse_rows:
        est = sum(estimate_need("flash", nbytes, 0, "hex"))
        print(f"{size:>11,} {nbytes:>11,} {rss / MIB:>15.1f} {est / MIB:>15.1f}")
    if len(parse_rows) > 1:
        b, s = fit([(n, r) for _, n, r in parse_rows])
        print(f"fitted: {b / MIB:.1f} MiB + {s:.2f} B per .hex byte")

    print(f"\nguard cost (fresh interpreter, median of 7): import piflash.host.memguard "
          f"{import_s * 1000:.2f} ms, one check_memory {check_s * 1000:.3f} ms")


if __name__ == "__main__":
    main()
