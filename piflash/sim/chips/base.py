"""What a chip module may use of the board it is attached to (:class:`ChipBoard`).

The board (:class:`piflash.sim.board.SimBoard`) satisfies this protocol; a chip module types its
``attach(board)`` with it instead of importing the board, so the board -> chips arrow has no
way back.
"""

from __future__ import annotations

from typing import Callable, Dict, Optional, Protocol

from piflash.sim.cpu import Cpu
from piflash.sim.debug.dap import AccessPortModel, SwDp
from piflash.sim.faults import Faults
from piflash.sim.memory.bus import Bus
from piflash.sim.memory.nvm import NvmArray, NvmController, NvmRegion
from piflash.sim.specs import TargetSpec

__all__ = ["ChipBoard"]


class ChipBoard(Protocol):
    """The parts of a board under assembly that a chip family adds to or reads.

    Attributes: ``spec`` (the target type), ``target_uid`` (factory unique ID bytes), ``faults``
    (fault settings, shared and updated in place), ``bus`` (the system bus), ``cpu`` (the
    emulated core), ``nvm`` ({array name: cells}), ``chip`` (the family's own model object,
    if any), ``clock_hz`` (the core clock now, Hz, where the family models it), ``debug_guard`` (an optional
    ``(address, size) -> refused`` check the MEM-AP applies to debugger accesses: read-out
    protection).
    """

    spec: TargetSpec
    target_uid: bytes
    faults: Faults
    bus: Bus
    cpu: Cpu
    nvm: Dict[str, NvmArray]
    chip: Optional[object]
    clock_hz: Optional[Callable[[], float]]
    debug_guard: Optional[Callable[[int, int], bool]]

    def set_flash_controller(
        self, nvm: NvmArray, controller: NvmController, bus_region: Optional[NvmRegion] = None
    ) -> None:
        """Route bus (and, for main flash, CPU) writes into ``nvm`` through ``controller``
        (``bus_region``: the debugger's view, if not a plain :class:`NvmRegion`)."""

    def set_debug_port(self, build: Callable[[Dict[int, AccessPortModel]], SwDp]) -> None:
        """Have ``build(aps)`` make the board's debug port (a multi-drop wire)."""

    def add_reset_hook(self, hook: Callable[[], None]) -> None:
        """Call ``hook`` on every system reset."""

    def add_ap(self, apsel: int, ap: AccessPortModel) -> None:
        """Attach an extra access port at ``apsel``."""

    def set_reset_pin(self, asserted: bool) -> None:
        """Drive nRESET (asserted holds the system in reset)."""
