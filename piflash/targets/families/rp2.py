"""The RP2040's unique ID (the 64-bit unique ID of its QSPI flash) and serial flash instructions
from the debugger on the RP2040 (through its SSI) and the RP2350 (through its QMI).

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

The same path gives the flash's size from its JEDEC ID and a chip erase by the flash's own
instruction (:func:`flash_size`, :func:`chip_erase`; piflash/targets/families/rp2_flash.py uses them).

The two chips run the same pyOCD algorithm (one blob, ``target_rp2.py``) but have different
flash interfaces at different addresses: :func:`chip_of` tells them apart by the boot ROM's
header, and :func:`flash_command` goes through the RP2040's SSI or the RP2350's QMI direct mode
(RP2350 datasheet 4.4.4, DIRECT_CSR/DIRECT_TX/DIRECT_RX at 0x400D0000; pico-sdk
``hardware_regs/qmi.h``). An RP2350 keeps its unique ID in OTP, not in its flash
(:mod:`piflash.targets.families.rp2350`).

Reading the ID stops the core and uses the RAM where pyOCD loads its algorithm, so it is only done where
piflash reprograms or checks the board anyway (flash, verify, erase), never by ``info`` or the
station's removal poll; XIP runs in the slow 03h mode until the next reset, as after any pyOCD
flash operation.
"""

from __future__ import annotations

import logging
import weakref
from typing import TYPE_CHECKING, List, Optional, Sequence, Tuple

#: A flash region as the catalog gives it: (start, end exclusive, name).
Region = Tuple[int, int, str]

if TYPE_CHECKING:
    from pyocd.core.session import Session
    from pyocd.core.target import Target

__all__ = [
    "read_flash_unique_id",
    "read_flash_size",
    "flash_command",
    "flash_size",
    "size_of_jedec",
    "reported_flash_regions",
    "regions_of_size",
    "chip_erase",
    "erase_block",
    "BLOCK_ERASES",
    "CHIP_ERASE_TIMEOUT",
    "chip_of",
    "QMI_DIRECT_CSR",
]

LOG = logging.getLogger(__name__)


_SSI = 0x18000000
_SSI_CTRLR0, _SSI_SSIENR, _SSI_SR, _SSI_DR0 = 0x00, 0x08, 0x28, 0x60
#: CTRLR0: DFS_32 = 7 (8-bit frames), TMOD = 0 (transmit and receive), SPI_FRF = 0 (standard).
_CTRLR0_8BIT_TXRX = 0x00070000
_SR_RFNE = 1 << 3
_SS_CTRL = 0x4001800C
_OUTOVER_LOW, _OUTOVER_NORMAL = 2 << 8, 0
_READ_UNIQUE_ID = 0x4B
_DUMMY_BYTES, _ID_BYTES = 4, 8
#: Longest chip erase waited for, seconds: the W25Q128JV's maximum t_CE (200 s; Winbond
#: W25Q128JV datasheet 9.6), the largest flash RP2040 boards carry (the Pico's W25Q16JV: 25 s).
CHIP_ERASE_TIMEOUT = 200.0
#: Status reads allowed per byte: one byte takes 8 SPI clocks, far less than a debugger's read.
_SR_POLLS = 10
#: The boot ROM's magic and major version at 0x10-0x12: 'M' 'u' then 1 on an RP2040, 2 on an
#: RP2350 (RP2350 datasheet 5.4.1 table "Bootrom header"; RP2040 datasheet 2.8.2; picotool
#: compares the word at 0x10 masked with 0xF0FFFFFF to 0x01754D / 0x02754D).
_ROM_MAGIC = {0x01754D: "rp2040", 0x02754D: "rp2350"}
#: QMI direct mode (RP2350 datasheet 4.4.4; pico-sdk hardware/regs/qmi.h): DIRECT_CSR EN [0],
#: BUSY [1], ASSERT_CS0N [2], RXEMPTY [16], CLKDIV [29:22]; DIRECT_TX (8-bit serial when
#: IWIDTH [17:16] and DWIDTH [18] are 0); DIRECT_RX.
QMI_DIRECT_CSR, _QMI_DIRECT_TX, _QMI_DIRECT_RX = 0x400D0000, 0x400D0004, 0x400D0008
_CSR_EN, _CSR_BUSY, _CSR_ASSERT_CS0N, _CSR_RXEMPTY = 1 << 0, 1 << 1, 1 << 2, 1 << 16
_CHIPS: "weakref.WeakKeyDictionary[Target, Optional[str]]" = weakref.WeakKeyDictionary()


