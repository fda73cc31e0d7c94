/*
 * piflash's helper for an RP2040 in USB BOOTSEL mode, run by PICOBOOT EXEC (RP2040 datasheet
 * 2.8.5.4.9): the boot ROM calls the code at the start of this image as void (*)(void), so the
 * host writes its request to PARAMS first, and reads the answer there and at CRCS afterwards
 * (piflash/jobs/bootsel.py; piflash/probe/picoboot.py loads it at 0x20000000).
 *
 * The ROM's EXIT_XIP (run first) leaves the SSI in standard SPI mode, 8-bit frames, transmit and
 * receive, SCK = clk_sys / 6 (pico-bootrom-rp2040 bootrom/program_flash_generic.c
 * flash_init_spi); the USB boot code runs clk_sys at 48 MHz (bootrom_main.c _usb_clock_setup).
 *
 *   OP_FAST_SPI   SCK = clk_sys / 2 = 24 MHz (SSI BAUDR, RP2040 datasheet 4.10.13; the SSI is
 *                 disabled while it changes). The ROM's own flash functions leave BAUDR as they
 *                 find it, so its page programs and reads are faster too. The W25Q16JV reads
 *                 with 03h up to 50 MHz (datasheet 9.6, fR).
 *   OP_CRC_PAGES  CRC-32 (zlib's: reflected 0xEDB88320, as Python's binascii.crc32) of `count`
 *                 256-byte pages from flash offset `address`, one 03h Read Data per page with
 *                 /CS held by IO_QSPI GPIO_QSPI_SS_CTRL.OUTOVER (2.19.6.3), into CRCS[].
 *   OP_ERASE      the ROM's flash_range_erase(address, count, 65536, 0xD8) (2.8.3.1.3): 64 KiB
 *                 block erases where aligned blocks fit, 4 KiB sectors elsewhere.
 *   OP_UNIQUE_ID  the flash's 64-bit unique ID into CRCS[0..1]: 4Bh, four dummy bytes, eight
 *                 bytes of ID (Winbond W25Q16JV 8.2.38 Read Unique ID Number), as pico-sdk's
 *                 flash_get_unique_id sends it.
 *   OP_JEDEC_ID   the flash's JEDEC ID into CRCS[0]: 9Fh, then manufacturer, memory type and
 *                 capacity bytes (W25Q16JV 8.2.29 Read JEDEC ID): the host takes the flash's
 *                 size from the capacity byte and refuses an image past it.
 *
 * Cortex-M0+ instructions only; position independent (no data, no absolute code addresses).
 */
#include <stdint.h>

#define REG(a) (*(volatile uint32_t *)(a))
#define SSI_SSIENR REG(0x18000008u)
#define SSI_BAUDR REG(0x18000014u)
#define SSI_SR REG(0x18000028u)
#define SSI_DR0 REG(0x18000060u)
#define SS_CTRL REG(0x4001800cu)
#define SR_RFNE 0x08u
#define OUTOVER_MASK (3u << 8)
#define OUTOVER_LOW (2u << 8)
#define OUTOVER_HIGH (3u << 8)

enum { OP_FAST_SPI = 1, OP_CRC_PAGES = 2, OP_ERASE = 3, OP_UNIQUE_ID = 4, OP_JEDEC_ID = 5 };

struct params {
    uint32_t magic;     /* "PBOP", written by the host: nothing runs on a stale request */
    uint32_t op;
    uint32_t address;   /* flash offset, bytes */
    uint32_t count;     /* OP_CRC_PAGES: pages; OP_ERASE: bytes */
    uint32_t result;    /* 0 done, 1 bad request */
};

#define PARAMS ((volatile struct params *)0x20001000u)
#define CRCS ((volatile uint32_t *)0x20001100u)
#define TABLE ((uint32_t *)0x2000e000u)
#define MAGIC 0x504f4250u

typedef void (*erase_fn)(uint32_t, uint32_t, uint32_t, uint8_t);
typedef void *(*lookup_fn)(uint16_t *, uint32_t);

static inline uint32_t rom_hword(uint32_t addr)
{
    uint32_t v;
    __asm__ volatile("ldrh %0, [%1]" : "=l"(v) : "l"(addr));
    return v;
}

static uint32_t crc_page(uint32_t addr);

