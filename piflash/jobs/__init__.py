"""The jobs users call: flash, verify, erase, reset, watch RTT, over every transport.

Owns the whole jobs (:mod:`~piflash.jobs.workflow`: ``flash_firmware``, ``verify_firmware``,
``erase_target``, ``reset_board``, ``monitor_rtt`` through a debug probe and pyOCD;
:mod:`~piflash.jobs.bootsel`: the same phases and result for a Pico in BOOTSEL mode over
PICOBOOT). A job puts the steps together: connect, the programming engine's erase, program and
verify, then production's protection and boot check, and the record's result. What a flash is
asked to do is one :class:`~piflash.jobs.options.FlashOptions` for every transport, and what each
transport can do is declared, and what it cannot refused, in :mod:`~piflash.jobs.transports`.

May import: :mod:`piflash.errors`, :mod:`piflash.progress`, :mod:`piflash.probe`,
:mod:`piflash.targets`, :mod:`piflash.firmware`, :mod:`piflash.record`,
:mod:`piflash.flashing`, :mod:`piflash.production`, pyOCD (lazily). Never profiles, the station
or the CLI: they import it.
"""
