"""Memories of a simulated board: the system bus and its address decoding
(:mod:`~piflash.sim.memory.bus`), flash cell arrays (:mod:`~piflash.sim.memory.nvm`) and the flash
controllers that are parts of their own (the Nordic NVMC, :mod:`~piflash.sim.memory.nvmc`). A
controller tied to its chip's other registers stays with the chip (the STM32F1 FPEC and its option
bytes, :mod:`piflash.sim.chips.stm32f1`).

May import: the standard library, :mod:`piflash.sim.faults`, :mod:`piflash.sim.specs`. Never the
CPU, the debug bus, chips, the board, the probes or the store.
"""
