"""Exceptions raised by piflash, each tied to one process exit code.

Every failure a user can cause or meet (bad firmware, a broken profile, no
probe, a flash that fails) is a :class:`PiflashError` subclass carrying an
:class:`ExitCode` and, where one exists, a hint that says what to do next.
All of them are defined here; the modules that raise them import them.
Standard library only: :mod:`piflash.probe.permissions` runs before piflash is
installed and imports this module.
The CLI prints ``message`` and ``hint`` and exits with ``exit_code``; the
Python API raises these exceptions unchanged.

The errors come in layers, one intermediate base per part of the work that fails, so that a
caller can catch "any probe error" without naming each one:

================  ==========================================================================
layer             concrete errors (exit code)
================  ==========================================================================
:class:`ProbeError`       finding, opening and talking to the probe: NoProbeError (7),
                          SeveralProbesError (8), ProbePermissionError (9), ProbeLostError (13),
                          ProbeTimeoutError (23), ProbeBusyError (24), ProbeSyntaxError (2),
                          UnsupportedError (2)
:class:`TargetError`      the chip behind the probe: ConnectError (10) and WrongTargetError (10),
                          UnknownTargetError (2), TargetRequiredError (2), PackError (2),
                          ProtectedError (20), FlashError (11) and PicobootError (11),
                          VerifyError (12), RttError (26)
:class:`ImageError`       the firmware image: FirmwareError (3), ImageRangeError (4),
                          ChecksumError (6), BundleError (28)
:class:`ConfigError`      what the user configured: ProfileError (5), UnknownOptionError (2),
                          GuardConfigError (2)
:class:`ProductionError`  the production steps after the flash: ProtectError (21),
                          SerialError (22) and ListUsedUpError (22), SerialIssuedError (25), BootCheckError (26)
:class:`RecordError`      the records: HistoryError (18), HistoryChainError (19), LedgerError (27)
:class:`HostError`        the machine piflash runs on: MemoryGuardError (14), ServiceError (16),
                          ExtraMissingError (17), SetupError (1) with NeedsRootError (9) and
                          UnknownUserError (2), StationDownError (29)
================  ==========================================================================

:class:`OperationInterrupted` (130) is no layer's: Ctrl-C can come in any of them. A layer has no
exit code of its own (it is never raised itself); each concrete error keeps its code and its
``kind`` (the class name) whatever layer it is under. FlashError keeps its meaning (erasing or
programming failed) and FirmwareError its (the file): the layers that hold them are
:class:`TargetError` (as pyOCD's ``FlashFailure`` is a ``TargetError``,
``pyocd/core/exceptions.py``) and :class:`ImageError`, so an ``except FlashError`` or ``except
FirmwareError`` catches what it always did.

The table of exit codes is documented in ``docs/exit-codes.md`` and printed
by ``piflash --help``; keep the three in step (a test checks it).
"""

from __future__ import annotations

import enum
import importlib.util
from typing import Any, Dict, Optional, Tuple


