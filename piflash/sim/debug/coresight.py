"""CoreSight component identification and the simple debug components: ROM table, DWT, FPB.

Identification registers (PIDR0-7 at 0xFD0-0xFEC, CIDR0-3 at 0xFF0-0xFFC) follow the CoreSight
Architecture Specification v3.0 (IHI 0029E) section B2; pyOCD reads them in
``pyocd/coresight/rom_table.py`` (CoreSightComponentID) and identifies components by
(designer, class, part) in ``pyocd/coresight/component_ids.py``.
"""

from __future__ import annotations

from typing import Dict, Optional, Sequence

from piflash.sim.memory.bus import RegisterDevice

__all__ = [
    "ARM_JEP106",
    "CLASS_ROM_TABLE",
    "CLASS_GENERIC_IP",
    "id_registers",
    "IdentifiedDevice",
    "RomTable",
    "Dwt",
    "Fpb",
]

#: Arm's JEP106 code: continuation 4, identity 0x3B (pyOCD ARM_ID = 0x43B).
ARM_JEP106 = 0x43B
#: CIDR1.CLASS values (IHI 0029E B2.2.2): 0x1 ROM table, 0xE generic IP (Cortex-M SCS/DWT/FPB).
CLASS_ROM_TABLE = 0x1
CLASS_GENERIC_IP = 0xE


def id_registers(
    part: int,
    revision: int,
    component_class: int,
    designer: int = ARM_JEP106,
    devarch: Optional[int] = None,
    devtype: int = 0,
) -> Dict[int, int]:
    """Return {offset: value} for PIDR4..PIDR3 and CIDR0..3 of a 4 KiB component.

    :param part: 12-bit part number (PIDR0/PIDR1).
    :param revision: 4-bit revision (PIDR2[7:4]).
    :param component_class: CIDR1[7:4].
    :param designer: JEP106 code as continuation << 8 | identity (Arm: 0x43B).
    :param devarch: DEVARCH (0xFBC) of a class 0x9 CoreSight component (IHI 0029E B2.3.4:
        architect, PRESENT bit 20, ARCHID), or None; DEVTYPE (0xFCC) is ``devtype`` then, and
        DEVID (0xFC8) 0.
    """
    ident, cont = designer & 0x7F, designer >> 8
    pidr = [
        part & 0xFF,  # PIDR0: PART[7:0]
        ((part >> 8) & 0xF) | ((ident & 0xF) << 4),  # PIDR1: PART[11:8], DES_0
        (ident >> 4) | 0x8 | ((revision & 0xF) << 4),  # PIDR2: DES_1, JEDEC, REVISION
        0,  # PIDR3: CMOD, REVAND
    ]
    regs = {0xFD0: cont & 0xF}  # PIDR4: DES_2 (continuation), SIZE=0
    for i, value in enumerate(pidr):
        regs[0xFE0 + 4 * i] = value
    cidr = [0x0D, (component_class & 0xF) << 4, 0x05, 0xB1]  # preamble 0xB105_0_0D
    for i, value in enumerate(cidr):
        regs[0xFF0 + 4 * i] = value
    if devarch is not None:
        regs.update({0xFBC: devarch, 0xFC8: 0, 0xFCC: devtype})
    return regs


class IdentifiedDevice(RegisterDevice):
    """A 4 KiB component with ID registers and a plain read/write register file below 0xF00
    (writes are stored and read back; registers never written read as their reset value).

    :param part: Part number; :param revision: PIDR2 revision; :param component_class: class.
    :param reset: {offset: value} reset values of registers.
    :param read_only: Offsets whose writes are ignored.
    :param devarch: DEVARCH of a class 0x9 component (:func:`id_registers`), or None.
    """

    def __init__(
        self,
        part: int,
        revision: int,
        component_class: int,
        reset: Optional[Dict[int, int]] = None,
        read_only: Sequence[int] = (),
        devarch: Optional[int] = None,
    ) -> None:
        self._ids = id_registers(part, revision, component_class, devarch=devarch)
        self._reset = dict(reset or {})
        self._read_only = set(read_only)
        self._regs: Dict[int, int] = dict(self._reset)

    def read32(self, offset: int) -> int:
        if offset >= 0xFD0 or offset in self._ids:
            return self._ids.get(offset, 0)
        return self._regs.get(offset, 0)

    def write32(self, offset: int, value: int) -> None:
        if offset < 0xFD0 and offset not in self._ids and offset not in self._read_only:
            self._regs[offset] = value

    def reset(self) -> None:
        """Restore reset values."""
        self._regs = dict(self._reset)


