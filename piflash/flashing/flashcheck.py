"""Blank check and CRC-32 of flash blocks on the target, with piflash's own code.

pyOCD's CRC32 analyzer (``Flash.compute_crcs``, pyocd/flash/flash.py) is the only on-target
check pyOCD offers. On a board fresh from the factory the plan's CRC pass over every page only
learns that the pages are blank, and it costs the analyzer's CRC time: about 15 core cycles per
byte, 0.24 s for MicroPython on a 16 MHz nRF51 (benchmarks/real_probe.py), while a blank check
can stop reading a page at its first programmed word and otherwise needs about one cycle per
byte. The analyzer is also
re-loaded (1.5 KiB over the probe) on every call.

``targetcode/flashcheck.c``, built with Debian's gcc-arm-none-eabi into
``piflash/data/flashcheck.bin`` (``make -C targetcode``; tests/sim/test_flashcheck.py rebuilds it
and compares the bytes), has two routines, Cortex-M0 instructions only so one binary serves every
core:

* ``fc_blank(runs, nruns, bitmap, erased_word)``: per block, whether any word differs from
  the erased word (a page that is not blank stops at its first programmed word);
* ``fc_crc32(runs, nruns, crcs, table)``: the CRC-32 of each block, the one ``binascii.crc32``
  computes, four bytes at a time through a 1 KiB table it builds in RAM first (about 7 cycles
  per byte).

:class:`FlashCheck` loads the binary into the RAM the flash algorithm leaves free
(:func:`piflash.flashing.multipage.free_window`) and calls the routines the way pyOCD calls a flash
algorithm (pyOCD's ``Flash._call_function``): the arguments in R0-R3, SP at the flash algorithm's initial
stack pointer (``begin_stack``), xPSR's Thumb bit, LR on the ``BKPT`` at the binary's first byte,
``resume``, then ``Flash.wait_for_completion``. The core must be halted. The routines only read
the flash through the bus: whether the algorithm must be initialised first for that is the
caller's concern (:func:`piflash.flashing.plan.init_for_read`).
"""

from __future__ import annotations

import functools
import struct
from importlib import resources
from typing import TYPE_CHECKING, Iterator, List, Optional, Sequence, Tuple

from piflash.flashing import multipage

if TYPE_CHECKING:
    from pyocd.flash.flash import Flash

__all__ = ["FlashCheck", "binary", "runs_of", "MAGIC"]

#: The binary's second word: the check that the header read is flashcheck.bin's.
MAGIC = 0x4B434650  # "PFCK"
#: Bytes of the CRC table ``fc_crc32`` fills: 256 words.
TABLE_BYTES = 1024
#: Bytes per run descriptor (address, block size, block count: three 32-bit words).
RUN_BYTES = 12
#: Largest argument + result area per call, bytes: the window's rest may be smaller.
MAX_IO_BYTES = 4096
#: xPSR with only the T (Thumb state) bit set, bit 24 (ARMv6-M ARM DDI 0419E B1.4.2; pyOCD's
#: ``CortexM.XPSR_THUMB``): resuming with it clear would fault at the first instruction.
_XPSR_THUMB = 1 << 24


@functools.lru_cache(maxsize=1)
def binary() -> bytes:
    """The contents of ``piflash/data/flashcheck.bin`` (bytes; read once per process)."""
    return resources.files("piflash").joinpath("data/flashcheck.bin").read_bytes()


def runs_of(blocks: Sequence[Tuple[int, int]]) -> List[Tuple[int, int, int]]:
    """Join ``blocks`` ((address, size) in bytes) into runs ``(address, size, count)`` of
    contiguous blocks of one size, keeping their order.

    :raises ValueError: an address or size that is not a multiple of 4, or a size of 0.
    """
    runs: List[List[int]] = []
    for address, size in blocks:
        if address % 4 or size % 4 or size <= 0:
            raise ValueError(f"flash check block {address:#x}+{size:#x} is not whole words")
        if runs and runs[-1][1] == size and runs[-1][0] + runs[-1][1] * runs[-1][2] == address:
            runs[-1][2] += 1
        else:
            runs.append([address, size, 1])
    return [(r[0], r[1], r[2]) for r in runs]


