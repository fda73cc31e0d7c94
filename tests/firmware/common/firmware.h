/* Shared declarations for piflash's test firmware (bare metal, no C library). */
#ifndef PIFLASH_TEST_FIRMWARE_H
#define PIFLASH_TEST_FIRMWARE_H

#include <stdint.h>

typedef void (*vector_t)(void);

/* Defined by common/sections.ld. */
extern uint32_t _estack;

/* common/startup.c */
void Reset_Handler(void);
void NMI_Handler(void);
void HardFault_Handler(void);
void Default_Handler(void);

/* common/table.c: a constant table that makes the image span several flash
 * pages and gives it content that is not all 0x00/0xff. */
#define TABLE_WORDS 3072u  /* 12 KiB */
extern const uint32_t table[TABLE_WORDS];
uint32_t table_checksum(void);

/* Each target's main.c */
extern const vector_t vectors[];
extern const char firmware_id[];
int main(void);

/* The Cortex-M vector table (Armv7-M ARM B1.5.3): stack top, Reset, NMI, HardFault, the
 * system exceptions, then irq_count device interrupts, all but Reset to Default_Handler. */
#define CORTEX_M_VECTORS(irq_count)                                       \
    __attribute__((section(".isr_vector"), used))                         \
    const vector_t vectors[16 + (irq_count)] = {                          \
        [0] = (vector_t)&_estack,                                         \
        [1] = Reset_Handler,                                              \
        [2] = NMI_Handler,                                                \
        [3] = HardFault_Handler,                                          \
        [4 ... 6] = Default_Handler,   /* MemManage, BusFault, UsageFault */ \
        [11] = Default_Handler,        /* SVCall */                       \
        [12] = Default_Handler,        /* DebugMonitor */                 \
        [14 ... 15] = Default_Handler, /* PendSV, SysTick */              \
        [16 ... 16 + (irq_count) - 1] = Default_Handler,                  \
    }

/* Register access. */
#define REG32(addr) (*(volatile uint32_t *)(uintptr_t)(addr))

#endif
