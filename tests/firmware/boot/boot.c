/* Boot-check test firmware: what a board does in its first moments after the flash, in the four
 * ways piflash's boot check must tell apart (docs/boot-check.md).  One source, built per target
 * and per kind (the Makefile passes -DBOOT_KIND_x, -DBOOT_TARGET="name" and -DIRQ_COUNT=n):
 *
 *   rtt       prints a banner and "self-test: PASS" on RTT up-channel 0, then sets boot_status
 *             to BOOT_STATUS_OK and idles (counting in boot_ticks);
 *   semihost  writes a line with SYS_WRITE0, then ends with SYS_EXIT_EXTENDED
 *             (ADP_Stopped_ApplicationExit, status BOOT_EXIT_STATUS);
 *   fault     prints a line on RTT, then loads from an address with no memory behind it: a bus
 *             fault, taken as HardFault; fault_load is the function whose load faults;
 *   silent    never prints and never sets boot_status: the board that "runs" but never starts.
 *
 * The RTT control block follows SEGGER's layout (SEGGER_RTT.h: SEGGER_RTT_CB with one up and one
 * down SEGGER_RTT_BUFFER_UP/DOWN; the ID "SEGGER RTT" written last so a debugger never sees a
 * half-made block).  Semihosting: "Semihosting for AArch32 and AArch64" (Arm, 2022), operation
 * numbers SYS_WRITE0 0x04 and SYS_EXIT_EXTENDED 0x20, reason ADP_Stopped_ApplicationExit
 * 0x20026, entered with BKPT 0xAB on M-profile. */
#include "firmware.h"

#ifndef IRQ_COUNT
#error "IRQ_COUNT must be given"
#endif
#ifndef BOOT_EXIT_STATUS
#define BOOT_EXIT_STATUS 3
#endif
#define BOOT_STATUS_OK 0x600DB007u

CORTEX_M_VECTORS(IRQ_COUNT);

__attribute__((section(".firmware_id"), used))
const char firmware_id[] = "piflash boot-check firmware: " BOOT_TARGET;

volatile uint32_t boot_status;   /* the word check's word: BOOT_STATUS_OK once started */
volatile uint32_t boot_ticks;    /* counts while idling */

typedef struct {
    const char *name;
    char *buf;
    uint32_t size;
    volatile uint32_t wr_off;
    volatile uint32_t rd_off;
    uint32_t flags;
} rtt_buffer_t;

typedef struct {
    volatile char id[16];
    int32_t max_up;
    int32_t max_down;
    rtt_buffer_t up[1];
    rtt_buffer_t down[1];
} rtt_cb_t;

rtt_cb_t _SEGGER_RTT;            /* the name SEGGER's library gives it, found through the ELF */
static char rtt_up[256];
static char rtt_down[16];

__attribute__((unused)) static void rtt_init(void)
{
    static const char id[] = "SEGGER RTT";

    _SEGGER_RTT.max_up = 1;
    _SEGGER_RTT.max_down = 1;
    _SEGGER_RTT.up[0] = (rtt_buffer_t){ "Terminal", rtt_up, sizeof rtt_up, 0, 0, 0 };
    _SEGGER_RTT.down[0] = (rtt_buffer_t){ "Terminal", rtt_down, sizeof rtt_down, 0, 0, 0 };
    __asm__ volatile ("" ::: "memory");
    for (unsigned i = 0; i < sizeof id; i++)
        _SEGGER_RTT.id[i] = id[i];
}

/* Write a string into up-buffer 0; drops what does not fit (SEGGER's "no block, skip" mode). */
__attribute__((unused)) static void rtt_print(const char *s)
{
    rtt_buffer_t *up = &_SEGGER_RTT.up[0];
    uint32_t wr = up->wr_off;

    for (; *s; s++) {
        uint32_t next = wr + 1 == up->size ? 0 : wr + 1;
        if (next == up->rd_off)
            break;
        up->buf[wr] = *s;
        wr = next;
    }
    __asm__ volatile ("" ::: "memory");
    up->wr_off = wr;
}

__attribute__((unused, noreturn)) static void idle(void)
{
    for (;;) {
        boot_ticks++;
        for (volatile uint32_t i = 0; i < 1000u; i++)
            ;
    }
}

#if defined(BOOT_KIND_semihost)
static int semihost(int op, const void *arg)
{
    register int r0 __asm__("r0") = op;
    register const void *r1 __asm__("r1") = arg;
    __asm__ volatile ("bkpt 0xab" : "+r"(r0) : "r"(r1) : "memory");
    return r0;
}
#endif

#if defined(BOOT_KIND_fault)
/* 0x0ff00000: inside the Code region, past any flash these parts have (1 MiB at most): a load
 * there gets a bus error on the real chips and in the simulator alike. */
__attribute__((noinline)) uint32_t fault_load(void)
{
    return *(volatile uint32_t *)0x0ff00000u;
}
#endif

int main(void)
{
#if defined(BOOT_KIND_rtt)
    rtt_init();
    rtt_print("piflash boot-check firmware: " BOOT_TARGET "\n");
    rtt_print("self-test: PASS\n");
    boot_status = BOOT_STATUS_OK;
    idle();
#elif defined(BOOT_KIND_semihost)
    static const uint32_t exit_block[2] = { 0x20026u, BOOT_EXIT_STATUS };
    semihost(0x04, "piflash boot-check firmware: " BOOT_TARGET ": exiting\n");
    semihost(0x20, exit_block);
    idle();
#elif defined(BOOT_KIND_fault)
    rtt_init();
    rtt_print("piflash boot-check firmware: " BOOT_TARGET ": about to fault\n");
    boot_status = fault_load();
    idle();
#elif defined(BOOT_KIND_silent)
    idle();
#else
#error "no BOOT_KIND_ given"
#endif
    return 0;
}
