"""Nordic nRF51 / nRF52840 specifics: FICR, UICR, NVMC wiring and the nRF52 CTRL-AP.

Sources: nRF51 Series Reference Manual v3.0 (FICR section 7, UICR section 8), nRF52840 Product
Specification v1.7 (FICR 4.4, UICR 4.5, CTRL-AP 4.6 "Debug and trace"). pyOCD's use of them:
``pyocd/target/family/target_nRF52.py`` (CTRL-AP at APSEL 1, FICR INFO.PART/VARIANT/PACKAGE).
"""

from __future__ import annotations

import hashlib
from typing import Callable, Dict

from piflash.sim.chips.base import ChipBoard
from piflash.sim.debug.dap import AccessPortModel
from piflash.sim.memory.bus import DeviceRegion, Region, RegisterDevice
from piflash.sim.memory.nvmc import NVMC_BASE, Nvmc

__all__ = ["Ficr", "CtrlAp", "NrfProtection", "attach", "FICR_BASE", "CTRL_AP_IDR"]

FICR_BASE = 0x10000000
#: CTRL-AP IDR (nRF52840 PS 4.6.1; pyOCD CTRL_IDR_EXPECTED).
CTRL_AP_IDR = 0x02880000

#: nRF52840 UICR.APPROTECT (PS v1.7 section 4.5, UICR register table, offset 0x208): field PALL
#: [7:0], 0xFF = Disabled, 0x00 = Enabled; the parts modelled (build code before F0) take any
#: value other than 0xFF as enabled.
UICR_APPROTECT = 0x10001208
#: nRF51 UICR.RBPCONF (nRF51 Series Reference Manual v3.0 section 8.1, offset 0x004): PR0 [7:0]
#: protects code region 0, PALL [15:8] protects everything; 0xFF = disabled, 0x00 = enabled.
UICR_RBPCONF = 0x10001004

# CTRL-AP registers.
CTRL_RESET = 0x000
CTRL_ERASEALL = 0x004
CTRL_ERASEALLSTATUS = 0x008
CTRL_APPROTECTSTATUS = 0x00C


class Ficr(RegisterDevice):
    """Factory information configuration registers (read-only; unwritten words read
    0xFFFFFFFF as erased flash does).

    :param values: {offset: value} of the programmed words.
    """

    def __init__(self, values: Dict[int, int]) -> None:
        self._values = dict(values)

    def read32(self, offset: int) -> int:
        return self._values.get(offset, 0xFFFFFFFF)


class _Erased(Region):
    """The rest of the UICR page beyond the modelled words: reads as erased, ignores writes."""

    def read(self, addr: int, size: int) -> int:
        return (1 << (8 * size)) - 1

    def write(self, addr: int, size: int, value: int) -> None:
        pass


class NrfProtection:
    """Read-out protection of an nRF part, as the debugger sees it.

    The setting lives in UICR (APPROTECT on nRF52, RBPCONF.PALL on nRF51) and so persists with
    the board; it is latched at every reset (:meth:`latch`), as on the real parts, where writing
    UICR takes effect after the next reset. While locked, :meth:`refuses` tells the AHB-AP which
    debugger accesses fail: all of them on nRF52 (the AHB-AP is cut off; the CTRL-AP still
    answers), the code region and RAM on nRF51 (the NVMC, FICR, UICR and the core's debug
    registers stay reachable; nRF51 RM v3.0 section 9.1 "Memory protection").
    With the ``lock_ignored`` fault the latch never closes.

    :param uicr: the board's UICR array; :param faults: the board's shared fault settings.
    :param nrf52: True for nRF52840 (APPROTECT), False for nRF51 (RBPCONF).
    """

    def __init__(self, uicr, faults, nrf52: bool) -> None:
        self.uicr, self.faults, self.nrf52 = uicr, faults, nrf52
        self.locked = False

    def configured(self) -> bool:
        """Whether UICR asks for protection (whatever the latch says)."""
        if self.nrf52:
            return self.uicr.read_int(UICR_APPROTECT, 4) & 0xFF != 0xFF
        return (self.uicr.read_int(UICR_RBPCONF, 4) >> 8) & 0xFF != 0xFF

    def latch(self) -> None:
        """Reset: take the UICR setting into effect."""
        self.locked = self.configured() and not self.faults.lock_ignored

    def refuses(self, addr: int, length: int) -> bool:
        """Whether a debugger access to ``[addr, addr + length)`` fails."""
        if not self.locked:
            return False
        if self.nrf52:
            return True
        end = addr + length
        return addr < 0x10000000 or (addr < 0x20004000 and end > 0x20000000)


