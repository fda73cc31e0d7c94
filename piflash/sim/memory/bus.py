"""The system bus of a simulated board: address decoding for debugger and CPU accesses.

A :class:`Bus` holds non-overlapping :class:`Region` objects. The MEM-AP uses it for every
debugger access; the emulated CPU uses it for the address ranges mapped as MMIO (peripherals,
the PPB, nRF FICR/UICR, STM32 system memory). CPU accesses to RAM and flash go straight to the
emulator's memory and never come here. An access that hits no region raises :class:`BusError`
(the AHB error response that the MEM-AP turns into a SWD FAULT).
"""

from __future__ import annotations

import bisect
from typing import List, Optional

__all__ = ["BusError", "Region", "RegisterDevice", "DeviceRegion", "ZeroRegion", "Bus"]

_MASKS = {1: 0xFF, 2: 0xFFFF, 4: 0xFFFFFFFF}


class BusError(Exception):
    """An access the bus cannot complete (AHB ERROR response).

    :param address: Faulting byte address (int).
    """

    def __init__(self, address: int, message: str = "") -> None:
        super().__init__(message or "bus error at 0x%08x" % address)
        self.address = address


class Region:
    """Base class of a bus region covering ``[start, start + size)``.

    Subclasses implement :meth:`read` and :meth:`write`; the block methods default to word
    loops and may be overridden for speed. ``size`` is in bytes, values are unsigned ints
    little-endian, accesses are naturally aligned (the MEM-AP aligns them).
    """

    def __init__(self, start: int, size: int, name: str = "") -> None:
        self.start = start
        self.size = size
        self.end = start + size
        self.name = name or self.__class__.__name__

    def read(self, addr: int, size: int) -> int:
        """Read ``size`` (1, 2 or 4) bytes at absolute address ``addr``. :raises BusError:"""
        raise NotImplementedError

    def write(self, addr: int, size: int, value: int) -> None:
        """Write ``size`` bytes of ``value`` at absolute address ``addr``. :raises BusError:"""
        raise NotImplementedError

    def read_block(self, addr: int, length: int) -> bytes:
        """Read ``length`` bytes (multiple of 4, word aligned) from ``addr``."""
        return b"".join(self.read(a, 4).to_bytes(4, "little") for a in range(addr, addr + length, 4))

    def write_block(self, addr: int, data: bytes) -> None:
        """Write ``data`` (multiple of 4 bytes, word aligned) at ``addr``."""
        for i in range(0, len(data), 4):
            self.write(addr + i, 4, int.from_bytes(data[i : i + 4], "little"))


class RegisterDevice:
    """A block of 32-bit registers. Subclasses implement :meth:`read32` / :meth:`write32` with
    offsets relative to the device base; 8/16-bit accesses are derived from them (a narrow write
    does read-modify-write using :meth:`peek32`, which must have no side effects)."""

    def read32(self, offset: int) -> int:
        """Read the word register at ``offset`` (word aligned). Default: RAZ."""
        return 0

    def write32(self, offset: int, value: int) -> None:
        """Write the word register at ``offset``. Default: WI."""

    def peek32(self, offset: int) -> int:
        """Side-effect-free read used for narrow writes; default :meth:`read32`."""
        return self.read32(offset)

    def read(self, offset: int, size: int) -> int:
        """Read 1, 2 or 4 bytes at ``offset`` (naturally aligned)."""
        word = self.read32(offset & ~3)
        if size == 4:
            return word
        return (word >> (8 * (offset & 3))) & _MASKS[size]

    def write(self, offset: int, size: int, value: int) -> None:
        """Write 1, 2 or 4 bytes at ``offset`` (naturally aligned)."""
        if size == 4:
            self.write32(offset, value & 0xFFFFFFFF)
            return
        shift = 8 * (offset & 3)
        mask = _MASKS[size] << shift
        word = self.peek32(offset & ~3)
        self.write32(offset & ~3, (word & ~mask) | ((value << shift) & mask))


