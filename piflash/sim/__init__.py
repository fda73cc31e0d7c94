"""Simulated Cortex-M boards behind a pyOCD debug probe (optional extra ``piflash[sim]``).

Register-level models of a SW-DP, AHB-AP, ROM table and Cortex-M debug logic, a CPU emulated
with ``unicorn`` that runs pyOCD's own flash algorithms, and the flash controllers of the
nRF51, nRF52840 and STM32F103RC. Boards persist in a state directory (see
:mod:`piflash.sim.store`) and appear to pyOCD as probes ``sim:<board name>``.

Importing this package is cheap and does not need ``unicorn``: the store and target tables are
pure Python; the emulator is imported when a probe is opened.

The layers, from the bottom up (docs/architecture.md): ``specs`` (the simulated target types, pure
data), ``faults`` (fault injection settings), ``store`` (boards on disk); ``memory/`` (the system
bus, flash cells, the Nordic NVMC); ``cpu`` (the core, on unicorn); ``debug/`` (SW-DP and MEM-AP,
CoreSight components, the SCS and halting debug); ``chips/`` (one module per chip family and the
:data:`~piflash.sim.chips.FAMILIES` table); ``board`` (assembles one board); ``probes/`` (the
``sim`` pyOCD probe and its plugin entry point, the remote probe server, and ``usb/``: simulated
USB CMSIS-DAP probes under pyusb with a virtual clock, switched on by ``PIFLASH_SIM_USB``). Each
imports only layers listed before it.

May import: the standard library, pyOCD, pyusb and unicorn (lazily where listing boards must stay
cheap). Never anything of piflash outside ``piflash.sim``: the simulator is a pyOCD probe plugin
of its own that piflash happens to ship.
"""

from piflash.sim.faults import FAULT_NAMES, Faults
from piflash.sim.specs import SIM_TARGETS
from piflash.sim.store import (
    BoardBusyError,
    BoardExistsError,
    BoardInfo,
    SimStore,
    SimStoreError,
    UnknownBoardError,
    auto_target_for_name,
    default_root,
    valid_board_name,
)

__all__ = [
    "SIM_TARGETS",
    "FAULT_NAMES",
    "Faults",
    "SimStore",
    "BoardInfo",
    "SimStoreError",
    "UnknownBoardError",
    "BoardExistsError",
    "BoardBusyError",
    "default_root",
    "valid_board_name",
    "auto_target_for_name",
]
