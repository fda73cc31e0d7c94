"""The record: what piflash did, kept and proven.

Owns the result of an operation (:mod:`~piflash.record.result`), the SQLite history of every
operation (rows opened at first touch, completed, reaped when their process died:
:mod:`~piflash.record.history`) and its hash chain (:mod:`~piflash.record.chain`).

May import: the standard library, :mod:`piflash.errors`, :mod:`piflash.progress`,
:mod:`piflash.firmware`. Never pyOCD, the target, the engine, the station or the CLI.
"""
