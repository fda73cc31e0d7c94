"""pyOCD probe plugin entry point for the Pi's pins (``pyocd.probe`` group, name ``spidev``).

pyOCD imports this module whenever it enumerates probes, so it imports nothing heavy; the plugin
class is built on first attribute access (PEP 562), as ``piflash.sim.probes.plugin`` does,
because importing pyOCD runs the plugin scan that imports this module.
"""

from __future__ import annotations

from typing import Any

__all__ = ["SpidevProbePlugin"]  # noqa: F822  (built by __getattr__)


def _build_plugin_class() -> type:
    from pyocd.core.plugin import Plugin

    cached = globals().get("SpidevProbePlugin")
    if isinstance(cached, type):
        return cached

    class SpidevProbePlugin(Plugin):
        """Registers :func:`piflash.probe.pinprobe.probe_class` as probe type ``spidev``."""

        def load(self) -> type:
            """Return the probe class."""
            from piflash.probe.pinprobe import probe_class

            return probe_class()

        @property
        def name(self) -> str:
            return "spidev"

        @property
        def description(self) -> str:
            return "SWD over the Raspberry Pi's SPI pins (Linux spidev)"

    SpidevProbePlugin.__module__ = __name__
    SpidevProbePlugin.__qualname__ = "SpidevProbePlugin"
    globals()["SpidevProbePlugin"] = SpidevProbePlugin
    return SpidevProbePlugin


def __getattr__(name: str) -> Any:
    if name == "SpidevProbePlugin":
        return _build_plugin_class()
    raise AttributeError("module %r has no attribute %r" % (__name__, name))
