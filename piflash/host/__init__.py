"""The machine piflash runs on (a Raspberry Pi first), apart from any probe or target.

Owns the machine's facts: Pi model, memory, swap and cgroup limit (:mod:`~piflash.host.machine`),
the memory guard run before pyOCD is imported (:mod:`~piflash.host.memguard`), USB devices and why
one cannot be opened (:mod:`~piflash.host.usbscan`), the probe table and the udev rules made from
it (:mod:`~piflash.host.probetable`), the ``plugdev`` group and rules setup
(:mod:`~piflash.host.permissions`, also run as ``python3 -m piflash.host.permissions``), and the
doctor's checks (:mod:`~piflash.host.doctor`).

May import: the standard library, :mod:`piflash.errors`, :mod:`piflash.firmware` (the guard's
format map), the simulator's USB bus (lazily, to list simulated probes), pyOCD only inside the
doctor's checks. Never the target, the engine, production, the record, profiles, the station or
the CLI: those import it.
"""
