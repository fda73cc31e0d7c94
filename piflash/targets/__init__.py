"""The targets: which chip, what piflash knows of it, and a pyOCD session on it.

Owns target knowledge (pyOCD's target types and CMSIS packs, static flash regions, where each
part keeps its unique ID: :mod:`~piflash.targets.catalog`; telling the family and part a board
carries: :mod:`~piflash.targets.identify`; the RP2040/RP2350 flash commands over SWD:
:mod:`~piflash.targets.rp2`), opening a pyOCD session on the probe chosen
(:mod:`~piflash.targets.connect`), RTT (:mod:`~piflash.targets.rtt`) and the ``targets`` /
``info`` queries (:mod:`~piflash.targets.info`).

May import: :mod:`piflash.errors`, :mod:`piflash.limits`, :mod:`piflash.probe`,
:mod:`piflash.host`, pyOCD (lazily). Never the firmware, the programming engine, production,
the jobs, the record, the station or the CLI.
"""
