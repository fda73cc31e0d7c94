"""The chip family protocol: what piflash asks of a family, and what every family shares.

A family is one class instance (:class:`Family`) registered in :data:`piflash.targets.families.FAMILIES`.
The base class is what piflash does for a target type it has no family module for (pyOCD's
own behaviour, no unique ID, no read-out protection, no flash speed-ups): a family module
overrides what it knows. The model is pyOCD's ``pyocd/target/family/target_nRF52.py``, where the
family class owns ``is_locked`` and ``mass_erase``, and esptool's ``esptool/targets/__init__.py``
``CHIP_DEFS``.

Also here, because several families and the callers above share them: :class:`Port` (word
access to a target and its APs), :class:`ProtectionStatus`, :class:`ChipIdentity` and the
:class:`IdEvidence` the identification reads, :class:`TargetUidLocation` and :class:`FlashSpeedups`.

No click, no rich; pyOCD is imported inside the functions.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import time
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Dict, FrozenSet, List, Optional, Pattern, Sequence, Tuple

from piflash.errors import ProtectError
from piflash.targets.algorithms import algorithm_digest  # noqa: F401  (re-exported)

if TYPE_CHECKING:
    from pyocd.core.session import Session
    from pyocd.coresight.dap import DebugPort
    from pyocd.flash.flash import Flash

__all__ = [
    "Family",
    "ReadOutProtectedFamily",
    "FlashSpeedups",
    "NO_SPEEDUPS",
    "Port",
    "ProtectionStatus",
    "ChipIdentity",
    "IdEvidence",
    "TargetUidLocation",
    "algorithm_digest",
    "wait_until",
    "poll_until",
    "Deadline",
    "MIN_POLL_S",
    "simulated_probe",
    "target_simulated",
    "faults",
    "UNFINISHED_HINT",
    "names_pattern",
]


@dataclasses.dataclass(frozen=True)
class TargetUidLocation:
    """Where a target type keeps its factory-programmed unique ID.

    :ivar address: first byte of the ID in the target's address space.
    :ivar size: length of the ID in bytes.
    :ivar source: the datasheet section the address comes from.
    :ivar reverse: the ID is the bytes read in reverse order (bool; RP2350: OTP rows
        CHIPID0..3 read upwards, the ID is CHIPID3..0 most significant byte first).
    """

    address: int
    size: int
    source: str
    reverse: bool = False


@dataclasses.dataclass
class ProtectionStatus:
    """The read-out protection of one chip, as read from it.

    :ivar family: the family's name (:attr:`Family.name`): "nrf52", "nrf51", "stm32f1", "rp2040"
        (never locked: it has no protection) or "rp2350" (its debug locks are OTP flags: read,
        never set by piflash).
    :ivar locked: True when the debugger is shut out now.
    :ivar configured: True when the setting (UICR, option byte) asks for protection, None when it
        could not be read (a locked nRF52 hides its UICR). ``configured and not locked``: the
        setting is written but not (yet) in effect.
    :ivar detail: the registers read, e.g. "CTRL-AP APPROTECTSTATUS = 0x0".
    :ivar chip: what the chip's ID registers say it is (see :mod:`piflash.targets.identify`), e.g.
        "nRF52840"; None when not identified.
    """

    family: str
    locked: bool
    configured: Optional[bool]
    detail: str
    chip: Optional[str] = None

    @property
    def state(self) -> str:
        """``"locked"`` or ``"open"``: what the history records."""
        return "locked" if self.locked else "open"

    def to_dict(self) -> Dict[str, Any]:
        """JSON form: family, chip, state, locked, configured, detail."""
        return {
            "family": self.family,
            "chip": self.chip,
            "state": self.state,
            "locked": self.locked,
            "configured": self.configured,
            "detail": self.detail,
        }


class Port:
    """Word access to the target and its APs, wherever it comes from
    (:func:`piflash.production.protect.session_port`, :func:`piflash.production.protect.open_port`).
    Accesses raise pyOCD's ``TransferError`` family on a fault."""

    def __init__(
        self,
        dp: DebugPort,
        read32: Callable[[int], int],
        write32: Callable[[int, int], None],
        write16: Callable[[int, int], None],
    ) -> None:
        self.dp, self.read32, self.write32, self.write16 = dp, read32, write32, write16

    def read_ap(self, apsel: int, reg: int) -> int:
        """Read register ``reg`` (byte offset) of AP ``apsel`` (ADIv5 APSEL)."""
        return int(self.dp.read_ap((apsel << 24) | reg))

    def write_ap(self, apsel: int, reg: int, value: int) -> None:
        """Write register ``reg`` of AP ``apsel``."""
        self.dp.write_ap((apsel << 24) | reg, value)


