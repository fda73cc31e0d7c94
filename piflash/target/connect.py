"""Find debug probes and open a pyOCD session on a target, with errors that say what to do.

pyOCD is imported inside the functions. A probe is named by a probe selector
(:mod:`piflash.probe.selector`: a USB serial number, ``sim:<board>`` for a simulated board,
``remote:HOST:PORT`` for pyOCD's remote probe protocol), which matches a whole unique ID or a
prefix written as one (``0240*``); unlike pyOCD's ``--uid``, never a part of an ID. pyOCD's
``Session`` is handed the chosen probe object, never the ID string.
"""

from __future__ import annotations

import contextlib
import errno
import logging
from dataclasses import dataclass
from typing import Dict, Iterator, List, Optional

from piflash.errors import (ConnectError, FlashError, NoProbeError, PiflashError, ProbeBusyError,
                            ProbeLostError, ProbePermissionError, ProbeSyntaxError, TargetRequiredError,
                            UnknownOptionError, extra_available, extra_for_module, extra_missing)
from piflash.probe.selector import (PROBE_KINDS, ProbeSelector, no_probe_error, parse_selector,
                                    several_probes_error)

LOG = logging.getLogger(__name__)

#: Session options piflash always sets (pyOCD's names, see pyocd/core/options.py).
BASE_SESSION_OPTIONS: Dict[str, object] = {
    "hide_programming_progress": True,   # piflash draws its own progress
    "smart_flash": True,
    # Never mass-erase a chip behind the user's back: pyOCD's default auto_unlock erases an nRF52
    # whose CTRL-AP reads APPROTECT enabled while connecting (pyOCD issue #1766: a false
    # detection wiped boards). piflash erases only on 'piflash protect recover'.
    "auto_unlock": False,
}


@dataclass(frozen=True)
class ProbeInfo:
    """A debug probe as listed by :func:`list_probes`.

    :ivar unique_id: pyOCD unique ID (str), what ``--probe`` takes.
    :ivar description: vendor and product (str).
    :ivar target: target type the probe says its board carries (str), or None.
    :ivar vid_pid: USB identity ``"vvvv:pppp"`` of a USB CMSIS-DAP probe (str), or None.
    """

    unique_id: str
    description: str
    target: Optional[str] = None
    vid_pid: Optional[str] = None

    def to_dict(self) -> dict:
        """The probe as a JSON-friendly dict."""
        return {"probe_id": self.unique_id, "description": self.description, "target": self.target,
                "vid_pid": self.vid_pid}


def _probe_vid_pid(probe) -> Optional[str]:
    # pyOCD's CMSIS-DAP probes carry their USB IDs in DAPAccessCMSISDAP.vidpid (a public property).
    vidpid = getattr(getattr(probe, "_link", None), "vidpid", None)
    if not vidpid or not any(vidpid):
        return None
    return "%04x:%04x" % tuple(vidpid)


def probe_target(probe) -> Optional[str]:
    """The target type a pyOCD ``DebugProbe`` says its board carries (a DAPLink's board ID looked
    up in pyOCD's ``pyocd/board/board_ids.py``, a ``sim:`` board's type), or None."""
    info = getattr(probe, "associated_board_info", None)
    return getattr(info, "target", None) if info else None


_probe_target = probe_target


def _all_probes() -> list:
    """Every probe pyOCD's plugins list now (no ID given to pyOCD, so no substring match)."""
    from pyocd.core.helpers import ConnectHelper

    try:
        return ConnectHelper.get_all_connected_probes(blocking=False, print_wait_message=False)
    except Exception as exc:  # pyOCD lets USB and socket errors through from enumeration
        raise translate_error(exc, "list probes") from exc


