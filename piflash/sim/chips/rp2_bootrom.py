"""The RP2040 boot ROM as the simulator provides it: the documented layout, functions in Python.

Not Raspberry Pi's ROM image: a 16 KiB ROM built here with what a debugger and a flash algorithm
rely on (RP2040 datasheet section 2.8.2 "Processor Controlled Boot Sequence" and 2.8.3 "Bootrom
Contents"):

* 0x00 initial stack pointer, 0x04 reset vector, 0x08 NMI, 0x0C HardFault;
* 0x10 the magic ``'M' 'u' 0x01`` and at 0x13 the ROM version;
* 0x14, 0x16, 0x18: 16-bit pointers to the public function table, the public data table and
  ``rom_table_lookup(table, code)``;
* the tables: pairs of a 16-bit two-character code (first character in the low byte) and a
  16-bit pointer, ending with a zero code. Function pointers carry the Thumb bit.

Each function's entry is a ``BX LR`` that :meth:`BootRom.call` runs natively just before it
executes (``Cpu.add_native_code``): arguments in R0-R3, result in R0, as the AAPCS has it. The
flash functions act on the board's serial flash through its SPI pins (WREN, program/erase,
datasheet semantics); the reset vector boots as section 2.8.1 says: the 256-byte boot stage 2
from the start of flash (read over the SSI, XIP being off), copied to SRAM at 0x20041F00 and
entered when its CRC-32 (polynomial
0x04C11DB7, initial value 0xFFFFFFFF, no reflection, no final XOR) in bytes 252-255 matches;
otherwise the core parks in a WFE loop where the real ROM would start USB BOOTSEL mode.
"""

from __future__ import annotations

import struct
from typing import Callable, Dict, Optional, Protocol

__all__ = ["BootRom", "RomPort", "ROM_SIZE", "BOOT2_SRAM", "crc32_boot2", "FUNCTION_CODES", "table_code"]

ROM_SIZE = 0x4000
#: Where the boot ROM copies and enters boot stage 2 (RP2040 datasheet 2.8.1.3).
BOOT2_SRAM = 0x20041F00
#: Initial stack pointer: the top of SRAM 5 (the ROM's own choice; 2.8.1).
INITIAL_SP = 0x20042000
#: ROM version at 0x13: 3 on RP2040-B2 (RP2040 datasheet 2.8.2; "1 for RP2040-B0, 2 for
#: RP2040-B1, 3 for RP2040-B2": pico-sdk's rp2040_rom_version, pico/platform.h).
ROM_VERSION = 3

FUNC_TABLE, DATA_TABLE, STUBS, STRINGS = 0x0100, 0x0180, 0x0200, 0x0400
#: BUSY polls after which the model stops waiting for a program or erase (a stuck flash).
BUSY_POLLS = 100_000
_BX_LR, _NOP, _BX_R0, _WFE, _B_BACK1, _BKPT = 0x4770, 0xBF00, 0x4700, 0xBF20, 0xE7FD, 0xBE00

#: The public functions the model implements: code -> (name, number of arguments). Codes and
#: names: RP2040 datasheet 2.8.3.1 (tables "Fast Bit Counting", "Fast Bulk Memory Fill / Copy",
#: "Flash Access").
FUNCTION_CODES: Dict[str, str] = {
    "MS": "memset",
    "MC": "memcpy",
    "IF": "connect_internal_flash",
    "EX": "flash_exit_xip",
    "RE": "flash_range_erase",
    "RP": "flash_range_program",
    "FC": "flash_flush_cache",
    "CX": "flash_enter_cmd_xip",
}