#: The hint of a protection write or erase that did not finish (it once said only
#: "power-cycle the board", never what state the protection is in).
UNFINISHED_HINT = (
    "the read-out protection setting may or may not have been written: power-cycle the "
    "board, then 'piflash protect status' tells whether it is locked; do not ship it "
    "until a lock reads back locked (or a recover reads back open)"
)


#: The shortest time one poll of a target can take, seconds: a poll is at least one USB round
#: trip to the probe (a DAP command out, its response back), and a USB 2.0 high-speed host
#: schedules bulk transfers in 125 us microframes (USB 2.0 specification 8.4.3.1). The simulated
#: probes' timing model charges a high-speed bulk transfer 62.5 us each way, a full-speed one
#: 125 us, a HID report a 1 ms frame (piflash/sim/probes/usb/timing.py ``BULK_LATENCY_S``,
#: ``FRAME_S``), so no simulated poll takes less virtual time either
#: (tests/unit/test_waits.py keeps the two in step).
MIN_POLL_S = 125e-6


def simulated_probe(probe: object) -> bool:
    """Whether ``probe`` (a pyOCD ``DebugProbe``, or None) answers on a virtual clock: any probe of
    a process whose USB bus is the simulated one (``PIFLASH_SIM_USB`` set: it then replaces libusb
    for the whole process and no real USB device is visible, docs/simulator.md), whose timing
    model charges every poll at least :data:`MIN_POLL_S`. A ``sim:`` probe models no time (its
    polls take the wall time they take), so its waits are bounded by the wall clock, as on
    hardware."""
    from piflash import settings

    return probe is not None and bool(settings.PIFLASH_SIM_USB.value())


def target_simulated(target: object) -> bool:
    """:func:`simulated_probe` of the probe of ``target`` (a pyOCD ``Target``: its
    ``session.probe``); False when it has none (a stand-in)."""
    return simulated_probe(getattr(getattr(target, "session", None), "probe", None))


class Deadline:
    """A poll loop's bound, read on the probe's clock (issue 42 item 4).

    On hardware the clock is ``time.monotonic()``: the bound is ``seconds`` of real time. On a
    simulated probe it is the count of polls times :data:`MIN_POLL_S`, and the wall clock is never
    read: a simulated board answers on its own virtual clock, which a wall-clock deadline mixed
    with it would cut short or stretch by the host's load (``benchmarks/real_probe.py`` failed
    that way under load). Each simulated poll moves the virtual clock on by at least
    :data:`MIN_POLL_S`, so a wait that ends within ``seconds`` of virtual time ends within the
    bound; the outcome and the polls made depend on the simulation alone, never on wall time.
    A poll that never succeeds ends after ``ceil(seconds / MIN_POLL_S)`` polls.

    Why not the simulated device's own virtual clock: the targets never import the simulator
    (docs/architecture.md), a ``sim:`` probe has no clock at all, and the count needs no wiring.
    Why no sleep between polls: each poll is a USB round trip already, as in pyOCD's own waits
    (``Flash.wait_for_completion``, pyocd/flash/flash.py), and a sleep is wall time the virtual
    clock does not see.

    :param seconds: the bound (float, s).
    :param simulated: use the poll count (:func:`simulated_probe`), not the wall clock.
    """

    def __init__(self, seconds: float, simulated: bool = False) -> None:
        self.seconds = float(seconds)
        self.simulated = simulated
        self.polls = 0
        self._start = 0.0 if simulated else time.monotonic()

    def elapsed(self) -> float:
        """Seconds on the probe's clock since the deadline was set (polls x :data:`MIN_POLL_S`
        when simulated)."""
        return self.polls * MIN_POLL_S if self.simulated else time.monotonic() - self._start

    def expired(self) -> bool:
        """Count one poll made; whether the bound has now passed."""
        self.polls += 1
        return self.elapsed() > self.seconds


