"""The timing model of a simulated USB probe: a virtual clock and what each step costs.

Nothing here reads the wall clock: a run's figures depend only on the sequence of USB transfers
and DAP commands, so the same run twice gives the same numbers.

Three resources work in turn or in parallel, as on hardware:

* **The host** issues USB transfers. Its clock (:attr:`VirtualClock.now`) advances when a
  transfer it waits for completes. ``HOST_TRANSFER_S`` is charged per transfer the host submits
  or completes (libusb and pyOCD's own Python code around it).
* **The USB link** (:class:`Link`): a full-speed HID interrupt endpoint with ``bInterval`` 1 moves
  one report per 1 ms frame and direction (USB 2.0 spec 5.7.4 and 9.6.6); bulk endpoints move a
  transfer when the host controller gets to it: a fixed scheduling latency per transfer plus the
  packets' time on the wire (USB 2.0 spec 5.8.4: 64-byte packets at 12 Mbit/s, 512-byte
  packets at 480 Mbit/s; about 13 bytes of token, handshake and CRC per packet).
* **The probe** executes one DAP command after the other: firmware overhead per command and per
  transfer (preset), SWD bits at the set clock, and the target's answer (WAIT while its flash is
  busy).

The target's own time (:class:`TargetTiming`) is charged when the flash algorithm runs: the
flash operations' datasheet times plus the CPU time of the instructions executed. While that time
has not elapsed the core still reads as running (DHCSR.S_HALT clear), so the host's polling costs
what it costs on hardware.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Dict

from piflash.sim.probes.usb.presets import ProbePreset

__all__ = ["VirtualClock", "Link", "TargetTiming", "TARGET_TIMING", "swd_transfer_bits",
           "swd_wait_bits", "HOST_TRANSFER_S", "FRAME_S"]

#: Full-speed frame, seconds (USB 2.0 spec 8.4.3.1: 1 ms SOF interval).
FRAME_S = 1e-3
#: High-speed microframe, seconds (USB 2.0 spec 8.4.3.1: 125 us).
MICROFRAME_S = 125e-6
#: Host time per USB transfer submitted or completed (libusb, the kernel and pyOCD's Python code
#: around it), seconds. Fitted: see the calibration table in docs/benchmarks.md.
HOST_TRANSFER_S = 60e-6
#: Bulk scheduling latency per transfer and direction, seconds: the time from submitting a bulk
#: transfer to its first packet on the wire and from the last packet to the completion
#: reaching user space. Fitted for full speed; high speed is bounded by the 125 us microframe.
BULK_LATENCY_S = {"v2-bulk-fs": 125e-6, "v2-bulk-hs": 62.5e-6}
#: Where in a full-speed frame the host controller polls a HID interrupt IN endpoint after the
#: interrupt OUT transaction of the same frame, seconds: a response the probe has ready by then
#: goes back in the same frame, so a stop-and-wait round trip takes one frame, not two. Fitted:
#: pyOCD issue #23's nrf51 page-erase rate (see docs/benchmarks.md, Calibration).
HID_IN_OFFSET_S = 0.5e-3
#: Protocol overhead per USB data packet on the wire, bytes (SYNC, PID, CRC16, EOP, the token
#: packet and the handshake; USB 2.0 spec 8.3-8.4, rounded).
PACKET_OVERHEAD_BYTES = 13
#: Wire bit rates, bit/s (USB 2.0 spec 7.1.11).
FULL_SPEED_BPS = 12e6
HIGH_SPEED_BPS = 480e6


def swd_transfer_bits(idle_cycles: int) -> int:
    """SWCLK cycles of one SWD read or write with an OK ack (ADIv5.2 B4.2): 8 request bits,
    1 turnaround, 3 ack bits, 1 turnaround, 32 data bits, 1 parity bit, then ``idle_cycles``
    idle cycles (DAP_TransferConfigure)."""
    return 8 + 1 + 3 + 1 + 32 + 1 + idle_cycles


def swd_wait_bits() -> int:
    """SWCLK cycles of a transfer answered WAIT (request, turnaround, ack, turnaround;
    ADIv5.2 B4.2.3, no data phase unless DAP_SWD_Configure asks for one)."""
    return 8 + 1 + 3 + 1


class VirtualClock:
    """The host's virtual time plus the ledger that explains it.

    Attributes:

    * ``now`` -- host time, seconds since the device was plugged in.
    * ``phase`` -- label the time is booked to (set by a benchmark or test: ``"connect"``,
      ``"erase"``...); ``phases`` maps each label to the seconds of ``now`` spent under it.
    * ``busy`` -- seconds each resource was busy: ``usb_out``, ``usb_in``, ``probe`` (firmware
      overhead), ``swd`` (bits on the wire, WAIT retries included), ``target_cpu``,
      ``flash_erase``, ``flash_program``. They overlap: they explain ``now``, they do not sum to it.
    * ``requests`` -- counts: ``usb_out``/``usb_in`` transfers, ``bytes_out``/``bytes_in``,
      one entry per DAP command name (``DAP_Transfer``...), ``swd_transfers``, ``swd_wait``
      (WAIT acks), ``swd_fault``, ``core_polls_running`` (DHCSR reads that found the core busy),
      ``erase_page``, ``erase_all``, ``program_ops``.
    * ``phase_requests`` -- per phase, the same counts.
    """

    def __init__(self) -> None:
        self.now = 0.0
        self.phase = "other"
        self.phases: Dict[str, float] = {}
        self.busy: Dict[str, float] = {}
        self.requests: Counter = Counter()
        self.phase_requests: Dict[str, Counter] = {}
        self._syncs: list = []

    def add_sync(self, sync) -> None:
        """Call ``sync()`` before the clock is read or its phase changes (a device brings the
        host clock up to date with the responses the host has consumed)."""
        self._syncs.append(sync)

    def sync(self) -> None:
        """Run the registered syncs."""
        for sync in self._syncs:
            sync()

    def advance_to(self, t: float) -> None:
        """Move the host clock to ``t`` (seconds) if that is later; the time goes to the phase."""
        if t > self.now:
            self.phases[self.phase] = self.phases.get(self.phase, 0.0) + (t - self.now)
            self.now = t

    def charge(self, resource: str, seconds: float) -> None:
        """Book ``seconds`` of work to ``resource``."""
        if seconds:
            self.busy[resource] = self.busy.get(resource, 0.0) + seconds

    def count(self, what: str, n: int = 1) -> None:
        """Count ``n`` requests of kind ``what`` (also under the current phase)."""
        self.requests[what] += n
        self.phase_requests.setdefault(self.phase, Counter())[what] += n

    def set_phase(self, phase: str) -> None:
        """Book later time and requests to ``phase``."""
        self.sync()
        self.phase = phase

    def snapshot(self) -> dict:
        """All figures as plain JSON-able data: ``{"now_s", "phases", "busy", "requests",
        "phase_requests"}`` (seconds, counts)."""
        self.sync()
        return {"now_s": self.now, "phases": dict(self.phases), "busy": dict(self.busy),
                "requests": dict(self.requests),
                "phase_requests": {k: dict(v) for k, v in self.phase_requests.items()}}


class Link:
    """When USB packets of one probe reach the probe and the host.

    :param preset: The probe (its link kind and endpoint packet size).

    Interrupt endpoints (``v1-hid``) move one report per frame and direction, so a report waits
    for the next free frame; bulk endpoints (``v2-*``) take a scheduling latency plus wire time.
    """

    def __init__(self, preset: ProbePreset) -> None:
        self.kind = preset.link
        self.max_packet = preset.max_packet
        self._bps = HIGH_SPEED_BPS if preset.high_speed else FULL_SPEED_BPS
        self._next_out = 0.0       # earliest time of the next OUT transaction
        self._next_in = 0.0

    def wire_time(self, nbytes: int) -> float:
        """Seconds ``nbytes`` of data take on the wire (at least one packet, zero-length too)."""
        packets = max(1, math.ceil(nbytes / self.max_packet))
        return (nbytes + packets * PACKET_OVERHEAD_BYTES) * 8 / self._bps

    def _frame_slot(self, t: float, earliest: float) -> float:
        slot = max(math.ceil(t / FRAME_S - 1e-9) * FRAME_S, earliest)
        return slot

    def out(self, t_submit: float, nbytes: int) -> float:
        """An OUT transfer submitted at ``t_submit``: returns when its last byte reached the
        probe (seconds)."""
        if self.kind == "v1-hid":
            slot = self._frame_slot(t_submit, self._next_out)
            self._next_out = slot + FRAME_S
            return slot + self.wire_time(nbytes)
        start = max(t_submit + BULK_LATENCY_S[self.kind], self._next_out)
        end = start + self.wire_time(nbytes)
        self._next_out = end
        return end

    def inn(self, t_ready: float, nbytes: int) -> float:
        """An IN transfer whose data the probe has ready at ``t_ready``: returns when the host
        has it (seconds)."""
        if self.kind == "v1-hid":
            slot = self._frame_slot(t_ready - HID_IN_OFFSET_S, self._next_in - HID_IN_OFFSET_S) \
                + HID_IN_OFFSET_S
            self._next_in = slot + FRAME_S
            return slot + self.wire_time(nbytes)
        start = max(t_ready, self._next_in)
        end = start + self.wire_time(nbytes)
        self._next_in = end
        return end + BULK_LATENCY_S[self.kind]

    def best_rate(self, packet_size: int) -> float:
        """Highest payload rate of this link with DAP packets of ``packet_size`` bytes, bytes/s
        (one packet per frame for HID; back-to-back packets for bulk)."""
        if self.kind == "v1-hid":
            return packet_size / FRAME_S
        return packet_size / self.wire_time(packet_size)


@dataclass(frozen=True)
class TargetTiming:
    """Time the target itself needs, from its datasheet.

    :param core_hz: Core clock while the flash algorithm runs, Hz.
    :param program_s: Time to program one write unit (``program_unit`` bytes), seconds.
    :param program_unit: Bytes per flash write (4 on nRF, 2 on STM32F1).
    :param erase_page_s: Time to erase one page (a pyOCD sector), seconds.
    :param erase_all_s: Time of a mass erase, seconds.
    :param source: Where the numbers come from.
    """

    core_hz: float
    program_s: float
    program_unit: int
    erase_page_s: float
    erase_all_s: float
    source: str
    notes: Dict[str, str] = field(default_factory=dict)

    def op_time(self, op: str, nbytes: int) -> float:
        """Seconds of flash operation ``op`` (``erase_page``, ``erase_all``, ``program``) on
        ``nbytes`` bytes."""
        if op == "erase_page":
            return self.erase_page_s
        if op == "erase_all":
            return self.erase_all_s
        return self.program_s * max(1, nbytes // self.program_unit)


#: Cycles per Thumb half-word executed: the CPU time of a flash algorithm is estimated from the
#: code bytes unicorn executes (a basic-block hook), one cycle per 16 bits. Cortex-M0/M3/M4
#: execute most 16-bit instructions in 1 cycle and 32-bit ones in 1-2 (loads/stores 2, taken
#: branches 2-3; Cortex-M3 TRM DDI 0337 table 18-1, Cortex-M0 TRM DDI 0432 table 3-1), so this is
#: within about 30%; CPU time is a few percent of any flash operation it drives.
CYCLES_PER_HALFWORD = 1.0

TARGET_TIMING: Dict[str, TargetTiming] = {
    # nRF51822 Product Specification v3.4, "Flash specifications" table (NVMC): t_WRITE (time
    # to write one word) 46.3 us max, t_ERASEPAGE 22.3 ms max, t_ERASEALL 22.3 ms max. Core at
    # 16 MHz (HFCLK, same document "Clock management").
    "nrf51": TargetTiming(core_hz=16e6, program_s=46.3e-6, program_unit=4, erase_page_s=22.3e-3,
                          erase_all_s=22.3e-3,
                          source="nRF51822 PS v3.4, Flash specifications (maximum values)"),
    # nRF52840 Product Specification v1.7, section 4.3.10 "NVMC electrical specification":
    # t_WRITE 41 us, t_ERASEPAGE 85 ms, t_ERASEALL 169 ms (maximum values). Core at 64 MHz.
    "nrf52840": TargetTiming(core_hz=64e6, program_s=41e-6, program_unit=4, erase_page_s=85e-3,
                             erase_all_s=169e-3,
                             source="nRF52840 PS v1.7, 4.3.10 NVMC electrical specification (max)"),
    # STM32F103xC/D/E datasheet DS5792, section 5.3.9 "Memory characteristics", table "Flash
    # memory characteristics": t_prog (16-bit programming) 52.5 us typical (40 min, 70 max),
    # t_ERASE (page, 2 KiB) 20-40 ms, t_ME (mass erase) 20-40 ms: the model takes 40 ms, the
    # maximum, as for the nRF parts (no typical given). The core runs at 8 MHz on HSI after
    # reset (RM0008 7.2), and pyOCD's algorithm does not change the clock.
    "stm32f103rc": TargetTiming(core_hz=8e6, program_s=52.5e-6, program_unit=2, erase_page_s=40e-3,
                                erase_all_s=40e-3,
                                source="DS5792 5.3.9 Flash memory characteristics (t_prog typ, erase max)"),
}