class FlashCheck:
    """piflash's on-target blank check and CRC-32 for one pyOCD ``Flash``.

    Build with :meth:`for_flash`. The window's RAM is free between flash operations only: the
    multi-page programmer keeps its run buffers there, so the code is loaded again by each
    :class:`FlashCheck` (600 bytes over the probe) and the object is used between two operations,
    not across a program.

    :param flash: the region's ``pyocd.flash.flash.Flash``, its algorithm initialised.
    :param window: (start, end exclusive) RAM addresses free for the code, the table and the
        arguments (:func:`piflash.flashing.multipage.free_window`).
    """

    def __init__(self, flash: Flash, window: Tuple[int, int]) -> None:
        self.flash = flash
        self._code = binary()
        magic, blank_entry, crc_entry = struct.unpack_from("<3I", self._code, 4)
        if magic != MAGIC:
            raise ValueError("piflash/data/flashcheck.bin has no PFCK header")
        self.code_address = (window[0] + 3) & ~3
        self.table_address = (self.code_address + len(self._code) + 3) & ~3
        self.io_address = self.table_address + TABLE_BYTES
        self.io_bytes = min(MAX_IO_BYTES, (window[1] - self.io_address) & ~3)
        self._entries = {"blank": self.code_address + blank_entry, "crc32": self.code_address + crc_entry}
        self._loaded = False

    @classmethod
    def for_flash(cls, flash: Flash) -> Optional["FlashCheck"]:
        """A :class:`FlashCheck` for ``flash``, or None when its algorithm leaves no RAM window
        with room for the code, the table and 256 bytes of arguments (then pyOCD's analyzer or
        a read-back does the job)."""
        if not getattr(flash, "flash_algo", None):
            return None
        window = multipage.free_window(flash)
        if window is None:
            return None
        check = cls(flash, window)
        return check if check.io_bytes >= 256 else None

    def _call(self, entry: str, r0: int, r1: int, r2: int, r3: int) -> int:
        from pyocd.core.exceptions import FlashFailure

        target = self.flash.target
        if not self._loaded:
            target.write_memory_block8(self.code_address, list(self._code))
            self._loaded = True
        target.write_core_registers_raw(
            ["pc", "r0", "r1", "r2", "r3", "sp", "xpsr", "lr"],
            [
                self._entries[entry],
                r0,
                r1,
                r2,
                r3,
                self.flash.flash_algo["begin_stack"],
                _XPSR_THUMB,
                self.code_address + 1,
            ],
        )
        target.resume()
        result: int = self.flash.wait_for_completion(timeout=target.session.options.get("flash.timeout.analyzer"))
        if result == self.flash.TIMEOUT_ERROR:
            raise FlashFailure(f"piflash's on-target flash check ({entry}) timed out")
        return result

    def _batches(self, blocks: Sequence[Tuple[int, int]], result_bytes: int) -> Iterator[List[Tuple[int, int]]]:
        """Split ``blocks`` so that one call's run descriptors plus ``result_bytes`` per block
        (and a word of rounding) fit the I/O area; yields lists of blocks, in order."""
        batch: List[Tuple[int, int]] = []
        nruns = 0
        for address, size in blocks:
            joins = bool(batch) and batch[-1][1] == size and batch[-1][0] + size == address
            need = (nruns + (not joins)) * RUN_BYTES + (len(batch) + 1) * result_bytes + 4
            if batch and need > self.io_bytes:
                yield batch
                batch, nruns, joins = [], 0, False
            batch.append((address, size))
            nruns += not joins
        if batch:
            yield batch

    def blank(self, blocks: Sequence[Tuple[int, int]], erased_byte: int = 0xFF) -> List[bool]:
        """Whether each block ((address, size) in bytes, multiples of 4) holds only
        ``erased_byte``.

        :returns: one bool per block, in order.
        :raises ValueError: a block that is not whole words.
        :raises pyocd.core.exceptions.FlashFailure: the routine timed out
            (``flash.timeout.analyzer``) or did not halt; transfer errors from pyOCD.
        """
        out: List[bool] = []
        for batch in self._batches(blocks, 1):  # a bit per block, rounded up below
            runs = runs_of(batch)
            bitmap = self.io_address + len(runs) * RUN_BYTES
            words = (len(batch) + 31) // 32
            self.flash.target.write_memory_block32(self.io_address, [w for r in runs for w in r])
            done = self._call("blank", self.io_address, len(runs), bitmap, erased_byte * 0x01010101)
            if done != len(batch):
                _raise_bad_result("blank", done, len(batch))
            bits = self.flash.target.read_memory_block32(bitmap, words)
            out.extend(not (bits[i // 32] >> (i % 32)) & 1 for i in range(len(batch)))
        return out

    def crc32(self, blocks: Sequence[Tuple[int, int]]) -> List[int]:
        """The CRC-32 of each block ((address, size) in bytes, multiples of 4), as
        ``binascii.crc32`` of its bytes (unsigned).

        :raises ValueError: a block that is not whole words.
        :raises pyocd.core.exceptions.FlashFailure: as :meth:`blank`.
        """
        out: List[int] = []
        for batch in self._batches(blocks, 4):
            runs = runs_of(batch)
            crcs = self.io_address + len(runs) * RUN_BYTES
            self.flash.target.write_memory_block32(self.io_address, [w for r in runs for w in r])
            done = self._call("crc32", self.io_address, len(runs), crcs, self.table_address)
            if done != len(batch):
                _raise_bad_result("crc32", done, len(batch))
            out.extend(self.flash.target.read_memory_block32(crcs, len(batch)))
        return out


def _raise_bad_result(entry: str, done: int, expected: int) -> None:
    """Raise the FlashFailure for a routine that returned another block count than asked:
    its code or arguments in RAM were not what the host wrote."""
    from pyocd.core.exceptions import FlashFailure

    raise FlashFailure(
        f"piflash's on-target flash check ({entry}) returned {done:#x} for "
        f"{expected} blocks: its code or arguments in target RAM were changed"
    )
