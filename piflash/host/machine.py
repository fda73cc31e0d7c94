"""Facts about the machine piflash runs on: Raspberry Pi model, RAM, available memory, swap.

Everything is read from small text files under a root directory (``/`` normally;
``$PIFLASH_PROC_ROOT`` or the ``root`` argument for tests and odd systems), with the
standard library only and no subprocess, so reading costs well under a millisecond:

- the model from ``<root>/proc/device-tree/model``, else
  ``<root>/sys/firmware/devicetree/base/model`` (the same file; a NUL-terminated string such
  as ``"Raspberry Pi Zero 2 W Rev 1.0\\0"``, written by the firmware; absent on a PC);
- ``MemTotal``, ``MemAvailable``, ``SwapTotal``, ``SwapFree`` from ``<root>/proc/meminfo``
  (values in kB, i.e. KiB, as proc(5) documents);
- the memory limit of this process's cgroup, when it has one (a systemd service with
  ``MemoryMax=``, a container): cgroup v2 ``memory.max``/``memory.current`` or v1
  ``memory.limit_in_bytes``/``memory.usage_in_bytes``, found through ``<root>/proc/self/cgroup``,
  and the cgroup's reclaimable page cache from its ``memory.stat`` (see
  :func:`read_cgroup_memory`);
- this process's resident set (``VmRSS`` of ``<root>/proc/self/status``, :func:`read_self_rss`).

This module imports nothing outside the standard library and never imports pyOCD.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Optional, Tuple, Union

from piflash import settings

#: Environment variable naming the root of the /proc and /sys files read (default "/").
PROC_ROOT_ENV = settings.PIFLASH_PROC_ROOT.name
#: Where the device-tree model string lives, relative to the root, in the order tried.
MODEL_FILES = ("proc/device-tree/model", "sys/firmware/devicetree/base/model")
#: cgroup limits at or above this many bytes mean "no limit" (v1 reports a huge page-aligned
#: number such as 9223372036854771712 when unlimited).
_UNLIMITED = 1 << 60

PathLike = Union[str, "os.PathLike[str]"]


def proc_root() -> Path:
    """The root directory to read /proc and /sys files under: ``$PIFLASH_PROC_ROOT`` or ``/``."""
    return Path(settings.PIFLASH_PROC_ROOT.value())


@dataclass(frozen=True)
class MachineFacts:
    """What piflash knows about the machine it runs on.  All sizes in bytes.

    :ivar model: the device-tree model string (``"Raspberry Pi 4 Model B Rev 1.4"``), or None
        when the machine has no device tree (a PC) or it cannot be read.
    :ivar mem_total: ``MemTotal``: RAM the kernel manages (on a Pi, less the GPU's share).
    :ivar mem_available: ``MemAvailable``: the kernel's estimate of memory a new program can
        get without swapping.
    :ivar swap_total: ``SwapTotal``.
    :ivar swap_free: ``SwapFree``.
    :ivar cgroup_limit: memory limit of this process's cgroup, or None when unlimited/unknown.
    :ivar cgroup_usage: memory the cgroup uses now (page cache included), or None.
    :ivar cgroup_reclaimable: the part of ``cgroup_usage`` the kernel reclaims before it would
        refuse memory to the cgroup: inactive file pages (``memory.stat``); 0 when unknown.
    """

    model: Optional[str]
    mem_total: int
    mem_available: int
    swap_total: int
    swap_free: int
    cgroup_limit: Optional[int] = None
    cgroup_usage: Optional[int] = None
    cgroup_reclaimable: int = 0

    @property
    def is_raspberry_pi(self) -> bool:
        """True when the device-tree model names a Raspberry Pi."""
        return self.model is not None and self.model.startswith("Raspberry Pi")

    @property
    def short_model(self) -> str:
        """The model without the revision, e.g. ``"Raspberry Pi Zero 2 W"``; ``"unknown"`` if absent."""
        if not self.model:
            return "unknown"
        return re.sub(r"\s+Rev\s+\S+$", "", self.model).strip()

    @property
    def available(self) -> int:
        """Bytes that can still be allocated without swapping: ``MemAvailable``, capped by the
        cgroup's remaining allowance when there is a cgroup limit. That allowance is the limit
        less the cgroup's working set (usage less its reclaimable page cache,
        :attr:`cgroup_reclaimable`): a file written in the cgroup is charged to it, but the
        kernel drops those pages rather than refuse memory at the limit."""
        if self.cgroup_limit is None:
            return self.mem_available
        working_set = max(0, (self.cgroup_usage or 0) - self.cgroup_reclaimable)
        return max(0, min(self.mem_available, self.cgroup_limit - working_set))

    def to_dict(self) -> dict:
        """JSON-friendly dict of the fields plus ``is_raspberry_pi``, ``short_model``, ``available``."""
        return {
            "model": self.model,
            "short_model": self.short_model,
            "is_raspberry_pi": self.is_raspberry_pi,
            "mem_total": self.mem_total,
            "mem_available": self.mem_available,
            "swap_total": self.swap_total,
            "swap_free": self.swap_free,
            "cgroup_limit": self.cgroup_limit,
            "cgroup_usage": self.cgroup_usage,
            "cgroup_reclaimable": self.cgroup_reclaimable,
            "available": self.available,
        }


def read_model(root: Optional[PathLike] = None) -> Optional[str]:
    """The device-tree model string (NUL and surrounding white space removed), or None.

    :param root: root directory; default :func:`proc_root`.
    """
    base = Path(root) if root is not None else proc_root()
    for rel in MODEL_FILES:
        try:
            raw = (base / rel).read_bytes()
        except OSError:
            continue
        text = raw.split(b"\0", 1)[0].decode("utf-8", "replace").strip()
        if text:
            return text
    return None


def parse_meminfo(text: str) -> Dict[str, int]:
    """Parse ``/proc/meminfo`` text into ``{field: bytes}`` (``kB`` values times 1024).

    Lines that do not parse are skipped; fields without a unit (``HugePages_Total``) are
    kept as plain numbers.
    """
    out = {}
    for line in text.splitlines():
        name, sep, rest = line.partition(":")
        parts = rest.split()
        if not sep or not parts or not parts[0].isdigit():
            continue
        value = int(parts[0])
        out[name.strip()] = value * 1024 if len(parts) > 1 and parts[1] == "kB" else value
    return out


def read_meminfo(root: Optional[PathLike] = None) -> Dict[str, int]:
    """``<root>/proc/meminfo`` as ``{field: bytes}``; see :func:`parse_meminfo`.

    :raises OSError: the file cannot be read.
    """
    base = Path(root) if root is not None else proc_root()
    return parse_meminfo((base / "proc" / "meminfo").read_text(encoding="ascii", errors="replace"))


def _read_int(path: Path) -> Optional[int]:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


#: The ``memory.stat`` key of a cgroup's reclaimable page cache: cgroup v2 ``inactive_file``;
#: v1 ``total_inactive_file`` (the hierarchy's total; ``inactive_file`` is the cgroup's own).
#: The same figure ``docker stats`` and Kubernetes' cAdvisor subtract from usage to get the
#: working set (docker/cli ``calculateMemUsageUnixNoCache`` in
#: cli/command/container/stats_helpers.go; cAdvisor ``setMemoryStats`` in
#: container/libcontainer/handler.go). Active file pages are left counted as used: the kernel
#: reclaims them only after deactivating them, and they hold the files a process runs from.
RECLAIMABLE_KEY = {"v2": "inactive_file", "v1": "total_inactive_file"}


def _read_stat(path: Path, key: str) -> int:
    """The value of ``key`` in a ``memory.stat`` file (bytes), 0 when absent or unreadable."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return 0
    for line in lines:
        name, _, value = line.partition(" ")
        if name == key and value.strip().isdigit():
            return int(value)
    return 0


