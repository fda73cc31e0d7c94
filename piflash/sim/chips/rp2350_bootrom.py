"""The RP2350 boot ROM as the simulator provides it: the version-2 header and ROM table, the flash
functions in Python, and the flash boot of an image with an IMAGE_DEF block.

Not Raspberry Pi's ROM image: a 32 KiB ROM built here with what a debugger, a flash algorithm
and the boot of a pico-sdk image rely on (RP2350 datasheet section 5.4.1 "Bootrom contents",
table "Bootrom header (Arm view)"; pico-sdk ``pico/bootrom.h`` and ``boot/bootrom_constants.h``;
pico-bootrom-rp2350 ``src/main/arm/arm8_bootrom_rt0.S`` and ``src/main/riscv/rom_table.S``):

* 0x00 initial stack pointer (0xF0000000, deliberately invalid as on the real part), 0x04 reset
  vector, 0x08 NMI, 0x0C HardFault;
* 0x10 ``'M' 'u'``, 0x12 the major version 2 (RP2350; RP2040's ROM has 1 there), 0x13 the ROM
  version (2: the A2 stepping);
* 0x14 the ROM table's address, 0x16 ``rom_table_lookup_val`` and 0x18
  ``rom_table_lookup_entry`` (16-bit pointers, Thumb bit set on the functions);
* the table: per entry a 16-bit code (first character in the low byte), 16-bit flags, then one
  half-word per set flag bit, lowest bit first; a zero code ends it. ``lookup_val(code, mask)``
  returns the half-word of the lowest bit set in ``flags & mask`` (0 if none), ``lookup_entry``
  its address. Every function here is an Arm Secure one (flag ``RT_FLAG_FUNC_ARM_SEC`` 0x04,
  what pyOCD's algorithm asks for).

The flash functions are RP2040's (``flash_range_erase(addr, count, block_size, block_cmd)``,
``flash_range_program(addr, data, count)``, same codes; pico-bootrom-rp2350
``varm_generic_flash.c``) plus ``flash_reset_address_trans`` ('RA'),
``flash_select_xip_read_mode`` ('XM') and ``bootrom_state_reset`` ('SR', which pico-sdk's
runtime initialisation calls); they drive the flash through the QMI's direct mode
(:class:`piflash.sim.chips.rp2350.Qmi`). The real functions check the RCP canaries (section
3.6.3): their callers must have set the RCP salt, which the model's QMI does not need but the
model's coprocessor checks (pyOCD's algorithm sets it).

Boot (section 5.9): the first 4 KiB of flash are searched for a block (start marker 0xFFFFDED3
at a word boundary, items, a LAST item, the link word, end marker 0xAB123579; pico-sdk
``boot/picobin.h``) with an IMAGE_TYPE item (0x42) saying an Arm Secure executable for RP2350;
then XIP is entered (serial 03h reads), VTOR is set to the image's start and the core enters it
from its vector table (stack pointer at +0, reset handler at +4). Simplified: the first such block
decides (block loops, partition tables, signatures and hashes are not followed), and no block
means the core parks where the real ROM would start USB BOOTSEL mode.
"""

from __future__ import annotations

import struct
from typing import Callable, Dict, Optional

from piflash.sim.chips.rp2_bootrom import FUNC_TABLE, STRINGS, BootRom, table_code

__all__ = ["Rp2350BootRom", "ROM_SIZE", "RT_FLAG_FUNC_ARM_SEC", "find_image_def", "IMAGE_BASE"]

