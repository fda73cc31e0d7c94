"""STM32F1 specifics: the flash program/erase controller (FPEC), DBGMCU and system memory.

Sources: RM0008 rev 21 (STM32F10x reference manual) sections 3.3 (embedded flash), 30 (device
electronic signature) and 31.6 (DBGMCU); PM0075 (STM32F10x flash programming manual) sections
2.3-2.4 and 3. pyOCD writes DBGMCU_CR on connect (``target_STM32F103RC.py``) and its flash
algorithm drives KEYR/SR/CR/AR and reads every programmed half-word back.
"""

from __future__ import annotations

from typing import Optional

from piflash.sim.chips.base import ChipBoard
from piflash.sim.faults import Faults
from piflash.sim.memory.bus import DeviceRegion, RegisterDevice, ZeroRegion
from piflash.sim.memory.nvm import NvmArray

__all__ = [
    "Fpec",
    "Dbgmcu",
    "SystemMemory",
    "attach",
    "FLASH_IF_BASE",
    "KEY1",
    "KEY2",
    "OPTION_BASE",
    "RDP_UNPROTECTED",
]

FLASH_IF_BASE = 0x40022000
DBGMCU_BASE = 0xE0042000
SYSMEM_BASE = 0x1FFFF000
#: Option bytes (PM0075 section 2.5, table 5): RDP at 0x1FFFF800 with its complement at 0x801.
OPTION_BASE = 0x1FFFF800
#: RDP value that leaves read-out protection off; any other value sets level 1 (PM0075 2.4.1).
RDP_UNPROTECTED = 0xA5

#: FLASH_KEYR unlock keys (RM0008 3.3.5 / PM0075 2.3.1).
KEY1 = 0x45670123
KEY2 = 0xCDEF89AB

ACR, KEYR, OPTKEYR, SR, CR, AR, OBR, WRPR = 0x00, 0x04, 0x08, 0x0C, 0x10, 0x14, 0x1C, 0x20

SR_BSY = 1 << 0
SR_PGERR = 1 << 2
SR_WRPRTERR = 1 << 4
SR_EOP = 1 << 5
SR_W1C = SR_PGERR | SR_WRPRTERR | SR_EOP

CR_PG = 1 << 0
CR_PER = 1 << 1
CR_MER = 1 << 2
CR_OPTPG = 1 << 4
CR_OPTER = 1 << 5
CR_STRT = 1 << 6
CR_LOCK = 1 << 7
CR_OPTWRE = 1 << 9  # set by hardware after the OPTKEYR sequence; software may clear it
OBR_OPTERR = 1 << 0
OBR_RDPRT = 1 << 1
CR_RW_MASK = 0x1677  # PG PER MER OPTPG OPTER STRT OPTWRE ERRIE EOPIE


