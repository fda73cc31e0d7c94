"""What the RP2040 and RP2350 models share: the boot ROM on the bus, plain value registers, and
XIP (the flash behind a cache at 0x10000000) as the debugger and the core see it.

XIP reads are served only while the chip's flash interface is set up for them: the RP2040's SSI
in an XIP mode (:meth:`piflash.sim.chips.rp2040.Ssi.xip_ready`), the RP2350's QMI with the flash
in the read mode its window expects (:class:`piflash.sim.chips.rp2350.Qmi`). The interface
object (``ssi`` below) offers ``xip_ready()`` and ``miss_cycles()``: the clk_sys cycles of one
8-byte cache line fill; and optionally ``line_filled()``, told of each fill.
"""

from __future__ import annotations

from typing import Dict

from piflash.sim.memory.bus import BusError, Region, RegisterDevice
from piflash.sim.memory.nvm import NvmRegion

__all__ = [
    "ValueRegisters",
    "RomRegion",
    "XIP_OFF_BYTE",
    "XipTiming",
    "XipRegion",
    "XipCtrl",
    "IgnoreStores",
    "RomPortBase",
    "attach_rom_and_xip",
]


class ValueRegisters(RegisterDevice):
    def __init__(self, values: Dict[int, int]) -> None:
        self.values = values

    def read32(self, offset: int) -> int:
        return self.values.get(offset, 0)


class RomRegion(Region):
    """The ROM on the bus: reads the image; a write is an AHB error (a SWD FAULT)."""

    def __init__(self, image: bytes) -> None:
        super().__init__(0, len(image), "bootrom")
        self.image = image

    def read(self, addr: int, size: int) -> int:
        return int.from_bytes(self.image[addr : addr + size], "little")

    def read_block(self, addr: int, length: int) -> bytes:
        return self.image[addr : addr + length]

    def write(self, addr: int, size: int, value: int) -> None:
        raise BusError(addr, "write to the boot ROM")


#: What a debugger reads from XIP while the flash interface serves no XIP (``xip_ready()``): the
#: real part returns no flash data then; the model returns this byte, so that a tool reading
#: flash without XIP set up sees other bytes than the flash holds, as it would on a Pico.
XIP_OFF_BYTE = 0xA5


class XipTiming:
    """What XIP reads cost: an 8-byte cache line is fetched from the flash on a miss (RP2040
    datasheet 2.6.3: a 16 KiB cache of 8-byte lines). A read in the line read last is a hit; any
    other read is counted as a miss (the model keeps no other lines: a lower bound for code that
    re-reads). A miss costs the flash interface's ``miss_cycles(sequential)`` clk_sys cycles
    (``sequential``: the line after the one filled last), reported to the flash array's observer
    as ``spi_cycles``.

    :param nvm: the flash array (its observer charges the time).
    :param ssi: the flash interface (``xip_ready()``, ``miss_cycles()``).
    :param uncached: the top address bytes of the windows that bypass the cache (RP2040
        datasheet 2.6.3.1: 0x12 XIP_NOCACHE, 0x13 XIP_NOCACHE_NOALLOC): every read there is a
        transfer from the flash, and leaves the cache as it was.
    """

    LINE = 8

    def __init__(self, nvm, ssi, uncached=()) -> None:
        self.nvm, self.ssi = nvm, ssi
        self.uncached = frozenset(uncached)
        self._line = -1

    def flush(self) -> None:
        """The XIP cache was flushed: the next read misses."""
        self._line = -1

    def read(self, addr: int, size: int) -> None:
        """A CPU load of ``size`` bytes at ``addr``: charged, or refused with an exception (the
        core stops with a fault in the model) while the SSI serves no XIP."""
        if not self.ssi.xip_ready():
            raise BusError(
                addr,
                "XIP read at 0x%08x while the flash interface is not set up for "
                "XIP (after flash_exit_xip, or before boot)" % addr,
            )
        self.charge(addr, size)

    def charge(self, addr: int, size: int) -> None:
        """Charge the misses of a read of ``size`` bytes at ``addr`` (any XIP alias)."""
        first, last = (addr & 0xFFFFFF) // self.LINE, ((addr & 0xFFFFFF) + max(size, 1) - 1) // self.LINE
        bypass = (addr >> 24) in self.uncached
        start = first + 1 if first == self._line and not bypass else first  # the line read last: a hit
        misses = last - start + 1
        sequential = misses - 1 if misses > 0 else 0  # each after the one before
        if misses > 0 and start == self._line + 1 and self._line >= 0:
            sequential += 1  # ... and after the last fill
        if not bypass:
            self._line = last
        if misses > 0:
            filled = getattr(self.ssi, "line_filled", None)
            if filled is not None:  # the transfer's mode bits (RP2040 EBh)
                filled()
        observer = self.nvm.observer
        if misses > 0 and observer is not None:
            cycles = (misses - sequential) * self.ssi.miss_cycles()
            if sequential:
                cycles += sequential * self.ssi.miss_cycles(sequential=True)
            observer("spi_cycles", cycles)