ROM_SIZE = 0x8000
#: Initial SP in the ROM's vector table (RP2350 datasheet 5.4.1: 0xF0000000, not a valid stack).
INITIAL_SP = 0xF0000000
#: ROM table flags (pico-sdk boot/bootrom_constants.h).
RT_FLAG_FUNC_ARM_SEC = 0x0004
#: Function codes (pico-sdk pico/bootrom.h; RP2350 datasheet 5.4.8) -> model method names.
FUNCTION_CODES_RP2350: Dict[str, str] = {
    "IF": "connect_internal_flash",
    "EX": "flash_exit_xip",
    "RE": "flash_range_erase",
    "RP": "flash_range_program",
    "FC": "flash_flush_cache",
    "CX": "flash_enter_cmd_xip",
    "RA": "flash_reset_address_trans",
    "XM": "flash_select_xip_read_mode",
    "SR": "bootrom_state_reset",
}
#: Where the boot looks for an IMAGE_DEF, and the image's address.
BOOT_SEARCH_BYTES = 0x1000
IMAGE_BASE = 0x10000000
BLOCK_START, BLOCK_END = 0xFFFFDED3, 0xAB123579
ITEM_IMAGE_TYPE = 0x42
#: IMAGE_TYPE flags [15:0] (picobin.h PICOBIN_IMAGE_TYPE_*): image type [3:0] (1 EXE), EXE
#: security [5:4] (2 Secure), CPU [10:8] (0 Arm), chip [14:12] (1 RP2350).
IMAGE_TYPE_EXE, EXE_SECURE, EXE_CPU_ARM, EXE_CHIP_RP2350 = 1, 2, 0, 1
VTOR = 0xE000ED08
#: BOOTROM_SPI_CLKDIV_DEFAULT (pico-bootrom-rp2350 native_generic_flash.h: 12, "1 MHz @ 12 MHz
#: clk_sys"): the QMI divider the ROM's flash functions leave.
SPI_CLKDIV_DEFAULT = 12


def find_image_def(head: bytes) -> Optional[int]:
    """The IMAGE_TYPE flags of the first block in ``head`` (the start of flash) that has one,
    or None when no well-formed block holds an IMAGE_TYPE item.

    :param head: bytes from the start of flash (the boot searches :data:`BOOT_SEARCH_BYTES`).
    """
    for pos in range(0, min(len(head), BOOT_SEARCH_BYTES) - 8, 4):
        if struct.unpack_from("<I", head, pos)[0] != BLOCK_START:
            continue
        q, flags = pos + 4, None
        while q + 4 <= len(head):
            item = struct.unpack_from("<I", head, q)[0]
            kind = item & 0xFF
            size = (item >> 8) & (0xFFFF if kind & 0x80 else 0xFF)
            if kind & 0x7F == 0x7F:  # LAST: then the link and the end marker
                if q + 12 <= len(head) and struct.unpack_from("<I", head, q + 8)[0] == BLOCK_END and flags is not None:
                    return flags
                break
            if kind == ITEM_IMAGE_TYPE:
                flags = item >> 16
            if size == 0:
                break
            q += 4 * size
    return None


def is_arm_secure_exe(flags: int) -> bool:
    """Whether IMAGE_TYPE ``flags`` describe what this ROM boots: an Arm Secure executable for
    RP2350."""
    return (
        flags & 0xF == IMAGE_TYPE_EXE
        and (flags >> 4) & 3 == EXE_SECURE
        and (flags >> 8) & 7 == EXE_CPU_ARM
        and (flags >> 12) & 7 == EXE_CHIP_RP2350
    )


