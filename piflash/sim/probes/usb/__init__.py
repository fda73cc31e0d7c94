"""Simulated USB CMSIS-DAP probes below pyOCD's USB layer, with a virtual clock.

Switched on only explicitly, by the environment variable ``PIFLASH_SIM_USB``::

    PIFLASH_SIM_USB="bay1@debugprobe,bench@daplink"

Each entry is ``BOARD[@PRESET]``: simulated board ``BOARD`` (of the board store,
``$PIFLASH_SIM_DIR``; created with ``piflash sim create``) sits behind a simulated probe of kind
``PRESET`` (:data:`~piflash.sim.probes.usb.presets.PRESETS`; default ``debugprobe``); the preset
``bootsel`` puts an RP2040 board itself on the bus in USB BOOTSEL mode, no probe between, and
``app`` / ``app-noreset`` the board running pico-sdk firmware with USB stdio, with or without
the reset interface that reboots it into BOOTSEL (:mod:`piflash.sim.probes.usb.picoboot`). An entry
``BOARD@PRESET!noaccess`` is a probe whose device node this user may not open (EACCES).

The seam. pyusb has no backend registry: ``usb.core.find()`` without a backend asks
``usb.backend.libusb1.get_backend()`` first, and ``libusb_package.find()`` (which pyOCD uses when
that package is installed) calls the same function through its cached
``get_libusb1_backend()``. :func:`install` replaces that one function so that both return the
simulated bus, and clears libusb_package's cache. That is the narrowest point where both
discovery paths meet; nothing of pyOCD is touched. While the variable is set, real USB devices
are not visible to pyusb in that process: a machine with real probes never gets the simulation
by itself, and a simulation never mixes with real probes.

Each device keeps a virtual clock (:mod:`piflash.sim.probes.usb.timing`). ``PIFLASH_SIM_USB_LEDGER=FILE``
(off by default) makes every device append its clock's snapshot to ``FILE`` as JSON lines when a
session opens and closes, when the board behind it is swapped or pulled, and at process exit, so a
benchmark can read the clock of another process (:mod:`piflash.sim.probes.usb.ledger`).

:func:`install` runs when ``piflash`` starts and when pyOCD loads piflash's ``sim`` probe plugin
(so the stock ``pyocd`` command sees the probes too), always only if the variable is set.

May import: pyusb, pyOCD, the board store and :mod:`piflash.sim.probes.simprobe` (the wire to the
target). Never anything of piflash outside ``piflash.sim``.
"""

from __future__ import annotations

import os
from typing import Optional

from piflash.sim.probes.usb.spec import (
    BOOTSEL,
    ENV_VAR,
    attached_boards,
    enabled,
    parse_spec,
)

_backend = None
_saved_get_backend = None
#: True while :func:`install` imports the simulation: importing it imports pyOCD, whose plugin
#: scan calls :func:`install_from_env` again, which must then wait for the outer call.
_installing = False

__all__ = [
    "ENV_VAR",
    "parse_spec",
    "install",
    "install_backend",
    "uninstall",
    "active_backend",
    "enabled",
    "attached_boards",
]


def active_backend():
    """The installed :class:`~piflash.sim.probes.usb.backend.SimUsbBackend`, or None."""
    return _backend


def install(spec: Optional[str] = None, store=None):
    """Put the simulated bus in place of pyusb's libusb1 backend, if switched on.

    :param spec: Devices as in ``PIFLASH_SIM_USB``; default: the variable (nothing happens when
        it is unset or empty).
    :param store: Board store (default ``SimStore()``).
    :returns: The backend, or None when off.
    :raises ValueError: A malformed specification.
    """
    global _installing
    spec = os.environ.get(ENV_VAR, "") if spec is None else spec
    entries = parse_spec(spec)
    if not entries:
        return None
    _installing = True
    try:
        from piflash.sim.probes.usb.backend import SimUsbBackend
        from piflash.sim.probes.usb.device import SimUsbDevice
        from piflash.sim.probes.usb.presets import get_preset
        from piflash.sim.store import SimStore
    finally:
        _installing = False
    store = store if store is not None else SimStore()
    devices = []
    for address, (board, preset, denied, serial) in enumerate(entries, start=2):
        if preset in (BOOTSEL, "app", "app-noreset"):
            from piflash.sim.probes.usb import picoboot_rp2350  # noqa: F401  (registers the RP2350's)
        if preset == BOOTSEL:
            from piflash.sim.probes.usb.picoboot import bootsel_device

            device = bootsel_device(board, store, address)
        elif preset in ("app", "app-noreset"):
            from piflash.sim.probes.usb.picoboot import SimAppDevice

            device = SimAppDevice(board, store, address, reset_interface=preset == "app")
        else:
            device = SimUsbDevice(get_preset(preset), board, store, address, serial=serial)
        device.access_denied = denied
        devices.append(device)
    return install_backend(SimUsbBackend(devices))


def install_backend(backend):
    """Put ``backend`` (a pyusb ``IBackend``: the simulated bus, or the replay bus of
    :mod:`piflash.sim.probes.usb.replay`) in place of pyusb's libusb1 backend; returns it."""
    global _backend, _saved_get_backend
    import usb.backend.libusb1 as libusb1

    _backend = backend
    if _saved_get_backend is None:
        _saved_get_backend = libusb1.get_backend
    libusb1.get_backend = _get_backend
    _clear_libusb_package_cache()
    return _backend


def _get_backend(find_library=None):
    """Stands in for ``usb.backend.libusb1.get_backend`` while the simulation is installed."""
    return _backend


def uninstall() -> None:
    """Restore pyusb's own libusb1 backend lookup (tests)."""
    global _backend, _saved_get_backend
    if _saved_get_backend is not None:
        import usb.backend.libusb1 as libusb1

        libusb1.get_backend = _saved_get_backend
        _saved_get_backend = None
    _backend = None
    _clear_libusb_package_cache()


def _clear_libusb_package_cache() -> None:
    try:
        import libusb_package
    except ImportError:
        return
    clear = getattr(getattr(libusb_package, "get_libusb1_backend", None), "cache_clear", None)
    if clear is not None:
        clear()


def usb_backend():
    """The simulated bus as a pyusb backend, installed from ``PIFLASH_SIM_USB`` if need be
    (:func:`install_from_env`); None when the variable is unset or empty.

    Registered under the entry point group ``piflash.usb_backend`` (pyproject.toml), through
    which piflash's USB code finds it without importing the simulator by name.
    """
    install_from_env()
    return active_backend()


def install_from_env() -> None:
    """:func:`install` if ``PIFLASH_SIM_USB`` is set and nothing is installed yet; a bad value
    is reported on stderr once and ignored (probe enumeration must not break)."""
    if _backend is not None or _installing or not enabled():
        return
    try:
        install()
    except (ValueError, ImportError) as err:
        import sys

        print("piflash: %s ignored: %s" % (ENV_VAR, err), file=sys.stderr)
