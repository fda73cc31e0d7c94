"""A simulated ``/dev/spidevB.C`` with a board's SWD port wired to it (issue 43).

It answers the ioctls of Linux's spidev (``include/uapi/linux/spi/spidev.h``) as the kernel does:
``SPI_IOC_WR_MODE``/``MODE32`` (refusing ``SPI_LSB_FIRST`` with EINVAL, as ``spi_setup`` does for
the Pi's controllers, whose ``mode_bits`` lack it: ``drivers/spi/spi-bcm2835.c``
``BCM2835_SPI_MODE_BITS``), ``SPI_IOC_WR_MAX_SPEED_HZ``, ``SPI_IOC_WR_BITS_PER_WORD`` (8 only
here), their ``RD`` twins, and ``SPI_IOC_MESSAGE(N)``: N ``struct spi_ioc_transfer`` of 32 bytes
whose ``tx_buf`` and ``rx_buf`` are addresses in the caller's memory, read and written with
ctypes as the kernel's ``copy_from_user``/``copy_to_user`` do; a message longer than spidev's
``bufsiz`` (4096) is EMSGSIZE (``spidev_message`` in ``drivers/spi/spidev.c``).

The bytes shift MSB first. SCLK is SWCLK, MOSI reaches SWDIO through a resistor, MISO reads
SWDIO: :class:`~piflash.sim.debug.swdline.SwdLine` gets every cycle with the host driving (the
resistor) and returns the target's bit where it drives, MOSI's elsewhere. The model is
cycle-level: which SCLK edge the host samples on is not modelled.

Time: a :class:`~piflash.sim.probes.usb.timing.VirtualClock` is charged per message the host's
CPU (:data:`IOCTL_HOST_X86_S` plus :data:`PACKET_HOST_X86_S` per SWD packet, times the host
preset's factor), the kernel's fixed cost (:data:`KERNEL_MESSAGE_S`) and the SPI clock's bits;
the target's own time (flash program and erase, the core running a flash algorithm) comes from
the same model as the simulated USB probes (:class:`~piflash.sim.probes.usb.firmware.DapFirmware`),
whose flash busy time makes the SWD port answer WAIT.
"""

from __future__ import annotations

import ctypes
import errno
import struct
from typing import Any, Optional

from piflash.sim.debug.swdline import SwdLine
from piflash.sim.probes.usb.firmware import DapFirmware
from piflash.sim.probes.usb.presets import ProbePreset
from piflash.sim.probes.usb.timing import DEFAULT_HOST, HostPreset, VirtualClock, get_host
from piflash.sim.store import SimStore

__all__ = ["BoardLine", "SimSpidev", "SPIDEV_PRESET", "KERNEL_MESSAGE_S", "IOCTL_HOST_X86_S", "PACKET_HOST_X86_S"]

SPI_CPHA, SPI_CPOL, SPI_CS_HIGH, SPI_LSB_FIRST, SPI_NO_CS = 0x1, 0x2, 0x4, 0x8, 0x40
#: ``BCM2835_SPI_MODE_BITS`` (drivers/spi/spi-bcm2835.c): the mode bits the Pi's SPI0 takes.
BCM2835_MODE_BITS = SPI_CPOL | SPI_CPHA | SPI_CS_HIGH | SPI_NO_CS
SPI_IOC_WR_MODE, SPI_IOC_RD_MODE = 0x40016B01, 0x80016B01
SPI_IOC_WR_LSB_FIRST, SPI_IOC_RD_LSB_FIRST = 0x40016B02, 0x80016B02
SPI_IOC_WR_BITS_PER_WORD, SPI_IOC_RD_BITS_PER_WORD = 0x40016B03, 0x80016B03
SPI_IOC_WR_MAX_SPEED_HZ, SPI_IOC_RD_MAX_SPEED_HZ = 0x40046B04, 0x80046B04
SPI_IOC_WR_MODE32, SPI_IOC_RD_MODE32 = 0x40046B05, 0x80046B05
#: ``SPI_IOC_MESSAGE(N)`` is ``_IOW('k', 0, char[N * 32])``: type 'k', number 0.
_MESSAGE_BASE = 0x6B00
_TRANSFER = struct.Struct("<QQIIHBBBBBB")  # struct spi_ioc_transfer, 32 bytes
#: spidev's default ``bufsiz`` (drivers/spi/spidev.c module parameter).
BUFSIZ = 4096
#: spidev's default speed before a WR_MAX_SPEED_HZ: the controller's max_speed_hz from the
#: device tree's ``spi-max-frequency`` of the Pi's spidev nodes (125 MHz in the Pi's overlays);
#: every client sets its own.
DEFAULT_SPEED_HZ = 125_000_000