class Rp2350BootRom(BootRom):
    """The RP2350's boot ROM model: :class:`~piflash.sim.chips.rp2_bootrom.BootRom`'s functions
    with the version-2 header and table, XIP through the QMI and the IMAGE_DEF boot.

    :param port: The chip seen from the ROM: :class:`~piflash.sim.chips.rp2_bootrom.RomPort`
        plus ``set_read_mode(clkdiv)`` (the QMI's window reading by serial 03h at that divider)
        and ``on_boot()`` (the ROM's boot path sets the RCP salt).
    """

    SIZE = ROM_SIZE
    VERSION = 2

    def _tables(self, image: bytearray, add: Callable[..., int], boot: int, park: int) -> None:
        lookup_val = add("rom_table_lookup_val", lambda: self._lookup2(entry=False))
        lookup_entry = add("rom_table_lookup_entry", lambda: self._lookup2(entry=True))
        funcs = [(code, add(name, getattr(self, "_" + name))) for code, name in FUNCTION_CODES_RP2350.items()]
        struct.pack_into("<IIII", image, 0, INITIAL_SP, boot | 1, park | 1, park | 1)
        image[0x10:0x13] = b"Mu\x02"
        image[0x13] = self.VERSION
        struct.pack_into("<HHH", image, 0x14, FUNC_TABLE, lookup_val | 1, lookup_entry | 1)
        pos = FUNC_TABLE
        for code, addr in funcs:
            struct.pack_into("<HHH", image, pos, table_code(code), RT_FLAG_FUNC_ARM_SEC, addr | 1)
            pos += 6
        text = b"(C) piflash simulator: not Raspberry Pi's boot ROM\0"
        image[STRINGS : STRINGS + len(text)] = text

    # -- functions -------------------------------------------------------------------------------
    def _lookup2(self, entry: bool) -> None:
        code, mask = self.port.reg(0) & 0xFFFF, self.port.reg(1)
        table = struct.unpack("<H", self.port.read(0x14, 2))[0]
        result = 0
        for _ in range(256):
            entry_code, flags = struct.unpack("<HH", self.port.read(table, 4))
            if entry_code == 0:
                break
            if entry_code == code:
                hit = flags & mask
                if hit:
                    bit = hit & -hit
                    slot = table + 4 + 2 * bin(flags & (bit - 1)).count("1")
                    result = slot if entry else struct.unpack("<H", self.port.read(slot, 2))[0]
                break
            table += 4 + 2 * bin(flags).count("1")
        self.port.set_reg(0, result)

    def _bootrom_state_reset(self) -> None:
        """``bootrom_state_reset(flags)``: resets the ROM's own state (its RAM, the stack
        guard, the lock of the SHA-256 block); pico-sdk's runtime init calls it
        (``runtime_init_bootrom_reset``). The model's ROM keeps no such state."""

    def _flash_reset_address_trans(self) -> None:
        """``flash_reset_address_trans``: ATRANS0-7 back to the identity map, which is all the
        model has."""

    def _flash_select_xip_read_mode(self) -> None:
        """``flash_select_xip_read_mode(mode, clkdiv)``: the window reads in ``mode`` (0-3:
        03h, 0Bh, BBh, EBh) at SCK = clk_sys / ``clkdiv``."""
        self.xip = True
        self.port.set_read_mode(self.port.reg(1) & 0xFF or SPI_CLKDIV_DEFAULT, self.port.reg(0) & 3)

    def exit_xip(self) -> None:
        """``flash_exit_xip``: the flash out of any continuous read mode, the QMI left in serial
        03h reads at the default divider, so XIP stays readable (pico-bootrom-rp2350
        ``flash_init_spi`` ends in ``flash_enter_cmd_xip``; datasheet 5.4.8.4)."""
        self.port.flash_exit_continuous()
        self.xip = True
        self.port.set_read_mode(SPI_CLKDIV_DEFAULT)

    def enter_cmd_xip(self) -> None:
        """``flash_enter_cmd_xip``: serial 03h XIP at the default divider (``flash_select_
        xip_read_mode(0, BOOTROM_SPI_CLKDIV_DEFAULT)``)."""
        self.xip = True
        self.port.set_read_mode(SPI_CLKDIV_DEFAULT)

    def _boot(self) -> None:
        self.port.on_boot()
        if self.rescue:
            self.rescue = False
            self.port.set_reg(0, self.entries["park"] | 1)
            return
        head = self.read_data(0, BOOT_SEARCH_BYTES)
        flags = find_image_def(head)
        if flags is None or not is_arm_secure_exe(flags):
            self.port.set_reg(0, self.entries["park"] | 1)
            return
        self.enter_cmd_xip()
        sp, reset = struct.unpack_from("<II", head, 0)
        self.port.write(VTOR, struct.pack("<I", IMAGE_BASE))
        self.port.set_reg(13, sp)
        self.port.set_reg(0, reset | 1)
