"""The timing model of a simulated USB probe: a virtual clock and what each step costs.

Nothing here reads the wall clock: a run's figures depend only on the sequence of USB transfers
and DAP commands, so the same run twice gives the same numbers.

Three resources work in turn or in parallel, as on hardware:

* **The host** issues USB transfers. Its clock (:attr:`VirtualClock.now`) advances when a
  transfer it waits for completes. A host preset (:data:`HOST_PRESETS`) gives the CPU time
  charged per DAP packet the host sends or receives (pyusb and pyOCD's and piflash's Python
  code around it; one USB transfer each, unless several packets share one OUT transfer, when
  each still costs its own), per phase of the flash (:attr:`VirtualClock.phase`: the bulk
  phases erase/program/verify may cost less per packet than connect and reset), measured by
  ``benchmarks/host_cost.py`` on x86 and scaled for the Pis by a factor band (low / mid /
  high, :meth:`HostPreset.band`). One
  interpreter lock serialises that work: a completion is handled after the host has finished
  what it was doing, so host times add up (they are never overlapped with each other).
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
from typing import Dict, List, Optional, Tuple

from piflash.sim.probes.usb.presets import ProbePreset

__all__ = [
    "VirtualClock",
    "Link",
    "TargetTiming",
    "TARGET_TIMING",
    "swd_transfer_bits",
    "swd_wait_bits",
    "HOST_TRANSFER_S",
    "FRAME_S",
    "HostPreset",
    "HOST_PRESETS",
    "DEFAULT_HOST",
    "get_host",
    "HOST_FACTORS",
    "phase_cost",
]

#: Full-speed frame, seconds (USB 2.0 spec 8.4.3.1: 1 ms SOF interval).
FRAME_S = 1e-3
#: High-speed microframe, seconds (USB 2.0 spec 8.4.3.1: 125 us).
MICROFRAME_S = 125e-6
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
    * ``timeline`` -- None, or (once a benchmark sets it to a list) every interval a resource
      several devices could share was held: ``(resource, start, seconds)`` tuples in the order
      charged, ``resource`` ``"bus"`` (a transfer's packets on the wire, :class:`Link`) or
      ``"host"`` (the host's CPU per transfer). ``piflash.sim.probes.usb.hub`` replays it.
    """

    def __init__(self) -> None:
        self.now = 0.0
        self.timeline: Optional[List[Tuple[str, float, float]]] = None
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

    def hold(self, resource: str, start: float, seconds: float) -> None:
        """Note that ``resource`` (``"bus"``, ``"host"``) was held from ``start`` for ``seconds``
        (virtual seconds) in :attr:`timeline`, when one is being recorded."""
        if self.timeline is not None and seconds > 0:
            self.timeline.append((resource, start, seconds))

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
        return {
            "now_s": self.now,
            "phases": dict(self.phases),
            "busy": dict(self.busy),
            "requests": dict(self.requests),
            "phase_requests": {k: dict(v) for k, v in self.phase_requests.items()},
        }


