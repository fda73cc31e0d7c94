"""Test helper: pyOCD's own SWJ sequences (``pyocd/probe/swj.py``) driven onto a simulated
board's SWD wire (a :class:`~piflash.sim.debug.multidrop.MultidropWire`), no probe in between."""

from __future__ import annotations


class WireProbe:
    """Just enough of a probe for pyOCD's ``SWJSequenceSender``: its bits go to ``wire``."""

    def __init__(self, wire):
        self.wire = wire

    def swj_sequence(self, length, bits):
        self.wire.swj_sequence(length, bits)


def sender(wire, use_dormant: bool = True):
    """pyOCD's ``SWJSequenceSender`` onto ``wire``."""
    from pyocd.probe.swj import SWJSequenceSender
    return SWJSequenceSender(WireProbe(wire), use_dormant)
