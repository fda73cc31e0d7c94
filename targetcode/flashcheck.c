/*
 * piflash's on-target flash checks: blank check and CRC-32 of flash blocks, run by the host
 * through the debug port while the core is halted in debug state (piflash/flashcheck.py).
 *
 * The host loads flashcheck.bin anywhere in RAM (the code is position independent: no data,
 * only PC-relative literals), points LR at the BKPT at offset 0 and PC at an entry point from the
 * header, and resumes the core; the routine returns to the BKPT and the host reads R0 and the
 * results. It uses the stack the core already has (the flash algorithm's, set when pyOCD
 * initialised it) and 20-32 bytes of it.
 *
 * Cortex-M0 instructions only (ARMv6-M), so one binary serves every Cortex-M core.
 */
#include <stdint.h>

/* A run of `count` blocks of `size` bytes from `address`, each block checked on its own.
 * address and size are multiples of 4. */
struct run {
    uint32_t address;
    uint32_t size;
    uint32_t count;
};

uint32_t fc_blank(const struct run *runs, uint32_t nruns, uint32_t *bitmap, uint32_t erased_word);
uint32_t fc_crc32(const struct run *runs, uint32_t nruns, uint32_t *crcs, uint32_t *table);

/* The header the host reads: the return BKPT, then the entry points (Thumb addresses relative to
 * the load address; the image is linked at 0). */
__attribute__((section(".header"), used))
const uint32_t fc_header[4] = {
    0xBF00BE00u,                /* bkpt #0 ; nop */
    0x4B434650u,                /* "PFCK": the host checks it before calling anything */
    (uint32_t)&fc_blank,
    (uint32_t)&fc_crc32,
};

/* Blank check: bit i of `bitmap` (block i counted over all runs) is set when block i holds a
 * word other than `erased_word` (0xFFFFFFFF for NOR flash erased to 0xFF). The routine clears
 * the bitmap's words first. A block stops at its first differing word.
 * Returns the number of blocks checked. */
uint32_t fc_blank(const struct run *runs, uint32_t nruns, uint32_t *bitmap, uint32_t erased_word)
{
    uint32_t index = 0;
    uint32_t total = 0;
    for (uint32_t r = 0; r < nruns; r++)
        total += runs[r].count;
    for (uint32_t w = 0; w < (total + 31) / 32; w++)
        bitmap[w] = 0;
    for (uint32_t r = 0; r < nruns; r++) {
        const volatile uint32_t *p = (const volatile uint32_t *)runs[r].address;
        for (uint32_t b = 0; b < runs[r].count; b++, index++) {
            const volatile uint32_t *end = p + runs[r].size / 4;
            uint32_t diff = 0;
            while (p + 4 <= end) {
                diff |= (p[0] ^ erased_word) | (p[1] ^ erased_word)
                      | (p[2] ^ erased_word) | (p[3] ^ erased_word);
                p += 4;
                if (diff)
                    break;
            }
            while (!diff && p < end)
                diff = *p++ ^ erased_word;
            if (diff)
                bitmap[index / 32] |= 1u << (index % 32);
            p = end;
        }
    }
    return index;
}

/* CRC-32 (IEEE 802.3, reflected polynomial 0xEDB88320, initial value and final XOR 0xFFFFFFFF:
 * what zlib's and Python's binascii.crc32 compute) of each block into crcs[i]. `table` is 1 KiB
 * of RAM the routine fills with the byte-wise lookup table first. Returns the number of blocks. */
uint32_t fc_crc32(const struct run *runs, uint32_t nruns, uint32_t *crcs, uint32_t *table)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0xEDB88320u & -(c & 1u));
        table[i] = c;
    }
    uint32_t index = 0;
    for (uint32_t r = 0; r < nruns; r++) {
        const volatile uint32_t *p = (const volatile uint32_t *)runs[r].address;
        for (uint32_t b = 0; b < runs[r].count; b++) {
            const volatile uint32_t *end = p + runs[r].size / 4;
            uint32_t crc = 0xFFFFFFFFu;
            while (p < end) {
                crc ^= *p++;            /* little-endian: the word's first byte is its low byte */
                crc = (crc >> 8) ^ table[crc & 0xFF];
                crc = (crc >> 8) ^ table[crc & 0xFF];
                crc = (crc >> 8) ^ table[crc & 0xFF];
                crc = (crc >> 8) ^ table[crc & 0xFF];
            }
            crcs[index++] = ~crc;
        }
    }
    return index;
}
