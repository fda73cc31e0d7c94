"""``PIFLASH_SIM_USB``: which simulated boards sit behind which simulated USB probes.

Pure parsing, no imports of the simulation: the ``sim`` plugin's probe listing reads it to leave
out boards that are listed as USB probes instead.
"""

from __future__ import annotations

import os
from typing import List, Optional, Tuple

__all__ = ["ENV_VAR", "enabled", "parse_spec", "attached_boards"]

#: The switch.
ENV_VAR = "PIFLASH_SIM_USB"
#: The "preset" that puts an RP2040 board on the bus in USB BOOTSEL mode (no probe: the boot
#: ROM's PICOBOOT interface, :mod:`piflash.sim.probes.usb.picoboot`).
BOOTSEL = "bootsel"
#: RP2040 boards on the bus themselves, no probe: in BOOTSEL mode, or running pico-sdk firmware
#: with USB stdio and its reset interface (``app``) or without it (``app-noreset``).
PICO_MODES = (BOOTSEL, "app", "app-noreset")


def enabled() -> bool:
    """Whether ``PIFLASH_SIM_USB`` is set (non-empty)."""
    return bool(os.environ.get(ENV_VAR, "").strip())


def parse_spec(text: str) -> List[Tuple[str, str, bool, Optional[str]]]:
    """Parse ``PIFLASH_SIM_USB``: a list of ``(board, preset, access_denied, serial)``.

    An entry is ``BOARD[@PRESET][#SERIAL][!noaccess]``. ``#SERIAL`` gives the probe the USB
    serial number SERIAL (letters and digits, at most 126: a string descriptor's limit) instead
    of the one derived from the preset and board name, as a probe vendor's tool sets a serial
    number on hardware; serial is None without it.

    :raises ValueError: An unknown preset, an empty board name or a malformed serial number.
    """
    from piflash.sim.probes.usb.presets import PRESETS

    out = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        item, _, flag = item.partition("!")
        item, has_serial, serial = item.partition("#")
        board, _, preset = item.partition("@")
        preset = preset.strip() or "debugprobe"
        if not board or (preset not in PRESETS and preset not in PICO_MODES):
            raise ValueError(
                "%s: bad entry %r (BOARD[@%s][#SERIAL][!noaccess])"
                % (ENV_VAR, item, "|".join(list(PRESETS) + list(PICO_MODES)))
            )
        serial = serial.strip()
        if has_serial and not (serial.isascii() and serial.isalnum() and len(serial) <= 126):
            raise ValueError(
                "%s: bad serial number %r in %r (letters and digits, at most 126)" % (ENV_VAR, serial, item)
            )
        out.append((board.strip().lower(), preset, flag.strip() == "noaccess", serial if has_serial else None))
    return out


def attached_boards() -> List[str]:
    """Boards that sit behind a simulated USB probe in this process (empty when off); the
    ``sim`` plugin does not list them again as ``sim:NAME``."""
    if not enabled():
        return []
    try:
        return [board for board, _, _, _ in parse_spec(os.environ[ENV_VAR])]
    except ValueError:
        return []
