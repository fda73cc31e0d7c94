"""SWD bit-banged on two GPIO lines through the GPIO character device v2 (issue 43).

python-periphery's ``GPIO`` (``Cdev2GPIO``: ``GPIO_V2_GET_LINE_IOCTL`` line requests,
``GPIO_V2_LINE_SET_VALUES``/``GET_VALUES``) drives SWCLK and SWDIO one edge at a time: each cycle
sets SWDIO (while the host drives it), raises SWCLK (the target samples on the rising edge),
reads SWDIO (while the target drives it) and lowers SWCLK. Where the target drives, the host's
SWDIO line is an input (periphery's ``direction = "in"``), so the two never drive against each
other. Every packet's ACK is read before its data phase, so there is no batching: a WAIT sends the
packet again (up to :data:`MAX_WAITS` times), a FAULT raises pyOCD's ``TransferFaultError``, no
ACK ``TransferError``. An AP read is posted (ADIv5.2 B2.2.9): a run of AP reads ends with a read
of DP RDBUFF. Every ioctl is a system call, so this is the slow fallback: about 4 per SWD bit.

nRESET, when configured, is open-drain by hand (:class:`OpenDrainReset`, which a ``spidev:``
probe's ``nreset=`` line uses too): asserted by making the line an output driving 0, released by
making it an input again; it is never driven high (a board's reset circuit may hold it). A
direction change is what every GPIO driver can do; the kernel's ``GPIO_V2_LINE_FLAG_OPEN_DRAIN``
(periphery's ``drive="open_drain"``) comes to the same on the BCM283x, whose pins have no open
drain: gpiolib emulates it by making the line an input for a 1. periphery changes a direction by
releasing the line request and asking for a new one.
Standard library and python-periphery (imported on open); pyOCD's exceptions when raised.
"""

from __future__ import annotations

import time
from typing import Any, List, Optional, Sequence, Tuple

from piflash.probe.pins import GpioSpec
from piflash.probe.spiswd import PendingRead, _parity, request_bits

__all__ = ["GpioSwd", "OpenDrainReset", "MAX_WAITS", "RESET_HOLD_S"]

ACK_OK, ACK_WAIT, ACK_FAULT = 0b001, 0b010, 0b100
#: How many times a packet answered WAIT is sent again before the engine gives up.
MAX_WAITS = 1000
#: Idle cycles (SWDIO low) after the last packet of a flush, so that a write completes (ADIv5.2
#: B4.1.4: at least 8).
TRAILING_IDLE = 8
#: How long nRESET is held low by :meth:`GpioSwd.pulse_reset`, seconds: pyOCD's own
#: ``reset.hold_time`` default (``pyocd/core/options.py``, 0.1 s).
RESET_HOLD_S = 0.1


class OpenDrainReset:
    """An nRESET line driven open-drain through python-periphery's ``GPIO`` (character device v2).

    Requested as an input (released: the board's pull-up holds nRESET high), so opening it does
    not reset the board. Asserting makes it an output driving 0; releasing makes it an input
    again. It is never an output driving 1 (issue 43: "never driven high against the board's
    reset circuit").

    :param chip_path: the chip's device file (str, ``/dev/gpiochip0``).
    :param line: the line offset (int; on a Pi's ``gpiochip0`` the BCM GPIO number).
    :param probe_id: the probe's ID, for messages (str).
    :raises periphery.GPIOError: the line cannot be requested (busy, no such line, no permission).
    :raises ImportError: python-periphery is not installed.
    :ivar asserted: whether this side holds the line low now (bool).
    """

    def __init__(self, chip_path: str, line: int, probe_id: str) -> None:
        from periphery import GPIO

        self.line = line
        self.probe_id = probe_id
        self.gpio: Optional[Any] = GPIO(chip_path, line, "in")
        self.asserted = False

    def set(self, asserted: bool) -> None:
        """Drive the line low (True) or release it as an input (False); never high.

        :raises pyocd.core.exceptions.ProbeError: the line was closed.
        """
        if self.gpio is None:
            from pyocd.core.exceptions import ProbeError

            raise ProbeError("%s: the nRESET line is closed" % self.probe_id)
        # periphery's direction "low" requests the line as an output with 0 as its first value
        # (GPIO_V2_LINE_SET_CONFIG with the output value attribute): there is no moment at 1.
        self.gpio.direction = "low" if asserted else "in"
        self.asserted = bool(asserted)

    def pulse(self, hold_s: float = RESET_HOLD_S) -> None:
        """Low for ``hold_s`` seconds (float), then released."""
        self.set(True)
        time.sleep(hold_s)
        self.set(False)

    def close(self) -> None:
        """Release the line (an input) and give it back to the kernel."""
        gpio, self.gpio = self.gpio, None
        if gpio is not None:
            try:
                if self.asserted:
                    gpio.direction = "in"
            finally:
                self.asserted = False
                gpio.close()