class ExitCode(enum.IntEnum):
    """Process exit status of the ``piflash`` command, one per failure class."""

    OK = 0
    INTERNAL = 1  #: a bug in piflash or pyOCD: please report it
    USAGE = 2  #: bad command line (click's own code)
    FIRMWARE = 3  #: firmware file missing, unreadable, corrupt or empty
    IMAGE_RANGE = 4  #: image data outside the target's flash
    PROFILE = 5  #: profile or station config invalid
    CHECKSUM = 6  #: firmware's SHA-256 differs from the profile's
    NO_PROBE = 7  #: no matching debug probe
    SEVERAL_PROBES = 8  #: several probes match and none was chosen
    PERMISSION = 9  #: a probe is present but may not be opened
    CONNECT = 10  #: the probe works but the target does not answer
    FLASH = 11  #: erase or program failed (protection, timeout, fault)
    VERIFY = 12  #: read-back verify found bytes that differ
    PROBE_LOST = 13  #: the probe disconnected during the operation
    MEMORY = 14  #: not enough free memory for the operation
    DOCTOR = 15  #: ``piflash doctor`` (or ``piflash setup pins``) found a problem that blocks flashing
    SERVICE = 16  #: installing or removing the systemd unit failed (not root, systemctl)
    EXTRA_MISSING = 17  #: an optional extra (``piflash[sim]``...) is not installed
    HISTORY = 18  #: the history database cannot be opened, read or written
    HISTORY_CHAIN = 19  #: ``piflash history verify-chain`` found an edited, deleted or inserted row
    PROTECTED = 20  #: the chip is read-out protected (APPROTECT, RDP): recover it first
    PROTECT_FAILED = 21  #: a lock did not take, a recover failed or timed out, or the state is unreadable
    SERIAL = 22  #: no serial number to give (counter used up) or the serial database is unusable
    PROBE_TIMEOUT = 23  #: the probe (or probe server) stopped answering within the time limit
    PROBE_BUSY = 24  #: the probe is in use by another piflash or pyOCD client
    SERIAL_ISSUED = 25  #: ``--serial N`` names a number already issued (``--force-serial`` re-issues it)
    BOOT_CHECK = 26  #: the flashed firmware did not start as the boot check expects
    LEDGER = 27  #: the central ledger (PostgreSQL) cannot be reached or written
    BUNDLE = 28  #: a job bundle refused: unsigned, signer not allowed, changed, another target, rolled back
    STATION_DOWN = 29  #: ``piflash station status``: no station runs (no status file, or its process is gone)
    INTERRUPTED = 130  #: Ctrl-C or SIGTERM (128 + SIGINT)
    PIPE_CLOSED = 141  #: stdout was closed by its reader (``| head``): 128 + SIGPIPE, what a shell reports


#: One line per exit code, for ``--help`` and the docs.
EXIT_CODE_HELP = {
    ExitCode.OK: "success",
    ExitCode.INTERNAL: "internal error (a bug: please report it)",
    ExitCode.USAGE: "usage error",
    ExitCode.FIRMWARE: "firmware file missing, unreadable, corrupt or empty",
    ExitCode.IMAGE_RANGE: "image data outside the target's flash",
    ExitCode.PROFILE: "invalid profile",
    ExitCode.CHECKSUM: "firmware SHA-256 differs from the profile",
    ExitCode.NO_PROBE: "no debug probe found",
    ExitCode.SEVERAL_PROBES: "several probes found; choose one with --probe",
    ExitCode.PERMISSION: "probe present but not accessible (permissions)",
    ExitCode.CONNECT: "could not connect to the target",
    ExitCode.FLASH: "erase or program failed",
    ExitCode.VERIFY: "verify mismatch",
    ExitCode.PROBE_LOST: "probe disconnected during the operation",
    ExitCode.MEMORY: "not enough free memory",
    ExitCode.DOCTOR: "doctor (or setup pins) found a problem that blocks flashing",
    ExitCode.SERVICE: "installing or removing the station service failed",
    ExitCode.EXTRA_MISSING: "an optional extra is not installed",
    ExitCode.HISTORY: "the history database cannot be opened or written",
    ExitCode.HISTORY_CHAIN: "the history's hash chain is broken (a row was edited, deleted or inserted)",
    ExitCode.PROTECTED: "chip is read-out protected; 'piflash protect recover' unlocks it (erasing it)",
    ExitCode.PROTECT_FAILED: "lock, recover or protection read-back failed",
    ExitCode.SERIAL: "no serial number available (counter used up, serial database unusable)",
    ExitCode.PROBE_TIMEOUT: "the probe did not answer in time",
    ExitCode.PROBE_BUSY: "the probe is in use by another client",
    ExitCode.SERIAL_ISSUED: "serial number already issued to a board (--force-serial re-issues it)",
    ExitCode.BOOT_CHECK: "the board did not pass its boot check (no expected output, a fault, a timeout)",
    ExitCode.LEDGER: "the central ledger (PostgreSQL) cannot be reached or written",
    ExitCode.BUNDLE: "job bundle refused (unsigned, signer not allowed, changed, another target, older version)",
    ExitCode.STATION_DOWN: "the station is not running (no status file, or its process is gone)",
    ExitCode.INTERRUPTED: "interrupted",
    ExitCode.PIPE_CLOSED: "output cut short: the program reading it (e.g. head) closed the pipe",
}


