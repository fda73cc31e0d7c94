"""piflash in labgrid (issue 45, docs/ci.md): the resources, drivers and strategy a labgrid
environment names once ``imports: [piflash.labgrid]`` has loaded this package (importing it
registers them with labgrid's ``target_factory``).

Owns: ``resource.py`` (``PiflashProbe``, ``NetworkPiflashProbe``: a piflash probe ID, ``sim:``
ones included, on this host or on an exporter), ``driver.py`` (``PiflashDriver``: labgrid's
``BootstrapProtocol`` and ``ResetProtocol`` through ``piflash flash``/``piflash reset``, run
where the probe is, as labgrid's ``OpenOCDDriver`` runs openocd; ``PiflashBootDriver``: the boot
check, ``--boot-check``), ``strategy.py`` (``PiflashStrategy``: off -> flashed -> booted).

May import: ``shared``, ``probe`` (the probe ID's syntax), ``production`` (the boot check's
syntax): piflash's plain modules, never the click layer, and nothing in piflash imports this
package. Third-party: ``labgrid`` and its ``attr`` (the ``labgrid`` extra, ``piflash[labgrid]``).
pyOCD is never imported here: the flash runs in a ``piflash`` process of its own.
"""

from piflash.labgrid.driver import PiflashBootDriver, PiflashDriver, PiflashRunError
from piflash.labgrid.resource import NetworkPiflashProbe, PiflashProbe
from piflash.labgrid.strategy import PiflashStrategy, Status

__all__ = [
    "NetworkPiflashProbe",
    "PiflashBootDriver",
    "PiflashDriver",
    "PiflashProbe",
    "PiflashRunError",
    "PiflashStrategy",
    "Status",
]
