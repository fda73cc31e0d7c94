/* Test firmware for the nRF52840 (Cortex-M4F, run here without the FPU):
 * blinks P0.13 (LED1 on the nRF52840 DK) forever.
 *
 * Register addresses are from Nordic's nRF52840 Product Specification v1.7:
 *   GPIO chapter       port P0 at 0x5000 0000; OUT 0x504, OUTSET 0x508,
 *                      OUTCLR 0x50C, DIRSET 0x518
 *   Interrupts table   peripheral IDs 0..47, so 16 + 48 vector entries
 */
#include "firmware.h"

#define P0_BASE      0x50000000u
#define P0_OUT       REG32(P0_BASE + 0x504u)
#define P0_OUTSET    REG32(P0_BASE + 0x508u)
#define P0_OUTCLR    REG32(P0_BASE + 0x50Cu)
#define P0_DIRSET    REG32(P0_BASE + 0x518u)

#define LED_PIN      13u
#define IRQ_COUNT    48

CORTEX_M_VECTORS(IRQ_COUNT);

__attribute__((section(".firmware_id"), used))
const char firmware_id[] = "piflash test firmware: nrf52840";

volatile uint32_t blink_delay = 400000u;  /* .data: copied from flash */
volatile uint32_t table_sum;              /* .bss: zeroed */
volatile uint32_t blinks;

int main(void)
{
    table_sum = table_checksum();

    P0_DIRSET = 1u << LED_PIN;

    for (;;) {
        if (P0_OUT & (1u << LED_PIN))
            P0_OUTCLR = 1u << LED_PIN;
        else
            P0_OUTSET = 1u << LED_PIN;
        blinks++;
        for (uint32_t i = blink_delay; i != 0; i--)
            __asm__ volatile ("nop");
    }
}
