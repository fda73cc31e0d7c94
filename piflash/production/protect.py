"""Read-out protection: read it, set it (lock) and clear it (recover) on nRF51, nRF52 and STM32F1.

What each family does (the register values are the vendors'):

- **nRF52** (nRF52840 Product Specification v1.7): the setting is UICR.APPROTECT at
  0x10001208 (section 4.5, UICR registers; PALL 0x00 = enabled, 0xFF = disabled), written through
  the NVMC like any UICR word and taken into effect at the next reset. The state is read on the
  CTRL-AP (APSEL 1, IDR 0x02880000; section 4.6.1 "CTRL-AP registers"): APPROTECTSTATUS (0x00C)
  reads 0 while protected. While protected the AHB-AP is cut off; ``recover`` writes ERASEALL
  (0x004) = 1, polls ERASEALLSTATUS (0x008) until 0, then pulses RESET (0x000): flash, RAM and
  UICR are erased and the part opens.
- **nRF51** (nRF51 Series Reference Manual v3.0): the setting is UICR.RBPCONF at 0x10001004
  (section 8.1; PALL [15:8] 0x00 = protect all). There is no CTRL-AP: the state is read as
  RBPCONF plus a debugger read of flash address 0, which faults while protection is in effect.
  ``recover`` is NVMC ERASEALL (CONFIG = 2, ERASEALL = 1, wait READY; section 6.1), which the
  debugger may still reach on a protected part, then a system reset.
- **STM32F1** (RM0008 rev 21 section 3.3.3 and PM0075 sections 2.4.1, 2.5, 3.4): RDP level 1
  is any option byte RDP (0x1FFFF800) other than 0xA5. ``lock`` unlocks FLASH_KEYR and
  FLASH_OPTKEYR (keys 0x45670123, 0xCDEF89AB), erases the option bytes (CR.OPTER), programs
  them back as they were except RDP = 0x00 (CR.OPTPG), and resets so they load. The state is
  FLASH_OBR (0x4002201C) bit 1 RDPRT (RM0008, FLASH registers; PM0075 section 3): the level in
  effect, and the only register the verdict comes from; the RDP byte itself is read as
  information only (issue 19: a part, or a simulator, whose option-byte block faults still
  flashes). ``recover`` erases the option bytes (the hardware then mass-erases main flash,
  PM0075 2.4.1) and programs RDP = 0xA5.

Safety rules (pyOCD issue #1766 is the counter-example: a misread APPROTECT wiped boards):
:func:`read_status` first proves that the chip is the one the target type names
(:func:`piflash.targets.identify.confirm`: a wrong ``--target`` is exit 10 naming the chip found, never
"locked", issue 19), so a verdict only comes from a register that exists on that chip; it never
writes anything that erases; :func:`recover` reads the state first and erases only an identified
chip that reads locked; :func:`lock` reads the state back after the reset and raises
:class:`~piflash.errors.ProtectError` if the chip is still open, so an unlocked board is never
reported as locked.

Two ways in: on an open, initialised pyOCD session (the flash workflow: the pre-flash check and
the post-verify lock) through :func:`session_port`, and without target initialisation through
:func:`open_port` (``piflash protect``), which works on a locked nRF52 whose AHB-AP does not
answer. Both use pyOCD's public ``DebugPort`` / ``AccessPort`` API. No click, no rich.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from typing import Callable, Iterator, Optional

from piflash.errors import PiflashError, ProtectedError, ProtectError
from piflash.targets.identify import family_of

#: How long a recover's erase may take, seconds (pyOCD's nRF52 MASS_ERASE_TIMEOUT is 15 s; an
#: STM32F1 mass erase takes at most 40 ms per the datasheet, the option erase a few more).
RECOVER_TIMEOUT = 15.0
#: How long the chip may take to answer again after a reset, seconds.
RESET_SETTLE = 1.0

#: The hint every "chip is locked" message carries (:func:`recover_hint` adds the target type).
RECOVER_HINT = ("'piflash protect recover' unlocks it by mass-erasing the chip (flash, and on nRF "
                "the UICR): only do so if the board's contents may be lost")


def recover_hint(target: Optional[str]) -> str:
    """:data:`RECOVER_HINT` with the command to run for ``target`` (``protect`` needs the type)."""
    if not target:
        return RECOVER_HINT
    return RECOVER_HINT.replace("'piflash protect recover'", f"'piflash protect recover --target {target}'")

# Cortex-M AIRCR (ARMv6-M/ARMv7-M ARM, B3.2.6): VECTKEY 0x05FA + SYSRESETREQ.
_AIRCR, _SYSRESETREQ = 0xE000ED0C, 0x05FA0004

# nRF NVMC (both documents, "NVMC" register table) and UICR words.
_NVMC_READY, _NVMC_CONFIG, _NVMC_ERASEALL = 0x4001E400, 0x4001E504, 0x4001E50C
_APPROTECT, _RBPCONF = 0x10001208, 0x10001004
_APPROTECT_ENABLE = 0xFFFFFF00          # PALL = 0x00: enabled (nRF52840 PS v1.7 4.5)
# nRF52 CTRL-AP (nRF52840 PS v1.7 4.6.1).
_CTRL_AP = 1
_CTRL_RESET, _CTRL_ERASEALL, _CTRL_ERASEALLSTATUS, _CTRL_APPROTECTSTATUS = 0x000, 0x004, 0x008, 0x00C

# STM32F1 FLASH interface (RM0008 3.4) and option bytes (PM0075 2.5).
_FLASH = 0x40022000
_KEYR, _OPTKEYR, _SR, _CR, _OBR = _FLASH + 0x04, _FLASH + 0x08, _FLASH + 0x0C, _FLASH + 0x10, _FLASH + 0x1C
_KEY1, _KEY2 = 0x45670123, 0xCDEF89AB
_SR_BSY = 1 << 0
_CR_OPTPG, _CR_OPTER, _CR_STRT, _CR_LOCK = 1 << 4, 1 << 5, 1 << 6, 1 << 7
_OBR_RDPRT = 1 << 1
_OPTION_BYTES, _RDP_OPEN = 0x1FFFF800, 0xA5


#: TARGETSEL of the RP2040's core 0 DP (RP2040 datasheet 2.3.4.2): only an RP2040 answers it.
_RP2040_TARGETSEL = 0x01002927
#: RP2350: SYSINFO CHIP_ID (datasheet 12.15.1: PART 0x0004 [27:12], MANUFACTURER 0x493 [11:1],
#: bit 0; REVISION [31:28]) and OTP's CRITICAL register, the flags the chip latched from OTP
#: CRIT1 at boot (datasheet 13, table "CRITICAL"; pico-sdk hardware/regs/otp.h: OTP_BASE +
#: 0x148): SECURE_BOOT_ENABLE [0], SECURE_DEBUG_DISABLE [1], DEBUG_DISABLE [2], GLITCH_DETECTOR
#: _ENABLE [4].
_RP2350_CHIP_ID, _RP2350_PART = 0x40000000, 0x00004927
_RP2350_CRITICAL = 0x40120148
_CRIT_SECURE_BOOT, _CRIT_SECURE_DEBUG_OFF, _CRIT_DEBUG_OFF, _CRIT_GLITCH = 1 << 0, 1 << 1, 1 << 2, 1 << 4
#: pyOCD target types of chips reached through their own target's init (multi-drop or ADIv6).
_RP2350_TARGETS = ("rp2350",)


def _family(target: Optional[str]) -> str:
    from piflash.targets.rp2 import RP2040_TARGETS

    if (target or "").lower() in RP2040_TARGETS:
        return "rp2040"
    if (target or "").lower() in _RP2350_TARGETS:
        return "rp2350"
    fam = family_of(target)
    if fam is None:
        raise ProtectError(f"piflash cannot read or set read-out protection on {target or 'this target'}",
                           hint="supported: nRF51, nRF52 (APPROTECT) and STM32F1 (RDP); RP2040 has none; "
                                "RP2350: status only")
    return fam


@dataclasses.dataclass
class ProtectionStatus:
    """The read-out protection of one chip, as read from it.

    :ivar family: "nrf52", "nrf51", "stm32f1", "rp2040" (never locked: it has no protection) or
        "rp2350" (its debug locks are OTP flags: read, never set by piflash).
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

    def to_dict(self) -> dict:
        """JSON form: family, chip, state, locked, configured, detail."""
        return {"family": self.family, "chip": self.chip, "state": self.state, "locked": self.locked,
                "configured": self.configured, "detail": self.detail}


