"""Several flash pages per flash-algorithm call: fewer round trips between pages.

pyOCD calls a flash algorithm's ``ProgramPage(address, size, buffer)`` once per page of the
region (``Flash.start_program_page_with_buffer`` passes the region's page size). Each call costs
USB round trips while the flash controller idles: writing the core registers, resuming, polling
DHCSR until the algorithm halts, reading the result. On an nRF51 (1 KiB pages) that is 240 calls
for MicroPython; on a CMSIS-DAP v1 probe every round trip is a 1 ms USB frame that also cannot
carry image data.

A CMSIS flash algorithm's ``ProgramPage`` takes the byte count as an argument; the algorithms
listed in :data:`KNOWN_ALGORITHMS` program any count that is a multiple of their write unit,
across page boundaries (a loop over words or half-words, each waiting for the controller). For
those, :class:`RunProgrammer` programs runs of consecutive pages of up to :attr:`Layout.run_size`
bytes per call, double buffered in target RAM above the algorithm and its stack
(:func:`free_window`). Any other algorithm keeps pyOCD's one page per call: a list, not a
guess, because an algorithm written for one page at a time (a page buffer in the controller, a
per-page command) would silently program only the first page.

The calls use pyOCD's public target API (``write_memory_block8``, ``write_core_registers_raw``,
``resume``) and ``Flash.wait_for_completion``, the same sequence as pyOCD's
``Flash._call_function`` (pyocd/flash/flash.py).
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass
from typing import Callable, List, Optional, Sequence, Tuple

__all__ = ["KNOWN_ALGORITHMS", "MAX_RUN_BYTES", "Layout", "algorithm_digest",
           "free_window", "layout_for", "group_runs", "RunProgrammer"]

#: Flash algorithms whose ProgramPage programs any multiple of the write unit across pages,
#: keyed by the first 16 hex digits of the SHA-256 of their instruction words (little-endian).
#: Each was checked by running its instructions on piflash's simulated core over several pages
#: in one call (tests/test_multipage.py); a different build of the same algorithm has another
#: digest and is not assumed to behave the same.
KNOWN_ALGORITHMS = {
    # pyOCD 0.46 pyocd/target/builtin/target_nRF51822_xxAA.py and target_nRF52840_xxAA.py
    # (the same NVMC code): ProgramPage writes sz/4 words, polling NVMC.READY after each.
    "43643eff0906aec4": "pyOCD nRF5x NVMC",
    # pyOCD 0.46 pyocd/target/builtin/target_STM32F103RC.py: ProgramPage writes sz/2 half-words
    # with FLASH_CR.PG set, polling FLASH_SR.BSY after each.
    "7e66464399e4fc20": "pyOCD STM32F10x high-density FPEC",
}
#: Largest run per call, bytes. Longer runs save more calls, but the last run's programming is
#: not overlapped with any transfer and the first run's transfer with no programming: 8 KiB is
#: 84 ms of nRF52840 writes (41 us per word) against about 10 round trips saved per call.
MAX_RUN_BYTES = 8 * 1024


def algorithm_digest(flash_algo: dict) -> str:
    """The key of :data:`KNOWN_ALGORITHMS` for a pyOCD flash algorithm dict: the first 16 hex
    digits of the SHA-256 of its ``instructions`` (32-bit words, little-endian)."""
    words = flash_algo["instructions"]
    return hashlib.sha256(struct.pack("<%dI" % len(words), *words)).hexdigest()[:16]


@dataclass(frozen=True)
class Layout:
    """Where the runs go: two buffers of ``run_size`` bytes at ``buffers`` (addresses)."""

    buffers: Tuple[int, int]
    run_size: int
    algorithm: str


def free_window(flash) -> Optional[Tuple[int, int]]:
    """The RAM of the algorithm's region above both its code and its initial stack pointer:
    (start, end exclusive), or None when the stack is not in RAM.

    pyOCD's CRC32 analyzer lives in this RAM too (``analyzer_address``), but only for the length
    of one ``Flash.compute_crcs`` call, which writes the analyzer's code there again every time
    (pyocd/flash/flash.py): the run buffers (used only inside :meth:`RunProgrammer.program`) and
    :mod:`piflash.flashcheck`'s code (used only between its own calls) never overlap such a
    call, so the window includes it.

    :param flash: pyOCD ``Flash`` with a ``flash_algo``.
    """
    algo = flash.flash_algo
    top_of_algo = max(flash.end_flash_algo, algo["begin_stack"])
    ram = flash.target.memory_map.get_region_for_address(algo["begin_stack"] - 1)
    if ram is None or not ram.is_ram or top_of_algo > ram.end:
        return None
    return top_of_algo, ram.end + 1


def layout_for(flash, page_size: int) -> Optional[Layout]:
    """Two run buffers for ``flash`` (a pyOCD ``Flash`` with its algorithm loaded or not), or
    None when its algorithm is not in :data:`KNOWN_ALGORITHMS`, has fewer than two page buffers
    (pyOCD's single-buffer path is kept), or there is no room for two runs of two pages.

    :param page_size: The region's page size, bytes; runs are whole pages.
    """
    algo = getattr(flash, "flash_algo", None)
    if not algo or len(algo.get("page_buffers", ())) < 2:
        return None
    name = KNOWN_ALGORITHMS.get(algorithm_digest(algo))
    if name is None:
        return None
    window = free_window(flash)
    if window is None:
        return None
    start = (window[0] + 3) & ~3
    run = min(MAX_RUN_BYTES, (window[1] - start) // 2) // page_size * page_size
    if run < 2 * page_size:
        return None
    return Layout((start, start + run), run, name)


def group_runs(pages: Sequence[Tuple[int, bytes]], run_size: int,
               first_run: Optional[int] = None) -> List[Tuple[int, bytes]]:
    """Join consecutive pages into runs of at most ``run_size`` bytes.

    :param pages: (address, data) per page, in address order.
    :param first_run: Limit of the first run, bytes (default ``run_size``); each later run may
        be twice the one before, up to ``run_size``. Nothing programs while the first run
        crosses the probe, so a short one starts the flash early; each later run crosses while
        the one before programs, and twice the bytes cross in about the time the flash
        programs them on a link that is not much faster than the flash.
    :returns: (address, data) per run; a gap between pages starts a new run.
    """
    runs: List[Tuple[int, bytearray]] = []
    for address, data in pages:
        if len(runs) > 1:
            limit = min(run_size, 2 * len(runs[-2][1]))
        else:
            limit = first_run or run_size
        if runs and runs[-1][0] + len(runs[-1][1]) == address and len(runs[-1][1]) + len(data) <= limit:
            runs[-1][1].extend(data)
        else:
            runs.append((address, bytearray(data)))
    return [(a, bytes(d)) for a, d in runs]


class RunProgrammer:
    """Program runs of pages with one ``ProgramPage`` call each, double buffered.

    :param flash: pyOCD ``Flash`` of the region, already ``init(Operation.PROGRAM)``-ed.
    :param layout: From :func:`layout_for`.
    """

    def __init__(self, flash, layout: Layout) -> None:
        self.flash = flash
        self.layout = layout

    def _load(self, buffer: int, address: int, data: bytes) -> None:
        data = self.flash.override_security_bits(address, list(data))
        self.flash.target.write_memory_block8(self.layout.buffers[buffer], data)

    def _start(self, buffer: int, address: int, size: int) -> None:
        algo = self.flash.flash_algo
        self.flash.target.write_core_registers_raw(
            ["pc", "r0", "r1", "r2", "lr"],
            [algo["pc_program_page"], address, size, self.layout.buffers[buffer], algo["load_address"] + 1])
        self.flash.target.resume()

    def program(self, runs: Sequence[Tuple[int, bytes]], done: Callable[[int], None]) -> None:
        """Program ``runs`` ((address, data), each at most ``layout.run_size`` bytes): the next
        run crosses the probe while the target programs the current one.

        :param done: Called with each run's byte count when it is programmed.
        :raises pyocd.core.exceptions.FlashProgramFailure: The algorithm returned non-zero or
            timed out (``address`` is the run's first byte).
        """
        from pyocd.core.exceptions import FlashProgramFailure

        if not runs:
            return
        flash = self.flash
        timeout = flash.target.session.options.get("flash.timeout.program")
        self._load(0, *runs[0])
        buf = 0
        for i, (address, data) in enumerate(runs):
            self._start(buf, address, len(data))
            if i + 1 < len(runs):
                self._load(1 - buf, *runs[i + 1])
            result = flash.wait_for_completion(timeout=timeout)
            if result != 0:
                what = "timeout" if result == flash.TIMEOUT_ERROR else "failure"
                raise FlashProgramFailure(f"flash program {what} ({len(data)} bytes in one call)",
                                          address=address, result_code=result)
            buf = 1 - buf
            done(len(data))
