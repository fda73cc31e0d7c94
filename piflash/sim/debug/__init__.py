"""The debug bus of a simulated board: SW-DP and MEM-AP (:mod:`~piflash.sim.debug.dap`), CoreSight
identification, ROM table, DWT and FPB (:mod:`~piflash.sim.debug.coresight`), the System Control
Space and the core's halting debug (:mod:`~piflash.sim.debug.scs`).

May import: :mod:`piflash.sim.memory`, :mod:`piflash.sim.cpu`, pyOCD's exception classes. Never
chips, the board, the probes or the store.
"""