def read_cgroup_memory(root: Optional[PathLike] = None) -> Tuple[Optional[int], Optional[int], int]:
    """``(limit, usage, reclaimable)`` in bytes of this process's memory cgroup;
    ``(None, None, 0)`` if unlimited or unknown (no /proc/self/cgroup, no controller, ``max``).

    Reads ``<root>/proc/self/cgroup``: the v2 line ``0::/PATH`` gives
    ``<root>/sys/fs/cgroup/PATH/memory.max``, ``memory.current`` and ``memory.stat``; a v1
    ``N:memory:/PATH`` line gives ``<root>/sys/fs/cgroup/memory/PATH/memory.limit_in_bytes``,
    ``memory.usage_in_bytes`` and ``memory.stat``. ``reclaimable`` is the page cache the
    kernel reclaims at the limit (:data:`RECLAIMABLE_KEY`), at most ``usage``.
    """
    base = Path(root) if root is not None else proc_root()
    try:
        lines = (base / "proc" / "self" / "cgroup").read_text().splitlines()
    except OSError:
        return None, None, 0
    for line in lines:
        _, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        rel = path.strip().lstrip("/")
        if controllers == "":
            d = base / "sys" / "fs" / "cgroup" / rel
            limit, usage = _read_int(d / "memory.max"), _read_int(d / "memory.current")
            key = RECLAIMABLE_KEY["v2"]
        elif "memory" in controllers.split(","):
            d = base / "sys" / "fs" / "cgroup" / "memory" / rel
            limit, usage = _read_int(d / "memory.limit_in_bytes"), _read_int(d / "memory.usage_in_bytes")
            key = RECLAIMABLE_KEY["v1"]
        else:
            continue
        if limit is not None and limit < _UNLIMITED:
            reclaimable = min(_read_stat(d / "memory.stat", key), usage or 0)
            return limit, usage, reclaimable
    return None, None, 0


def read_self_rss(root: Optional[PathLike] = None) -> int:
    """This process's resident set in bytes (``VmRSS`` of ``<root>/proc/self/status``, in kB
    as proc(5) documents); 0 when it cannot be read."""
    base = Path(root) if root is not None else proc_root()
    try:
        text = (base / "proc" / "self" / "status").read_text(errors="replace")
    except OSError:
        return 0
    for line in text.splitlines():
        if line.startswith("VmRSS:"):
            parts = line.split()
            if len(parts) >= 2 and parts[1].isdigit():
                return int(parts[1]) * 1024
    return 0


def read_machine(root: Optional[PathLike] = None) -> MachineFacts:
    """Read the machine's model and memory figures.

    :param root: root directory of the /proc and /sys files; default :func:`proc_root`
        (``$PIFLASH_PROC_ROOT`` or ``/``).
    :returns: a :class:`MachineFacts` (sizes in bytes).  When ``MemAvailable`` is missing
        (kernels before 3.14) it is estimated as ``MemFree + Buffers + Cached``.
    :raises OSError: ``<root>/proc/meminfo`` cannot be read.
    """
    base = Path(root) if root is not None else proc_root()
    mem = read_meminfo(base)
    available = mem.get("MemAvailable")
    if available is None:
        available = sum(mem.get(k, 0) for k in ("MemFree", "Buffers", "Cached"))
    limit, usage, reclaimable = read_cgroup_memory(base)
    return MachineFacts(
        model=read_model(base),
        mem_total=mem.get("MemTotal", 0),
        mem_available=available,
        swap_total=mem.get("SwapTotal", 0),
        swap_free=mem.get("SwapFree", 0),
        cgroup_limit=limit,
        cgroup_usage=usage,
        cgroup_reclaimable=reclaimable,
    )