class Link:
    """When USB packets of one probe reach the probe and the host.

    :param preset: The probe (its link kind and endpoint packet size).
    :param clock: The device's clock; each transfer's wire time is noted in its
        :attr:`VirtualClock.timeline` (resource ``"bus"``) when one is recorded.

    Interrupt endpoints (``v1-hid``) move one report per frame and direction, so a report waits
    for the next free frame; bulk endpoints (``v2-*``) take a scheduling latency plus wire time.
    """

    def __init__(self, preset: ProbePreset, clock: Optional[VirtualClock] = None) -> None:
        self.clock = clock
        self.kind = preset.link
        self.max_packet = preset.max_packet
        self._bps = HIGH_SPEED_BPS if preset.high_speed else FULL_SPEED_BPS
        self._next_out = 0.0  # earliest time of the next OUT transaction
        self._next_in = 0.0

    def wire_time(self, nbytes: int) -> float:
        """Seconds ``nbytes`` of data take on the wire (at least one packet, zero-length too)."""
        packets = max(1, math.ceil(nbytes / self.max_packet))
        return (nbytes + packets * PACKET_OVERHEAD_BYTES) * 8 / self._bps

    def occupy(self, t: float, nbytes: int) -> float:
        """``nbytes`` of data on the wire from ``t`` (seconds), back to back: returns when the
        last packet is done, noted as bus time on the clock's timeline."""
        return self._on_wire(t, self.wire_time(nbytes))

    def _on_wire(self, start: float, seconds: float) -> float:
        if self.clock is not None:
            self.clock.hold("bus", start, seconds)
        return start + seconds

    def _frame_slot(self, t: float, earliest: float) -> float:
        slot = max(math.ceil(t / FRAME_S - 1e-9) * FRAME_S, earliest)
        return slot

    def out(self, t_submit: float, nbytes: int) -> float:
        """An OUT transfer submitted at ``t_submit``: returns when its last byte reached the
        probe (seconds)."""
        if self.kind == "v1-hid":
            slot = self._frame_slot(t_submit, self._next_out)
            self._next_out = slot + FRAME_S
            return self._on_wire(slot, self.wire_time(nbytes))
        start = max(t_submit + BULK_LATENCY_S[self.kind], self._next_out)
        end = self._on_wire(start, self.wire_time(nbytes))
        self._next_out = end
        return end

    def out_transfer(self, t_submit: float, sizes: List[int]) -> List[float]:
        """One bulk OUT transfer submitted at ``t_submit`` carrying DAP packets of ``sizes``
        bytes back to back (one scheduling latency; each packet when the one before is done):
        returns when each packet's last byte reached the probe (seconds)."""
        if self.kind == "v1-hid" or len(sizes) == 1:
            return [self.out(t_submit, n) for n in sizes]
        t = max(t_submit + BULK_LATENCY_S[self.kind], self._next_out)
        arrivals = []
        for n in sizes:
            t = self._on_wire(t, self.wire_time(n))
            arrivals.append(t)
        self._next_out = t
        return arrivals

    def inn(self, t_ready: float, nbytes: int) -> float:
        """An IN transfer whose data the probe has ready at ``t_ready``: returns when the host
        has it (seconds)."""
        if self.kind == "v1-hid":
            slot = self._frame_slot(t_ready - HID_IN_OFFSET_S, self._next_in - HID_IN_OFFSET_S) + HID_IN_OFFSET_S
            self._next_in = slot + FRAME_S
            return self._on_wire(slot, self.wire_time(nbytes))
        start = max(t_ready, self._next_in)
        end = self._on_wire(start, self.wire_time(nbytes))
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

    Predictions use the typical values (``program_s``, ``erase_page_s``, ``erase_all_s``); the
    maxima (``*_max_s``) are for timeouts only (a bound a tool must wait before it gives up),
    never for a predicted time. Where the datasheet table gives no typical value, ``notes``
    says which value stands in and why.

    :param core_hz: Core clock while the flash algorithm runs, Hz.
    :param program_s: Typical time to program one write unit (``program_unit`` bytes), seconds.
    :param program_unit: Bytes per flash write (4 on nRF, 2 on STM32F1).
    :param erase_page_s: Typical time to erase one page (a pyOCD sector), seconds.
    :param erase_all_s: Typical time of a mass erase, seconds.
    :param program_max_s: / erase_page_max_s: / erase_all_max_s: The datasheet maxima, seconds.
    :param source: The datasheet table the numbers come from.
    :param notes: Per parameter name, where a figure that is not the table's typical comes from.
    :param block_erase_s: Serial flash block erases: op name -> (typical, maximum) seconds.
    :param reset_s: Seconds the chip itself needs for the reset a debugger asks for after a
        flash (a system reset, AIRCR.SYSRESETREQ) until its core runs again: a floor's figure
        (``benchmarks/real_probe.py``), never a tool's fixed sleep. 0.0 where no datasheet
        states one (``reset_source`` says so): a floor may only be lower for it.
    :param reset_source: Where ``reset_s`` comes from (document and table), or why it is 0.
    """

    core_hz: float
    program_s: float
    program_unit: int
    erase_page_s: float
    erase_all_s: float
    program_max_s: float
    erase_page_max_s: float
    erase_all_max_s: float
    source: str
    notes: Dict[str, str] = field(default_factory=dict)
    #: Serial flash block erases: op name (``erase_block32``, ``erase_block64``) -> (typical,
    #: maximum) seconds.
    block_erase_s: Dict[str, Tuple[float, float]] = field(default_factory=dict)
    reset_s: float = 0.0
    reset_source: str = ""

    def op_time(self, op: str, nbytes: int) -> float:
        """Typical seconds of flash operation ``op`` (``erase_page``, ``erase_all``,
        ``program``, a block erase) on ``nbytes`` bytes."""
        if op in self.block_erase_s:
            return self.block_erase_s[op][0]
        if op == "spi_cycles":  # core clock cycles a boot ROM spends shifting SPI bytes
            return nbytes / self.core_hz
        if op == "erase_page":
            return self.erase_page_s
        if op == "erase_all":
            return self.erase_all_s
        return self.program_s * max(1, nbytes // self.program_unit)

    def op_timeout(self, op: str, nbytes: int) -> float:
        """The datasheet's maximum seconds of ``op`` on ``nbytes`` bytes: a timeout's bound."""
        if op in self.block_erase_s:
            return self.block_erase_s[op][1]
        if op == "spi_cycles":  # core clock cycles a boot ROM spends shifting SPI bytes
            return nbytes / self.core_hz
        if op == "erase_page":
            return self.erase_page_max_s
        if op == "erase_all":
            return self.erase_all_max_s
        return self.program_max_s * max(1, nbytes // self.program_unit)


#: Cycles per Thumb half-word executed: the CPU time of a flash algorithm is estimated from the
#: code bytes unicorn executes (a basic-block hook), one cycle per 16 bits. Cortex-M0/M3/M4
#: execute most 16-bit instructions in 1 cycle and 32-bit ones in 1-2 (loads/stores 2, taken
#: branches 2-3; Cortex-M3 TRM DDI 0337 table 18-1, Cortex-M0 TRM DDI 0432 table 3-1), so this is
#: within about 30%; CPU time is a few percent of any flash operation it drives.
CYCLES_PER_HALFWORD = 1.0

TARGET_TIMING: Dict[str, TargetTiming] = {
    # nRF51822 Product Specification v3.4, "Flash specifications" table (NVMC): t_WRITE (time
    # to write one word) 46.3 us, t_ERASEPAGE 22.3 ms, t_ERASEALL 22.3 ms, each the table's
    # maximum. Core at 16 MHz (HFCLK, same document "Clock management"). t_ERASEALL is
    # unconfirmed from public sources (piflash/targets/families/nrf51.py says what was searched).
    "nrf51": TargetTiming(
        core_hz=16e6,
        program_s=46.3e-6,
        program_unit=4,
        erase_page_s=22.3e-3,
        erase_all_s=22.3e-3,
        program_max_s=46.3e-6,
        erase_page_max_s=22.3e-3,
        erase_all_max_s=22.3e-3,
        source="nRF51822 PS v3.4, Flash specifications",
        notes={
            "program_s": "the table's maximum: no typical value is used for the nRF51",
            "erase_page_s": "the table's maximum: with it the model reproduces pyOCD issue "
            "#23's published nRF51 page-erase rate (0.95, docs/benchmarks.md "
            "Calibration), which leaves no room for a shorter typical erase",
            "erase_all_s": "the table's maximum",
        },
        reset_s=0.0,
        reset_source="no duration of a system reset (AIRCR.SYSRESETREQ) was found in the nRF51822 PS v3.4 or the nRF51 Series Reference Manual v3.0; its power-on figures (t_POR) are for a supply ramp, not a debugger's reset: 0.0",
    ),
    # nRF52840 Product Specification v1.7, section 4.3.10 "NVMC electrical specification":
    # t_WRITE 41 us, t_ERASEPAGE 85 ms, t_ERASEALL 169 ms, each a maximum (the table gives no
    # typical value). Core at 64 MHz.
    "nrf52840": TargetTiming(
        core_hz=64e6,
        program_s=41e-6,
        program_unit=4,
        erase_page_s=20e-3,
        erase_all_s=169e-3,
        program_max_s=41e-6,
        erase_page_max_s=85e-3,
        erase_all_max_s=169e-3,
        source="nRF52840 PS v1.7, 4.3.10 NVMC electrical specification (maxima)",
        notes={
            "program_s": "the table's maximum (no typical given): a pessimistic prediction",
            "erase_page_s": "no typical in the table; 20 ms is what a real nRF52 took through "
            "pyOCD: erase_sector calls 20-21 ms apart, probe round trips "
            "included (pyOCD trace log, probe-rs/probe-rs issue #2299, "
            "2024-11-25), an upper bound of the erase itself",
            "erase_all_s": "the table's maximum (no typical given, no measurement found)",
        },
        reset_s=0.0,
        reset_source="no duration of a system reset (AIRCR.SYSRESETREQ) was found in the nRF52840 PS v1.7; its power-on figures (t_POR) are for a supply ramp, not a debugger's reset: 0.0",
    ),
    # STM32F103xC/D/E datasheet DS5792, section 5.3.9 "Memory characteristics", table "Flash
    # memory characteristics": t_prog (16-bit programming) 40 min, 52.5 typical, 70 max us;
    # t_ERASE (page, 2 KiB) 20 min, 40 max ms; t_ME (mass erase) 20 min, 40 max ms (no typical
    # for either erase). The core runs at 8 MHz on HSI after reset (RM0008 7.2), and pyOCD's
    # algorithm does not change the clock.
    "stm32f103rc": TargetTiming(
        core_hz=8e6,
        program_s=52.5e-6,
        program_unit=2,
        erase_page_s=30e-3,
        erase_all_s=30e-3,
        program_max_s=70e-6,
        erase_page_max_s=40e-3,
        erase_all_max_s=40e-3,
        source="DS5792 5.3.9 Flash memory characteristics",
        notes={
            "erase_page_s": "no typical in the table: the middle of its 20-40 ms",
            "erase_all_s": "no typical in the table: the middle of its 20-40 ms",
        },
        reset_s=20e-6,
        reset_source="RM0008 7.1.2 System reset: a pulse generator guarantees a minimum reset pulse "
        "of 20 us for each internal reset source (SYSRESETREQ among them); DS5792's t_RSTTEMPO "
        "(reset temporization, 5.3.3) is for a power-on/power-down reset, not this one",
    ),
    # The Pico's Winbond W25Q16JV, datasheet section 9.6 "AC Electrical Characteristics":
    # page program (256 bytes) t_PP 0.4 ms typical, 3 ms maximum; 4 KiB sector erase t_SE 45 /
    # 400 ms; 32 KiB block t_BE1 120 / 1600 ms; 64 KiB block t_BE2 150 / 2000 ms; chip erase
    # t_CE 5 / 25 s. The boot ROM's flash functions shift every instruction byte over the SSI
    # at clk_sys / BAUDR (flash_exit_xip sets BAUDR = 6, pico-bootrom-rp2040
    # bootrom/program_flash_generic.c; the simulated chip reports the cycles, "spi_cycles");
    # after a debugger's reset-and-halt clk_sys is the ring oscillator, nominally 6.5 MHz
    # (RP2040 datasheet 2.17), which pyOCD's algorithm does not change: at BAUDR 6, 7.4 us per
    # byte, 1.9 ms for a page program's 260 bytes.
    "rp2040": TargetTiming(
        core_hz=6.5e6,
        program_s=0.4e-3,
        program_unit=256,
        erase_page_s=45e-3,
        erase_all_s=5.0,
        program_max_s=3e-3,
        erase_page_max_s=400e-3,
        erase_all_max_s=25.0,
        source="Winbond W25Q16JV datasheet 9.6 AC Electrical Characteristics (typical)",
        notes={
            "program_s": "t_PP per 256-byte page; the SPI transfer is charged apart (spi_cycles)",
            "core_hz": "the ring oscillator's nominal frequency; real parts range widely",
        },
        block_erase_s={"erase_block32": (120e-3, 1.6), "erase_block64": (150e-3, 2.0)},
        reset_s=0.0,
        reset_source="the RP2040 datasheet (2.13 power-on state machine, 2.14 subsystem resets) "
        "gives no duration for a debugger's reset: 0.0",
    ),
    # RP2350 (Pico 2): clk_sys from the ring oscillator at its nominal 11 MHz after a reset, which
    # the boot ROM does not change on the flash boot path of an A2 part (RP2350 datasheet 8.3.1;
    # pico-bootrom-rp2350 varm_nsboot.c), so pyOCD's algorithm runs at it; the ROM's flash
    # functions drive the QMI at BOOTROM_SPI_CLKDIV_DEFAULT 12 (native_generic_flash.h), charged
    # as spi_cycles. The Pico 2's W25Q32RV: its AC table was not found; the W25Q16JV's typical
    # and maximum times (the same JV/RV family's figures) stand in.
    "rp2350": TargetTiming(
        core_hz=11e6,
        program_s=0.4e-3,
        program_unit=256,
        erase_page_s=45e-3,
        erase_all_s=10.0,
        program_max_s=3e-3,
        erase_page_max_s=400e-3,
        erase_all_max_s=50.0,
        source="Winbond W25Q16JV datasheet 9.6 AC Electrical Characteristics (typical), standing in "
        "for the Pico 2's W25Q32RV",
        notes={
            "program_s": "t_PP per 256-byte page; the SPI transfer is charged apart (spi_cycles)",
            "core_hz": "the ring oscillator's nominal 11 MHz at boot; real parts range widely",
            "erase_all_s": "W25Q32JV t_CE 10 s typical, 50 s maximum (secondary sources)",
        },
        block_erase_s={"erase_block32": (120e-3, 1.6), "erase_block64": (150e-3, 2.0)},
        reset_s=0.0,
        reset_source="the RP2350 datasheet gives no duration for a debugger's reset: 0.0",
    ),
}


#: The ends of a host preset's factor band: ``real_probe.py --host-factor`` (default ``mid``).
HOST_FACTORS = ("low", "mid", "high")

#: Figures per phase fall back to this key (:func:`phase_cost`).
ANY_PHASE = "*"


def phase_cost(figure, phase) -> float:
    """The CPU seconds per DAP packet of ``figure`` in ``phase``.

    :param figure: A float (the same in every phase), or a dict phase name -> seconds with an
        ``"*"`` entry for the phases it does not name (:attr:`HostPreset.transfer_s`).
    :param phase: The clock's phase label (:attr:`VirtualClock.phase`; a ``str`` or a ``str``
        enum such as ``piflash.progress.Phase``).
    :raises KeyError: ``figure`` is a dict without the phase and without ``"*"``.
    """
    if isinstance(figure, dict):
        return figure[phase] if phase in figure else figure[ANY_PHASE]
    return figure


@dataclass(frozen=True)
class HostPreset:
    """The machine pyOCD and piflash run on: its CPU time per USB transfer and its fixed costs.

    :param name: Preset key (``x86``, ``zero2w``, ``pi4``, ``pi5``).
    :param cpu: The CPU, as its datasheet names it.
    :param factor: Python CPU time on this host relative to the x86 machine of the
        measurement (1.0 for ``x86``; a prediction for the others, see ``factor_source``): the
        factor at the band's end ``host_factor``.
    :param factor_range: (low, high) of ``factor`` the sources allow.
    :param factor_source: Where ``factor`` comes from.
    :param transfer_s: CPU seconds per DAP packet the host sends or receives (each OUT and each
        IN), by tool (``"piflash"``: piflash's flash; ``"pyocd"``: pyOCD's ``FileProgrammer``,
        what ``pyocd flash`` and pyOCD's own test programs run), then by phase of the flash
        (:attr:`VirtualClock.phase`: piflash's connect, erase, program, verify, reset; pyOCD's
        runs connect, program, reset, disconnect), with ``"*"`` for any other phase: everything
        the host computes between opening the session and closing it in that phase, divided
        by its packets. :func:`phase_cost` reads it; a simulated device charges the figure of
        the clock's current phase (``SimUsbDevice.host_transfer_s``).
    :param parse_s_per_byte: CPU seconds per byte of firmware file to load it, by tool and
        format (``{"piflash": {"hex": s, "bin": s}, "pyocd": {...}}``).
    :param cached_load_s_per_byte: CPU seconds per byte of firmware file for piflash to load a
        file it loaded before (read back from its parsed-image cache, piflash/firmware/cache.py),
        by format.
    :param startup_s: CPU seconds of starting a ``pyocd flash`` process (interpreter and
        pyOCD's imports; ``pyocd flash --help``), paid per board by a shell loop.
    :param sleep_s: Wall seconds pyOCD sleeps (``time.sleep``) during one flash, by tool: not
        CPU, so not scaled by ``factor``.
    :param band: The factor band: ``{"low": (factor, source), "mid": ..., "high": ...}``
        (:data:`HOST_FACTORS`), each end with where it comes from.
    :param host_factor: Which end of ``band`` ``factor`` is (``"mid"`` unless
        :func:`get_host` was asked for another).
    """

    name: str
    cpu: str
    factor: float
    factor_range: tuple
    factor_source: str
    transfer_s: Dict[str, Dict[str, float]]
    parse_s_per_byte: Dict[str, Dict[str, float]]
    cached_load_s_per_byte: Dict[str, float]
    startup_s: float
    sleep_s: Dict[str, float]
    band: Dict[str, Tuple[float, str]] = field(default_factory=dict)
    host_factor: str = "mid"

    def parse_s(self, tool: str, fmt: str, nbytes: int, cached: bool = False) -> float:
        """CPU seconds for ``tool`` (``piflash``/``pyocd``) to load a ``fmt`` (``hex``/``bin``)
        file of ``nbytes`` bytes; ``cached``: piflash loaded this file before (pyOCD keeps no
        cache: the same as not cached)."""
        if cached and tool == "piflash":
            return self.cached_load_s_per_byte[fmt] * nbytes
        return self.parse_s_per_byte[tool][fmt] * nbytes

    def transfer_at(self, tool: str, phase: str = ANY_PHASE) -> float:
        """CPU seconds per DAP packet of ``tool`` (``piflash``/``pyocd``) in ``phase`` (the
        ``"*"`` figure for a phase :attr:`transfer_s` does not name).

        :raises KeyError: Unknown tool.
        """
        return phase_cost(self.transfer_s[tool], phase)

    def describe(self) -> str:
        """One line: the preset, its factor and its band (``zero2w (Cortex-A53 ...): factor 8.4
        (mid; band low 6.2 / mid 8.4 / high 11.3)``)."""
        band = " / ".join("%s %g" % (end, self.band[end][0]) for end in HOST_FACTORS if end in self.band)
        return "%s (%s): factor %g (%s; band %s)" % (self.name, self.cpu, self.factor, self.host_factor, band)


#: What ``benchmarks/host_cost.py --repeats 5`` measured on the x86 machine on 2026-11-24
#: (x86_64 AMD EPYC, 2 cores shared with other jobs, load average 2.9, Linux 6.18, Python
#: 3.11.7, pyOCD 0.46.0; docs/benchmarks.md, "Host cost"): CPU seconds (``time.process_time``,
#: every thread), medians of 5 interleaved repeats, replaying a fresh-board flash of each target
#: through the Debug Probe preset (recorded at this preset's own time per transfer).
#: - ``transfer_s``: by tool, then by phase (``"*"``: any phase not named): CPU seconds per DAP
#:   packet sent or received. Measured per phase by ``benchmarks/host_cost.py --repeats 5
#:   --targets nrf51,nrf52840,stm32f103rc,rp2040`` on 2026-12-07 (same machine, load average 1.1,
#:   pyOCD 0.46.0, piflash with its own DAP encoding, piflash/probe/lean_dap.py): each phase's
#:   cold CPU over its packets, totals of the four targets, piflash connect 0.1527 s / 586, erase
#:   0.0854 s / 514, program 0.4500 s / 40,064, verify 0.0559 s / 1,202, reset 0.0099 s / 82, the
#:   whole flash 0.7474 s / 42,448; pyOCD connect 0.4398 s / 400, program 17.0254 s / 134,824,
#:   reset 0.0085 s / 32, disconnect 0.0056 s / 48, the whole flash 17.5320 s / 135,304
#:   (129.6 us). The machine ran pyOCD's unchanged code 3.03 times slower per packet that day
#:   than on 2026-11-24 (42.8 us, the figure the host bands' x86 sources were set against), so
#:   every figure of that run is scaled by 42.8 / 129.6 = 0.3303, as the parse figures below are:
#:   the ratios of one run, not its absolute figures. Unscaled, piflash's program phase is
#:   11.2 us per packet and pyOCD's 126.3 us. The replay's backend stands in for libusb and the
#:   kernel's usbfs, whose C time per transfer is not in these figures.
#: - ``parse_s_per_byte``: loading the file (piflash ``load_image``; pyOCD ``FileProgrammer.
#:   add_file``): MicroPython's .hex (670,788 bytes) 0.108 s and 0.184 s; the two .bin images
#:   (327,680 bytes together) 0.0006 s and 0.0056 s.
#:   piflash's .hex figure since it checks every record itself and has bincopy assemble the image
#:   instead of parsing with intelhex (2026-11-26): 0.0555 s, pyOCD's 0.184 s times the
#:   ratio of the two measured in one run of ``host_cost.py --targets nrf51 --repeats 5`` (load
#:   average 1.0): piflash 0.0343 s, pyOCD (still intelhex, unchanged) 0.1138 s. The ratio, not
#:   the run's own figure, so that the preset's other figures (measured on 2026-11-24 at load 2.9)
#:   and this one stay comparable. Since piflash reads 16-byte data records a block at a time
#:   (piflash/firmware/ihex.py, 2026-12-07): 0.0061 s, the same ratio from ``host_cost.py
#:   --targets nrf51 --repeats 5 --json`` (load average 4.0): piflash 0.00898 s, pyOCD 0.2707 s.
#: - ``cached_load_s_per_byte``: piflash's ``load_image`` of a file it loaded before (read back
#:   from its parsed-image cache, piflash/firmware/cache.py), ``host_cost.py --repeats 3`` on
#:   2026-11-25 (load average 22: two benchmarks beside it): MicroPython's .hex 0.00084 s (its
#:   parse measured 0.1155 s in the same run, against the 0.108 s above); a .bin is not parsed,
#:   so not cached: its figure is the parse's.
#: - ``startup_s``: ``pyocd flash --help``, CPU of the process (``RUSAGE_CHILDREN``): 0.532 s.
#: - ``sleep_s``: ``time.sleep`` during one flash, both tools: 0.1 s in pyOCD's
#:   ``cortex_m._perform_reset`` and 0.01 s in a reset's ``Timeout.check`` (before piflash set
#:   ``reset.post_delay`` per target; ``benchmarks/real_probe.py`` now counts what each run
#:   sleeps instead).
X86_MEASURED = {
    "cpu": "x86_64 AMD EPYC, 2 cores shared with other jobs",
    "transfer_s": {
        # us per packet measured on 2026-12-07 times 0.3303 (see above)
        "piflash": {
            ANY_PHASE: 17.61e-6 * 0.3303,
            "connect": 260.6e-6 * 0.3303,
            "erase": 166.2e-6 * 0.3303,
            "program": 11.23e-6 * 0.3303,
            "verify": 46.51e-6 * 0.3303,
            "reset": 120.7e-6 * 0.3303,
        },
        "pyocd": {
            ANY_PHASE: 42.8e-6,
            "connect": 1099.5e-6 * 0.3303,
            "program": 126.28e-6 * 0.3303,
            "reset": 265.6e-6 * 0.3303,
            "disconnect": 116.7e-6 * 0.3303,
        },
    },
    "parse_s_per_byte": {
        "piflash": {"hex": 0.0061 / 670788, "bin": 0.0006 / 327680},
        "pyocd": {"hex": 0.184 / 670788, "bin": 0.0056 / 327680},
    },
    "cached_load_s_per_byte": {"hex": 0.00084 / 670788, "bin": 0.0006 / 327680},
    "startup_s": 0.532,
    "sleep_s": {"piflash": 0.11, "pyocd": 0.11},
}


def _scaled(name: str, cpu: str, band: Dict[str, Tuple[float, str]], end: str = "mid") -> HostPreset:
    """The x86 measurement times ``band[end]``'s factor (``end``: low, mid, high)."""
    m = X86_MEASURED
    factor = band[end][0]
    return HostPreset(
        name=name,
        cpu=cpu,
        factor=factor,
        factor_range=(band["low"][0], band["high"][0]),
        factor_source=band[end][1],
        transfer_s={t: {p: v * factor for p, v in d.items()} for t, d in m["transfer_s"].items()},
        parse_s_per_byte={t: {f: v * factor for f, v in d.items()} for t, d in m["parse_s_per_byte"].items()},
        cached_load_s_per_byte={f: v * factor for f, v in m["cached_load_s_per_byte"].items()},
        startup_s=m["startup_s"] * factor,
        sleep_s=dict(m["sleep_s"]),
        band=dict(band),
        host_factor=end,
    )


#: Python CPU time of a Cortex-A53 at 1 GHz (Pi Zero 2W, BCM2710A1) against the x86 machine,
#: a band of two indirect figures (neither is a Zero 2W; issue 42):
#: - high, 11.3x: pystone, sabnzbd/sabnzbd issue #1162 (github.com/sabnzbd/sabnzbd/issues/1162,
#:   2018-07-29): "ARMv8 nanopineo2" (Allwinner H5, Cortex-A53) 15,000 pystones against a 2018
#:   Core i3's 170,000.
#: - low, 6.2x: pyOCD's own log on an Orange Pi Zero 2W (Allwinner H618, Cortex-A53 at 1.5 GHz),
#:   probe-rs/probe-rs issue #2299 (comment of 2024-11-25): "Loading" to "algo init" 1.49 s,
#:   which takes 0.36 s on the x86 machine: 4.1x at 1.5 GHz, 6.2x at 1 GHz by clock.
#: - mid, 8.4x: their geometric mean (a prediction).
ZERO2W_BAND = {
    "low": (6.2, "pyOCD's log on a 1.5 GHz A53 (Allwinner H618), probe-rs/probe-rs #2299, scaled to 1 GHz"),
    "mid": (8.4, "the geometric mean of the low and high figures"),
    "high": (11.3, "pystone on an Allwinner H5 A53 against a Core i3, sabnzbd/sabnzbd #1162"),
}
#: Cortex-A72 (Pi 4, BCM2711, 1.5 GHz; 1.8 GHz on later boards):
#: - low and mid, 2.6x: a Python 3 benchmark (pi to 10,000 digits) in alexdedyura/cpu-benchmark's
#:   README: Raspberry Pi 4 79.216 s against an Intel Core i3-8100 30.636 s. Bignum arithmetic
#:   runs in C, so the Python figure is the low end.
#: - high, 2.8x: 8.4x (Zero 2W, mid) divided by the A72's single-core speed over a 1 GHz A53
#:   (sysbench, leoncode.co.uk "Raspberry Pi CPU Benchmarks": Pi 4 1477.83 / Pi 3+ 687.45
#:   events/s, times 1.4 GHz / 1 GHz = 3.0).
PI4_BAND = {
    "low": (2.6, "Python pi-digits, Pi 4 against a Core i3-8100 (alexdedyura/cpu-benchmark)"),
    "mid": (2.6, "the low figure: the one Python measurement of a Pi 4"),
    "high": (2.8, "the zero2w mid factor over sysbench's A72 / 1 GHz A53 single-core ratio (leoncode.co.uk)"),
}
#: Cortex-A76 at 2.4 GHz (Pi 5, BCM2712): the Pi 4 band divided by 1.85, the single-core
#: sysbench ratio of Pi 5 to Pi 4 (leoncode.co.uk: 2737.49 / 1477.83 events/s): 1.4x (low, mid),
#: 1.5x (high). No published Python figure of the same two machines was found: this one is a C
#: benchmark's ratio.
PI5_BAND = {
    "low": (1.4, "the pi4 low factor over sysbench's Pi 5 / Pi 4 single-core ratio 1.85 (leoncode.co.uk)"),
    "mid": (1.4, "the pi4 mid factor over sysbench's Pi 5 / Pi 4 single-core ratio 1.85"),
    "high": (1.5, "the pi4 high factor over sysbench's Pi 5 / Pi 4 single-core ratio 1.85"),
}
X86_BAND = {end: (1.0, "measured: benchmarks/host_cost.py") for end in HOST_FACTORS}

#: Each host: (cpu, band).
_HOSTS = {
    "x86": (X86_MEASURED["cpu"], X86_BAND),
    "zero2w": ("Cortex-A53 at 1 GHz (Raspberry Pi Zero 2W)", ZERO2W_BAND),
    "pi4": ("Cortex-A72 at 1.5-1.8 GHz (Raspberry Pi 4)", PI4_BAND),
    "pi5": ("Cortex-A76 at 2.4 GHz (Raspberry Pi 5)", PI5_BAND),
}

#: Host presets by name (``real_probe.py --host``), at the middle of their band.
HOST_PRESETS: Dict[str, HostPreset] = {name: _scaled(name, cpu, band) for name, (cpu, band) in _HOSTS.items()}
#: The host a device charges unless told otherwise.
DEFAULT_HOST = "x86"
#: CPU seconds per USB transfer of pyOCD's own path on the default host, in any phase (what any
#: pyOCD client that is not piflash costs; ``benchmarks/real_probe.py`` sets piflash's for
#: piflash's runs).
HOST_TRANSFER_S = HOST_PRESETS[DEFAULT_HOST].transfer_at("pyocd")


def get_host(name: str, factor: str = "mid") -> HostPreset:
    """The host preset called ``name`` at the ``factor`` end of its band (``low``, ``mid``,
    ``high``: :data:`HOST_FACTORS`; ``real_probe.py --host-factor``).

    :raises ValueError: Unknown host or band end.
    """
    if name not in HOST_PRESETS:
        raise ValueError("unknown host preset %r (choose from %s)" % (name, ", ".join(HOST_PRESETS)))
    if factor not in HOST_FACTORS:
        raise ValueError("unknown host factor %r (choose from %s)" % (factor, ", ".join(HOST_FACTORS)))
    if factor == "mid":
        return HOST_PRESETS[name]
    cpu, band = _HOSTS[name]
    return _scaled(name, cpu, band, factor)
