"""The RP2040's unique ID: the 64-bit unique ID of its QSPI flash, read by the debugger.

An RP2040 has no unique ID of its own; pico-sdk's ``pico_get_unique_board_id`` reads the flash
chip's (Winbond W25Q16JV datasheet, instruction 4Bh "Read Unique ID Number": the instruction,
four dummy bytes, then 64 bits). piflash does what ``flash_get_unique_id`` does, from the
debugger:

1. pyOCD's flash algorithm for the part is initialised (``Flash.init``, public API): its Init
   calls the boot ROM's ``connect_internal_flash`` and ``flash_exit_xip`` (RP2040 datasheet
   2.8.3.1.3), which leave the SSI in serial mode;
2. the SSI (XIP_SSI at 0x18000000, datasheet 4.10.13) is set to 8-bit frames, transmit and
   receive; the flash's /CS is held low with the IO_QSPI override (GPIO_QSPI_SS_CTRL.OUTOVER = 2,
   0x4001800C, datasheet 2.19.6.2); 13 bytes are sent and 13 read back; /CS goes high again;
3. ``Flash.uninit`` runs the algorithm's UnInit: ``flash_flush_cache`` (which also ends the /CS
   override) and ``flash_enter_cmd_xip``.

This stops the core and uses the RAM where pyOCD loads its algorithm, so it is only done where
piflash reprograms or checks the board anyway (flash, verify, erase), never by ``info`` or the
station's removal poll; XIP runs in the slow 03h mode until the next reset, as after any pyOCD
flash operation.
"""

from __future__ import annotations

__all__ = ["read_flash_unique_id", "RP2040_TARGETS"]

#: pyOCD target types this applies to (pyocd/target/builtin/__init__.py).
RP2040_TARGETS = ("rp2040", "rp2040_core0", "rp2040_core1")

_SSI = 0x18000000
_SSI_CTRLR0, _SSI_SSIENR, _SSI_SR, _SSI_DR0 = 0x00, 0x08, 0x28, 0x60
#: CTRLR0: DFS_32 = 7 (8-bit frames), TMOD = 0 (transmit and receive), SPI_FRF = 0 (standard).
_CTRLR0_8BIT_TXRX = 0x00070000
_SR_RFNE = 1 << 3
_SS_CTRL = 0x4001800C
_OUTOVER_LOW, _OUTOVER_NORMAL = 2 << 8, 0
_READ_UNIQUE_ID = 0x4B
_DUMMY_BYTES, _ID_BYTES = 4, 8
#: Status reads allowed per byte: one byte takes 8 SPI clocks, far less than a debugger's read.
_SR_POLLS = 10


def read_flash_unique_id(session) -> bytes:
    """The 8-byte unique ID of the RP2040's boot flash.

    :param session: an open pyOCD session on an ``rp2040`` target (halts the core).
    :returns: 8 bytes, as the flash sends them (pico-sdk's ``pico_unique_board_id_t`` order).
    :raises pyocd.core.exceptions.Error: the algorithm or a transfer failed.
    :raises ValueError: the SSI did not return one byte per byte sent.
    """
    target = session.target
    flash = target.memory_map.get_boot_memory().flash
    flash.init(flash.Operation.VERIFY)
    try:
        ctrlr0 = target.read32(_SSI + _SSI_CTRLR0)
        target.write32(_SSI + _SSI_SSIENR, 0)
        target.write32(_SSI + _SSI_CTRLR0, _CTRLR0_8BIT_TXRX)
        target.write32(_SSI + _SSI_SSIENR, 1)
        ss_ctrl = target.read32(_SS_CTRL)
        target.write32(_SS_CTRL, (ss_ctrl & ~(3 << 8)) | _OUTOVER_LOW)
        try:
            out = [_READ_UNIQUE_ID] + [0] * (_DUMMY_BYTES + _ID_BYTES)
            got = []
            for byte in out:                # one at a time: the 16-entry FIFOs never overrun
                target.write32(_SSI + _SSI_DR0, byte)
                if not any(target.read32(_SSI + _SSI_SR) & _SR_RFNE for _ in range(_SR_POLLS)):
                    raise ValueError("the SSI returned no byte for 0x%02x" % byte)
                got.append(target.read32(_SSI + _SSI_DR0) & 0xFF)
        finally:
            target.write32(_SS_CTRL, (ss_ctrl & ~(3 << 8)) | _OUTOVER_NORMAL)
            target.write32(_SSI + _SSI_SSIENR, 0)
            target.write32(_SSI + _SSI_CTRLR0, ctrlr0)
            target.write32(_SSI + _SSI_SSIENR, 1)
    finally:
        flash.uninit()
    return bytes(got[1 + _DUMMY_BYTES:])
