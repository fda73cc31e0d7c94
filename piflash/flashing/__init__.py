"""The programming engine: erase, program, verify and reset a connected target, as timed phases.

Owns the plan (one on-target CRC pass decides which sectors to erase and which pages to program:
:mod:`~piflash.flashing.plan`), several pages per flash-algorithm call
(:mod:`~piflash.flashing.multipage`), piflash's own on-target blank check and CRC-32
(:mod:`~piflash.flashing.flashcheck`), the session-level erase/program/reset pieces
(:mod:`~piflash.flashing.program`), read-back verify (:mod:`~piflash.flashing.verify`) and the
whole jobs users call, ``flash_firmware``, ``verify_firmware``, ``erase_target``, ``reset_board``
(:mod:`~piflash.flashing.workflow`); the same phases for a Pico in BOOTSEL mode, planned from the
chip's page CRCs (:mod:`~piflash.flashing.bootsel`).

May import: :mod:`piflash.errors`, :mod:`piflash.progress`, :mod:`piflash.firmware`,
:mod:`piflash.target`, :mod:`piflash.record`, :mod:`piflash.production`, pyOCD (lazily). Never
profiles, the station or the CLI.
"""
