"""The emulated Cortex-M CPU, on the ``unicorn`` engine (UC_ARCH_ARM, UC_MODE_THUMB|UC_MODE_MCLASS).

Memory: RAM is ordinary unicorn memory. Main flash (and the STM32 boot alias) is ordinary
unicorn memory mapped read/execute-only (unicorn cannot execute from MMIO), kept equal to the
flash array by the array's mirror callback; a CPU store into it raises unicorn's
write-protection hook, which hands the store to the flash controller and returns True, which in
unicorn 2.1.4 suppresses the raw write and continues after the instruction (verified for STR,
STRH, STRB and STM with writeback) -- so the controller alone decides what the cells hold, and a
load right after the store sees the controller's result. Peripheral / PPB / info-page ranges are
MMIO routed to the board's :class:`~piflash.sim.memory.bus.Bus`.

Execution is synchronous: :meth:`Cpu.run` executes until a stop condition or a budget of
instructions and wall time, and reports why it stopped. A BKPT arrives as unicorn interrupt 7
with PC on the BKPT instruction (what pyOCD's flash-algorithm runner expects). Any other
exception (undefined instruction, unmapped access, bad state) is reported as a fault. The model
takes two exceptions on its own, as the core does: SVCall for an SVC instruction (a SoftDevice's
or an RTOS's system call) and the exception return through an EXC_RETURN value
(:meth:`Cpu.take_exception`, :meth:`Cpu.exception_return`); it has no interrupts, and no fault
handler runs on its own (a fault stops the model); :meth:`Cpu.take_hardfault`
performs the HardFault entry (stacking and the vector fetch) for the debug logic, which uses it
when a vector catch halts the core at the handler (:mod:`piflash.sim.debug.scs`).

A CPU access to peripheral space that no model covers reads 0 and ignores writes, as on the real
parts; the first access to each such address is logged ("firmware touched an unmodelled
peripheral at ADDR") so that firmware waiting on a register the simulator lacks is not a silent hang.
"""

from __future__ import annotations

import ctypes
import enum
import logging
import signal
import struct
import threading
import time
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from unicorn import (
    UC_ARCH_ARM,
    UC_HOOK_CODE,
    UC_HOOK_INTR,
    UC_HOOK_MEM_READ,
    UC_HOOK_MEM_WRITE_PROT,
    UC_MODE_MCLASS,
    UC_MODE_THUMB,
    UC_PROT_ALL,
    UC_PROT_EXEC,
    UC_PROT_READ,
    Uc,
    UcError,
)
from unicorn import arm_const as A

from piflash.sim.memory.bus import BusError, Region, ZeroRegion

__all__ = ["Cpu", "StopReason", "CpuMemoryRegion", "UC_MODELS"]

#: unicorn CPU model per core key of :data:`piflash.sim.debug.scs.CORES`.
UC_MODELS = {
    "cortex-m0": A.UC_CPU_ARM_CORTEX_M0,
    "cortex-m0plus": A.UC_CPU_ARM_CORTEX_M0,
    "cortex-m3": A.UC_CPU_ARM_CORTEX_M3,
    "cortex-m4f": A.UC_CPU_ARM_CORTEX_M4,
    "cortex-m33": A.UC_CPU_ARM_CORTEX_M33,
}

#: QEMU/unicorn ARM exception number of BKPT (target/arm/cpu.h EXCP_BKPT).
EXCP_BKPT = 7
#: ... and of a coprocessor instruction no coprocessor answers (target/arm/cpu.h EXCP_NOCP: the
#: M-profile NOCP UsageFault), raised with PC on the instruction.
EXCP_NOCP = 17
#: ... of an SVC instruction (EXCP_SWI), raised with PC after it, and of a branch to an
#: EXC_RETURN value in Handler mode (EXCP_EXCEPTION_EXIT), raised with PC on that value.
EXCP_SWI, EXCP_EXCEPTION_EXIT = 2, 8

