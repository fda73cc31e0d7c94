"""A simulated RP2350 in USB BOOTSEL mode: what its boot ROM's PICOBOOT interface does
differently from the RP2040's (:class:`~piflash.sim.probes.usb.picoboot.SimBootselDevice`).

Sources: RP2350 datasheet 5.6 "PICOBOOT interface" and 5.4.8 (the flash functions);
pico-bootrom-rp2350 ``src/nsboot/nsboot_usb_client.c`` (descriptors, command parsing),
``nsboot_async_task.c`` (the tasks and their checks), ``src/main/arm/varm_apis.c``
(``get_sys_info``, ``reboot``), ``varm_nsboot.c`` (clocks); pico-sdk ``boot/picoboot.h`` and
``boot/picoboot_constants.h``:

* USB 2.1 (bcdUSB 0210h), PID 000Fh, product "RP2350 Boot", and a serial number of 16
  upper-case hex digits of the chip's OTP ID (CHIPID3..CHIPID0): unlike the RP2040's it names
  the board;
* REBOOT (02h), EXEC (08h) and VECTORIZE_FLASH (09h) pass parsing, then stall UNKNOWN_CMD;
  EXIT_XIP and ENTER_CMD_XIP do nothing; REBOOT2 (0Ah: dFlags, dDelayMS, dParam0, dParam1)
  reboots (types NORMAL 0, BOOTSEL 2, RAM_IMAGE 3, FLASH_UPDATE 4; a type with bit 3 set is
  NOT_PERMITTED from BOOTSEL mode); GET_INFO (8Bh, dTransferLength up to 256) answers type SYS
  (1): word 0 the count of words that follow, the flags returned (the request's, masked to
  5Fh), then CHIP_INFO (PACKAGE_SEL, CHIPID0 | CHIPID1 << 16, CHIPID2 | CHIPID3 << 16),
  CRITICAL, CPU_INFO (0: Arm), FLASH_DEV_INFO (0C00h: 16 MiB on chip select 0), BOOT_RANDOM (4
  words), BOOT_INFO (4 words), zeros to the end; other types are INVALID_ARG in the model (the
  partition queries are not modelled);
* FLASH_ERASE: 4 KiB aligned address and size, both ends within 10000000h-12000000h; flash
  beyond FLASH_DEV_INFO's 16 MiB (chip select 1) is NOT_PERMITTED; erased sector by sector
  (20h: the 64 KiB path needs a size the USB code never passes). READ/WRITE: SRAM
  20000000h-20082000h, the ROM (reads, below 7E00h), flash from a 256-byte aligned start within
  the same window, one page program per 256-byte chunk (a short last chunk padded with zeros);
  with no partition table every flash byte is readable and writable, so NOT_PERMITTED comes
  only from chip select 1 here. OTP_READ/OTP_WRITE (8Ch/0Dh) are not modelled (UNKNOWN_CMD).
* Time: clk_sys 48 MHz from PLL_USB in BOOTSEL mode, the QMI at divider 6
  (BOOTROM_SPI_CLKDIV_NSBOOT; ``varm_nsboot.c``), the flash's typical times.
"""

from __future__ import annotations

import struct
from typing import Optional

from piflash.sim.probes.usb.picoboot import (
    BAD_ALIGNMENT,
    BOOTSEL_DEVICES,
    COMMANDS,
    INVALID_ADDRESS,
    PAGE,
    SECTOR,
    STATUS_NAMES,
    UNKNOWN_CMD,
    XIP_BASE,
    SimBootselDevice,
    _Stall,
)

__all__ = ["SimBootselRp2350", "RP2350_COMMANDS", "NOT_PERMITTED", "INVALID_ARG", "SYS_INFO_FLAGS"]

NOT_PERMITTED, INVALID_ARG = 10, 11
STATUS_NAMES.update(
    {
        9: "INVALID_STATE",
        10: "NOT_PERMITTED",
        11: "INVALID_ARG",
        12: "BUFFER_TOO_SMALL",
        13: "PRECONDITION_NOT_MET",
        14: "MODIFIED_DATA",
        15: "INVALID_DATA",
        16: "NOT_FOUND",
        17: "UNSUPPORTED_MODIFICATION",
    }
)
#: The RP2040's commands plus REBOOT2, GET_INFO and the OTP commands (pico-sdk boot/picoboot.h).
RP2350_COMMANDS = dict(COMMANDS)
RP2350_COMMANDS.update(
    {
        0x0A: ("REBOOT2", 16, None),
        0x8B: ("GET_INFO", 16, "in"),
        0x8C: ("OTP_READ", 5, "in"),
        0x0D: ("OTP_WRITE", 5, "out"),
    }
)
#: GET_INFO SYS flags (pico-sdk boot/bootrom_constants.h): CHIP_INFO 01h, CRITICAL 02h, CPU_INFO
#: 04h, FLASH_DEV_INFO 08h, BOOT_RANDOM 10h, (NONCE 20h: dropped), BOOT_INFO 40h.
SYS_INFO_FLAGS = 0x5F
REBOOT2_TYPES = {0: "NORMAL", 2: "BOOTSEL", 3: "RAM_IMAGE", 4: "FLASH_UPDATE"}
FLASH_WINDOW_END, FLASH_DEV_END = 0x12000000, 0x11000000
SRAM_BASE, SRAM_END, ROM_READ_END = 0x20000000, 0x20082000, 0x7E00
#: QMI divider in BOOTSEL mode (BOOTROM_SPI_CLKDIV_NSBOOT, pico-bootrom-rp2350
#: native_generic_flash.h) and FLASH_DEV_INFO's reset value (16 MiB on CS0, none on CS1).
NSBOOT_CLKDIV, FLASH_DEV_INFO = 6, 0x0C00


