"""Result objects returned by the workflow in :mod:`piflash.jobs.workflow` (and recorded by the station),
and the conventions every ``--json`` output shares (docs/result.md, docs/result.schema.json).
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Dict, Optional

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

from piflash.firmware.image import FirmwareImage

#: Version of the JSON every command prints with ``--json`` (``schema_version`` in each object),
#: described by docs/result.schema.json. Raised when a field is renamed, removed or changes
#: meaning; a new optional field does not raise it.
SCHEMA_VERSION = 1

#: Decimal places of every duration in seconds that piflash emits (0.1 ms): the places the
#: phase timings have always been stored with in the history (``connect_s`` ...), so a row's
#: exported value is the stored one and the row hash can still be checked from an export.
SECONDS_PLACES = 4


def seconds(value: Optional[float]) -> Optional[float]:
    """A duration in seconds as emitted: rounded to :data:`SECONDS_PLACES` places (None stays None)."""
    return None if value is None else round(float(value), SECONDS_PLACES)


def iso_time(ts: Optional[float]) -> Optional[str]:
    """Unix time (seconds) as ISO 8601 local time with its UTC offset, to the millisecond:
    ``2026-11-22T20:15:03.123+00:00``; None stays None."""
    if ts is None:
        return None
    return datetime.fromtimestamp(ts).astimezone().isoformat(timespec="milliseconds")


@dataclass
class ProgramStats:
    """What erase and program did, summed over flash regions (:class:`piflash.flashing.plan.RegionStats`).

    Byte counts are bytes; the phases' times are in :attr:`OperationResult.durations`.
    """

    erase_mode: Optional[str] = None  #: "chip" or "sector", as the erase was done; None when nothing was erased
    erased_bytes: int = 0
    programmed_bytes: int = 0  #: bytes actually written (whole pages)
    programmed_pages: int = 0
    skipped_bytes: int = 0  #: bytes left alone because flash already held them
    skipped_pages: int = 0

    def add(self, info) -> None:
        """Add one region's :class:`piflash.flashing.plan.RegionStats`: ``erase_mode`` becomes
        "chip" for a chip erase, "sector" for sectors erased (``erased_bytes`` > 0), and stays
        as it was (None when no region erased anything) for a region whose sectors were all
        blank or unchanged."""
        if info.chip_erase or self.erase_mode == "chip":
            self.erase_mode = "chip"
        elif info.erased_bytes:
            self.erase_mode = "sector"
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
    probe_id: Optional[str] = None  #: the probe's unique ID (pyOCD's ``DebugProbe.unique_id``)
    target: Optional[str] = None
    target_uid: Optional[str] = None  #: the chip's factory unique ID, lower-case hex of its bytes
    firmware: Optional[str] = None  #: the firmware file's absolute path
    firmware_sha256: Optional[str] = None
    firmware_format: Optional[str] = None
    image_bytes: int = 0
    ok: bool = False
    phase: Optional[str] = None
    program: ProgramStats = field(default_factory=ProgramStats)
    verify: Optional[DataclassInstance] = None  #: piflash.flashing.verify.VerifyStats, or None if not verified
    reset: bool = False
    started_at: float = 0.0  #: Unix time (emitted as ISO 8601, :func:`iso_time`)
    duration: float = 0.0  #: seconds, whole operation
    durations: Dict[str, float] = field(default_factory=dict)  #: seconds per phase run
    error: Optional[dict] = None
    serial: Optional[str] = None  #: the board's serial number (piflash.firmware.patch), if one was given
    patch: Optional[dict] = None  #: per-board values written: {name: {address, value, bytes}}
    protection: Optional[str] = None  #: read-out protection read back: "open" / "locked"
    boot_check: Optional[dict] = None  #: the boot check's :meth:`piflash.production.bootcheck.BootResult.to_dict`
    bundle_sha256: Optional[str] = None  #: SHA-256 of the job bundle (.pfb) the firmware came from (piflash.bundle)
    bundle_version: Optional[int] = None  #: that bundle's version; both None without a bundle
    labgrid_place: Optional[str] = None  #: the labgrid place flashed through (``--labgrid-place``, docs/ci.md)

    @classmethod
    def start(
        cls, operation: str, image: Optional[FirmwareImage], probe_id: Optional[str], target: Optional[str]
    ) -> "OperationResult":
        """A result for an operation starting now (``probe_id`` as asked for: unique ID or part of one)."""
        res = cls(operation=operation, probe_id=probe_id, target=target, started_at=time.time())
        if image is not None:
            res.firmware = os.path.abspath(image.path) if image.path else None
            res.firmware_sha256 = image.sha256
            res.firmware_format = image.format
            res.image_bytes = image.size
            res.bundle_sha256 = image.bundle_sha256
            res.bundle_version = image.bundle_version
        res._t0 = time.monotonic()  # type: ignore[attr-defined]
        return res

    def fail(self, exc) -> None:
        """Record a :class:`~piflash.errors.PiflashError` as this result's error."""
        self.ok = False
        self.error = exc.to_dict()

    def finish(self) -> None:
        """Stamp the total duration."""
        self.duration = round(time.monotonic() - getattr(self, "_t0", time.monotonic()), 4)

    def to_dict(self) -> Dict[str, Any]:
        """The result as ``--json`` prints it (docs/result.md, "Operation results"): everything
        above plus ``ended_at`` and ``verified``; ``started_at``/``ended_at`` as ISO 8601 with the
        UTC offset (:func:`iso_time`), every duration rounded by :func:`seconds`.

        The caller adds ``schema_version`` and ``command`` (:func:`piflash.cli.options.emit_json`).
        """
        out: Dict[str, Any] = {"ok": self.ok}
        for key, value in asdict(self).items():
            out[key] = value
            if key == "started_at":
                out["started_at"] = iso_time(self.started_at or None)
                out["ended_at"] = (
                    iso_time(self.started_at + self.duration) if self.started_at and self.duration else None
                )
        out["verify"] = asdict(self.verify) if self.verify is not None else None
        out["verified"] = self.verify is not None and self.ok
        out["duration"] = seconds(self.duration)
        out["durations"] = {k: seconds(v) for k, v in self.durations.items()}
        return out