def crc32_boot2(data: bytes) -> int:
    """CRC-32 of boot stage 2 as the ROM checks it (MSB first, polynomial 0x04C11DB7, initial
    0xFFFFFFFF, no final XOR: RP2040 datasheet 2.8.1.3)."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte << 24
        for _ in range(8):
            crc = ((crc << 1) ^ 0x04C11DB7) & 0xFFFFFFFF if crc & 0x80000000 else (crc << 1) & 0xFFFFFFFF
    return crc


class RomPort(Protocol):
    """What the ROM's functions use of the chip: registers, memory, the flash's SPI pins."""

    def reg(self, n: int) -> int:
        """Core register Rn (0-15)."""

    def set_reg(self, n: int, value: int) -> None:
        """Write core register Rn."""

    def read(self, addr: int, length: int) -> bytes:
        """System bus read."""

    def write(self, addr: int, data: bytes) -> None:
        """System bus write."""

    def flash_command(self, out: bytes, read: int = 0) -> bytes:
        """One serial flash instruction (/CS low, bytes out, ``read`` bytes in, /CS high)."""

    def release_cs(self) -> None:
        """Hand /CS back to the SSI (clears a software override)."""

    def flash_exit_continuous(self) -> None:
        """The XIP exit sequence: the flash out of a continuous read mode."""

    def reset_qspi_pads(self) -> None:
        """The QSPI pads back at their reset values (``connect_internal_flash``)."""

    def ssi_write(self, offset: int, value: int) -> None:
        """Write an SSI register (XIP_SSI, RP2040 datasheet 4.10.13)."""


class BootRom:
    """The ROM image and its native functions.

    :param port: The chip seen from the ROM (:class:`RomPort`).

    Attributes: ``image`` (bytes, :data:`ROM_SIZE`), ``entries`` (function name -> entry
    address), ``stub_range`` ((first, last) address of the native code, for the CPU hook).
    """

    #: The ROM's size (bytes) and version byte at 0x13.
    SIZE = ROM_SIZE
    VERSION = ROM_VERSION

    def __init__(self, port: RomPort) -> None:
        self.port = port
        self.xip = True  # XIP enabled (exited by flash_exit_xip)
        #: Set by a Rescue DP reset (CHIP_RESET.PSM_RESTART_FLAG): the next boot parks the core.
        self.rescue = False
        #: Called by flash_flush_cache (the chip's XIP cache model), or None.
        self.on_flush: Optional[Callable[[], None]] = None
        self.entries: Dict[str, int] = {}
        image = bytearray(self.SIZE)
        natives: Dict[int, Callable[[], None]] = {}
        self._next_stub = STUBS

        def place(name: str, first: int, second: int = _NOP) -> int:
            addr = self._next_stub
            struct.pack_into("<HH", image, addr, first, second)
            self.entries[name] = addr
            self._next_stub += 4
            return addr

        def add(name: str, fn: Callable[[], None], code: int = _BX_LR) -> int:
            addr = place(name, code)
            natives[addr] = fn
            return addr

        boot = add("boot", self._boot, _BX_R0)
        park = place("park", _WFE, _B_BACK1)
        # Where code the USB boot interface runs (PICOBOOT EXEC) returns to: a BKPT that stops
        # the model's core (the real ROM returns into its USB task loop; 2.8.5.4.9).
        place("exec_return", _BKPT)
        self._tables(image, add, boot, park)
        self.image = bytes(image)
        self._natives = natives
        self.stub_range = (STUBS, self._next_stub - 1)

    def _tables(self, image: bytearray, add: Callable[..., int], boot: int, park: int) -> None:
        """Write the vectors, the header and the lookup tables (RP2040 format: 2.8.3)."""
        lookup = add("rom_table_lookup", self._lookup)
        funcs = [(code, add(name, getattr(self, "_" + name))) for code, name in FUNCTION_CODES.items()]
        struct.pack_into("<IIII", image, 0, INITIAL_SP, boot | 1, park | 1, park | 1)
        image[0x10:0x13] = b"Mu\x01"
        image[0x13] = self.VERSION
        struct.pack_into("<HHH", image, 0x14, FUNC_TABLE, DATA_TABLE, lookup | 1)
        for i, (code, addr) in enumerate(funcs):
            struct.pack_into("<HH", image, FUNC_TABLE + 4 * i, table_code(code), addr | 1)
        text = b"(C) piflash simulator: not Raspberry Pi's boot ROM\0"
        image[STRINGS : STRINGS + len(text)] = text
        struct.pack_into("<HH", image, DATA_TABLE, table_code("CR"), STRINGS)

    # -- dispatch --------------------------------------------------------------------------------
    def call(self, address: int) -> None:
        """The core is about to execute ``address``: run the native function that lives there."""
        fn = self._natives.get(address)
        if fn is not None:
            fn()

    # -- functions -------------------------------------------------------------------------------
    def _boot(self) -> None:
        if self.rescue:
            self.rescue = False
            self.port.set_reg(0, self.entries["park"] | 1)
            return
        # The flash boot path reads boot stage 2 over the SSI in serial mode (03h Read Data),
        # not through XIP, which nothing has set up yet (pico-bootrom-rp2040 bootrom_main.c:
        # connect_internal_flash, flash_exit_xip, flash_read_data).
        self._flash_exit_xip()
        boot2 = self.port.flash_command(b"\x03\x00\x00\x00", 256)
        ok = crc32_boot2(boot2[:252]) == struct.unpack_from("<I", boot2, 252)[0]
        if ok:
            self.port.write(BOOT2_SRAM, boot2)
            # Entered with LR = 0: boot stage 2 then goes on through the vector table at
            # 0x10000100 instead of returning (pico-sdk boot_stage2/boot2_w25q080.S).
            self.port.set_reg(14, 0)
            # The stack grows down from boot stage 2's copy (its pushes would otherwise
            # overwrite its own literals at the top of SRAM 5).
            self.port.set_reg(13, BOOT2_SRAM)
        self.port.set_reg(0, (BOOT2_SRAM if ok else self.entries["park"]) | 1)

    def _lookup(self) -> None:
        table, code = self.port.reg(0), self.port.reg(1) & 0xFFFF
        result = 0
        for _ in range(256):
            entry_code, ptr = struct.unpack("<HH", self.port.read(table, 4))
            if entry_code == 0:
                break
            if entry_code == code:
                result = ptr
                break
            table += 4
        self.port.set_reg(0, result)

    def _memset(self) -> None:
        ptr, c, n = self.port.reg(0), self.port.reg(1), self.port.reg(2)
        if n:
            self.port.write(ptr, bytes([c & 0xFF]) * n)

    def _memcpy(self) -> None:
        dest, src, n = self.port.reg(0), self.port.reg(1), self.port.reg(2)
        if n:
            self.port.write(dest, self.port.read(src, n))

    def _connect_internal_flash(self) -> None:
        """Selects the SSI on the QSPI pins (2.8.3.1.3) after resetting IO_QSPI and PADS_QSPI
        (pico-bootrom-rp2040 program_flash_generic.c): the pads back at their reset values."""
        self.port.reset_qspi_pads()

    def _flash_exit_xip(self) -> None:
        self.exit_xip()

    def exit_xip(self) -> None:
        """``flash_exit_xip``: the flash out of a continuous read mode (the XIP exit sequence,
        whatever boot stage 2 or a debugger left), the SSI in serial mode, XIP off."""
        self.port.flash_exit_continuous()
        # flash_init_spi: SSI off, BAUDR 6, standard SPI, 8-bit frames, transmit and receive,
        # SER 1, SSI on (pico-bootrom-rp2040 bootrom/program_flash_generic.c). A debugger may
        # change BAUDR afterwards: the other flash functions leave it as they find it.
        for offset, value in ((0x08, 0), (0x14, 6), (0x00, 0x00070000), (0x10, 1), (0x08, 1)):
            self.port.ssi_write(offset, value)
        self.xip = False
        self.port.release_cs()

    def _flash_flush_cache(self) -> None:
        self.flush_cache()

    def flush_cache(self) -> None:
        """``flash_flush_cache``: the XIP cache flushed, the /CS override released."""
        if self.on_flush is not None:
            self.on_flush()
        self.port.release_cs()  # "also clears the hardware CS override" (2.8.3.1.3)

    def _flash_enter_cmd_xip(self) -> None:
        self.enter_cmd_xip()

    def enter_cmd_xip(self) -> None:
        """``flash_enter_cmd_xip``: serial 03h XIP, so the flash reads at 0x10000000 again."""
        # Serial 03h XIP: 32-bit frames, EEPROM read mode, SPI_CTRLR0 XIP_CMD 03h with an 8-bit
        # instruction and a 24-bit address (the same source); BAUDR unchanged.
        for offset, value in ((0x08, 0), (0x00, (31 << 16) | (3 << 8)), (0xF4, 0x03000218), (0x08, 1)):
            self.port.ssi_write(offset, value)
        self.xip = True

    def _flash_range_erase(self) -> None:
        self.erase_range(*(self.port.reg(i) for i in range(4)))

    def erase_range(self, addr: int, count: int, block_size: int = 0, block_cmd: int = 0) -> None:
        """``flash_range_erase(addr, count, block_size, block_cmd)``: from flash offset ``addr``
        (bytes) up to ``addr + count``, ``block_cmd`` for each ``block_size`` block that is
        aligned and fits, a 4 KiB sector erase (20h) otherwise (pico-bootrom-rp2040
        bootrom/program_flash_generic.c). A ``block_size`` of 0, on which the ROM would loop
        forever, erases by sectors in the model (what the USB boot code's sector erase does)."""
        goal = addr + count
        while addr < goal:
            if block_size and addr % block_size == 0 and goal - addr >= block_size:
                cmd, size = block_cmd & 0xFF, block_size
            else:
                cmd, size = 0x20, 0x1000
            self._write_op(bytes((cmd,)) + _addr24(addr))
            addr += size

    def _flash_range_program(self) -> None:
        addr, data, count = self.port.reg(0), self.port.reg(1), self.port.reg(2)
        self.program(addr, self.port.read(data, (count + 255) & ~255) if count else b"")

    def program(self, addr: int, data: bytes) -> None:
        """``flash_range_program(addr, data, count)``: one page program (02h) of 256 bytes per
        page from flash offset ``addr`` (256-aligned); a count that is not a multiple of 256 is
        rounded up, as the ROM does (``data`` here is already the rounded-up bytes)."""
        for offset in range(0, len(data), 256):
            self._write_op(bytes((0x02,)) + _addr24(addr + offset) + data[offset : offset + 256].ljust(256, b"\xff"))

    def read_data(self, addr: int, count: int) -> bytes:
        """``flash_read_data``: ``count`` bytes from flash offset ``addr`` by 03h Read Data over
        the SSI (what the USB boot code reads flash with: XIP is off)."""
        return self.port.flash_command(b"\x03" + _addr24(addr), count)

    def _write_op(self, instruction: bytes) -> None:
        self.port.flash_command(b"\x06")  # Write Enable
        self.port.flash_command(instruction)
        for _ in range(BUSY_POLLS):
            if not self.port.flash_command(b"\x05", 1)[0] & 1:  # BUSY
                return
        # The ROM polls forever; the model gives up (the core faults, which a caller sees as a
        # call that never returns) instead of hanging the simulator.
        raise RuntimeError("the flash's BUSY bit never cleared")


def table_code(text: str) -> int:
    """A ROM table code: two characters, the first in the low byte (RP2040 datasheet 2.8.3)."""
    return ord(text[0]) | ord(text[1]) << 8


def _addr24(addr: int) -> bytes:
    return bytes(((addr >> 16) & 0xFF, (addr >> 8) & 0xFF, addr & 0xFF))
