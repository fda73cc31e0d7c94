"""What a job is asked to do: the options every transport's job takes.

:class:`FlashOptions` is what a flash is asked to do, one value for every transport's flash job
(:func:`piflash.jobs.workflow.flash_firmware` and :func:`~piflash.jobs.workflow.flash_session`
through a debug probe, :func:`piflash.jobs.bootsel.flash_bootsel` over PICOBOOT), for the CLI and
the station alike. The model is probe-rs's ``DownloadOptions``
(``probe-rs/src/flashing/download.rs``): the job's choices in one value, apart from what it is
done to (the image, the probe, the target) and how it reports (progress, the first-touch hook).
What a transport cannot do of these is refused by :mod:`piflash.jobs.transports`.

:data:`ERASE_MODES` are the programming engine's (:mod:`piflash.flashing.program`), named here so
that profiles and the CLI take them from the job, not from the engine.

Light: no pyOCD, nothing imported at run time but the engine's erase modes (the CLI imports this
module to build its settings).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, Optional

from piflash.flashing.program import ERASE_MODES

if TYPE_CHECKING:
    from piflash.firmware.patch import PatchPlan
    from piflash.production.bootcheck import BootCheck

__all__ = ["ERASE_MODES", "PROTECT_MODES", "FlashOptions"]

#: What :attr:`FlashOptions.protect` may be: None (leave read-out protection as it is) or
#: ``"lock"`` (set it after a passed verify).
PROTECT_MODES = (None, "lock")


@dataclass(frozen=True)
class FlashOptions:
    """What one flash is asked to do (see the module). Immutable: derive one with
    :func:`dataclasses.replace`.

    :ivar erase: (str, default ``"auto"``) one of :data:`ERASE_MODES`: ``"auto"`` erases only the
        sectors that must change, never the whole chip; ``"sector"`` every sector the image
        touches; ``"chip"`` a mass erase first (a debug probe only). Over PICOBOOT ``"auto"`` and
        ``"sector"`` are the same plan (by 4 KiB sectors, :mod:`piflash.jobs.bootsel`).
    :ivar verify: (bool, default True) read back and compare every programmed byte
        (:mod:`piflash.flashing.verify`; over PICOBOOT by CRC-32 per 256-byte page).
    :ivar reset: (bool, default True) reset the target afterwards so the new firmware runs
        (PICOBOOT: REBOOT into the flash); False leaves it halted (in BOOTSEL mode).
    :ivar frequency: (int, Hz, default None: the probe's default) the SWD clock. A debug probe's
        only: USB has no such clock, and a PICOBOOT job ignores it.
    :ivar session_options: (dict str -> value, default empty) extra pyOCD session options, e.g.
        ``{"flash.timeout.erase_sector": 2.0}``; ``{"pack": "x.pack"}`` (a path or a list of paths)
        makes the parts of those CMSIS packs target types, checked and their memory maps used
        before connecting. A debug probe's only (a transport without ``tool_options`` refuses them).
    :ivar protect: (str or None, default None) one of :data:`PROTECT_MODES`: ``"lock"`` sets
        read-out protection after a passed verify (and a passed boot check) and reads it back.
    :ivar boot_check: (:class:`piflash.production.bootcheck.BootCheck` or None, default None) what
        proves the firmware starts, run after the reset (needs ``reset``); its verdict is the
        result's ``boot_check``.
    :ivar plan: (:class:`piflash.firmware.patch.PatchPlan` or None, default None) per-board bytes
        (serial number, patch entries) laid over the image: the patched image is what is
        programmed and verified.
    :ivar serial: (int or None, default None) the board's serial number, for a ``plan`` that
        numbers its boards.
    :raises ValueError: (on construction) an erase mode not in :data:`ERASE_MODES`, a protect mode
        not in :data:`PROTECT_MODES`, or a boot check without the reset that starts the firmware.
    """

    erase: str = "auto"
    verify: bool = True
    reset: bool = True
    frequency: Optional[int] = None
    session_options: Dict[str, Any] = field(default_factory=dict)
    protect: Optional[str] = None
    boot_check: Optional[BootCheck] = None
    plan: Optional[PatchPlan] = None
    serial: Optional[int] = None

    def __post_init__(self) -> None:
        if self.erase not in ERASE_MODES:
            raise ValueError(f"erase mode must be one of {ERASE_MODES}, not {self.erase!r}")
        if self.protect not in PROTECT_MODES:
            raise ValueError(f"protect must be one of {PROTECT_MODES}, not {self.protect!r}")
        if self.boot_check is not None and not self.reset:
            raise ValueError("a boot check needs the reset that starts the firmware")
