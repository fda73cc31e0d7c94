"""Production: what a fixture does to each board beyond its firmware.

Owns the serial counter and its leases of number blocks (:mod:`~piflash.production.serials`),
the rows of a CSV list of per-unit values and their leases (:mod:`~piflash.production.unitlist`) and
read-out protection: status, lock, recover on nRF51, nRF52 and STM32F1
(:mod:`~piflash.production.protect`).

May import: the shared modules, :mod:`piflash.probe`, :mod:`piflash.targets`,
:mod:`piflash.firmware`, :mod:`piflash.record`, pyOCD (lazily). Never the programming engine,
the jobs, profiles, the station or the CLI.
"""
