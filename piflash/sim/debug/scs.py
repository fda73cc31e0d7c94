"""System Control Space (0xE000E000) and the core's halting-debug state machine.

Register addresses and bit fields: ARMv7-M Architecture Reference Manual (DDI 0403E) chapters
B3.2 (SCB), C1.6 (debug registers), and ARMv6-M ARM (DDI 0419E) C1.6. The registers pyOCD uses
(``pyocd/coresight/cortex_m.py``): CPUID, CLIDR, ID_ISAR3, MPU_TYPE, MVFR0/2, DHCSR, DCRSR,
DCRDR, DEMCR, DFSR, AIRCR, VTOR, ICSR, ICTR.

Execution model: the core only executes inside calls into this object -- when pyOCD resumes it
(DHCSR write with C_HALT clear) the emulator runs synchronously until BKPT, a fault, WFI or the
resume budget; each DHCSR read while the core is still running runs another, shorter slice. A
fault with DEMCR.VC_HARDERR set is taken as a real core takes it (ARMv7-M ARM C1.6.2, vector
catch): the HardFault entry stacks the frame and fetches the handler's address, then the core
halts at the handler's first instruction with DFSR.VCATCH, so a debugger finds the faulting PC in
the stacked frame (SP + 24). Without the vector catch the model runs no handler: the core locks
up (DHCSR.S_LOCKUP), where a real one would run the firmware's HardFault handler.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Dict

from piflash.sim.cpu import Cpu, StopReason
from piflash.sim.debug.coresight import CLASS_GENERIC_IP, id_registers
from piflash.sim.memory.bus import BusError, RegisterDevice

__all__ = ["CoreInfo", "CORES", "Scs", "SCS_BASE"]

SCS_BASE = 0xE000E000

# Offsets from SCS_BASE.
ICTR = 0x004
CPUID = 0xD00
ICSR = 0xD04
VTOR = 0xD08
AIRCR = 0xD0C
CCR = 0xD14
DFSR = 0xD30
DHCSR = 0xDF0
DCRSR = 0xDF4
DCRDR = 0xDF8
DEMCR = 0xDFC
#: Debug Security Control and Status (Armv8-M ARM DDI 0553 D1.2.56): CDS [16] the core's
#: security state for debug, CDSKEY [17] must be written 0 for a CDS write to take, SBRSEL [1]
#: and SBRSELEN [0].
DSCSR = 0xE08
DSCSR_CDS, DSCSR_CDSKEY = 1 << 16, 1 << 17
CPACR = 0xD88
FPCCR = 0xF34

DBGKEY = 0xA05F
AIRCR_VECTKEY = 0x05FA
AIRCR_VECTKEYSTAT = 0xFA05
AIRCR_VECTRESET = 1 << 0
AIRCR_SYSRESETREQ = 1 << 2

C_DEBUGEN = 1 << 0
C_HALT = 1 << 1
C_STEP = 1 << 2
C_MASKINTS = 1 << 3
S_REGRDY = 1 << 16
S_HALT = 1 << 17
S_SLEEP = 1 << 18
S_LOCKUP = 1 << 19
S_RETIRE_ST = 1 << 24
S_RESET_ST = 1 << 25

DFSR_HALTED = 1 << 0
DFSR_BKPT = 1 << 1
DFSR_VCATCH = 1 << 3

DEMCR_VC_CORERESET = 1 << 0
DEMCR_VC_HARDERR = 1 << 10
DCRSR_REGWNR = 1 << 16

#: (instructions, seconds) run when pyOCD resumes the core.
RESUME_BUDGET = (20_000_000, 0.05)
#: (instructions, seconds) run on each DHCSR read while the core runs.
POLL_BUDGET = (2_000_000, 0.01)


@dataclass(frozen=True)
class CoreInfo:
    """Identity of a core type.

    :param arch: ``"v6m"``, ``"v7m"`` or ``"v8m"`` (Mainline with the Security Extension: its
        SCS, DWT and FPB are class 0x9 CoreSight components identified by DEVARCH).
    :param cpuid: CPUID value (implementer 0x41, variant, architecture 0xC/0xF, part, revision).
    :param has_fpu: FPv4-SP present.
    :param scs_part: / dwt_part / fpb_part / rom_part: CoreSight part numbers (pyOCD
        ``component_ids.py``: v7-M SCS 0x000, DWT 0x002, FPB 0x003; v6-M SCS 0x008, DWT 0x00A,
        BPU 0x00B; ROM tables from the cores' TRMs).
    :param fpb_code: / fpb_lit / dwt_comparators: comparator counts.
    :param id_regs: Read-only SCS registers {offset: value}.
    :param reset_regs: Reset values of read/write SCS registers {offset: value}.
    """

    name: str
    arch: str
    cpuid: int
    has_fpu: bool
    scs_part: int
    dwt_part: int
    fpb_part: int
    rom_part: int
    fpb_code: int
    fpb_lit: int
    dwt_comparators: int
    id_regs: Dict[int, int] = field(default_factory=dict)
    reset_regs: Dict[int, int] = field(default_factory=dict)


_V7M_FEATURES = {  # ID_PFR0 .. ID_ISAR4 (0xD40-0xD70), Cortex-M3 TRM r2p1 table 4-1 / M4 TRM 4.3.
    0xD40: 0x00000030,
    0xD44: 0x00000200,
    0xD48: 0x00100000,
    0xD4C: 0x00000000,
    0xD50: 0x00100030,
    0xD54: 0x00000000,
    0xD58: 0x01000000,
    0xD5C: 0x00000000,
    0xD60: 0x01101110,
    0xD64: 0x02111000,
    0xD68: 0x21112231,
    0xD6C: 0x01111110,
    0xD70: 0x01310102,
}

CORES: Dict[str, CoreInfo] = {
    # Cortex-M0 r0p0: CPUID 0x410CC200 (Cortex-M0 TRM DDI 0432C 4.2); ROM table part 0x471.
    # v6-M has no CLIDR/ID_ISAR/MPU_TYPE/MVFR: those addresses read as zero.
    "cortex-m0": CoreInfo(
        "cortex-m0", "v6m", 0x410CC200, False, 0x008, 0x00A, 0x00B, 0x471, fpb_code=4, fpb_lit=0, dwt_comparators=2
    ),
    # Cortex-M0+ r0p1 (RP2040): CPUID 0x410CC601 (Cortex-M0+ TRM DDI 0484C 4.3.1, RP2040 datasheet
    # 2.4.5.1 CPUID); ROM table part 0x4C0, SCS/DWT/BPU parts as the M0's. v6-M: no feature IDs.
    "cortex-m0plus": CoreInfo(
        "cortex-m0plus", "v6m", 0x410CC601, False, 0x008, 0x00A, 0x00B, 0x4C0, fpb_code=4, fpb_lit=0, dwt_comparators=2
    ),
    # Cortex-M3 r1p1 (STM32F1): CPUID 0x411FC231 (RM0008 / PM0056 4.4.1); ROM part 0x4C3.
    # No MPU on STM32F1 (MPU_TYPE 0). ICTR INTLINESNUM 2 (68 interrupts).
    "cortex-m3": CoreInfo(
        "cortex-m3",
        "v7m",
        0x411FC231,
        False,
        0x000,
        0x002,
        0x003,
        0x4C3,
        fpb_code=6,
        fpb_lit=2,
        dwt_comparators=4,
        id_regs={**_V7M_FEATURES, ICTR: 2, 0xD90: 0},
        reset_regs={CCR: 0x00000000},
    ),
    # Cortex-M4F r0p1 (nRF52840): CPUID 0x410FC241 (Cortex-M4 TRM DDI 0439B 4.3.1); ROM part 0x4C4;
    # ID_ISAR3 0x01111131 (SIMD = 3: DSP extension), MPU_TYPE 0x800 (8 regions), MVFR0
    # 0x10110021 / MVFR1 0x11000011 (FPv4-SP), no MVFR2 (reads 0). ICTR 1 (48 interrupts).
    "cortex-m4f": CoreInfo(
        "cortex-m4f",
        "v7m",
        0x410FC241,
        True,
        0x000,
        0x002,
        0x003,
        0x4C4,
        fpb_code=6,
        fpb_lit=2,
        dwt_comparators=4,
        id_regs={
            **_V7M_FEATURES,
            ICTR: 1,
            0xD6C: 0x01111131,
            0xD70: 0x01310132,
            0xD90: 0x00000800,
            0xF40: 0x10110021,
            0xF44: 0x11000011,
            0xF48: 0,
        },
        reset_regs={CCR: 0x00000200, FPCCR: 0xC0000000},
    ),
    # Cortex-M33 r1p0 as the RP2350 has it: CPUID 0x411FD210 (RP2350 datasheet 3.7.5, the
    # CPUID register); FPv5-SP, DSP, the Security Extension, 8 MPU regions, 52 interrupts
    # (datasheet 3.7.2). The feature registers pyOCD decodes (``cortex_m_v8m.py``): ID_PFR1
    # 0x210 (Security [7:4] = 1), ID_ISAR0 CmpBranch < 3 (v8.0-M), ID_ISAR3 SIMD 3 (DSP),
    # MPU_TYPE 8 regions, MVFR0/1/2 0x10110021 / 0x11000011 / 0x40 (single-precision FPv5);
    # CLIDR 0 (no cache). CoreSight: SCS, DWT and FPB part 0xD21 (DEVARCH 0x47702A04,
    # 0x47701A02, 0x47701A03), ROM table part 0x4C9 (Cortex-M33 TRM 100230, appendix A).
    "cortex-m33": CoreInfo(
        "cortex-m33",
        "v8m",
        0x411FD210,
        True,
        0xD21,
        0xD21,
        0xD21,
        0x4C9,
        fpb_code=8,
        fpb_lit=0,
        dwt_comparators=4,
        id_regs={
            ICTR: 1,
            0xD40: 0x00000030,
            0xD44: 0x00000210,
            0xD48: 0x00200000,
            0xD4C: 0,
            0xD60: 0x01101110,
            0xD6C: 0x01111131,
            0xD78: 0,
            0xD90: 0x00000800,
            0xF40: 0x10110021,
            0xF44: 0x11000011,
            0xF48: 0x00000040,
        },
        reset_regs={CCR: 0x00000201, FPCCR: 0xC0000000},
    ),
}

#: DEVARCH of the Armv8-M debug components (CoreSight class 0x9; Armv8-M ARM D1.2: SCS
#: ARCHID 0x2A04, DWT 0x1A02, FPB 0x1A03; architect Arm, PRESENT).
V8M_DEVARCH = {"scs": 0x47702A04, "dwt": 0x47701A02, "fpb": 0x47701A03}


class Scs(RegisterDevice):
    """The SCS register block (4 KiB at 0xE000E000) with the core debug logic.

    :param core: The core type.
    :param cpu: The emulated CPU.
    :param read_word: Reads a word from the system bus (vector fetch); may raise BusError.
    :param system_reset: Performs a system reset of the board (AIRCR.SYSRESETREQ).
    :param before_run: Called before the CPU resumes (the board flushes stale translations).
    """

    def __init__(
        self,
        core: CoreInfo,
        cpu: Cpu,
        read_word: Callable[[int], int],
        system_reset: Callable[[], None],
        before_run: Callable[[], None],
    ) -> None:
        self.core = core
        self.cpu = cpu
        self._read_word = read_word
        self._system_reset = system_reset
        self._before_run = before_run
        cpu.set_vector_table(self._vector_table, read_word)
        if core.arch == "v8m":
            self._ids = id_registers(core.scs_part, 0, 0x9, devarch=V8M_DEVARCH["scs"])
        else:
            self._ids = id_registers(core.scs_part, 0, CLASS_GENERIC_IP)
        #: DSCSR: the core runs Secure from reset (an RP2350 boots Secure).
        self.dscsr = DSCSR_CDS
        self._regs: Dict[int, int] = {}
        # Debug-domain state (not reset by a system reset).
        self.debugen = False
        self.maskints = False
        self.halted = False
        self.lockup = False
        self.sleeping = False
        self.reset_held = False
        self.s_reset_st = False
        self.s_retire_st = False
        self.dfsr = 0
        self.demcr = 0
        self.dcrdr = 0
        #: (instructions, seconds) budgets of a resume and of a poll slice; a host with a
        #: virtual clock (:mod:`piflash.sim.probes.usb`) raises them so that a run never depends on
        #: the wall clock.
        self.resume_budget = RESUME_BUDGET
        self.poll_budget = POLL_BUDGET
        self.reset_registers()

    # -- reset ---------------------------------------------------------------------------------
    def reset_registers(self) -> None:
        """Reset the system-domain SCS registers (VTOR, AIRCR.PRIGROUP, CCR, ...)."""
        self._regs = dict(self.core.reset_regs)

    def core_reset(self) -> None:
        """Local reset of the core: registers from the vector table at address 0 (VTOR resets
        to 0), then halt if DEMCR.VC_CORERESET and debug are enabled (DFSR.VCATCH), else run."""
        self.reset_registers()
        self.s_reset_st = True
        self.lockup = self.sleeping = False
        try:
            sp, pc = self._read_word(0), self._read_word(4)
        except BusError:
            sp, pc = 0xFFFFFFFF, 0xFFFFFFFF
        self.cpu.reset(sp, pc)
        if self.debugen and self.demcr & DEMCR_VC_CORERESET:
            self.halted = True
            self.dfsr |= DFSR_VCATCH
        else:
            self.halted = False

    def hold_reset(self, asserted: bool) -> None:
        """Model nRESET (or the nRF52 CTRL-AP RESET): the core is stopped while held; the
        caller performs the system reset on release."""
        self.reset_held = asserted
        if asserted:
            self.s_reset_st = True

    # -- state ---------------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        """Whether the core would execute instructions now."""
        return not (self.halted or self.lockup or self.sleeping or self.reset_held)

    def _run(self, budget: "tuple[int, float]") -> None:
        self._before_run()
        reason = self.cpu.run(*budget)
        self.s_retire_st = True
        if reason is StopReason.BKPT:
            if self.debugen:
                self.halted = True
                self.dfsr |= DFSR_BKPT
            else:
                self.lockup = True  # BKPT with halting debug off escalates to HardFault
        elif reason is StopReason.FAULT:
            if self.debugen and self.demcr & DEMCR_VC_HARDERR and self._take_hardfault():
                self.halted = True
                self.dfsr |= DFSR_VCATCH
            else:
                self.lockup = True
        elif reason is StopReason.SLEEP:
            self.sleeping = True

    def _vector_table(self) -> int:
        """The vector table's address now: VTOR (ARMv7-M ARM B3.2.5), 0 on v6-M (B1.5.3)."""
        return 0 if self.core.arch == "v6m" else self._regs.get(VTOR, 0)

    def _take_hardfault(self) -> bool:
        """HardFault entry for a vector catch; False when the entry itself faults (lockup)."""
        try:
            self.cpu.take_hardfault(self._vector_table(), self._read_word)
        except BusError:
            return False
        return True

    def _halt(self) -> None:
        self.halted = True
        self.lockup = self.sleeping = False
        self.dfsr |= DFSR_HALTED

    # -- DHCSR ---------------------------------------------------------------------------------
    def read_dhcsr(self) -> int:
        """DHCSR read: runs a slice first if the core is running; S_RESET_ST and S_RETIRE_ST
        are sticky and clear on read."""
        if self.running:
            self._run(self.poll_budget)
        value = (C_DEBUGEN if self.debugen else 0) | (C_MASKINTS if self.maskints else 0)
        if self.halted:
            value |= C_HALT | S_HALT | S_REGRDY
        elif self.lockup:
            value |= S_LOCKUP
        elif self.sleeping:
            value |= S_SLEEP
        if self.s_retire_st:
            value |= S_RETIRE_ST
        if self.s_reset_st:
            value |= S_RESET_ST
        self.s_retire_st = False
        self.s_reset_st = self.reset_held
        return value

    def write_dhcsr(self, value: int) -> None:
        """DHCSR write (ignored without DBGKEY 0xA05F in bits [31:16])."""
        if value >> 16 != DBGKEY:
            return
        self.maskints = bool(value & C_MASKINTS)
        if not value & C_DEBUGEN:
            self.debugen = False
            if self.halted:
                self.halted = False
                if self.running:
                    self._run(self.resume_budget)
            return
        self.debugen = True
        if value & C_HALT:
            if not self.halted and not self.reset_held:
                self._halt()
        elif self.halted:
            self.halted = False
            if self.reset_held:
                return
            if value & C_STEP:
                # A faulting step halts on the faulting instruction (the model has no exception
                # entry; locking up here would leave the debugger waiting for the step forever).
                self._before_run()
                reason = self.cpu.step()
                self.s_retire_st = reason is not StopReason.FAULT
                self._halt()
                if reason is StopReason.BKPT:
                    self.dfsr |= DFSR_BKPT
                elif reason is StopReason.FAULT and self.demcr & DEMCR_VC_HARDERR and self._take_hardfault():
                    self.dfsr |= DFSR_VCATCH
            else:
                self._run(self.resume_budget)

    # -- register block ------------------------------------------------------------------------
    @property
    def cpacr(self) -> int:
        """CPACR (0xE000ED88): which coprocessors the core may use (2 bits per coprocessor)."""
        return self._regs.get(CPACR, 0)

    def peek32(self, offset: int) -> int:
        if offset == DHCSR:
            return 0
        return self.read32(offset)

    def read32(self, offset: int) -> int:
        if offset >= 0xFD0 or (offset >= 0xFBC and self.core.arch == "v8m"):
            return self._ids.get(offset, 0)
        if offset == DSCSR and self.core.arch == "v8m":
            return self.dscsr
        if offset == DHCSR:
            return self.read_dhcsr()
        if offset == DCRDR:
            return self.dcrdr
        if offset == DCRSR:
            return 0
        if offset == DEMCR:
            return self.demcr
        if offset == DFSR:
            return self.dfsr
        if offset == CPUID:
            return self.core.cpuid
        if offset == AIRCR:
            return (AIRCR_VECTKEYSTAT << 16) | (self._regs.get(AIRCR, 0) & 0x700)
        if offset == ICSR:
            return 0
        if offset in self.core.id_regs:
            return self.core.id_regs[offset]
        if self.core.arch == "v6m" and 0xD34 <= offset < 0xDF0:
            return 0  # no CFSR/ID/FP registers on v6-M
        return self._regs.get(offset, 0)

    def write32(self, offset: int, value: int) -> None:
        if offset == DHCSR:
            self.write_dhcsr(value)
        elif offset == DCRSR:
            if self.halted:
                regsel = value & 0x7F
                if value & DCRSR_REGWNR:
                    self.cpu.write_reg(regsel, self.dcrdr)
                else:
                    self.dcrdr = self.cpu.read_reg(regsel)
        elif offset == DCRDR:
            self.dcrdr = value
        elif offset == DEMCR:
            self.demcr = value & (0x01000401 if self.core.arch == "v6m" else 0x010F07F1)
        elif offset == DSCSR and self.core.arch == "v8m":
            if not value & DSCSR_CDSKEY:
                self.dscsr = (self.dscsr & ~DSCSR_CDS) | (value & DSCSR_CDS)
            self.dscsr = (self.dscsr & ~0x3) | (value & 0x3)
        elif offset == DFSR:
            self.dfsr &= ~value
        elif offset == AIRCR:
            if value >> 16 == AIRCR_VECTKEY:
                if self.core.arch != "v6m":
                    self._regs[AIRCR] = value & 0x700
                if value & AIRCR_SYSRESETREQ:
                    self._system_reset()
                elif value & AIRCR_VECTRESET and self.core.arch == "v7m":
                    self.core_reset()
        elif offset in (CPUID, ICSR) or offset in self.core.id_regs or offset >= 0xFD0:
            pass  # read-only, or write-to-clear bits the model does not keep
        else:
            self._regs[offset] = value
