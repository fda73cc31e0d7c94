"""Run piflash's CLI in this process and, at exit, split its peak memory into the guest's own
and qemu-user's (used by scripts/test-arm.sh inside an armhf or arm64 root).

    python qemu_share.py OUT.json flash image.bin -a 0 -t nrf52840 -u remote:127.0.0.1:PORT

Under qemu-user the process the kernel sees is the emulator, so its RSS is the guest
program's memory plus qemu's own (the translated-code buffer, its binary and heap). qemu-user
maps a 32-bit guest at guest_base 0, so the guest's pages are the mappings below 4 GiB and
qemu's are the rest; /proc/self/smaps (passed through by qemu) shows both. Written at exit:
``vm_hwm_mib`` (peak RSS of the process), ``rss_mib`` (RSS at exit), and for a 32-bit guest
``guest_mib`` and ``qemu_mib`` (that RSS split by address). A 64-bit guest shares the address
range with qemu, so only ``qemu_known_mib`` is given there: the mappings that are certainly
qemu's (its binary, the brk heap, the rwx translated-code buffer), a lower bound.
MiB = 1,048,576 bytes.
"""

from __future__ import annotations

import atexit
import json
import platform
import sys

LIMIT_32BIT = 1 << 32


def measure() -> dict:
    """Peak and current RSS of this process, and how much of it is qemu-user's."""
    status = dict(line.split(":", 1) for line in open("/proc/self/status") if ":" in line)
    kib = lambda key: int(status[key].split()[0])  # noqa: E731
    below = above = known = 0
    start, perms, path = 0, "", ""
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            fields = line.split()
            if "-" in fields[0] and not fields[0].endswith(":"):
                start = int(fields[0].split("-")[0], 16)
                perms = fields[1]
                path = fields[5] if len(fields) > 5 else ""
            elif fields[0] == "Rss:":
                size = int(fields[1])
                if start < LIMIT_32BIT:
                    below += size
                else:
                    above += size
                if "qemu-" in path or path == "[heap]" or (perms == "rwxp" and not path):
                    known += size
    # A 32-bit guest's whole address space is below 4 GiB; qemu's own mappings are above.
    split = platform.architecture()[0] == "32bit"
    mib = lambda k: round(k / 1024, 1)  # noqa: E731
    return {"machine": platform.machine(), "vm_hwm_mib": mib(kib("VmHWM")),
            "rss_mib": mib(kib("VmRSS")), "qemu_known_mib": mib(known),
            "guest_mib": mib(below) if split else None, "qemu_mib": mib(above) if split else None}


def main() -> None:
    out = sys.argv[1]
    sys.argv = ["piflash", *sys.argv[2:]]
    atexit.register(lambda: open(out, "w").write(json.dumps(measure()) + "\n"))
    from piflash.cli import main as piflash_main

    piflash_main()


if __name__ == "__main__":
    main()