#: The spidev "probe" as a preset of the timing model: no probe firmware between the host and the
#: wire, so no command or transfer overhead.
SPIDEV_PRESET = ProbePreset(
    name="spidev",
    vid=0,
    pid=0,
    manufacturer="Linux",
    product="spidev",
    interface="SPI",
    link="spidev",
    packet_size=BUFSIZ,
    packet_count=1,
    firmware_version="",
    protocol_version="",
    max_swd_hz=125e6,
    cmd_overhead_s=0.0,
    transfer_overhead_s=0.0,
    serial_digits=0,
    bcd_device=0,
)
#: Kernel time per ``SPI_IOC_MESSAGE`` on a Pi: syscall, spidev's copies, spi_sync and the
#: controller's interrupt or DMA set-up. An assumption (no published figure of spi-bcm2835's
#: per-message latency was found): 30 us, to be measured on a Zero 2W.
KERNEL_MESSAGE_S = 30e-6
#: Host CPU on the x86 machine (the device charges them times the host preset's factor), measured
#: by ``benchmarks/pins_probe.py --engine-cost`` (a 256 KiB nRF52840 flash: the CPU outside the
#: simulated device, 13,705 messages of 150,919 packets): per SWD packet, piflash's SPI engine
#: encoding and decoding full messages; per message, everything else the host runs between two
#: messages (pyOCD's layers, piflash's flash engine and its polls, python-periphery), the packets'
#: share taken out. Since the engine packs four packets into 23 bytes at a time and checks a
#: message of writes' ACKs with one mask (2026-12-07), three runs interleaved with the engine of
#: before (load average 4 on the 2 shared cores; not scaled to the day the host bands were set
#: against, so on the slow side): per packet 0.347 / 0.373 / 0.314 us (before: 0.517 / 0.394 /
#: 0.571), per message 96.6 / 113.5 / 106.0 us (before: 100.5 / 92.0 / 118.5); the medians.
#: The first measurement, of the engine before, was 1.13 us and 95.9 us (load average about 3).
IOCTL_HOST_X86_S = 106.0e-6
PACKET_HOST_X86_S = 0.347e-6
#: Cycles of one SWD packet as the engine sends it (docs of piflash/probe/spiswd.py).
_PACKET_CYCLES = 46


class BoardLine:
    """The bit-level SWD line (:class:`SwdLine`) of the simulated board behind a pin device, whose
    transactions the USB probes' firmware model runs (:class:`DapFirmware`: the board's DP/AP, the
    flash's busy time) on the device's own time.

    A subclass sets ``firmware`` (:class:`DapFirmware`), ``line`` (None until first used) and
    ``_t`` (the device's time, s). Shared by :class:`SimSpidev` and the simulated gpiochip's wire.
    """

    firmware: DapFirmware
    line: Optional[SwdLine]
    _t: float

    def _line(self) -> SwdLine:
        """The line, opening the board on first use."""
        if self.line is None:
            self.firmware.open()
            self.line = SwdLine(self.firmware.board().dp, access=self._access, busy=self._busy)
        return self.line

    def _access(self, ap: bool, read: bool, addr: int, value: int) -> int:
        """One DP/AP transaction the line decoded: the value read (int).

        :raises pyocd.core.exceptions.TransferFaultError: ACK FAULT.
        :raises pyocd.core.exceptions.TransferError: no ACK.
        """
        from pyocd.core.exceptions import TransferError, TransferFaultError

        req = int(ap) | (int(read) << 1) | (addr & 0xC)
        ack, got, self._t = self.firmware.transfer(req, value, self._t)
        if ack == 0b100:
            raise TransferFaultError("SWD FAULT")
        if ack != 0b001:
            raise TransferError("no ACK")
        return got

    def _busy(self, ap: bool, read: bool, addr: int) -> bool:
        """Whether that transaction would be answered WAIT now (the flash busy)."""
        return self.firmware.would_wait(int(ap) | (int(read) << 1) | (addr & 0xC), self._t)


