"""A serial NOR flash on an SPI bus: the Winbond W25Q16JV of the Raspberry Pi Pico.

Commands (Winbond W25Q16JV datasheet rev. G, section 8 "Instructions", table 8.1.2): 06h Write
Enable, 04h Write Disable, 05h/35h/15h Read Status Register 1/2/3, 01h/31h Write Status Register,
03h Read Data, 0Bh Fast Read, 02h Page Program (256-byte page, the address wraps inside it),
20h Sector Erase (4 KiB), 52h Block Erase (32 KiB), D8h Block Erase (64 KiB), C7h/60h Chip
Erase, 9Fh JEDEC ID (EFh 40h 15h), 4Bh Read Unique ID (four dummy bytes, then the 64-bit ID),
ABh Release Power-down / Device ID, B9h Power-down, 66h/99h Enable Reset / Reset. Program and
erase need Write Enable first and clear it; they take effect when /CS goes high, as on the part.
Other commands are ignored. Execute-in-place reads are served by the XIP interface straight from
the array, not through this command set; the interface asks :meth:`SpiNorFlash.read_cycles`
whether the flash answers its read format and what it costs, and tells it of each EBh Fast Read
Quad I/O (:meth:`SpiNorFlash.quad_io_read`, datasheet 8.2.12), whose mode bits M5-4 = 10b put
the flash in its continuous read mode: every later transfer is taken as the next read's address
(no instruction byte) until a read's mode bits say otherwise or the XIP exit sequence
(:meth:`SpiNorFlash.exit_continuous`: mode bits all ones) ends it. In that mode a serial
instruction is not executed (its bytes are an address to the flash) and no serial XIP read
(03h, 0Bh, 3Bh) returns the cells: a tool that leaves the flash in it and then sends commands
programs nothing.

Operations complete at once in the cells; their datasheet time is charged by the probe's timing
model through the array's observer, and BUSY reads 1 until that time has passed on the probe's
virtual clock (the array's ``busy_probe``; without one, BUSY reads 0) (``program``, ``erase_page``,
``erase_block32``, ``erase_block64``, ``erase_all``).
"""

from __future__ import annotations

import logging
from typing import List, Optional

from piflash.sim.memory.nvm import NvmArray

__all__ = ["SpiNorFlash", "W25Q16JV_JEDEC", "PAGE_SIZE", "READS"]

LOG = logging.getLogger(__name__)

#: Manufacturer EFh (Winbond), memory type 40h, capacity 15h (16 Mbit): W25Q16JV table 8.1.1.
W25Q16JV_JEDEC = bytes((0xEF, 0x40, 0x15))
#: Program page, bytes (W25Q16JV section 6.1).
PAGE_SIZE = 256
#: Status register 1 bits (W25Q16JV 7.1): BUSY, WEL.
SR1_BUSY, SR1_WEL = 0x01, 0x02

#: The read instructions the Winbond W25Q16JV/W25Q32JV answer, by instruction: (address lanes,
#: SCK cycles between the address and the data (mode bits and dummy clocks), data lanes, needs
#: the Quad Enable bit) (W25Q16JV datasheet 8.2.6-8.2.12: 03h Read Data, 0Bh Fast Read, 3Bh Fast
#: Read Dual Output, 6Bh Fast Read Quad Output, BBh Fast Read Dual I/O, EBh Fast Read Quad I/O).
#: The cells serve XIP reads directly (see the module docstring); a flash interface uses this
#: table to tell whether the read format it is set up for is one the flash answers, and its cost.
READS = {
    0x03: (1, 0, 1, False),
    0x0B: (1, 8, 1, False),
    0x3B: (1, 8, 2, False),
    0x6B: (1, 8, 4, True),
    0xBB: (2, 4, 2, False),
    0xEB: (4, 6, 4, True),
}

_ERASES = {0x20: (0x1000, "erase_page"), 0x52: (0x8000, "erase_block32"), 0xD8: (0x10000, "erase_block64")}


