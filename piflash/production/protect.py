"""Read-out protection: read it, set it (lock) and clear it (recover) on nRF51, nRF52 and STM32F1.

What each family reads and writes is the family's (:mod:`piflash.targets.families`: nRF52
UICR.APPROTECT and CTRL-AP, nRF51 UICR.RBPCONF and NVMC ERASEALL, STM32F1 option byte RDP and
FLASH_OBR; the RP2040 has none, the RP2350's OTP flags are read, never set): this module is the
flow around it.

Safety rules (pyOCD issue #1766 is the counter-example: a misread APPROTECT wiped boards):
:func:`read_status` first proves that the chip is the one the target type names
(:func:`piflash.targets.identify.confirm`: a wrong ``--target`` is exit 10 naming the chip found, never
"locked"), so a verdict only comes from a register that exists on that chip; it never
writes anything that erases; :func:`recover` reads the state first and erases only an identified
chip that reads locked; :func:`lock` reads the state back after the reset and raises
:class:`~piflash.errors.ProtectError` if the chip is still open, so an unlocked board is never
reported as locked.

Two ways to the chip: on an open, initialised pyOCD session (the flash workflow: the pre-flash check and
the post-verify lock) through :func:`session_port`, and without target initialisation through
:func:`open_port` (``piflash protect``), which works on a locked nRF52 whose AHB-AP does not
answer. Both use pyOCD's public ``DebugPort`` / ``AccessPort`` API. No click, no rich.
"""

from __future__ import annotations

import contextlib
import time
from typing import Iterator, Optional

from piflash.errors import PiflashError, ProtectedError, ProtectError
from piflash.targets.families import Port, ProtectionStatus, family_for, family_named, protection_status
from piflash.targets.identify import family_of

#: How long a recover's erase may take, seconds (pyOCD's nRF52 MASS_ERASE_TIMEOUT is 15 s; an
#: STM32F1 mass erase takes at most 40 ms per the datasheet, the option erase a few more).
RECOVER_TIMEOUT = 15.0
#: How long the chip may take to answer again after a reset, seconds.
RESET_SETTLE = 1.0

#: The hint every "chip is locked" message carries (:func:`recover_hint` adds the target type).
RECOVER_HINT = (
    "'piflash protect recover' unlocks it by mass-erasing the chip (flash, and on nRF "
    "the UICR): only do so if the board's contents may be lost"
)


def recover_hint(target: Optional[str]) -> str:
    """:data:`RECOVER_HINT` with the command to run for ``target`` (``protect`` needs the type)."""
    if not target:
        return RECOVER_HINT
    return RECOVER_HINT.replace("'piflash protect recover'", f"'piflash protect recover --target {target}'")


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

    if family_for(target).needs_target_init:
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


def read_status(port: Port, target: str, named_by: Optional[str] = None) -> ProtectionStatus:
    """Prove the chip is the one ``target`` names, then read its protection state. Writes nothing.
    :func:`piflash.targets.families.protection_status`.

    :param named_by: who named ``target``, for the mismatch message (default ``--target``).
    :raises ProtectError: the target is not one piflash can protect.
    :raises WrongTargetError: the chip is another one (exit 10; see :func:`piflash.targets.identify.confirm`).
    :raises pyocd.core.exceptions.TransferError: the chip does not answer at all, or (STM32F1)
        FLASH_OBR cannot be read.
    """
    return protection_status(port, target, named_by)


def _settled_status(port: Port, before: ProtectionStatus) -> ProtectionStatus:
    """Read the state after our own reset of the chip ``before`` identified (not again: a reply
    cut short by the reset must not pass for another chip), retrying transfer errors for up to
    RESET_SETTLE seconds."""
    from pyocd.core.exceptions import TransferError

    deadline = time.monotonic() + RESET_SETTLE
    while True:
        try:
            return family_named(before.family).read_protection(port, before.chip)
        except TransferError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def check_open(session, target: str) -> Optional[ProtectionStatus]:
    """Before flashing on ``session``: raise if the chip is locked; None for a family piflash does
    not know (nothing is read then).

    :raises ProtectedError: the chip reads locked (exit code 19, with the recover hint).
    """
    if not family_for(target).read_out_protection:
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
    return ProtectedError(
        f"{target} is read-out protected ({status.detail}): the debugger may not read or write its flash",
        hint=recover_hint(target),
    )


def explain_connect_error(
    unique_id: Optional[str], target: Optional[str], frequency: Optional[int]
) -> Optional[PiflashError]:
    """After a failed connect: the cause, when the chip's ID registers tell it. A chip that is not
    the one named (:class:`~piflash.errors.WrongTargetError`, exit 10, naming it), or a locked
    nRF52 (:class:`ProtectedError`, exit 20: its AHB-AP does not answer, so pyOCD cannot
    initialise it). Without ``target`` the type the probe reports is used (a DAPLink's board ID,
    a ``sim:`` board). Returns None when nothing better is known; never raises.
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


def lock(port: Port, target: str) -> ProtectionStatus:
    """Set read-out protection, reset so it takes effect, and read the state back. A chip that
    already reads locked is left as it is.

    :returns: the status read after the reset (locked), or before it when already locked.
    :raises ProtectError: the chip is still open after the reset (the lock did not take: the
        board must not ship), or the family is unsupported.
    :raises WrongTargetError: the chip is not the one ``target`` names: nothing is written.
    """
    family = family_for(target)
    family.check_lock(target)
    before = read_status(port, target)
    if before.locked:  # nothing to write (and a locked nRF52
        return before  # would refuse the UICR write anyway)
    family.write_lock(port, target, before, RECOVER_TIMEOUT)
    family.system_reset(port)
    status = _settled_status(port, before)
    if not status.locked:
        raise ProtectError(
            f"the lock did not take: {target} still reads open after the reset ({status.detail})",
            hint="do not ship this board; check the part's revision (nRF52 build "
            "codes with hardened APPROTECT need firmware that keeps it locked) "
            "and run 'piflash protect lock' again",
        )
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
    family = family_for(target)
    before = read_status(port, target)
    if not before.locked:
        return before
    family.mass_erase(port, timeout)
    family.system_reset(port)
    after = _settled_status(port, before)
    if after.locked:
        raise ProtectError(
            f"{target} still reads locked after the mass erase ({after.detail})",
            hint="power-cycle the board and run 'piflash protect recover' again",
        )
    return after


__all__ = [
    "ProtectionStatus",
    "Port",
    "family_of",
    "session_port",
    "open_port",
    "read_status",
    "check_open",
    "raise_locked",
    "locked_error",
    "explain_connect_error",
    "lock",
    "recover",
    "recover_hint",
    "RECOVER_TIMEOUT",
    "RECOVER_HINT",
]
