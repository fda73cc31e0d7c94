"""The programming engine: erase, program, verify and reset a connected target, as timed phases.

Owns the plan (one on-target CRC pass decides which sectors to erase and which pages to program:
:mod:`~piflash.flashing.plan`), several pages per flash-algorithm call
(:mod:`~piflash.flashing.multipage`), piflash's own on-target blank check and CRC-32
(:mod:`~piflash.flashing.flashcheck`), the session-level erase/program/reset pieces
(:mod:`~piflash.flashing.program`) and read-back verify (:mod:`~piflash.flashing.verify`); a chip
family's flash speed-ups (the RP2040/RP2350's) are the family's, asked through
:func:`piflash.targets.families.flash_speedups`. The jobs that put these together
are :mod:`piflash.jobs`.

May import: the shared modules, :mod:`piflash.targets`, :mod:`piflash.firmware`,
:mod:`piflash.record`, pyOCD (lazily). Never production, the jobs, profiles, the station or the
CLI.
"""
