"""An ADIv6 debug port (SW-DP version 3): access ports in a debug address space.

Arm Debug Interface Architecture Specification ADIv6.0 (IHI 0074): a DPv3 no longer selects an
AP by number. SELECT[31:4] holds bits [31:4] of an address in the debug address space and the
transfer's A[3:2] the rest (B2.2.9); DPBANKSEL is SELECT[3:0]. The debug address space holds
4 KiB components: access ports, whose registers sit at 0xD00-0xDFC (APv2, C2.6), and ROM tables
that list them. DPIDR1 (bank 1 of register 0x0) gives the address size, BASEPTR0/1 (banks 2 and
3) where the root component is (B2.2.1-B2.2.4). The root here is a class 0x9 CoreSight ROM table
(CoreSight Architecture Specification v3.0, IHI 0029E, D6: DEVARCH 0x47700AF7, 32-bit entries:
PRESENT [1:0] = 0b11, the component's offset from the table in [31:12], 0 ends the table).

pyOCD finds the root through BASEPTR0 and creates an AP for each entry whose DEVARCH says
MEM-APv2 (``pyocd/coresight/dap.py`` ``_check_version``, ``discovery.py`` ``ADIv6Discovery``,
``component_ids.py``): so pyOCD's own ADIv6 path runs on this model unchanged.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence

from pyocd.core.exceptions import TransferFaultError

from piflash.sim.debug.coresight import id_registers
from piflash.sim.debug.dap import CSW_DEVICEEN, AccessPortModel, MemAp
from piflash.sim.debug.multidrop import MultidropDp
from piflash.sim.memory.bus import Bus

__all__ = ["ApV2", "RootRomTable", "SwDpV3", "APV2_REGS", "DEVARCH_MEM_APV2", "DEVARCH_ROM_TABLE"]

#: Offset of the MEM-AP register block in an APv2 (ADIv6 C2.6: CSW 0xD00, TAR 0xD04, DRW 0xD0C,
#: BD0-3 0xD10-0xD1C, CFG 0xDF4, BASE 0xDF8, IDR 0xDFC: the ADIv5 offsets + 0xD00).
APV2_REGS = 0xD00
#: DEVARCH of a MEM-APv2 and of a class 0x9 ROM table: ARCHITECT Arm 0x23B [31:21], PRESENT
#: [20], REVISION [19:16] 0, ARCHID [15:0] 0x0A17 / 0x0AF7 (IHI 0029E B2.3.4, ADIv6 C2.6.2).
DEVARCH_MEM_APV2 = 0x47700A17
DEVARCH_ROM_TABLE = 0x47700AF7
#: CSW.SDeviceEn (ADIv6 C2.6.5): Secure accesses allowed; read-only 1 on a core whose Secure
#: debug is enabled (on RP2350 by default).
CSW_SDEVICEEN = 1 << 23
#: DPIDR1 (ADIv6 B2.2.6): ASIZE [6:0] = 32 (a 32-bit debug address space), ERRMODE [7] 0.
DPIDR1_ASIZE32 = 0x20


class ApV2(AccessPortModel):
    """A MEM-AP in a debug address space: a :class:`~piflash.sim.debug.dap.MemAp` whose
    registers are at 0xD00-0xDFC, with CoreSight identification at 0xFBC-0xFFC.

    :param idr: AP IDR (0xDFC), e.g. 0x14770005 (an AHB5-AP, ``pyocd/coresight/ap.py``).
    :param bus: The system bus it reaches.
    :param rom_base: The core's ROM table address, reported in BASE.
    :param wrap: TAR auto-increment wrap in bytes (1 KiB: CFG.TARINC 0, ADIv6 C2.6.4).
    :param part: CoreSight part number (0x9E3: the CS-600 AHB-AP, ``component_ids.py``).
    :param guard: As :class:`MemAp`'s.
    """

    def __init__(self, idr: int, bus: Bus, rom_base: int, wrap: int = 0x400, part: int = 0x9E3, guard=None) -> None:
        super().__init__(idr)
        self.mem = MemAp(idr, bus, rom_base, wrap, csw_reset=0x03000040 | CSW_SDEVICEEN, guard=guard)
        self._ids = id_registers(part, 0, 0x9, devarch=DEVARCH_MEM_APV2)

    @property
    def tar(self) -> int:
        """The MEM-AP's TAR (for the probe firmware's timing model)."""
        return self.mem.tar

    def _reg(self, offset: int) -> Optional[int]:
        return offset - APV2_REGS if APV2_REGS <= offset < APV2_REGS + 0x100 else None

    def read(self, reg: int) -> int:
        inner = self._reg(reg)
        if inner is not None:
            return self.mem.read(inner)
        return self._ids.get(reg, 0)

    def write(self, reg: int, value: int) -> None:
        inner = self._reg(reg)
        if inner is None:
            return
        self.mem.write(inner, value)
        if inner == 0x00:
            self.mem.csw |= CSW_SDEVICEEN | CSW_DEVICEEN

    def read_multiple(self, reg: int, count: int) -> List[int]:
        inner = self._reg(reg)
        if inner is None:
            return super().read_multiple(reg, count)
        return self.mem.read_multiple(inner, count)

    def write_multiple(self, reg: int, values: Sequence[int]) -> None:
        inner = self._reg(reg)
        if inner is None:
            return
        self.mem.write_multiple(inner, values)


class RootRomTable(AccessPortModel):
    """A class 0x9 ROM table in the debug address space, listing components by their offsets.

    :param components: Offsets (4 KiB-aligned) of the components, in entry order.
    :param designer: JEP106 code of the table's designer (continuation << 8 | identity).
    :param part: Its part number.
    :param absent: Components listed as not present (PRESENT 0b10: the scan skips them).
    """

    def __init__(self, components: Sequence[int], designer: int, part: int, absent: Sequence[int] = ()) -> None:
        super().__init__(0)
        self.entries = {
            4 * i: (offset & 0xFFFFF000) | (0x2 if offset in absent else 0x3) for i, offset in enumerate(components)
        }
        self._ids = id_registers(part, 0, 0x9, designer=designer, devarch=DEVARCH_ROM_TABLE)

    def read(self, reg: int) -> int:
        if reg < 0x800:
            return self.entries.get(reg, 0)
        return self._ids.get(reg, 0)  # DEVID 0xFC8 = 0: 32-bit entries, no power requests


class SwDpV3(MultidropDp):
    """A SW-DP version 3 (ADIv6) with components in a 32-bit debug address space.

    :param dpidr: DPIDR, e.g. 0x4C013477 (RP2350: version 3, MINDP).
    :param targetid: TARGETID (bank 2 of 0x4), as for a multi-drop DPv2.
    :param space: {component base address: model} (4 KiB components; the root at ``root``).
    :param root: Base of the root component, reported in BASEPTR0.

    SELECT[31:4] and A[3:2] address the debug address space, whatever DPBANKSEL (SELECT[3:0])
    is; the banked DP registers follow DPBANKSEL. An access to an address no component covers
    reads 0 (as an unimplemented location of the ROM table's range would).
    """

    def __init__(self, dpidr: int, targetid: int, space: Dict[int, AccessPortModel], root: int = 0) -> None:
        super().__init__(dpidr, targetid, 0, space)
        self.root = root

    # -- DP registers ------------------------------------------------------------------------
    def read_dp(self, addr: int) -> int:
        bank = self.select & 0xF
        if addr & 0xC == 0x0 and bank:
            # DPIDR1 (1), BASEPTR0 (2: PTR [31:12], VALID [0]), BASEPTR1 (3): ADIv6 B2.2.
            return {1: DPIDR1_ASIZE32, 2: (self.root & 0xFFFFF000) | 1, 3: 0}.get(bank, 0)
        if addr & 0xC == 0x4 and bank == 5:
            return 0  # SELECT1: the upper address bits, 0
        return super().read_dp(addr)

    # -- access ports ------------------------------------------------------------------------
    def current_ap(self) -> Optional[AccessPortModel]:
        """The component SELECT points into (``aps`` is keyed by base address here)."""
        return self.aps.get(self.select & 0xFFFFF000)

    def _ap(self, addr: int) -> "tuple[AccessPortModel | None, int]":
        if self.ctrl_stat & (1 << 5):
            raise TransferFaultError("SWD FAULT: STICKYERR set")
        if not self.ctrl_stat & (1 << 28):
            raise TransferFaultError("SWD FAULT: debug domain not powered")
        address = (self.select & 0xFFFFFFF0) | (addr & 0x0C)
        return self.aps.get(address & 0xFFFFF000), address & 0xFFF
