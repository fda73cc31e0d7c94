/* The FlashDevice structure an FLM carries in its DevDscr section, laid out as
 * the Open-CMSIS-Pack specification's "Flash Programming Algorithms" chapter
 * describes it (and as pyOCD reads it: PackFlashInfo.FLASH_DEVICE_STRUCT,
 * "<H128sHLLLLBxxxLL", in pyocd/target/pack/flash_algo.py), followed by the
 * list of sector sizes ended by SECTOR_END. */
#ifndef FLASH_OS_H
#define FLASH_OS_H

#include <stdint.h>

#define FLASH_DRV_VERS  0x0101u         /* driver interface version 1.01 */
#define ONCHIP          1u              /* device type: on-chip flash */
#define MAX_SECTORS     4               /* entries we need, SECTOR_END included */
#define SECTOR_END      0xFFFFFFFFu, 0xFFFFFFFFu

struct FlashSectors {
    uint32_t szSector;                  /* sector size in bytes */
    uint32_t AddrSector;                /* first sector of this size, offset from DevAdr */
};

struct FlashDevice {
    uint16_t Vers;                      /* FLASH_DRV_VERS */
    char     DevName[128];              /* description, NUL-terminated */
    uint16_t DevType;                   /* ONCHIP, ... */
    uint32_t DevAdr;                    /* first address of the flash */
    uint32_t szDev;                     /* flash size in bytes */
    uint32_t szPage;                    /* bytes programmed per ProgramPage call */
    uint32_t Res;                       /* reserved, 0 */
    uint8_t  valEmpty;                  /* value of an erased byte */
    uint32_t toProg;                    /* ProgramPage time-out, ms */
    uint32_t toErase;                   /* EraseSector time-out, ms */
    struct FlashSectors sectors[MAX_SECTORS];
};

int Init(uint32_t adr, uint32_t clk, uint32_t fnc);
int UnInit(uint32_t fnc);
int EraseChip(void);
int EraseSector(uint32_t adr);
int ProgramPage(uint32_t adr, uint32_t sz, uint8_t *buf);

#endif
