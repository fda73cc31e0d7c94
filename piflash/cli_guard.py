"""The memory guard's click side: a ``--force`` option and the check, as one decorator.

The check itself is :func:`piflash.memguard.check_job`; this module only wires it into a
command, and imports nothing heavy (the guard is imported when the command runs).
"""

from __future__ import annotations

import functools

import click


def memory_guarded(operation: str):
    """--force, and the memory guard (piflash/memguard.py) run before the command imports pyOCD.

    Place it below ``handles_errors`` so a refusal exits with code 14. The guard reads
    ``$PIFLASH_PROC_ROOT`` (default ``/``), ``$PIFLASH_MEMORY_GUARD`` and the profile's
    ``memory_guard``; a tight verdict is printed as a warning on stderr.

    :param operation: what the command does, a key of :data:`piflash.memguard.BASELINE`
        (``flash``, ``verify``, ``erase``, ``info``). The command must take ``firmware``,
        ``profile`` and ``pyocd_options`` keyword arguments where it has them.
    """
    def decorate(func):
        @functools.wraps(func)
        def wrapper(*args, force=False, **kwargs):
            from piflash.memguard import check_job

            check_job(operation, kwargs.get("firmware"), kwargs.get("profile"),
                      kwargs.get("pyocd_options"), force=force,
                      warn=lambda text: click.secho(text, fg="yellow", err=True))
            return func(*args, **kwargs)
        return click.option("--force", is_flag=True,
                            help="Go on even when the memory guard says it will not fit.")(wrapper)
    return decorate
