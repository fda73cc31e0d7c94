"""The record: what piflash did, kept and proven.

Owns the result of an operation (:mod:`~piflash.record.result`), the SQLite history of every
operation (rows opened at first touch, completed, reaped when their process died:
:mod:`~piflash.record.history`) and its hash chain (:mod:`~piflash.record.chain`).

May import: the standard library, the shared modules, :mod:`piflash.firmware`, psycopg
(lazily). Never pyOCD, the targets, the engine, the station or the CLI.
"""
