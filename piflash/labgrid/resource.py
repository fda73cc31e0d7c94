"""The labgrid resources of a piflash probe: :class:`PiflashProbe` on this host and
:class:`NetworkPiflashProbe` on an exporter.

labgrid's own ``USBDebugger`` cannot stand for these: its udev match list has no Raspberry Pi
Debug Probe (2e8a:000c) and no DAPLink (0d28:0204), and a ``sim:`` probe is no USB device at all
(docs/ci.md, "labgrid's USBDebugger").
"""

from __future__ import annotations

import attr
from labgrid.factory import target_factory
from labgrid.resource.common import NetworkResource, Resource

from piflash.errors import PiflashError
from piflash.probe.selector import ProbeSelector


def _probe_id(instance, attribute, value) -> None:
    """attrs validator: ``value`` is a probe ID piflash accepts (``ProbeSelector.parse``, the
    rule ``-u`` follows), so a typo in an environment or exporter file fails when labgrid reads
    it, not at the first flash.

    :raises ValueError: not a string, or not a probe ID piflash parses.
    """
    if not isinstance(value, str):
        raise ValueError(f"{attribute.name} must be a string, got {value!r}")
    try:
        ProbeSelector.parse(value)
    except PiflashError as exc:
        raise ValueError(f"{attribute.name}: {exc}") from None


@target_factory.reg_resource
@attr.s(eq=False)
class PiflashProbe(Resource):
    """A debug probe piflash reaches from this host.

    Args:
        probe_id (str): piflash's probe ID, as ``piflash flash -u`` takes it: a serial number,
            ``sim:NAME`` (the simulated board), ``remote:HOST:PORT``; matched whole by piflash.
    """

    probe_id = attr.ib(validator=_probe_id)


@target_factory.reg_resource
@attr.s(eq=False)
class NetworkPiflashProbe(NetworkResource):
    """A debug probe on an exporter: ``host`` is the exporter's SSH host (labgrid's SSH
    connection manager reaches it), ``probe_id`` as for :class:`PiflashProbe`.

    An exporter publishes it with ``cls: NetworkPiflashProbe`` and the two parameters (docs/ci.md):
    its ``Exporter.add_resource`` finds no ``ResourceExport`` of that class in
    ``labgrid.remote.exporter.exports`` and publishes a plain ``ResourceEntry`` with the
    parameters as given, always available.
    """

    probe_id = attr.ib(validator=_probe_id)