def chip_of(target: Target) -> Optional[str]:
    """``"rp2040"`` or ``"rp2350"`` from the boot ROM's header at 0x10 (read once per target
    object), or None for any other part or when the read fails.

    :param target: a pyOCD target (connected).
    """
    try:
        return _CHIPS[target]
    except (KeyError, TypeError):
        pass
    try:
        chip = _ROM_MAGIC.get(target.read32(0x10) & 0xF0FFFFFF)
    except Exception:
        LOG.debug("could not read the boot ROM header", exc_info=True)
        return None
    try:
        _CHIPS[target] = chip
    except TypeError:
        pass
    return chip


def read_flash_unique_id(session: Session) -> bytes:
    """The 8-byte unique ID of the RP2040's boot flash.

    :param session: an open pyOCD session on an ``rp2040`` target (halts the core).
    :returns: 8 bytes, as the flash sends them (pico-sdk's ``pico_unique_board_id_t`` order).
    :raises pyocd.core.exceptions.Error: the algorithm or a transfer failed.
    :raises ValueError: the SSI did not return one byte per byte sent.
    """
    target = session.target
    boot = target.memory_map.get_boot_memory() if target is not None else None
    flash = getattr(boot, "flash", None)
    if target is None or flash is None:
        raise ValueError("the session has no target with a boot flash")
    flash.init(flash.Operation.VERIFY)
    try:
        got = flash_command(target, bytes([_READ_UNIQUE_ID]) + bytes(_DUMMY_BYTES), _ID_BYTES)
        # While the flash takes instructions: its size, for the image's check.
        _remember_size(target, flash_command(target, b"\x9f", 3))
    finally:
        flash.uninit()
    return got


def read_flash_size(session: Session) -> Optional[int]:
    """The boot flash's size in bytes from its JEDEC ID (:func:`flash_size`), read with pyOCD's RP2
    algorithm initialised (its Init takes the flash out of XIP, so it takes instructions) and
    remembered for :func:`reported_flash_regions`. The RP2350's path: its unique ID is in OTP, so
    no flash instruction is sent for that (the RP2040 reads the size with its unique ID, in
    :func:`read_flash_unique_id`).

    :param session: an open pyOCD session on an ``rp2040`` or ``rp2350`` target (halts the core).
    :returns: the size, or None when the ID gives none (nothing is remembered then).
    :raises pyocd.core.exceptions.Error: the algorithm or a transfer failed.
    :raises ValueError: the SSI or QMI did not return one byte per byte sent.
    """
    target = session.target
    boot = target.memory_map.get_boot_memory() if target is not None else None
    flash = getattr(boot, "flash", None)
    if target is None or flash is None:
        raise ValueError("the session has no target with a boot flash")
    flash.init(flash.Operation.VERIFY)
    try:
        return flash_size(target)
    finally:
        flash.uninit()


#: The boot flash's size by pyOCD target object, as its JEDEC ID gave it (see :func:`size_of_jedec`).
_SIZES: "weakref.WeakKeyDictionary[Target, Tuple[int, bytes]]" = weakref.WeakKeyDictionary()
#: The XIP window's base, where the boot flash starts (RP2040 datasheet 2.6.3; RP2350 4.4).
XIP_BASE = 0x10000000


def size_of_jedec(jedec: bytes) -> Optional[int]:
    """The flash's size in bytes from its 3-byte JEDEC ID (9Fh: manufacturer, memory type,
    capacity; the capacity byte is log2 of the size in bytes on Winbond, Macronix, GigaDevice and
    ISSI parts: 15h = 2 MiB on the Pico's W25Q16JV, 16h = 4 MiB on the Pico 2's W25Q32RV), or
    None when the byte is outside 64 KiB-16 MiB (one chip select's XIP window: 10h-18h), as an
    absent flash (FFh, 00h) gives."""
    if len(jedec) < 3:
        return None
    return 1 << jedec[2] if 16 <= jedec[2] <= 24 else None


