"""pyOCD probe plugin entry point (``pyocd.probe`` group, name ``sim``).

pyOCD imports this module every time it enumerates probes, so it imports nothing heavy: the
probe class is loaded by ``SimProbePlugin.load()``, the emulator only when a probe is opened.

``SimProbePlugin`` is built on first attribute access (PEP 562 module ``__getattr__``) rather
than at import time, because importing pyOCD runs its plugin scan, which imports this module:
defining the class eagerly would make ``import piflash.sim.probes.plugin`` before ``import pyocd`` a
circular import.
"""

from __future__ import annotations

from typing import Any

from piflash.sim.probes import loading
from piflash.sim.probes.loading import unicorn_available

__all__ = ["SimProbePlugin"]


def _build_plugin_class() -> type:
    from pyocd.core.plugin import Plugin

    cached = globals().get("SimProbePlugin")
    if cached is not None:  # built by a re-entrant call during the pyOCD import
        return cached

    class SimProbePlugin(Plugin):
        """Registers :class:`piflash.sim.probes.simprobe.SimProbe` as probe type ``sim`` (``-u sim:NAME``).

        Loaded only when the optional ``unicorn`` package is installed (``piflash[sim]``); on a
        Raspberry Pi install without it, pyOCD sees no ``sim`` probe type at all.
        """

        def should_load(self) -> bool:
            """True when ``unicorn`` is importable. Also the moment pyOCD's plugin scan gives
            piflash to put simulated USB probes on pyusb's bus, when ``PIFLASH_SIM_USB`` asks
            for them (:mod:`piflash.sim.probes.usb`), before pyOCD looks for USB devices."""
            if not unicorn_available():
                return False
            from piflash.sim.probes.usb import install_from_env

            install_from_env()
            return not loading.probe_module_importing

        def load(self) -> type:
            """Return the probe class."""
            from piflash.sim.probes.simprobe import SimProbe

            return SimProbe

        @property
        def name(self) -> str:
            return "sim"

        @property
        def description(self) -> str:
            return "piflash simulated Cortex-M boards"

    SimProbePlugin.__module__ = __name__
    SimProbePlugin.__qualname__ = "SimProbePlugin"
    globals()["SimProbePlugin"] = SimProbePlugin
    return SimProbePlugin


def __getattr__(name: str) -> Any:
    if name == "SimProbePlugin":
        return _build_plugin_class()
    raise AttributeError("module %r has no attribute %r" % (__name__, name))
