/* Reset handler shared by the test images: copy .data from flash to RAM, zero
 * .bss, run main().  The symbols come from common/sections.ld. */
#include "firmware.h"

extern uint32_t _sidata, _sdata, _edata, _sbss, _ebss;

void Reset_Handler(void)
{
    const uint32_t *src = &_sidata;
    uint32_t *dst = &_sdata;

    while (dst < &_edata)
        *dst++ = *src++;
    for (dst = &_sbss; dst < &_ebss; dst++)
        *dst = 0;
    main();
    for (;;)
        ;
}

/* Any unexpected exception or interrupt parks the core here, where a debugger
 * can see it. */
void Default_Handler(void)
{
    for (;;)
        ;
}

void NMI_Handler(void) __attribute__((alias("Default_Handler")));
void HardFault_Handler(void) __attribute__((alias("Default_Handler")));