class Fpec(RegisterDevice):
    """FLASH interface registers and the programming path of the main flash.

    Behaviour modelled (PM0075): LOCK set at reset, cleared by KEY1 then KEY2 in KEYR (a wrong
    key locks the FPEC until the next reset); page erase (PER + AR + STRT), mass erase (MER +
    STRT); half-word programming with PG set; PGERR when the half-word is not erased (0xFFFF)
    unless 0x0000 is written; WRPRTERR for protected pages; EOP after each completed operation;
    SR.PGERR/WRPRTERR/EOP write-1-to-clear. Operations complete instantly; with ``stuck_busy``
    SR.BSY reads 1 and nothing completes.

    Option bytes and read-out protection (PM0075 sections 2.4.1, 2.5 and 3.4; RM0008 3.4 / 3.3.3):
    OPTKEYR takes the same two keys and sets CR.OPTWRE; OPTER + STRT erases the option bytes and,
    when read protection is active, mass-erases main flash first; OPTPG programs an option
    half-word (the hardware writes the low byte and its complement). The option bytes are loaded
    at reset (:meth:`reset`): RDP other than 0xA5 sets FLASH_OBR.RDPRT, and while it is set the
    debugger is refused main flash and its boot alias (:meth:`refuses`); USER, Data0 and Data1
    load into FLASH_OBR [9:2], [17:10] and [25:18], WRP0-3 into FLASH_WRPR [7:0]..[31:24] (RM0008
    3.4.6-3.4.7; each byte is the low byte of its option half-word, the complement check is not
    modelled), and a page whose loaded WRP bit is 0 refuses program, page erase and mass erase
    with WRPRTERR, like a ``write_protect`` fault (PM0075 2.4.2). Faults:
    ``lock_ignored`` keeps RDPRT clear whatever RDP says; ``recover_stuck`` leaves SR.BSY set
    after an option-byte erase, with nothing erased (until the next reset).

    :param flash: Main flash array; :param faults: shared fault settings.
    :param option: Option-byte array (None: not modelled, never protected).
    :param alias: Address of the boot alias of main flash, or None.
    """

    def __init__(
        self, flash: NvmArray, faults: Faults, option: Optional[NvmArray] = None, alias: Optional[int] = None
    ) -> None:
        self.flash = flash
        self.faults = faults
        self.option = option
        self.alias = alias
        self.rdprt = False
        self.user_data = 0xFFFFFF  # USER | Data0 << 8 | Data1 << 16, as loaded at reset
        self.wrp = 0xFFFFFFFF  # WRP3..WRP0 as loaded at reset (a 0 bit: pages protected)
        self.reset()

    def reset(self) -> None:
        """System reset: locked, status clear, option bytes loaded."""
        self.cr = CR_LOCK
        self.sr = 0
        self.ar = 0
        self.acr = 0x30
        self._key_stage = 0
        self._key_error = False
        self._opt_stage = 0
        self._stuck = False
        if self.option is not None:
            rdp = self.option.read_int(OPTION_BASE, 1)
            self.rdprt = rdp != RDP_UNPROTECTED and not self.faults.lock_ignored
            low = [self.option.read_int(OPTION_BASE + 2 * i, 1) for i in range(8)]  # RDP USER D0 D1 WRP0-3
            self.user_data = low[1] | low[2] << 8 | low[3] << 16
            self.wrp = low[4] | low[5] << 8 | low[6] << 16 | low[7] << 24

    def refuses(self, addr: int, length: int) -> bool:
        """Whether a debugger access to ``[addr, addr + length)`` is refused (RDP level 1:
        main flash and its boot alias; RAM and peripherals stay reachable). With the fault
        ``option_bytes_fault`` the option-byte block faults too, whatever the RDP level."""
        if (
            self.faults.option_bytes_fault
            and self.option is not None
            and addr < self.option.start + self.option.size
            and addr + length > self.option.start
        ):
            return True
        if not self.rdprt:
            return False
        spans = [(self.flash.start, self.flash.start + self.flash.size)]
        if self.alias is not None:
            spans.append((self.alias, self.alias + self.flash.size))
        return any(addr < hi and addr + length > lo for lo, hi in spans)

    # -- registers ---------------------------------------------------------------------------
    def read32(self, offset: int) -> int:
        if offset == SR:
            return self.sr | (SR_BSY if self.faults.stuck_busy or self._stuck else 0)
        if offset == CR:
            return self.cr
        if offset == AR:
            return self.ar
        if offset == ACR:
            return self.acr
        if offset == OBR:
            # USER [9:2], Data0 [17:10], Data1 [25:18] and RDPRT as loaded at reset (RM0008 3.4.6).
            return self.user_data << 2 | (OBR_RDPRT if self.rdprt else 0)
        if offset == WRPR:
            return self._wrpr()
        return 0

    def write32(self, offset: int, value: int) -> None:
        if offset == KEYR:
            self._unlock_step(value)
        elif offset == OPTKEYR:
            self._option_unlock_step(value)
        elif offset == SR:
            self.sr &= ~(value & SR_W1C)
        elif offset == CR:
            if self.cr & CR_LOCK:
                return  # CR is write-protected while locked
            optwre = self.cr & value & CR_OPTWRE  # software may clear OPTWRE, not set it
            self.cr = (value & CR_RW_MASK & ~CR_OPTWRE) | (value & CR_LOCK) | optwre
            if value & CR_STRT:
                self._start()
        elif offset == AR:
            if not self.cr & CR_LOCK:
                self.ar = value
        elif offset == ACR:
            self.acr = value & 0x3F

    def _unlock_step(self, value: int) -> None:
        if self._key_error or not self.cr & CR_LOCK:
            return
        if self._key_stage == 0 and value == KEY1:
            self._key_stage = 1
        elif self._key_stage == 1 and value == KEY2:
            self._key_stage = 0
            self.cr &= ~CR_LOCK
        else:
            self._key_error = True  # locked until reset (PM0075 2.3.1)

    def _option_unlock_step(self, value: int) -> None:
        if self.cr & CR_LOCK or self.cr & CR_OPTWRE:
            return
        if self._opt_stage == 0 and value == KEY1:
            self._opt_stage = 1
        elif self._opt_stage == 1 and value == KEY2:
            self._opt_stage = 0
            self.cr |= CR_OPTWRE
        else:
            self._opt_stage = 0

    def _wrp_bit(self, addr: int) -> int:
        # High-density WRP mapping: bit n protects pages 2n, 2n+1 (4 KiB) for n < 31, bit 31
        # protects page 62 and up (PM0075 2.5, table 3).
        return 1 << min((addr - self.flash.start) // self.flash.page_size // 2, 31)

    def _wrpr(self) -> int:
        # The WRP bytes loaded at reset; a page a ``write_protect`` fault protects clears its bit too.
        value = self.wrp
        for addr in self.faults.write_protect:
            if self.flash.contains(addr):
                value &= ~self._wrp_bit(addr)
        return value

    def _protected(self, addr: int) -> bool:
        """Whether the page at ``addr`` is write-protected: a ``write_protect`` fault, or its
        loaded WRP bit is 0."""
        return self.flash.is_protected(addr) or not self.wrp & self._wrp_bit(addr)

    # -- operations --------------------------------------------------------------------------
    def _start(self) -> None:
        if self.faults.stuck_busy or self._stuck:
            return
        if self.cr & CR_OPTER:
            if self.option is not None and self.cr & CR_OPTWRE:
                if self.faults.recover_stuck:
                    self._stuck = True
                    return
                if self.rdprt:  # leaving level 1 costs the whole flash (PM0075 2.4.1)
                    self.flash.erase_all()
                self.option.erase_all()
                self.sr |= SR_EOP
        elif self.cr & CR_MER:
            if self.flash.any_protected() or self.wrp != 0xFFFFFFFF:
                self.sr |= SR_WRPRTERR
            else:
                self.flash.erase_all()
                self.sr |= SR_EOP
        elif self.cr & CR_PER:
            if self.flash.contains(self.ar):
                if self._protected(self.ar):
                    self.sr |= SR_WRPRTERR
                else:
                    self.flash.erase_page(self.ar)
                    self.sr |= SR_EOP
        self.cr &= ~CR_STRT

    def store_option(self, addr: int, size: int, value: int) -> None:
        """A bus write into the option bytes: with CR.OPTPG and OPTWRE set, each half-word
        programs its low byte and the hardware-computed complement (PM0075 2.5); a half-word
        that is not erased sets PGERR."""
        if (
            self.option is None
            or not self.cr & CR_OPTPG
            or not self.cr & CR_OPTWRE
            or self.cr & CR_LOCK
            or self.faults.stuck_busy
            or self._stuck
        ):
            return
        for i in range(0, max(size, 2), 2):
            byte = (value >> (8 * i)) & 0xFF
            if self.option.read_int(addr + i, 2) != 0xFFFF:
                self.sr |= SR_PGERR
                continue
            self.option.program(addr + i, bytes([byte, byte ^ 0xFF]))
            self.sr |= SR_EOP

    def store(self, addr: int, size: int, value: int) -> None:
        """A bus write into main flash: programs half-words while CR.PG is set; a byte write
        sets PGERR; writes without PG (or while locked) are ignored."""
        if not self.cr & CR_PG or self.cr & CR_LOCK or self.faults.stuck_busy:
            return
        if size == 1:
            self.sr |= SR_PGERR
            return
        for i in range(0, size, 2):
            self._program_halfword(addr + i, (value >> (8 * i)) & 0xFFFF)

    def _program_halfword(self, addr: int, half: int) -> None:
        if self._protected(addr):
            self.sr |= SR_WRPRTERR
            return
        if self.flash.read_int(addr, 2) != 0xFFFF and half != 0:
            self.sr |= SR_PGERR
            return
        self.flash.program(addr, half.to_bytes(2, "little"))
        self.sr |= SR_EOP


class Dbgmcu(RegisterDevice):
    """DBGMCU_IDCODE (read-only) and DBGMCU_CR (read/write, not acted upon)."""

    def __init__(self, idcode: int) -> None:
        self.idcode = idcode
        self.cr = 0

    def read32(self, offset: int) -> int:
        if offset == 0:
            return self.idcode
        return self.cr if offset == 4 else 0

    def write32(self, offset: int, value: int) -> None:
        if offset == 4:
            self.cr = value


class SystemMemory(RegisterDevice):
    """0x1FFFF000-0x1FFFF7FF: boot ROM area (reads 0), F_SIZE at 0x7E0 (flash size in KiB,
    16 bits) and the 96-bit unique ID at 0x7E8 (RM0008 30.1-30.2). The option bytes that follow
    at 0x1FFFF800 are an NVM array of their own (see :class:`Fpec`)."""

    def __init__(self, flash_kib: int, uid: bytes) -> None:
        self._words = {0x7E0: 0xFFFF0000 | flash_kib}
        for i in range(0, 12, 4):
            self._words[0x7E8 + i] = int.from_bytes(uid[i : i + 4], "little")

    def read32(self, offset: int) -> int:
        return self._words.get(offset, 0)


class _OptionWrites:
    """Routes bus writes into the option bytes to :meth:`Fpec.store_option`."""

    def __init__(self, fpec: Fpec) -> None:
        self.store = fpec.store_option


def attach(board: ChipBoard) -> None:
    """Add the FPEC, DBGMCU and system memory to ``board``."""
    flash = board.nvm["flash"]
    option = board.nvm.get("option")
    fpec = Fpec(flash, board.faults, option, board.spec.flash_alias)
    board.set_flash_controller(flash, fpec)
    board.bus.add(DeviceRegion(FLASH_IF_BASE, 0x400, fpec, "flash-if"))
    board.bus.add(DeviceRegion(DBGMCU_BASE, 0x1000, Dbgmcu(board.spec.extra["dbgmcu_idcode"]), "dbgmcu"))
    board.bus.add(DeviceRegion(SYSMEM_BASE, 0x800, SystemMemory(flash.size // 1024, board.target_uid), "system-memory"))
    if option is not None:
        board.set_flash_controller(option, _OptionWrites(fpec))
        board.debug_guard = fpec.refuses
    tail = option.start + option.size if option is not None else OPTION_BASE
    board.bus.add(ZeroRegion(tail, SYSMEM_BASE + 0x1000 - tail, "system-memory-rest"))
    board.cpu.map_mmio(SYSMEM_BASE, 0x1000)
    board.add_reset_hook(fpec.reset)