def poll_until(done: Callable[[], object], seconds: float, simulated: bool = False) -> bool:
    """Call ``done()`` back to back until it is true or the :class:`Deadline` of ``seconds``
    passes. Returns whether it became true (bool). Errors of ``done()`` propagate."""
    deadline = Deadline(seconds, simulated)
    while not done():
        if deadline.expired():
            return False
    return True


def wait_until(done: Callable[[], object], timeout: float, what: str, port: Optional[Port] = None) -> None:
    """Poll ``done()`` back to back until it is true, bounded on the probe's clock
    (:func:`poll_until`; simulated when ``port``'s probe is, :func:`simulated_probe`).

    :param timeout: seconds.
    :param what: the sentence of the error, e.g. "the NVMC ERASEALL did not finish".
    :param port: the :class:`Port` polled (its ``dp.probe`` tells a simulated probe), or None.
    :raises ProtectError: not done within ``timeout`` (with :data:`UNFINISHED_HINT`).
    """
    dp = getattr(port, "dp", None)
    simulated = simulated_probe(getattr(dp, "probe", None)) if dp is not None else False
    if not poll_until(done, timeout, simulated):
        raise ProtectError(f"{what} within {timeout:g} s", hint=UNFINISHED_HINT)


def faults(read: Callable[[], int]) -> bool:
    """Whether ``read()`` faults (pyOCD's ``TransferFaultError``)."""
    from pyocd.core.exceptions import TransferFaultError

    try:
        read()
        return False
    except TransferFaultError:
        return True


# Cortex-M AIRCR (ARMv6-M/ARMv7-M ARM, B3.2.6): VECTKEY 0x05FA + SYSRESETREQ.
_AIRCR, _SYSRESETREQ = 0xE000ED0C, 0x05FA0004
_AP_IDR, _CTRL_AP = 0xFC, 1
_CPUID = 0xE000ED00


@dataclasses.dataclass(frozen=True)
class ChipIdentity:
    """What a chip's ID registers say it is (:func:`piflash.targets.identify.identify`).

    :ivar family: the family's name (:attr:`Family.name`: ``"nrf52"``, ``"nrf51"``, ``"stm32f1"``),
        or None for a chip piflash cannot identify.
    :ivar name: e.g. "nRF52840", "nRF52-series chip" (part number hidden while locked), "nRF51",
        "STM32F10x high-density part", or "Cortex-M4" for an unidentified chip.
    :ivar part: nRF52 FICR INFO.PART or STM32F1 DEV_ID (int), None when not read.
    :ivar target: the pyOCD target type to use for it (str), None when piflash cannot tell.
    :ivar evidence: the registers read and their values, for messages.
    :ivar claimant: the :class:`Family` object named by ``family`` (None with it).
    """

    family: Optional[str]
    name: str
    part: Optional[int]
    target: Optional[str]
    evidence: str
    claimant: Optional["Family"] = dataclasses.field(default=None, compare=False, repr=False)

    @property
    def described(self) -> str:
        """The chip in a sentence: "an nRF52840 (AP1 IDR ...)"."""
        what = f"an {self.name}" if self.family else f"a {self.name} chip that piflash does not identify"
        return f"{what} ({self.evidence})"

    def matches(self, target: str) -> bool:
        """Whether this chip is one ``target`` (a pyOCD target type) may name: the same family and,
        where both are known, the same part."""
        family = self.claimant
        if self.family is None or family is None or not family.claims(target):
            return False
        parts = family.expected_parts(target)
        return parts is None or self.part is None or self.part in parts


