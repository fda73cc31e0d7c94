"""Fault injection settings of a simulated board (pure data, stored in the board's JSON).

A fault is set with :meth:`piflash.sim.store.SimStore.set_faults` and takes effect in every
process that opens the board afterwards (and, within about 0.05 s, in a session that is already
open). The faults:

``write_protect`` -- list of sector (erase page) addresses, int.
    The flash controller refuses to erase or program those pages, as the real peripheral does
    when its protection is on. STM32F1: the FPEC sets SR.WRPRTERR and leaves the page unchanged;
    pyOCD's STM32F103RC algorithm reads every programmed half-word back, so pyOCD raises
    ``FlashProgramFailure`` with the page address (result code 1); the algorithm's EraseSector
    does not check SR, so the erase itself "succeeds". FLASH_WRPR reads back with the matching
    WRPx bits cleared (RM0008 section 3.3.3 / PM0075). nRF51/nRF52840: the NVMC silently ignores
    the erase and the word writes (the page keeps its old contents); pyOCD's nRF algorithm
    always returns 0, so pyOCD reports success and only a read-back verify finds the difference.
    NVMC ERASEALL is refused entirely while any page is protected; the nRF52 CTRL-AP ERASEALL
    (the recovery path) ignores protection. Addresses may be any byte in the page; they are
    stored rounded down to the page start. UICR (nRF) may be protected too.

``stuck_busy`` -- bool.
    The flash controller never becomes ready: NVMC READY/READYNEXT read 0, STM32 FLASH_SR.BSY
    reads 1, and no erase or program is carried out. pyOCD's algorithm spins until
    ``flash.timeout.erase_sector`` / ``flash.timeout.program`` expires and pyOCD raises
    ``FlashEraseFailure("flash erase sector timed out")`` (no address). Set a short timeout in
    tests. On nRF52 with pyOCD's default ``auto_unlock`` and a hardened-APPROTECT build code
    pyOCD would also wait 15 s for the NVMC on connect; the simulated part's build code avoids
    that path.

``bit_flip`` -- ``{"address": int, "bit": int}`` (bit 0..7 of the byte at address).
    Each time that byte is programmed, the stored value has this bit inverted, so both the CPU
    and the debugger read it back wrong. STM32: pyOCD's algorithm read-back check fails and
    pyOCD raises ``FlashProgramFailure`` for the page. nRF: nothing in pyOCD notices; only a
    read-back verify does.

``disconnect_after`` -- int N >= 0.
    The probe raises pyOCD's ``ProbeDisconnected`` once N DAP transfers (each DP/AP register
    access, each word of a multiple transfer) have been made in the current session; writes up
    to the limit take effect and the board state is saved at that moment. Every later call on
    that probe object raises ``ProbeDisconnected`` too. The setting stays until cleared, so each
    new session is cut off after N transfers again. A board in USB BOOTSEL mode (the simulated
    PICOBOOT device) counts bulk transfers instead and leaves the USB bus (ENODEV).

``remove_after`` -- int N >= 0.
    The board is pulled off the fixture once N DAP transfers have been made in the current
    session (:meth:`piflash.sim.store.SimStore.pull`): writes up to the limit take effect, the
    board's flash is saved, and from then on the debug port does not answer (pyOCD's
    ``TransferError``, no ACK) while the probe stays plugged in. One-shot: pulling the board
    spends the fault, so seating the same board again does not pull it again. A board in USB
    BOOTSEL mode counts bulk transfers and, pulled, leaves the USB bus with its board.

``lock_ignored`` -- bool.
    A read-out protection lock does not take: the setting is written (nRF UICR.APPROTECT /
    RBPCONF, STM32 RDP option byte) and reads back as written, but after the reset the chip is
    still open (nRF52 CTRL-AP APPROTECTSTATUS reads 1, nRF51 flash stays readable, STM32
    FLASH_OBR.RDPRT stays 0). A tool must read the state back to notice.

``recover_stuck`` -- bool.
    The recovery erase never finishes: nRF52 CTRL-AP ERASEALLSTATUS stays 1, nRF51 NVMC READY
    stays 0 after ERASEALL, STM32 FLASH_SR.BSY stays set after an option-byte erase; nothing is
    erased and the chip stays locked.

``option_bytes_fault`` -- bool (STM32F1 boards only).
    Every debugger access to the option-byte block (0x1FFFF800-0x1FFFF80F) gets a SWD FAULT
    (AHB error), as on a simulator that models FLASH_OBR but not that block. The
    option bytes still load at reset: FLASH_OBR.RDPRT tells the level in effect as before.

``absent`` -- bool.
    The probe is there but no target answers: every DP/AP access raises pyOCD's
    ``TransferError`` (no ACK). pyOCD's connect fails at once with "Target not detected".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

__all__ = ["FAULT_NAMES", "Faults"]

#: Names accepted by :meth:`Faults.from_dict` and ``SimStore.set_faults``.
FAULT_NAMES: Tuple[str, ...] = (
    "write_protect",
    "stuck_busy",
    "bit_flip",
    "disconnect_after",
    "remove_after",
    "absent",
    "lock_ignored",
    "recover_stuck",
    "option_bytes_fault",
)


@dataclass
class Faults:
    """The fault settings of one board; see the module docstring for their meaning.

    Instances are mutable so that a running board can share one object between its models and
    have it updated in place (:meth:`update_from`).
    """

    write_protect: List[int] = field(default_factory=list)
    stuck_busy: bool = False
    bit_flip: Optional[Dict[str, int]] = None
    disconnect_after: Optional[int] = None
    remove_after: Optional[int] = None
    absent: bool = False
    lock_ignored: bool = False
    recover_stuck: bool = False
    option_bytes_fault: bool = False

    # -- conversion -------------------------------------------------------------------------
    def to_dict(self) -> Dict[str, Any]:
        """Return the JSON form: only faults that are set, values as plain ints/bools."""
        out: Dict[str, Any] = {}
        if self.write_protect:
            out["write_protect"] = list(self.write_protect)
        if self.stuck_busy:
            out["stuck_busy"] = True
        if self.bit_flip is not None:
            out["bit_flip"] = dict(self.bit_flip)
        if self.disconnect_after is not None:
            out["disconnect_after"] = self.disconnect_after
        if self.remove_after is not None:
            out["remove_after"] = self.remove_after
        if self.absent:
            out["absent"] = True
        if self.lock_ignored:
            out["lock_ignored"] = True
        if self.recover_stuck:
            out["recover_stuck"] = True
        if self.option_bytes_fault:
            out["option_bytes_fault"] = True
        return out

    @classmethod
    def from_dict(cls, data: Optional[Dict[str, Any]], spec: Any = None) -> "Faults":
        """Build and validate from the JSON form (or keyword arguments).

        :param data: Mapping of fault name to value; a value of None means "not set".
        :param spec: Optional :class:`piflash.sim.specs.TargetSpec`; when given, addresses are
            checked against (and write-protect addresses rounded to) its flash pages.
        :raises ValueError: Unknown fault name or a value of the wrong type/range.
        """
        faults = cls()
        for name, value in (data or {}).items():
            faults.set(name, value, spec)
        return faults

    def set(self, name: str, value: Any, spec: Any = None) -> None:
        """Set one fault by name; None clears it. Raises ValueError like :meth:`from_dict`."""
        if name not in FAULT_NAMES:
            raise ValueError("unknown fault %r (known: %s)" % (name, ", ".join(FAULT_NAMES)))
        if name == "write_protect":
            self.write_protect = _pages(value, spec)
        elif name in ("stuck_busy", "absent", "lock_ignored", "recover_stuck", "option_bytes_fault"):
            if value is not None and not isinstance(value, bool):
                raise ValueError("fault %s takes True or False" % name)
            if name == "option_bytes_fault" and value and spec is not None and spec.family != "stm32f1":
                raise ValueError("fault option_bytes_fault is for STM32F1 boards (their option-byte block)")
            setattr(self, name, bool(value))
        elif name == "bit_flip":
            self.bit_flip = _bit_flip(value, spec)
        elif name in ("disconnect_after", "remove_after"):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise ValueError("%s takes a transfer count >= 0" % name)
            setattr(self, name, value)

    def update_from(self, other: "Faults") -> None:
        """Copy every setting of ``other`` into this object (in place)."""
        self.write_protect = list(other.write_protect)
        self.stuck_busy = other.stuck_busy
        self.bit_flip = dict(other.bit_flip) if other.bit_flip is not None else None
        self.disconnect_after = other.disconnect_after
        self.remove_after = other.remove_after
        self.absent = other.absent
        self.lock_ignored = other.lock_ignored
        self.recover_stuck = other.recover_stuck
        self.option_bytes_fault = other.option_bytes_fault

    # -- queries used by the models ---------------------------------------------------------
    def is_protected(self, page_start: int) -> bool:
        """Whether the page starting at ``page_start`` is write-protected."""
        return page_start in self.write_protect


def _pages(value: Any, spec: Any) -> List[int]:
    if value is None:
        return []
    if isinstance(value, int) and not isinstance(value, bool):
        value = [value]
    try:
        addrs = [int(a) for a in value]
    except (TypeError, ValueError):
        raise ValueError("write_protect takes a list of sector addresses") from None
    out: List[int] = []
    for addr in addrs:
        if spec is not None:
            nvm = spec.nvm_at(addr)
            if nvm is None:
                raise ValueError("write_protect address 0x%08x is not in the target's flash" % addr)
            addr -= (addr - nvm.start) % nvm.page_size
        if addr not in out:
            out.append(addr)
    return sorted(out)


def _bit_flip(value: Any, spec: Any) -> Optional[Dict[str, int]]:
    if value is None:
        return None
    try:
        address, bit = int(value["address"]), int(value["bit"])
    except (TypeError, KeyError, ValueError):
        raise ValueError('bit_flip takes {"address": int, "bit": 0..7}') from None
    if not 0 <= bit <= 7:
        raise ValueError("bit_flip bit must be 0..7 (a bit of the byte at address)")
    if spec is not None and spec.nvm_at(address) is None:
        raise ValueError("bit_flip address 0x%08x is not in the target's flash" % address)
    return {"address": address, "bit": bit}