class Port:
    """Word access to the target and its APs, wherever it comes from (see :func:`session_port`
    and :func:`open_port`). Accesses raise pyOCD's ``TransferError`` family on a fault."""

    def __init__(self, dp, read32: Callable[[int], int], write32: Callable[[int, int], None],
                 write16: Callable[[int, int], None]) -> None:
        self.dp, self.read32, self.write32, self.write16 = dp, read32, write32, write16

    def read_ap(self, apsel: int, reg: int) -> int:
        """Read register ``reg`` (byte offset) of AP ``apsel`` (ADIv5 APSEL)."""
        return self.dp.read_ap((apsel << 24) | reg)

    def write_ap(self, apsel: int, reg: int, value: int) -> None:
        """Write register ``reg`` of AP ``apsel``."""
        self.dp.write_ap((apsel << 24) | reg, value)


def session_port(session) -> Port:
    """A :class:`Port` on an open, initialised pyOCD session (its target's memory interface)."""
    target = session.target
    return Port(target.dp, target.read32, target.write32, target.write16)


@contextlib.contextmanager
def open_port(unique_id: Optional[str], target: str, frequency: Optional[int] = None) -> Iterator[Port]:
    """Open the probe and power up the debug port without initialising the target (pyOCD's
    "no init" session, as its commander uses), so a locked chip can still be read and recovered.

    :param unique_id: probe unique ID (or part of one), None for the only probe.
    :param target: pyOCD target type (required: the family decides what is read).
    :param frequency: SWD clock in Hz.
    :raises NoProbeError, SeveralProbesError, ProbePermissionError, ConnectError, ProbeLostError:
    """
    from pyocd.core.session import Session
    from pyocd.coresight.ap import AccessPort, APv1Address
    from pyocd.coresight.dap import DebugPort

    from piflash.probe.discovery import select_probe
    from piflash.probe.pyocd_errors import translate_error
    from piflash.targets.connect import BASE_SESSION_OPTIONS
    from piflash.targets.rp2 import RP2040_TARGETS

    if target.lower() in RP2040_TARGETS + _RP2350_TARGETS:
        # A multi-drop part is only reached through its target's TARGETSEL sequence (pyOCD's
        # rp2040 init), an ADIv6 one through its root ROM table (pyOCD's rp2350 init): they open
        # as a pyOCD session does.
        from piflash.targets.connect import open_session

        with open_session(unique_id, target, frequency) as session:
            yield session_port(session)
        return
    probe = select_probe(unique_id)
    from piflash.targets.corrected import pyocd_name

    opts = dict(BASE_SESSION_OPTIONS, target_override=pyocd_name(target))
    if frequency:
        opts["frequency"] = int(frequency)
    session = Session(probe, auto_open=False, options=opts)
    try:
        session.open(init_board=False)
        dp = DebugPort(session.probe, session.target)
        dp.connect()
        ahb = AccessPort.create(dp, APv1Address(0))
        ahb.init()
    except BaseException as exc:
        with contextlib.suppress(Exception):
            session.close()
        if isinstance(exc, (KeyboardInterrupt, PiflashError)):
            raise
        raise translate_error(exc, "connect") from exc
    try:
        yield Port(dp, ahb.read32, ahb.write32, ahb.write16)
    finally:
        with contextlib.suppress(Exception):
            session.probe.disconnect()
        with contextlib.suppress(Exception):
            session.close()


