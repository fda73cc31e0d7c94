/* A 12 KiB table of pseudo-random words, computed by the compiler: each entry
 * is MurmurHash3's 32-bit finaliser applied to (index * golden ratio + seed).
 * TABLE_SEED differs per target so the two images do not share content. */
#include "firmware.h"

#ifndef TABLE_SEED
#error "TABLE_SEED must be defined (see Makefile)"
#endif

#define U32(x) ((uint32_t)(x))
#define F1(x) (U32(x) ^ (U32(x) >> 16))
#define F2(x) U32(F1(x) * 0x85ebca6bu)
#define F3(x) (F2(x) ^ (F2(x) >> 13))
#define F4(x) U32(F3(x) * 0xc2b2ae35u)
#define F5(x) (F4(x) ^ (F4(x) >> 16))
#define E(i) F5(U32(i) * 0x9e3779b9u + U32(TABLE_SEED)),

#define R4(i) E(i) E((i) + 1) E((i) + 2) E((i) + 3)
#define R16(i) R4(i) R4((i) + 4) R4((i) + 8) R4((i) + 12)
#define R64(i) R16(i) R16((i) + 16) R16((i) + 32) R16((i) + 48)
#define R256(i) R64(i) R64((i) + 64) R64((i) + 128) R64((i) + 192)
#define R1024(i) R256(i) R256((i) + 256) R256((i) + 512) R256((i) + 768)

const uint32_t table[TABLE_WORDS] = {
    R1024(0) R1024(1024) R1024(2048)
};

_Static_assert(sizeof(table) == 3 * 1024 * sizeof(uint32_t), "table size");

/* Reads every word, so the table cannot be dropped or folded away. */
uint32_t table_checksum(void)
{
    const volatile uint32_t *p = table;
    uint32_t sum = 0;

    for (uint32_t i = 0; i < TABLE_WORDS; i++)
        sum = (sum << 5 | sum >> 27) ^ p[i];
    return sum;
}
