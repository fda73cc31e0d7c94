"""Debug probes and the other transports to a board: which one a command means, matched exactly, and
how it is found and opened.

Owns the probe selector (:mod:`~piflash.probe.selector`): what ``-u``/``--probe``, a profile's
``probe:`` and a station's ``probes:`` take, parsed once into a :class:`ProbeSelector` against
one table of probe kinds (:data:`~piflash.probe.selector.PROBE_KINDS`: a USB serial number,
``sim:``, ``remote:``, ``picoboot``), and the one rule for which probe IDs it matches: the whole
ID, without regard to case, or a prefix only when written as one (``0240*``). Also finding the
probe a selector designates (:mod:`~piflash.probe.discovery`), pyOCD's errors as piflash's
(:mod:`~piflash.probe.pyocd_errors`), USB devices and why one cannot be opened
(:mod:`~piflash.probe.usbscan`), the probe table and the udev rules made from it
(:mod:`~piflash.probe.probetable`), the ``plugdev`` group and rules setup
(:mod:`~piflash.probe.permissions`, also run as ``python3 -m piflash.probe.permissions``),
``remote:HOST:PORT`` probes with every wait bounded (:mod:`~piflash.probe.remote`), batched DAP
transfers (:mod:`~piflash.probe.batched_dap`) and a Pico in BOOTSEL mode as a probe of its own
(:mod:`~piflash.probe.picoboot`: the boot ROM's PICOBOOT commands over pyusb), and the Pi's own
pins as the probe (:mod:`~piflash.probe.pins`: the ``spidev:`` and ``gpio:`` probe IDs;
:mod:`~piflash.probe.pinprobe`: SWD over spidev as a pyOCD probe, with
:mod:`~piflash.probe.spiswd` batching SWD packets into SPI messages and
:mod:`~piflash.probe.pinplugin` its ``pyocd.probe`` entry point).

May import: the standard library, :mod:`piflash.errors`, :mod:`piflash.limits`, pyOCD, pyusb and
python-periphery (lazily). Never the simulator (a simulated USB bus is a registered ``piflash.usb_backend``
entry point, simulated pin devices a ``piflash.pins_backend`` one), the host, the targets or anything above them: they import it.
"""

from piflash.probe.selector import (
    PROBE_KINDS,
    ProbeKind,
    ProbeSelector,
    no_probe_error,
    parse_selector,
)

__all__ = ["PROBE_KINDS", "ProbeKind", "ProbeSelector", "no_probe_error", "parse_selector"]
