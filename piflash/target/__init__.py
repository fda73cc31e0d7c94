"""The target: which chip, how to reach it, what it says about itself.

Owns target knowledge (pyOCD's target types and CMSIS packs, static flash regions, where each
part keeps its unique ID: :mod:`~piflash.target.catalog`), choosing a probe and opening a pyOCD
session with pyOCD's errors translated into piflash's (:mod:`~piflash.target.connect`),
``remote:HOST:PORT`` probes with every wait bounded (:mod:`~piflash.target.remote`), the
``targets`` / ``info`` queries (:mod:`~piflash.target.info`), and a Pico in USB BOOTSEL mode as a
way in without a probe: the boot ROM's PICOBOOT commands over pyusb and piflash's helper run on
the chip (:mod:`~piflash.target.picoboot`).

May import: :mod:`piflash.errors`, :mod:`piflash.progress`, :mod:`piflash.firmware`,
:mod:`piflash.host` (the probe table; lazily, for the permission hint and the simulated USB
bus), pyOCD and pyusb (lazily). Never the programming
engine, production, the record, the station or the CLI.
"""