class RomTable(IdentifiedDevice):
    """Class 0x1 ROM table (ADIv5.2 D3.3).

    :param part: ROM table part number (Cortex-M0 0x471, M3 0x4C3, M4 0x4C4 per the cores'
        TRMs).
    :param base: Address of the table; :param components: addresses of the present components.
        Entries are 32-bit format, present, with the offset from ``base`` (two's complement).
    """

    def __init__(self, part: int, base: int, components: Sequence[int]) -> None:
        entries = {4 * i: (((addr - base) & 0xFFFFF000) | 0x3) for i, addr in enumerate(components)}
        # MEMTYPE (0xFCC) bit 0: system memory is present on this bus (ADIv5.2 D3.3.4).
        entries[0xFCC] = 1
        super().__init__(part, 0, CLASS_ROM_TABLE, entries, read_only=list(range(0, 0xFD0, 4)))


class Dwt(IdentifiedDevice):
    """Data Watchpoint and Trace unit: registers only (no watchpoint matching is emulated).

    :param part: 0x002 (v7-M) or 0x00A (v6-M); :param num_comparators: DWT_CTRL.NUMCOMP.
    :param devarch: DEVARCH for an Armv8-M DWT (class 0x9, e.g. 0x47701A02), or None.
    """

    def __init__(self, part: int, num_comparators: int, devarch: Optional[int] = None) -> None:
        # DWT_CTRL (0x000): NUMCOMP[31:28] read-only (ARMv7-M ARM C1.8.7).
        super().__init__(
            part,
            3 if part == 0x002 else 0,
            0x9 if devarch else CLASS_GENERIC_IP,
            {0x000: num_comparators << 28},
            devarch=devarch,
        )
        self._numcomp = num_comparators << 28

    def write32(self, offset: int, value: int) -> None:
        if offset == 0x000:
            value = (value & 0x0FFFFFFF) | self._numcomp
        super().write32(offset, value)


class Fpb(IdentifiedDevice):
    """Flash Patch and Breakpoint unit: registers only (breakpoint comparators are stored but do
    not stop the emulated core; pyOCD does not need them to flash).

    :param part: 0x003 (v7-M FPB) or 0x00B (v6-M BPU);
    :param code: number of code comparators; :param literal: number of literal comparators.
    :param devarch: DEVARCH for an Armv8-M FPB (class 0x9, e.g. 0x47701A03), or None; its
        FP_CTRL then reads REV 1 [31:28] (FPBv2, Armv8-M ARM D1.2.108).
    """

    def __init__(self, part: int, code: int, literal: int, devarch: Optional[int] = None) -> None:
        # FP_CTRL: NUM_CODE[14:12,7:4], NUM_LIT[11:8], KEY-protected ENABLE bit 0 (C1.11.3).
        self._ro = ((code & 0x70) << 8) | ((code & 0xF) << 4) | ((literal & 0xF) << 8)
        if devarch:
            self._ro |= 1 << 28
        super().__init__(
            part, 2 if part == 0x003 else 0, 0x9 if devarch else CLASS_GENERIC_IP, {0x000: self._ro}, devarch=devarch
        )

    def write32(self, offset: int, value: int) -> None:
        if offset == 0x000:
            if not value & 0x2:  # KEY bit must be 1 for the write to take effect
                return
            value = self._ro | (value & 1)
        super().write32(offset, value)
