"""SW-DP and MEM-AP register models (Arm Debug Interface v5.2, IHI 0031).

The probe calls :class:`SwDp` with the DP/AP register accesses pyOCD makes. The DP decodes AP
accesses with its SELECT register (APSEL = SELECT[31:24], APBANKSEL = SELECT[7:4], A[3:2] from
the request), exactly as a real SW-DP does, so pyOCD's own SELECT management is exercised.
Transfer errors are reported with pyOCD's exception classes: an AHB error or an access while
STICKYERR is set is a SWD FAULT (``TransferFaultError``).
"""

from __future__ import annotations

import struct
from typing import Callable, Dict, List, Optional, Sequence

from pyocd.core.exceptions import TransferFaultError

from piflash.sim.memory.bus import Bus, BusError

__all__ = ["AccessPortModel", "MemAp", "SwDp"]

# DP registers (ADIv5.2 section B2.2, SW-DP with DPBANKSEL = 0).
DP_DPIDR = 0x0  # read
DP_ABORT = 0x0  # write
DP_CTRL_STAT = 0x4
DP_SELECT = 0x8  # write; a read is RESEND
DP_RDBUFF = 0xC

ABORT_STKCMPCLR = 1 << 1
ABORT_STKERRCLR = 1 << 2
ABORT_WDERRCLR = 1 << 3
ABORT_ORUNERRCLR = 1 << 4

CS_STICKYORUN = 1 << 1
CS_STICKYCMP = 1 << 4
CS_STICKYERR = 1 << 5
CS_WDATAERR = 1 << 7
CS_CDBGRSTREQ = 1 << 26
CS_CDBGRSTACK = 1 << 27
CS_CDBGPWRUPREQ = 1 << 28
CS_CDBGPWRUPACK = 1 << 29
CS_CSYSPWRUPREQ = 1 << 30
CS_CSYSPWRUPACK = 1 << 31
# Read/write fields: ORUNDETECT[0], TRNMODE[3:2], MASKLANE[11:8], TRNCNT[23:12], the REQ bits.
CS_RW_MASK = 0x00FFFF0D | CS_CDBGRSTREQ | CS_CDBGPWRUPREQ | CS_CSYSPWRUPREQ

# MEM-AP registers (ADIv5.2 section C2.6).
AP_CSW = 0x00
AP_TAR = 0x04
AP_DRW = 0x0C
AP_BD0 = 0x10
AP_CFG = 0xF4
AP_BASE = 0xF8
AP_IDR = 0xFC

CSW_SIZE_MASK = 0x7
CSW_ADDRINC_MASK = 0x30
CSW_ADDRINC_SINGLE = 0x10
CSW_DEVICEEN = 1 << 6  # read-only 1: the AHB is always accessible
CSW_TRINPROG = 1 << 7  # read-only 0: transfers complete instantly
# Writable CSW bits: Size, AddrInc, Mode[11:8], HPROT/MstrType[30:24], Prot bit 15.
CSW_RW_MASK = 0x7F008F37


class AccessPortModel:
    """Base class of an AP: register ``reg`` is the byte offset within the AP (0x00-0xFC).
    Unimplemented registers read 0 and ignore writes. Subclasses may raise
    :class:`~piflash.sim.memory.bus.BusError` from data accesses.

    :param idr: Value of the IDR register at 0xFC.
    """

    def __init__(self, idr: int) -> None:
        self.idr = idr

    def read(self, reg: int) -> int:
        """Read AP register ``reg``."""
        return self.idr if reg == AP_IDR else 0

    def write(self, reg: int, value: int) -> None:
        """Write AP register ``reg``."""

    def read_multiple(self, reg: int, count: int) -> List[int]:
        """``count`` consecutive reads of ``reg``."""
        return [self.read(reg) for _ in range(count)]

    def write_multiple(self, reg: int, values: Sequence[int]) -> None:
        """Consecutive writes of ``values`` to ``reg``."""
        for value in values:
            self.write(reg, value)