# DCRSR REGSEL values (ARMv7-M ARM DDI 0403E C1.6.3, ARMv6-M ARM DDI 0419E C1.6.3).
_REGSEL: Dict[int, int] = {i: getattr(A, "UC_ARM_REG_R%d" % i) for i in range(13)}
_REGSEL.update(
    {13: A.UC_ARM_REG_SP, 14: A.UC_ARM_REG_LR, 16: A.UC_ARM_REG_XPSR, 17: A.UC_ARM_REG_MSP, 18: A.UC_ARM_REG_PSP}
)
_FP_REGSEL: Dict[int, int] = {0x40 + i: getattr(A, "UC_ARM_REG_S%d" % i) for i in range(32)}
_FP_REGSEL[33] = A.UC_ARM_REG_FPSCR
REGSEL_PC = 15
REGSEL_CFBP = 20  # CONTROL[31:24] FAULTMASK[23:16] BASEPRI[15:8] PRIMASK[7:0]
#: ARMv8-M with the Security Extension (Armv8-M ARM DDI 0553 C1.6.3, DCRSR.REGSEL): the banked
#: stack pointers 0x18-0x1B (MSP_NS, PSP_NS, MSP_S, PSP_S), the stack limits 0x1C-0x1F and the
#: combined CONTROL/FAULTMASK/BASEPRI/PRIMASK of each state, 0x22 (Secure) and 0x23 (Non-secure).
#: unicorn keeps one bank: the core runs Secure (RP2350 boots Secure), so the Secure selectors
#: are the live registers; the Non-secure ones and the limits are kept for read-back only.
REGSEL_V8M_SECURE = {0x1A: A.UC_ARM_REG_MSP, 0x1B: A.UC_ARM_REG_PSP}
REGSEL_CFBP_S = 0x22
REGSEL_V8M_KEPT = (0x18, 0x19, 0x1C, 0x1D, 0x1E, 0x1F, 0x23)
XPSR_T = 1 << 24

_WFI, _WFE = 0xBF30, 0xBF20  # Thumb encodings (ARMv7-M ARM A7.7.189 / A7.7.188)

#: EXC_RETURN values (ARMv7-M ARM B1.5.8 table B1-8): back to Thread mode on the main stack, on
#: the process stack, and to Handler mode.
EXC_RETURN_THREAD_MSP, EXC_RETURN_THREAD_PSP, EXC_RETURN_HANDLER = 0xFFFFFFF9, 0xFFFFFFFD, 0xFFFFFFF1
#: Exception numbers of HardFault and SVCall (ARMv7-M ARM B1.5.2), also their vectors' indexes.
HARDFAULT, SVCALL = 3, 11
#: CONTROL bits (ARMv7-M ARM B1.4.4): SPSEL (Thread mode uses the process stack) and FPCA (the
#: thread has used the FPU, so an exception stacks the extended frame).
CONTROL_SPSEL, CONTROL_FPCA = 1 << 1, 1 << 2
#: EXC_RETURN bits (ARMv7-M ARM B1.5.8): [2] return to the process stack, [3] to Thread mode,
#: [4] clear when the frame is the extended one (with S0-S15 and FPSCR).
EXC_RETURN_PSP, EXC_RETURN_THREAD, EXC_RETURN_BASIC_FRAME = 1 << 2, 1 << 3, 1 << 4
#: Words of the basic frame (R0-R3, R12, LR, return address, xPSR) and of the extended frame
#: (the basic frame, S0-S15, FPSCR and a reserved word) (ARMv7-M ARM B1.5.7, figure B1-3).
BASIC_FRAME_WORDS, EXTENDED_FRAME_WORDS = 8, 26
XPSR_ALIGNED = 1 << 9  #: stacked xPSR bit 9: the frame was realigned to 8 bytes (B1.5.7)

LOG = logging.getLogger(__name__)


class StopReason(enum.Enum):
    """Why :meth:`Cpu.run` returned."""

    BKPT = "bkpt"  #: a BKPT instruction; PC is on it
    FAULT = "fault"  #: an exception the model does not take (see :attr:`Cpu.fault`)
    SLEEP = "sleep"  #: WFI/WFE with nothing to wake the core
    BUDGET = "budget"  #: instruction or time budget used up; still running


class _DeferSignals:
    """Hold back SIGINT/SIGTERM while the emulator runs, then deliver them to the previous
    Python handler once emulation has stopped between two instructions.

    A Python signal handler runs at the next bytecode of the main thread, which during emulation
    is inside a unicorn callback; if it raises there (KeyboardInterrupt), unicorn's or ctypes'
    callback guard may swallow the exception and the interrupted flash store is lost. Only
    Python-level handlers are deferred (SIG_DFL/SIG_IGN act in C and are left alone), and only
    in the main thread (the only one that receives Python signal handlers).
    """

    SIGNALS = tuple(s for s in (getattr(signal, "SIGINT", None), getattr(signal, "SIGTERM", None)) if s)

    def __init__(self) -> None:
        self.pending: Optional[Tuple[int, object]] = None
        self._saved: Dict[int, Callable[..., object]] = {}

    def __enter__(self) -> "_DeferSignals":
        if threading.current_thread() is threading.main_thread():
            for sig in self.SIGNALS:
                previous = signal.getsignal(sig)
                if callable(previous):
                    self._saved[sig] = previous
                    signal.signal(sig, self._record)
        return self

    def _record(self, signum: int, frame: object) -> None:
        if self.pending is None:
            self.pending = (signum, frame)

    def __exit__(self, *exc: object) -> None:
        for sig, previous in self._saved.items():
            signal.signal(sig, previous)
        if self.pending is not None:
            signum, frame = self.pending
            self._saved[signum](signum, frame)  # e.g. raises KeyboardInterrupt here