class GpioSwd:
    """SWD on GPIO lines of ``/dev/CHIP``.

    :param chip_path: the chip's device file (str). :param spec: the lines (:class:`GpioSpec`).
    :raises periphery.GPIOError: a line cannot be requested (busy, no such line, no permission).
    :ivar ioctls: GPIO writes and reads made (int). :ivar waits: WAIT answers (int).
    """

    def __init__(self, chip_path: str, spec: GpioSpec) -> None:
        from periphery import GPIO

        self.spec = spec
        self.clk = GPIO(chip_path, spec.swclk, "low")
        self.dio = GPIO(chip_path, spec.swdio, "low")
        self.rst: Optional[OpenDrainReset] = None
        if spec.nreset is not None:
            self.rst = OpenDrainReset(chip_path, spec.nreset, spec.probe_id)
        self._dio_out = True
        self._dio_level = 0
        self.ioctls = 0
        self.waits = 0

    def close(self) -> None:
        """Release the lines (nRESET as an input)."""
        for gpio in (self.clk, self.dio, self.rst):
            if gpio is not None:
                gpio.close()

    # -- cycles ----------------------------------------------------------------------------
    def _drive(self) -> None:
        if not self._dio_out:
            self.dio.direction = "low"
            self._dio_out, self._dio_level = True, 0

    def _release(self) -> None:
        if self._dio_out:
            self.dio.direction = "in"
            self._dio_out = False

    def _out_bits(self, bits: int, count: int) -> None:
        self._drive()
        clk, dio = self.clk, self.dio
        for i in range(count):
            bit = (bits >> i) & 1
            if bit != self._dio_level:
                dio.write(bool(bit))
                self._dio_level = bit
                self.ioctls += 1
            clk.write(True)
            clk.write(False)
            self.ioctls += 2

    def _in_bits(self, count: int) -> int:
        self._release()
        clk, dio = self.clk, self.dio
        value = 0
        for i in range(count):
            clk.write(True)
            if dio.read():
                value |= 1 << i
            clk.write(False)
            self.ioctls += 3
        return value

    def cycles(self, bits: int, count: int) -> int:
        """``count`` cycles with SWDIO driven to ``bits`` (LSB first); returns 0 (the host drives)."""
        self._out_bits(bits, count)
        return 0

    def line_reset(self) -> None:
        """At least 50 cycles with SWDIO high, then two idle cycles (ADIv5.2 B4.3.3)."""
        self._out_bits((1 << 51) - 1, 53)

    def sequence(self, sequences: Sequence[Tuple[int, ...]]) -> List[bytes]:
        """pyOCD's DAP_SWD_Sequence: ``(cycles, bits)`` drives SWDIO, ``(cycles,)`` releases it and
        reads; returns the bytes read per read item."""
        out = []
        for seq in sequences:
            count = seq[0] or 64
            if len(seq) > 1:
                self._out_bits(seq[1], count)
            else:
                out.append(self._in_bits(count).to_bytes((count + 7) // 8, "little"))
        return out

    # -- packets ---------------------------------------------------------------------------
    def _packet(self, ap: bool, read: bool, addr: int, value: int = 0) -> int:
        for _ in range(MAX_WAITS + 1):
            self._out_bits(request_bits(ap, read, addr), 8)
            self._in_bits(1)  # turnaround
            ack = self._in_bits(3)
            if ack == ACK_OK:
                if read:
                    data = self._in_bits(32)
                    par = self._in_bits(1)
                    self._in_bits(1)  # turnaround
                    if par != _parity(data):
                        from pyocd.core.exceptions import TransferError

                        raise TransferError("SWD read parity error on GPIO")
                    return data
                self._in_bits(1)  # turnaround
                self._out_bits(value | (_parity(value) << 32), 33)
                return 0
            self._in_bits(1)  # turnaround after WAIT / FAULT / no answer
            if ack == ACK_WAIT:
                self.waits += 1
                continue
            from pyocd.core.exceptions import TransferError, TransferFaultError

            if ack == ACK_FAULT:
                raise TransferFaultError("SWD FAULT on GPIO")
            raise TransferError("no ACK from target on GPIO (ACK bits %s)" % format(ack, "03b"))
        from pyocd.core.exceptions import TransferTimeoutError

        raise TransferTimeoutError("SWD WAIT %d times on GPIO" % MAX_WAITS)

    def read(self, ap: bool, addr: int) -> PendingRead:
        """Read a DP or AP register now (an AP read, posted, is followed by an RDBUFF read)."""
        if ap:
            self._packet(True, True, addr)
            return PendingRead(self._packet(False, True, 0xC))
        return PendingRead(self._packet(False, True, addr))

    def read_many(self, addr: int, count: int) -> List[PendingRead]:
        """``count`` reads of one AP register (a block read: each AP read returns the last one)."""
        if count <= 0:
            return []
        self._packet(True, True, addr)
        out = [PendingRead(self._packet(True, True, addr)) for _ in range(count - 1)]
        out.append(PendingRead(self._packet(False, True, 0xC)))
        return out

    def write(self, ap: bool, addr: int, value: int) -> None:
        """Write a DP or AP register now."""
        self._packet(ap, False, addr, value & 0xFFFFFFFF)

    def write_many(self, addr: int, values: Sequence[int]) -> None:
        """Writes of ``values`` to one AP register."""
        for value in values:
            self._packet(True, False, addr, value & 0xFFFFFFFF)

    def flush(self) -> None:
        """Idle cycles, so that the last write completes."""
        self._out_bits(0, TRAILING_IDLE)

    # -- nRESET ----------------------------------------------------------------------------
    def assert_reset(self, asserted: bool) -> None:
        """Drive nRESET low (True) or release it as an input (False); never high.

        :raises pyocd.core.exceptions.ProbeError: no nRESET line configured.
        """
        if self.rst is None:
            from pyocd.core.exceptions import ProbeError

            raise ProbeError("%s has no nRESET line (add nreset=N)" % self.spec.probe_id)
        self.rst.set(asserted)

    @property
    def reset_asserted(self) -> bool:
        """Whether nRESET is held low now (bool)."""
        return self.rst is not None and self.rst.asserted

    def pulse_reset(self, hold_s: float = RESET_HOLD_S) -> None:
        """nRESET low for ``hold_s`` seconds (default :data:`RESET_HOLD_S`), then released.

        :raises pyocd.core.exceptions.ProbeError: no nRESET line configured.
        """
        self.assert_reset(True)
        time.sleep(hold_s)
        self.assert_reset(False)
