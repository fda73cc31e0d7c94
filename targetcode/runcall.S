/*
 * piflash's run caller: calls a CMSIS flash algorithm's ProgramPage with arguments taken from a
 * mailbox in target RAM, so that the host starts each call by writing only the PC (one DCRSR
 * register write) instead of PC, R0-R2 and LR (piflash/multipage.py, RunProgrammer).
 *
 * Registers, set once by the host before the first call and preserved across calls (R4-R7 are
 * callee-saved under the AAPCS, so ProgramPage keeps them; the debugger does not touch them):
 *   R4  mailbox of this call        R5  mailbox of the next call (the two buffers alternate)
 *   R6  ProgramPage's address, Thumb bit set
 * Mailbox (four 32-bit words): +0 flash address, +4 byte count, +8 buffer address; on return
 * +4 holds ProgramPage's result (0 = success). The host never writes a count of 0, so a +4 that
 * still holds the count after the core halts means ProgramPage did not return here.
 *
 * Cortex-M0 instructions only (ARMv6-M), position independent: one binary for M0/M3/M4F,
 * loaded anywhere word-aligned. Execution ends on BKPT, where the host sees the core halt.
 */
    .syntax unified
    .cpu cortex-m0
    .thumb
    .text
    .global run_call
    .type run_call, %function
run_call:
    ldr     r0, [r4, #0]
    ldr     r1, [r4, #4]
    ldr     r2, [r4, #8]
    blx     r6
    str     r0, [r4, #4]
    mov     r3, r4
    mov     r4, r5
    mov     r5, r3
    bkpt    #0
    .size run_call, . - run_call