class SimBootselRp2350(SimBootselDevice):
    """One RP2350 board in BOOTSEL mode (see the module docstring).

    :param board_name: The simulated board; it must be an ``rp2350``.
    :param store: / address: as :class:`SimBootselDevice`.
    """

    CHIP, PRODUCT, BCD_USB = "rp2350", "RP2350 Boot", 0x0210
    COMMANDS = RP2350_COMMANDS

    def _serial(self) -> str:
        try:
            return self.store.get(self.board_name).target_uid.upper()
        except Exception:
            return "0" * 16

    def _opened(self, board) -> None:
        board.chip.parts.qmi.set_read_mode(NSBOOT_CLKDIV)  # the USB boot code's set-up

    def _transfer_length_ok(self, name: str, direction: Optional[str], length: int, transfer_len: int) -> bool:
        if name == "GET_INFO":
            return transfer_len <= 0x100
        if name in ("OTP_READ", "OTP_WRITE"):
            return True  # refused later: not modelled
        return super()._transfer_length_ok(name, direction, length, transfer_len)

    def _check_range(self, addr: int, length: int, write: bool) -> None:
        end = addr + length
        if SRAM_BASE <= addr <= SRAM_END and SRAM_BASE <= end <= SRAM_END:
            return
        if not write and end <= ROM_READ_END:
            return
        if XIP_BASE <= addr <= FLASH_WINDOW_END and XIP_BASE <= end <= FLASH_WINDOW_END:
            if addr % PAGE:
                raise _Stall(BAD_ALIGNMENT)
            if end > FLASH_DEV_END:
                raise _Stall(NOT_PERMITTED)  # beyond FLASH_DEV_INFO's device
            return
        raise _Stall(INVALID_ADDRESS)

    def _run(self, name: str, args: bytes, t: float) -> float:
        rom = self.board.chip
        addr, size = struct.unpack_from("<II", args)
        if name in ("REBOOT", "EXEC", "VECTORIZE_FLASH", "OTP_READ", "OTP_WRITE"):
            raise _Stall(UNKNOWN_CMD)
        if name in ("EXIT_XIP", "ENTER_CMD_XIP"):
            return t  # kept for compatibility, no effect
        if name == "REBOOT2":
            if addr & 0xF not in REBOOT2_TYPES:  # dFlags: bit 3 types (PC_SP...) refused here
                raise _Stall(NOT_PERMITTED)
            return t
        if name == "FLASH_ERASE":
            if addr % SECTOR or size % SECTOR:
                raise _Stall(BAD_ALIGNMENT)
            if not (XIP_BASE <= addr <= FLASH_WINDOW_END and XIP_BASE <= addr + size <= FLASH_WINDOW_END):
                raise _Stall(INVALID_ADDRESS)
            if addr + size > FLASH_DEV_END:
                raise _Stall(NOT_PERMITTED)
            for sector in range(addr, addr + size, SECTOR):  # one checked call per sector
                t = self._flash(t, lambda s=sector: rom.erase_range(s - XIP_BASE, SECTOR))
            return t
        return super()._run(name, args, t)

    def _write_chunk(self, cmd: dict, chunk: bytes, t: float) -> float:
        if XIP_BASE <= cmd["addr"] < FLASH_WINDOW_END:
            chunk = chunk.ljust(PAGE, b"\0")  # the ROM's buffer is zeroed per chunk
        return super()._write_chunk(cmd, chunk, t)

    def _make_in_data(self, name: str, args: bytes, transfer_len: int) -> bytes:
        if name != "GET_INFO":
            raise _Stall(UNKNOWN_CMD)
        kind, _param, _wparam, flags = struct.unpack_from("<BBHI", args)
        if kind != 1:
            raise _Stall(INVALID_ARG)
        flags &= SYS_INFO_FLAGS
        uid = self.board.target_uid
        value = int.from_bytes(uid, "big")
        words = [flags]
        if flags & 0x01:  # CHIP_INFO
            words += [0, value & 0xFFFFFFFF, value >> 32]
        if flags & 0x02:  # CRITICAL
            words.append(self.board.bus.read(0x40120148, 4))
        if flags & 0x04:  # CPU_INFO: Arm
            words.append(0)
        if flags & 0x08:
            words.append(FLASH_DEV_INFO)
        if flags & 0x10:  # BOOT_RANDOM
            words += list(struct.unpack("<4I", uid + uid))
        if flags & 0x40:  # BOOT_INFO
            words += [0, 0, 0, 0]
        data = struct.pack("<%dI" % (len(words) + 1), len(words), *words)
        if len(data) > transfer_len:
            raise _Stall(12)  # BUFFER_TOO_SMALL
        return data.ljust(transfer_len, b"\0")

    def _after(self, name: str, args: bytes):
        if name != "REBOOT2":
            return None
        kind = struct.unpack_from("<I", args)[0] & 0xF
        if kind == 2:  # into BOOTSEL again: a new device
            return self._reboot_to_bootsel
        return self._reboot

    def _reboot_to_bootsel(self) -> None:
        self._reboot()
        self.replacement = SimBootselRp2350(self.board_name, self.store, self.address)


BOOTSEL_DEVICES["rp2350"] = SimBootselRp2350
