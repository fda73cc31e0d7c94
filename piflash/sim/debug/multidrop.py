"""Multi-drop SWD (Arm Debug Interface v5.2 section B4.3, SW-DP version 2): several DPs on one wire.

A multi-drop SW-DP starts in the dormant state and ignores the wire until it sees the selection
alert and the SWD activation code (ADIv6 B5.3, "Dormant state"); it then waits for a line reset
(at least 50 cycles with SWDIO high). After a line reset every DP waits for the first packet,
which must be a write of DP TARGETSEL (A[3:2] = 0b11): the DP whose TARGETID and DLPIDR
instance match takes the wire, the others stay silent until the next line reset. A TARGETSEL
write is never acknowledged (no DP drives the ACK phase), so a probe sends it as a raw
DAP_SWD_Sequence, as pyOCD's ``pyocd/target/family/target_rp2.py`` (``select_dp``) does.

:class:`MultidropWire` decodes the bits the probe sends (DAP_SWJ_Sequence and DAP_SWD_Sequence)
and routes the probe's register transfers to the selected DP; with none selected a transfer gets
no ACK (pyOCD ``TransferError``), as on the wire.
"""

from __future__ import annotations

from typing import Callable, Dict, List, Optional, Sequence, Tuple

from pyocd.core.exceptions import TransferError

from piflash.sim.debug.dap import DP_CTRL_STAT, AccessPortModel, SwDp

__all__ = ["DormantWatch", "MultidropDp", "MultidropWire", "SELECTION_ALERT", "SWD_ACTIVATION_CODE"]

#: The 128-bit selection alert, sent LSB first (ADIv6 B5.3.1, also pyOCD probe/swj.py).
SELECTION_ALERT = 0x19BC0EA2E3DDAFE986852D956209F392
#: SWD activation code, 8 bits LSB first after 4 low cycles (ADIv6 B5.3.4 table B5-1).
SWD_ACTIVATION_CODE = 0x1A
#: SWD-to-dormant select sequence, 16 bits LSB first after a line reset (ADIv6 B5.3.3).
SWD_TO_DORMANT = 0xE3BC
#: Cycles with SWDIO high that make a line reset (ADIv5.2 B4.3.3).
LINE_RESET_ONES = 50
#: Request byte of a DP TARGETSEL write as sent LSB first: start 1, APnDP 0, RnW 0, A[2:3] 11,
#: parity 0, stop 0, park 1 (ADIv5.2 B4.2.1).
TARGETSEL_REQUEST = 0x99

DORMANT, LOCKOUT, RESET, SELECTED, DESELECTED = "dormant", "lockout", "reset", "selected", "deselected"


class DormantWatch:
    """What a dormant SW-DP watches SWDIO for: the 128-bit selection alert, then 4 cycles and the
    8-bit activation code (ADIv5.2 B5.3.4, the dormant state; :data:`SELECTION_ALERT`,
    :data:`SWD_ACTIVATION_CODE`). Shared by the transaction-level wire here and the bit-level
    line (:mod:`piflash.sim.debug.swdline`)."""

    def __init__(self) -> None:
        self.alert = 0  # the last 128 bits
        self.code: Optional[List[int]] = None  # bits after the alert

    def reset(self) -> None:
        """Start watching afresh (the DP has just gone dormant)."""
        self.alert, self.code = 0, None

    def bit(self, bit: int) -> Optional[bool]:
        """Take one cycle's SWDIO (0 or 1): None while still watching; after the activation code,
        True for SWD's (the DP leaves the dormant state, in lockout until a line reset), False for
        any other (it stays dormant). Either way the watch starts again."""
        if self.code is not None:
            self.code.append(bit)
            if len(self.code) < 12:
                return None
            value = sum(b << i for i, b in enumerate(self.code[4:]))
            self.reset()
            return value == SWD_ACTIVATION_CODE
        self.alert = (self.alert >> 1) | (bit << 127)
        if self.alert == SELECTION_ALERT:
            self.code = []
        return None


