"""Open a pyOCD session on a target through the probe chosen, with errors that say what to do.

pyOCD is imported inside the functions. A probe is named by a probe selector
(:mod:`piflash.probe.selector`: a USB serial number, ``sim:<board>`` for a simulated board,
``remote:HOST:PORT`` for pyOCD's remote probe protocol), which matches a whole unique ID or a
prefix written as one (``0240*``); unlike pyOCD's ``--uid``, never a part of an ID. pyOCD's
``Session`` is handed the chosen probe object, never the ID string.
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING, Any, Dict, Iterator, Optional

from piflash.errors import (
    ConnectError,
    NoProbeError,
    PiflashError,
    ProbeLostError,
    TargetRequiredError,
    UnknownOptionError,
)
from piflash.probe.discovery import probe_target, select_probe
from piflash.probe.pyocd_errors import probe_gone, translate_error

if TYPE_CHECKING:
    from pyocd.core.session import Session
    from pyocd.core.soc_target import SoCTarget
    from pyocd.probe.debug_probe import DebugProbe
    from pyocd.utility.sequencer import CallSequence

    from piflash.targets.families.base import Family

LOG = logging.getLogger(__name__)

#: Session options piflash always sets (pyOCD's names, see pyocd/core/options.py).
BASE_SESSION_OPTIONS: Dict[str, object] = {
    "hide_programming_progress": True,  # piflash draws its own progress
    "smart_flash": True,
    # Never mass-erase a chip behind the user's back: pyOCD's default auto_unlock erases an nRF52
    # whose CTRL-AP reads APPROTECT enabled while connecting (pyOCD issue #1766: a false
    # detection wiped boards). piflash erases only on 'piflash protect recover'.
    "auto_unlock": False,
}


def check_session_options(options: Dict[str, object]) -> None:
    """Check option names and value types against pyOCD's table (pyocd/core/options.py).

    :raises UnknownOptionError: an unknown name (with close matches) or a wrongly typed value.
    """
    import difflib

    from pyocd.core.options import OPTIONS_INFO

    for name, value in options.items():
        info = OPTIONS_INFO.get(name)
        if info is None:
            close = difflib.get_close_matches(name, OPTIONS_INFO, n=3)
            raise UnknownOptionError(
                f"unknown pyOCD option '{name}'",
                hint=("did you mean " + ", ".join(close) + "?")
                if close
                else "see pyOCD's docs/options.md for the list",
            )
        types = info.type if isinstance(info.type, tuple) else (info.type,)
        if float in types and isinstance(value, int) and not isinstance(value, bool):
            continue
        if not isinstance(value, types):
            raise UnknownOptionError(
                f"pyOCD option '{name}' takes {' or '.join(t.__name__ for t in types)}, not {value!r}"
            )


def _connect_error(exc: BaseException, probe: DebugProbe, target: Optional[str]) -> PiflashError:
    """The :class:`PiflashError` for a failed ``Session.open()`` on ``probe`` with ``target``
    (None: the probe's own), naming the cause: no server, probe gone, wrong target type."""
    from pyocd.core import exceptions as pe

    from piflash.probe import remote

    if isinstance(exc, PiflashError):
        return exc
    server = remote.server_address(probe)
    if server and isinstance(exc, OSError) and not isinstance(exc, (BrokenPipeError, ConnectionResetError)):
        reason = exc.strerror or str(exc) or type(exc).__name__
        return NoProbeError(
            f"no probe server answers at {server}: {reason}",
            hint=f"is 'piflash sim serve' or 'pyocd server' running at {server}? Check the host and the port",
        )
    err = translate_error(exc, "connect")
    if type(err) is ConnectError and not isinstance(exc, OSError):
        if not probe.is_open:
            # Session.open() failed in the probe's own open(): the USB interface could not be
            # claimed (another program holds it) or the device went away after it was listed. The
            # probe must not be asked anything now: pyOCD's CMSIS-DAP driver has no packet size
            # before a successful open and would loop for ever building the first packet.
            return ProbeLostError(
                f"cannot open probe {probe.unique_id}: its USB interface could not be "
                "claimed, or the probe is no longer there",
                hint="is another program (pyocd, openocd, a piflash station) using it? "
                "Close it, or unplug and replug the probe, then run the command again",
            )
        gone = probe_gone(probe)
        if gone is not None:
            return gone
    if not isinstance(err, ConnectError) or not target:
        return err
    said = probe_target(probe)
    told = f" (the probe reports target type '{said}')" if said and said.lower() != target.lower() else ""
    if not isinstance(exc, (pe.Error, OSError)) or told:
        if said:
            check = (
                f"'piflash info -u {probe.unique_id}' without --target names the chip for probes that "
                "know their board (DAPLink, sim:); 'piflash probes' shows it in brackets; else read "
                "the chip's marking"
            )
        else:
            check = (
                "this probe does not report which chip it is wired to, so read the chip's marking "
                "(or the board's documentation); 'piflash targets PATTERN' lists the types"
            )
        return ConnectError(
            f"cannot connect to the target as '{target}': the target type probably does not match the chip{told}",
            hint=f"check the target type: {check}",
        )
    return err


class _SkipSvd:
    """pyOCD session delegate that drops the ``load_svd`` step of the target's init sequence.

    At every connect pyOCD parses the target's SVD file (peripheral register descriptions:
    for the nRF52840 several MB of XML, ~40 MB of Python objects) in a background thread, for its
    debugger's register views (``CoreSightTarget.load_svd``, pyocd/coresight/coresight_target.py).
    piflash never reads it; a station connecting once per board and polling an empty fixture
    would otherwise parse it again and again. ``will_init_target`` is pyOCD's documented hook
    for changing the init sequence (pyocd/core/target_delegate.py).
    """

    def will_init_target(self, target: SoCTarget, init_sequence: CallSequence) -> None:
        if init_sequence.has_task("load_svd"):
            init_sequence.remove_task("load_svd")


@contextlib.contextmanager
def open_session(
    unique_id: Optional[str] = None,
    target: Optional[str] = None,
    frequency: Optional[int] = None,
    options: Optional[Dict[str, Any]] = None,
) -> Iterator[Session]:
    """Open a pyOCD ``Session`` on the selected probe and connect to its target.

    The session is closed (probe released) when the ``with`` block ends, whatever happens.

    :param unique_id: probe selector (str or :class:`ProbeSelector`: a whole unique ID, or a
        prefix written ``0240*``), or None for the only probe.
    :param target: pyOCD target type (str); None uses what the probe reports, which
        only works for probes that know their board (DAPLink, simulated boards).
    :param frequency: SWD clock in Hz (int); None: ``options["frequency"]`` if given, else the
        target's default (:func:`piflash.targets.clocks.default_frequency`: the fastest within its
        datasheet, else pyOCD's 1 MHz).
    :param options: extra pyOCD session options (dict).
    :raises NoProbeError, SeveralProbesError, ProbePermissionError, ConnectError, ProbeLostError,
        TargetRequiredError:
    """
    from pyocd.core.session import Session

    check_session_options(options or {})
    probe = select_probe(unique_id)
    opts = dict(BASE_SESSION_OPTIONS)
    opts.update(options or {})
    if target:
        from piflash.targets.corrected import pyocd_name

        opts["target_override"] = pyocd_name(target)  # piflash's class where pyOCD's is wrong
    elif not probe_target(probe):
        raise TargetRequiredError(
            f"probe {probe.unique_id} does not say which target it is wired to",
            hint="give the target type with --target (or 'target:' in a profile)",
        )
    target_type = target or probe_target(probe)
    if frequency:
        opts["frequency"] = int(frequency)
    elif "frequency" not in opts:
        from piflash.targets.clocks import default_frequency

        opts["frequency"] = default_frequency(target_type)
    from piflash.targets.catalog import erase_chip_timeout, erase_sector_timeout

    sector_timeout = erase_sector_timeout(target_type)
    if sector_timeout is not None:
        opts.setdefault("flash.timeout.erase_sector", sector_timeout)
    chip_timeout = erase_chip_timeout(target_type)
    if chip_timeout is not None:
        opts.setdefault("flash.timeout.erase_all", chip_timeout)
    from piflash.targets.families import family_for

    post_delay = family_for(target_type).reset_post_delay  # issue 42 item 3: see Family.reset_post_delay
    if post_delay is not None:
        opts.setdefault("reset.post_delay", post_delay)
    from piflash.probe.lean_dap import lean_probe

    # The same probe object for the session and for _connect_error, which reads the chip's IDs
    # through the session's open probe (a second object would find the USB interface claimed).
    probe = lean_probe(probe)
    session = Session(probe, auto_open=False, options=opts)
    if session.delegate is None:  # no pyOCD user script: skip its SVD load (see _SkipSvd)
        session.delegate = _SkipSvd()
    try:
        session.open()
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            with contextlib.suppress(Exception):
                session.close()
            raise
        err = _connect_error(exc, probe, target)
        with contextlib.suppress(Exception):
            session.close()
        raise err from exc
    try:
        yield session
    finally:
        with contextlib.suppress(Exception):
            session.close()


def read_target_uid(session: Session, strict: bool = False, intrusive: bool = False) -> Optional[str]:
    """Read the target's factory unique ID, as its family does
    (:meth:`piflash.targets.families.base.Family.read_uid`: a memory location, or on an RP2040 its
    flash's, :func:`piflash.targets.families.rp2.read_flash_unique_id`). The family is that of the
    target's part number, else of the target type the session was opened with.

    :param session: an open pyOCD ``Session``.
    :param strict: raise pyOCD's error when the read fails (the station uses this to tell a
        board that stopped answering from one whose ID is merely unknown).
    :param intrusive: the caller is about to reprogram or check the board anyway, so an ID that
        can only be read by halting the core and running code (RP2040) may be read; otherwise
        such an ID is None.
    :returns: the ID as lower-case hex (str); None when piflash does not know where this target
        type keeps it, or (unless ``strict``) when it cannot be read (a locked or odd part: the
        ID is a nicety, not a reason to fail).
    :raises pyocd.core.exceptions.Error: with ``strict``, the read failed (``ProbeDisconnected``
        when the probe is gone, ``TransferError`` when the target does not answer).
    """
    return session_family(session).read_uid(session, strict, intrusive)


def session_family(session: Session) -> Family:
    """The family (:class:`piflash.targets.families.base.Family`) of the target of ``session`` (an
    open pyOCD ``Session``): that of its part number, else of the target type the session was
    opened with, else the generic one."""
    from piflash.targets.families import GENERIC, family_for

    assert session.target is not None, "an open session has its target"
    for name in (session.target.part_number, session.options.get("target_override")):
        family = family_for(name)
        if family is not GENERIC:
            return family
    return GENERIC


__all__ = [
    "BASE_SESSION_OPTIONS",
    "check_session_options",
    "open_session",
    "read_target_uid",
    "session_family",
]
