"""``piflash sim serve`` in a subprocess on a free port of 127.0.0.1, for the tests."""

from __future__ import annotations

import sys
from typing import Dict, List, Optional

from piflash.sim.probes.spawn import ServedBoard


def SimServer(board: str, target: str, piflash: Optional[List[str]] = None,
              env: Optional[Dict[str, str]] = None) -> ServedBoard:
    """Serve simulated board ``board`` (created if missing) of type ``target`` from a child process.

    :param piflash: the command that runs piflash (default ``python -m piflash``).
    :returns: the running :class:`~piflash.sim.probes.spawn.ServedBoard` (``.uid``, ``.stop()``).
    """
    cmd = piflash or [sys.executable, "-m", "piflash"]
    return ServedBoard([*cmd, "sim", "serve", "--board", board, "--target", target, "--port", "0"],
                       env=env)
