"""The bounds of every length of time a user gives piflash, and the one check they go through;
the bounds of a list of per-unit values (``list:`` in a profile), and the bounds of a job bundle's
archive (:mod:`piflash.bundle`), checked before its bytes are read.

A wait a user sets (an option, a profile key, a variable) must be a finite number of seconds
inside its documented range: ``inf``, ``1e308`` and ``nan`` are refused where they are given,
never waited out. The limits are far above any real need and low enough that a
mistyped value ends within the hour. Standard library only.
"""

from __future__ import annotations

import math
from typing import Optional

__all__ = [
    "BUNDLE_MAX_BYTES",
    "BUNDLE_MAX_MEMBERS",
    "BUNDLE_MAX_MEMBER_BYTES",
    "BUNDLE_MAX_MANIFEST_BYTES",
    "BOOT_TIMEOUT_MAX_S",
    "RTT_FIND_TIMEOUT_MAX_S",
    "RTT_DURATION_MAX_S",
    "RECOVER_TIMEOUT_MAX_S",
    "PROBE_TIMEOUT_MAX_S",
    "PATTERN_SEARCH_MAX_S",
    "BOOT_TEXT_WINDOW",
    "LIST_MAX_BYTES",
    "LIST_MAX_ROWS",
    "LIST_MAX_VALUE",
    "seconds",
]

#: ``--boot-timeout`` and a profile's ``boot_check: timeout:``: firmware that has not shown it
#: started after an hour has not started.
BOOT_TIMEOUT_MAX_S = 3600.0
#: ``piflash rtt --find-timeout``: the control block is in RAM within seconds of the firmware's start.
RTT_FIND_TIMEOUT_MAX_S = 600.0
#: ``piflash rtt --duration``: a week of watching; without ``--duration`` it runs until Ctrl-C.
RTT_DURATION_MAX_S = 7 * 86400.0
#: ``piflash protect recover --timeout``: a mass erase takes seconds (nRF52840 PS 4.3.10
#: t_ERASEALL 169 ms; STM32F10x RM0008 mass erase 40 ms max per page count); an hour is plenty.
RECOVER_TIMEOUT_MAX_S = 3600.0
#: ``$PIFLASH_PROBE_TIMEOUT``, one reply of a remote probe server.
PROBE_TIMEOUT_MAX_S = 3600.0
#: One search of a boot check's ``rtt:`` pattern in the board's output (wall time, seconds;
#: :mod:`piflash.production.textsearch`): a sane pattern takes well under a millisecond on
#: :data:`BOOT_TEXT_WINDOW` characters, also on a Zero 2W; one that backtracks without end
#: (``(a+)+$``) is stopped here.
PATTERN_SEARCH_MAX_S = 2.0
#: Characters of a board's output (the last ones) a boot check's ``rtt:`` pattern is searched in:
#: the output is never held whole, however long the firmware prints.
BOOT_TEXT_WINDOW = 16384
#: A profile's ``list:`` CSV file (piflash.production.unitlist), read whole into memory (about
#: 4 times its size as Python strings: 64 MiB at most, within a Raspberry Pi Zero's 512 MB): a
#: quarter million rows of a MAC, a key and a certificate ID (about 60 bytes each) fit. A larger
#: batch is several lists, one after the other.
LIST_MAX_BYTES = 16 * 1024 * 1024
#: ...its rows (boards).
LIST_MAX_ROWS = 250_000
#: ...the characters of one value: a 4096-bit key in hex is 1024, a certificate ID far less.
LIST_MAX_VALUE = 4096


def seconds(value: object, what: str, maximum: float, minimum: float = 0.0, min_open: bool = True) -> float:
    """``value`` as a number of seconds (float), checked: a real number (an int or float, not a
    bool; text that reads as one), finite, above ``minimum`` (or at it, without ``min_open``) and
    at most ``maximum``.

    :param what: how the user wrote it, for the message (``"--boot-timeout"``).
    :raises ValueError: one sentence naming ``what``, the value and the range.
    """
    number: Optional[float] = None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            number = None
    bound = f"{'more than' if min_open else 'at least'} {minimum:g} and at most {maximum:g} seconds"
    if number is None:
        raise ValueError(f"{what} must be a number of seconds ({bound}), not {value!r:.40}")
    if not math.isfinite(number) or number > maximum or number < minimum or (min_open and number == minimum):
        raise ValueError(f"{what} must be {bound}, not {value!r:.40}")
    return number


#: A job bundle's file (``JOB.pfb``), bytes. Its firmware is at most a chip's flash: 16 MiB is the
#: largest external flash an RP2040/RP2350 addresses (RP2040 datasheet 2.6.3, the 16 MiB XIP
#: window), and its UF2 is twice that (256 payload bytes per 512-byte block): 64 MiB holds it,
#: its profile and packs, and is read into memory on the smallest Pi (512 MiB).
BUNDLE_MAX_BYTES = 64 << 20
#: Members of a bundle: the manifest, its signature, the profile, the firmware and a few packs.
BUNDLE_MAX_MEMBERS = 32
#: One member, bytes (the firmware's bound: see :data:`BUNDLE_MAX_BYTES`).
BUNDLE_MAX_MEMBER_BYTES = 40 << 20
#: ``manifest.json`` and ``manifest.json.sig``, bytes: a manifest of 32 files is under 8 KiB.
BUNDLE_MAX_MANIFEST_BYTES = 64 << 10
