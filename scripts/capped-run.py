#!/usr/bin/env python3
"""Run one command under a cgroup v1 memory cap and measure it (used by scripts/test-arm.sh
and benchmarks/install_armhf.py).

    python3 scripts/capped-run.py --limit-mib 400 [--timeout S] [--json OUT] -- CMD ARGS...

Needs root and the cgroup v1 memory controller at /sys/fs/cgroup/memory. The
command runs in a fresh child cgroup of this process's own memory cgroup, with
memory.limit_in_bytes (and memory.memsw.limit_in_bytes, so swap cannot stretch it) set to the
cap. Measured, written as one JSON object to --json (and to stderr):

- ``wall_s``: wall time in seconds.
- ``cgroup_peak_mib``: memory.max_usage_in_bytes, the kernel's peak for the whole tree. It
  counts page cache too (files pip writes are charged to the cgroup until reclaimed).
- ``cgroup_peak_rss_mib``: the largest ``total_rss`` of memory.stat seen by sampling every
  0.1 s: anonymous memory of the whole tree, without page cache.
- ``max_rss_mib``: the largest peak RSS of any single process of the tree, from wait4's rusage
  (Linux reports max(own, waited-for descendants)); what GNU time's %M shows. Under qemu-user
  it includes the emulator's own memory.
- ``oom_kills``: processes the cap's OOM killer killed (memory.oom_control), ``failcnt``.
- ``rc``: the command's exit status (negative: killed by that signal); ``timed_out``.

Exits with the command's status (124 when the timeout killed it). MiB = 1,048,576 bytes.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

V1 = Path("/sys/fs/cgroup/memory")
MIB = 1 << 20
GNU_TIME = os.access("/usr/bin/time", os.X_OK)


def max_rss_kib(rss_file: Path, fallback_kib: int) -> int:
    """GNU time's %M (its last line) from rss_file, else wait4's ru_maxrss; KiB."""
    try:
        lines = rss_file.read_text().split()
        return int(lines[-1]) if lines else fallback_kib
    except (OSError, ValueError):
        return fallback_kib
    finally:
        rss_file.unlink(missing_ok=True)


def own_memory_cgroup() -> Path:
    """The memory cgroup (v1) this process is in, as a directory under /sys/fs/cgroup/memory."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            return V1 / path.lstrip("/")
    raise SystemExit("capped-run: no cgroup v1 memory controller (/sys/fs/cgroup/memory)")


def read_int(path: Path) -> int:
    return int(path.read_text().split()[0])


def stat_value(cg: Path, key: str) -> int:
    for line in (cg / "memory.stat").read_text().splitlines():
        name, value = line.split()
        if name == key:
            return int(value)
    return 0


def oom_kills(cg: Path) -> int:
    for line in (cg / "memory.oom_control").read_text().splitlines():
        name, value = line.split()
        if name == "oom_kill":
            return int(value)
    return 0


def kill_all(cg: Path) -> None:
    """SIGKILL every process left in the cgroup (a timed-out or orphaned tree)."""
    for _ in range(50):
        pids = [int(p) for p in (cg / "cgroup.procs").read_text().split()]
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.1)


def run(cmd: list[str], limit_mib: int, timeout: float | None) -> dict:
    """Run cmd in a new capped cgroup; returns the measurements described in the module doc."""
    parent = own_memory_cgroup()
    cg = parent / f"piflash-capped-{os.getpid()}"
    cg.mkdir()
    try:
        (cg / "memory.limit_in_bytes").write_text(str(limit_mib * MIB))
        memsw = cg / "memory.memsw.limit_in_bytes"
        if memsw.exists():
            memsw.write_text(str(limit_mib * MIB))
        start = time.perf_counter()
        # A shell joins the cgroup, then becomes GNU time running the command: a process
        # forked from this Python starts its max RSS at this Python's size, GNU time's child
        # at GNU time's (~2 MiB).
        timed: list[str] = []
        rss_file = Path(tempfile.mkstemp(prefix="capped-run-")[1])
        if GNU_TIME:
            timed = ["/usr/bin/time", "-f", "%M", "-o", str(rss_file)]
        pid = subprocess.Popen(["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"',
                                str(cg), *timed, *cmd]).pid
        peak_rss = 0
        timed_out = False
        while True:
            done, status, usage = os.wait4(pid, os.WNOHANG)
            if done:
                break
            peak_rss = max(peak_rss, stat_value(cg, "total_rss"))
            if timeout is not None and time.perf_counter() - start > timeout:
                timed_out = True
                kill_all(cg)
            time.sleep(0.1)
        wall = time.perf_counter() - start
        kill_all(cg)
        rc = os.waitstatus_to_exitcode(status)
        if rc > 128 and GNU_TIME and "signal" in rss_file.read_text():
            rc = 128 - rc  # GNU time reports a child killed by signal N as exit 128+N
        return {
            "cmd": cmd,
            "rc": rc,
            "timed_out": timed_out,
            "wall_s": round(wall, 2),
            "limit_mib": limit_mib,
            "cgroup_peak_mib": round(read_int(cg / "memory.max_usage_in_bytes") / MIB, 1),
            "cgroup_peak_rss_mib": round(peak_rss / MIB, 1),
            "max_rss_mib": round(max_rss_kib(rss_file, usage.ru_maxrss) / 1024, 1),
            "oom_kills": oom_kills(cg),
            "failcnt": read_int(cg / "memory.failcnt"),
        }
    finally:
        kill_all(cg)
        cg.rmdir()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit-mib", type=int, default=400, help="memory cap in MiB (default 400)")
    ap.add_argument("--timeout", type=float, help="kill the whole tree after this many seconds")
    ap.add_argument("--json", type=Path, help="write the measurements here")
    ap.add_argument("cmd", nargs=argparse.REMAINDER, help="-- CMD ARGS...")
    args = ap.parse_args()
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not cmd:
        ap.error("no command given")
    if os.geteuid() != 0:
        sys.exit(f"capped-run: making a memory cgroup needs root: sudo python3 {sys.argv[0]} "
                 f"--limit-mib {args.limit_mib} -- {' '.join(cmd)}")
    if not (V1 / "memory.limit_in_bytes").exists():
        sys.exit(f"capped-run: no cgroup v1 memory controller at {V1} (this machine runs cgroup v2 "
                 "only?): the cap cannot be set here")
    result = run(cmd, args.limit_mib, args.timeout)
    text = json.dumps(result)
    print(f"capped-run: {text}", file=sys.stderr)
    if args.json:
        args.json.write_text(text + "\n")
    if result["timed_out"]:
        sys.exit(124)
    rc = result["rc"]
    sys.exit(rc if rc >= 0 else 128 - rc)


if __name__ == "__main__":
    main()