def _faults(read: Callable[[], int]) -> bool:
    from pyocd.core.exceptions import TransferFaultError

    try:
        read()
        return False
    except TransferFaultError:
        return True


def read_status(port: Port, target: str, named_by: Optional[str] = None) -> ProtectionStatus:
    """Prove the chip is the one ``target`` names, then read its protection state. Writes nothing.

    :param named_by: who named ``target``, for the mismatch message (default ``--target``).
    :raises ProtectError: the target is not one piflash can protect.
    :raises WrongTargetError: the chip is another one (exit 10; see :func:`piflash.targets.identify.confirm`).
    :raises pyocd.core.exceptions.TransferError: the chip does not answer at all, or (STM32F1)
        FLASH_OBR cannot be read.
    """
    from piflash.targets.identify import confirm

    fam = _family(target)
    if fam == "rp2040":
        # The session reached the chip by TARGETSEL 0x01002927, which only an RP2040's core 0
        # DP answers: that is its identity. The chip has no read-out protection or debug lock
        # (RP2040 datasheet: neither section 2.3.4 "Debug" nor 2.8 "Bootrom" has one).
        return ProtectionStatus(fam, False, False, "RP2040 (answered TARGETSEL %#010x): this chip has no "
                                "read-out protection or debug lock" % _RP2040_TARGETSEL, "RP2040")
    if fam == "rp2350":
        return _rp2350_state(port, target, named_by)
    return _read_state(port, fam, confirm(port, target, named_by).name)


