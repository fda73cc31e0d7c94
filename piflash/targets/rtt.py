"""SEGGER RTT on a connected target: find the control block, read up-channel 0.

The control block (SEGGER_RTT.h: ``SEGGER_RTT_CB``, ID ``"SEGGER RTT"``) is found at an address
given (the ELF symbol ``_SEGGER_RTT``, :func:`piflash.firmware.symbols.elf_symbol`), else by
reading the target's default RAM region for its ID; reading is pyOCD's public RTT API
(``pyocd/debug/rtt.py``: ``GenericRTTControlBlock``, its ``up_channels``). Used by the boot check
(:mod:`piflash.production.bootcheck`) and ``piflash rtt``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    from pyocd.core.soc_target import SoCTarget
    from pyocd.debug.rtt import GenericRTTControlBlock, RTTUpChannel

__all__ = ["RttUpChannel", "RTT_ID", "RTT_SYMBOL"]

#: The symbol SEGGER's RTT library gives its control block, and the block's ID (SEGGER_RTT.h).
RTT_SYMBOL = "_SEGGER_RTT"
RTT_ID = b"SEGGER RTT"


class RttUpChannel:
    """Up-channel 0 of the target's RTT control block.

    :param target: pyOCD's ``session.target``.
    :param address: the control block's address (int), e.g. from the ELF; None searches RAM.
    """

    def __init__(self, target: SoCTarget, address: Optional[int] = None) -> None:
        self.target = target
        self.address = address
        self._block: Optional[GenericRTTControlBlock] = None
        self._up: Optional[RTTUpChannel] = None

    @property
    def found(self) -> bool:
        """Whether the control block has been found (and the channel can be read)."""
        return self._up is not None

    def wipe_stale(self) -> None:
        """Wipe the ID of any control block left in RAM by a previous firmware (SRAM keeps its
        contents through a reset): the 16 ID bytes at :attr:`address`, or every ``"SEGGER RTT"``
        found in the default RAM region (one read of all of it) when no address is known. Call
        it before the reset that starts the new firmware."""
        target = self.target
        ident = RTT_ID.ljust(16, b"\0")
        if self.address is not None:
            if bytes(target.read_memory_block8(self.address, 16)) == ident:
                target.write_memory_block8(self.address, [0] * 16)
            return
        from pyocd.core.memory_map import MemoryType

        ram = target.get_memory_map().get_default_region_of_type(MemoryType.RAM)
        if ram is None:
            return
        data = bytes(target.read_memory_block8(ram.start, ram.length))
        at = data.find(RTT_ID)
        while at >= 0:
            target.write_memory_block8(ram.start + at, [0] * len(RTT_ID))
            at = data.find(RTT_ID, at + 1)

    def find(self) -> bool:
        """Look for the control block once; True when found (then :meth:`read` works).
        A block not set up yet (the firmware still starting) is False, not an error."""
        if self._up is not None:
            return True
        from pyocd.core.exceptions import RTTError
        from pyocd.debug.rtt import GenericRTTControlBlock

        if self._block is None:
            # At a known address: 0 bytes of search (the block must be exactly there); else all of RAM.
            self._block = (
                GenericRTTControlBlock(self.target, address=self.address)
                if self.address is not None
                else GenericRTTControlBlock(self.target)
            )
        block = self._block
        try:
            block.start()
        except RTTError:
            return False
        if not block.up_channels:
            return False
        self._up = block.up_channels[0]
        return True

    def read(self) -> bytes:
        """The bytes the firmware wrote to up-channel 0 since the last read (b"" when none, or
        while the block is not found); the channel's read offset advances as a host's should."""
        if self._up is None and not self.find():
            return b""
        assert self._up is not None  # find() set it
        return bytes(self._up.read())