class IdEvidence:
    """The ID registers read so far from one chip, read once each, and the facts for the message.

    The facts are kept in the order read: DPIDR, then AP1 IDR (a family that recognises its AP
    there notes it itself), then CPUID; the families add their own registers after them.

    :param port: a :class:`Port`.
    """

    def __init__(self, port: Port) -> None:
        self.port = port
        self.facts: List[str] = []
        dpidr = getattr(getattr(port.dp, "dpidr", None), "idr", None)
        if dpidr:
            self.facts.append(f"DPIDR {dpidr:#010x}")
        self._ap1: Optional[int] = None
        self._ap1_read = self._ap1_noted = self._cpuid_read = False
        self._cpuid: Optional[int] = None

    def read(self, read: Callable[[], int]) -> Optional[int]:
        """``read()``, or None when the access faults (the register is not there or not readable).

        :raises pyocd.core.exceptions.TransferError: the debug port itself stops answering.
        """
        from pyocd.core.exceptions import TransferFaultError

        try:
            return read()
        except TransferFaultError:
            return None

    @property
    def ap1_idr(self) -> Optional[int]:
        """AP1's IDR (offset 0xFC of APSEL 1; ADIv5.2: an AP that is not implemented reads 0), None
        when the read faults."""
        if not self._ap1_read:
            self._ap1 = self.read(lambda: self.port.read_ap(_CTRL_AP, _AP_IDR))
            self._ap1_read = True
        return self._ap1

    def note_ap1(self, meaning: str = "") -> None:
        """Add AP1's IDR to the facts (once), with what a family read in it."""
        if not self._ap1_noted:
            ap1 = self.ap1_idr
            self.facts.append(
                (f"AP1 IDR {ap1:#010x}" if ap1 is not None else "no AP1") + (f": {meaning}" if meaning else "")
            )
            self._ap1_noted = True

    @property
    def cpuid(self) -> Optional[int]:
        """CPUID at 0xE000ED00 (ARMv7-M ARM B3.2.3, the same register in ARMv6-M), None when not
        readable; the first read notes AP1 and CPUID in the facts."""
        if not self._cpuid_read:
            self.note_ap1()
            self._cpuid = self.read(lambda: self.port.read32(_CPUID))
            self._cpuid_read = True
            if self._cpuid is not None:
                self.facts.append(f"CPUID {self._cpuid:#010x}")
        return self._cpuid

    @property
    def partno(self) -> Optional[int]:
        """CPUID PARTNO [15:4], the core (pyOCD ``pyocd/coresight/core_ids.py`` ``CORE_TYPE_NAME``:
        0xC20 Cortex-M0, 0xC23 Cortex-M3), None without CPUID."""
        cpuid = self.cpuid
        return None if cpuid is None else (cpuid >> 4) & 0xFFF

    def evidence(self, *more: str) -> str:
        """The facts, and ``more``, as one string."""
        return ", ".join(self.facts + list(more))


class FlashSpeedups:
    """What a family does around pyOCD's flash algorithm for its parts, asked by
    :mod:`piflash.flashing.plan` and :mod:`piflash.flashing.program` for each ``Flash`` (pyOCD's
    ``Flash`` object of one region, its algorithm loaded). This base does nothing: pyOCD's own way.

    :cvar erases_chip: :meth:`erase_chip` replaces the algorithm's EraseAll (or its absence).
    :cvar erases_blocks: :meth:`erase_blocks` erases whole blocks of 4 KiB sectors.
    """

    erases_chip: ClassVar[bool] = False
    erases_blocks: ClassVar[bool] = False

    def prepare_program(self, flash: Flash) -> bool:
        """After the algorithm's Init for programming: make the flash faster. Returns whether it did."""
        return False

    def before_uninit(self, flash: Flash) -> bool:
        """After programming, before the algorithm's UnInit. Returns whether it did anything."""
        return False

    def reads_without_init(self, flash: Flash) -> bool:
        """Whether the flash can be read for piflash's checks without the algorithm's Init."""
        return False

    def enable_reads(self, flash: Flash) -> bool:
        """Make the flash readable through the bus, fast (after the Init, or where
        :meth:`reads_without_init`). Returns whether it did anything."""
        return False

    def end_reads(self, flash: Flash) -> bool:
        """End a read phase begun with :meth:`enable_reads`. Returns whether it did anything."""
        return False

    def erase_chip(self, flash: Flash) -> int:
        """Erase the whole flash behind ``flash`` (initialised for erase) by the family's own way.

        :returns: the bytes erased.
        :raises NotImplementedError: the family has none (:attr:`erases_chip` is False).
        """
        raise NotImplementedError("no chip erase of the family's own")

    def erase_blocks(self, flash: Flash, sectors: Sequence[int]) -> Tuple[List[Tuple[int, int]], List[int]]:
        """Erase the whole blocks made of the 4 KiB ``sectors`` (addresses) by the family's own
        block erase; ``flash`` initialised for erase.

        :returns: ``(blocks, rest)``: the (address, size) blocks erased, the sector addresses left,
            sorted. The base erases none.
        """
        return [], sorted(sectors)


