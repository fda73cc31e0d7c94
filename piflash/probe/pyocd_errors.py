"""pyOCD's exceptions as piflash's errors: each with its exit code, its cause and a true hint.

pyOCD is imported inside the functions.
"""

from __future__ import annotations

import errno
import logging
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    from pyocd.probe.debug_probe import DebugProbe

from piflash.errors import (
    ConnectError,
    FlashError,
    PiflashError,
    ProbeBusyError,
    ProbeLostError,
    ProbePermissionError,
    extra_for_module,
    extra_missing,
    output_closed,
)

LOG = logging.getLogger(__name__)


def _extra_of_import_error(exc: ImportError) -> Optional[str]:
    """The optional extra whose module failed to import in ``exc`` (by name, else by traceback)."""
    extra = extra_for_module(getattr(exc, "name", None))
    if extra:
        return extra
    import os
    import traceback

    from piflash.errors import EXTRAS

    for frame in traceback.extract_tb(exc.__traceback__):
        parts = frame.filename.split(os.sep)
        for name, (module, _, _) in EXTRAS.items():
            if module in parts:
                return name
    return None


def translate_error(exc: BaseException, phase: str) -> PiflashError:
    """Turn a pyOCD (or USB/socket) exception raised during ``phase`` into a :class:`PiflashError`.

    The message never carries Python's own exception text (``KeyError: 1``): an exception that
    is not pyOCD's or the OS's is a failure inside pyOCD's code, reported as such (its traceback
    is logged at debug level, shown by ``piflash -vv``).

    A BrokenPipeError from this process's own closed stdout or stderr (a reader such as ``head``
    went away while the progress was written) is not the probe's: it is raised again as it is,
    for the command line to end quietly with exit 141 (:func:`piflash.errors.output_closed`).

    :param phase: what was being done (``"connect"``, ``"erase"``, ``"program"``, ``"verify"``...).
    :raises BrokenPipeError: ``exc`` itself, when it is the closed output's.
    """
    from pyocd.core import exceptions as pe

    if output_closed(exc):
        raise exc

    if isinstance(exc, PiflashError):
        return exc
    LOG.debug("%s failed", phase, exc_info=exc)
    if isinstance(exc, ImportError):
        extra = _extra_of_import_error(exc)
        if extra:
            return extra_missing(extra, str(exc))
    text = str(exc) or type(exc).__name__
    foreign = not isinstance(exc, (pe.Error, OSError))  # KeyError, AttributeError... from pyOCD's code
    # ENODEV: libusb's LIBUSB_ERROR_NO_DEVICE, which pyusb raises as USBError when a USB probe is
    # unplugged in the middle of a transfer (pyOCD's CMSIS-DAP driver lets it through).
    if (
        isinstance(exc, pe.ProbeDisconnected)
        or isinstance(exc, (ConnectionError, BrokenPipeError))
        or getattr(exc, "errno", None) == errno.ENODEV
    ):
        # A socket error is a remote: probe's (pyOCD's USB drivers raise ProbeDisconnected or ENODEV):
        # its cable is a network connection, not USB.
        remote = isinstance(exc, (ConnectionError, BrokenPipeError)) or "probe server" in text
        hint = (
            "the probe server (remote:HOST:PORT) closed the connection: is it still running, "
            "and the network up? Start it again, then run the command again"
            if remote
            else "check the USB cable and power, then run the command again"
        )
        return ProbeLostError(f"the probe disconnected during {phase}: {text}", hint=hint)
    if isinstance(exc, pe.ProbeError) and "in use by another" in text:
        # 'piflash sim serve' refuses a second client this way (over the remote protocol the text
        # follows "error received from server ... (status code 3): "); a local simulated board
        # held by another session for longer than its 10 s wait says so too.
        return ProbeBusyError(
            text.rsplit("): ", 1)[-1],
            hint="wait until the other piflash (or pyOCD) using this probe has finished, then run the command again",
        )
    if (
        getattr(exc, "errno", None) in (errno.EACCES, errno.EPERM)
        or "Access denied" in text
        or "insufficient permissions" in text.lower()
    ):
        from piflash.probe.permissions import setup_command

        return ProbePermissionError(
            f"permission denied opening the probe: {text}",
            hint=f"run 'piflash doctor'; the fix is '{setup_command()}' "
            "(udev rules and the plugdev group), not running as root",
        )
    if isinstance(exc, pe.FlashFailure):
        addr = getattr(exc, "address", None)
        where = f" at {addr:#010x}" if addr is not None else ""
        code = getattr(exc, "result_code", None)
        extra = f" (algorithm result {code:#x})" if code is not None else ""
        if "timed out" in text:
            hint = (
                "the flash controller did not finish: power-cycle the board and try again; "
                "if it keeps timing out the part may be locked or damaged"
            )
        elif "flash program failed: the core" in text:  # piflash.flashing.multipage's run calls
            hint = (
                "the target's core did not run the flash algorithm to its end (a fault, a "
                "halt from another debugger, or its RAM changed while it ran): power-cycle "
                "the board and flash again; if it recurs, report it with the output of "
                "'piflash -vv flash ...'"
            )
        else:
            hint = (
                "the sector may be write-protected (STM32: the WRP option bytes, which a chip "
                "erase does not clear; nRF: NVMC BPROT/ACL) or the flash worn: remove the "
                "protection, then flash again"
            )
        return FlashError(f"{phase} failed{where}: {text}{extra}", address=addr, hint=hint)
    if isinstance(exc, pe.TargetSupportError):
        return ConnectError(
            f"target support problem during {phase}: {text}", hint="check --target ('piflash targets' lists them)"
        )
    if phase in ("connect", "list probes"):
        if isinstance(exc, OSError):
            return ConnectError(
                f"cannot reach the probe: {text}", hint="for remote:HOST:PORT, is the probe server running?"
            )
        if foreign:
            return ConnectError(
                "cannot connect to the target: pyOCD's connect sequence failed (run with -vv for its details)",
                hint="is --target right for this chip, the board powered and seated, "
                "SWD wired (SWDIO, SWCLK, GND)? A lower --frequency can help",
            )
        return ConnectError(
            f"cannot connect to the target: {text}",
            hint="is the board powered and seated, SWD wired (SWDIO, SWCLK, GND), "
            "and --target right? A lower --frequency can help",
        )
    if isinstance(exc, (pe.TransferError, pe.TimeoutError)):
        return FlashError(
            f"{phase} failed: {text}",
            address=getattr(exc, "fault_address", None),
            hint="the target stopped answering: check power and wiring, then flash again",
        )
    if isinstance(exc, pe.Error):
        return FlashError(f"{phase} failed: {text}")
    return PiflashError(
        f"unexpected error inside pyOCD during {phase} ({type(exc).__name__})",
        hint="run the command again with -vv and report the output as a bug",
    )


def probe_gone(probe: DebugProbe) -> Optional[PiflashError]:
    """After a failed connect: whether the probe itself has vanished or stopped answering (one DP
    read, DPIDR), as a ProbeLostError or ProbeTimeoutError; None when it still answers.

    pyOCD's AP discovery logs and swallows what goes wrong ("No cores were discovered!", or a
    target's connect sequence missing its AP), so the failure that reaches piflash names the
    consequence; asking the probe once tells the cause.
    """
    from pyocd.core.exceptions import ProbeDisconnected

    try:
        probe.read_dp(0)
    except ProbeDisconnected:
        remote = str(getattr(probe, "unique_id", "")).startswith("remote:")
        return ProbeLostError(
            "the probe disconnected during connect (it stopped answering in the first requests)",
            hint=("is the probe server still running, and the network up? Start it again, then run the command again")
            if remote
            else "check the USB cable and power, then run the command again",
        )
    except PiflashError as exc:  # e.g. the remote probe's bounded wait expired during discovery
        return exc
    except Exception:  # noqa: BLE001  (any other answer: the probe is still there)
        return None
    return None


__all__ = ["probe_gone", "translate_error"]
