"""SWD packets over an SPI controller: many transactions per ``SPI_IOC_MESSAGE`` (issue 43).

The wiring (probe-rs's ``probe-rs-linux`` spidev probe does the same): SCLK drives SWCLK, MOSI
reaches SWDIO through a resistor of about 1 kOhm, MISO reads SWDIO directly. Where the target
drives SWDIO it wins over the resistor and MISO reads the target; elsewhere MISO reads MOSI.
The SPI controller clocks without pause, so a batch of SWD packets is one bit stream, built here
and sent in one ``SPI_IOC_MESSAGE`` ioctl (python-periphery's ``SPI.transfer``: one
``spi_ioc_transfer`` of up to the spidev buffer size, 4096 bytes by default, ``bufsiz`` of
``drivers/spi/spidev.c``).

The packets are sent blind and their ACKs checked after the batch, which works because the DP's
overrun detection (CTRL/STAT.ORUNDETECT, ADIv5.2 B4.2.5) is kept on: a WAIT or FAULT answer
then keeps its data phase, so every packet has the same length whatever its ACK, and after a
WAIT every packet answers FAULT until ABORT.ORUNERRCLR. On a WAIT the engine clears the overrun
and sends the batch again from the first packet that was not OK; a FAULT raises
``TransferFaultError``; a missing ACK (no target: MISO reads back MOSI's 0s) ``TransferError``.

Posted AP reads (ADIv5.2 B2.2.9): the value of an AP read arrives with the next AP read or a read
of DP RDBUFF, which the engine inserts after the last AP read of a run.

Bit order: SWD sends every field LSB first; the Pi's SPI controllers shift MSB first and take
no ``SPI_LSB_FIRST`` (``BCM2835_SPI_MODE_BITS`` in Linux ``drivers/spi/spi-bcm2835.c`` is CPOL,
CPHA, CS_HIGH and NO_CS; ``spi-bcm2835aux.c`` sets CPOL, CS_HIGH, NO_CS; ``spi_setup`` in
``drivers/spi/spi.c`` refuses other mode bits with EINVAL), so each byte is bit-reversed in
software (:data:`REVERSE`), both ways. SPI mode 0.

Standard library only; pyOCD's exceptions are imported when raised.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, List, Optional, Tuple

__all__ = ["REVERSE", "SpiSwd", "PendingRead", "DEFAULT_BUFSIZ", "CS_ORUNDETECT"]

#: Each byte with its bits in the opposite order: the software LSB-first (see the module).
REVERSE = bytes(int("{:08b}".format(i)[::-1], 2) for i in range(256))
#: spidev's default buffer size, bytes per message (``bufsiz`` module parameter, drivers/spi/spidev.c).
DEFAULT_BUFSIZ = 4096
#: CTRL/STAT.ORUNDETECT (ADIv5.2 B2.2.2).
CS_ORUNDETECT = 1 << 0
#: ABORT.ORUNERRCLR (ADIv5.2 B2.2.1).
ABORT_ORUNERRCLR = 1 << 4
#: Cycles of one packet whatever its ACK (overrun detection on): request 8, turnaround 1, ACK 3,
#: data 32 + parity 1, turnaround 1 (ADIv5.2 B4.2).
PACKET_CYCLES = 46
#: Idle cycles (SWDIO low) after a batch, so the last write completes before SWCLK stops
#: (ADIv5.2 B4.1.4 asks for at least 8).
TRAILING_IDLE = 8
#: How many times a batch is sent again after WAIT before the engine gives up.
MAX_WAIT_REPLAYS = 1000
ACK_OK, ACK_WAIT, ACK_FAULT = 0b001, 0b010, 0b100
DP_RDBUFF = 0xC


def _parity(value: int) -> int:
    return bin(value).count("1") & 1


def request_bits(ap: bool, read: bool, addr: int) -> int:
    """The 8 request bits (LSB = start bit) of an SWD packet (ADIv5.2 B4.2.1)."""
    body = int(ap) | (int(read) << 1) | (((addr >> 2) & 3) << 2)
    return 1 | (body << 1) | (_parity(body) << 5) | (1 << 7)


@dataclass
class PendingRead:
    """A read queued in a batch: :attr:`value` once the batch has gone (int), else None."""

    value: Optional[int] = None


@dataclass
class _Op:
    ap: bool
    read: bool
    addr: int
    value: int = 0
    sink: Optional[PendingRead] = None  # where this packet's data goes (a read's result)
    carries: Optional[PendingRead] = field(default=None)  # posted AP read: the previous read's


class SpiSwd:
    """Batched SWD over one SPI device.

    :param transfer: ``transfer(bytes) -> bytes``, one full-duplex SPI message (python-periphery's
        ``SPI.transfer``), bytes as the controller shifts them (MSB first).
    :param max_bytes: bytes per message at most (int; spidev's ``bufsiz``).
    :ivar messages: messages sent (int). :ivar waits: WAIT answers seen (int).
    """

    def __init__(self, transfer: Callable[[bytes], Any], max_bytes: int = DEFAULT_BUFSIZ) -> None:
        self._transfer = transfer
        self.max_bytes = max_bytes
        self._ops: List[_Op] = []
        self._last_ap_read: Optional[PendingRead] = None
        self.messages = 0
        self.waits = 0
        self.select = 0  # DP SELECT as last written: CTRL/STAT writes need DPBANKSEL 0

    # -- raw cycles -------------------------------------------------------------------------
    def cycles(self, bits: int, count: int) -> int:
        """Clock ``count`` (int) cycles with SWDIO driven to ``bits`` (LSB first) after the
        queued packets; returns what MISO read in them (int, LSB first)."""
        self.flush()
        return self._exchange(bits, count)

    def _exchange(self, bits: int, count: int) -> int:
        nbytes = (count + 7) // 8
        out = bits.to_bytes(nbytes, "little").translate(REVERSE)
        got = bytes(self._transfer(out)).translate(REVERSE)
        self.messages += 1
        return int.from_bytes(got, "little") & ((1 << count) - 1)

    def line_reset(self) -> None:
        """At least 50 cycles with SWDIO high, then two idle cycles (ADIv5.2 B4.3.3)."""
        self.cycles((1 << 51) - 1, 53)

    # -- packets ----------------------------------------------------------------------------
    def read(self, ap: bool, addr: int) -> PendingRead:
        """Queue a read of a DP (``ap`` False) or AP register (A[3:2] of ``addr``)."""
        pending = PendingRead()
        if ap:
            self._ops.append(_Op(True, True, addr, carries=self._last_ap_read))
            self._last_ap_read = pending
        else:
            self._close_ap_reads()
            self._ops.append(_Op(False, True, addr, sink=pending))
        if len(self._ops) * PACKET_CYCLES >= (self.max_bytes * 8 - TRAILING_IDLE - PACKET_CYCLES):
            self.flush()
        return pending

    def write(self, ap: bool, addr: int, value: int) -> None:
        """Queue a write (posted: its ACK is checked when the batch goes)."""
        self._close_ap_reads()
        value &= 0xFFFFFFFF
        if not ap and addr & 0xC == 0x8:
            self.select = value
        if not ap and addr & 0xC == 0x4 and not self.select & 0xF:
            value |= CS_ORUNDETECT  # the batches rely on it (see the module)
        self._ops.append(_Op(ap, False, addr, value))
        if len(self._ops) * PACKET_CYCLES >= (self.max_bytes * 8 - TRAILING_IDLE - PACKET_CYCLES):
            self.flush()

    def _close_ap_reads(self) -> None:
        if self._last_ap_read is not None:
            self._ops.append(_Op(False, True, DP_RDBUFF, carries=self._last_ap_read))
            self._last_ap_read = None

    def flush(self) -> None:
        """Send the queued packets (several messages if need be) and fill their reads.

        :raises pyocd.core.exceptions.TransferFaultError: an ACK FAULT (a sticky error).
        :raises pyocd.core.exceptions.TransferTimeoutError: WAIT for :data:`MAX_WAIT_REPLAYS` sends.
        :raises pyocd.core.exceptions.TransferError: no ACK, or a read's parity is wrong.
        """
        self._close_ap_reads()
        ops, self._ops = self._ops, []
        per_message = max(1, (self.max_bytes * 8 - TRAILING_IDLE) // PACKET_CYCLES)
        pos = 0
        replays = 0
        while pos < len(ops):
            batch = ops[pos : pos + per_message]
            acks, words = self._send(batch)
            bad = next((i for i, ack in enumerate(acks) if ack != ACK_OK), None)
            for i in range(len(batch) if bad is None else bad):
                self._deliver(batch[i], words[i])
            if bad is None:
                pos += len(batch)
                continue
            ack = acks[bad]
            pos += bad
            if ack == ACK_WAIT:
                self.waits += 1
                replays += 1
                if replays > MAX_WAIT_REPLAYS:
                    from pyocd.core.exceptions import TransferTimeoutError

                    raise TransferTimeoutError("SWD WAIT for %d batches over SPI" % MAX_WAIT_REPLAYS)
                # Every packet after the WAIT answered FAULT (overrun): clear it, send the rest again.
                self._send([_Op(False, False, 0x0, ABORT_ORUNERRCLR)])
                continue
            from pyocd.core.exceptions import TransferError, TransferFaultError

            if ack == ACK_FAULT:
                raise TransferFaultError("SWD FAULT over SPI")
            raise TransferError("no ACK from target over SPI (ACK bits %s)" % format(ack, "03b"))

    def _deliver(self, op: _Op, word: Tuple[int, int]) -> None:
        value, par = word
        if not op.read:
            return
        if par != _parity(value):
            from pyocd.core.exceptions import TransferError

            raise TransferError("SWD read parity error over SPI")
        if op.sink is not None:
            op.sink.value = value
        if op.carries is not None:
            op.carries.value = value

    def _send(self, batch: List[_Op]) -> Tuple[List[int], List[Tuple[int, int]]]:
        tx = 0
        for i, op in enumerate(batch):
            req = request_bits(op.ap, op.read, op.addr)
            if op.read:  # MOSI low while the target drives: no ACK reads 000, and idles a lost DP
                bits = req
            else:
                bits = req | ((op.value | (_parity(op.value) << 32)) << 13)
            tx |= bits << (i * PACKET_CYCLES)
        count = len(batch) * PACKET_CYCLES + TRAILING_IDLE
        rx = self._exchange(tx, count)
        acks: List[int] = []
        words: List[Tuple[int, int]] = []
        for i in range(len(batch)):
            base = i * PACKET_CYCLES
            acks.append((rx >> (base + 9)) & 7)
            words.append(((rx >> (base + 12)) & 0xFFFFFFFF, (rx >> (base + 44)) & 1))
        return acks, words
