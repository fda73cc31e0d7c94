"""piflash: a dependable Cortex-M flashing station for the Raspberry Pi, built on pyOCD.

The package imports nothing heavy at import time: pyOCD, rich and unicorn are
imported by the functions that need them, so ``piflash --help`` stays instant
on a Pi Zero 2W.
"""

__version__ = "0.1.0"