class CpuMemoryRegion(Region):
    """Bus view of emulator-backed RAM for the debugger.

    :param on_write: Called after every debugger write (the board flushes the translation cache
        before the next run when RAM that may hold code has changed).
    """

    def __init__(self, cpu: "Cpu", start: int, size: int, on_write: Callable[[], None]) -> None:
        super().__init__(start, size, "ram")
        self._uc = cpu.uc
        self._on_write = on_write

    def read(self, addr: int, size: int) -> int:
        return int.from_bytes(self._uc.mem_read(addr, size), "little")

    def write(self, addr: int, size: int, value: int) -> None:
        self._uc.mem_write(addr, (value & ((1 << (8 * size)) - 1)).to_bytes(size, "little"))
        self._on_write()

    def read_block(self, addr: int, length: int) -> bytes:
        return bytes(self._uc.mem_read(addr, length))

    def write_block(self, addr: int, data: bytes) -> None:
        self._uc.mem_write(addr, bytes(data))
        self._on_write()


class Cpu:
    """One emulated core.

    :param core: Core key (``"cortex-m0"``, ``"cortex-m3"``, ``"cortex-m4f"``, ``"cortex-m33"``).
    :param has_fpu: Whether S0-S31/FPSCR are accessible through DCRSR.
    :param bus: The board bus, used for MMIO ranges.
    """

    def __init__(self, core: str, has_fpu: bool, bus: "object") -> None:
        self.uc = Uc(UC_ARCH_ARM, UC_MODE_THUMB | UC_MODE_MCLASS)
        self.uc.ctl_set_cpu_model(UC_MODELS[core])
        self.has_fpu = has_fpu
        #: An Armv8-M Mainline core (its extra DCRSR selectors answer).
        self.v8m = core == "cortex-m33"
        self._bus = bus
        self._stop: Optional[StopReason] = None
        self._interrupt: Optional[BaseException] = None
        #: Text describing the last fault (for logs and tests).
        self.fault: str = ""
        #: Coprocessor number -> handler of its instructions (:meth:`add_coprocessor`).
        self._coprocessors: Dict[int, Callable[[int, int], bool]] = {}
        #: v8-M registers unicorn does not bank (:data:`REGSEL_V8M_KEPT`), for read-back.
        self._kept: Dict[int, int] = {}
        #: Where SVCall finds its handler (:meth:`set_vector_table`).
        self._vectors: Optional[Tuple[Callable[[], int], Callable[[int], int]]] = None
        self._flash_ranges: List[Tuple[int, int, Callable[[int, int, int], None]]] = []
        #: Host buffers shared by flash mappings and their aliases (:meth:`map_flash`).
        self._shared: List[object] = []
        self._hooks: List[object] = [
            self.uc.hook_add(UC_HOOK_INTR, self._on_intr),
            self.uc.hook_add(UC_HOOK_MEM_WRITE_PROT, self._on_write_prot),
        ]
        self.uc.reg_write(A.UC_ARM_REG_XPSR, XPSR_T)
        #: Addresses of unmodelled peripheral registers the CPU has touched (each logged once).
        self.unmodelled: set = set()

    # -- memory map --------------------------------------------------------------------------
    def map_ram(self, start: int, size: int) -> None:
        """Map zero-filled RAM at ``start`` (4 KiB multiple)."""
        self.uc.mem_map(start, size, UC_PROT_ALL)

    def map_flash(
        self, start: int, size: int, on_store: Callable[[int, int, int], None], aliases: Sequence[int] = ()
    ) -> Callable[[int, bytes], None]:
        """Map read/execute-only memory for a flash array at ``start``; every CPU store into it
        calls ``on_store(addr, size, value)`` instead of writing. Returns the mirror callback
        ``write(offset, data)`` that keeps the mapping equal to the array.

        :param aliases: Further addresses (``size``-aligned, 4 KiB multiples) where the same
            cells appear (a serial flash repeated through its XIP window: the part ignores the
            address bits above its size). They share one host buffer with ``start``
            (unicorn's ``mem_map_ptr``), so the one mirror write updates every copy; a store
            there is handed to ``on_store`` at the matching address from ``start``.
        """
        if not aliases:
            self.uc.mem_map(start, size, UC_PROT_READ | UC_PROT_EXEC)
        else:
            cells = ctypes.create_string_buffer(size)
            self._shared.append(cells)  # unicorn keeps only the pointer
            for base in (start, *aliases):
                self.uc.mem_map_ptr(base, size, UC_PROT_READ | UC_PROT_EXEC, ctypes.addressof(cells))
        self._flash_ranges.append((start, start + size, on_store))
        for base in aliases:
            self._flash_ranges.append((base, base + size, _shifted(on_store, start - base)))
        uc = self.uc
        return lambda offset, data: uc.mem_write(start + offset, data)

    def _on_write_prot(self, uc: Uc, access: int, addr: int, size: int, value: int, _ud: object) -> bool:
        for start, end, on_store in self._flash_ranges:
            if start <= addr < end:
                try:
                    on_store(addr, size, value & ((1 << (8 * size)) - 1))
                except Exception as err:  # never let an exception escape into unicorn
                    self._raise_fault("flash store at 0x%08x: %s" % (addr, err))
                except BaseException as exc:
                    self._interrupted(exc)
                return True  # handled: the raw write is suppressed
        return False

    def add_native_code(self, begin: int, end: int, call: Callable[[int], None]) -> None:
        """Run ``call(address)`` in Python before each instruction at ``[begin, end]`` executes:
        a boot ROM function the model implements natively (the instruction there, a ``BX LR``,
        then returns to the caller with whatever ``call`` left in the registers). An exception
        from ``call`` stops the core with a fault."""

        def on_code(uc: Uc, address: int, size: int, _ud: object) -> None:
            try:
                call(address)
            except Exception as err:  # never let an exception escape into unicorn
                self._raise_fault("native code at 0x%08x: %s" % (address, err))
            except BaseException as exc:
                self._interrupted(exc)

        self._hooks.append(self.uc.hook_add(UC_HOOK_CODE, on_code, begin=begin, end=end))

    def add_coprocessor(self, number: int, handler: Callable[[int, int], bool]) -> None:
        """Have ``handler(first, second)`` execute the instructions for coprocessor ``number``
        (0-7): it gets the instruction's two half-words (MCR/MRC/MCRR/MRRC/CDP and their "2"
        forms, T1/T2 encodings, Armv8-M ARM C2.4: the coprocessor number in bits [11:8] of the
        second) and returns True when it executed it (the core goes on after it), False to
        leave the NOCP UsageFault (the model stops with a fault). It may use :meth:`read_reg`,
        :meth:`write_reg` and :meth:`set_flags`; an exception from it stops the core with a
        fault."""
        self._coprocessors[number] = handler

    def set_flags(self, nzcv: int) -> None:
        """Set APSR.NZCV to the 4-bit ``nzcv`` (an MRC to APSR_nzcv, Rt = 15)."""
        xpsr = self.uc.reg_read(A.UC_ARM_REG_XPSR)
        self.uc.reg_write(A.UC_ARM_REG_XPSR, (xpsr & 0x0FFFFFFF) | ((nzcv & 0xF) << 28))

    def _coprocessor(self, uc: Uc) -> bool:
        pc = self.pc
        try:
            first, second = struct.unpack("<HH", bytes(uc.mem_read(pc, 4)))
        except UcError:
            return False
        handler = self._coprocessors.get((second >> 8) & 0xF)
        if handler is None or (first & 0xEC00) != 0xEC00:
            return False
        try:
            if not handler(first, second):
                return False
        except Exception as err:  # the model's fault, not the simulator's
            self.fault = "coprocessor %d at 0x%08x: %s" % ((second >> 8) & 0xF, pc, err)
            return False
        uc.reg_write(A.UC_ARM_REG_PC, (pc + 4) | 1)
        return True

    def add_read_watch(self, begin: int, end: int, call: Callable[[int, int], None]) -> None:
        """Call ``call(address, size)`` for every data load the core makes from ``[begin, end]``
        (instruction fetches are not loads): a memory whose reads cost time (the RP2040's XIP).
        An exception from ``call`` stops the core with a fault."""

        def on_read(uc: Uc, access: int, address: int, size: int, value: int, _ud: object) -> None:
            try:
                call(address, size)
            except Exception as err:  # never let an exception escape into unicorn
                self._raise_fault("read watch at 0x%08x: %s" % (address, err))
            except BaseException as exc:
                self._interrupted(exc)

        self._hooks.append(self.uc.hook_add(UC_HOOK_MEM_READ, on_read, begin=begin, end=end))

    def _interrupted(self, exc: BaseException) -> None:
        # KeyboardInterrupt/SystemExit inside a callback: stop, and re-raise from run(). (unicorn's
        # own guard would lose it when the callback's return value then signals an error.)
        if self._interrupt is None:
            self._interrupt = exc
        self.uc.emu_stop()

    def map_mmio(self, start: int, size: int) -> None:
        """Route CPU accesses to ``[start, start+size)`` through the bus."""

        bus = self._bus

        def read(uc: Uc, offset: int, size: int, _ud: object) -> int:
            try:
                if isinstance(bus.find(start + offset), ZeroRegion):
                    self._touched(start + offset)
                return bus.read(start + offset, size)
            except BusError as err:
                self._raise_fault("bus error reading 0x%08x" % err.address)
            except Exception as err:
                self._raise_fault("MMIO read at 0x%08x: %s" % (start + offset, err))
            except BaseException as exc:
                self._interrupted(exc)
            return 0

        def write(uc: Uc, offset: int, size: int, value: int, _ud: object) -> None:
            try:
                if isinstance(bus.find(start + offset), ZeroRegion):
                    self._touched(start + offset)
                bus.write(start + offset, size, value & ((1 << (8 * size)) - 1))
            except BusError as err:
                self._raise_fault("bus error writing 0x%08x" % err.address)
            except Exception as err:
                self._raise_fault("MMIO write at 0x%08x: %s" % (start + offset, err))
            except BaseException as exc:
                self._interrupted(exc)

        self.uc.mmio_map(start, size, read, None, write, None)

    def _touched(self, addr: int) -> None:
        if addr not in self.unmodelled:
            self.unmodelled.add(addr)
            LOG.info(
                "firmware touched an unmodelled peripheral at 0x%08x (pc 0x%08x): it reads 0 "
                "and ignores writes in the simulator",
                addr,
                self.pc,
            )

    def flush_translation_cache(self) -> None:
        """Drop unicorn's translated blocks (needed after code memory changed behind it)."""
        self.uc.ctl_flush_tb()

    # -- registers ---------------------------------------------------------------------------
    def read_reg(self, regsel: int) -> int:
        """Value of the core register with DCRSR selector ``regsel`` (0 for reserved ones)."""
        uc = self.uc
        if regsel == REGSEL_PC:
            return uc.reg_read(A.UC_ARM_REG_PC) & ~1
        if regsel in _REGSEL:
            return uc.reg_read(_REGSEL[regsel]) & 0xFFFFFFFF
        if regsel == REGSEL_CFBP:
            return (
                (uc.reg_read(A.UC_ARM_REG_CONTROL) & 0xFF) << 24
                | (uc.reg_read(A.UC_ARM_REG_FAULTMASK) & 0xFF) << 16
                | (uc.reg_read(A.UC_ARM_REG_BASEPRI) & 0xFF) << 8
                | (uc.reg_read(A.UC_ARM_REG_PRIMASK) & 0xFF)
            )
        if self.has_fpu and regsel in _FP_REGSEL:
            return uc.reg_read(_FP_REGSEL[regsel]) & 0xFFFFFFFF
        if self.v8m:
            if regsel in REGSEL_V8M_SECURE:
                return uc.reg_read(REGSEL_V8M_SECURE[regsel]) & 0xFFFFFFFF
            if regsel == REGSEL_CFBP_S:
                return self.read_reg(REGSEL_CFBP)
            return self._kept.get(regsel, 0)
        return 0

    def write_reg(self, regsel: int, value: int) -> None:
        """Write core register ``regsel`` (writes to reserved selectors are ignored)."""
        uc = self.uc
        value &= 0xFFFFFFFF
        if regsel == REGSEL_PC:
            uc.reg_write(A.UC_ARM_REG_PC, value | 1)  # M-profile: always Thumb
        elif regsel in _REGSEL:
            uc.reg_write(_REGSEL[regsel], value)
        elif regsel == REGSEL_CFBP:
            uc.reg_write(A.UC_ARM_REG_PRIMASK, value & 1)
            uc.reg_write(A.UC_ARM_REG_BASEPRI, (value >> 8) & 0xFF)
            uc.reg_write(A.UC_ARM_REG_FAULTMASK, (value >> 16) & 1)
            uc.reg_write(A.UC_ARM_REG_CONTROL, (value >> 24) & 0x7)
        elif self.has_fpu and regsel in _FP_REGSEL:
            uc.reg_write(_FP_REGSEL[regsel], value)
        elif self.v8m and regsel in REGSEL_V8M_SECURE:
            uc.reg_write(REGSEL_V8M_SECURE[regsel], value)
        elif self.v8m and regsel == REGSEL_CFBP_S:
            self.write_reg(REGSEL_CFBP, value)
        elif self.v8m and regsel in REGSEL_V8M_KEPT:
            self._kept[regsel] = value

    @property
    def pc(self) -> int:
        """Current program counter (Thumb bit clear)."""
        return self.uc.reg_read(A.UC_ARM_REG_PC) & ~1

    def reset(self, sp: int, pc: int) -> None:
        """Core reset (ARMv7-M ARM B1.5.5 TakeReset): MSP from the vector table, PC from the
        reset vector, EPSR.T from its bit 0, LR = 0xFFFFFFFF, CONTROL and the masks cleared."""
        uc = self.uc
        uc.reg_write(A.UC_ARM_REG_CONTROL, 0)
        uc.reg_write(A.UC_ARM_REG_PRIMASK, 0)
        uc.reg_write(A.UC_ARM_REG_BASEPRI, 0)
        uc.reg_write(A.UC_ARM_REG_FAULTMASK, 0)
        uc.reg_write(A.UC_ARM_REG_MSP, sp & 0xFFFFFFFC)
        uc.reg_write(A.UC_ARM_REG_PSP, 0)
        uc.reg_write(A.UC_ARM_REG_LR, 0xFFFFFFFF)
        uc.reg_write(A.UC_ARM_REG_XPSR, XPSR_T if pc & 1 else 0)
        uc.reg_write(A.UC_ARM_REG_PC, pc | 1)

    def set_vector_table(self, vector_table: Callable[[], int], read_word: Callable[[int], int]) -> None:
        """Where the exceptions the model takes on its own (SVCall) find their handler:
        ``vector_table() -> int`` gives the table's address now (VTOR, 0 on v6-M) and
        ``read_word(addr) -> int`` reads a vector. Until this is called an SVC stops the model
        with a fault."""
        self._vectors = (vector_table, read_word)

    def take_hardfault(self, vector_table: int, read_word: Callable[[int], int]) -> int:
        """HardFault entry (ARMv7-M ARM B1.5.6 PushStack, B1.5.7 ExceptionTaken) with the
        faulting instruction as the return address; see :meth:`take_exception`.

        :returns: the stacked return address (int), i.e. the faulting instruction.
        :raises BusError: the vector cannot be read or the frame not stacked (a lockup).
        """
        pc = self.pc
        self.take_exception(HARDFAULT, pc, read_word(vector_table + 4 * HARDFAULT))
        return pc

    def take_exception(self, number: int, return_address: int, handler: int) -> None:
        """Exception entry (ARMv7-M ARM B1.5.6 PushStack, B1.5.7 ExceptionTaken): push R0-R3,
        R12, LR, ``return_address`` and xPSR (and, when CONTROL.FPCA is set on a core with an
        FPU, S0-S15 and FPSCR: the extended frame) on the current stack, 8-byte aligned (xPSR
        bit 9 noting a realignment); then LR = EXC_RETURN, CONTROL.SPSEL = CONTROL.FPCA = 0,
        IPSR = ``number`` and PC = ``handler`` (its bit 0 gives EPSR.T).

        :param number: Exception number (int, 2-511).
        :param return_address: Address the exception returns to (int).
        :param handler: The vector read from the table (int).
        :raises BusError: the frame cannot be stacked (a lockup on the real core).
        """
        uc = self.uc
        xpsr = uc.reg_read(A.UC_ARM_REG_XPSR) & 0xFFFFFFFF
        control = uc.reg_read(A.UC_ARM_REG_CONTROL) & 0xFFFFFFFF
        handler_mode = xpsr & 0x1FF
        psp = not handler_mode and control & CONTROL_SPSEL
        extended = self.has_fpu and control & CONTROL_FPCA
        words = EXTENDED_FRAME_WORDS if extended else BASIC_FRAME_WORDS
        sp = uc.reg_read(A.UC_ARM_REG_PSP if psp else A.UC_ARM_REG_MSP) & 0xFFFFFFFF
        frame_sp = (sp - 4 * words) & ~7
        stacked_xpsr = (xpsr & ~XPSR_ALIGNED) | (XPSR_ALIGNED if (sp - 4 * words) & 4 else 0)
        regs = [uc.reg_read(getattr(A, "UC_ARM_REG_R%d" % i)) for i in range(4)]
        regs += [uc.reg_read(A.UC_ARM_REG_R12), uc.reg_read(A.UC_ARM_REG_LR), return_address, stacked_xpsr]
        if extended:
            regs += [uc.reg_read(getattr(A, "UC_ARM_REG_S%d" % i)) for i in range(16)]
            regs += [uc.reg_read(A.UC_ARM_REG_FPSCR), 0]
        try:
            uc.mem_write(frame_sp, b"".join((r & 0xFFFFFFFF).to_bytes(4, "little") for r in regs))
        except UcError as err:
            raise BusError(frame_sp) from err  # stacking fault: lockup, as a real core does
        # Order matters to unicorn's banked stack pointers: the stack pointer is written while
        # the mode that owns it is current, and CONTROL.SPSEL changes in Thread mode only.
        uc.reg_write(A.UC_ARM_REG_PSP if psp else A.UC_ARM_REG_MSP, frame_sp)
        uc.reg_write(A.UC_ARM_REG_CONTROL, control & ~(CONTROL_SPSEL | CONTROL_FPCA))
        exc_return = EXC_RETURN_HANDLER if handler_mode else EXC_RETURN_THREAD_PSP if psp else EXC_RETURN_THREAD_MSP
        uc.reg_write(A.UC_ARM_REG_LR, exc_return & ~(EXC_RETURN_BASIC_FRAME if extended else 0))
        uc.reg_write(A.UC_ARM_REG_XPSR, (XPSR_T if handler & 1 else 0) | (number & 0x1FF))
        uc.reg_write(A.UC_ARM_REG_PC, handler | 1)

    def exception_return(self, exc_return: int) -> None:
        """Exception return (ARMv7-M ARM B1.5.8 ExceptionReturn, PopStack): pop the frame
        :meth:`take_exception` pushed from the stack EXC_RETURN names, restore R0-R3, R12, LR,
        PC, xPSR (and S0-S15, FPSCR from an extended frame), undo the realignment, and set
        CONTROL.SPSEL from EXC_RETURN bit 2 and CONTROL.FPCA from NOT bit 4 on a return to
        Thread mode.

        :param exc_return: The EXC_RETURN value branched to (int).
        :raises ValueError: not one of the EXC_RETURN values of table B1-8 (an INVPC
            UsageFault on the real core).
        :raises BusError: the frame cannot be read.
        """
        uc = self.uc
        exc_return |= 1
        if exc_return | EXC_RETURN_BASIC_FRAME not in (
            EXC_RETURN_HANDLER,
            EXC_RETURN_THREAD_MSP,
            EXC_RETURN_THREAD_PSP,
        ) or (not exc_return & EXC_RETURN_BASIC_FRAME and not self.has_fpu):
            raise ValueError("EXC_RETURN 0x%08x is not a valid return value (INVPC)" % exc_return)
        psp = bool(exc_return & EXC_RETURN_PSP)
        extended = not exc_return & EXC_RETURN_BASIC_FRAME
        words = EXTENDED_FRAME_WORDS if extended else BASIC_FRAME_WORDS
        sp = uc.reg_read(A.UC_ARM_REG_PSP if psp else A.UC_ARM_REG_MSP) & 0xFFFFFFFF
        try:
            frame = struct.unpack("<%dI" % words, bytes(uc.mem_read(sp, 4 * words)))
        except UcError as err:
            raise BusError(sp) from err
        for i in range(4):
            uc.reg_write(getattr(A, "UC_ARM_REG_R%d" % i), frame[i])
        uc.reg_write(A.UC_ARM_REG_R12, frame[4])
        uc.reg_write(A.UC_ARM_REG_LR, frame[5])
        if extended:
            for i in range(16):
                uc.reg_write(getattr(A, "UC_ARM_REG_S%d" % i), frame[8 + i])
            uc.reg_write(A.UC_ARM_REG_FPSCR, frame[24])
        stacked_xpsr = frame[7]
        uc.reg_write(
            A.UC_ARM_REG_PSP if psp else A.UC_ARM_REG_MSP, sp + 4 * words + (4 if stacked_xpsr & XPSR_ALIGNED else 0)
        )
        uc.reg_write(A.UC_ARM_REG_XPSR, stacked_xpsr & ~XPSR_ALIGNED)
        if exc_return & EXC_RETURN_THREAD:  # now in Thread mode, where SPSEL can change
            control = uc.reg_read(A.UC_ARM_REG_CONTROL) & ~(CONTROL_SPSEL | CONTROL_FPCA)
            uc.reg_write(
                A.UC_ARM_REG_CONTROL, control | (CONTROL_SPSEL if psp else 0) | (CONTROL_FPCA if extended else 0)
            )
        uc.reg_write(A.UC_ARM_REG_PC, frame[6] | 1)

    # -- execution ---------------------------------------------------------------------------
    def _on_intr(self, uc: Uc, intno: int, _ud: object) -> None:
        if intno == EXCP_NOCP and self._coprocessors:
            self.fault = ""
            if self._coprocessor(uc):
                return  # executed: go on after it
        if intno == EXCP_SWI and self._vectors is not None:
            vector_table, read_word = self._vectors
            try:  # PC is already after the SVC: the return address (ARMv7-M ARM B1.5.6)
                self.take_exception(SVCALL, self.pc, read_word(vector_table() + 4 * SVCALL))
                return
            except Exception as err:
                self.fault = "SVCall entry at 0x%08x: %s" % (self.pc, err)
        elif intno == EXCP_EXCEPTION_EXIT:
            exc_return = uc.reg_read(A.UC_ARM_REG_PC)
            try:
                self.exception_return(exc_return)
                return
            except Exception as err:
                self.fault = "exception return to 0x%08x: %s" % (exc_return | 1, err)
        if intno == EXCP_BKPT:
            self._stop = StopReason.BKPT
        else:
            self._stop = StopReason.FAULT
            self.fault = self.fault or "exception %d at 0x%08x" % (intno, self.pc)
        uc.emu_stop()

    def _raise_fault(self, text: str) -> None:
        if self._stop is None:
            self._stop = StopReason.FAULT
            self.fault = text
        self.uc.emu_stop()

    def step(self) -> StopReason:
        """Execute one instruction."""
        return self.run(max_instructions=1, max_seconds=1.0)

    def run(self, max_instructions: int, max_seconds: float, chunk: int = 200_000) -> StopReason:
        """Run from the current PC until BKPT, a fault, WFI/WFE, or the budget is used up.

        :param max_instructions: Instruction budget (int).
        :param max_seconds: Wall-clock budget in seconds (checked between chunks).
        :param chunk: Instructions per ``emu_start`` call.
        """
        if not self.uc.reg_read(A.UC_ARM_REG_XPSR) & XPSR_T:
            # Executing with EPSR.T == 0 is an INVSTATE UsageFault (ARMv7-M ARM B1.4.2).
            self.fault = "EPSR.T is 0 (INVSTATE)"
            return StopReason.FAULT
        with _DeferSignals() as signals:
            return self._run(max_instructions, max_seconds, chunk, signals)

    def _run(self, max_instructions: int, max_seconds: float, chunk: int, signals: _DeferSignals) -> StopReason:
        deadline = time.monotonic() + max_seconds
        left = max_instructions
        while left > 0:
            n = min(chunk, left)
            self._stop = None
            start = self.pc
            try:
                self.uc.emu_start(start | 1, 0xFFFFFFFF, count=n)
            except UcError as err:
                lost = getattr(self.uc, "_hook_exception", None)  # see _interrupted()
                if self._interrupt is None and lost is not None and not isinstance(lost, Exception):
                    self._interrupt = lost
                if self._stop is None and self._interrupt is None and self._just_slept():
                    # unicorn reports a WFE as an invalid instruction at the next PC (QEMU's
                    # yield exception): the core waits for an event that never comes.
                    return StopReason.SLEEP
                if self._stop is None:
                    self._stop = StopReason.FAULT
                    self.fault = "%s at 0x%08x" % (err, self.pc)
            if self._interrupt is not None:
                exc, self._interrupt = self._interrupt, None
                raise exc
            if self._stop is not None:
                return self._stop
            if self._just_slept():
                return StopReason.SLEEP
            left -= n
            if time.monotonic() >= deadline or signals.pending is not None:
                break
        return StopReason.BUDGET

    def _just_slept(self) -> bool:
        # unicorn returns from emu_start right after WFI (the core "halts" waiting for an
        # interrupt); nothing in the model ever interrupts, so the core sleeps for good.
        pc = self.pc
        if pc < 2:
            return False
        try:
            prev = int.from_bytes(self.uc.mem_read(pc - 2, 2), "little")
        except UcError:
            return False
        return prev in (_WFI, _WFE)


def _shifted(on_store: Callable[[int, int, int], None], delta: int) -> Callable[[int, int, int], None]:
    """``on_store`` for an alias of the flash ``delta`` bytes below (or above) its first window:
    a store at ``addr`` is handed on at ``addr + delta``."""

    def handler(addr: int, n: int, value: int) -> None:
        on_store(addr + delta, n, value)

    return handler
