/* A CMSIS-Pack flash algorithm (FLM) for the nRF52840's 1 MiB of main flash,
 * written for piflash's pack-target test (tests/sim/test_packs.py).
 *
 * What an FLM is and the five entry points (Init, UnInit, EraseChip,
 * EraseSector, ProgramPage; each returns 0 on success) are defined by the
 * Open-CMSIS-Pack specification, "Flash Programming Algorithms"
 * (https://open-cmsis-pack.github.io/Open-CMSIS-Pack-Spec/main/html/flashAlgorithm.html).
 * The debugger copies PrgCode and PrgData to target RAM, points SP at a stack
 * it allocates, R9 at the start of PrgData (the static base) and LR at a
 * breakpoint, then calls one entry point; pyOCD does this in
 * pyocd/flash/flash.py with the layout from pyocd/target/pack/flash_algo.py.
 *
 * The code is position independent and keeps no state: it touches no global
 * variable, so it needs nothing from R9 and works wherever it is loaded.
 *
 * NVMC registers: nRF52840 Product Specification v1.7, section 4.3 (NVMC),
 * register table: base 0x4001E000; READY 0x400 (1 = ready); CONFIG 0x504
 * (WEN field: 0 Ren read only, 1 Wen write enabled, 2 Een erase enabled);
 * ERASEPAGE 0x508 (write the page's first address to erase it); ERASEALL
 * 0x50C (write 1 to erase all flash and the UICR). Only whole 32-bit words
 * may be written to flash, one at a time, each once READY reads 1.
 */
#include <stdint.h>

#include "flash_os.h"

#define NVMC_BASE       0x4001E000u
#define NVMC_READY      (*(volatile uint32_t *)(NVMC_BASE + 0x400u))
#define NVMC_CONFIG     (*(volatile uint32_t *)(NVMC_BASE + 0x504u))
#define NVMC_ERASEPAGE  (*(volatile uint32_t *)(NVMC_BASE + 0x508u))
#define NVMC_ERASEALL   (*(volatile uint32_t *)(NVMC_BASE + 0x50Cu))

#define CONFIG_REN      0u
#define CONFIG_WEN      1u
#define CONFIG_EEN      2u

#define FLASH_START     0x00000000u
#define FLASH_SIZE      0x00100000u     /* 1 MiB (PS v1.7, "Memory": 256 pages of 4 KiB) */
#define PAGE_SIZE       0x1000u         /* erase unit and programming page */

/* Polls of READY before an operation counts as failed. ERASEALL, the slowest
 * operation, takes at most 169 ms (PS v1.7 NVMC electrical specification,
 * t_ERASEALL); a poll is a few cycles at 64 MHz, so 2^24 polls last well
 * over a second. */
#define READY_POLLS     0x1000000u

/* Result codes: 0 is success (specification); the others are ours. */
#define OK              0
#define ERR_TIMEOUT     1
#define ERR_RANGE       2

static int wait_ready(void)
{
    for (uint32_t n = 0; n < READY_POLLS; n++) {
        if (NVMC_READY & 1u)
            return OK;
    }
    return ERR_TIMEOUT;
}

static int set_config(uint32_t mode)
{
    int status = wait_ready();
    NVMC_CONFIG = mode;
    return status;
}

/* Every entry point ends here: back to read only, whatever happened. */
static int finish(int status)
{
    int back = set_config(CONFIG_REN);
    return status != OK ? status : back;
}

int Init(uint32_t adr, uint32_t clk, uint32_t fnc)
{
    (void)adr; (void)clk; (void)fnc;
    return set_config(CONFIG_REN);
}

int UnInit(uint32_t fnc)
{
    (void)fnc;
    return set_config(CONFIG_REN);
}

int EraseChip(void)
{
    int status = set_config(CONFIG_EEN);
    if (status == OK) {
        NVMC_ERASEALL = 1u;
        status = wait_ready();
    }
    return finish(status);
}

int EraseSector(uint32_t adr)
{
    if (adr - FLASH_START >= FLASH_SIZE)
        return ERR_RANGE;
    int status = set_config(CONFIG_EEN);
    if (status == OK) {
        NVMC_ERASEPAGE = adr & ~(PAGE_SIZE - 1u);
        status = wait_ready();
    }
    return finish(status);
}

int ProgramPage(uint32_t adr, uint32_t sz, uint8_t *buf)
{
    if ((adr & 3u) || adr - FLASH_START >= FLASH_SIZE || sz > FLASH_SIZE - (adr - FLASH_START))
        return ERR_RANGE;
    int status = set_config(CONFIG_WEN);
    for (uint32_t done = 0; status == OK && done < sz; done += 4u) {
        /* Assemble the word from bytes: the buffer need not be word aligned, and a
         * tail shorter than a word is padded with the erased value 0xFF. */
        uint32_t word = 0xFFFFFFFFu;
        for (uint32_t i = 0; i < 4u && done + i < sz; i++)
            word = (word & ~(0xFFu << (8u * i))) | ((uint32_t)buf[done + i] << (8u * i));
        *(volatile uint32_t *)(adr + done) = word;
        status = wait_ready();
    }
    return finish(status);
}

/* The device description the debugger reads from the FLM (section DevDscr). */
__attribute__((section("DevDscr"), used))
const struct FlashDevice FlashDevice = {
    .Vers = FLASH_DRV_VERS,
    .DevName = "piflash nRF52840 1 MiB flash (test)",
    .DevType = ONCHIP,
    .DevAdr = FLASH_START,
    .szDev = FLASH_SIZE,
    .szPage = PAGE_SIZE,
    .Res = 0,
    .valEmpty = 0xFF,
    .toProg = 100,          /* ms per ProgramPage call */
    .toErase = 500,         /* ms per EraseSector call */
    .sectors = {
        { PAGE_SIZE, 0x000000u },
        { SECTOR_END },
    },
};
