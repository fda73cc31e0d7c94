"""What each transport can do, and the one refusal of what it cannot.

A transport is how piflash reaches a board: a debug probe through pyOCD (SWD), or a Pico's boot
ROM over USB (PICOBOOT); the Pi's own pins come next. Each probe kind of
:data:`piflash.probe.selector.PROBE_KINDS` names its transport (:attr:`ProbeKind.transport`), and
each transport declares here, once, what piflash's jobs can do through it
(:class:`TransportCaps`, in :data:`TRANSPORTS`). The model is Zephyr's ``RunnerCaps``
(``scripts/west_commands/runners/core.py``): a runner declares its commands and features, and the
front end refuses what it does not declare before the runner runs.

The CLI and the station ask here: :func:`caps_of` (or :func:`flash_transport` for a flash, which
may find a lone Pico in BOOTSEL mode), then :func:`require` (or :func:`refusal`, for a caller that
reports rather than raises), with the capabilities a command needs or :func:`flash_needs` of a
:class:`~piflash.jobs.options.FlashOptions`. What a transport cannot do is refused here only: one
message, naming what was asked, which transports do it and what this one does, and one error,
:class:`~piflash.errors.UnsupportedError` (exit 2, a usage error: nothing was opened).

Light: standard library, :mod:`piflash.errors` and :mod:`piflash.probe.selector` at import.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Dict, Iterable, List, Optional, Tuple, Union

from piflash.errors import ProbeSyntaxError, UnsupportedError
from piflash.probe.selector import ProbeKind, ProbeSelector, kind_of

__all__ = [
    "CAPABILITIES",
    "TRANSPORTS",
    "TransportCaps",
    "caps_of",
    "flash_needs",
    "flash_transport",
    "refusal",
    "register_transport",
    "require",
]

#: Every capability a transport may declare: name -> (its short label, for "it does ... only";
#: what it is, for "X needs a debug probe"). The names are :class:`TransportCaps`'s fields.
CAPABILITIES: Dict[str, Tuple[str, str]] = {
    "flash": ("flash", "flashing"),
    "verify": ("verify", "a read-back verify"),
    "chip_erase": ("chip erase", "a chip erase"),
    "flash_chip_erase": ("flash --erase chip", "a chip erase as a flash's erase (--erase chip)"),
    "sector_erase": ("sector erase", "erasing given sectors"),
    "read": ("read", "reading the target's memory"),
    "reset": ("reset", "a reset"),
    "reset_halt": ("reset halted", "a reset that leaves the core halted"),
    "protect": ("read-out protection", "read-out protection"),
    "rtt": ("RTT", "RTT (reading the target's RAM while its firmware runs)"),
    "boot_check": ("boot check", "a boot check"),
    "identify": ("target info", "identifying the target behind a debug port"),
    "tool_options": ("pyOCD options", "pyOCD session options (-O)"),
}


@dataclass(frozen=True)
class TransportCaps:
    """What piflash's jobs can do through one transport. Every flag is a bool, default False.

    :ivar name: the transport's name (str), the value of :attr:`piflash.probe.selector.ProbeKind.transport`.
    :ivar description: what it is, for messages (str), e.g. "a Pico in BOOTSEL mode (PICOBOOT)".
    :ivar short: what a message says is needed when only it does a thing (str), e.g. "a debug probe".
    :ivar flash: program an image (``piflash flash``).
    :ivar verify: compare the flash with an image without writing (``piflash verify``, a flash's verify).
    :ivar chip_erase: erase the whole flash (``erase --chip``).
    :ivar flash_chip_erase: a flash that erases the whole chip first (``flash --erase chip``).
    :ivar sector_erase: erase the sectors of given address ranges on request (``erase --sector``).
        A flash's own erase (``auto``, ``sector``) needs only ``flash``.
    :ivar read: read the target's memory.
    :ivar reset: reset the target so its firmware runs (``piflash reset``, a flash's reset).
    :ivar reset_halt: reset and leave the core halted (``reset --halt``).
    :ivar protect: read, set and clear read-out protection (``piflash protect``, a lock after a flash).
    :ivar rtt: stream SEGGER RTT (``piflash rtt``).
    :ivar boot_check: watch the started firmware (``--boot-check``, a profile's ``boot_check:``).
    :ivar identify: connect to the debug port and describe the target (``piflash info``).
    :ivar tool_options: take pyOCD session options (``-O NAME=VALUE``, a profile's ``pack``), as
        Zephyr's ``RunnerCaps.tool_opt``.
    """

    name: str
    description: str
    short: str
    flash: bool = False
    verify: bool = False
    chip_erase: bool = False
    flash_chip_erase: bool = False
    sector_erase: bool = False
    read: bool = False
    reset: bool = False
    reset_halt: bool = False
    protect: bool = False
    rtt: bool = False
    boot_check: bool = False
    identify: bool = False
    tool_options: bool = False

    def can(self, capability: str) -> bool:
        """Whether it does ``capability`` (a key of :data:`CAPABILITIES`).

        :raises KeyError: no such capability (a typo in a caller, not a user's error).
        """
        if capability not in CAPABILITIES:
            raise KeyError(f"no capability {capability!r}; known: {', '.join(CAPABILITIES)}")
        return bool(getattr(self, capability))

    def does(self) -> List[str]:
        """The short labels (str) of what it does, in :data:`CAPABILITIES`'s order."""
        return [label for name, (label, _) in CAPABILITIES.items() if self.can(name)]


#: Every transport, by name. A new one (the Pi's own pins) is one more entry, and its probe kind
#: in :data:`piflash.probe.selector.PROBE_KINDS` names it.
TRANSPORTS: Dict[str, TransportCaps] = {}


def register_transport(caps: TransportCaps) -> TransportCaps:
    """Add ``caps`` to :data:`TRANSPORTS` (replacing one of the same name); returns it.

    :raises ValueError: a field of :class:`TransportCaps` that is not a capability, or the reverse
        (the two lists kept in step).
    """
    flags = {f.name for f in fields(TransportCaps)} - {"name", "description", "short"}
    if flags != set(CAPABILITIES):
        raise ValueError(f"TransportCaps and CAPABILITIES differ: {sorted(flags ^ set(CAPABILITIES))}")
    TRANSPORTS[caps.name] = caps
    return caps


#: A debug probe (CMSIS-DAP, ST-Link, J-Link, a simulated board, a remote probe server) opened
#: through pyOCD: every job piflash has.
PYOCD = register_transport(
    TransportCaps(
        "pyocd",
        "a debug probe (SWD through pyOCD)",
        "a debug probe",
        flash=True,
        verify=True,
        chip_erase=True,
        flash_chip_erase=True,
        sector_erase=True,
        read=True,
        reset=True,
        reset_halt=True,
        protect=True,
        rtt=True,
        boot_check=True,
        identify=True,
        tool_options=True,
    )
)

#: A Pico in USB BOOTSEL mode, through its boot ROM's PICOBOOT interface (:mod:`piflash.jobs.bootsel`):
#: READ, WRITE, FLASH_ERASE of 4 KiB sectors and REBOOT (RP2040 datasheet 2.8.5.4-5; RP2350
#: datasheet 5.6). No debug port: no halt, no RAM while the firmware runs (RTT, a boot check), no
#: protection to read or set. No mass erase command: ``erase --chip`` erases the whole flash in
#: 64 KiB pieces (:func:`piflash.jobs.bootsel.erase_bootsel`); a flash's ``--erase chip`` is not
#: offered (a flash erases what it must change). ``info`` shows what the boot ROM reports.
PICOBOOT = register_transport(
    TransportCaps(
        "picoboot",
        "a Pico in BOOTSEL mode (PICOBOOT)",
        "a Pico in BOOTSEL mode",
        flash=True,
        verify=True,
        chip_erase=True,
        sector_erase=True,
        read=True,
        reset=True,
        identify=True,
    )
)

#: The transport of a command that names no probe: the only probe attached, as pyOCD finds it.
DEFAULT = PYOCD


def caps_of(probe: Union[str, ProbeSelector, ProbeKind, None]) -> TransportCaps:
    """The transport of the probe ``probe`` names: its kind's (:attr:`ProbeKind.transport`).

    :param probe: a probe selector (str as ``-u`` takes it, or parsed), a kind, or None (no probe
        named: :data:`DEFAULT`; a flash looks further, see :func:`flash_transport`). A selector
        that does not parse is taken by its tag (the job that opens it raises its
        :class:`~piflash.errors.ProbeSyntaxError`).
    :raises KeyError: a kind whose transport is not registered (a bug).
    """
    if probe is None or probe == "":
        return DEFAULT
    if isinstance(probe, ProbeKind):
        kind = probe
    else:
        try:
            kind = ProbeSelector.parse(probe).kind
        except ProbeSyntaxError:
            kind = kind_of(str(probe).strip())
    return TRANSPORTS[kind.transport]


def flash_transport(probe: Union[str, ProbeSelector, None]) -> TransportCaps:
    """The transport a flash goes through: :func:`caps_of`, except that with no probe named, a
    Pico in BOOTSEL mode (:func:`piflash.probe.picoboot.list_devices`) and no debug probe attached
    (:func:`piflash.probe.discovery.list_probes`), it is PICOBOOT. Looks at the USB bus only when
    no probe is named.

    :raises SeveralProbesError: (exit 8) no probe named, a Pico in BOOTSEL mode and a debug probe
        attached: the message names them all, the hint ``-u picoboot``.
    """
    if probe:
        return caps_of(probe)
    from piflash.probe import picoboot

    if not picoboot.list_devices():
        return DEFAULT
    from piflash.probe.discovery import list_probes, several_attached_error

    probes = list_probes()
    if probes:
        raise several_attached_error([p.unique_id for p in probes])
    return PICOBOOT


def flash_needs(job) -> List[str]:
    """The capabilities a flash with options ``job`` (a :class:`~piflash.jobs.options.FlashOptions`)
    uses, the first that matters most: flash, then a chip erase, read-out protection, a boot
    check, pyOCD session options, a verify and a reset as asked."""
    needs = ["flash"]
    if job.erase == "chip":
        needs.append("flash_chip_erase")
    if job.protect == "lock":
        needs.append("protect")
    if job.boot_check is not None:
        needs.append("boot_check")
    if job.session_options:
        needs.append("tool_options")
    if job.verify:
        needs.append("verify")
    if job.reset:
        needs.append("reset")
    return needs


def refusal(
    caps: TransportCaps, needs: Iterable[str], command: Optional[str] = None, hint: Optional[str] = None
) -> Optional[UnsupportedError]:
    """The error for the first of ``needs`` that ``caps`` does not do, or None when it does them all.

    :param needs: capability names (keys of :data:`CAPABILITIES`).
    :param command: what was asked, leading the message (str, e.g. ``"'piflash info'"``), or None.
    :param hint: what to do instead (str); default: do it through a transport that can.
    :returns: an :class:`~piflash.errors.UnsupportedError` (exit 2), or None.
    """
    for need in needs:
        if caps.can(need):
            continue
        able = [t.short for t in TRANSPORTS.values() if t.can(need)]
        what = CAPABILITIES[need][1]
        message = (f"{command}: " if command else "") + (
            f"{what} needs {' or '.join(able) or 'a transport that does it'}; {caps.description} does "
            f"not do it (it does {', '.join(caps.does())} only)"
        )
        return UnsupportedError(message, caps.name, need, hint=hint or (f"do it through {able[0]}" if able else None))
    return None


def require(
    caps: TransportCaps, needs: Iterable[str], command: Optional[str] = None, hint: Optional[str] = None
) -> None:
    """Refuse, before anything is opened, what ``caps`` does not do of ``needs`` (see :func:`refusal`).

    :raises UnsupportedError: (exit 2) the first capability it lacks.
    """
    err = refusal(caps, needs, command, hint)
    if err is not None:
        raise err
