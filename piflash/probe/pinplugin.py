"""pyOCD probe plugin entry points for the Pi's pins (``pyocd.probe`` group, names ``spidev``, ``gpio``).

pyOCD imports this module whenever it enumerates probes, so it imports nothing heavy; the plugin
class is built on first attribute access (PEP 562), as ``piflash.sim.probes.plugin`` does,
because importing pyOCD runs the plugin scan that imports this module.
"""

from __future__ import annotations

from typing import Any

__all__ = ["SpidevProbePlugin", "GpioProbePlugin"]  # noqa: F822  (built by __getattr__)


_DESCRIPTIONS = {
    "spidev": "SWD over the Raspberry Pi's SPI pins (Linux spidev)",
    "gpio": "SWD bit-banged on GPIO lines (Linux GPIO character device v2)",
}


def _build_plugin_class(kind: str) -> type:
    from pyocd.core.plugin import Plugin

    attr = "%sProbePlugin" % ("Spidev" if kind == "spidev" else "Gpio")
    cached = globals().get(attr)
    if isinstance(cached, type):
        return cached

    class PinProbePlugin(Plugin):
        """Registers :func:`piflash.probe.pinprobe.probe_class` of one kind as a pyOCD probe type."""

        def load(self) -> type:
            """Return the probe class."""
            from piflash.probe.pinprobe import probe_class

            return probe_class(kind)

        @property
        def name(self) -> str:
            return kind

        @property
        def description(self) -> str:
            return _DESCRIPTIONS[kind]

    PinProbePlugin.__module__ = __name__
    PinProbePlugin.__name__ = PinProbePlugin.__qualname__ = attr
    globals()[attr] = PinProbePlugin
    return PinProbePlugin


def __getattr__(name: str) -> Any:
    if name == "SpidevProbePlugin":
        return _build_plugin_class("spidev")
    if name == "GpioProbePlugin":
        return _build_plugin_class("gpio")
    raise AttributeError("module %r has no attribute %r" % (__name__, name))