class SpiNorFlash:
    """The flash chip as its SPI pins see it: :meth:`select`, :meth:`exchange` per byte,
    :meth:`deselect`.

    :param nvm: The cells (the array's ``start`` is the flash's byte address 0 on the bus of the
        chip that maps it; offsets here are from that start).
    :param unique_id: The 8-byte factory unique ID returned by 4Bh.
    :param jedec: The 3 bytes returned by 9Fh.
    """

    def __init__(self, nvm: NvmArray, unique_id: bytes, jedec: bytes = W25Q16JV_JEDEC) -> None:
        if len(unique_id) != 8:
            raise ValueError("a W25Q unique ID is 64 bits")
        self.nvm = nvm
        self.unique_id = bytes(unique_id)
        self.jedec = bytes(jedec)
        self.wel = False
        self.sr2 = 0x02  # QE set: the Pico's W25Q16JV...IQ ships with quad enabled
        self.sr3 = 0x00
        self.selected = False
        self._bytes: List[int] = []
        self.powered_down = False
        #: In the continuous read mode of EBh (datasheet 8.2.12, M5-4 = 10b).
        self.continuous = False

    @property
    def quad_enabled(self) -> bool:
        """Status register 2's QE bit (W25Q16JV 7.1.4): IO2 and IO3 are data lines, not /WP and
        /HOLD."""
        return bool(self.sr2 & 0x02)

    def read_cycles(self, instruction: int, addr_lanes: int, between: int, data_lanes: int):
        """SCK cycles of a read of 8 bytes by ``instruction`` with this many address lanes,
        cycles between address and data and data lanes: (instruction, address and the cycles
        after it; the 64 data bits), or None when the flash does not answer such a read
        (:data:`READS`; a quad read while QE is clear)."""
        read = READS.get(instruction)
        if (
            read is None
            or read[:3] != (addr_lanes, between, data_lanes)
            or (read[3] and not self.quad_enabled)
            or self.continuous
        ):
            return None
        return 8 + 24 // addr_lanes + between, 64 // data_lanes

    def quad_io_read(self, instruction: bool, mode: int) -> bool:
        """An EBh Fast Read Quad I/O transfer (datasheet 8.2.12): with the instruction byte
        (``instruction``) or, in the continuous read mode, without it; a 24-bit address and the
        8 ``mode`` bits on four lines, 4 dummy clocks, then data. The mode bits decide whether
        the next transfer is another such read without instruction (M5-4 = 10b).

        :returns: whether the flash answered with its cells: quad enabled (QE), and the
            instruction sent to a flash that expects one, or left out in the continuous read
            mode. An instruction sent in that mode is taken as address bits and the mode bits
            are then others: the model ends the mode (the transfer is not answered). Any other
            transfer it does not answer leaves the mode as it was.
        """
        if instruction and self.continuous:
            self.continuous = False
            return False
        if not self.quad_enabled or instruction == self.continuous or self.powered_down:
            return False
        self.continuous = (mode & 0x30) == 0x20
        return True

    def exit_continuous(self) -> None:
        """The XIP exit sequence (/CS low, mode bits clocked as all ones on the four lines, /CS
        high; what the RP2040 boot ROM's ``flash_exit_xip`` sends): the continuous read mode
        ends and the next transfer starts with an instruction."""
        self.continuous = False

    # -- pins ----------------------------------------------------------------------------------
    def select(self) -> None:
        """/CS low: a new instruction starts with the next byte."""
        self.selected = True
        self._bytes = []

    def deselect(self) -> None:
        """/CS high: a write, program or erase instruction takes effect now."""
        if self.selected and self._bytes:
            self._finish(self._bytes)
        self.selected = False
        self._bytes = []

    def exchange(self, byte: int) -> int:
        """Shift ``byte`` in on DI while /CS is low; returns the byte shifted out on DO
        (0xFF, the line pulled up, where the chip does not drive it)."""
        if not self.selected:
            return 0xFF
        self._bytes.append(byte & 0xFF)
        return self._output(self._bytes)

    def command(self, out: bytes, read: int = 0) -> bytes:
        """A whole instruction: /CS low, ``out`` then ``read`` more bytes of 0x00, /CS high.
        Returns the ``read`` bytes that came back."""
        self.select()
        for b in out:
            self.exchange(b)
        got = bytes(self.exchange(0) for _ in range(read))
        self.deselect()
        return got

    # -- reading ---------------------------------------------------------------------------------
    def _address(self, seq: List[int]) -> int:
        return ((seq[1] << 16) | (seq[2] << 8) | seq[3]) % self.nvm.size

    def _output(self, seq: List[int]) -> int:
        cmd, n = seq[0], len(seq) - 1  # n: bytes after the instruction, this one included
        if self.continuous:  # the bytes are a read's address, not an instruction
            return 0xFF
        if self.powered_down and cmd != 0xAB:
            return 0xFF
        if n == 0:
            return 0xFF
        if cmd == 0x05:
            busy = self.nvm.busy_probe is not None and self.nvm.busy_probe()
            return (SR1_WEL if self.wel else 0) | (SR1_BUSY if busy else 0)
        if cmd == 0x35:
            return self.sr2
        if cmd == 0x15:
            return self.sr3
        if cmd == 0x9F:
            return self.jedec[n - 1] if n <= 3 else 0xFF
        if cmd == 0x4B:
            return self.unique_id[n - 5] if 5 <= n <= 12 else 0xFF
        if cmd == 0xAB:
            return 0x14 if n >= 4 else 0xFF  # Device ID 14h (W25Q16JV table 8.1.1)
        if cmd in (0x03, 0x0B):
            first = 4 if cmd == 0x03 else 5
            if n >= first:
                return self.nvm.data[(self._address(seq) + n - first) % self.nvm.size]
        return 0xFF

    # -- writing ---------------------------------------------------------------------------------
    def _finish(self, seq: List[int]) -> None:
        if self.continuous:  # taken as a read's address: nothing executes
            return
        cmd = seq[0]
        if cmd == 0xAB:
            self.powered_down = False
            return
        if self.powered_down:
            return
        if cmd == 0xB9:
            self.powered_down = True
        elif cmd == 0x06:
            self.wel = True
        elif cmd == 0x04:
            self.wel = False
        elif cmd in (0x01, 0x31) and self.wel:
            if cmd == 0x31 and len(seq) > 1:
                self.sr2 = seq[1]
            elif cmd == 0x01 and len(seq) > 2:
                self.sr2 = seq[2]
            self.wel = False
        elif cmd == 0x02 and self.wel:
            self._program(seq)
            self.wel = False
        elif cmd in _ERASES and self.wel:
            if len(seq) >= 4:
                size, op = _ERASES[cmd]
                self._erase(self._address(seq) & ~(size - 1), size, op)
            self.wel = False
        elif cmd in (0xC7, 0x60) and self.wel:
            if not self.nvm.any_protected() and not self.nvm.faults.stuck_busy:
                self.nvm.erase_all()
            self.wel = False
        elif cmd not in (0x05, 0x35, 0x15, 0x9F, 0x4B, 0x03, 0x0B, 0x66, 0x99, 0xFF):
            LOG.debug("serial flash: instruction %02Xh ignored by the model", cmd)

    def _program(self, seq: List[int]) -> None:
        if len(seq) < 5 or self.nvm.faults.stuck_busy:
            return
        addr = self._address(seq)
        page = addr & ~(PAGE_SIZE - 1)
        data = seq[4:]
        if len(data) > PAGE_SIZE:  # only the last 256 bytes are kept (7.2.23)
            data = data[-PAGE_SIZE:]
        buf = bytearray(b"\xff" * PAGE_SIZE)
        for i, value in enumerate(data):
            buf[(addr - page + i) % PAGE_SIZE] &= value
        if self.nvm.is_protected(self.nvm.start + page):
            return
        lo = addr - page
        hi = lo + len(data)
        if hi <= PAGE_SIZE:
            self.nvm.program(self.nvm.start + addr, bytes(buf[lo:hi]))
        else:  # wrapped inside the page: the whole page
            self.nvm.program(self.nvm.start + page, bytes(buf))

    def _erase(self, offset: int, size: int, op: str) -> None:
        if self.nvm.faults.stuck_busy:
            return
        start = self.nvm.start + offset
        if any(self.nvm.is_protected(a) for a in range(start, start + size, self.nvm.page_size)):
            return
        if size == self.nvm.page_size:
            self.nvm.erase_page(start)
        else:
            self.nvm.erase_range(start, size, op)

    def read(self, offset: int, length: int) -> Optional[bytes]:
        """Bytes at ``offset`` (the XIP interface's view; no instruction on the wire)."""
        return self.nvm.read(self.nvm.start + offset, length)