class CtrlAp(AccessPortModel):
    """nRF52 CTRL-AP: RESET, ERASEALL, ERASEALLSTATUS and APPROTECTSTATUS.

    APPROTECTSTATUS reads 0 while the part is locked, 1 when it is open (nRF52840 PS v1.7
    section 4.6.1, CTRL-AP register table). ERASEALL erases flash and UICR at once (ignoring
    ``write_protect``, as the recovery path does); with ``stuck_busy`` or ``recover_stuck`` it
    never completes (ERASEALLSTATUS stays 1). The erase clears APPROTECT in UICR; the part opens
    at the next reset (RESET written 1 then 0, as pyOCD's and nrfjprog's recover do).

    :param erase_all: Performs the erase; returns whether it was carried out.
    :param hold_reset: Called with True / False when RESET is written 1 / 0.
    :param protection: the part's :class:`NrfProtection` (None: never locked).
    """

    def __init__(
        self,
        erase_all: Callable[[], bool],
        hold_reset: Callable[[bool], None],
        protection: "NrfProtection | None" = None,
    ) -> None:
        super().__init__(CTRL_AP_IDR)
        self._erase_all = erase_all
        self._hold_reset = hold_reset
        self._protection = protection
        self.reset_reg = 0
        self.eraseall = 0
        self.busy = False

    def read(self, reg: int) -> int:
        if reg == CTRL_RESET:
            return self.reset_reg
        if reg == CTRL_ERASEALL:
            return self.eraseall
        if reg == CTRL_ERASEALLSTATUS:
            return 1 if self.busy else 0
        if reg == CTRL_APPROTECTSTATUS:
            return 0 if self._protection is not None and self._protection.locked else 1
        return super().read(reg)

    def write(self, reg: int, value: int) -> None:
        if reg == CTRL_RESET:
            new = value & 1
            if new != self.reset_reg:
                self.reset_reg = new
                self._hold_reset(bool(new))
        elif reg == CTRL_ERASEALL:
            self.eraseall = value & 1
            if value & 1:
                self.busy = not self._erase_all()


def ficr_values(board: ChipBoard) -> Dict[int, int]:
    """FICR contents for the board's target (offsets from 0x10000000)."""
    spec = board.spec
    flash = spec.flash
    uid = board.target_uid
    words = {
        0x010: flash.page_size,  # CODEPAGESIZE
        0x014: flash.size // flash.page_size,  # CODESIZE
        0x060: int.from_bytes(uid[0:4], "little"),  # DEVICEID[0]
        0x064: int.from_bytes(uid[4:8], "little"),  # DEVICEID[1]
        0x0A0: 0xFFFFFFFF,  # DEVICEADDRTYPE: random
    }
    # ER/IR/DEVICEADDR: derived from the device ID so they are stable per board.
    digest = hashlib.sha256(b"piflash-sim-ficr" + uid).digest()
    for i in range(4):
        words[0x080 + 4 * i] = int.from_bytes(digest[4 * i : 4 * i + 4], "little")  # ER[i]
        words[0x090 + 4 * i] = int.from_bytes(digest[16 + 4 * i : 20 + 4 * i], "little")  # IR[i]
    words[0x0A4] = words[0x080] ^ words[0x090]  # DEVICEADDR[0]
    words[0x0A8] = 0xFFFF0000 | ((words[0x084] ^ words[0x094]) & 0xFFFF) | 0xC000  # DEVICEADDR[1]
    extra = spec.extra
    if "ficr_part" in extra:  # nRF52 INFO block
        words.update(
            {
                0x100: extra["ficr_part"],
                0x104: extra["ficr_variant"],
                0x108: extra["ficr_package"],
                0x10C: extra["ficr_ram"],
                0x110: extra["ficr_flash"],
            }
        )
    if "ficr_configid" in extra:  # nRF51: CONFIGID, RAM blocks
        words.update(
            {
                0x05C: 0xFFFF0000 | extra["ficr_configid"],
                0x034: extra["ficr_numramblock"],
                0x038: extra["ficr_sizeramblocks"],
                0x028: 0xFFFFFFFF,
                0x02C: 0xFFFFFFFF,
            }
        )
    return words


def attach(board: ChipBoard) -> None:
    """Add the nRF peripherals, NVM bus regions and (nRF52) the CTRL-AP to ``board``."""
    flash, uicr = board.nvm["flash"], board.nvm["uicr"]
    nvmc = Nvmc(flash, uicr, board.faults, nrf52=bool(board.spec.extra.get("has_readynext")))
    board.set_flash_controller(flash, nvmc)
    board.set_flash_controller(uicr, nvmc)
    board.bus.add(DeviceRegion(FICR_BASE, 0x1000, Ficr(ficr_values(board)), "ficr"))
    board.bus.add(_Erased(uicr.start + uicr.size, 0x10002000 - (uicr.start + uicr.size), "uicr-rest"))
    board.bus.add(DeviceRegion(NVMC_BASE, 0x1000, nvmc, "nvmc"))
    board.cpu.map_mmio(FICR_BASE, 0x2000)  # FICR + UICR pages
    board.add_reset_hook(nvmc.reset)
    protection = NrfProtection(uicr, board.faults, nrf52=bool(board.spec.extra.get("has_ctrl_ap")))
    board.add_reset_hook(protection.latch)
    board.debug_guard = protection.refuses
    if board.spec.extra.get("has_ctrl_ap"):
        board.add_ap(
            1, CtrlAp(lambda: nvmc.erase_all(respect_protection=False, recovery=True), board.set_reset_pin, protection)
        )