def _rp2350_state(port: Port, target: str, named_by: Optional[str]) -> ProtectionStatus:
    """An RP2350's debug protection, from CHIP_ID (identity) and OTP CRITICAL. The chip has no
    flash read-out protection (the flash is an external QSPI part; datasheet 10.1): what it has
    are OTP flags that close debug (CRIT1.SECURE_DEBUG_DISABLE, DEBUG_DISABLE; datasheet 3.5.9)
    and secure boot. This session read both through the Secure AHB-AP, so debug is open now
    (a flag may be set and re-opened by firmware through OTP DEBUGEN: ``configured`` and not
    ``locked``)."""
    from piflash.errors import WrongTargetError

    chip_id = port.read32(_RP2350_CHIP_ID)
    if chip_id & 0x0FFFFFFF != _RP2350_PART:
        raise WrongTargetError(f"{named_by or '--target'} says {target}, but SYSINFO CHIP_ID reads "
                               f"{chip_id:#010x}, not an RP2350's (PART 0x0004, Raspberry Pi)",
                               found="CHIP_ID %#010x" % chip_id,
                               hint="check --target, or that the probe is wired to the board you mean")
    crit = port.read32(_RP2350_CRITICAL)
    flags = [name for bit, name in ((_CRIT_SECURE_BOOT, "secure boot"), (_CRIT_SECURE_DEBUG_OFF, "Secure debug off"),
                                    (_CRIT_DEBUG_OFF, "debug off"), (_CRIT_GLITCH, "glitch detector"))
             if crit & bit]
    return ProtectionStatus("rp2350", False, bool(crit & (_CRIT_SECURE_DEBUG_OFF | _CRIT_DEBUG_OFF)),
                            f"OTP CRITICAL = {crit:#x} ({', '.join(flags) or 'no flag set'}); read through "
                            "the Secure AHB-AP, so debug is open; the flash (an external QSPI part) has "
                            "no read-out protection of its own", "RP2350 (CHIP_ID %#010x)" % chip_id)


