"""The hands-free flashing station (``piflash station``), usable without the CLI.

Modules: ``config`` (the YAML station config), ``worker`` (one thread per probe: wait for a
board, flash, record, wait for its removal), ``procs`` (the same worker in a process of its own,
``workers: processes``), ``bootsel`` (the worker of a USB port where Picos arrive in BOOTSEL
mode, no probe), ``loop`` (:class:`~piflash.station.loop.Station`:
workers, signals, reload, watchdog), ``status`` (log lines, rich live view, systemd STATUS,
GPIO), ``sdnotify`` (systemd's notify protocol), ``web`` (the operator's live page, read from
the status file). Importing this package imports nothing heavy;
pyOCD is imported when a station starts. See docs/station.md.

May import: the shared modules, :mod:`piflash.probe`, :mod:`piflash.targets`,
:mod:`piflash.record`, :mod:`piflash.production`, :mod:`piflash.jobs`, profiles, :mod:`piflash.bundle`; pyOCD, rich
(only in ``status``'s live view), gpiozero, prometheus-client, Starlette and uvicorn, lazily. Never click or
:mod:`piflash.cli`.
"""
