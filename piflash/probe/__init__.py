"""Debug probes and other ways into a board: which one a command means, matched exactly.

Owns the probe selector (:mod:`~piflash.probe.selector`): what ``-u``/``--probe``, a profile's
``probe:`` and a station's ``probes:`` take, parsed once into a :class:`ProbeSelector` against
one table of probe kinds (:data:`~piflash.probe.selector.PROBE_KINDS`: a USB serial number,
``sim:``, ``remote:``, ``picoboot``), and the one rule for which probe IDs it matches: the whole
ID, without regard to case, or a prefix only when written as one (``0240*``).

May import: the standard library and :mod:`piflash.errors`. Never pyOCD, the host, the target,
the engine or anything above them: they import it.
"""

from piflash.probe.selector import PROBE_KINDS, ProbeKind, ProbeSelector, no_probe_error, parse_selector

__all__ = ["PROBE_KINDS", "ProbeKind", "ProbeSelector", "no_probe_error", "parse_selector"]