def _read_state(port: Port, fam: str, chip: Optional[str]) -> ProtectionStatus:
    """The protection registers of family ``fam`` on a chip already identified as ``chip``."""
    if fam == "nrf52":
        value = port.read_ap(_CTRL_AP, _CTRL_APPROTECTSTATUS)
        locked = (value & 1) == 0
        configured: Optional[bool] = None
        if not locked:
            configured = port.read32(_APPROTECT) & 0xFF != 0xFF
        return ProtectionStatus(fam, locked, configured if not locked else True,
                                f"CTRL-AP APPROTECTSTATUS = {value:#x} ({'enabled' if locked else 'disabled'})",
                                chip)
    if fam == "nrf51":
        rbp = port.read32(_RBPCONF)
        locked = _faults(lambda: port.read32(0x00000000))
        return ProtectionStatus(fam, locked, (rbp >> 8) & 0xFF != 0xFF,
                                f"UICR.RBPCONF = {rbp:#010x}; flash read at 0x00000000 "
                                + ("faulted" if locked else "answered"), chip)
    from pyocd.core.exceptions import TransferError

    obr = port.read32(_OBR)
    locked = bool(obr & _OBR_RDPRT)
    detail = f"FLASH_OBR = {obr:#010x} (RDPRT={int(locked)})"
    try:                      # information only: the verdict is FLASH_OBR.RDPRT, the level in effect
        rdp: Optional[int] = port.read32(_OPTION_BYTES) & 0xFF
    except TransferError:     # a fault (a part or simulator without the block): no verdict from it
        rdp = None
    if rdp is None:
        return ProtectionStatus(fam, locked, None, detail + f", option byte RDP unreadable ({_OPTION_BYTES:#x})",
                                chip)
    return ProtectionStatus(fam, locked, rdp != _RDP_OPEN, detail + f", option byte RDP = {rdp:#04x}", chip)


def _settled_status(port: Port, before: ProtectionStatus) -> ProtectionStatus:
    """Read the state after our own reset of the chip ``before`` identified (not again: a reply
    cut short by the reset must not pass for another chip), retrying transfer errors for up to
    RESET_SETTLE seconds."""
    from pyocd.core.exceptions import TransferError

    deadline = time.monotonic() + RESET_SETTLE
    while True:
        try:
            return _read_state(port, before.family, before.chip)
        except TransferError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def check_open(session, target: str) -> Optional[ProtectionStatus]:
    """Before flashing on ``session``: raise if the chip is locked; None for a family piflash does
    not know (nothing is read then).

    :raises ProtectedError: the chip reads locked (exit code 19, with the recover hint).
    """
    if family_of(target) is None:
        return None
    status = read_status(session_port(session), target)
    if status.locked:
        raise_locked(target, status)
    return status


def raise_locked(target: str, status: ProtectionStatus):
    """Raise the :class:`ProtectedError` for a chip found locked."""
    raise locked_error(target, status)


def locked_error(target: str, status: ProtectionStatus) -> ProtectedError:
    """The :class:`ProtectedError` for a chip found locked (its hint names the recover command)."""
    return ProtectedError(f"{target} is read-out protected ({status.detail}): the debugger may not "
                          "read or write its flash", hint=recover_hint(target))


def explain_connect_error(unique_id: Optional[str], target: Optional[str],
                          frequency: Optional[int]) -> Optional[PiflashError]:
    """After a failed connect: the cause, when the chip's ID registers tell it. A chip that is not
    the one named (:class:`~piflash.errors.WrongTargetError`, exit 10, naming it), or a locked
    nRF52 (:class:`ProtectedError`, exit 20: its AHB-AP does not answer, so pyOCD cannot
    initialise it). Without ``target`` the type the probe reports is used (a DAPLink's board ID,
    a ``sim:`` board, issue 19). Returns None when nothing better is known; never raises.
    """
    from piflash.targets.identify import identify, wrong_target_error

    named_by = "--target"
    try:
        if not target:
            from piflash.probe.discovery import probe_target, select_probe

            target, named_by = probe_target(select_probe(unique_id)), "the probe's board type"
            if not target:
                return None
        with open_port(unique_id, target, frequency) as port:
            chip = identify(port)
            if chip.family is None:
                return None
            if not chip.matches(target):
                return wrong_target_error(chip, target, named_by)
            status = read_status(port, target, named_by)
    except Exception:  # noqa: BLE001  (the connect error already said what is known)
        return None
    return locked_error(target, status) if status.locked else None