class DeviceRegion(Region):
    """Maps a :class:`RegisterDevice` (or any object with ``read(offset, size)`` /
    ``write(offset, size, value)``) at ``start``."""

    def __init__(self, start: int, size: int, device: RegisterDevice, name: str = "") -> None:
        super().__init__(start, size, name or type(device).__name__)
        self.device = device

    def read(self, addr: int, size: int) -> int:
        return self.device.read(addr - self.start, size)

    def write(self, addr: int, size: int, value: int) -> None:
        self.device.write(addr - self.start, size, value)


class ZeroRegion(Region):
    """Address space that exists but is not modelled: reads as zero, ignores writes (used for
    peripheral space, where unimplemented registers of the real parts read 0)."""

    def read(self, addr: int, size: int) -> int:
        return 0

    def write(self, addr: int, size: int, value: int) -> None:
        pass

    def read_block(self, addr: int, length: int) -> bytes:
        return bytes(length)

    def write_block(self, addr: int, data: bytes) -> None:
        pass


class Bus:
    """Address decoder over :class:`Region` objects."""

    def __init__(self) -> None:
        self._regions: List[Region] = []
        self._starts: List[int] = []
        self._background: List[Region] = []

    def add(self, region: Region) -> Region:
        """Add ``region``; raises ValueError if it overlaps an existing one."""
        for other in self._regions:
            if region.start < other.end and other.start < region.end:
                raise ValueError("region %s overlaps %s" % (region.name, other.name))
        i = bisect.bisect(self._starts, region.start)
        self._regions.insert(i, region)
        self._starts.insert(i, region.start)
        return region

    def add_background(self, region: Region) -> Region:
        """Add a region that only answers addresses no normal region covers (e.g. the whole
        peripheral space as :class:`ZeroRegion` beneath the modelled peripherals)."""
        self._background.append(region)
        return region

    def find(self, addr: int) -> Optional[Region]:
        """Region containing ``addr``, or None."""
        i = bisect.bisect(self._starts, addr) - 1
        if i >= 0 and addr < self._regions[i].end:
            return self._regions[i]
        for region in self._background:
            if region.start <= addr < region.end:
                return region
        return None

    def _region(self, addr: int) -> Region:
        region = self.find(addr)
        if region is None:
            raise BusError(addr)
        return region

    def _span_end(self, addr: int, region: Region) -> int:
        # End of the run of addresses from ``addr`` served by ``region``: a background region
        # stops at the next normal region.
        if region in self._background:
            i = bisect.bisect(self._starts, addr)
            if i < len(self._starts):
                return min(region.end, self._starts[i])
        return region.end

    def read(self, addr: int, size: int) -> int:
        """Read ``size`` bytes at ``addr``. :raises BusError: unmapped address."""
        return self._region(addr).read(addr, size)

    def write(self, addr: int, size: int, value: int) -> None:
        """Write ``size`` bytes at ``addr``. :raises BusError: unmapped address."""
        self._region(addr).write(addr, size, value)

    def read_block(self, addr: int, length: int) -> bytes:
        """Read ``length`` bytes (word multiple) from ``addr``, possibly across regions.
        :raises BusError: at the first unmapped word."""
        out = []
        end = addr + length
        while addr < end:
            region = self._region(addr)
            n = min(end, self._span_end(addr, region)) - addr
            out.append(region.read_block(addr, n))
            addr += n
        return b"".join(out)

    def write_block(self, addr: int, data: bytes) -> None:
        """Write ``data`` (word multiple) at ``addr``, possibly across regions. Words before an
        unmapped one are written. :raises BusError: at the first unmapped word."""
        pos = 0
        while pos < len(data):
            region = self._region(addr + pos)
            n = min(len(data) - pos, self._span_end(addr + pos, region) - (addr + pos))
            region.write_block(addr + pos, data[pos : pos + n])
            pos += n
