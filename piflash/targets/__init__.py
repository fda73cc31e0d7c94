"""The targets: which chip, what piflash knows of it, and a pyOCD session on it.

Owns target knowledge: the chip families, one module each behind one protocol, in one table
(:mod:`~piflash.targets.families`: which target names belong to a family, its ID registers,
unique ID, sector erase timeout, read-out protection, flash speed-ups and UF2 familyIDs); pyOCD's
target types and CMSIS packs and static flash regions (:mod:`~piflash.targets.catalog`); telling
the family and part a board carries (:mod:`~piflash.targets.identify`); opening a pyOCD session on the probe chosen
(:mod:`~piflash.targets.connect`), RTT (:mod:`~piflash.targets.rtt`) and the ``targets`` /
``info`` queries (:mod:`~piflash.targets.info`).

May import: the shared modules, :mod:`piflash.probe`, pyOCD (lazily). Never the firmware,
the programming engine, production, the jobs, the record, the station or the CLI.
"""
