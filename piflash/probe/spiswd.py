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
CPHA, CS_HIGH, NO_CS and 3WIRE; ``spi-bcm2835aux.c`` sets CPOL, CS_HIGH, NO_CS; ``spi_setup`` in
``drivers/spi/spi.c`` refuses other mode bits with EINVAL), so each byte is bit-reversed in
software (:data:`REVERSE`), both ways. SPI mode 0.

Standard library only; pyOCD's exceptions are imported when raised.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, List, Optional, Sequence, Tuple

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


#: The parity of every 8-bit value (1 for an odd number of ones).
_PARITY8 = bytes(bin(i).count("1") & 1 for i in range(256))
#: The parity of every 16-bit value, two look-ups give a word's: value ``h * 256 + l`` has the
#: parity of ``l`` flipped when ``h``'s is odd, so the table is 256 rows of the 8-bit one, each as
#: it is or flipped (built in microseconds: it is made when a probe list imports this module).
_PARITY16 = b"".join(_PARITY8.translate(bytes([1, 0]) + bytes(254)) if odd else _PARITY8 for odd in _PARITY8)


def _parity(value: int) -> int:
    """The parity bit of ``value`` (an int below 2**32): 1 for an odd number of ones."""
    return _PARITY16[value & 0xFFFF] ^ _PARITY16[value >> 16]


#: For n packets (key): (the mask of their ACK cycles, the ACK cycles all OK), built once per n.
_ACK_MASKS: "dict[int, Tuple[int, int]]" = {}


def _ack_masks(count: int) -> Tuple[int, int]:
    """(mask, OK) of ``count`` packets' ACK cycles (9-11 of each, ADIv5.2 B4.2): a message of
    writes came back all OK when ``rx & mask == OK``."""
    masks = _ACK_MASKS.get(count)
    if masks is None:
        mask = ok = 0
        for i in range(count):
            mask |= 0b111 << (i * PACKET_CYCLES + 9)
            ok |= ACK_OK << (i * PACKET_CYCLES + 9)
        masks = _ACK_MASKS[count] = (mask, ok)
    return masks


def request_bits(ap: bool, read: bool, addr: int) -> int:
    """The 8 request bits (LSB = start bit) of an SWD packet (ADIv5.2 B4.2.1)."""
    body = int(ap) | (int(read) << 1) | (((addr >> 2) & 3) << 2)
    return 1 | (body << 1) | (_parity(body) << 5) | (1 << 7)


@dataclass
class PendingRead:
    """A read queued in a batch: :attr:`value` once the batch has gone (int), else None."""

    value: Optional[int] = None


def _write_packet(req: int, value: int) -> int:
    return req | ((value | (_parity(value) << 32)) << 13)


