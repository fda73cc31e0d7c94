"""The memory guard: refuse an operation that would exhaust memory instead of freezing the board.

A Pi Zero 2W has about 427 MiB of RAM once the GPU has its share, often little swap, and an SD
card that makes swapping crawl. Every operation that loads pyOCD (``flash``, ``verify``,
``erase``, ``info``, the station) calls :func:`check_memory` (or :func:`piflash.profiles.check_job`, which
works out the sizes from files and the profile) first, *before* pyOCD is imported:

- it estimates what the operation needs: a measured peak RSS of piflash + pyOCD for that
  operation (:data:`BASELINE`), plus a measured slope per byte of firmware file
  (:data:`IMAGE_SLOPE`, per format: an Intel HEX file costs far more per byte than a .bin)
  and per byte of CMSIS-pack description (:data:`PACK_SLOPE`);
- the estimate is of the whole process's peak, counted once: the process that checks already
  holds part of it (Python, click, piflash: its resident set, ``held``), and that part is
  already missing from what the machine reports free, so only ``more = need - held`` is
  compared;
- it compares that with what the machine has (:func:`piflash.host.machine.read_machine`):
  ``MemAvailable`` (capped by a cgroup limit, less the cgroup's working set: its reclaimable
  page cache is not counted as used) and ``SwapFree``;
- the verdict is ``"ok"``; ``"tight"`` when ``more > available - MARGIN`` (it only fits by
  swapping, or with less than :data:`MARGIN` to spare): a warning, then the operation goes on;
  or ``"refuse"`` when ``more > available + swap_free - MARGIN``: :class:`MemoryGuardError`
  (exit code 14) with the numbers and advice.

Overrides, strongest first: ``force=True`` (``--force``); the environment variable
``PIFLASH_MEMORY_GUARD`` = ``refuse`` | ``warn`` | ``off``; a profile's ``memory_guard`` key
(same values); the default ``refuse``. ``warn`` (and ``--force``) turn a refusal into a
warning; ``off`` skips the check without reading anything.

All sizes are in bytes. The module imports only the standard library and piflash's light
modules (never pyOCD, yaml only when a profile is read); a check costs well under a
millisecond (``benchmarks/memory_baseline.py`` prints the figure).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Optional, Union

from piflash import settings
from piflash.errors import GuardConfigError, MemoryGuardError  # noqa: F401  (raised here)
from piflash.host.machine import MachineFacts, read_machine, read_self_rss

MIB = 1024 * 1024

#: Operations that load a firmware image (the others ignore one).
IMAGE_OPERATIONS = ("flash", "verify", "station")
#: Environment variable selecting the guard's mode.
MODE_ENV = settings.PIFLASH_MEMORY_GUARD.name
#: Accepted modes: refuse (the default), warn (never refuse), off (do not check).
GUARD_MODES = settings.PIFLASH_MEMORY_GUARD.choices

#: Peak RSS in bytes of one ``piflash OPERATION`` process (Python + piflash + pyOCD) with a
#: 16 KiB image (or none), plus about 10 % and rounded up to a whole MiB: the whole process's
#: peak, of which the checking process already holds a part (see :func:`check_memory`).
#:
#: Measured by ``benchmarks/memory_baseline.py --runs 3`` on the development machine, x86-64 (2
#: cores, Linux 6.18, Python 3.11.7, pyOCD 0.46.0), 2026-11-26: info 52.6 MiB, erase 56.3, flash
#: 57.6 (a 16 KiB image as .hex; 56.8 as .bin), verify 56.8 (docs/benchmarks.md; 2026-11-22 gave
#: 50.7, 52.1, 52.2 and 52.3, and the baselines 56 and 58 MiB, which left 2 % of headroom by
#: 2026-11-26; 2026-11-21's run, before the package plan, gave 60.8 to 65.4). The simulated board was served by ``piflash sim serve`` in
#: another process, so its CPU emulator (about 13 MiB more in-process) is not counted: a real
#: probe has none. x86-64 uses 8-byte pointers; on 32-bit armv7l Raspberry Pi OS CPython's
#: objects are smaller, so these figures overstate a 32-bit Pi's need (conservative); on
#: aarch64 they are about right. ``station`` (a long-running flash + verify) takes flash's;
#: ``reset`` (connect and reset, no image) takes info's.
BASELINE = {
    "info": 58 * MIB,
    "reset": 58 * MIB,
    "erase": 62 * MIB,
    "flash": 64 * MIB,
    "verify": 63 * MIB,
    "station": 64 * MIB,
}

#: Extra peak RSS per byte of firmware *file*, by format (bytes per byte): the largest of the
#: flash and verify slopes of the same benchmark (images of 16 KiB to 1 MiB of data), rounded up
#: with room to spare: measured 2026-11-22 bin 9.8, elf 9.7. The .bin/.elf cost is mostly
#: pyOCD's flash builder, which holds page data as lists of ints (a pointer per byte: 8 bytes on
#: x86-64, 4 on armv7l). Intel HEX, measured 2026-11-26 (``memory_baseline.py --runs 3``) since
#: the records were checked by :mod:`piflash.firmware.ihex` and assembled by bincopy (a bytearray
#: per run of contiguous records) instead of intelhex (a dict entry per data byte: 32.1 fitted on
#: 2026-11-22, a 1 MiB image as a 2.75 MiB .hex peaked at 134.1 MiB): flashing fitted 1.10 (that
#: .hex peaks at 60.5 MiB), but the parse alone, which runs before pyOCD is imported, peaks at
#: 29.1 MiB + 6.56 bytes per byte of .hex (1 to 16 MiB of data, 2.9 to 46 MB of .hex: 43.6 to
#: 316.8 MiB), above 58 MiB + 5 x the file from about 14 MB of .hex on; 8 covers it at every size.
#: Since 2026-11-27 :mod:`piflash.firmware.ihex` places the records itself, a line at a time: the
#: parse peaks at about 2.1 bytes per byte of .hex (1 and 4 MiB images); 8 is kept, larger, until
#: the benchmark runs again.
#: An unknown format takes the largest slope.
IMAGE_SLOPE = {
    "bin": 12.0,
    "elf": 12.0,
    "hex": 8.0,
    # A UF2 file carries its payload in 512-byte blocks (256 bytes each from pico-sdk and
    # uf2conv, at most 476): its parse keeps the file and one bytes object per block, less per
    # file byte than a .bin; the .bin slope covers it (not measured separately).
    "uf2": 12.0,
}

#: Extra peak RSS per byte of a CMSIS pack's ``.pdsc`` description (the XML pyOCD parses when
#: ``-O pack=FILE`` is given; the rest of a pack, SVD files and headers, is not read to list
#: its parts), from the same benchmark with synthetic packs of 10 to 4000 parts (5.9 KB to
#: 2.2 MB of .pdsc): fitted 14.7 bytes per byte, 18 between the two largest packs; rounded up
#: to 20. When the target is a part of the pack, piflash parses the pack too (before pyOCD, to
#: check the name and the image's place) and frees that parse before connecting: measured
#: 85.5 MiB against 85.2 MiB with a builtin target for 2.3 MB of .pdsc (docs/benchmarks.md).
PACK_SLOPE = 20.0
#: Fixed extra peak RSS in bytes when any pack is given: pyOCD's pack support (ElementTree,
#: the pack target builder) loads only then. Measured 4.3 to 6.8 MiB (``info`` with a 10-part
#: pack vs none), rounded up.
PACK_FIXED = 8 * MIB

#: Safety margin in bytes kept free on top of the need. ``MemAvailable`` is the kernel's
#: *estimate* (it counts half the page cache as reclaimable, including the files of Python
#: and pyOCD the operation is about to map), other programs keep allocating while we run, and
#: the measured peaks vary from run to run by a few MiB. 32 MiB is about 7.5 % of a Zero 2W's
#: 427 MiB and twice the 16 MiB ``vm.min_free_kbytes`` Raspberry Pi OS sets.
MARGIN = 32 * MIB

PathLike = Union[str, "os.PathLike[str]"]


@dataclass(frozen=True)
class MemoryVerdict:
    """The guard's verdict on one operation.  Sizes in bytes.

    :ivar status: ``"ok"``, ``"tight"`` or ``"refuse"``.
    :ivar operation: the operation checked (a key of :data:`BASELINE`).
    :ivar need: estimated peak RSS of the whole process: ``baseline + image + pack``.
    :ivar baseline: the operation's :data:`BASELINE` part of ``need``.
    :ivar image: the firmware's part of ``need``.
    :ivar pack: the CMSIS pack's part of ``need``.
    :ivar available: ``MemAvailable``, capped by a cgroup limit (:attr:`MachineFacts.available`).
    :ivar swap_free: ``SwapFree``.
    :ivar margin: :data:`MARGIN` (or the margin given).
    :ivar facts: the :class:`~piflash.host.machine.MachineFacts` the verdict was made from.
    :ivar held: the part of ``need`` the checking process already holds (its resident set;
        0 when the operation will run in another process); only ``more`` is still to come.
    """

    status: str
    operation: str
    need: int
    baseline: int
    image: int
    pack: int
    available: int
    swap_free: int
    margin: int
    facts: MachineFacts
    held: int = 0

    @property
    def more(self) -> int:
        """Bytes the operation still needs on top of what the process holds: ``need - held``."""
        return max(0, self.need - self.held)

    @property
    def ok(self) -> bool:
        """True unless the verdict is ``"refuse"``."""
        return self.status != "refuse"

    def describe(self) -> str:
        """One line with the numbers in MiB, e.g. ``"needs about 73 MiB (...); 40 MiB available ..."``."""
        parts = [f"pyOCD {_mib(self.baseline)}"]
        if self.image:
            parts.append(f"firmware {_mib(self.image)}")
        if self.pack:
            parts.append(f"pack {_mib(self.pack)}")
        where = "available" if self.facts.cgroup_limit is None else "available (cgroup limit)"
        on = f" on {self.facts.short_model}" if self.facts.model else ""
        holds = f", {_mib(self.held)} of it already in use by this process" if self.held else ""
        return (
            f"{self.operation} needs about {_mib(self.need)} ({' + '.join(parts)}){holds}; "
            f"MemAvailable {_mib(self.facts.mem_available)}"
            + (f", {_mib(self.available)} {where}" if self.facts.cgroup_limit is not None else "")
            + f", swap free {_mib(self.swap_free)}{on}"
        )

    @property
    def message(self) -> str:
        """The refusal or warning sentence."""
        if self.status == "refuse":
            return f"not enough memory: {self.describe()} ({_mib(self.margin)} is kept free as a safety margin)"
        if self.status == "tight":
            how = (
                "it fits only by swapping, which is slow on an SD card"
                if self.more > self.available
                else f"less than {_mib(self.margin)} would be left"
            )
            return f"memory is tight: {self.describe()}: {how}"
        return f"memory ok: {self.describe()}"

    @property
    def hint(self) -> str:
        """What to do about a refusal."""
        advice = [
            "close other programs",
            "add swap (raise CONF_SWAPSIZE in /etc/dphys-swapfile, then 'sudo systemctl restart dphys-swapfile')",
        ]
        if self.image or self.pack:
            advice.append(
                "use a smaller image (a .bin or .elf costs less than a .hex)" + (" or no pack" if self.pack else "")
            )
        advice.append("or use --force (PIFLASH_MEMORY_GUARD=warn) to try anyway")
        return "; ".join(advice)

    def to_dict(self) -> dict:
        """JSON-friendly dict of the fields (``facts`` as :meth:`MachineFacts.to_dict`)."""
        return {
            "status": self.status,
            "operation": self.operation,
            "need": self.need,
            "baseline": self.baseline,
            "image": self.image,
            "pack": self.pack,
            "available": self.available,
            "swap_free": self.swap_free,
            "margin": self.margin,
            "held": self.held,
            "more": self.more,
            "facts": self.facts.to_dict(),
        }


def _mib(n: int) -> str:
    return f"{n / MIB:.0f} MiB"


def estimate_need(
    operation: str, image_bytes: int = 0, pack_bytes: int = 0, image_format: Optional[str] = None
) -> tuple:
    """What ``operation`` needs, as ``(baseline, image, pack)`` in bytes.

    :param operation: a key of :data:`BASELINE` (``info``, ``erase``, ``flash``, ``verify``,
        ``station``).
    :param image_bytes: size of the firmware file (bytes).
    :param pack_bytes: size of the CMSIS pack description(s) pyOCD parses
        (:func:`pack_description_bytes`); above 0, :data:`PACK_FIXED` is added too.
    :param image_format: ``"bin"``, ``"hex"``, ``"elf"``, ``"uf2"``, or None for the costliest.
    :raises ValueError: an unknown operation.
    """
    if operation not in BASELINE:
        raise ValueError(f"unknown operation {operation!r}; expected one of {', '.join(BASELINE)}")
    slope = IMAGE_SLOPE.get(image_format or "", max(IMAGE_SLOPE.values()))
    pack = PACK_FIXED + int(PACK_SLOPE * pack_bytes) if pack_bytes > 0 else 0
    return BASELINE[operation], int(slope * max(0, image_bytes)), pack


def assess_memory(
    operation: str,
    image_bytes: int = 0,
    pack_bytes: int = 0,
    image_format: Optional[str] = None,
    facts: Optional[MachineFacts] = None,
    root: Optional[PathLike] = None,
    margin: int = MARGIN,
    held: int = 0,
) -> MemoryVerdict:
    """The verdict on ``operation``, without acting on it (for ``doctor`` and reports).

    :param facts: the machine's figures; default :func:`piflash.host.machine.read_machine` of ``root``.
    :param held: bytes of the operation's peak the process that will run it already holds (its
        resident set, when it checks for itself); 0 (default) for an operation that will run in
        a new process (``doctor`` asking "would a flash fit?").
    :param root: root of the /proc and /sys files (default ``$PIFLASH_PROC_ROOT`` or ``/``).
    :param margin: bytes to keep free (default :data:`MARGIN`).
    :returns: a :class:`MemoryVerdict`; never raises MemoryGuardError.
    :raises OSError: ``/proc/meminfo`` cannot be read (not Linux).
    :raises ValueError: an unknown operation.
    """
    baseline, image, pack = estimate_need(operation, image_bytes, pack_bytes, image_format)
    facts = facts if facts is not None else read_machine(root)
    need = baseline + image + pack
    more = max(0, need - max(0, held))
    available = facts.available
    if more > available + facts.swap_free - margin:
        status = "refuse"
    elif more > available - margin:
        status = "tight"
    else:
        status = "ok"
    return MemoryVerdict(
        status, operation, need, baseline, image, pack, available, facts.swap_free, margin, facts, max(0, held)
    )


def guard_mode(profile_value: Optional[str] = None) -> str:
    """The mode in force: ``$PIFLASH_MEMORY_GUARD`` if set, else ``profile_value``, else ``refuse``.

    :raises GuardConfigError: the environment variable holds another value.
    """
    return settings.PIFLASH_MEMORY_GUARD.value() or profile_value or "refuse"


def _stderr(message: str) -> None:
    print(message, file=sys.stderr)


def check_memory(
    operation: str,
    image_bytes: int = 0,
    pack_bytes: int = 0,
    image_format: Optional[str] = None,
    *,
    mode: Optional[str] = None,
    force: bool = False,
    facts: Optional[MachineFacts] = None,
    root: Optional[PathLike] = None,
    warn: Optional[Callable[[str], None]] = None,
    held: Optional[int] = None,
) -> Optional[MemoryVerdict]:
    """Check that ``operation`` fits in memory; call this before importing pyOCD, in the process
    that will run the operation.

    :param operation: ``info``, ``erase``, ``flash``, ``verify`` or ``station``.
    :param image_bytes: firmware file size in bytes (0 for none).
    :param pack_bytes: CMSIS pack description bytes (:func:`pack_description_bytes`; 0 for none).
    :param image_format: ``"bin"``, ``"hex"``, ``"elf"``, or None (costliest assumed).
    :param mode: ``refuse``, ``warn`` or ``off``; default :func:`guard_mode` (the environment).
    :param force: never refuse (``--force``); a refusal becomes a warning.
    :param facts: the machine's figures; default read from ``root``.
    :param root: root of the /proc and /sys files; default ``$PIFLASH_PROC_ROOT`` or ``/``.
    :param warn: called with the warning text for a tight (or forced) verdict; default prints
        it on stderr.
    :param held: bytes of the peak this process already holds; default its resident set
        (:func:`piflash.host.machine.read_self_rss` of ``root``: 0 for a root without
        ``proc/self/status``).
    :returns: the :class:`MemoryVerdict`, or None when the mode is ``off`` or the machine has no
        ``/proc/meminfo`` (nothing to go on: the operation proceeds).
    :raises MemoryGuardError: (exit code 14) the verdict is ``refuse`` and neither ``force`` nor
        mode ``warn`` is given; ``exc.verdict`` is the verdict.
    :raises GuardConfigError: (exit code 2) a bad ``mode`` or ``$PIFLASH_MEMORY_GUARD``.
    """
    mode = guard_mode() if mode is None else mode
    if mode not in GUARD_MODES:
        raise GuardConfigError(f"memory guard mode must be one of {', '.join(GUARD_MODES)}, got {mode!r}")
    if mode == "off":
        return None
    try:
        held = read_self_rss(root) if held is None else held
        verdict = assess_memory(operation, image_bytes, pack_bytes, image_format, facts, root, held=held)
    except OSError:
        return None
    say = warn or _stderr
    if verdict.status == "refuse":
        if not force and mode == "refuse":
            exc = MemoryGuardError(verdict.message, hint=verdict.hint)
            exc.verdict = verdict
            raise exc
        why = "--force" if force else f"{MODE_ENV}/memory_guard is warn"
        say(f"warning: {verdict.message}; going on anyway ({why})")
    elif verdict.status == "tight":
        say(f"warning: {verdict.message}")
    return verdict


def pack_description_bytes(packs: Union[None, PathLike, Iterable[PathLike]]) -> int:
    """Bytes of ``.pdsc`` XML pyOCD will parse for the pack(s) given as its ``pack`` option.

    A pack is a zip file (the sizes of its ``*.pdsc`` members are read from the zip's
    directory, nothing is decompressed) or an unpacked directory (its top-level ``*.pdsc``
    files). Anything else, or an unreadable zip, counts with its whole file size; a missing
    path counts 0 (pyOCD reports it).

    :param packs: one path, a list of paths, or None (anything else counts 0).
    """
    if packs is None:
        return 0
    import zipfile  # only when a pack is given: it costs a few ms to import on a Pi

    if isinstance(packs, (str, os.PathLike)):
        packs = [packs]
    elif not isinstance(packs, (list, tuple)):
        return 0  # e.g. -O pack=5: the option check refuses it before pyOCD loads
    total = 0
    for pack in packs:
        if not isinstance(pack, (str, os.PathLike)):
            continue
        p = Path(pack)
        try:
            if p.is_dir():
                total += sum(f.stat().st_size for f in p.glob("*.pdsc"))
            elif zipfile.is_zipfile(p):
                with zipfile.ZipFile(p) as z:
                    total += sum(i.file_size for i in z.infolist() if i.filename.endswith(".pdsc"))
            else:
                total += p.stat().st_size
        except (OSError, zipfile.BadZipFile):
            continue
    return total
