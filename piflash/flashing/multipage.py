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
(:func:`free_window`). Where the first calls' polls show that the probe moves a run's bytes in
well under the time the flash takes to program them (:func:`link_outpaces_flash`), later calls
join runs, doubling up to :data:`GROW_BYTES`: on a slower link a longer run would leave the
flash idle while it crosses, and programming the last one would follow the last transfer.
Any other algorithm keeps pyOCD's one page per call: a list, not a guess, because an algorithm
written for one page at a time (a page buffer in the controller, a per-page command) would
silently program only the first page.

Each call goes through piflash's run caller (``targetcode/runcall.S``, shipped as
``piflash/data/runcall.bin``): a few instructions in the algorithm's stack RAM that take the
address and byte count from a mailbox written with the previous call's poll, call ``ProgramPage``
and halt on BKPT. Starting a call is then one register write (PC) and a resume, and finishing it
one read of DHCSR and of the result word: two USB round trips per call where pyOCD's
``Flash._call_function`` and ``wait_for_completion`` take nine (register writes for PC, R0-R2 and
LR with a DHCSR read each, a halt check before and after, reading R0). On a CMSIS-DAP v1 probe
each of those is a 1 ms report that carries no image data.

The host side uses pyOCD's public target API only: ``write_memory_block8``, ``write_memory`` and
``read_memory`` (deferred, so a call's start crosses the probe in the same queue as the next
run's data) and ``write_core_registers_raw``; the debug registers it writes (DCRDR, DCRSR, DFSR,
DHCSR) are the architecture's, with the values pyOCD's ``CortexM.write_core_register_raw`` and
``resume`` write (ARMv6-M ARM DDI 0419E C1.6; ARMv7-M ARM DDI 0403E C1.6).
"""

from __future__ import annotations

import functools
import struct
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence, Tuple

if TYPE_CHECKING:
    from pyocd.flash.flash import Flash

from piflash.probe.lean_dap import lean_link, lean_poll
from piflash.targets.algorithms import RP2_ALGORITHM, algorithm_digest

__all__ = [
    "KNOWN_ALGORITHMS",
    "MEMORY_MAPPED",
    "MAX_RUN_BYTES",
    "GROW_BYTES",
    "GROW_RATIO",
    "RUN_BYTES",
    "STACK_BYTES",
    "CALLER_BYTES",
    "Layout",
    "algorithm_digest",
    "reads_without_init",
    "run_caller",
    "free_window",
    "layout_for",
    "group_runs",
    "link_outpaces_flash",
    "RunProgrammer",
]

#: Flash algorithms whose ProgramPage programs any multiple of the write unit across pages,
#: keyed by the first 16 hex digits of the SHA-256 of their instruction words (little-endian).
#: Each was checked by running its instructions on piflash's simulated core over several pages
#: in one call (tests/unit/test_multipage.py); a different build of the same algorithm has another
#: digest and is not assumed to behave the same.
#: The key of pyOCD 0.46's RP2 boot ROM algorithm (the RP2 families' own:
#: :data:`piflash.targets.algorithms.RP2_ALGORITHM`).
RP2_BOOT_ROM = RP2_ALGORITHM
KNOWN_ALGORITHMS = {
    # pyOCD 0.46 pyocd/target/builtin/target_nRF51822_xxAA.py and target_nRF52840_xxAA.py
    # (the same NVMC code): ProgramPage writes sz/4 words, polling NVMC.READY after each.
    "43643eff0906aec4": "pyOCD nRF5x NVMC",
    # pyOCD 0.46 pyocd/target/builtin/target_STM32F103RC.py: ProgramPage writes sz/2 half-words
    # with FLASH_CR.PG set, polling FLASH_SR.BSY after each.
    "7e66464399e4fc20": "pyOCD STM32F10x high-density FPEC",
    # pyOCD 0.46 pyocd/target/family/target_rp2.py (RP2040 and RP2350): ProgramPage passes its
    # address, size and buffer to the boot ROM's flash_range_program, which programs 256-byte
    # pages until the count is done (pico-bootrom-rp2040 bootrom/program_flash_generic.c).
    RP2_BOOT_ROM: "pyOCD RP2 boot ROM",
}
#: Keys of :data:`KNOWN_ALGORITHMS` whose flash the bus reads whatever the algorithm did: the nRF5x
#: NVMC's and the STM32F10x FPEC's main flash is always mapped for reading (the nRF52840 Product
#: Specification's NVMC chapter; RM0008, the STM32F10x reference manual, section 3 "Embedded Flash
#: memory"), so reading it needs no call of the algorithm's Init. The RP2 boot ROM's Init takes the
#: QSPI flash out of XIP, so its reads need :func:`piflash.targets.families.rp2_flash.enable_xip`, and the Init
#: itself unless the SSI shows the flash taking instructions
#: (:func:`piflash.targets.families.rp2_flash.reads_without_init`).
MEMORY_MAPPED = frozenset({"43643eff0906aec4", "7e66464399e4fc20"})
#: Largest run per call, bytes. Longer runs save more calls, but the last run's programming is
#: not overlapped with any transfer and the first run's transfer with no programming: 8 KiB is
#: 84 ms of nRF52840 writes (41 us per word) against about 10 round trips saved per call.
MAX_RUN_BYTES = 8 * 1024
#: Longer runs for algorithms whose flash programs much faster than that, bytes by algorithm key.
#: The RP2 boot ROM's serial flash takes 0.4 ms per 256-byte page (W25Q16JV datasheet 9.6, t_PP
#: typical) plus the page's SPI time: 16 KiB is about 28 ms of programming against about 1 ms of a
#: call's start and end. Longer runs save calls but lengthen the ramp (group_runs): a doubled run
#: crosses while one of half its size programs, and on a link about as fast as the flash (the Debug
#: Probe on the x86 host preset at 62.5 MHz SCK: 400 KiB's program phase 0.75 s against the flash's
#: own 0.69 s) the flash waits about one run's programming in all. 16 KiB against 32 KiB, 400 KiB
#: fresh on an RP2040 through the Debug Probe (``benchmarks/real_probe.py`` at 260dee8,
#: predictions): x86 1.005 against 1.024 s at a 31.25 MHz request, 1.084 against 1.097 s at 25 MHz;
#: RP2350 1 MiB 2.186 against 2.194 s; zero2w, where the host's CPU is far slower than the flash
#: and each call's polls cost it, 5.087 against 5.069 s (0.35 % slower). Runs still grow to the
#: buffer's 32 KiB on a link that outpaces the flash (:func:`link_outpaces_flash`).
RUN_BYTES = {RP2_BOOT_ROM: 16 * 1024}
#: Largest run per call once the probe has shown that it moves a run's bytes in well under the
#: time the flash takes to program them (:func:`link_outpaces_flash`), bytes: each buffer is this
#: long where the RAM allows. On such a link every call saved is a halt-to-start gap of the
#: flash: the MCU-Link's nRF52840 fresh board on the zero2w host preset goes from 2.986 to
#: 2.953 s (``benchmarks/real_probe.py --presets mculink --targets nrf52840 --host zero2w``).
GROW_BYTES = 32 * 1024
#: Largest ratio of the link's time to move a run to the flash's time to program it at which
#: runs double: a doubled run must cross while the one before it programs (ratio 0.5), with a
#: fifth kept for the poll counts' noise.
GROW_RATIO = 0.4
#: Stack kept for the algorithm between its initial stack pointer and the run caller, bytes:
#: twice the 512 bytes pyOCD gives a two-buffer algorithm at least
#: (``_MIN_TWO_BUF_STACK_SIZE``, pyocd/target/pack/flash_algo.py). tests/unit/test_multipage.py
#: checks that the known algorithms and the run caller use at most 128 of them.
STACK_BYTES = 1024
#: The run caller's code, then two mailboxes of four words (targetcode/runcall.S), bytes.
_CODE_BYTES = 32
_MAILBOX_BYTES = 16
CALLER_BYTES = _CODE_BYTES + 2 * _MAILBOX_BYTES


def reads_without_init(flash: Flash) -> bool:
    """Whether ``flash`` (a pyOCD ``Flash``) runs one of the :data:`MEMORY_MAPPED` algorithms:
    its region reads through the bus with the algorithm not initialised (nor loaded)."""
    algo: Optional[Dict[str, Any]] = getattr(flash, "flash_algo", None)
    if not algo:
        return False
    return algorithm_digest(algo) in MEMORY_MAPPED


@functools.lru_cache(maxsize=1)
def run_caller() -> bytes:
    """The run caller's instructions (``piflash/data/runcall.bin``, built from
    ``targetcode/runcall.S`` by ``make -C targetcode``), at most ``_CODE_BYTES`` bytes (read once
    per process)."""
    code = resources.files("piflash").joinpath("data/runcall.bin").read_bytes()
    if not 0 < len(code) <= _CODE_BYTES or len(code) % 2:
        raise ValueError(f"piflash/data/runcall.bin is {len(code)} bytes, not Thumb code of at most {_CODE_BYTES}")
    return code


@dataclass(frozen=True)
class Layout:
    """Where the runs go: two buffers of ``buffer_size`` bytes at ``buffers`` (addresses), runs
    grouped up to ``run_size`` bytes (at most ``buffer_size``, which runs may grow to:
    :meth:`RunProgrammer.program`), and the run caller's ``CALLER_BYTES`` at ``caller``
    (address; code, then the two mailboxes)."""

    buffers: Tuple[int, int]
    run_size: int
    algorithm: str
    caller: int
    buffer_size: int


def free_window(flash: Flash) -> Optional[Tuple[int, int]]:
    """The RAM of the algorithm's region above both its code and its initial stack pointer:
    (start, end exclusive), or None when the stack is not in RAM.

    pyOCD's CRC32 analyzer lives in this RAM too (``analyzer_address``), but only for the length
    of one ``Flash.compute_crcs`` call, which writes the analyzer's code there again every time
    (pyocd/flash/flash.py): the run buffers (used only inside :meth:`RunProgrammer.program`) and
    :mod:`piflash.flashing.flashcheck`'s code (used only between its own calls) never overlap such a
    call, so the window includes it.

    :param flash: pyOCD ``Flash`` with a ``flash_algo``.
    """
    algo = flash.flash_algo
    top_of_algo = max(flash.end_flash_algo, algo["begin_stack"])
    ram = flash.target.memory_map.get_region_for_address(algo["begin_stack"] - 1)
    if ram is None or not ram.is_ram or top_of_algo > ram.end:
        return None
    return top_of_algo, ram.end + 1


def layout_for(flash: Flash, page_size: int) -> Optional[Layout]:
    """Two run buffers and the run caller for ``flash`` (a pyOCD ``Flash`` with its algorithm
    loaded or not), or None when its algorithm is not in :data:`KNOWN_ALGORITHMS`, has fewer than
    two page buffers (pyOCD's single-buffer path is kept), or there is no room for two runs of
    two pages, or for the run caller :data:`STACK_BYTES` below the initial stack pointer and
    above the algorithm's code and the start of its static data (``static_base``; pyOCD's
    algorithm dicts give no size for that data: the known algorithms' caller sits 2.6-8.4 KiB
    above it, and tests/unit/test_multipage.py checks their stack stays clear of the caller).

    :param page_size: The region's page size, bytes; runs are whole pages.
    """
    algo = getattr(flash, "flash_algo", None)
    if not algo or len(algo.get("page_buffers", ())) < 2:
        return None
    digest = algorithm_digest(algo)
    name = KNOWN_ALGORITHMS.get(digest)
    if name is None:
        return None
    window = free_window(flash)
    if window is None:
        return None
    start = (window[0] + 3) & ~3
    buffer = min(max(GROW_BYTES, RUN_BYTES.get(digest, MAX_RUN_BYTES)), (window[1] - start) // 2)
    buffer = buffer // page_size * page_size
    run = min(RUN_BYTES.get(digest, MAX_RUN_BYTES), buffer) // page_size * page_size
    if run < 2 * page_size:
        return None
    caller = (algo["begin_stack"] - STACK_BYTES - CALLER_BYTES) & ~3
    if caller < max(flash.end_flash_algo, algo.get("static_base", 0)):
        return None
    return Layout((start, start + buffer), run, name, caller, buffer)


def group_runs(
    pages: Sequence[Tuple[int, bytes]], run_size: int, first_run: Optional[int] = None
) -> List[Tuple[int, bytes]]:
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


def link_outpaces_flash(waits: Sequence[Tuple[int, int, int]]) -> bool:
    """Whether runs may double, from calls' ``(size, next size, polls)``: the bytes the call
    programmed, the bytes of the next run that crossed the probe meanwhile, and the DHCSR polls
    that then still found the core programming.

    A call that programs ``s`` bytes while the next ``s'`` cross, then is polled ``n`` times
    before it halts, gives ``a*s = b*s' + n`` (``a``: the flash's time per byte, ``b``: the
    link's, both in poll round trips) when ``n > 0``; with ``n == 0`` the link was the slower
    and only ``a*s <= b*s'`` is known, so runs keep their size. The first two calls whose
    ratios ``s/s'`` differ (the runs' ramp doubles, then stops at ``layout.run_size``) solve
    for ``a`` and ``b``; runs double when ``b/a <= GROW_RATIO``, so that a doubled run crosses
    while the one before it programs. Polls, not seconds: the rule sees the same on real
    hardware as on the simulator's virtual clock.
    """
    if any(n <= 0 for _, _, n in waits):
        return False
    for j in range(1, len(waits)):
        for i in range(j):
            (s0, s1, n0), (t0, t1, n1) = waits[i], waits[j]
            det = s1 * t0 - s0 * t1
            if det:
                a = (s1 * n1 - t1 * n0) / det
                b = (s0 * n1 - t0 * n0) / det
                return a > 0 and b <= GROW_RATIO * a
    return False


#: Calls whose polls :func:`link_outpaces_flash` may look at before runs keep their size.
_WAITS_SEEN = 4


class RunProgrammer:
    """Program runs of pages with one ``ProgramPage`` call each, double buffered, through the
    run caller (two USB round trips per call).

    :param flash: pyOCD ``Flash`` of the region, already ``init(Operation.PROGRAM)``-ed (the
        core is halted with the algorithm's stack pointer and static base set).
    :param layout: From :func:`layout_for`.
    """

    def __init__(self, flash: Flash, layout: Layout) -> None:
        self.flash = flash
        self.layout = layout
        self.mailboxes = (layout.caller + _CODE_BYTES, layout.caller + _CODE_BYTES + _MAILBOX_BYTES)

    def _load(self, buffer: int, address: int, data: bytes) -> None:
        data = bytes(self.flash.override_security_bits(address, list(data)))
        if len(data) % 4:  # runs are whole pages; a word-aligned buffer takes words (no byte split)
            self.flash.target.write_memory_block8(self.layout.buffers[buffer], list(data))
            return
        words = struct.unpack("<%dI" % (len(data) // 4), data)
        self.flash.target.write_memory_block32(self.layout.buffers[buffer], words)

    def _post(self, buffer: int, address: int, size: int) -> None:
        """Queue the mailbox of ``buffer`` for its next call (a count is never 0)."""
        target = self.flash.target
        target.write_memory(self.mailboxes[buffer], address)
        target.write_memory(self.mailboxes[buffer] + 4, size)

    def _start(self) -> Callable[[], int]:
        """Queue PC = run caller and a resume (what pyOCD's ``write_core_register_raw('pc')``
        and ``resume`` write); returns the deferred DHCSR read taken between the two, whose
        S_REGRDY shows the PC write done before the core ran."""
        from pyocd.coresight.cortex_m import CortexM

        target = self.flash.target
        target.write_memory(CortexM.DCRDR, self.layout.caller | 1)
        target.write_memory(CortexM.DCRSR, CortexM.DCRSR_REGWnR | _REGSEL_PC)
        regrdy: Callable[[], int] = target.read_memory(CortexM.DHCSR, now=False)
        target.write_memory(CortexM.DFSR, _DFSR_ALL)
        target.write_memory(CortexM.DHCSR, CortexM.DBGKEY | CortexM.C_DEBUGEN)
        return regrdy

    def _failed_page(self, address: int, data: bytes) -> Optional[int]:
        """After ``ProgramPage`` failed on the run ``(address, data)``: the first page whose flash
        differs from ``data`` (read back once, only on this failure), the page the algorithm
        stopped at; None if every page reads as written or the read fails. The algorithm's
        result says only that the call failed (the error once named the run's
        first page)."""
        page_size = self.flash.region.page_size
        try:
            got = bytes(self.flash.target.read_memory_block8(address, len(data)))
        except Exception:  # noqa: BLE001 - a diagnosis only: the failure itself is raised
            return None
        for offset in range(0, len(data), page_size):
            if got[offset : offset + page_size] != data[offset : offset + page_size]:
                return address + offset
        return None

    def _wait(
        self,
        buffer: int,
        address: int,
        data: bytes,
        timeout: Optional[float],
        regrdy: Optional[Callable[[], int]],
        post: Optional[Tuple[int, int, int]],
    ) -> int:
        """Poll DHCSR until the core halts, then check the result word of ``buffer``'s mailbox.
        ``post`` (buffer, address, size) rides in the first poll's report.

        :returns: the polls that found the core still running (int).

        :raises pyocd.core.exceptions.FlashProgramFailure: ``ProgramPage`` returned non-zero (the
            failing page named, :meth:`_failed_page`);
            the core halted before it returned (the count still in the mailbox); the PC write
            was not taken (DHCSR.S_REGRDY clear in the read between it and the resume: a
            diagnosis after the fact, the resume was already queued); the core locked up (a
            fault: nothing sets a vector catch, so a fault never halts it); or ``timeout``
            seconds passed. The core is halted again on the last three.
        """
        from pyocd.core.exceptions import FlashProgramFailure
        from pyocd.coresight.cortex_m import CortexM

        from piflash.targets.families.base import Deadline, target_simulated

        target = self.flash.target
        # "flash program failed: the core ..." is what piflash.probe.pyocd_errors.translate_error gives
        # the hint of a core that did not run the algorithm to its end.
        size = len(data)
        what = f"({size} bytes from {address:#010x} in one call)"
        if post is not None:
            self._post(*post)
        running = 0
        poll = _poll_packet(CortexM.DHCSR, self.mailboxes[buffer] + 4)
        link = lean_link(target.session)
        # Bounded on the probe's clock: real time on hardware, polls on a simulated probe
        # (Deadline; issue 42 item 4: a simulated flash never reads the wall clock).
        deadline = Deadline(timeout if timeout is not None else float("inf"), target_simulated(target))
        while not deadline.expired():
            words = _lean_words(link, poll) if running and link is not None else None
            dhcsr: Callable[[], int]
            result_word: Callable[[], int]
            if words is not None:
                dhcsr, result_word = (lambda: words[0]), (lambda: words[1])
            else:
                dhcsr = target.read_memory(CortexM.DHCSR, now=False)
                result_word = target.read_memory(self.mailboxes[buffer] + 4, now=False)
            if regrdy is not None:
                if not regrdy() & CortexM.S_REGRDY:
                    target.halt()
                    raise FlashProgramFailure(
                        f"flash program failed: the core took no start address (DHCSR.S_REGRDY clear) {what}",
                        address=address,
                    )
                regrdy = None
            status = dhcsr()
            if status & CortexM.S_LOCKUP:
                break
            if status & CortexM.S_HALT:
                result = result_word()
                if result == size:
                    raise FlashProgramFailure(
                        f"flash program failed: the core halted before the flash algorithm returned {what}",
                        address=address,
                    )
                if result != 0:
                    page = self._failed_page(address, data)
                    where = (
                        f"at page {page:#010x} " if page is not None else ""
                    ) + f"({size} bytes from {address:#010x} in one call)"
                    raise FlashProgramFailure(
                        f"flash program failure {where}",
                        address=page if page is not None else address,
                        result_code=result,
                    )
                return running
            running += 1
        locked = target.read32(CortexM.DHCSR) & CortexM.S_LOCKUP
        target.halt()
        if locked:
            raise FlashProgramFailure(
                f"flash program failed: the core locked up in the flash algorithm (a fault) {what}", address=address
            )
        raise FlashProgramFailure(
            f"flash program timed out {what}", address=address, result_code=self.flash.TIMEOUT_ERROR
        )

    def program(self, runs: Sequence[Tuple[int, bytes]], done: Callable[[int], None]) -> None:
        """Program ``runs`` ((address, data), each at most ``layout.run_size`` bytes): the next
        run crosses the probe while the target programs the current one.

        When the first calls show the link moving bytes much faster than the flash programs
        them (:func:`link_outpaces_flash`), each later call joins the contiguous runs that
        follow into one of up to twice the one before, up to ``layout.buffer_size``: fewer
        calls, each the same bytes in the same order.

        :param done: Called with each run's byte count when it is programmed.
        :raises pyocd.core.exceptions.FlashProgramFailure: The algorithm returned non-zero
            (``address``: the first page that does not read back as written, else the run's
            first byte), the core did not run it to its end, or it timed out (``address``: the
            run's first byte; the messages of :meth:`_wait`).
        """
        if not runs:
            return
        flash, target, layout = self.flash, self.flash.target, self.layout
        timeout = target.session.options.get("flash.timeout.program")
        mailbox = [0, 0, layout.buffers[0], 0, 0, 0, layout.buffers[1], 0]
        target.write_memory_block8(
            layout.caller, list(run_caller().ljust(_CODE_BYTES, b"\0") + struct.pack("<8I", *mailbox))
        )
        target.write_core_registers_raw(
            ["r4", "r5", "r6"], [self.mailboxes[0], self.mailboxes[1], flash.flash_algo["pc_program_page"] | 1]
        )
        todo = list(runs)
        current: Optional[Tuple[int, bytes]]
        current = todo.pop(0)
        self._load(0, *current)
        self._post(0, current[0], len(current[1]))
        waits: List[Tuple[int, int, int]] = []
        buf, grow = 0, False
        while current is not None:
            address, data = current
            regrdy = self._start()
            post = after = None
            if todo:
                after = _join(todo, 2 * len(data) if grow else 0, layout.buffer_size)
                self._load(1 - buf, *after)
                post = (1 - buf, after[0], len(after[1]))
            running = self._wait(buf, address, data, timeout, regrdy, post)
            if after is not None and len(waits) < _WAITS_SEEN and not grow:
                waits.append((len(data), len(after[1]), running))
                grow = link_outpaces_flash(waits)
            buf = 1 - buf
            done(len(data))
            current = after


def _lean_words(link: Any, poll: bytes) -> Optional[List[int]]:
    """DHCSR and the result word through the lean link's prebuilt poll (after the first poll of a
    call, pyOCD's, which set SELECT and CSW for the core's AP); None when it failed: the caller
    then polls through pyOCD, whose DP clears the sticky error and raises pyOCD's own error if
    the failure stays."""
    try:
        return lean_poll(link, poll, 2)()
    except Exception as exc:  # pyOCD's DAPAccessIntf.Error, imported lazily
        if not isinstance(exc, _dap_error()):
            raise
        return None


@functools.lru_cache(maxsize=None)
def _dap_error() -> type:
    """pyOCD's ``DAPAccessIntf.Error`` (the link's errors), imported on first use."""
    from pyocd.probe.pydapaccess.dap_access_api import DAPAccessIntf

    return DAPAccessIntf.Error


def _poll_packet(dhcsr: int, result: int) -> bytes:
    """The DAP_Transfer packet of one poll: MEM-AP TAR = ``dhcsr``, read DRW, TAR = ``result``,
    read DRW (ADIv5.2 C2.6: TAR 0x04, DRW 0x0C of the MEM-AP bank SELECT points at)."""
    from piflash.probe.lean_dap import REQ_AP, REQ_READ, encode_transfer

    tar, drw = REQ_AP | (0x04 >> 2 << 2), REQ_AP | REQ_READ | 0x0C
    return encode_transfer([(tar, dhcsr), (drw, None), (tar, result), (drw, None)])


def _join(todo: List[Tuple[int, bytes]], limit: int, buffer_size: int) -> Tuple[int, bytes]:
    """Take the first run of ``todo`` and, while they are contiguous and the sum stays within
    ``limit`` and ``buffer_size`` bytes, the runs after it (``limit`` 0: the first alone)."""
    address, data = todo.pop(0)
    limit = min(limit, buffer_size)
    while todo and todo[0][0] == address + len(data) and len(data) + len(todo[0][1]) <= limit:
        data = data + todo.pop(0)[1]
    return address, data


#: DCRSR REGSEL of the PC (DebugReturnAddress), ARMv6-M ARM DDI 0419E C1.6.3.
_REGSEL_PC = 15
#: All of DFSR's sticky bits (write one to clear), as pyOCD's ``clear_debug_cause_bits``.
_DFSR_ALL = 0x1F
