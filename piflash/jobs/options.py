"""What a job is asked to do: the options every transport's job takes.

:data:`ERASE_MODES` are the programming engine's (:mod:`piflash.flashing.program`), named here so
that profiles and the CLI take them from the job, not from the engine.
"""

from __future__ import annotations

from piflash.flashing.program import ERASE_MODES

__all__ = ["ERASE_MODES"]
