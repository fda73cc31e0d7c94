"""Simulated Cortex-M boards behind a pyOCD debug probe (optional extra ``piflash[sim]``).

Register-level models of a SW-DP, AHB-AP, ROM table and Cortex-M debug logic, a CPU emulated
with ``unicorn`` that runs pyOCD's own flash algorithms, and the flash controllers of the
nRF51, nRF52840 and STM32F103RC. Boards persist in a state directory (see
:mod:`piflash.sim.store`) and appear to pyOCD as probes ``sim:<board name>``.

Importing this package is cheap and does not need ``unicorn``: the store and target tables are
pure Python; the emulator is imported when a probe is opened.

Modules: ``targets`` (target tables), ``faults`` (fault injection), ``store`` (persistence),
``memory`` (bus), ``nvm`` (flash cells), ``nvmc`` / ``nrf`` (Nordic), ``stm32f1`` (ST),
``coresight`` (ROM table, DWT, FPB), ``scs`` (SCS and core debug), ``cpu`` (unicorn), ``dap``
(SW-DP, MEM-AP), ``boards`` (assembly), ``probe`` (pyOCD DebugProbe), ``plugin`` (entry point),
``server`` (remote probe server), ``usb`` (simulated USB CMSIS-DAP probes under pyusb, with a
virtual clock; switched on by ``PIFLASH_SIM_USB``).
"""

from .faults import FAULT_NAMES, Faults
from .store import (BoardBusyError, BoardExistsError, BoardInfo, SimStore, SimStoreError,
                    UnknownBoardError, auto_target_for_name, default_root, valid_board_name)
from .targets import SIM_TARGETS

__all__ = ["SIM_TARGETS", "FAULT_NAMES", "Faults", "SimStore", "BoardInfo", "SimStoreError",
           "UnknownBoardError", "BoardExistsError", "BoardBusyError", "default_root",
           "valid_board_name", "auto_target_for_name"]
