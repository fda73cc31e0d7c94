"""The virtual clock's ledger, written to a file so that a benchmark can read another process's clock.

Off by default. Switched on by the environment variable ``PIFLASH_SIM_USB_LEDGER``, the path of a
file: every simulated USB device of the process (:class:`~piflash.sim.probes.usb.device.SimUsbDevice`)
then appends one JSON line per event to it::

    {"event": "claim", "pid": 4242, "seq": 0, "serial": "15E4DA40F9C0A9DF", "board": "bay1",
     "preset": "debugprobe", "generation": 3, "clock": {"now_s": 0.0123, "phases": {...}, ...}}

``clock`` is :meth:`VirtualClock.snapshot` (virtual seconds since the device was plugged in, its
ledger by phase and resource, its request counts); ``seq`` numbers one device's events in order;
``generation`` is the board's :attr:`~piflash.sim.store.BoardInfo.generation` in the session's
probe (None outside a session). The events:

* ``claim`` -- the host claimed the CMSIS-DAP interface (a pyOCD session opened the probe), after
  the board was loaded.
* ``board_changed`` -- the first USB transfer of a session after the board behind the probe was
  swapped for another or pulled off the fixture (:meth:`~piflash.sim.store.SimStore.swap`,
  :meth:`~piflash.sim.store.SimStore.pull`). The snapshot is taken *before* that transfer is
  charged: its ``now_s`` is when the host's last transfer on the old board ended, which is when
  the poll that notices the change begins. The probe looks at the store at most every 0.05 s of
  wall time (:class:`~piflash.sim.probes.simprobe.SimProbe`), so a transfer sent within 0.05 s of a swap may
  still reach the old board, as a poll just before the lift does on hardware.
* ``release`` -- the host released the interface (the session closed).
* ``exit`` -- the process is exiting (``atexit``), once per device: the whole process's clock.

Lines are appended with a single ``write(2)`` on a file opened ``O_APPEND``, so several devices
and processes may share one file. Nothing here reads the wall clock: the figures are the timing
model's, as deterministic as the model. A file that cannot be written is reported on stderr once
and the ledger stops; the simulation goes on.
"""

from __future__ import annotations

import atexit
import json
import os
import sys
import weakref
from typing import List, Optional

__all__ = ["LEDGER_ENV_VAR", "Ledger", "ledger_from_env", "read_ledger"]

#: The switch: path of the ledger file (appended to, created if missing).
LEDGER_ENV_VAR = "PIFLASH_SIM_USB_LEDGER"

_devices: "weakref.WeakSet" = weakref.WeakSet()  # devices that write an ``exit`` line
_hooked = False


class Ledger:
    """Appends one device's events to a ledger file.

    :param path: The ledger file.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._seq = 0
        self._broken = False

    def record(self, event: str, device, generation: Optional[int] = None) -> None:
        """Append ``event`` for ``device`` (a ``SimUsbDevice``) with its clock's snapshot.

        :param generation: The board generation of the open session, if any.
        """
        if self._broken:
            return
        entry = {
            "event": event,
            "pid": os.getpid(),
            "seq": self._seq,
            "serial": device.serial,
            "board": device.board_name,
            "preset": device.preset.name,
            "generation": generation,
            "clock": device.clock.snapshot(),
        }
        self._seq += 1
        line = (json.dumps(entry, sort_keys=True) + "\n").encode()
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line)
            finally:
                os.close(fd)
        except OSError as err:
            self._broken = True
            print("piflash: %s: cannot write %s: %s" % (LEDGER_ENV_VAR, self.path, err), file=sys.stderr)


def ledger_from_env(device) -> Optional[Ledger]:
    """A :class:`Ledger` for ``device`` if ``PIFLASH_SIM_USB_LEDGER`` is set, else None; the
    device then also gets an ``exit`` line when the process exits."""
    global _hooked
    path = os.environ.get(LEDGER_ENV_VAR, "").strip()
    if not path:
        return None
    _devices.add(device)
    if not _hooked:
        atexit.register(_at_exit)
        _hooked = True
    return Ledger(path)


def _at_exit() -> None:
    for device in list(_devices):
        ledger = getattr(device, "ledger", None)
        if ledger is not None:
            ledger.record("exit", device)


def read_ledger(path: str) -> List[dict]:
    """The complete events of a ledger file, in the order written (a missing file has none)."""
    try:
        with open(path, "r", encoding="utf-8") as fh:
            text = fh.read()
    except FileNotFoundError:
        return []
    # A line still being written (no newline yet) is left for the next read.
    return [json.loads(line) for line in text.split("\n")[:-1] if line.strip()]
