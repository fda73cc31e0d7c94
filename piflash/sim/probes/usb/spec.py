"""``PIFLASH_SIM_USB``: which simulated boards sit behind which simulated USB probes.

Pure parsing, no imports of the simulation: the ``sim`` plugin's probe listing reads it to leave
out boards that are listed as USB probes instead.
"""

from __future__ import annotations

import os
from typing import List, Tuple

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


def parse_spec(text: str) -> List[Tuple[str, str, bool]]:
    """Parse ``PIFLASH_SIM_USB``: a list of ``(board, preset, access_denied)``.

    :raises ValueError: An unknown preset or an empty board name.
    """
    from piflash.sim.probes.usb.presets import PRESETS
    out = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        item, _, flag = item.partition("!")
        board, _, preset = item.partition("@")
        preset = preset or "debugprobe"
        if not board or (preset not in PRESETS and preset not in PICO_MODES):
            raise ValueError("%s: bad entry %r (BOARD[@%s][!noaccess])"
                             % (ENV_VAR, item, "|".join(list(PRESETS) + list(PICO_MODES))))
        out.append((board.strip().lower(), preset, flag.strip() == "noaccess"))
    return out


def attached_boards() -> List[str]:
    """Boards that sit behind a simulated USB probe in this process (empty when off); the
    ``sim`` plugin does not list them again as ``sim:NAME``."""
    if not enabled():
        return []
    try:
        return [board for board, _, _ in parse_spec(os.environ[ENV_VAR])]
    except ValueError:
        return []
