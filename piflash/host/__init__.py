"""The machine piflash runs on (a Raspberry Pi first), apart from any probe or target.

Owns the machine's facts: Pi model, memory, swap and cgroup limit (:mod:`~piflash.host.machine`),
the memory guard run before pyOCD is imported (:mod:`~piflash.host.memguard`), the doctor's
checks (:mod:`~piflash.host.doctor`), and the Pi's own pins as an SWD probe: the boot config's
SPI lines (:mod:`~piflash.host.spi`), the header's pin map and collisions
(:mod:`~piflash.host.pins`) and their checks (:mod:`~piflash.host.pinsetup`).

May import: the standard library, :mod:`piflash.errors`, :mod:`piflash.probe` (the doctor's USB,
udev and permission checks), pyOCD only inside the doctor's checks, gpiod (when installed) only
to read who holds a GPIO line. Never the simulator, the
targets, the engine, production, the record, profiles, the station or the CLI: those import it.
"""