class PiflashError(Exception):
    """Base of every error piflash reports to a user.

    :param message: one sentence saying what went wrong.
    :param hint: optional advice on what to do about it.
    :cvar exit_code: the process exit code (:class:`ExitCode`) of this kind of error.
    :ivar result: what the failed operation got as far as, an object with ``to_dict()`` that the
        CLI prints with ``--json`` beside the error (:func:`piflash.cli.options.emit_error`): the
        job's :class:`piflash.record.result.OperationResult`, set by
        :func:`piflash.jobs.workflow.tracking` when a job fails; a
        :class:`piflash.record.chain.ChainReport` for :class:`HistoryChainError`. None (the class
        default) when the error came before any operation began.
    """

    exit_code: ExitCode = ExitCode.INTERNAL
    result: Optional[Any] = None

    def __init__(self, message: str, hint: Optional[str] = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def to_dict(self) -> dict:
        """The error as a JSON-friendly dict: ``kind``, ``message``, ``hint``, ``exit_code``."""
        return {
            "kind": type(self).__name__,
            "message": self.message,
            "hint": self.hint,
            "exit_code": int(self.exit_code),
        }


class ProbeError(PiflashError):
    """Layer of the errors in finding, opening and talking to the probe (or PICOBOOT device): none,
    several, no permission, busy, lost, silent, a malformed ID, or a job the probe's transport
    does not do. Never raised itself; catch it to catch any of them."""


class TargetError(PiflashError):
    """Layer of the errors of the chip behind the probe: it does not answer, is another chip than
    named, is unknown or unnamed, is read-out protected, its flash failed to erase, program or
    verify, no RTT block on it. Never raised itself."""


class ImageError(PiflashError):
    """Layer of the errors of the firmware image: the file (FirmwareError), its place in the
    target's flash (ImageRangeError), its checksum (ChecksumError). Never raised itself."""


class ConfigError(PiflashError):
    """Layer of the errors in what the user configured: a profile or station config, a pyOCD
    session option, the memory guard's setting. Never raised itself."""


class ProductionError(PiflashError):
    """Layer of the errors of the production steps a job adds to the flash: read-out protection,
    serial numbers, the boot check. Never raised itself."""


class RecordError(PiflashError):
    """Layer of the errors of the records: the history database, its hash chain, the central
    ledger. Never raised itself."""


class HostError(PiflashError):
    """Layer of the errors of the machine piflash runs on: free memory, the systemd unit, optional
    extras, the permissions setup. Never raised itself."""


class FirmwareError(ImageError):
    """The firmware file is missing, unreadable, corrupt, empty or of an unknown format."""

    exit_code = ExitCode.FIRMWARE


class ImageRangeError(ImageError):
    """Image data lies outside the target's flash regions.

    :ivar address: first address (int) that is not inside a flash region.
    """

    exit_code = ExitCode.IMAGE_RANGE

    def __init__(self, message: str, address: int, hint: Optional[str] = None) -> None:
        super().__init__(message, hint)
        self.address = address


class ProfileError(ConfigError):
    """A profile (or station config) is invalid.

    :param path: the YAML file at fault (str), or None.
    :param line: 1-based line number in that file, or None.
    :param key: the key at fault (dotted for nested keys), or None.
    """

    exit_code = ExitCode.PROFILE

    def __init__(
        self,
        message: str,
        path: Optional[str] = None,
        line: Optional[int] = None,
        key: Optional[str] = None,
        hint: Optional[str] = None,
    ) -> None:
        where = ""
        if path:
            where = f"{path}:{line}: " if line else f"{path}: "
        if key:
            where += f"key '{key}': "
        super().__init__(where + message, hint)
        self.path = path
        self.line = line
        self.key = key


class ChecksumError(ImageError):
    """The firmware's SHA-256 differs from the one its profile pins."""

    exit_code = ExitCode.CHECKSUM


class NoProbeError(ProbeError):
    """No debug probe (matching the requested unique ID) was found."""

    exit_code = ExitCode.NO_PROBE


class SeveralProbesError(ProbeError):
    """Several probes are attached and none was chosen.

    :ivar unique_ids: list of the unique IDs (str) seen.
    """

    exit_code = ExitCode.SEVERAL_PROBES

    def __init__(self, message: str, unique_ids: list, hint: Optional[str] = None) -> None:
        super().__init__(message, hint)
        self.unique_ids = list(unique_ids)


class ProbePermissionError(ProbeError):
    """A probe is attached but this user may not open it."""

    exit_code = ExitCode.PERMISSION


class ConnectError(TargetError):
    """The probe opened but the target did not answer (unpowered, absent, locked, wrong type)."""

    exit_code = ExitCode.CONNECT


class WrongTargetError(ConnectError):
    """The chip behind the probe is not the one ``--target`` names (its ID registers say so):
    nothing was read as protection and nothing was written.

    :ivar found: what the chip was identified as (str, e.g. "nRF52840").
    :ivar suggested: the pyOCD target type to use instead (str), or None when piflash cannot tell.
    """

    def __init__(self, message: str, found: str, suggested: Optional[str] = None, hint: Optional[str] = None) -> None:
        super().__init__(message, hint)
        self.found = found
        self.suggested = suggested


class FlashError(TargetError):
    """Erasing or programming failed.

    :ivar address: address (int) pyOCD reported for the failure, or None.
    """

    exit_code = ExitCode.FLASH

    def __init__(self, message: str, address: Optional[int] = None, hint: Optional[str] = None) -> None:
        super().__init__(message, hint)
        self.address = address


class PicobootError(FlashError):
    """A Pico's boot ROM refused a PICOBOOT command (:mod:`piflash.probe.picoboot`).

    :ivar command: the command's name (str, e.g. ``"FLASH_ERASE"``).
    :ivar status: the ROM's status code (int; RP2040 datasheet 2.8.5.5).
    :ivar status_name: its name (str, e.g. ``"INVALID_ADDRESS"``).
    """

    def __init__(self, command: str, status: int, status_name: str, message: str, hint: Optional[str] = None) -> None:
        super().__init__(message, hint=hint)
        self.command = command
        self.status = status
        self.status_name = status_name


class VerifyError(TargetError):
    """Read-back verify found flash contents that differ from the image.

    :ivar first_address: lowest differing address (int).
    :ivar differing_bytes: number of bytes (int) that differ.
    """

    exit_code = ExitCode.VERIFY

    def __init__(self, message: str, first_address: int, differing_bytes: int, hint: Optional[str] = None) -> None:
        super().__init__(message, hint)
        self.first_address = first_address
        self.differing_bytes = differing_bytes


class ProbeLostError(ProbeError):
    """The probe disconnected (unplugged, reset, USB error) during an operation."""

    exit_code = ExitCode.PROBE_LOST


class MemoryGuardError(HostError):
    """The machine has too little free memory for the requested operation."""

    exit_code = ExitCode.MEMORY


class OperationInterrupted(PiflashError):
    """The operation was interrupted (Ctrl-C or SIGTERM)."""

    exit_code = ExitCode.INTERRUPTED


class ProtectedError(TargetError):
    """The chip is read-out protected (nRF APPROTECT, STM32 RDP level 1): the debugger may not read
    or write its flash until ``piflash protect recover`` mass-erases it."""

    exit_code = ExitCode.PROTECTED


class ProtectError(ProductionError):
    """Setting, clearing or reading read-out protection failed: a lock that did not take (the chip
    is still open), a recover that timed out or left the chip locked, or a target without support."""

    exit_code = ExitCode.PROTECT_FAILED


class SerialError(ProductionError):
    """No serial number can be given: the counter is used up, the serial database cannot be
    opened or written, or a one-off ``--serial`` does not fit the profile's encoding."""

    exit_code = ExitCode.SERIAL


class ListUsedUpError(SerialError):
    """A profile's list of per-unit values (``list:``, docs/production.md) has no row left for
    the next board: every row is used or held by another station. The station stops before it
    touches another board."""


class SerialIssuedError(ProductionError):
    """A ``--serial N`` names a number already issued (pass, fail or interrupted) to a board: by the
    counter (the serial database) or by an earlier one-off (the history). ``--force-serial`` is
    the deliberate re-issue.

    :ivar serial: the number (int).
    :ivar issued: where it was found, a list of dicts (see :func:`piflash.production.serials.find_issued`).
    """

    exit_code = ExitCode.SERIAL_ISSUED

    def __init__(self, message: str, serial: int, issued: list, hint: Optional[str] = None) -> None:
        super().__init__(message, hint)
        self.serial = serial
        self.issued = list(issued)


class ServiceError(HostError):
    """Installing or removing the station's systemd unit failed (not root, systemctl failed)."""

    exit_code = ExitCode.SERVICE


class StationDownError(HostError):
    """``piflash station status`` found no running station: no status file where the station
    writes it, or one whose process (its ``pid``, on this host) is gone."""

    exit_code = ExitCode.STATION_DOWN


class UnknownTargetError(TargetError):
    """The target type is not one pyOCD knows (builtin or from an installed pack)."""

    exit_code = ExitCode.USAGE


class TargetRequiredError(TargetError):
    """No target type was given and the probe does not know which target it is wired to."""

    exit_code = ExitCode.USAGE


class PackError(TargetError):
    """A CMSIS pack given with ``-O pack=FILE`` (or a profile's ``pack``) cannot be read: missing,
    not a zip or pack directory, no ``.pdsc`` in it, or a ``.pdsc`` that is not valid."""

    exit_code = ExitCode.USAGE


class UnknownOptionError(ConfigError):
    """A pyOCD session option that pyOCD does not know, or a value of the wrong type."""

    exit_code = ExitCode.USAGE


class ProbeSyntaxError(ProbeError):
    """A probe unique ID that cannot be right, e.g. ``remote:HOST:PORT`` with a PORT that is not a number."""

    exit_code = ExitCode.USAGE


class UnsupportedError(ProbeError):
    """The probe named reaches its board through a transport that does not do what was asked (a
    chip erase, a lock, RTT... over PICOBOOT): refused before the probe is opened, nothing was
    touched. Raised by :func:`piflash.jobs.transports.require`, the one place that decides it.

    :ivar transport: the transport's name (str, ``"picoboot"``; see
        :data:`piflash.jobs.transports.TRANSPORTS`).
    :ivar capability: what it does not do (str, a field of
        :class:`piflash.jobs.transports.TransportCaps`, e.g. ``"chip_erase"``).
    """

    exit_code = ExitCode.USAGE

    def __init__(self, message: str, transport: str, capability: str, hint: Optional[str] = None) -> None:
        super().__init__(message, hint)
        self.transport = transport
        self.capability = capability


class ProbeTimeoutError(ProbeError):
    """The probe (or a remote probe server) accepted the connection but did not answer in time.

    :ivar seconds: the time limit (float, seconds) that expired, or None.
    :ivar reached_target: whether a request that reaches the target (an SWD transfer, a reset)
        was answered before the silence: False for a server silent from the start, so nothing
        was done to any board; None when unknown (taken as reached).
    """

    exit_code = ExitCode.PROBE_TIMEOUT

    def __init__(self, message: str, seconds: Optional[float] = None, hint: Optional[str] = None) -> None:
        super().__init__(message, hint)
        self.seconds = seconds
        self.reached_target: Optional[bool] = None


class ProbeBusyError(ProbeError):
    """The probe is open in another client (another piflash or pyOCD on the same probe server)."""

    exit_code = ExitCode.PROBE_BUSY


class ExtraMissingError(HostError):
    """An optional part of piflash is used but its extra is not installed.

    :ivar extra: the extra's name (str), e.g. ``"sim"`` for ``piflash[sim]``.
    :ivar module: the missing top-level module (str), e.g. ``"unicorn"``.
    """

    exit_code = ExitCode.EXTRA_MISSING

    def __init__(self, message: str, extra: str, module: str, hint: Optional[str] = None) -> None:
        super().__init__(message, hint)
        self.extra = extra
        self.module = module


class SetupError(HostError):
    """The permissions setup (:mod:`piflash.probe.permissions`) cannot run or a system tool failed."""

    exit_code = ExitCode.INTERNAL


class NeedsRootError(SetupError):
    """The permissions setup changes system files and was started without root."""

    exit_code = ExitCode.PERMISSION


class UnknownUserError(SetupError):
    """The user to add to the probe group does not exist in the root's ``etc/passwd``."""

    exit_code = ExitCode.USAGE


class GuardConfigError(ConfigError):
    """``PIFLASH_MEMORY_GUARD`` (or a ``mode`` argument) has a value other than refuse|warn|off."""

    exit_code = ExitCode.USAGE


#: piflash's optional extras (pyproject.toml ``[project.optional-dependencies]``): extra name ->
#: (the top-level module it brings, what needs it, how to install it).
EXTRAS: Dict[str, Tuple[str, str, str]] = {
    "sim": (
        "unicorn",
        "the simulator",
        "with scripts/install.sh: 'bash scripts/install.sh --with-sim'; in a development "
        "checkout's venv: pip install 'piflash[sim]'",
    ),
    "gpio": ("gpiozero", "the station's GPIO support", "pip install 'piflash[gpio]' into piflash's venv"),
    "metrics": (
        "prometheus_client",
        "the station's Prometheus metrics",
        "with scripts/install.sh: 'bash scripts/install.sh --with-metrics'; or pip install "
        "'piflash[metrics]' into piflash's venv (prometheus-client, pure Python)",
    ),
    "ledger": (
        "psycopg",
        "the central ledger on PostgreSQL",
        "with scripts/install.sh: 'bash scripts/install.sh --with-ledger' (psycopg over Debian's libpq5); "
        "or sudo apt-get install libpq5, then pip install 'piflash[ledger]' into piflash's venv",
    ),
    "pins": (
        "periphery",
        "SWD from the Pi's own pins (spidev: and gpio: probes)",
        "with scripts/install.sh: 'bash scripts/install.sh --with-pins'; or pip install 'piflash[pins]' "
        "into piflash's venv (python-periphery, pure Python)",
    ),
    "web": (
        "uvicorn",
        "the station's operator page (web_port:)",
        "pip install 'piflash[web]' into piflash's venv (Starlette and uvicorn, pure Python)",
    ),
}


def output_closed(exc: BaseException) -> bool:
    """Whether ``exc`` is a BrokenPipeError from this process's own output: its stdout or stderr
    is a pipe whose reader has gone (``piflash flash fw.hex | head -c 1``), not a socket to a
    probe server that closed. poll(2) reports POLLERR for the writing end of a pipe with no reader
    (Linux ``pipe_poll``, fs/pipe.c); a socket's broken connection does not touch these two.

    :param exc: any exception.
    :returns: True only for a BrokenPipeError while stdout or stderr is such a pipe.
    """
    if not isinstance(exc, BrokenPipeError):
        return False
    import select
    import sys

    for stream in (sys.stdout, sys.stderr):
        try:
            fd = stream.fileno()
        except (AttributeError, OSError, ValueError):
            continue
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        if any(events & select.POLLERR for _, events in poller.poll(0)):
            return True
    return False


def extra_available(extra: str) -> bool:
    """Whether the module of optional extra ``extra`` (a key of :data:`EXTRAS`) can be found,
    checked without importing it (so a heavy module costs nothing here)."""
    try:
        return importlib.util.find_spec(EXTRAS[extra][0]) is not None
    except (ImportError, ValueError):
        return False


def extra_missing(extra: str, detail: str = "") -> ExtraMissingError:
    """The :class:`ExtraMissingError` for optional extra ``extra`` (a key of :data:`EXTRAS`).

    :param detail: appended to the message, e.g. the import error's text.
    """
    module, purpose, how = EXTRAS[extra]
    why = f"{module} cannot be imported: {detail}" if detail else f"{module} is not installed"
    return ExtraMissingError(
        f"{purpose} is not installed (piflash's '{extra}' extra: {why})",
        extra=extra,
        module=module,
        hint=f"install it {how}",
    )


def extra_for_module(module: Optional[str]) -> Optional[str]:
    """The extra (str) whose module is ``module`` or a submodule of it, or None."""
    top = (module or "").split(".")[0]
    return next((name for name, (mod, _, _) in EXTRAS.items() if mod == top), None)


class BootCheckError(ProductionError):
    """The firmware was flashed and verified, but the board did not pass its boot check after the
    reset (:mod:`piflash.production.bootcheck`): the text never came, the wrong semihosting exit
    status, a HardFault, a locked-up core, or the timeout.

    :ivar boot_result: the :class:`piflash.production.bootcheck.BootResult` (what was seen, the
        captured output, the stacked PC of a fault). It is not :attr:`PiflashError.result`, the
        job's :class:`~piflash.record.result.OperationResult` (which carries the BootResult's
        ``to_dict()`` in its ``boot_check``): formerly both went by ``result``, and the job
        overwrote the first with the second.
    """

    exit_code = ExitCode.BOOT_CHECK

    def __init__(self, message: str, boot_result, hint: Optional[str] = None) -> None:
        super().__init__(message, hint)
        self.boot_result = boot_result


class RttError(TargetError):
    """``piflash rtt`` found no RTT control block on the target in time."""

    exit_code = ExitCode.BOOT_CHECK


class LedgerError(RecordError):
    """The central ledger's database (PostgreSQL, :mod:`piflash.record.ledger`) cannot be reached
    or written; a station goes on locally, queueing its rows."""

    exit_code = ExitCode.LEDGER


class LedgerConflictError(LedgerError):
    """The central ledger refuses this history's rows: the station's name is registered there to
    another machine or history (a twin name; the fix: another name, or ``piflash ledger
    takeover``), or a row of the same key holds other content (another ``row_hash``). Same exit
    code as :class:`LedgerError`; a station logs it and keeps the rows queued."""


class HistoryError(RecordError):
    """The history database cannot be opened, read or written (path, permissions, disk full,
    corrupt, or made by a newer piflash)."""

    exit_code = ExitCode.HISTORY


class HistoryChainError(RecordError):
    """``piflash history verify-chain`` found a row that was edited, deleted or inserted.

    :ivar report: the :class:`piflash.record.chain.ChainReport`; it is also :attr:`PiflashError.result`,
        so that ``--json`` prints the report and the error in one object.
    """

    exit_code = ExitCode.HISTORY_CHAIN

    def __init__(self, message: str, report, hint: Optional[str] = None) -> None:
        super().__init__(message, hint)
        self.report = report
        self.result = report


class BundleError(ImageError):
    """A job bundle (``JOB.pfb``, :mod:`piflash.bundle`) is refused before any probe is opened:
    malformed or hostile, unsigned, signed by a key the allowed signers do not hold, changed after
    signing, for another target, older than the version its line last accepted here, or asking
    for a count limit (``max_boards``) this station cannot enforce; or a station that only takes
    signed firmware was given a plain profile (docs/bundles.md)."""

    exit_code = ExitCode.BUNDLE