void ops_entry(void)
{
    volatile struct params *p = PARAMS;
    if (p->magic != MAGIC) {
        p->result = 1;
        return;
    }
    p->magic = 0;
    if (p->op == OP_FAST_SPI) {
        SSI_SSIENR = 0;
        SSI_BAUDR = 2;
        SSI_SSIENR = 1;
    } else if (p->op == OP_CRC_PAGES) {
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++)
                c = (c & 1u) ? (c >> 1) ^ 0xedb88320u : c >> 1;
            TABLE[i] = c;
        }
        for (uint32_t i = 0; i < p->count; i++)
            CRCS[i] = crc_page(p->address + 256u * i);
    } else if (p->op == OP_ERASE) {
        lookup_fn lookup = (lookup_fn)rom_hword(0x18);
        erase_fn erase = (erase_fn)lookup((uint16_t *)rom_hword(0x14), 'R' | ('E' << 8));
        erase(p->address, p->count, 65536u, 0xd8u);
    } else if (p->op == OP_UNIQUE_ID || p->op == OP_JEDEC_ID) {
        /* 4Bh: four dummy bytes, then eight of ID; 9Fh: three bytes of ID at once. */
        uint32_t jedec = p->op == OP_JEDEC_ID;
        uint32_t skip = jedec ? 1u : 5u, total = jedec ? 4u : 13u;
        volatile uint8_t *out = (volatile uint8_t *)CRCS;
        uint32_t ss = SS_CTRL & ~OUTOVER_MASK;
        SS_CTRL = ss | OUTOVER_LOW;
        for (uint32_t i = 0; i < total; i++) {
            SSI_DR0 = i == 0 ? (jedec ? 0x9fu : 0x4bu) : 0;
            while (!(SSI_SR & SR_RFNE))
                ;
            uint32_t b = SSI_DR0;
            if (i >= skip)
                out[i - skip] = (uint8_t)b;
        }
        SS_CTRL = ss | OUTOVER_HIGH;
    } else {
        p->result = 1;
        return;
    }
    p->result = 0;
}

/* `n` bytes from the SSI's RX FIFO into the CRC, each replaced by a 0 sent when `send`: the
 * inner loop written out (13 instructions a byte; GCC's took 19, reloading constants), since it
 * is what the check and the verify spend their time in. RFNE is SR bit 3: shifted into C. */
static uint32_t crc_bytes(uint32_t crc, uint32_t n, uint32_t send, const uint32_t *table)
{
    uint32_t ssi = 0x18000000u, zero = 0, t;
    if (send) {
        __asm__ volatile(
            ".syntax unified\n"
            "1: ldr %[t], [%[ssi], #0x28]\n"
            "   lsrs %[t], %[t], #4\n"
            "   bcc 1b\n"
            "   ldr %[t], [%[ssi], #0x60]\n"
            "   str %[zero], [%[ssi], #0x60]\n"
            "   eors %[t], %[crc]\n"
            "   uxtb %[t], %[t]\n"
            "   lsls %[t], %[t], #2\n"
            "   ldr %[t], [%[table], %[t]]\n"
            "   lsrs %[crc], %[crc], #8\n"
            "   eors %[crc], %[t]\n"
            "   subs %[n], #1\n"
            "   bne 1b\n"
            : [crc] "+l"(crc), [n] "+l"(n), [t] "=&l"(t)
            : [ssi] "l"(ssi), [zero] "l"(zero), [table] "l"(table)
            : "cc", "memory");
    } else {
        __asm__ volatile(
            ".syntax unified\n"
            "1: ldr %[t], [%[ssi], #0x28]\n"
            "   lsrs %[t], %[t], #4\n"
            "   bcc 1b\n"
            "   ldr %[t], [%[ssi], #0x60]\n"
            "   eors %[t], %[crc]\n"
            "   uxtb %[t], %[t]\n"
            "   lsls %[t], %[t], #2\n"
            "   ldr %[t], [%[table], %[t]]\n"
            "   lsrs %[crc], %[crc], #8\n"
            "   eors %[crc], %[t]\n"
            "   subs %[n], #1\n"
            "   bne 1b\n"
            : [crc] "+l"(crc), [n] "+l"(n), [t] "=&l"(t)
            : [ssi] "l"(ssi), [table] "l"(table)
            : "cc", "memory");
    }
    return crc;
}

/* One 03h Read Data of a page, 16 bytes in flight (the SSI's FIFOs are 16 deep: none overruns):
 * each byte received is replaced by the next one sent. The registers and the table are kept in
 * locals so the loop holds them in registers (ARMv6-M has few low registers). */
static uint32_t crc_page(uint32_t addr)
{
    volatile uint32_t *dr = &SSI_DR0;
    volatile uint32_t *sr = &SSI_SR;
    const uint32_t *table = TABLE;
    uint32_t crc = 0xffffffffu, i;
    uint32_t ss = SS_CTRL & ~OUTOVER_MASK;
    SS_CTRL = ss | OUTOVER_LOW;
    *dr = 0x03u;
    *dr = (addr >> 16) & 0xffu;
    *dr = (addr >> 8) & 0xffu;
    *dr = addr & 0xffu;
    for (i = 0; i < 12; i++)
        *dr = 0;
    for (i = 0; i < 4; i++) {
        while (!(*sr & SR_RFNE))
            ;
        (void)*dr;
    }
    crc = crc_bytes(crc, 256 - 12, 1, table);
    crc = crc_bytes(crc, 12, 0, table);
    SS_CTRL = ss | OUTOVER_HIGH;
    return ~crc;
}
