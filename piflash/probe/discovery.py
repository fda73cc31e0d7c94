"""Find debug probes: the one pyOCD ``DebugProbe`` a probe selector designates, or all of them.

pyOCD is imported inside the functions. A probe is named by a probe selector
(:mod:`piflash.probe.selector`: a USB serial number, ``sim:<board>`` for a simulated board,
``remote:HOST:PORT`` for pyOCD's remote probe protocol), which matches a whole unique ID or a
prefix written as one (``0240*``); unlike pyOCD's ``--uid``, never a part of an ID. The probe
object chosen here is what pyOCD's ``Session`` is handed (:func:`piflash.targets.connect.open_session`),
never the ID string.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Dict, List, Optional, Union

if TYPE_CHECKING:
    from pyocd.probe.debug_probe import DebugProbe

from piflash.errors import (
    NoProbeError,
    ProbePermissionError,
    ProbeSyntaxError,
    SeveralProbesError,
    extra_available,
    extra_missing,
)
from piflash.probe.pyocd_errors import translate_error
from piflash.probe.selector import (
    PROBE_KINDS,
    ProbeSelector,
    kind_of,
    no_probe_error,
    parse_selector,
    several_probes_error,
)

LOG = logging.getLogger(__name__)
#: Probe kinds that are the Pi's own pins (piflash/probe/pins.py): chosen only when named.
PIN_KINDS = ("spidev", "gpio")


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

    def to_dict(self) -> Dict[str, Optional[str]]:
        """The probe as a JSON-friendly dict."""
        return {
            "probe_id": self.unique_id,
            "description": self.description,
            "target": self.target,
            "vid_pid": self.vid_pid,
        }


def _probe_vid_pid(probe: DebugProbe) -> Optional[str]:
    # pyOCD's CMSIS-DAP probes carry their USB IDs in DAPAccessCMSISDAP.vidpid (a public property).
    vidpid = getattr(getattr(probe, "_link", None), "vidpid", None)
    if not vidpid or not any(vidpid):
        return None
    return "%04x:%04x" % tuple(vidpid)


def probe_target(probe: DebugProbe) -> Optional[str]:
    """The target type a pyOCD ``DebugProbe`` says its board carries (a DAPLink's board ID looked
    up in pyOCD's ``pyocd/board/board_ids.py``, a ``sim:`` board's type), or None."""
    info = getattr(probe, "associated_board_info", None)
    return getattr(info, "target", None) if info else None


def _register_pin_probes() -> None:
    """Make sure pyOCD knows the ``spidev`` probe type (:mod:`piflash.probe.pinprobe`), also
    where the installed entry points predate it."""
    from piflash.probe.pinprobe import register_with_pyocd

    register_with_pyocd()


def _all_probes() -> List[DebugProbe]:
    """Every probe pyOCD's plugins list now (no ID given to pyOCD, so no substring match)."""
    from pyocd.core.helpers import ConnectHelper

    _register_pin_probes()

    try:
        return ConnectHelper.get_all_connected_probes(blocking=False, print_wait_message=False)
    except Exception as exc:  # pyOCD lets USB and socket errors through from enumeration
        raise translate_error(exc, "list probes") from exc


def _find_probes(selector: Optional[ProbeSelector], listed: Optional[List[DebugProbe]] = None) -> List[DebugProbe]:
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
    from piflash.probe import remote

    if selector is None:
        return _all_probes()
    if selector.transport != "pyocd":
        raise ProbeSyntaxError(
            f"{selector} is not a debug probe: it is {selector.kind.description}",
            hint="this command needs a debug probe; 'piflash probes' lists them",
        )
    if remote.is_remote(selector):
        return [remote.remote_probe(selector.text)]
    if selector.kind is PROBE_KINDS["sim"] and not extra_available("sim"):
        raise extra_missing("sim")
    whole = selector.lookup_id
    # A USB serial with a ':' would be read by pyOCD as TYPE:ID ("unknown debug probe type").
    if whole is not None and (selector.kind.tag is not None or ":" not in whole):
        from pyocd.probe.aggregator import DebugProbeAggregator

        _register_pin_probes()
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


def list_probes(unique_id: Union[str, ProbeSelector, None] = None) -> List[ProbeInfo]:
    """Probes pyOCD can see now.

    :param unique_id: a probe selector (str or :class:`ProbeSelector`): keep only the probes it
        matches (exactly, or by a written ``*`` prefix); None for all.
    :raises ProbeSyntaxError: a selector that cannot be one.
    :raises ConnectError: when a remote probe named by ``unique_id`` does not answer.
    """
    return [
        ProbeInfo(p.unique_id, p.description, probe_target(p), _probe_vid_pid(p))
        for p in _find_probes(parse_selector(unique_id))
    ]