class MultidropDp(SwDp):
    """A DPv2 SW-DP on a multi-drop bus: DPIDR plus the banked TARGETID and DLPIDR.

    :param dpidr: DPIDR value (e.g. RP2040 0x0BC12477: DPv2, MINDP, Arm designer).
    :param targetid: DP TARGETID (DPBANKSEL 2): TREVISION[31:28], TPARTNO[27:12],
        TDESIGNER[11:1], bit 0 = 1.
    :param instance: TINSTANCE (DLPIDR[31:28]; the top nibble of the TARGETSEL value).
    :param aps: APSEL -> access port.
    :param on_power: Called with the new CDBGPWRUPREQ state whenever a CTRL/STAT write changes
        it (the RP2040 rescue DP resets the chip with it), or None.
    """

    def __init__(
        self,
        dpidr: int,
        targetid: int,
        instance: int,
        aps: Dict[int, AccessPortModel],
        on_power: Optional[Callable[[bool], None]] = None,
    ) -> None:
        super().__init__(dpidr, aps)
        self.targetid = targetid
        self.instance = instance
        self._on_power = on_power

    @property
    def targetsel(self) -> int:
        """The TARGETSEL value that selects this DP (ADIv5.2 B2.2.11)."""
        return (self.instance << 28) | (self.targetid & 0x0FFFFFFF)

    def read_dp(self, addr: int) -> int:
        bank = self.select & 0xF
        if addr & 0xC == DP_CTRL_STAT and bank:
            # DLCR (bank 1): turnaround 1 cycle; TARGETID (2); DLPIDR (3): TINSTANCE, PROTVSN 1
            # (ADIv5.2 B2.2.4-B2.2.6); EVENTSTAT (4): no event.
            return {1: 0x00000040, 2: self.targetid, 3: (self.instance << 28) | 1}.get(bank, 0)
        return super().read_dp(addr)

    def write_dp(self, addr: int, value: int) -> None:
        before = self.ctrl_stat & (1 << 28)
        super().write_dp(addr, value)
        after = self.ctrl_stat & (1 << 28)
        if before != after and self._on_power is not None:
            self._on_power(bool(after))