def _cycles(packets: List[int], count: int) -> bytes:
    """The cycles of ``packets`` (46 each, cycle 0 of the first in bit 0) and idle cycles to
    ``count``, as bytes LSB first: four packets are 184 cycles, 23 whole bytes, so the packets go
    four at a time into one int each and out as bytes, the rest as one int."""
    whole = len(packets) - len(packets) % 4
    it = iter(packets[:whole])
    head = b"".join([(a | b << 46 | c << 92 | d << 138).to_bytes(23, "little") for a, b, c, d in zip(it, it, it, it)])
    tail = 0
    for i, p in enumerate(packets[whole:]):
        tail |= p << (i * PACKET_CYCLES)
    return head + tail.to_bytes((count + 7) // 8 - len(head), "little")


class SpiSwd:
    """Batched SWD over one SPI device.

    Each queued packet is kept as its 46 cycles (an int, cycle 0 in bit 0) with, for a read, the
    :class:`PendingRead` its data goes to (a posted AP read's data is the previous AP read's).

    :param transfer: ``transfer(bytes) -> bytes``, one full-duplex SPI message (python-periphery's
        ``SPI.transfer``), bytes as the controller shifts them (MSB first).
    :param max_bytes: bytes per message at most (int; spidev's ``bufsiz``).
    :ivar messages: messages sent (int). :ivar waits: WAIT answers seen (int).
    """

    def __init__(self, transfer: Callable[[bytes], Any], max_bytes: int = DEFAULT_BUFSIZ) -> None:
        self._transfer = transfer
        self.max_bytes = max_bytes
        self.per_message = max(1, (max_bytes * 8 - TRAILING_IDLE) // PACKET_CYCLES)
        self._packets: List[int] = []
        self._dest: List[Optional[PendingRead]] = []
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
        return self._exchange_bytes(bits.to_bytes((count + 7) // 8, "little"), count)

    def _exchange_bytes(self, raw: bytes, count: int) -> int:
        """One message of ``raw`` (cycle 0 in bit 0 of byte 0: LSB first) clocking ``count``
        cycles; what MISO read, as an int (cycle 0 in bit 0)."""
        got = bytes(self._transfer(raw.translate(REVERSE))).translate(REVERSE)
        self.messages += 1
        return int.from_bytes(got, "little") & ((1 << count) - 1)

    def line_reset(self) -> None:
        """At least 50 cycles with SWDIO high, then two idle cycles (ADIv5.2 B4.3.3)."""
        self.cycles((1 << 51) - 1, 53)

    def sequence(self, sequences: Sequence[Tuple[int, ...]]) -> List[bytes]:
        """pyOCD's DAP_SWD_Sequence: items ``(cycles, bits)`` drive SWDIO, ``(cycles,)`` read it
        (MOSI high then: an undriven line reads the pull-up's 1); one message. Returns the bytes
        read per read item."""
        tx = 0
        pos = 0
        reads: List[Tuple[int, int]] = []
        for seq in sequences:
            count = seq[0] or 64
            if len(seq) > 1:
                tx |= (seq[1] & ((1 << count) - 1)) << pos
            else:
                tx |= ((1 << count) - 1) << pos
                reads.append((pos, count))
            pos += count
        rx = self.cycles(tx, pos)
        return [((rx >> p) & ((1 << n) - 1)).to_bytes((n + 7) // 8, "little") for p, n in reads]

    # -- packets ----------------------------------------------------------------------------
    def read(self, ap: bool, addr: int) -> PendingRead:
        """Queue a read of a DP (``ap`` False) or AP register (A[3:2] of ``addr``)."""
        pending = PendingRead()
        if ap:
            self._packets.append(request_bits(True, True, addr))
            self._dest.append(self._last_ap_read)
            self._last_ap_read = pending
        else:
            self._close_ap_reads()
            self._packets.append(request_bits(False, True, addr))
            self._dest.append(pending)
        self._full()
        return pending

    def read_many(self, addr: int, count: int) -> List[PendingRead]:
        """Queue ``count`` reads of one AP register (a block read through DRW)."""
        req = request_bits(True, True, addr)
        out = []
        packets, dest = self._packets, self._dest
        for _ in range(count):
            pending = PendingRead()
            packets.append(req)
            dest.append(self._last_ap_read)
            self._last_ap_read = pending
            out.append(pending)
            if len(packets) >= self.per_message:
                self.flush()
                packets, dest = self._packets, self._dest
        return out

    def write(self, ap: bool, addr: int, value: int) -> None:
        """Queue a write (posted: its ACK is checked when the batch goes)."""
        self._close_ap_reads()
        value &= 0xFFFFFFFF
        if not ap and addr & 0xC == 0x8:
            self.select = value
        if not ap and addr & 0xC == 0x4 and not self.select & 0xF:
            value |= CS_ORUNDETECT  # the batches rely on it (see the module)
        self._packets.append(_write_packet(request_bits(ap, False, addr), value))
        self._dest.append(None)
        self._full()

    def write_many(self, addr: int, values: Sequence[int]) -> None:
        """Queue writes of ``values`` to one AP register (a block write through DRW), a message's
        worth at a time."""
        self._close_ap_reads()
        req = request_bits(True, False, addr)
        table = _PARITY16
        start = 0
        while start < len(values):
            room = self.per_message - len(self._packets)
            chunk = values[start : start + room]
            self._packets.extend(
                [req | ((v | ((table[v & 0xFFFF] ^ table[(v >> 16) & 0xFFFF]) << 32)) << 13) for v in chunk]
            )
            self._dest.extend([None] * len(chunk))
            start += len(chunk)
            if len(self._packets) >= self.per_message:
                self.flush()

    def _full(self) -> None:
        if len(self._packets) >= self.per_message:
            self.flush()

    def _close_ap_reads(self) -> None:
        if self._last_ap_read is not None:
            self._packets.append(request_bits(False, True, DP_RDBUFF))
            self._dest.append(self._last_ap_read)
            self._last_ap_read = None

    def flush(self) -> None:
        """Send the queued packets (several messages if need be) and fill their reads.

        :raises pyocd.core.exceptions.TransferFaultError: an ACK FAULT (a sticky error).
        :raises pyocd.core.exceptions.TransferTimeoutError: WAIT for :data:`MAX_WAIT_REPLAYS` sends.
        :raises pyocd.core.exceptions.TransferError: no ACK, or a read's parity is wrong.
        """
        self._close_ap_reads()
        packets, dest = self._packets, self._dest
        self._packets, self._dest = [], []
        pos = 0
        replays = 0
        while pos < len(packets):
            end = min(len(packets), pos + self.per_message)
            bad, ack = self._send(packets[pos:end], dest[pos:end])
            if bad is None:
                pos = end
                continue
            pos += bad
            if ack == ACK_WAIT:
                self.waits += 1
                replays += 1
                if replays > MAX_WAIT_REPLAYS:
                    from pyocd.core.exceptions import TransferTimeoutError

                    raise TransferTimeoutError("SWD WAIT for %d batches over SPI" % MAX_WAIT_REPLAYS)
                # Every packet after the WAIT answered FAULT (overrun): clear it, send the rest again.
                self._send([_write_packet(request_bits(False, False, 0x0), ABORT_ORUNERRCLR)], [None], check=False)
                continue
            from pyocd.core.exceptions import TransferError, TransferFaultError

            if ack == ACK_FAULT:
                raise TransferFaultError("SWD FAULT over SPI")
            raise TransferError("no ACK from target over SPI (ACK bits %s)" % format(ack, "03b"))

    def _send(
        self, packets: List[int], dest: List[Optional[PendingRead]], check: bool = True
    ) -> Tuple[Optional[int], int]:
        """One message of ``packets``; fills the reads before the first ACK that is not OK and
        returns (its index, its ACK), or (None, OK)."""
        count = len(packets) * PACKET_CYCLES + TRAILING_IDLE
        rx = self._exchange_bytes(_cycles(packets, count), count)
        if not any(dest):  # writes only (posted): every ACK checked at once
            mask, ok = _ack_masks(len(packets))
            if rx & mask == ok:
                return None, ACK_OK
        line = format(rx, "0%db" % count)[::-1]  # line[i]: SWDIO in cycle i
        for i, target in enumerate(dest):
            base = i * PACKET_CYCLES
            if line[base + 9 : base + 12] != "100":
                if not check:
                    return None, ACK_OK
                return i, int(line[base + 9 : base + 12][::-1], 2)
            if target is not None:
                value = int(line[base + 12 : base + 44][::-1], 2)
                if int(line[base + 44]) != _parity(value):
                    from pyocd.core.exceptions import TransferError

                    raise TransferError("SWD read parity error over SPI")
                target.value = value
        return None, ACK_OK
