"""Flash cell arrays: erase to 0xFF, programming only clears bits, plus the bus view of them.

The authoritative contents are a ``bytearray``; "mirrors" (the emulated CPU's read/execute-only
copy of main flash and of the STM32 boot alias) are updated on every change. The CPU cannot
write its copy: a store into flash raises unicorn's write-protection hook, which hands the store
to the flash controller and suppresses the raw write (see :mod:`piflash.sim.cpu`), so every
change goes through the controller and this class, exactly once.
"""

from __future__ import annotations

from typing import Callable, Dict, List, Optional, Protocol

from piflash.sim.faults import Faults
from piflash.sim.memory.bus import Region
from piflash.sim.specs import NvmSpec

__all__ = ["NvmArray", "NvmController", "NvmRegion"]


class NvmController(Protocol):
    """What a flash controller model offers the bus: handling of a write into its array."""

    def store(self, addr: int, size: int, value: int) -> None:
        """A bus write of ``size`` bytes (1, 2, 4) of ``value`` at flash address ``addr``."""


class NvmArray:
    """One flash array (main flash or UICR) and its cell semantics.

    :param spec: Address range and page size.
    :param image: Initial contents, exactly ``spec.size`` bytes.
    :param faults: The board's shared :class:`~piflash.sim.faults.Faults` (write_protect and
        bit_flip are applied here).
    :param stats: The board's counters dict; ``erase_ops``, ``program_ops`` and
        ``program_bytes`` are incremented here.
    """

    def __init__(self, spec: NvmSpec, image: bytes, faults: Faults, stats: Dict[str, int]) -> None:
        if len(image) != spec.size:
            raise ValueError("image for %s must be %d bytes" % (spec.name, spec.size))
        self.spec = spec
        self.name = spec.name
        self.start = spec.start
        self.size = spec.size
        self.page_size = spec.page_size
        self.data = bytearray(image)
        self.faults = faults
        self.stats = stats
        #: Set whenever contents change; the board clears it after flushing the CPU's
        #: translation cache.
        self.dirty = False
        #: Incremented on every change (the probe skips saving an unchanged board).
        self.version = 0
        self._mirrors: List[Callable[[int, bytes], None]] = []
        self._lazy: List[List[object]] = []  # [write, lo, hi] with a pending dirty range
        #: Called as ``observer(op, nbytes)`` after every cell operation (``op`` is
        #: ``"erase_page"``, ``"erase_all"``, ``"program"`` or a serial flash's
        #: ``"erase_block32"``/``"erase_block64"``), and with ``"spi_cycles"`` (core clock cycles)
        #: for the bytes a boot ROM shifts over a serial flash's SPI bus; a timing model uses it to charge the
        #: operation's datasheet time. None: nobody listens.
        self.observer: Optional[Callable[[str, int], None]] = None
        #: Whether the array's last operation is still running, on the clock of whoever charges
        #: its time (a probe's virtual clock); None: operations end at once. A serial flash
        #: reports it as the BUSY status bit.
        self.busy_probe: Optional[Callable[[], bool]] = None

    def add_mirror(self, write: Callable[[int, bytes], None], lazy: bool = False) -> None:
        """Call ``write(offset, data)`` for every later change (and once now with everything).
        A ``lazy`` mirror is only brought up to date by :meth:`sync_mirrors` (used for the
        STM32 boot alias: one emulator write per run instead of one per programmed half-word)."""
        write(0, bytes(self.data))
        if lazy:
            self._lazy.append([write, self.size, 0])
        else:
            self._mirrors.append(write)

    def sync_mirrors(self) -> None:
        """Write pending changes to the lazy mirrors."""
        for entry in self._lazy:
            write, lo, hi = entry
            if lo < hi:
                write(lo, bytes(self.data[lo:hi]))
                entry[1], entry[2] = self.size, 0

    # -- queries -----------------------------------------------------------------------------
    def contains(self, addr: int) -> bool:
        """Whether flash address ``addr`` is in this array."""
        return self.start <= addr < self.start + self.size

    def page_base(self, addr: int) -> int:
        """Start address of the page containing ``addr``."""
        return addr - (addr - self.start) % self.page_size

    def is_protected(self, addr: int) -> bool:
        """Whether the page containing ``addr`` is write-protected (fault ``write_protect``)."""
        return self.faults.is_protected(self.page_base(addr))

    def any_protected(self) -> bool:
        """Whether any page of this array is write-protected."""
        return any(self.contains(a) for a in self.faults.write_protect)

    def read(self, addr: int, length: int) -> bytes:
        """``length`` bytes from flash address ``addr``."""
        off = addr - self.start
        return bytes(self.data[off : off + length])

    def read_int(self, addr: int, size: int) -> int:
        """Little-endian unsigned value of ``size`` bytes at ``addr``."""
        off = addr - self.start
        return int.from_bytes(self.data[off : off + size], "little")

    def snapshot(self) -> bytes:
        """A copy of the whole array."""
        return bytes(self.data)

    # -- cell operations (callers check protection / controller state) ---------------------
    def _changed(self, off: int, data: bytes) -> None:
        self.data[off : off + len(data)] = data
        for write in self._mirrors:
            write(off, data)
        for entry in self._lazy:
            entry[1] = min(entry[1], off)
            entry[2] = max(entry[2], off + len(data))
        self.dirty = True
        self.version += 1

    def erase_page(self, addr: int) -> None:
        """Set the page containing ``addr`` to 0xFF."""
        self._changed(self.page_base(addr) - self.start, b"\xff" * self.page_size)
        self.stats["erase_ops"] = self.stats.get("erase_ops", 0) + 1
        if self.observer is not None:
            self.observer("erase_page", self.page_size)

    def erase_range(self, addr: int, length: int, op: str) -> None:
        """Set ``length`` bytes from ``addr`` (whole pages) to 0xFF as one operation ``op`` (a
        serial flash's 32/64 KiB block erase: ``"erase_block32"``, ``"erase_block64"``), which
        the observer is told once."""
        self._changed(addr - self.start, b"\xff" * length)
        self.stats["erase_ops"] = self.stats.get("erase_ops", 0) + 1
        if self.observer is not None:
            self.observer(op, length)

    def erase_all(self) -> None:
        """Set the whole array to 0xFF."""
        self._changed(0, b"\xff" * self.size)
        self.stats["erase_ops"] = self.stats.get("erase_ops", 0) + 1
        if self.observer is not None:
            self.observer("erase_all", self.size)

    def program(self, addr: int, data: bytes) -> None:
        """Program ``data`` at ``addr``: each stored bit becomes ``old AND new`` (NOR flash can
        only clear bits), then the ``bit_flip`` fault is applied to the affected byte."""
        off = addr - self.start
        new = bytearray(a & b for a, b in zip(self.data[off : off + len(data)], data))
        flip: Optional[Dict[str, int]] = self.faults.bit_flip
        if flip is not None and addr <= flip["address"] < addr + len(data):
            new[flip["address"] - addr] ^= 1 << flip["bit"]
        self._changed(off, bytes(new))
        self.stats["program_ops"] = self.stats.get("program_ops", 0) + 1
        self.stats["program_bytes"] = self.stats.get("program_bytes", 0) + len(data)
        if self.observer is not None:
            self.observer("program", len(data))


class NvmRegion(Region):
    """Bus view of an :class:`NvmArray`: reads come from the cells, writes go to the flash
    controller (``controller.store``) as the real AHB flash interface does.

    :param alias_start: Map the array at this address instead of its own (STM32 boot alias).
    """

    def __init__(self, nvm: NvmArray, controller: NvmController, alias_start: Optional[int] = None) -> None:
        start = nvm.start if alias_start is None else alias_start
        super().__init__(start, nvm.size, "%s%s" % (nvm.name, "" if alias_start is None else "-alias"))
        self.nvm = nvm
        self.controller = controller
        self._delta = nvm.start - start

    def read(self, addr: int, size: int) -> int:
        return self.nvm.read_int(addr + self._delta, size)

    def read_block(self, addr: int, length: int) -> bytes:
        return self.nvm.read(addr + self._delta, length)

    def write(self, addr: int, size: int, value: int) -> None:
        self.controller.store(addr + self._delta, size, value)

    def write_block(self, addr: int, data: bytes) -> None:
        for i in range(0, len(data), 4):
            self.controller.store(addr + self._delta + i, 4, int.from_bytes(data[i : i + 4], "little"))
