"""The SWD wire at the bit level: what a debug port sees and drives, cycle by cycle (issue 43).

The simulated USB probes call the DP/AP models of :mod:`piflash.sim.debug.dap` with whole
transactions. A probe that is the Pi's own pins clocks the wire itself, so :class:`SwdLine` sits
between its bits and the same DP/AP models and decodes the protocol as a SW-DP does (Arm Debug
Interface v5.2, IHI 0031F, chapter B4; ADIv6, IHI 0074, section B5.3 for the dormant state):

* a packet: start bit 1, APnDP, RnW, A[2:3], even parity of those four, stop 0, park 1
  (B4.2.1); one turnaround cycle (DLCR.TURNROUND = 0); a 3-bit ACK driven by the target,
  LSB first: OK = 0b001, WAIT = 0b010, FAULT = 0b100; 32 data bits LSB first and their even
  parity, driven by the target for a read (then a turnaround) and by the host for a write
  (after a turnaround);
* a request with a wrong parity, stop or park bit is a protocol error: the target does not drive
  the ACK and ignores the wire until a line reset (B4.2.4);
* a line reset is at least 50 cycles with SWDIO high (B4.3.3); a SW-DP needs one after power-on;
* the JTAG-to-SWD select sequence 0xE79E (16 bits LSB first after a line reset, B5.2.1) moves an
  SWJ-DP that started in JTAG to SWD; 0xE73C moves it back;
* SWD-to-dormant 0xE3BC after a line reset puts a DPv2 in the dormant state, which it leaves only
  on the 128-bit selection alert, four low cycles and the SWD activation code 0x1A (ADIv6 B5.3);
* on a multi-drop wire (:class:`~piflash.sim.debug.multidrop.MultidropWire`) the first packet
  after a line reset must write DP TARGETSEL (A = 0xC), which no DP acknowledges; the DP whose
  TARGETSEL value matches is selected (ADIv5.2 B4.3.4);
* WAIT and FAULT: a DP with a sticky error (CTRL/STAT STICKYERR, WDATAERR, STICKYORUN) answers
  FAULT to everything but a read of DPIDR or CTRL/STAT and a write of ABORT (B4.2.4); with
  CTRL/STAT.ORUNDETECT set a WAIT or FAULT answer still has its data phase and a WAIT sets
  STICKYORUN (B4.2.5), which is what lets a probe send many packets blind and check the ACKs
  after; a write whose data parity is wrong sets WDATAERR (B4.2.3);
* an AP read is posted: its ACK OK comes with the result of the previous AP read, and the value
  read is in RDBUFF for the next AP read or a read of DP RDBUFF (B2.2.9).

The model performs accesses instantly, so it never answers WAIT by itself: :meth:`SwdLine.inject_wait`
makes the next packets answer WAIT, as a busy AP does.

Bits go in and out as Python ints, bit *i* being cycle *i*: :meth:`SwdLine.clock` takes what the
host drives and returns what the host reads. Standard library and :mod:`piflash.sim.debug` only.
"""

from __future__ import annotations

from typing import Any, Callable, List, Optional

from piflash.sim.debug.dap import (
    CS_STICKYERR,
    CS_STICKYORUN,
    CS_WDATAERR,
    DP_ABORT,
    DP_CTRL_STAT,
    DP_DPIDR,
)
from piflash.sim.debug.multidrop import LINE_RESET_ONES, SWD_TO_DORMANT, DormantWatch

__all__ = [
    "ACK_FAULT",
    "ACK_OK",
    "ACK_WAIT",
    "JTAG_TO_SWD",
    "SWD_TO_JTAG",
    "SwdLine",
    "parity",
    "request_bits",
]

#: ACK values as the 3 bits read LSB first (ADIv5.2 B4.2.1).
ACK_OK = 0b001
ACK_WAIT = 0b010
ACK_FAULT = 0b100
#: JTAG-to-SWD and SWD-to-JTAG select sequences, 16 bits LSB first (ADIv5.2 B5.2.1, pyOCD probe/swj.py).
JTAG_TO_SWD = 0xE79E
SWD_TO_JTAG = 0xE73C
#: CTRL/STAT.ORUNDETECT (ADIv5.2 B2.2.2).
CS_ORUNDETECT = 1 << 0

JTAG, DORMANT, LOCKOUT, RESET, IDLE = "jtag", "dormant", "lockout", "reset", "idle"
_STICKY = CS_STICKYERR | CS_WDATAERR | CS_STICKYORUN