class XipRegion(NvmRegion):
    """The debugger's view of XIP: the cells, each read charged as an XIP read."""

    def __init__(self, nvm, controller, timing: XipTiming, alias_start=None) -> None:
        super().__init__(nvm, controller, alias_start)
        self.timing = timing

    def read(self, addr: int, size: int) -> int:
        if not self.timing.ssi.xip_ready():
            return int.from_bytes(bytes([XIP_OFF_BYTE]) * size, "little")
        self.timing.charge(addr, size)
        return super().read(addr, size)

    def read_block(self, addr: int, length: int) -> bytes:
        if not self.timing.ssi.xip_ready():
            return bytes([XIP_OFF_BYTE]) * length
        self.timing.charge(addr, length)
        return super().read_block(addr, length)


class XipCtrl(RegisterDevice):
    """XIP_CTRL (2.6.3.6): CTRL (EN, ERR_BADWRITE set at reset), FLUSH (a write empties the
    cache; the model's cache is the last line of :class:`XipTiming`), STAT (FLUSH_READY set)."""

    def __init__(self, timing: "XipTiming") -> None:
        self.timing = timing
        self.ctrl = 0x3

    def read32(self, offset: int) -> int:
        if offset == 0x0:
            return self.ctrl
        if offset == 0x8:
            return 0x1 | 0x2  # FLUSH_READY, FIFO_EMPTY (FIFO_FULL clear)
        return 0

    def write32(self, offset: int, value: int) -> None:
        if offset == 0x0:
            self.ctrl = value & 0xB
        elif offset == 0x4:
            self.timing.flush()


class IgnoreStores:
    """XIP writes: the cache is not used as SRAM in the model, so they change nothing."""

    def store(self, addr: int, size: int, value: int) -> None:
        pass


class RomPortBase:
    """The chip as the boot ROM's native functions see it
    (:class:`piflash.sim.chips.rp2_bootrom.RomPort`): the core's registers, the system bus and
    the flash's pins. A flash instruction's bytes are charged to the flash array's observer as
    ``spi_cycles``: 8 SCK a byte, :meth:`sck_divider` clk_sys cycles an SCK.

    :param board: the board (``cpu``, ``bus``); :param pins: the flash's pins
        (:class:`piflash.sim.chips.rp2040.QspiPins`).
    """

    def __init__(self, board, pins) -> None:
        self.board, self.pins = board, pins

    def sck_divider(self) -> int:
        """clk_sys cycles per SPI clock now (the chip's flash interface's divider)."""
        raise NotImplementedError

    def reg(self, n: int) -> int:
        return self.board.cpu.read_reg(n)

    def set_reg(self, n: int, value: int) -> None:
        self.board.cpu.write_reg(n, value)

    def read(self, addr: int, length: int) -> bytes:
        return self.board.bus.read_block(addr, length)

    def write(self, addr: int, data: bytes) -> None:
        self.board.bus.write_block(addr, data)

    def flash_exit_continuous(self) -> None:
        """The XIP exit sequence ``flash_exit_xip`` sends (``SpiNorFlash.exit_continuous``)."""
        self.pins.flash.exit_continuous()

    def reset_qspi_pads(self) -> None:
        """``connect_internal_flash`` resets the QSPI pads: on chips whose pads the model keeps."""

    def flash_command(self, out: bytes, read: int = 0) -> bytes:
        note = getattr(self.pins, "note_transfer", None)
        if note is not None:
            note(self.sck_divider())
        got = self.pins.command(out, read)
        observer = self.pins.flash.nvm.observer
        if observer is not None:
            observer("spi_cycles", (len(out) + read) * 8 * self.sck_divider())
        return got


def attach_rom_and_xip(board, rom, interface, windows, window_size: int, uncached=()) -> XipTiming:
    """Put ``rom`` (a boot ROM model: ``image``, ``stub_range``, ``call``, ``on_flush``) at 0 for
    the debugger and the core, and the main flash behind XIP: the debugger's view (reads served
    while ``interface.xip_ready()``), the core's reads charged, and the flash repeated through
    each window of ``windows`` (``window_size`` bytes each) for the debugger and the core alike:
    the flash takes 24 address bits and ignores those above its size (a W25Q16JV decodes
    A20-A0 of its 2 MiB), so a 2 or 4 MiB part repeats through a 16 MiB window.

    :param uncached: the windows that bypass the cache (:class:`XipTiming`).
    :returns: the XIP timing model (its ``flush`` is the ROM's cache flush).
    """
    flash_nvm = board.nvm["flash"]
    board.bus.add(RomRegion(rom.image))
    board.cpu.map_flash(0, len(rom.image), lambda addr, size, value: None)(0, rom.image)
    board.cpu.add_native_code(rom.stub_range[0], rom.stub_range[1], rom.call)
    stores = IgnoreStores()
    xip = XipTiming(flash_nvm, interface, uncached)
    rom.on_flush = xip.flush
    copies = [
        start
        for window in windows
        for start in range(window, window + window_size, flash_nvm.size)
        if start != flash_nvm.start
    ]
    board.set_flash_controller(flash_nvm, stores, bus_region=XipRegion(flash_nvm, stores, xip), cpu_aliases=copies)
    for window in windows:
        board.cpu.add_read_watch(window, window + window_size - 1, xip.read)
    for start in copies:
        board.bus.add(XipRegion(flash_nvm, stores, xip, alias_start=start))
    return xip
