/* Test firmware for the STM32F103RC (Cortex-M3): blinks PA5 forever.
 *
 * Register addresses are from ST's RM0008 reference manual (STM32F101xx,
 * F102xx, F103xx, F105xx and F107xx), Rev 21:
 *   §3.3 memory map        RCC at 0x4002 1000, GPIOA at 0x4001 0800
 *   §7.3.7 RCC_APB2ENR     offset 0x18; bit 2 IOPAEN (port A clock)
 *   §9.2.1 GPIOx_CRL       offset 0x00; pin 5 is bits 23:20 (CNF5:MODE5),
 *                          0b0010 = general-purpose push-pull output, 2 MHz
 *   §9.2.4 GPIOx_ODR       offset 0x0C
 *   §9.2.5 GPIOx_BSRR      offset 0x10; bit n sets pin n, bit n+16 resets it
 *   §10.1.2 vector table   16 system entries + 60 interrupts (high-density)
 */
#include "firmware.h"

#define RCC_BASE     0x40021000u
#define RCC_APB2ENR  REG32(RCC_BASE + 0x18u)
#define IOPAEN       (1u << 2)

#define GPIOA_BASE   0x40010800u
#define GPIOA_CRL    REG32(GPIOA_BASE + 0x00u)
#define GPIOA_ODR    REG32(GPIOA_BASE + 0x0Cu)
#define GPIOA_BSRR   REG32(GPIOA_BASE + 0x10u)

#define LED_PIN      5u
#define IRQ_COUNT    60

CORTEX_M_VECTORS(IRQ_COUNT);

__attribute__((section(".firmware_id"), used))
const char firmware_id[] = "piflash test firmware: stm32f103rc";

volatile uint32_t blink_delay = 200000u;  /* .data: copied from flash */
volatile uint32_t table_sum;              /* .bss: zeroed */
volatile uint32_t blinks;

int main(void)
{
    table_sum = table_checksum();

    RCC_APB2ENR |= IOPAEN;
    GPIOA_CRL = (GPIOA_CRL & ~(0xFu << (LED_PIN * 4))) | (0x2u << (LED_PIN * 4));

    for (;;) {
        if (GPIOA_ODR & (1u << LED_PIN))
            GPIOA_BSRR = 1u << (LED_PIN + 16);
        else
            GPIOA_BSRR = 1u << LED_PIN;
        blinks++;
        for (uint32_t i = blink_delay; i != 0; i--)
            __asm__ volatile ("nop");
    }
}