def parity(value: int) -> int:
    """Even parity bit of ``value`` (int): 1 when it has an odd number of ones."""
    return bin(value).count("1") & 1


def request_bits(ap: bool, read: bool, addr: int) -> int:
    """The 8 request bits of a packet, LSB = the start bit (ADIv5.2 B4.2.1).

    :param ap: APnDP (bool). :param read: RnW (bool). :param addr: the register address; A[3:2]
        are taken (int).
    """
    a = (addr >> 2) & 3
    body = int(ap) | (int(read) << 1) | (a << 2)
    return 1 | (body << 1) | (parity(body) << 5) | (0 << 6) | (1 << 7)


class _Phase:
    __slots__ = ("name", "length", "got", "target", "value", "drive")

    def __init__(self, name: str, length: int, target: Optional[int] = None) -> None:
        self.name = name
        self.length = length
        self.got = 0
        self.target = target  # bits the target drives, or None: the host drives (or nobody)
        self.value = 0  # what the host drove


class SwdLine:
    """A SW-DP's wire: decode the host's cycles, drive ACKs and read data, call the DP/AP models.

    :param port: a :class:`~piflash.sim.debug.dap.SwDp` or a
        :class:`~piflash.sim.debug.multidrop.MultidropWire` (anything with ``read_dp``,
        ``write_dp``, ``read_ap``, ``write_ap``; a wire with ``dps`` is multi-drop).
    :param start: the state at power-on: ``"lockout"`` (a SW-DP, waiting for its line reset: the
        default), ``"jtag"`` (an SWJ-DP, which starts in JTAG), ``"dormant"`` (a DPv2; the default
        for a multi-drop wire).
    :param access: ``access(ap, read, addr, value) -> value`` performs one accepted access
        (raising pyOCD's ``TransferError`` for a bus fault); default: the port's own methods. A
        device with a virtual clock passes its own, which times the access.
    :param busy: ``busy(ap, read, addr) -> bool``: whether the access would find its AP busy
        now, so that the packet is answered WAIT (asked when the request has been read); None:
        never.
    :ivar state: ``jtag``, ``dormant``, ``lockout``, ``reset`` (after a line reset), ``idle``.
    :ivar packets: packets answered OK (int). :ivar contention: cycles where the host drove SWDIO
        against the target (int; a GPIO host must release the line while the target drives).
    """

    def __init__(
        self,
        port: Any,
        start: Optional[str] = None,
        access: Optional[Callable[[bool, bool, int, int], int]] = None,
        busy: Optional[Callable[[bool, bool, int], bool]] = None,
    ) -> None:
        self.port = port
        self._access = access or self._direct
        self._busy = busy
        self.multidrop = hasattr(port, "dps")
        self.dormant_capable = self.multidrop
        self.state = start or (DORMANT if self.multidrop else LOCKOUT)
        self.ones = 0
        self.packets = 0
        self.protocol_errors = 0
        self.contention = 0
        self._wait = 0
        self._phases: List[_Phase] = []
        self._request = 0
        self._first_after_reset = False
        self._since: Optional[int] = None  # cycles seen after a line reset (select sequences)
        self._seq = 0
        self._watch = DormantWatch()
        self._pending_read = 0

    # -- what the tests and the devices above use ----------------------------------------------
    def inject_wait(self, count: int) -> None:
        """Answer WAIT to the next ``count`` (int) packets that reach an AP or RDBUFF."""
        self._wait += count

    @property
    def dp(self) -> Any:
        """The DP the wire talks to now (the selected one on a multi-drop wire), or None."""
        return self.port.selected if self.multidrop else self.port

    def clock(self, tx: int, cycles: int, host_drives: Optional[int] = None) -> int:
        """Run ``cycles`` (int) cycles of SWCLK.

        :param tx: what the host drives on SWDIO, bit *i* in cycle *i* (int).
        :param host_drives: the cycles in which the host drives SWDIO (int mask); None: every
            cycle (SPI, whose MOSI reaches SWDIO through a resistor the target overrides).
            A cycle nobody drives reads 1 (the target's pull-up on SWDIO).
        :returns: SWDIO in each cycle as the host reads it, bit *i* in cycle *i* (int): the target's
            bit where it drives, else the host's, else 1.
        """
        full = (1 << cycles) - 1
        drives = full if host_drives is None else host_drives & full
        line = (tx & drives) | (full & ~drives)  # undriven cycles read the pull-up
        rx = 0
        pos = 0
        while pos < cycles:
            if not self._phases:
                bit = (line >> pos) & 1
                rx |= bit << pos
                self._wire_bit(bit)
                pos += 1
                continue
            phase = self._phases[0]
            take = min(phase.length - phase.got, cycles - pos)
            mask = (1 << take) - 1
            if phase.target is not None:
                bits = (phase.target >> phase.got) & mask
                rx |= bits << pos
                hd = (drives >> pos) & mask
                if host_drives is not None and hd:
                    self.contention += bin(hd & (((tx >> pos) & mask) ^ bits)).count("1")
                self.ones = 0
            else:
                bits = (line >> pos) & mask
                rx |= bits << pos
                phase.value |= bits << phase.got
                reset_at = self._count_ones(bits, take)
                if reset_at is not None:  # a line reset inside the packet aborts it
                    self._phases = []
                    pos += reset_at + 1
                    self._line_reset()
                    continue
                self._track(bits, take)
            phase.got += take
            pos += take
            if phase.got == phase.length:
                self._phases.pop(0)
                self._phase_done(phase)
        return rx

    # -- the wire between packets ---------------------------------------------------------------
    def _count_ones(self, bits: int, n: int) -> Optional[int]:
        """Update the run of high cycles with ``n`` host cycles; the index at which it reaches a
        line reset, or None."""
        full = (1 << n) - 1
        if bits == full:
            if self.ones + n >= LINE_RESET_ONES:
                return LINE_RESET_ONES - self.ones - 1
            self.ones += n
            return None
        low = ((~bits) & (bits + 1)).bit_length() - 1  # ones before the first zero
        if self.ones + low >= LINE_RESET_ONES:
            return LINE_RESET_ONES - self.ones - 1
        self.ones = n - (bits ^ full).bit_length()  # the run at the end
        return None

    def _track(self, bits: int, n: int) -> None:
        if self._since is None:
            return
        take = min(n, 16 - self._since)
        self._seq |= (bits & ((1 << take) - 1)) << self._since
        self._since += take
        if self._since == 16:
            self._since = None
            self._select_sequence(self._seq)

    def _select_sequence(self, seq: int) -> None:
        if seq == SWD_TO_DORMANT and self.dormant_capable and self.state != JTAG:
            self._phases = []
            self.state = DORMANT
            self._watch.reset()
            if self.multidrop:
                self.port.selected, self.port.state = None, "dormant"
        elif seq == JTAG_TO_SWD and self.state == JTAG:
            self.state = LOCKOUT  # SWD now, after the next line reset
        elif seq == SWD_TO_JTAG and self.state != DORMANT and not self.multidrop:
            self._phases = []
            self.state = JTAG

    def _line_reset(self) -> None:
        self.ones = LINE_RESET_ONES
        self._since, self._seq = 0, 0
        if self.state in (JTAG, DORMANT):
            return
        self.state = RESET
        self._first_after_reset = True
        if self.multidrop:
            self.port.selected, self.port.state = None, "reset"

    def _wire_bit(self, bit: int) -> None:
        if self.state == DORMANT:
            self._dormant_bit(bit)
            return
        if bit:
            self.ones += 1
            if self.ones >= LINE_RESET_ONES:
                self._line_reset()
                return
        else:
            self.ones = 0
        self._track(bit, 1)
        if self.state == RESET and not bit:
            self.state = IDLE
        elif self.state == IDLE and bit:
            self._phases = [_Phase("request", 7)]  # the start bit was this one

    def _dormant_bit(self, bit: int) -> None:
        swd = self._watch.bit(bit)
        if swd is not None:
            self.state, self.ones = (LOCKOUT if swd else DORMANT), 0

    # -- packets ------------------------------------------------------------------------------
    def _phase_done(self, phase: _Phase) -> None:
        if phase.name == "request":
            self._on_request(1 | (phase.value << 1))
        elif phase.name == "wdata":
            self._on_write(phase.value)
        elif phase.name == "targetsel":
            self._on_targetsel(phase.value)
        elif phase.name == "end":
            self.state = IDLE

    def _on_request(self, req: int) -> None:
        body = (req >> 1) & 0xF
        if (req >> 5) & 1 != parity(body) or (req >> 6) & 1 or not (req >> 7) & 1:
            self._protocol_error()
            return
        self._request = req
        ap, read, addr = body & 1, (body >> 1) & 1, ((body >> 2) & 3) << 2
        first = self._first_after_reset
        self._first_after_reset = False
        if self.multidrop and not ap and not read and addr == 0xC and first:
            # TARGETSEL: no DP drives the ACK; the host drives the data after a turnaround.
            self._phases = [_Phase("trn", 1), _Phase("noack", 3), _Phase("trn", 1), _Phase("targetsel", 33)]
            return
        dp = self.dp
        if dp is None:  # deselected, or never selected: silent until the next line reset
            self._protocol_error(counted=False)
            return
        ctrl = dp.ctrl_stat
        orun = ctrl & CS_ORUNDETECT
        exempt = (not ap) and ((read and addr in (DP_DPIDR, DP_CTRL_STAT)) or (not read and addr == DP_ABORT))
        if ctrl & _STICKY and not exempt:
            self._answer(ACK_FAULT, bool(read), bool(orun))
            return
        waiting = self._wait and (ap or (read and addr == 0xC))
        if waiting or (self._busy is not None and self._busy(bool(ap), bool(read), addr)):
            self._wait -= 1 if waiting else 0
            if orun:
                dp.ctrl_stat |= CS_STICKYORUN
            self._answer(ACK_WAIT, bool(read), bool(orun))
            return
        self.packets += 1
        if read:
            value = self._read(bool(ap), addr)
            word = (value & 0xFFFFFFFF) | (parity(value & 0xFFFFFFFF) << 32)
            self._phases = [_Phase("trn", 1), _Phase("ack", 3, ACK_OK), _Phase("rdata", 33, word), _Phase("end", 1)]
        else:
            self._phases = [_Phase("trn", 1), _Phase("ack", 3, ACK_OK), _Phase("trn", 1), _Phase("wdata", 33)]

    def _answer(self, ack: int, read: bool, data_phase: bool) -> None:
        phases = [_Phase("trn", 1), _Phase("ack", 3, ack)]
        if data_phase and read:
            phases += [_Phase("rdata", 33, 0), _Phase("end", 1)]
        elif data_phase:
            phases += [_Phase("trn", 1), _Phase("ignored", 33)]
        else:
            phases += [_Phase("end", 1)]
        self._phases = phases

    def _protocol_error(self, counted: bool = True) -> None:
        self.protocol_errors += int(counted)
        self._phases = []
        self.state = LOCKOUT

    def _direct(self, ap: bool, read: bool, addr: int, value: int) -> int:
        port = self.port
        if read:
            return port.read_ap(addr) if ap else port.read_dp(addr)
        if ap:
            port.write_ap(addr, value)
        else:
            port.write_dp(addr, value)
        return 0

    def _read(self, ap: bool, addr: int) -> int:
        from pyocd.core.exceptions import TransferError

        try:
            if not ap:
                return self._access(False, True, addr, 0)
            previous = self.dp.rdbuff
            try:
                # The value goes to RDBUFF (as the access hook returns it: a timed device may
                # show a core still running); the ACK carries the last one.
                self.dp.rdbuff = self._access(True, True, addr, 0) & 0xFFFFFFFF
            except TransferError:
                self.dp.ctrl_stat |= CS_STICKYERR  # the next packet answers FAULT
            return previous
        except TransferError:
            return 0

    def _on_write(self, word: int) -> None:
        from pyocd.core.exceptions import TransferError

        value, par = word & 0xFFFFFFFF, (word >> 32) & 1
        body = (self._request >> 1) & 0xF
        ap, addr = body & 1, ((body >> 2) & 3) << 2
        if par != parity(value):
            self.dp.ctrl_stat |= CS_WDATAERR
            return
        try:
            self._access(bool(ap), False, addr, value)
        except TransferError:
            self.dp.ctrl_stat |= CS_STICKYERR  # the next packet answers FAULT

    def _on_targetsel(self, word: int) -> None:
        value, par = word & 0xFFFFFFFF, (word >> 32) & 1
        chosen = [dp for dp in self.port.dps if par == parity(value) and dp.targetsel == value]
        if len(chosen) == 1:
            self.port.selected, self.port.state = chosen[0], "selected"
        else:
            self.port.selected, self.port.state = None, "deselected"
        self.state = IDLE