def _remember_size(target: Target, jedec: bytes) -> None:
    size = size_of_jedec(jedec)
    try:
        if size is None:
            _SIZES.pop(target, None)
        else:
            _SIZES[target] = (size, bytes(jedec[:3]))
    except TypeError:
        pass


def reported_flash_regions(target: Target, regions: Sequence[Region]) -> List[Region]:
    """``regions`` ((start, end_exclusive, name) triples from the memory map) with the boot
    flash's region cut to the size the flash itself reported (its JEDEC ID, read with the board's
    unique ID by :func:`read_flash_unique_id` on an RP2040, by :func:`read_flash_size` on an
    RP2350): the memory map gives the 16 MiB XIP window, a
    Pico has 2 MiB, and a QSPI flash ignores the address bits above its size, so an image past it
    would land at the start of the flash. Unchanged when no size was read for ``target``.

    :param target: the connected pyOCD target.
    """
    try:
        known = _SIZES.get(target)
    except TypeError:
        known = None
    if known is None:
        return list(regions)
    return regions_of_size(regions, *known)


def regions_of_size(regions: Sequence[Region], size: int, jedec: bytes) -> List[Region]:
    """``regions`` ((start, end_exclusive, name) triples) with the one that starts at
    :data:`XIP_BASE` cut to ``size`` bytes (int), named with the size and the ``jedec`` ID (bytes)
    it came from, for the error that names them."""
    out = []
    for start, end, name in regions:
        if start == XIP_BASE and end - start > size:
            label = f"{size // 1024:,} KiB" if size < 1 << 20 else f"{size >> 20} MiB"
            name = f"{name}: {label} as the flash's JEDEC ID {jedec.hex(' ').upper()} says"
            end = start + size
        out.append((start, end, name))
    return out


def flash_command(target: Target, out: bytes, read: int = 0) -> bytes:
    """One serial flash instruction: /CS low, ``out`` then ``read`` bytes of 0x00 shifted, /CS
    high. On an RP2040 through the SSI (/CS held by the IO_QSPI override; the SSI's mode is
    restored afterwards; the boot ROM's ``flash_exit_xip`` must have put it in serial mode
    first, which the algorithm's Init does: ``Flash.init``); on an RP2350 through the QMI's
    direct mode (DIRECT_CSR is restored afterwards, so XIP reads work again).

    :param target: pyOCD target of an RP2040/RP2350.
    :returns: the ``read`` bytes that came back.
    :raises ValueError: the interface did not return one byte per byte sent.
    :raises pyocd.core.exceptions.TransferError: a transfer failed.
    """
    if chip_of(target) == "rp2350":
        return _qmi_command(target, out, read)
    ctrlr0 = target.read32(_SSI + _SSI_CTRLR0)
    target.write32(_SSI + _SSI_SSIENR, 0)
    target.write32(_SSI + _SSI_CTRLR0, _CTRLR0_8BIT_TXRX)
    target.write32(_SSI + _SSI_SSIENR, 1)
    ss_ctrl = target.read32(_SS_CTRL)
    target.write32(_SS_CTRL, (ss_ctrl & ~(3 << 8)) | _OUTOVER_LOW)
    got = []
    try:
        for byte in bytes(out) + bytes(read):  # one at a time: the 16-entry FIFOs never overrun
            target.write32(_SSI + _SSI_DR0, byte)
            if not any(target.read32(_SSI + _SSI_SR) & _SR_RFNE for _ in range(_SR_POLLS)):
                raise ValueError("the SSI returned no byte for 0x%02x" % byte)
            got.append(target.read32(_SSI + _SSI_DR0) & 0xFF)
    finally:
        target.write32(_SS_CTRL, (ss_ctrl & ~(3 << 8)) | _OUTOVER_NORMAL)
        target.write32(_SSI + _SSI_SSIENR, 0)
        target.write32(_SSI + _SSI_CTRLR0, ctrlr0)
        target.write32(_SSI + _SSI_SSIENR, 1)
    return bytes(got[len(out) :])