class MemAp(AccessPortModel):
    """An AHB-AP (MEM-AP) onto a :class:`~piflash.sim.memory.bus.Bus`.

    :param idr: AP IDR, e.g. 0x24770011 (Cortex-M4 AHB-AP).
    :param bus: The system bus.
    :param rom_base: ROM table address reported in BASE (legacy format with the present and
        format bits set: ``rom_base | 3``, ADIv5.2 C2.6.1).
    :param wrap: TAR auto-increment wrap in bytes (1 KiB or 4 KiB; ADIv5.2 C2.2.2 says the
        increment is only guaranteed within 1 KiB, the M3/M4 AHB-AP wraps at 4 KiB).
    :param csw_reset: CSW value at reset (HPROT data+privileged, DeviceEn).
    :param guard: ``guard(addr, length) -> bool``: True when the chip's read-out protection
        refuses debugger access to those bytes (nRF APPROTECT, STM32 RDP); the transfer then gets
        an AHB error, i.e. a SWD FAULT, as on the real parts. None: everything is accessible.
    """

    def __init__(
        self,
        idr: int,
        bus: Bus,
        rom_base: int,
        wrap: int,
        csw_reset: int = 0x03000040,
        guard: Optional[Callable[[int, int], bool]] = None,
    ) -> None:
        super().__init__(idr)
        self.bus = bus
        self.guard = guard
        self.base = (rom_base & 0xFFFFF000) | 3
        self.wrap = wrap
        self.csw = csw_reset | CSW_DEVICEEN
        self.tar = 0

    # -- helpers -----------------------------------------------------------------------------
    @property
    def _size(self) -> int:
        return 1 << min(self.csw & CSW_SIZE_MASK, 2)

    def _increment(self, nbytes: int) -> None:
        if self.csw & CSW_ADDRINC_MASK:
            w = self.wrap
            self.tar = (self.tar & ~(w - 1) & 0xFFFFFFFF) | ((self.tar + nbytes) & (w - 1))

    def _check(self, addr: int, length: int) -> None:
        if self.guard is not None and self.guard(addr, length):
            raise BusError(addr, "debug access to 0x%08x refused: read-out protection" % addr)

    def _read_data(self, addr: int) -> int:
        size = self._size
        addr &= ~(size - 1) & 0xFFFFFFFF
        self._check(addr, size)
        value = self.bus.read(addr, size)
        return value << (8 * (addr & 3)) if size < 4 else value

    def _write_data(self, addr: int, value: int) -> None:
        size = self._size
        addr &= ~(size - 1) & 0xFFFFFFFF
        if size < 4:
            value = (value >> (8 * (addr & 3))) & ((1 << (8 * size)) - 1)
        self._check(addr, size)
        self.bus.write(addr, size, value)

    def _bulk(self) -> bool:
        return (self.csw & CSW_SIZE_MASK) == 2 and (self.csw & CSW_ADDRINC_MASK) == CSW_ADDRINC_SINGLE

    # -- registers ---------------------------------------------------------------------------
    def read(self, reg: int) -> int:
        if reg == AP_CSW:
            return self.csw
        if reg == AP_TAR:
            return self.tar
        if reg == AP_DRW:
            value = self._read_data(self.tar)
            self._increment(self._size)
            return value
        if AP_BD0 <= reg < AP_BD0 + 16:
            self._check((self.tar & ~0xF) + (reg - AP_BD0), 4)
            return self.bus.read((self.tar & ~0xF) + (reg - AP_BD0), 4)
        if reg == AP_CFG:
            return 0  # little-endian, no large address / large data extensions
        if reg == AP_BASE:
            return self.base
        return super().read(reg)

    def write(self, reg: int, value: int) -> None:
        value &= 0xFFFFFFFF
        if reg == AP_CSW:
            csw = (value & CSW_RW_MASK) | CSW_DEVICEEN
            if (csw & CSW_SIZE_MASK) > 2:  # unsupported size reads back as word
                csw = (csw & ~CSW_SIZE_MASK) | 2
            self.csw = csw
        elif reg == AP_TAR:
            self.tar = value
        elif reg == AP_DRW:
            self._write_data(self.tar, value)
            self._increment(self._size)
        elif AP_BD0 <= reg < AP_BD0 + 16:
            self._check((self.tar & ~0xF) + (reg - AP_BD0), 4)
            self.bus.write((self.tar & ~0xF) + (reg - AP_BD0), 4, value)

    def read_multiple(self, reg: int, count: int) -> List[int]:
        if reg != AP_DRW or not self._bulk():
            return super().read_multiple(reg, count)
        out = bytearray()
        while count:
            n = min(count, (self.wrap - (self.tar & (self.wrap - 1))) // 4) or 1
            self._check(self.tar & ~3, 4 * n)
            out += self.bus.read_block(self.tar & ~3, 4 * n)
            self._increment(4 * n)
            count -= n
        return list(struct.unpack("<%dI" % (len(out) // 4), out))

    def write_multiple(self, reg: int, values: Sequence[int]) -> None:
        if reg != AP_DRW or not self._bulk():
            super().write_multiple(reg, values)
            return
        data = struct.pack("<%dI" % len(values), *[v & 0xFFFFFFFF for v in values])
        pos = 0
        while pos < len(data):
            n = min(len(data) - pos, (self.wrap - (self.tar & (self.wrap - 1))) & ~3) or 4
            self._check(self.tar & ~3, n)
            self.bus.write_block(self.tar & ~3, data[pos : pos + n])
            self._increment(n)
            pos += n


class SwDp:
    """A SW-DP (DPv1/DPv2 register set) with APs attached by APSEL.

    :param dpidr: DPIDR value, e.g. 0x2BA01477.
    :param aps: Mapping APSEL -> :class:`AccessPortModel`; absent APSELs read as 0.

    All methods may raise ``TransferFaultError`` (AP access while STICKYERR is set or debug
    power is off, or an AHB error during a MEM-AP transfer; the latter sets STICKYERR).
    """

    def __init__(self, dpidr: int, aps: Dict[int, AccessPortModel]) -> None:
        self.dpidr = dpidr
        self.aps = aps
        self.ctrl_stat = 0
        self.select = 0
        self.rdbuff = 0

    def current_ap(self) -> Optional[AccessPortModel]:
        """The AP that SELECT names (APSEL, SELECT[31:24]), or None."""
        return self.aps.get(self.select >> 24)

    def line_reset(self) -> None:
        """Probe (re)connect: power requests drop, sticky flags clear (as after a power-on)."""
        self.ctrl_stat = 0
        self.select = 0

    # -- DP registers ------------------------------------------------------------------------
    def read_dp(self, addr: int) -> int:
        """Read DP register ``addr`` (0x0, 0x4, 0x8, 0xC)."""
        addr &= 0xC
        if addr == DP_DPIDR:
            return self.dpidr
        if addr == DP_CTRL_STAT:
            if self.select & 0xF:
                return 0  # banked registers (DLCR, TARGETID, ...) not modelled
            cs = self.ctrl_stat
            # The ACKs follow the requests at once (ADIv5.2 B2.2.2: power-up handshake).
            if cs & CS_CDBGPWRUPREQ:
                cs |= CS_CDBGPWRUPACK
            if cs & CS_CSYSPWRUPREQ:
                cs |= CS_CSYSPWRUPACK
            if cs & CS_CDBGRSTREQ:
                cs |= CS_CDBGRSTACK
            return cs
        return self.rdbuff  # RESEND (0x8) and RDBUFF (0xC)

    def write_dp(self, addr: int, value: int) -> None:
        """Write DP register ``addr`` (ABORT, CTRL/STAT, SELECT; 0xC is ignored)."""
        addr &= 0xC
        value &= 0xFFFFFFFF
        if addr == DP_ABORT:
            clear = 0
            if value & ABORT_STKCMPCLR:
                clear |= CS_STICKYCMP
            if value & ABORT_STKERRCLR:
                clear |= CS_STICKYERR
            if value & ABORT_WDERRCLR:
                clear |= CS_WDATAERR
            if value & ABORT_ORUNERRCLR:
                clear |= CS_STICKYORUN
            self.ctrl_stat &= ~clear
        elif addr == DP_CTRL_STAT:
            if not self.select & 0xF:
                # Over SWD the sticky flags are cleared through ABORT only (B2.2.6).
                self.ctrl_stat = (self.ctrl_stat & ~CS_RW_MASK) | (value & CS_RW_MASK)
        elif addr == DP_SELECT:
            self.select = value

    # -- AP access ---------------------------------------------------------------------------
    def _ap(self, addr: int) -> "tuple[AccessPortModel | None, int]":
        if self.ctrl_stat & CS_STICKYERR:
            raise TransferFaultError("SWD FAULT: STICKYERR set")
        if not self.ctrl_stat & CS_CDBGPWRUPREQ:
            raise TransferFaultError("SWD FAULT: debug domain not powered")
        reg = (self.select & 0xF0) | (addr & 0x0C)
        return self.aps.get(self.select >> 24), reg

    def _fault(self, err: BusError) -> TransferFaultError:
        self.ctrl_stat |= CS_STICKYERR
        return TransferFaultError("SWD FAULT: AHB error at 0x%08x" % err.address, fault_address=err.address)

    def read_ap(self, addr: int) -> int:
        """Read an AP register; the AP is chosen by SELECT."""
        ap, reg = self._ap(addr)
        try:
            value = ap.read(reg) if ap is not None else 0
        except BusError as err:
            raise self._fault(err) from None
        self.rdbuff = value & 0xFFFFFFFF
        return self.rdbuff

    def write_ap(self, addr: int, value: int) -> None:
        """Write an AP register (value truncated to 32 bits, as on the wire)."""
        ap, reg = self._ap(addr)
        if ap is None:
            return
        try:
            ap.write(reg, value & 0xFFFFFFFF)
        except BusError as err:
            raise self._fault(err) from None

    def read_ap_multiple(self, addr: int, count: int) -> List[int]:
        """``count`` reads of one AP register (DRW with auto-increment: a block read)."""
        ap, reg = self._ap(addr)
        if ap is None:
            return [0] * count
        try:
            values = ap.read_multiple(reg, count)
        except BusError as err:
            raise self._fault(err) from None
        if values:
            self.rdbuff = values[-1]
        return values

    def write_ap_multiple(self, addr: int, values: Sequence[int]) -> None:
        """Writes of ``values`` to one AP register (DRW with auto-increment: a block write)."""
        ap, reg = self._ap(addr)
        if ap is None:
            return
        try:
            ap.write_multiple(reg, values)
        except BusError as err:
            raise self._fault(err) from None
