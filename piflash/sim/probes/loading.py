"""State shared by the plugin entry point (:mod:`piflash.sim.probes.plugin`) and the probe module
(:mod:`piflash.sim.probes.simprobe`) while pyOCD's probe-plugin scan runs.

Its own module so that neither of the two imports the other at module level (no import circle).
"""

from __future__ import annotations

import importlib.util

#: True while :mod:`piflash.sim.probes.simprobe` imports pyOCD: a plugin scan triggered by that import skips
#: the plugin (the probe class does not exist yet) and the probe module registers itself once
#: defined.
probe_module_importing = False


def unicorn_available() -> bool:
    """Whether the optional ``unicorn`` package is installed (checked without importing it)."""
    try:
        return importlib.util.find_spec("unicorn") is not None
    except (ImportError, ValueError):
        return False