class SimSpidev(BoardLine):
    """One simulated spidev device with a board behind it.

    :param name: the device's name (str, ``spidev0.0``).
    :param board_name: the simulated board (in ``store``).
    :param store: the board store.
    :ivar clock: the virtual clock (:class:`VirtualClock`).
    :ivar host: the host preset charged (:class:`HostPreset`; ``x86`` unless set).
    :ivar messages: SPI_IOC_MESSAGE ioctls answered (int).
    """

    def __init__(self, name: str, board_name: str, store: SimStore) -> None:
        self.name = name
        self.board_name = board_name
        self.store = store
        self.clock = VirtualClock()
        self.host: HostPreset = get_host(DEFAULT_HOST)
        self.firmware = DapFirmware(SPIDEV_PRESET, board_name, store, name, self.clock)
        self.firmware.wait_retry = 0  # the host retries, not a probe's firmware
        self.mode = 0
        self.bits_per_word = 8
        self.speed_hz = DEFAULT_SPEED_HZ
        self.messages = 0
        self.line: Optional[SwdLine] = None
        self._t = 0.0
        self._opens = 0

    # -- open / close (seen through the seam, piflash.sim.probes.pins.seam) -------------------
    def opened(self) -> None:
        """A process opened the device file."""
        self._opens += 1

    def closed(self) -> None:
        """The file was closed: at the last close the board is saved and released."""
        self._opens = max(0, self._opens - 1)
        if not self._opens:
            self.firmware.close()
            self.line = None

    # -- ioctl --------------------------------------------------------------------------------
    def ioctl(self, request: int, arg: Any, mutate: bool = True) -> Any:
        """Answer one ioctl as Linux's spidev does (see the module).

        :returns: the ioctl's return value (int; a message's total length), or for a read
            request into an immutable buffer the bytes read, as ``fcntl.ioctl`` returns them.
        :raises OSError: EINVAL (a mode bit the controller lacks, bits per word other than 8),
            EMSGSIZE (a message over ``bufsiz``), ENOTTY (an ioctl spidev does not have).
        """
        if request & 0xFFFF == _MESSAGE_BASE and request >> 30 == 1:
            return self._message(arg, ((request >> 16) & 0x3FFF) // _TRANSFER.size)
        if request in (SPI_IOC_WR_MODE, SPI_IOC_WR_MODE32):
            mode = _int_arg(arg, 1 if request == SPI_IOC_WR_MODE else 4)
            if mode & ~BCM2835_MODE_BITS & 0xFFFF:
                raise OSError(errno.EINVAL, "Invalid argument (spi-bcm2835 has no mode bits %#x)" % mode)
            self.mode = mode
            return 0
        if request == SPI_IOC_WR_LSB_FIRST:
            if _int_arg(arg, 1):
                raise OSError(errno.EINVAL, "Invalid argument (spi-bcm2835 has no SPI_LSB_FIRST)")
            return 0
        if request == SPI_IOC_WR_BITS_PER_WORD:
            bits = _int_arg(arg, 1)
            if bits not in (0, 8):
                raise OSError(errno.EINVAL, "Invalid argument (this model takes 8 bits per word)")
            self.bits_per_word = 8
            return 0
        if request == SPI_IOC_WR_MAX_SPEED_HZ:
            speed = _int_arg(arg, 4)
            if not speed:
                raise OSError(errno.EINVAL, "Invalid argument (speed 0)")
            self.speed_hz = speed
            return 0
        reads = {
            SPI_IOC_RD_MODE: (self.mode & 0xFF, 1),
            SPI_IOC_RD_MODE32: (self.mode, 4),
            SPI_IOC_RD_LSB_FIRST: (0, 1),
            SPI_IOC_RD_BITS_PER_WORD: (self.bits_per_word, 1),
            SPI_IOC_RD_MAX_SPEED_HZ: (self.speed_hz, 4),
        }
        if request in reads:
            value, size = reads[request]
            data = value.to_bytes(size, "little")
            if isinstance(arg, (bytes, int)) or not mutate:
                return data
            memoryview(arg).cast("B")[:size] = data
            return 0
        raise OSError(errno.ENOTTY, "Inappropriate ioctl for device")

    def _message(self, arg: Any, count: int) -> int:
        raw = bytes(memoryview(arg).cast("B")[: count * _TRANSFER.size])
        transfers = [_TRANSFER.unpack_from(raw, i * _TRANSFER.size) for i in range(count)]
        total = sum(t[2] for t in transfers)
        if total > BUFSIZ:
            raise OSError(errno.EMSGSIZE, "Message too long (spidev bufsiz %d)" % BUFSIZ)
        line = self._line()
        clock = self.clock
        clock.sync()
        factor = self.host.factor
        packets = total * 8 // _PACKET_CYCLES
        host_s = factor * (IOCTL_HOST_X86_S + PACKET_HOST_X86_S * packets)
        clock.hold("host", clock.now, host_s)
        clock.charge("host", host_s)
        start = clock.now + host_s + KERNEL_MESSAGE_S
        self._t = start
        wire_s = 0.0
        for tx_buf, rx_buf, length, speed, *_ in transfers:
            speed = speed or self.speed_hz
            self.firmware.swd_hz = float(speed)
            tx = ctypes.string_at(tx_buf, length) if tx_buf else bytes(length)
            cycles = 8 * length
            # Bytes shift MSB first: cycle i is bit 7 - (i % 8) of byte i // 8.
            bits = int.from_bytes(tx.translate(_REVERSE), "little")
            rx_bits = line.clock(bits, cycles)
            rx = rx_bits.to_bytes(length, "little").translate(_REVERSE)
            if rx_buf:
                ctypes.memmove(rx_buf, rx, length)
            wire_s += cycles / speed
        end = max(start + wire_s, self._t)
        clock.charge("swd", wire_s)
        clock.charge("kernel", KERNEL_MESSAGE_S)
        clock.count("spi_messages")
        clock.count("spi_bytes", total)
        clock.advance_to(end)
        self.messages += 1
        return total


_REVERSE = bytes(int("{:08b}".format(i)[::-1], 2) for i in range(256))


def _int_arg(arg: Any, size: int) -> int:
    if isinstance(arg, int):
        return arg
    return int.from_bytes(bytes(memoryview(arg).cast("B")[:size]), "little")
