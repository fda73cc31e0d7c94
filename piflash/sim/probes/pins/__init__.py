"""Simulated boards on the Pi's own pins: a simulated spidev under python-periphery (issue 43).

Switched on only explicitly, by the environment variable ``PIFLASH_SIM_PINS``::

    PIFLASH_SIM_PINS="bay1@spidev:0.0:nreset=25,bay2@spidev:1.0,bay3@gpio:gpiochip0:swclk=5,swdio=6,nreset=13"

Each entry is ``BOARD@spidev:B.C``: simulated board ``BOARD`` (of the board store,
``$PIFLASH_SIM_DIR``) is wired to ``/dev/spidevB.C`` (SWCLK, SWDIO through the resistor, GND),
``BOARD@spidev:B.C:nreset=N`` (or ``nreset=CHIP/N``): the same with the board's nRESET on line N
of a simulated ``/dev/gpiochip0`` (or CHIP; a
:class:`~piflash.sim.probes.pins.gpiochip.ResetTap`), or ``BOARD@gpio:CHIP:swclk=N,swdio=N[,nreset=N]``: to lines of ``/dev/CHIP``
(:mod:`piflash.sim.probes.pins.gpiochip`).
:func:`install` makes a directory of device files, one regular file per device, registers a
:class:`~piflash.sim.probes.pins.spidev.SimSpidev` for each with the seam
(:mod:`piflash.sim.probes.pins.seam`: python-periphery's own ``os.open`` and ``fcntl.ioctl``
calls on those files reach the simulated device) and returns a :class:`PinsBackend` whose
``dev_root`` piflash's pin probes use instead of ``/dev``. While the variable is set, real pin
devices are not used in that process.

Found by piflash through the entry point group ``piflash.pins_backend`` (pyproject.toml), as the
simulated USB bus is through ``piflash.usb_backend``.

May import: python-periphery (to put the seam in it), pyOCD, the board store, the debug models
(:mod:`piflash.sim.debug.swdline`) and the simulated USB probes' timing model
(:mod:`piflash.sim.probes.usb.firmware`, :mod:`~piflash.sim.probes.usb.timing`). Never anything
of piflash outside ``piflash.sim``.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

__all__ = ["ENV_VAR", "PinsBackend", "parse_spec", "install", "uninstall", "pins_backend", "active_backend"]

ENV_VAR = "PIFLASH_SIM_PINS"
_SPIDEV = re.compile(
    r"^spidev:(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(?::nreset=(?:([A-Za-z0-9_][A-Za-z0-9_.-]*)/)?(0|[1-9][0-9]*))?$",
    re.IGNORECASE,
)
#: The chip of a spidev entry's nRESET line when it names none (piflash.probe.pins.DEFAULT_CHIP).
DEFAULT_CHIP = "gpiochip0"
_GPIO = re.compile(
    r"^gpio:([A-Za-z0-9_][A-Za-z0-9_.-]*):swclk=([0-9]+),swdio=([0-9]+)(?:,nreset=([0-9]+))?$", re.IGNORECASE
)
_ENTRY_START = re.compile(r",(?=\s*[A-Za-z0-9_.-]+\s*@)")

_backend: Optional["PinsBackend"] = None


def parse_spec(text: str) -> List[Tuple[str, str]]:
    """Parse ``PIFLASH_SIM_PINS``: a list of ``(board, device)`` with ``device`` the device
    file's name (``spidev0.0``, followed by ``:nreset=N`` or ``:nreset=CHIP/N`` when the entry
    wires nRESET) or a ``gpio:`` probe ID as written.

    :raises ValueError: an entry that is neither ``BOARD@spidev:B.C[:nreset=[CHIP/]N]`` nor
        ``BOARD@gpio:CHIP:swclk=N,swdio=N[,nreset=N]``, or one device given twice.
    """
    out: List[Tuple[str, str]] = []
    for item in (part.strip() for part in _ENTRY_START.split(text or "")):
        if not item:
            continue
        board, at, probe = item.partition("@")
        probe = probe.strip()
        m = _SPIDEV.match(probe)
        if not at or not board.strip() or not (m or _GPIO.match(probe)):
            raise ValueError(
                "%s: bad entry %r (BOARD@spidev:BUS.CS[:nreset=N] or BOARD@gpio:CHIP:swclk=N,swdio=N[,nreset=N])"
                % (ENV_VAR, item)
            )
        device = "spidev%s.%s" % (m.group(1), m.group(2)) if m else "gpio:" + probe[len("gpio:") :]
        if m and m.group(4) is not None:
            chip = m.group(3) or DEFAULT_CHIP
            device += ":nreset=%s%s" % ("" if chip == DEFAULT_CHIP else chip + "/", m.group(4))
        if device.split(":nreset=")[0] in (d.split(":nreset=")[0] for _, d in out):
            raise ValueError("%s: %s is wired to two boards" % (ENV_VAR, device))
        out.append((board.strip().lower(), device))
    return out


@dataclass
class PinsBackend:
    """The simulated pin devices of this process.

    :ivar dev_root: the directory holding their device files (str), in place of ``/dev``.
    :ivar devices: device file name (``spidev0.0``) or ``gpio:`` probe ID -> its simulated device
        (a :class:`~piflash.sim.probes.pins.gpiochip.GpioWire` for a ``gpio:`` one).
    :ivar chips: GPIO chip name -> its simulated chip.
    :ivar resets: spidev device file name -> the :class:`~piflash.sim.probes.pins.gpiochip.ResetTap`
        of its board's nRESET, for the devices wired with one.
    :ivar spidev_probes: spidev device file name -> its probe ID with the nRESET line
        (``spidev:0.0:nreset=25``), for those devices: the configured probes a listing names.
    """

    dev_root: str
    devices: Dict[str, object] = field(default_factory=dict)
    chips: Dict[str, Any] = field(default_factory=dict)
    resets: Dict[str, Any] = field(default_factory=dict)
    spidev_probes: Dict[str, str] = field(default_factory=dict)

    def chip(self, name: str) -> Any:
        """The simulated GPIO chip ``name``, created (with its device file) on first use."""
        chip = self.chips.get(name)
        if chip is None:
            from piflash.sim.probes.pins import seam
            from piflash.sim.probes.pins.gpiochip import SimGpioChip

            chip = self.chips[name] = SimGpioChip(name, self.dev_root)
            path = os.path.join(self.dev_root, name)
            with open(path, "wb"):
                pass
            seam.register(path, chip)
        return chip

    @property
    def gpio_probes(self) -> List[str]:
        """The ``gpio:`` probe IDs wired here (configured probes, for a passive listing)."""
        return [d for d in self.devices if d.startswith("gpio:")]


def install(spec: Optional[str] = None, store=None) -> Optional[PinsBackend]:
    """Create the simulated devices of ``spec`` (default: ``PIFLASH_SIM_PINS``) and the seam.

    :returns: the backend, or None when the specification is empty.
    :raises ValueError: a malformed specification.
    :raises ImportError: python-periphery is not installed.
    """
    global _backend
    spec = os.environ.get(ENV_VAR, "") if spec is None else spec
    entries = parse_spec(spec)
    if not entries:
        return None
    from piflash.sim.probes.pins import seam
    from piflash.sim.probes.pins.spidev import SimSpidev
    from piflash.sim.store import SimStore

    seam.install()
    uninstall()
    store = store if store is not None else SimStore()
    root = tempfile.mkdtemp(prefix="piflash-sim-pins-")
    backend = PinsBackend(root)

    for board, device in entries:
        if device.startswith("gpio:"):
            m = _GPIO.match(device)
            assert m is not None
            chip = backend.chip(m.group(1))
            nreset = int(m.group(4)) if m.group(4) is not None else None
            backend.devices[device] = chip.wire(board, store, int(m.group(2)), int(m.group(3)), nreset)
            continue
        device, _, nreset_text = device.partition(":nreset=")
        path = os.path.join(root, device)
        with open(path, "wb"):
            pass
        sim = SimSpidev(device, board, store)
        seam.register(path, sim)
        backend.devices[device] = sim
        if nreset_text:
            chip_name, _, line = nreset_text.rpartition("/")
            backend.resets[device] = backend.chip(chip_name or DEFAULT_CHIP).reset_tap(sim, int(line))
            bus_cs = device[len("spidev") :]
            backend.spidev_probes[device] = "spidev:%s:nreset=%s" % (bus_cs, nreset_text)
    _backend = backend
    atexit.register(_remove, root)
    return backend


def _remove(root: str) -> None:
    shutil.rmtree(root, ignore_errors=True)


def uninstall() -> None:
    """Forget the simulated devices (their boards are released) and remove their files."""
    global _backend
    backend, _backend = _backend, None
    if backend is None:
        return
    from piflash.sim.probes.pins import seam

    for name in backend.chips:
        seam.unregister(os.path.join(backend.dev_root, name))
    for name, device in backend.devices.items():
        seam.unregister(os.path.join(backend.dev_root, name))
        try:
            device.firmware.close()  # type: ignore[attr-defined]
        except Exception:
            pass
    _remove(backend.dev_root)


def active_backend() -> Optional[PinsBackend]:
    """The installed backend, or None."""
    return _backend


def pins_backend() -> Optional[PinsBackend]:
    """The simulated pin devices, installed from ``PIFLASH_SIM_PINS`` on first use; None when
    the variable is unset or empty. The ``piflash.pins_backend`` entry point."""
    if _backend is None and os.environ.get(ENV_VAR, "").strip():
        install()
    return _backend