#: The speed-ups of every algorithm no family knows: none.
NO_SPEEDUPS = FlashSpeedups()


class Family:
    """One chip family: what piflash knows of it. This base is the generic family: every target
    pyOCD knows that no family module claims (:mod:`piflash.targets.families.generic`).

    :cvar name: the family's name (str), what :class:`ProtectionStatus` and the history record.
    :cvar title: how messages name it, e.g. "nRF52".
    :cvar names: the pattern (a compiled regular expression over the lower-case name, matched
        whole) of the pyOCD target types and CMSIS pack part names the family claims; None: none.
    :cvar identify_rank: the order in which :func:`piflash.targets.identify.identify` asks the
        families (lower first).
    :cvar uid_location: where the family keeps its factory unique ID (:class:`TargetUidLocation`),
        None when it has none piflash reads from memory.
    :cvar uid_halts_core: its unique ID is read only by halting the core and running code on it
        (an RP2040's flash unique ID), so ``read_uid`` reads it only when ``intrusive`` (bool).
    :cvar erase_sector_timeout: seconds pyOCD's ``flash.timeout.erase_sector`` is set to, None to
        keep pyOCD's default.
    :cvar erase_chip_timeout: seconds pyOCD's ``flash.timeout.erase_all`` is set to: ten times the
        datasheet's maximum mass-erase time (a controller that never finishes is reported within
        that, not after pyOCD's default 240 s); None to keep pyOCD's default.
    :cvar reset_post_delay: seconds pyOCD's ``reset.post_delay`` is set to (its fixed sleep after
        the AIRCR.SYSRESETREQ write of a reset, ``CortexM._perform_reset`` in
        pyocd/coresight/cortex_m.py, and after a hardware reset's release, ``CMSISDAPProbe.reset``),
        None to keep pyOCD's 0.1 s. After that sleep pyOCD polls DP CTRL/STAT
        (``DebugPort.post_reset_recovery``) and then DHCSR until S_RESET_ST clears
        (``CortexM._post_reset_core_accessibility_test``), so the chip's own start-up is waited for
        by those polls; the sleep only has to cover a chip that drops its debug port in a reset or
        starts its reset later than the next SWD transfer. A family sets it where its
        documentation says the system reset keeps the debug logic (issue 42 item 3).
    :cvar read_out_protection: the family has a read-out protection that piflash reads before
        flashing and can set and clear (bool).
    :cvar needs_target_init: its debug port is only reached through its pyOCD target's own
        connect sequence (multi-drop TARGETSEL, an ADIv6 root ROM table), never a bare DP (bool).
    :cvar uid_hidden_when_locked: a locked chip cuts its memory AP off, so its unique ID cannot be
        read then; its protection state tells that it is still there (bool).
    :cvar hidden_part_hint: the hint of a wrong-target error for a chip of the family whose part
        number could not be read, or None.
    :cvar uicr_customer: (base address, 32-bit words) of the customer registers a profile's
        ``uicr_customer`` patch names, or None.
    :cvar no_otp_hint: added to the error of an ``otp`` patch on a family without OTP.
    :cvar boards: board names people search for -> the target type of the family they carry.
    :cvar uf2_ids: target name prefix -> the UF2 familyIDs a UF2 for it may carry (the longest
        prefix that the name starts with wins).
    """

    name: ClassVar[str] = "generic"
    title: ClassVar[str] = "any other target pyOCD knows"
    names: ClassVar[Optional[Pattern[str]]] = None
    identify_rank: ClassVar[int] = 1
    uid_location: ClassVar[Optional[TargetUidLocation]] = None
    uid_halts_core: ClassVar[bool] = False
    erase_sector_timeout: ClassVar[Optional[float]] = None
    erase_chip_timeout: ClassVar[Optional[float]] = None
    reset_post_delay: ClassVar[Optional[float]] = None
    read_out_protection: ClassVar[bool] = False
    needs_target_init: ClassVar[bool] = False
    uid_hidden_when_locked: ClassVar[bool] = False
    hidden_part_hint: ClassVar[Optional[str]] = None
    uicr_customer: ClassVar[Optional[Tuple[int, int]]] = None
    no_otp_hint: ClassVar[str] = ""
    boards: ClassVar[Dict[str, str]] = {}
    uf2_ids: ClassVar[Dict[str, Tuple[int, ...]]] = {}

    def __repr__(self) -> str:
        return f"<family {self.name}>"

    # -- which targets ------------------------------------------------------------------------
    def claims(self, target: Optional[str]) -> bool:
        """Whether the pyOCD target type or pack part ``target`` belongs to this family (the whole
        lower-case name against :attr:`names`: ``nrf5284`` is no nRF52)."""
        return self.names is not None and self.names.fullmatch((target or "").strip().lower()) is not None

    def expected_parts(self, target: str) -> Optional[FrozenSet[int]]:
        """The part numbers (the family's part register) a target type allows, None when the
        name does not fix one."""
        return None

    def identify(self, evidence: IdEvidence) -> Optional[ChipIdentity]:
        """The chip, when its ID registers (read through ``evidence``) say it is of this family;
        None otherwise (a family that reads more registers notes them in ``evidence.facts``)."""
        return None

    # -- unique ID ------------------------------------------------------------------------------
    def read_uid(self, session: Session, strict: bool = False, intrusive: bool = False) -> Optional[str]:
        """The factory unique ID of the target of ``session`` (an open pyOCD ``Session``), as
        lower-case hex; None when the family has none (:attr:`uid_location` None) or, unless
        ``strict``, the read fails. ``intrusive``: the caller is about to reprogram or check the
        board, so an ID read that halts the core may run (see
        :func:`piflash.targets.connect.read_target_uid`).

        :raises pyocd.core.exceptions.Error: with ``strict``, the read failed.
        """
        import logging

        loc = self.uid_location
        if loc is None:
            return None
        try:
            target = session.target
            assert target is not None, "an open session has its target"
            raw = bytes(target.read_memory_block8(loc.address, loc.size))
            return (raw[::-1] if loc.reverse else raw).hex()
        except Exception:
            if strict:
                raise
            logging.getLogger(__name__).debug("could not read target unique ID", exc_info=True)
            return None

    # -- firmware ---------------------------------------------------------------------------------
    def uf2_family_ids(self, target: str) -> Optional[Tuple[int, ...]]:
        """The UF2 familyIDs a UF2 for ``target`` may carry (:attr:`uf2_ids`, longest prefix),
        None when none is known."""
        name = target.lower()
        best = max((p for p in self.uf2_ids if name.startswith(p)), key=len, default=None)
        return self.uf2_ids[best] if best else None

    def otp_area(self, target: str) -> Optional[Tuple[int, int]]:
        """(base address, size in bytes) of the one-time-programmable area a profile's ``otp``
        patch writes into, None when piflash knows none."""
        return None

    # -- read-out protection ------------------------------------------------------------------
    def _unsupported(self, target: Optional[str]) -> ProtectError:
        return ProtectError(
            f"piflash cannot read or set read-out protection on {target or 'this target'}",
            hint="supported: nRF51, nRF52 (APPROTECT) and STM32F1 (RDP); RP2040 has none; RP2350: status only",
        )

    def protection_status(
        self, port: Port, target: Optional[str], named_by: Optional[str] = None, chip: Optional[ChipIdentity] = None
    ) -> ProtectionStatus:
        """Prove the chip on ``port`` is the one ``target`` names, then read its protection state.
        Writes nothing. Called through :func:`piflash.targets.families.protection_status`, which
        identifies the chip first for a family with :attr:`read_out_protection`.

        :param chip: the chip :func:`piflash.targets.families.confirm` proved (those families).
        :raises ProtectError: the family has no protection piflash reads (this base).
        :raises WrongTargetError: the chip is another one (exit 10).
        :raises pyocd.core.exceptions.TransferError: the chip does not answer.
        """
        raise self._unsupported(target)

    def read_protection(self, port: Port, chip: Optional[str]) -> ProtectionStatus:
        """The protection registers of a chip already identified as ``chip`` (no identification:
        after the family's own reset, a reply cut short must not pass for another chip).

        :raises ProtectError: the family has no protection piflash reads (this base).
        """
        raise self._unsupported(None)

    def check_lock(self, target: str) -> None:
        """Refuse, before anything is read, a lock the family cannot set.

        :raises ProtectError: it cannot (this base: no protection at all).
        """
        raise self._unsupported(target)

    def write_lock(self, port: Port, target: str, before: ProtectionStatus, timeout: float) -> None:
        """Write the protection setting of an open chip (``before``: its status); it takes effect
        at :meth:`system_reset`.

        :param timeout: seconds an erase of the setting may take.
        :raises ProtectError: the setting cannot be written (nothing was written).
        """
        raise self._unsupported(target)

    def mass_erase(self, port: Port, timeout: float) -> None:
        """Erase a locked chip so that it opens (flash, and what holds the setting).

        :raises ProtectError: the erase did not finish within ``timeout`` seconds.
        """
        raise self._unsupported(None)

    def system_reset(self, port: Port) -> None:
        """Reset the chip so that a protection setting loads: AIRCR.SYSRESETREQ (ARMv6-M/ARMv7-M
        ARM B3.2.6), whose reply the reset may cut short, then 10 ms for the reset to finish on
        hardware; none on a simulated probe (:func:`simulated_probe`), whose reset is done when
        the write returns and which must not read the wall clock (issue 42 item 4)."""
        from pyocd.core.exceptions import TransferError

        with contextlib.suppress(TransferError):
            port.write32(_AIRCR, _SYSRESETREQ)
        if not simulated_probe(getattr(port.dp, "probe", None)):
            time.sleep(0.01)

    # -- flash speed-ups --------------------------------------------------------------------------
    def flash_speedups(self, flash: Flash) -> Optional[FlashSpeedups]:
        """The speed-ups for ``flash`` (a pyOCD ``Flash``) when its algorithm is one the family
        knows, else None."""
        return None


class ReadOutProtectedFamily(Family):
    """A family whose chips piflash identifies by their ID registers and whose read-out
    protection it reads, sets and clears (nRF51, nRF52, STM32F1)."""

    read_out_protection: ClassVar[bool] = True

    def protection_status(
        self, port: Port, target: Optional[str], named_by: Optional[str] = None, chip: Optional[ChipIdentity] = None
    ) -> ProtectionStatus:
        """:meth:`read_protection` of the chip ``chip`` (the identity
        :func:`piflash.targets.families.confirm` proved: a verdict only comes from a register that
        exists on that chip).

        :raises ValueError: no ``chip`` given (identify it first).
        """
        if chip is None:
            raise ValueError(
                f"the {self.title} chip must be identified before its protection is read "
                "(piflash.targets.families.protection_status does)"
            )
        return self.read_protection(port, chip.name)

    def check_lock(self, target: str) -> None:
        """Every chip of the family can be locked."""


def names_pattern(regex: str) -> Pattern[str]:
    """A compiled :attr:`Family.names` pattern."""
    return re.compile(regex)
