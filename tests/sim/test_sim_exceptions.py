"""The emulated core takes SVCall and returns from it as a Cortex-M does (ARMv7-M ARM B1.5.6
PushStack, B1.5.7 ExceptionTaken, B1.5.8 ExceptionReturn): a SoftDevice's or an RTOS's system
call (pyOCD's l1_nrf52840-dk.bin calls sd_softdevice_vector_table_base_set, SVC 0x13) runs its
handler instead of stopping the model with a fault."""

from __future__ import annotations

import struct

import pytest

pytest.importorskip("unicorn")

from unicorn import arm_const as A  # noqa: E402

from piflash.sim.cpu import Cpu, StopReason  # noqa: E402

RAM, STACK_TOP, PSP_TOP = 0x20000000, 0x20001000, 0x20000800
CODE, HANDLER = 0x20000100, 0x20000200
#: Thread code: movs r0, #5; svc #1; adds r0, #1; bkpt #0.
THREAD = struct.pack("<4H", 0x2005, 0xDF01, 0x3001, 0xBE00)
#: SVCall handler: ldr r1, [sp]; adds r1, #10; str r1, [sp] (the stacked R0 +10); bkpt #1; bx lr.
SVC_HANDLER = struct.pack("<5H", 0x9900, 0x310A, 0x9100, 0xBE01, 0x4770)


def _core(vectors: bool = True) -> Cpu:
    cpu = Cpu("cortex-m4f", True, bus=None)
    cpu.map_ram(RAM, 0x2000)
    table = bytearray(64)
    struct.pack_into("<I", table, 4 * 11, HANDLER | 1)
    cpu.uc.mem_write(RAM, bytes(table))
    cpu.uc.mem_write(CODE, THREAD)
    cpu.uc.mem_write(HANDLER, SVC_HANDLER)
    if vectors:
        cpu.set_vector_table(lambda: RAM, lambda addr: struct.unpack("<I", cpu.uc.mem_read(addr, 4))[0])
    cpu.reset(STACK_TOP, CODE | 1)
    return cpu


def _resume_after_bkpt(cpu: Cpu) -> StopReason:
    cpu.uc.reg_write(A.UC_ARM_REG_PC, (cpu.pc + 2) | 1)
    return cpu.run(1000, 5.0)


def test_svc_runs_the_handler_in_handler_mode_and_returns_after_the_svc():
    cpu = _core()
    assert cpu.run(1000, 5.0) is StopReason.BKPT and cpu.pc == HANDLER + 6  # in the handler
    uc = cpu.uc
    assert uc.reg_read(A.UC_ARM_REG_XPSR) & 0x1FF == 11  # IPSR: SVCall
    assert uc.reg_read(A.UC_ARM_REG_LR) == 0xFFFFFFF9  # back to Thread mode, main stack
    frame = struct.unpack("<8I", uc.mem_read(STACK_TOP - 32, 32))
    assert uc.reg_read(A.UC_ARM_REG_MSP) == STACK_TOP - 32
    assert frame[0] == 15 and frame[6] == CODE + 4  # R0 (+10 by the handler), return address
    assert _resume_after_bkpt(cpu) is StopReason.BKPT and cpu.pc == CODE + 6
    assert uc.reg_read(A.UC_ARM_REG_R0) == 16  # the handler's R0 popped, then adds r0, #1
    assert uc.reg_read(A.UC_ARM_REG_XPSR) & 0x1FF == 0 and uc.reg_read(A.UC_ARM_REG_MSP) == STACK_TOP


def test_svc_from_the_process_stack_stacks_there_and_returns_to_it():
    cpu = _core()
    uc = cpu.uc
    uc.reg_write(A.UC_ARM_REG_PSP, PSP_TOP)
    uc.reg_write(A.UC_ARM_REG_CONTROL, 2)  # SPSEL: Thread mode runs on the process stack
    assert cpu.run(1000, 5.0) is StopReason.BKPT and cpu.pc == HANDLER + 6
    assert uc.reg_read(A.UC_ARM_REG_LR) == 0xFFFFFFFD
    assert uc.reg_read(A.UC_ARM_REG_CONTROL) & 2 == 0 and uc.reg_read(A.UC_ARM_REG_SP) == STACK_TOP
    assert uc.reg_read(A.UC_ARM_REG_PSP) == PSP_TOP - 32
    frame = struct.unpack("<8I", uc.mem_read(PSP_TOP - 32, 32))
    assert frame[0] == 5 and frame[6] == CODE + 4  # the handler's +10 went to the main stack
    assert _resume_after_bkpt(cpu) is StopReason.BKPT and uc.reg_read(A.UC_ARM_REG_R0) == 6
    assert uc.reg_read(A.UC_ARM_REG_CONTROL) & 2 == 2 and uc.reg_read(A.UC_ARM_REG_SP) == PSP_TOP
    assert uc.reg_read(A.UC_ARM_REG_MSP) == STACK_TOP


def test_an_unaligned_stack_is_realigned_and_restored():
    cpu = _core()
    cpu.uc.reg_write(A.UC_ARM_REG_MSP, STACK_TOP - 4)
    assert cpu.run(1000, 5.0) is StopReason.BKPT
    assert cpu.uc.reg_read(A.UC_ARM_REG_MSP) == STACK_TOP - 40  # 8-byte aligned below the frame
    assert struct.unpack("<I", cpu.uc.mem_read(STACK_TOP - 40 + 28, 4))[0] & (1 << 9)  # xPSR bit 9
    assert _resume_after_bkpt(cpu) is StopReason.BKPT and cpu.uc.reg_read(A.UC_ARM_REG_MSP) == STACK_TOP - 4


def test_svc_without_a_vector_table_and_a_bad_exc_return_are_faults():
    cpu = _core(vectors=False)
    assert cpu.run(1000, 5.0) is StopReason.FAULT and "exception 2" in cpu.fault
    cpu = _core()
    assert cpu.run(1000, 5.0) is StopReason.BKPT
    cpu.uc.reg_write(A.UC_ARM_REG_LR, 0xFFFFFFF5)  # reserved EXC_RETURN (table B1-8)
    assert _resume_after_bkpt(cpu) is StopReason.FAULT and "INVPC" in cpu.fault


def test_a_thread_that_used_the_fpu_gets_the_extended_frame():
    cpu = _core()
    uc = cpu.uc
    uc.reg_write(A.UC_ARM_REG_CONTROL, 4)  # FPCA: the thread has used the FPU
    uc.reg_write(A.UC_ARM_REG_S0, 0x3F800000)
    uc.reg_write(A.UC_ARM_REG_FPSCR, 0x00400000)
    assert cpu.run(1000, 5.0) is StopReason.BKPT
    assert uc.reg_read(A.UC_ARM_REG_LR) == 0xFFFFFFE9 and uc.reg_read(A.UC_ARM_REG_CONTROL) & 4 == 0
    frame = struct.unpack("<26I", uc.mem_read(STACK_TOP - 104, 104))
    assert frame[6] == CODE + 4 and frame[8] == 0x3F800000 and frame[24] == 0x00400000
    uc.reg_write(A.UC_ARM_REG_S0, 0)  # the handler's own use of S0
    assert _resume_after_bkpt(cpu) is StopReason.BKPT and uc.reg_read(A.UC_ARM_REG_S0) == 0x3F800000
    assert uc.reg_read(A.UC_ARM_REG_CONTROL) & 4 == 4 and uc.reg_read(A.UC_ARM_REG_MSP) == STACK_TOP
