"""Recorded probe traffic played back below pyusb, with the simulated board out of the way.

A :class:`~piflash.sim.probes.usb.device.SimUsbDevice` whose ``recording`` is a list appends
every DAP packet pyOCD sends and the response the simulated probe gave. :class:`ReplayDevice`
answers the same packets with the same responses, in order, without a board, an emulator or a
virtual clock: what runs is pyOCD, pyusb and whatever drives them (piflash), which is what a host
computes in front of a real probe. ``benchmarks/host_cost.py`` times that CPU work.

The replay is exact or it stops: a packet that differs from the recording's next one, or one
past its end, raises :class:`ReplayMismatch` from the USB write (and is kept in
:attr:`ReplayDevice.mismatch` in case a caller swallows it); :meth:`ReplayDevice.check_done`
raises when packets of the recording were never sent.

May import: pyusb and the simulated USB bus's descriptors (:mod:`.device`, :mod:`.backend`);
never the board, the emulator or anything of piflash outside ``piflash.sim``.
"""

from __future__ import annotations

import errno
import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Deque, List, Optional, Tuple

from piflash.sim.probes.usb.backend import SimUsbBackend
from piflash.sim.probes.usb.device import describe, string_descriptor
from piflash.sim.probes.usb.presets import get_preset

__all__ = ["Recording", "ReplayDevice", "ReplayMismatch", "replay_backend"]


class ReplayMismatch(RuntimeError):
    """pyOCD sent a packet the recording does not have at this point (or sent too few)."""


@dataclass
class Recording:
    """One probe's traffic: ``preset`` (its name), ``serial`` (the USB serial number pyOCD
    selects it by) and ``exchanges``, every OUT packet with the response it got, in order
    (``[(bytes, bytes), ...]``). ``marks`` names positions in ``exchanges`` (``{label: index}``:
    where an operation began, for a benchmark to split the replay's time)."""

    preset: str
    serial: str
    exchanges: List[Tuple[bytes, bytes]]
    marks: dict = field(default_factory=dict)

    def to_json(self) -> str:
        """The recording as JSON text (packets in hex)."""
        return json.dumps(
            {
                "preset": self.preset,
                "serial": self.serial,
                "marks": self.marks,
                "exchanges": [[o.hex(), i.hex()] for o, i in self.exchanges],
            }
        )

    @classmethod
    def from_json(cls, text: str) -> "Recording":
        """The inverse of :meth:`to_json`. :raises ValueError: Not a recording."""
        raw = json.loads(text)
        return cls(
            raw["preset"],
            raw["serial"],
            [(bytes.fromhex(o), bytes.fromhex(i)) for o, i in raw["exchanges"]],
            raw.get("marks", {}),
        )


class ReplayDevice:
    """A probe that answers from a :class:`Recording` (same descriptors as the simulated probe
    of the same preset and serial).

    Attributes: ``sent`` (packets answered so far), ``mismatch`` (the first
    :class:`ReplayMismatch`, or None), ``unplugged``/``access_denied`` (False: what the
    backend asks of a device).
    """

    def __init__(self, recording: Recording, address: int = 2) -> None:
        self.preset = get_preset(recording.preset)
        self.serial = recording.serial
        self.recording = recording
        self.unplugged = False
        self.access_denied = False
        self.sent = 0
        self.mismatch: Optional[ReplayMismatch] = None
        self._responses: Deque[bytes] = deque()
        self._cond = threading.Condition()
        describe(self, self.preset, recording.serial, address)

    # -- what SimUsbBackend calls ------------------------------------------------------------
    def string_descriptor(self, index: int) -> bytes:
        """GET_DESCRIPTOR(STRING, index), as the simulated probe answers it."""
        return string_descriptor(self.strings, index)

    def check_present(self) -> None:
        """Always present."""

    def claim(self) -> None:
        """Claiming the interface: nothing to open."""

    def release(self) -> None:
        """Releasing it: responses not read are dropped, as the simulated probe does."""
        with self._cond:
            self._responses.clear()

    def write_out(self, data: bytes) -> int:
        """An OUT transfer: check each DAP packet in it (several on a probe whose firmware frames
        commands by packet, as the simulated probe splits them) against the recording and queue
        the recorded responses.

        :raises ReplayMismatch: A packet is not the recording's next one.
        """
        size = self.preset.packet_size
        if self.preset.packet_framing and len(data) > size:
            for i in range(0, len(data), size):
                self._answer(data[i : i + size])
            return len(data)
        self._answer(data)
        return len(data)

    def _answer(self, data: bytes) -> None:
        with self._cond:
            index = self.sent
            exchanges = self.recording.exchanges
            if index >= len(exchanges):
                self._fail(
                    "packet %d (%s) is past the end of the recording (%d packets)"
                    % (index, bytes(data[:16]).hex(), len(exchanges))
                )
            expected, response = exchanges[index]
            if bytes(data) != expected:
                self._fail(
                    "packet %d differs from the recording: sent %s, recorded %s"
                    % (index, bytes(data[:32]).hex(), expected[:32].hex())
                )
            self.sent = index + 1
            self._responses.append(response)
            self._cond.notify_all()

    def read_in(self, size: int, timeout_ms: int) -> bytes:
        """An IN transfer: the oldest response not read yet; times out (ETIMEDOUT) after
        ``timeout_ms`` with nothing to read, as a probe does."""
        import usb.core

        deadline = time.monotonic() + max(timeout_ms, 1) / 1000.0
        with self._cond:
            while not self._responses:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise usb.core.USBError("Operation timed out", -7, errno.ETIMEDOUT)
                self._cond.wait(remaining)
            return self._responses.popleft()[:size]

    # -- checks ------------------------------------------------------------------------------
    def check_done(self) -> None:
        """:raises ReplayMismatch: A mismatch happened, or packets of the recording were never
        sent."""
        if self.mismatch is not None:
            raise self.mismatch
        if self.sent != len(self.recording.exchanges):
            raise ReplayMismatch(
                "%d of the recording's %d packets were sent" % (self.sent, len(self.recording.exchanges))
            )

    def _fail(self, text: str) -> None:
        err = ReplayMismatch(text)
        if self.mismatch is None:
            self.mismatch = err
        raise err


def replay_backend(recording: Recording) -> SimUsbBackend:
    """A pyusb backend whose bus holds one :class:`ReplayDevice` playing ``recording`` (put it
    in place with :func:`piflash.sim.probes.usb.install_backend`)."""
    return SimUsbBackend([ReplayDevice(recording)])
