"""How the outside reaches a simulated board: the pyOCD ``DebugProbe`` ``sim:NAME``
(:mod:`~piflash.sim.probes.simprobe`) and its plugin entry point (:mod:`~piflash.sim.probes.plugin`,
:mod:`~piflash.sim.probes.loading`), pyOCD's remote probe server (:mod:`~piflash.sim.probes.server`,
:mod:`~piflash.sim.probes.spawn` runs one in a child process) and simulated USB CMSIS-DAP probes
below pyusb (:mod:`piflash.sim.probes.usb`).

May import: everything else of :mod:`piflash.sim`, pyOCD, pyusb. Nothing of piflash outside the
simulator.
"""