def _find_probes(selector: Optional[ProbeSelector], listed: Optional[list] = None) -> list:
    """pyOCD's probes that ``selector`` matches exactly (every probe for None); a ``remote:`` one
    is piflash's bounded-wait client.

    :param listed: if given (a list), every probe listed on the way is appended to it, so that
        the caller can name what is attached without listing the probes a second time.

    A whole ID is first asked of each probe plugin (pyOCD's ``DebugProbeAggregator.get_probe_with_id``:
    one USB look-up, and the simulator's way of creating ``sim:NAME`` boards), and the probe it
    returns is taken only when its ID is the one asked for; otherwise, and for a prefix, every probe
    is listed and kept by :meth:`ProbeSelector.matches`. pyOCD is never given the ID to filter
    by: its aggregator keeps every probe whose ID contains it.

    :raises ProbeSyntaxError: a selector for another transport (``picoboot``).
    :raises ExtraMissingError: a ``sim:`` selector without the simulator installed.
    """
    from piflash.target import remote

    if selector is None:
        return _all_probes()
    if selector.transport != "pyocd":
        raise ProbeSyntaxError(f"{selector} is not a debug probe: it is {selector.kind.description}",
                               hint="this command needs a debug probe; 'piflash probes' lists them")
    if remote.is_remote(selector):
        return [remote.remote_probe(selector.text)]
    if selector.kind is PROBE_KINDS["sim"] and not extra_available("sim"):
        raise extra_missing("sim")
    whole = selector.lookup_id
    # A USB serial with a ':' would be read by pyOCD as TYPE:ID ("unknown debug probe type").
    if whole is not None and (selector.kind.tag is not None or ":" not in whole):
        from pyocd.probe.aggregator import DebugProbeAggregator

        try:
            probe = DebugProbeAggregator.get_probe_with_id(whole)
        except Exception as exc:
            raise translate_error(exc, "list probes") from exc
        if probe is not None and selector.matches(probe.unique_id):
            return [probe]
    everything = _all_probes()
    if listed is not None:
        listed.extend(everything)
    return [p for p in everything if selector.matches(p.unique_id)]


def list_probes(unique_id=None) -> List[ProbeInfo]:
    """Probes pyOCD can see now.

    :param unique_id: a probe selector (str or :class:`ProbeSelector`): keep only the probes it
        matches (exactly, or by a written ``*`` prefix); None for all.
    :raises ProbeSyntaxError: a selector that cannot be one.
    :raises ConnectError: when a remote probe named by ``unique_id`` does not answer.
    """
    return [ProbeInfo(p.unique_id, p.description, _probe_target(p), _probe_vid_pid(p))
            for p in _find_probes(parse_selector(unique_id))]


def select_probe(unique_id=None):
    """Return the one pyOCD ``DebugProbe`` a probe selector (or the lack of one) designates.

    :param unique_id: a probe selector (str or :class:`ProbeSelector`, see
        :mod:`piflash.probe.selector`): a whole unique ID matches only that probe (any case), a
        written ``*`` prefix the one probe whose ID begins with it; None: the only probe attached.
    :raises ProbeSyntaxError: (exit 2) a selector that cannot be one.
    :raises NoProbeError: (exit 7) nothing matches; the message names the probes attached and the
        near matches. No other probe is opened.
    :raises SeveralProbesError: (exit 8) several match (a prefix, or no selector).
    :raises ProbePermissionError: (exit 9) the probe is attached but may not be opened.
    """
    selector = parse_selector(unique_id)
    listed: list = []
    probes = _find_probes(selector, listed)
    if not probes:
        _raise_if_blocked(selector)
        if selector is not None:
            # The probes listed while looking: a station slot waiting for its probe asks at every
            # poll, and a second USB enumeration per miss is a cost the Zero 2W pays for nothing.
            raise no_probe_error(selector, [p.unique_id for p in listed])
        raise NoProbeError("no debug probe found",
                           hint="plug in a probe; 'piflash probes' lists what pyOCD can see, and "
                                "'piflash doctor' checks USB, udev rules and permissions")
    if len(probes) > 1:
        ids = [p.unique_id for p in probes]
        hint = None
        if selector is not None and not selector.prefix:     # one ID on two probes
            hint = ("these probes report the same serial number; unplug all but one (a probe's "
                    "serial number can often be set with its vendor's tool)")
        raise several_probes_error(selector, ids, hint=hint)
    return probes[0]


