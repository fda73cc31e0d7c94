"""Progress reporting: the interface the flashing workflow calls, and a no-op default.

The workflow never draws anything itself: it calls a :class:`ProgressSink`.
The CLI passes a rich progress display (``piflash.cli.progress``); the station
passes one that feeds systemd's STATUS line; API users can pass their own or none.
"""

from __future__ import annotations

import enum
from typing import Callable, Union


class Phase(str, enum.Enum):
    """The phases of an operation on a board, in the order they run.

    A ``str`` enum: ``Phase.ERASE == "erase"``, and its text (``str()``, JSON, the history's
    ``phase`` column) is the lower-case value, as pyOCD's own progress output names them.
    """

    CONNECT = "connect"  #: open the probe, power up the DAP, discover the core, read the unique ID
    ERASE = "erase"  #: chip or sector erase (pyOCD's FlashBuilder.erase)
    PROGRAM = "program"  #: write pages (pyOCD's FlashBuilder.program)
    VERIFY = "verify"  #: read-back verify (piflash.flashing.verify)
    RESET = "reset"  #: reset the target so the new firmware runs

    def __str__(self) -> str:
        return self.value


class ProgressSink:
    """Receives phase progress, in bytes. Subclass and override what you need.

    Phases (:class:`Phase`), in order: connect, erase, program, verify, reset; a job may add its
    own by name (``"read"``, :data:`piflash.jobs.readback.READ_PHASE`). ``total`` and ``done`` are
    bytes of the image handled in that phase (0 for phases without a size, such as connect and
    reset).
    """

    def phase_start(self, phase: Union[Phase, str], total: int) -> None:
        """A phase begins; ``total`` bytes will be handled (0 if unknown)."""

    def phase_update(self, phase: Union[Phase, str], done: int) -> None:
        """``done`` bytes of the phase are handled so far (monotonic)."""

    def phase_end(self, phase: Union[Phase, str], summary: str = "") -> None:
        """The phase finished; ``summary`` is a short human-readable result."""

    def message(self, text: str) -> None:
        """A line worth showing the user (a warning, a skipped phase)."""


def fraction_callback(sink: ProgressSink, phase: Phase, total: int) -> Callable[[float], None]:
    """Adapt pyOCD's progress callback (a fraction 0.0..1.0) to ``sink`` updates in bytes."""

    last = [-1]

    def callback(fraction: float) -> None:
        done = int(max(0.0, min(1.0, fraction)) * total)
        if done != last[0]:
            last[0] = done
            sink.phase_update(phase, done)

    return callback