def select_probe(unique_id: Union[str, ProbeSelector, None] = None) -> DebugProbe:
    """Return the one pyOCD ``DebugProbe`` a probe selector (or the lack of one) designates.

    :param unique_id: a probe selector (str or :class:`ProbeSelector`, see
        :mod:`piflash.probe.selector`): a whole unique ID matches only that probe (any case), a
        written ``*`` prefix the one probe whose ID begins with it; None: the only probe attached,
        never one of the Pi's own pins (``spidev:``, ``gpio:``), which must be named.
    :raises ProbeSyntaxError: (exit 2) a selector that cannot be one.
    :raises NoProbeError: (exit 7) nothing matches; the message names the probes attached and the
        near matches. No other probe is opened.
    :raises SeveralProbesError: (exit 8) several match (a prefix, or no selector).
    :raises ProbePermissionError: (exit 9) the probe is attached but may not be opened.
    """
    selector = parse_selector(unique_id)
    listed: List[DebugProbe] = []
    probes = _find_probes(selector, listed)
    pins: List[str] = []
    if selector is None:
        # The Pi's own pins are never taken for "the only probe": an enabled SPI bus may carry a
        # HAT, and clocking it unasked is what passive discovery promises not to do (issue 43).
        pins = [p.unique_id for p in probes if kind_of(p.unique_id).name in PIN_KINDS]
        probes = [p for p in probes if kind_of(p.unique_id).name not in PIN_KINDS]
        if not probes and pins:
            raise NoProbeError(
                "no debug probe found; the Pi's own pins are probes too, but only when named: %s" % ", ".join(pins),
                hint="name one with --probe, e.g. --probe %s (or 'probe:' in the profile)" % pins[0],
            )
    if not probes:
        _raise_if_blocked(selector)
        if selector is not None:
            # The probes listed while looking: a station slot waiting for its probe asks at every
            # poll, and a second USB enumeration per miss is a cost the Zero 2W pays for nothing.
            raise no_probe_error(selector, [p.unique_id for p in listed])
        raise NoProbeError(
            "no debug probe found",
            hint="plug in a probe; 'piflash probes' lists what pyOCD can see, and "
            "'piflash doctor' checks USB, udev rules and permissions",
        )
    if len(probes) > 1:
        ids = [p.unique_id for p in probes]
        hint = None
        if selector is not None and not selector.prefix:  # one ID on two probes
            hint = (
                "these probes report the same serial number; unplug all but one (a probe's "
                "serial number can often be set with its vendor's tool)"
            )
        if selector is None:
            raise several_attached_error(ids)
        raise several_probes_error(selector, ids, hint=hint)
    return probes[0]


def several_attached_error(probe_ids: List[str]) -> SeveralProbesError:
    """The error (exit 8) of a command that names no probe where several are attached: the debug
    probes ``probe_ids`` (str) and the Picos in USB BOOTSEL mode
    (:func:`piflash.probe.picoboot.list_devices`), each named with how to choose it (``--probe
    ID``, ``-u picoboot`` for a Pico in BOOTSEL mode).
    """
    from piflash.probe import picoboot

    try:
        bootsel = picoboot.list_devices()
    except Exception:  # the USB bus cannot be read: the debug probes still make the error
        LOG.debug("listing the BOOTSEL devices failed", exc_info=True)
        bootsel = []
    if not bootsel:
        return several_probes_error(None, probe_ids)
    ids = list(dict.fromkeys(probe_ids))
    named = ids + [f"{d.probe_id} (an {d.chip.upper()} in BOOTSEL mode)" for d in bootsel]
    one = "-u picoboot" if len(bootsel) == 1 else f"-u {bootsel[0].probe_id}"
    return SeveralProbesError(
        f"{len(named)} probes found: {', '.join(named)}",
        ids + [d.probe_id for d in bootsel],
        hint=f"choose one with --probe UNIQUE_ID, or {one} for the Pico in BOOTSEL mode (or 'probe:' in the profile)",
    )


def _raise_if_blocked(selector: Optional[ProbeSelector]) -> None:
    """pyOCD found nothing: if a probe is attached but may not be opened, say so (pyOCD #1719).

    :raises ProbePermissionError: with the USB scan's reason and fix.
    """
    from piflash.probe.usbscan import blocked_probes

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
        hint=f"{first.fix}; 'piflash doctor' checks everything (running as root is not the fix)",
    )


__all__ = ["ProbeInfo", "list_probes", "probe_target", "select_probe", "several_attached_error"]