def _nvmc_write(port: Port, addr: int, value: int, timeout: float = 1.0) -> None:
    port.write32(_NVMC_CONFIG, 1)                       # WEN
    port.write32(addr, value)
    _wait(lambda: port.read32(_NVMC_READY) & 1, timeout,
          f"the NVMC did not finish writing the read-out protection setting (UICR at {addr:#010x})")
    port.write32(_NVMC_CONFIG, 0)                       # REN


#: The hint of a protection write or erase that did not finish (issue 19 item 18: it said only
#: "power-cycle the board", never what state the protection is in).
_UNFINISHED_HINT = ("the read-out protection setting may or may not have been written: power-cycle the "
                    "board, then 'piflash protect status' tells whether it is locked; do not ship it "
                    "until a lock reads back locked (or a recover reads back open)")


def _wait(done: Callable[[], object], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise ProtectError(f"{what} within {timeout:g} s", hint=_UNFINISHED_HINT)
        time.sleep(0.005)


def _system_reset(port: Port, fam: str) -> None:
    if fam == "nrf52":
        port.write_ap(_CTRL_AP, _CTRL_RESET, 1)
        port.write_ap(_CTRL_AP, _CTRL_RESET, 0)
        return
    from pyocd.core.exceptions import TransferError

    with contextlib.suppress(TransferError):            # the reset may cut the reply short
        port.write32(_AIRCR, _SYSRESETREQ)
    time.sleep(0.01)


def _stm32_unlock(port: Port) -> None:
    port.write32(_KEYR, _KEY1)
    port.write32(_KEYR, _KEY2)
    port.write32(_OPTKEYR, _KEY1)
    port.write32(_OPTKEYR, _KEY2)


def _stm32_busy_wait(port: Port, timeout: float, what: str) -> None:
    _wait(lambda: not port.read32(_SR) & _SR_BSY, timeout, what)


def _stm32_cr(port: Port, set_bits: int = 0, clear_bits: int = 0) -> None:
    # Read-modify-write: writing CR.OPTWRE as 0 would drop the option-byte unlock (RM0008 3.4.4).
    port.write32(_CR, (port.read32(_CR) & ~clear_bits) | set_bits)


def _stm32_write_options(port: Port, halves, timeout: float) -> None:
    """Erase the option bytes and program ``halves`` (8 low bytes, RDP first) back."""
    _stm32_cr(port, _CR_OPTER)
    _stm32_cr(port, _CR_STRT)
    _stm32_busy_wait(port, timeout, "the option-byte erase did not finish")
    _stm32_cr(port, _CR_OPTPG, _CR_OPTER)
    for i, byte in enumerate(halves):
        if byte != 0xFF:                                # 0xFF is what the erase left
            port.write16(_OPTION_BYTES + 2 * i, byte)
            _stm32_busy_wait(port, 1.0, "an option-byte write did not finish")
    _stm32_cr(port, _CR_LOCK, _CR_OPTPG)


def lock(port: Port, target: str) -> ProtectionStatus:
    """Set read-out protection, reset so it takes effect, and read the state back. A chip that
    already reads locked is left as it is.

    :returns: the status read after the reset (locked), or before it when already locked.
    :raises ProtectError: the chip is still open after the reset (the lock did not take: the
        board must not ship), or the family is unsupported.
    :raises WrongTargetError: the chip is not the one ``target`` names: nothing is written.
    """
    fam = _family(target)
    if fam == "rp2040":
        raise ProtectError("the RP2040 has no read-out protection to set",
                           hint="its flash is readable by any debugger or by BOOTSEL mode; "
                                "an RP2350 has OTP-based secure boot")
    if fam == "rp2350":
        raise ProtectError("piflash does not program the RP2350's OTP debug flags: CRIT1.SECURE_DEBUG_DISABLE "
                           "and DEBUG_DISABLE are one-time bits that no erase clears",
                           hint="set them with Raspberry Pi's picotool ('picotool otp'), as the RP2350 "
                                "datasheet's secure boot procedure says (section 10.5); nothing was written")
    before = read_status(port, target)
    if before.locked:                                   # nothing to write (and a locked nRF52
        return before                                   # would refuse the UICR write anyway)
    if fam == "nrf52":
        _nvmc_write(port, _APPROTECT, _APPROTECT_ENABLE)
    elif fam == "nrf51":
        _nvmc_write(port, _RBPCONF, port.read32(_RBPCONF) & 0xFFFF00FF)
    else:
        from pyocd.core.exceptions import TransferError

        try:
            words = [port.read32(_OPTION_BYTES + 4 * i) for i in range(4)]
        except TransferError as exc:                    # read first: nothing is written yet
            raise ProtectError(f"cannot lock {target}: the option-byte block at {_OPTION_BYTES:#x} cannot be "
                               f"read ({exc}), and a lock programs it back with only RDP changed",
                               hint="nothing was written: the chip stays open ("
                                    f"{before.detail})") from exc
        halves = [(w >> s) & 0xFF for w in words for s in (0, 16)]
        halves[0] = 0x00                                # RDP: anything but 0xA5 is level 1
        _stm32_unlock(port)
        _stm32_write_options(port, halves, RECOVER_TIMEOUT)
    _system_reset(port, fam)
    status = _settled_status(port, before)
    if not status.locked:
        raise ProtectError(f"the lock did not take: {target} still reads open after the reset "
                           f"({status.detail})",
                           hint="do not ship this board; check the part's revision (nRF52 build "
                                "codes with hardened APPROTECT need firmware that keeps it locked) "
                                "and run 'piflash protect lock' again")
    return status


def recover(port: Port, target: str, timeout: float = RECOVER_TIMEOUT) -> ProtectionStatus:
    """Mass-erase a LOCKED chip to open it; a chip that reads open is left untouched.

    The chip is identified and its state read first: only a chip proven to be the one
    ``target`` names that reads locked is erased (never on a guess; otherwise
    :class:`~piflash.errors.WrongTargetError`, nothing erased). Then the status is read again
    after the reset.

    :param timeout: seconds the erase may take.
    :returns: the status before (if open: nothing was done) or after the recovery (open).
    :raises ProtectError: the erase did not finish within ``timeout``, or the chip still reads
        locked afterwards.
    """
    fam = _family(target)
    before = read_status(port, target)
    if not before.locked:
        return before
    if fam == "nrf52":
        port.write_ap(_CTRL_AP, _CTRL_ERASEALL, 1)
        try:
            _wait(lambda: port.read_ap(_CTRL_AP, _CTRL_ERASEALLSTATUS) == 0, timeout,
                  "the CTRL-AP ERASEALL did not finish")
        finally:
            port.write_ap(_CTRL_AP, _CTRL_ERASEALL, 0)
    elif fam == "nrf51":
        port.write32(_NVMC_CONFIG, 2)                   # EEN
        port.write32(_NVMC_ERASEALL, 1)
        _wait(lambda: port.read32(_NVMC_READY) & 1, timeout, "the NVMC ERASEALL did not finish")
        port.write32(_NVMC_CONFIG, 0)
    else:
        _stm32_unlock(port)
        halves = [_RDP_OPEN] + [0xFF] * 7
        _stm32_write_options(port, halves, timeout)
    _system_reset(port, fam)
    after = _settled_status(port, before)
    if after.locked:
        raise ProtectError(f"{target} still reads locked after the mass erase ({after.detail})",
                           hint="power-cycle the board and run 'piflash protect recover' again")
    return after


__all__ = ["ProtectionStatus", "Port", "family_of", "session_port", "open_port", "read_status",
           "check_open", "raise_locked", "locked_error", "explain_connect_error", "lock", "recover",
           "recover_hint", "RECOVER_TIMEOUT", "RECOVER_HINT"]
