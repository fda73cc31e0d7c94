"""Result objects returned by the workflow in :mod:`piflash.flashing.workflow` (and recorded by the station)."""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass, field
from typing import Dict, Optional

from piflash.firmware.image import FirmwareImage


@dataclass
class ProgramStats:
    """What erase and program did, summed over flash regions (:class:`piflash.flashing.plan.RegionStats`).

    Byte counts are bytes; times are seconds.
    """

    erase_mode: Optional[str] = None   #: "chip" or "sector", as the erase was done
    erased_bytes: int = 0
    programmed_bytes: int = 0          #: bytes actually written (whole pages)
    programmed_pages: int = 0
    skipped_bytes: int = 0             #: bytes left alone because flash already held them
    skipped_pages: int = 0
    erase_seconds: float = 0.0
    program_seconds: float = 0.0

    def add(self, info) -> None:
        """Add one region's :class:`piflash.flashing.plan.RegionStats`."""
        self.erase_mode = "chip" if info.chip_erase or self.erase_mode == "chip" else "sector"
        self.erased_bytes += info.erased_bytes
        self.programmed_bytes += info.programmed_bytes
        self.programmed_pages += info.programmed_pages
        self.skipped_bytes += info.skipped_bytes
        self.skipped_pages += info.skipped_pages


@dataclass
class OperationResult:
    """The outcome of one operation (flash, verify, erase, reset) on one board.

    ``durations`` maps each phase run (connect, erase/program, verify, reset) to seconds;
    ``error`` is the failure as :meth:`PiflashError.to_dict` gives it, and ``phase`` the
    phase that was running when it happened.
    """

    operation: str
    probe_id: Optional[str] = None       #: the probe's unique ID (pyOCD's ``DebugProbe.unique_id``)
    target: Optional[str] = None
    target_uid: Optional[str] = None     #: the chip's factory unique ID, lower-case hex
    firmware: Optional[str] = None       #: the firmware file's absolute path
    firmware_sha256: Optional[str] = None
    firmware_format: Optional[str] = None
    image_bytes: int = 0
    ok: bool = False
    phase: Optional[str] = None
    program: ProgramStats = field(default_factory=ProgramStats)
    verify: Optional[object] = None      #: piflash.flashing.verify.VerifyStats, or None if not verified
    reset: bool = False
    started_at: float = 0.0              #: Unix time
    duration: float = 0.0                #: seconds, whole operation
    durations: Dict[str, float] = field(default_factory=dict)
    error: Optional[dict] = None
    serial: Optional[str] = None         #: the board's serial number (piflash.firmware.patch), if one was given
    patch: Optional[dict] = None         #: per-board values written: {name: {address, value, bytes}}
    protection: Optional[str] = None     #: read-out protection read back: "open" / "locked"

    @classmethod
    def start(cls, operation: str, image: Optional[FirmwareImage], probe_id: Optional[str],
              target: Optional[str]) -> "OperationResult":
        """A result for an operation starting now (``probe_id`` as asked for: unique ID or part of one)."""
        res = cls(operation=operation, probe_id=probe_id, target=target, started_at=time.time())
        if image is not None:
            res.firmware = os.path.abspath(image.path) if image.path else None
            res.firmware_sha256 = image.sha256
            res.firmware_format = image.format
            res.image_bytes = image.size
        res._t0 = time.monotonic()  # type: ignore[attr-defined]
        return res

    def fail(self, exc) -> None:
        """Record a :class:`~piflash.errors.PiflashError` as this result's error."""
        self.ok = False
        self.error = exc.to_dict()

    def finish(self) -> None:
        """Stamp the total duration."""
        self.duration = round(time.monotonic() - getattr(self, "_t0", time.monotonic()), 4)

    def to_dict(self) -> dict:
        """A JSON-friendly dict of everything above."""
        out = asdict(self)
        out["verify"] = asdict(self.verify) if self.verify is not None else None
        out["verified"] = self.verify is not None and self.ok
        return out