def _qmi_command(target: Target, out: bytes, read: int) -> bytes:
    csr = target.read32(QMI_DIRECT_CSR)
    target.write32(QMI_DIRECT_CSR, (csr & ~_CSR_BUSY) | _CSR_EN | _CSR_ASSERT_CS0N)
    got = []
    try:
        for byte in bytes(out) + bytes(read):
            target.write32(_QMI_DIRECT_TX, byte)
            if not any(not target.read32(QMI_DIRECT_CSR) & _CSR_RXEMPTY for _ in range(_SR_POLLS)):
                raise ValueError("the QMI returned no byte for 0x%02x" % byte)
            got.append(target.read32(_QMI_DIRECT_RX) & 0xFF)
    finally:
        target.write32(QMI_DIRECT_CSR, csr & ~(_CSR_BUSY | _CSR_ASSERT_CS0N | _CSR_EN))
    return bytes(got[len(out) :])


def flash_size(target: Target) -> Optional[int]:
    """The boot flash's size from its JEDEC ID (9Fh: manufacturer, type, capacity; capacity is
    log2 of the size in bytes on Winbond, Macronix and GigaDevice parts, 15h = 2 MiB on the
    Pico's W25Q16JV, 16h = 4 MiB on the Pico 2's W25Q32RV), or None when the byte is outside
    64 KiB-16 MiB (one chip select's XIP window). On an RP2040 the SSI must be in serial mode
    (see :func:`flash_command`)."""
    jedec = flash_command(target, b"\x9f", 3)
    _remember_size(target, jedec)
    return size_of_jedec(jedec)


def chip_erase(target: Target, timeout: float = CHIP_ERASE_TIMEOUT) -> None:
    """Erase the whole boot flash with its own Chip Erase instruction (C7h, W25Q16JV datasheet
    8.2.34). The SSI must be in serial mode (see :func:`flash_command`).

    :param timeout: seconds to wait for BUSY to clear.
    :raises FlashEraseFailure: BUSY did not clear in time (pyOCD's exception, address 0x10000000).
    """
    _write_and_wait(target, b"\xc7", timeout, "the flash's chip erase", 0x10000000)


#: Block erase instructions by size (W25Q16JV datasheet 8.2.31-8.2.33): 4 KiB sector 20h,
#: 32 KiB block 52h, 64 KiB block D8h; and the longest each is waited for, seconds (the maxima
#: of t_SE, t_BE1, t_BE2 in section 9.6, the same on the W25Q128JV).
BLOCK_ERASES = {0x1000: (0x20, 0.4), 0x8000: (0x52, 1.6), 0x10000: (0xD8, 2.0)}


def erase_block(target: Target, offset: int, size: int) -> None:
    """Erase the ``size``-byte block (a key of :data:`BLOCK_ERASES`) at flash offset ``offset``
    (a multiple of ``size``) with the flash's own instruction. The SSI must be in serial mode.

    :raises ValueError: ``size`` is not a block size or ``offset`` is not aligned to it.
    :raises FlashEraseFailure: BUSY did not clear within the datasheet's maximum.
    """
    if size not in BLOCK_ERASES or offset % size:
        raise ValueError("no %d-byte block erase at flash offset %#x" % (size, offset))
    cmd, timeout = BLOCK_ERASES[size]
    _write_and_wait(
        target,
        bytes((cmd, (offset >> 16) & 0xFF, (offset >> 8) & 0xFF, offset & 0xFF)),
        timeout,
        "the flash's %d KiB erase at offset %#x" % (size // 1024, offset),
        0x10000000 + offset,
    )


def _write_and_wait(target: Target, instruction: bytes, timeout: float, what: str, address: int) -> None:
    """06h Write Enable, ``instruction``, then 05h status reads back to back until BUSY clears,
    bounded by ``timeout`` seconds on the probe's clock (:class:`~piflash.targets.families.base.Deadline`:
    the wall clock on hardware, the count of polls on a simulated probe, so that a simulated
    erase never depends on the host's load; issue 42 item 4).

    :raises FlashEraseFailure: BUSY did not clear within ``timeout``.
    """
    from pyocd.core.exceptions import FlashEraseFailure

    from piflash.targets.families.base import poll_until, target_simulated

    flash_command(target, b"\x06")
    flash_command(target, instruction)
    if not poll_until(lambda: not flash_command(target, b"\x05", 1)[0] & 1, timeout, target_simulated(target)):
        raise FlashEraseFailure("%s did not finish in %.1f s" % (what, timeout), address=address)