class MultidropWire:
    """The SWD wire of a multi-drop target: the DPs on it and which one the probe talks to.

    Offers the :class:`~piflash.sim.debug.dap.SwDp` interface the probes use (DP/AP accesses,
    ``aps`` and ``select`` of the selected DP) plus :meth:`swj_sequence` and
    :meth:`swd_sequence`, fed with the bits the probe drives.

    :param dps: The DPs on the wire.
    :param sole_answers: With one DP on the wire: after a line reset it answers the first
        packet that is not a TARGETSEL write (it is selected), as an RP2350's does for pyOCD,
        whose ``rp2350`` target reads DPIDR right after the wake-up and line reset without
        TARGETSEL (``pyocd/target/family/target_rp2.py``, RP2350 datasheet 3.5.1).

    DP/AP accesses raise pyOCD's ``TransferError`` (no ACK) unless one DP is selected.
    """

    def __init__(self, dps: Sequence[MultidropDp], sole_answers: bool = False) -> None:
        self.dps: List[MultidropDp] = list(dps)
        self.sole_answers = sole_answers and len(self.dps) == 1
        self.state = DORMANT  # a multi-drop SW-DP cold-resets into the dormant state
        self.selected: Optional[MultidropDp] = None
        self._ones = 0  # consecutive cycles with SWDIO high
        self._watch = DormantWatch()  # dormant: the selection alert and the activation code
        self._since_reset: Optional[int] = None  # bits after a line reset (SWD-to-dormant)
        self._tail = 0

    # -- the SwDp interface ------------------------------------------------------------------
    @property
    def aps(self) -> Dict[int, AccessPortModel]:
        """The selected DP's access ports ({} when none is selected)."""
        return self.selected.aps if self.selected is not None else {}

    @property
    def select(self) -> int:
        """The selected DP's SELECT register (0 when none is selected)."""
        return self.selected.select if self.selected is not None else 0

    def current_ap(self) -> Optional[AccessPortModel]:
        """The selected DP's current AP (None when no DP is selected)."""
        return self.selected.current_ap() if self.selected is not None else None

    def line_reset(self) -> None:
        """Probe connect (DAP_Connect): drives no sequence, so nothing on the wire changes."""

    def _dp(self) -> MultidropDp:
        if self.state == RESET and self.sole_answers:
            self.state, self.selected = SELECTED, self.dps[0]
        if self.state != SELECTED or self.selected is None:
            raise TransferError("no ACK: no DP selected on the multi-drop SWD bus (%s)" % self.state)
        return self.selected

    def read_dp(self, addr: int) -> int:
        return self._dp().read_dp(addr)

    def write_dp(self, addr: int, value: int) -> None:
        self._dp().write_dp(addr, value)

    def read_ap(self, addr: int) -> int:
        return self._dp().read_ap(addr)

    def write_ap(self, addr: int, value: int) -> None:
        self._dp().write_ap(addr, value)

    def read_ap_multiple(self, addr: int, count: int) -> List[int]:
        return self._dp().read_ap_multiple(addr, count)

    def write_ap_multiple(self, addr: int, values: Sequence[int]) -> None:
        self._dp().write_ap_multiple(addr, values)

    # -- wire sequences ----------------------------------------------------------------------
    def swj_sequence(self, length: int, bits: int) -> None:
        """``length`` cycles with SWDIO driven to ``bits`` (LSB first): DAP_SWJ_Sequence."""
        for i in range(length):
            self._bit((bits >> i) & 1)

    def swd_sequence(self, sequences: Sequence[Tuple[int, ...]]) -> List[bytes]:
        """DAP_SWD_Sequence: each item is ``(cycles, bits)`` (SWDIO driven, LSB first) or
        ``(cycles,)`` (SWDIO read). Returns the bytes read for each read item (nobody drives
        the line in the cases modelled, so they read 0). A TARGETSEL write packet sent right
        after a line reset selects the DP whose TARGETSEL matches (parity checked)."""
        timeline: List[Optional[int]] = []
        out: List[bytes] = []
        for seq in sequences:
            cycles = seq[0]
            if len(seq) > 1:
                timeline += [(seq[1] >> i) & 1 for i in range(cycles)]
            else:
                timeline += [None] * cycles
                out.append(bytes((cycles + 7) // 8))
        if self.state == RESET:
            self._packet(timeline)
        for bit in timeline:
            self._bit(bit or 0, in_packet=True)
        return out

    def _packet(self, timeline: List[Optional[int]]) -> None:
        # Idle cycles (low) may precede the start bit.
        pos = 0
        while pos < len(timeline) and timeline[pos] == 0:
            pos += 1
        request = timeline[pos : pos + 8]
        data = timeline[pos + 8 + 5 : pos + 8 + 5 + 33]
        if len(request) < 8 or len(data) < 33 or None in request or None in data:
            return
        if sum(b << i for i, b in enumerate(request)) != TARGETSEL_REQUEST:
            return
        value = sum(b << i for i, b in enumerate(data[:32]))
        parity_ok = bin(value).count("1") & 1 == data[32]
        chosen = [dp for dp in self.dps if parity_ok and dp.targetsel == value]
        self.selected = chosen[0] if len(chosen) == 1 else None
        self.state = SELECTED if self.selected is not None else DESELECTED

    def _bit(self, bit: int, in_packet: bool = False) -> None:
        if self.state == DORMANT:
            self._dormant_bit(bit)
            return
        self._ones = self._ones + 1 if bit else 0
        if self._ones >= LINE_RESET_ONES:
            if self.state != RESET:
                self.state, self.selected = RESET, None
            self._since_reset, self._tail = 0, 0
            return
        if self._since_reset is not None and not in_packet:
            self._tail |= bit << self._since_reset
            self._since_reset += 1
            if self._since_reset == 16:
                if self._tail == SWD_TO_DORMANT:
                    self.state, self.selected = DORMANT, None
                    self._watch.reset()
                self._since_reset = None
        elif in_packet:
            self._since_reset = None

    def _dormant_bit(self, bit: int) -> None:
        swd = self._watch.bit(bit)
        if swd is not None:
            # SWD selected: the DP leaves the dormant state in lockout, until a line reset.
            self.state, self._ones = (LOCKOUT if swd else DORMANT), 0