def _raise_if_blocked(selector: Optional[ProbeSelector]) -> None:
    """pyOCD found nothing: if a probe is attached but may not be opened, say so (pyOCD #1719).

    :raises ProbePermissionError: with the USB scan's reason and fix.
    """
    from piflash.host.usbscan import blocked_probes

    try:
        blocked = blocked_probes(selector)
    except OSError:  # an unreadable sysfs must not hide the real "no probe" answer
        LOG.debug("USB scan failed", exc_info=True)
        return
    if not blocked:
        return
    first = blocked[0]
    more = f" (and {len(blocked) - 1} more)" if len(blocked) > 1 else ""
    raise ProbePermissionError(
        f"probe {first.label} is attached but may not be opened{more}: {first.reason}",
        hint=f"{first.fix}; 'piflash doctor' checks everything (running as root is not the fix)")


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
            raise UnknownOptionError(f"unknown pyOCD option '{name}'",
                                     hint=("did you mean " + ", ".join(close) + "?") if close else
                                     "see pyOCD's docs/options.md for the list")
        types = info.type if isinstance(info.type, tuple) else (info.type,)
        if float in types and isinstance(value, int) and not isinstance(value, bool):
            continue
        if not isinstance(value, types):
            raise UnknownOptionError(f"pyOCD option '{name}' takes {' or '.join(t.__name__ for t in types)}, "
                                     f"not {value!r}")


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

    :param phase: what was being done (``"connect"``, ``"erase"``, ``"program"``, ``"verify"``...).
    """
    from pyocd.core import exceptions as pe

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
    if isinstance(exc, pe.ProbeDisconnected) or isinstance(exc, (ConnectionError, BrokenPipeError)) \
            or getattr(exc, "errno", None) == errno.ENODEV:
        # A socket error is a remote: probe's (pyOCD's USB drivers raise ProbeDisconnected or ENODEV):
        # its cable is a network connection, not USB (issue 19 item 18).
        remote = isinstance(exc, (ConnectionError, BrokenPipeError)) or "probe server" in text
        hint = ("the probe server (remote:HOST:PORT) closed the connection: is it still running, "
                "and the network up? Start it again, then run the command again"
                if remote else "check the USB cable and power, then run the command again")
        return ProbeLostError(f"the probe disconnected during {phase}: {text}", hint=hint)
    if isinstance(exc, pe.ProbeError) and "in use by another" in text:
        # 'piflash sim serve' refuses a second client this way (over the remote protocol the text
        # follows "error received from server ... (status code 3): "); a local simulated board
        # held by another session for longer than its 10 s wait says so too.
        return ProbeBusyError(text.rsplit("): ", 1)[-1],
                              hint="wait until the other piflash (or pyOCD) using this probe has finished, "
                                   "then run the command again")
    if getattr(exc, "errno", None) in (errno.EACCES, errno.EPERM) or "Access denied" in text \
            or "insufficient permissions" in text.lower():
        from piflash.host.permissions import setup_command

        return ProbePermissionError(f"permission denied opening the probe: {text}",
                                    hint=f"run 'piflash doctor'; the fix is '{setup_command()}' "
                                         "(udev rules and the plugdev group), not running as root")
    if isinstance(exc, pe.FlashFailure):
        addr = getattr(exc, "address", None)
        where = f" at {addr:#010x}" if addr is not None else ""
        code = getattr(exc, "result_code", None)
        extra = f" (algorithm result {code:#x})" if code is not None else ""
        if "timed out" in text:
            hint = ("the flash controller did not finish: power-cycle the board and try again; "
                    "if it keeps timing out the part may be locked or damaged")
        elif "flash program failed: the core" in text:      # piflash.flashing.multipage's run calls
            hint = ("the target's core did not run the flash algorithm to its end (a fault, a "
                    "halt from another debugger, or its RAM changed while it ran): power-cycle "
                    "the board and flash again; if it recurs, report it with the output of "
                    "'piflash -vv flash ...'")
        else:
            hint = ("the sector may be write-protected (STM32: the WRP option bytes, which a chip "
                    "erase does not clear; nRF: NVMC BPROT/ACL) or the flash worn: remove the "
                    "protection, then flash again")
        return FlashError(f"{phase} failed{where}: {text}{extra}", address=addr, hint=hint)
    if isinstance(exc, pe.TargetSupportError):
        return ConnectError(f"target support problem during {phase}: {text}",
                            hint="check --target ('piflash targets' lists them)")
    if phase in ("connect", "list probes"):
        if isinstance(exc, OSError):
            return ConnectError(f"cannot reach the probe: {text}",
                                hint="for remote:HOST:PORT, is the probe server running?")
        if foreign:
            return ConnectError("cannot connect to the target: pyOCD's connect sequence failed "
                                "(run with -vv for its details)",
                                hint="is --target right for this chip, the board powered and seated, "
                                     "SWD wired (SWDIO, SWCLK, GND)? A lower --frequency can help")
        return ConnectError(f"cannot connect to the target: {text}",
                            hint="is the board powered and seated, SWD wired (SWDIO, SWCLK, GND), "
                                 "and --target right? A lower --frequency can help")
    if isinstance(exc, (pe.TransferError, pe.TimeoutError)):
        return FlashError(f"{phase} failed: {text}",
                          address=getattr(exc, "fault_address", None),
                          hint="the target stopped answering: check power and wiring, then flash again")
    if isinstance(exc, pe.Error):
        return FlashError(f"{phase} failed: {text}")
    return PiflashError(f"unexpected error inside pyOCD during {phase} ({type(exc).__name__})",
                        hint="run the command again with -vv and report the output as a bug")


def _probe_gone(probe) -> Optional[PiflashError]:
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
        return ProbeLostError("the probe disconnected during connect (it stopped answering in the "
                              "first requests)",
                              hint=("is the probe server still running, and the network up? Start it again, "
                                    "then run the command again") if remote
                              else "check the USB cable and power, then run the command again")
    except PiflashError as exc:  # e.g. the remote probe's bounded wait expired during discovery
        return exc
    except Exception:  # noqa: BLE001  (any other answer: the probe is still there)
        return None
    return None


def _connect_error(exc: BaseException, probe, target: Optional[str]) -> PiflashError:
    """The :class:`PiflashError` for a failed ``Session.open()`` on ``probe`` with ``target``
    (None: the probe's own), naming the cause: no server, probe gone, wrong target type."""
    from pyocd.core import exceptions as pe

    from piflash.target import remote

    if isinstance(exc, PiflashError):
        return exc
    server = remote.server_address(probe)
    if server and isinstance(exc, OSError) and not isinstance(exc, (BrokenPipeError, ConnectionResetError)):
        reason = exc.strerror or str(exc) or type(exc).__name__
        return NoProbeError(f"no probe server answers at {server}: {reason}",
                            hint=f"is 'piflash sim serve' or 'pyocd server' running at {server}? "
                                 "Check the host and the port")
    err = translate_error(exc, "connect")
    if type(err) is ConnectError and not isinstance(exc, OSError):
        if not probe.is_open:
            # Session.open() failed in the probe's own open(): the USB interface could not be
            # claimed (another program holds it) or the device went away after it was listed. The
            # probe must not be asked anything now: pyOCD's CMSIS-DAP driver has no packet size
            # before a successful open and would loop for ever building the first packet.
            return ProbeLostError(f"cannot open probe {probe.unique_id}: its USB interface could not be "
                                  "claimed, or the probe is no longer there",
                                  hint="is another program (pyocd, openocd, a piflash station) using it? "
                                       "Close it, or unplug and replug the probe, then run the command again")
        gone = _probe_gone(probe)
        if gone is not None:
            return gone
    if not isinstance(err, ConnectError) or not target:
        return err
    said = _probe_target(probe)
    told = f" (the probe reports target type '{said}')" if said and said.lower() != target.lower() else ""
    if not isinstance(exc, (pe.Error, OSError)) or told:
        if said:
            check = (f"'piflash info -u {probe.unique_id}' without --target names the chip for probes that "
                     "know their board (DAPLink, sim:); 'piflash probes' shows it in brackets; else read "
                     "the chip's marking")
        else:
            check = ("this probe does not report which chip it is wired to, so read the chip's marking "
                     "(or the board's documentation); 'piflash targets PATTERN' lists the types")
        return ConnectError(f"cannot connect to the target as '{target}': the target type probably does "
                            f"not match the chip{told}", hint=f"check the target type: {check}")
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

    def will_init_target(self, target, init_sequence) -> None:
        if init_sequence.has_task("load_svd"):
            init_sequence.remove_task("load_svd")


#: SWD clock (Hz) piflash asks the probe for when neither ``--frequency``, a profile's
#: ``frequency`` nor ``-O frequency=`` gives one. pyOCD's own default is 1 MHz (``frequency`` in
#: pyocd/core/options.py), at which the SWD wire alone needs about 50 us per 32-bit transfer: more
#: than an nRF flash needs to write the word (nRF52840 PS v1.7 4.3.10 t_WRITE 41 us), so the wire,
#: not the chip, set the pace. 4 MHz is the default interface speed of SEGGER's J-Link tools
#: (J-Link Commander prompts "<Default>: 4000 kHz", e.g. Nordic DevZone thread 42752, an nRF51) and
#: within what the three simulated targets' parts take. A CMSIS-DAP probe that cannot clock that
#: fast runs at the fastest it can (DAP_SWJ_Clock sets a maximum; probe-rs documents the same for
#: its CMSIS-DAP driver, ``CmsisDap::set_speed``). Long or noisy SWD wires: give a lower
#: ``--frequency`` (the connect error's hint says so). Measured with benchmarks/real_probe.py
#: (predictions of the simulated USB probes' timing model): nRF51 MicroPython on the Raspberry
#: Pi Debug Probe 5.46 s at 1 MHz, 4.20 s at 4 MHz.
DEFAULT_FREQUENCY_HZ = 4_000_000


@contextlib.contextmanager
def open_session(unique_id: Optional[str] = None, target: Optional[str] = None,
                 frequency: Optional[int] = None, options: Optional[dict] = None) -> Iterator:
    """Open a pyOCD ``Session`` on the selected probe and connect to its target.

    The session is closed (probe released) when the ``with`` block ends, whatever happens.

    :param unique_id: probe selector (str or :class:`ProbeSelector`: a whole unique ID, or a
        prefix written ``0240*``), or None for the only probe.
    :param target: pyOCD target type (str); None uses what the probe reports, which
        only works for probes that know their board (DAPLink, simulated boards).
    :param frequency: SWD clock in Hz (int); None: ``options["frequency"]`` if given, else
        :data:`DEFAULT_FREQUENCY_HZ`.
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
        from piflash.target.corrected import pyocd_name

        opts["target_override"] = pyocd_name(target)       # piflash's class where pyOCD's is wrong
    elif not _probe_target(probe):
        raise TargetRequiredError(f"probe {probe.unique_id} does not say which target it is wired to",
                                  hint="give the target type with --target (or 'target:' in a profile)")
    if frequency:
        opts["frequency"] = int(frequency)
    elif "frequency" not in opts:
        opts["frequency"] = DEFAULT_FREQUENCY_HZ
    from piflash.target.catalog import erase_sector_timeout

    sector_timeout = erase_sector_timeout(target or _probe_target(probe))
    if sector_timeout is not None:
        opts.setdefault("flash.timeout.erase_sector", sector_timeout)
    from piflash.target.batched_dap import batched_probe

    # The same probe object for the session and for _connect_error, which reads the chip's IDs
    # through the session's open probe (a second object would find the USB interface claimed).
    probe = batched_probe(probe)
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


def read_target_uid(session, strict: bool = False, intrusive: bool = False) -> Optional[str]:
    """Read the target's factory unique ID (:data:`piflash.target.catalog.TARGET_UID_LOCATIONS`;
    on an RP2040 its flash's, :func:`piflash.target.rp2.read_flash_unique_id`).

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
    from piflash.target.catalog import uid_location

    names = {(session.target.part_number or "").lower(), (session.options.get("target_override") or "").lower()}
    from piflash.target.rp2 import RP2040_TARGETS, read_flash_unique_id

    if names & set(RP2040_TARGETS):
        if not intrusive:
            return None
        try:
            return read_flash_unique_id(session).hex()
        except Exception:
            if strict:
                raise
            LOG.debug("could not read the RP2040 flash unique ID", exc_info=True)
            return None
    loc = uid_location(session.target.part_number or session.options.get("target_override") or "")
    if loc is None:
        loc = uid_location(session.options.get("target_override") or "")
    if loc is None:
        return None
    try:
        raw = bytes(session.target.read_memory_block8(loc.address, loc.size))
        return (raw[::-1] if loc.reverse else raw).hex()
    except Exception:
        if strict:
            raise
        LOG.debug("could not read target unique ID", exc_info=True)
        return None


__all__ = ["ProbeInfo", "list_probes", "select_probe", "open_session", "translate_error",
           "read_target_uid", "probe_target", "FlashError"]
