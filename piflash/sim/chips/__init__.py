"""The simulated chips: one module per chip family, registered in :data:`FAMILIES`.

A chip module adds what its family has beyond the Cortex-M core to a board being assembled:
peripherals the debugger reads (nRF FICR/UICR, STM32 DBGMCU and system memory), its flash
controller, extra access ports (the nRF52 CTRL-AP), its debug port (the RP2040's multi-drop
wire) and boot ROM. It sees the board only through
:class:`~piflash.sim.chips.base.ChipBoard`, so no chip imports the board that calls it.

May import: :mod:`piflash.sim.memory`, :mod:`piflash.sim.debug`, :mod:`piflash.sim.faults`,
:mod:`piflash.sim.specs`. Never the board, the probes or the store.
"""

from __future__ import annotations

from typing import Callable, Dict

from piflash.sim.chips import nrf, rp2040, rp2350, stm32f1
from piflash.sim.chips.base import ChipBoard

__all__ = ["FAMILIES", "attach"]

#: Family name (``TargetSpec.family``) -> the function that adds the family's parts to a board.
FAMILIES: Dict[str, Callable[[ChipBoard], None]] = {
    "nrf": nrf.attach,
    "stm32f1": stm32f1.attach,
    "rp2040": rp2040.attach,
    "rp2350": rp2350.attach,
}


def attach(board: ChipBoard) -> None:
    """Add the parts of ``board.spec.family`` to ``board``.

    :raises KeyError: a family no chip module is registered for.
    """
    FAMILIES[board.spec.family](board)
