"""The machine piflash runs on (a Raspberry Pi first), apart from any probe or target.

Owns the machine's facts: Pi model, memory, swap and cgroup limit (:mod:`~piflash.host.machine`),
the memory guard run before pyOCD is imported (:mod:`~piflash.host.memguard`) and the doctor's
checks (:mod:`~piflash.host.doctor`).

May import: the standard library, :mod:`piflash.errors`, :mod:`piflash.probe` (the doctor's USB,
udev and permission checks), pyOCD only inside the doctor's checks. Never the simulator, the
targets, the engine, production, the record, profiles, the station or the CLI: those import it.
"""
