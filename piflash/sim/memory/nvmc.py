"""Nordic NVMC (non-volatile memory controller) model for nRF51 and nRF52840.

Register offsets and behaviour: nRF52840 Product Specification v1.7 section 4.3 (NVMC) and
nRF51 Series Reference Manual v3.0 section 6 (NVMC). Operations complete instantly (READY reads 1
right after them) unless the ``stuck_busy`` fault is set, in which case READY/READYNEXT read 0
and nothing is erased or written.
"""

from __future__ import annotations

from typing import Optional

from piflash.sim.faults import Faults
from piflash.sim.memory.bus import RegisterDevice
from piflash.sim.memory.nvm import NvmArray

__all__ = ["Nvmc", "NVMC_BASE"]

#: NVMC base address (both PS documents, "Instances" table).
NVMC_BASE = 0x4001E000

READY = 0x400
READYNEXT = 0x408  # nRF52840 only
CONFIG = 0x504
ERASEPAGE = 0x508  # ERASEPCR1 on nRF51 (same function)
ERASEALL = 0x50C
ERASEPCR0 = 0x510
ERASEUICR = 0x514
ERASEPAGEPARTIAL = 0x518  # nRF52840 only
ERASEPAGEPARTIALCFG = 0x51C  # nRF52840 only
ICACHECNF = 0x540
IHIT = 0x548
IMISS = 0x54C

CONFIG_REN = 0
CONFIG_WEN = 1
CONFIG_EEN = 2
CONFIG_PEEN = 4  # partial erase enable, nRF52840


class Nvmc(RegisterDevice):
    """The NVMC register block plus the write path into flash and UICR.

    :param flash: Main flash array.
    :param uicr: UICR array.
    :param faults: Shared fault settings (``stuck_busy``, ``write_protect``).
    :param nrf52: True for the nRF52840 register set (READYNEXT, partial erase).
    """

    def __init__(self, flash: NvmArray, uicr: NvmArray, faults: Faults, nrf52: bool) -> None:
        self.flash = flash
        self.uicr = uicr
        self.faults = faults
        self.nrf52 = nrf52
        self.config = CONFIG_REN
        self._regs = {ERASEPAGEPARTIALCFG: 0x0000000A, ICACHECNF: 0}
        self._stuck_erase = False  # an ERASEALL that never ends (fault recover_stuck)

    def reset(self) -> None:
        """System reset: CONFIG back to read-only (an erase stuck by ``recover_stuck`` ends)."""
        self.config = CONFIG_REN
        self._stuck_erase = False

    # -- registers ---------------------------------------------------------------------------
    def read32(self, offset: int) -> int:
        if offset == READY or (offset == READYNEXT and self.nrf52):
            return 0 if self.faults.stuck_busy or self._stuck_erase else 1
        if offset == CONFIG:
            return self.config
        return self._regs.get(offset, 0)

    def write32(self, offset: int, value: int) -> None:
        if offset == CONFIG:
            self.config = value & (7 if self.nrf52 else 3)
        elif offset in (ERASEPAGE, ERASEPCR0):
            if self.config == CONFIG_EEN:
                self._erase_page(value)
        elif offset == ERASEPAGEPARTIAL and self.nrf52:
            if self.config == CONFIG_PEEN:
                self._erase_page(value)  # modelled as one complete page erase
        elif offset == ERASEALL:
            if self.config == CONFIG_EEN and value & 1:
                self.erase_all(respect_protection=True, recovery=True)
        elif offset == ERASEUICR:
            if self.config == CONFIG_EEN and value & 1:
                if not self.faults.stuck_busy and not self.uicr.is_protected(self.uicr.start):
                    self.uicr.erase_all()
        elif offset in (ERASEPAGEPARTIALCFG, ICACHECNF):
            self._regs[offset] = value

    # -- operations --------------------------------------------------------------------------
    def _array_at(self, addr: int) -> Optional[NvmArray]:
        for nvm in (self.flash, self.uicr):
            if nvm.contains(addr):
                return nvm
        return None

    def _erase_page(self, addr: int) -> None:
        nvm = self._array_at(addr)
        if nvm is None or nvm is self.uicr or self.faults.stuck_busy or nvm.is_protected(addr):
            return
        nvm.erase_page(addr)

    def erase_all(self, respect_protection: bool, recovery: bool = False) -> bool:
        """Erase flash and UICR (NVMC ERASEALL, or nRF52 CTRL-AP ERASEALL with
        ``respect_protection=False``). Returns whether the erase was carried out.
        ``recovery``: this erase can clear read-out protection, so the ``recover_stuck`` fault
        applies (the erase never finishes; NVMC READY stays 0 until a reset)."""
        if self.faults.stuck_busy:
            return False
        if recovery and self.faults.recover_stuck:
            self._stuck_erase = True
            return False
        if respect_protection and (self.flash.any_protected() or self.uicr.any_protected()):
            return False
        self.flash.erase_all()
        self.uicr.erase_all()
        return True

    def store(self, addr: int, size: int, value: int) -> None:
        """A bus write into flash or UICR: programs the word when CONFIG=Wen. Only aligned
        32-bit writes program (PS: "only full 32-bit words can be written"); others are
        ignored, as are writes to protected pages and all writes while stuck busy."""
        nvm = self._array_at(addr)
        if nvm is None or self.config != CONFIG_WEN or self.faults.stuck_busy:
            return
        if size != 4 or addr & 3 or nvm.is_protected(addr):
            return
        nvm.program(addr, (value & 0xFFFFFFFF).to_bytes(4, "little"))
