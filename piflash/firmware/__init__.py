"""The firmware: what goes into the chip, before any probe is touched.

Owns loading firmware files (Intel HEX, raw binary, ELF) into a :class:`~piflash.firmware.image.FirmwareImage`
of sorted segments, the one suffix -> format map, the check of an image against flash regions
(:mod:`~piflash.firmware.image`), and the per-board bytes patched into an image: serial numbers,
templates, patch entries (:mod:`~piflash.firmware.patch`).

May import: the standard library, the shared modules, :mod:`piflash.targets` (a family's UF2
familyIDs and patch areas), bincopy and pyelftools (lazily). Never pyOCD's session or probe
layers, and nothing else of piflash.
"""
