"""pyOCD flash algorithms by their instructions: the key piflash knows an algorithm by.

Light on purpose (no family table, no pyOCD): :mod:`piflash.flashing.multipage` keys its table of
algorithms by :func:`algorithm_digest` at import, which ``piflash --help`` reaches.
"""

from __future__ import annotations

import hashlib
import struct
from typing import Any, Dict

__all__ = ["algorithm_digest", "RP2_ALGORITHM"]

#: :func:`algorithm_digest` of pyOCD 0.46's RP2 algorithm (``pyocd/target/family/target_rp2.py``,
#: RP2040 and RP2350: one blob that calls the boot ROM); the RP2 families' speed-ups
#: (:mod:`piflash.targets.families.rp2_flash`) apply to it.
RP2_ALGORITHM = "eb5eaeb7b0c14411"


def algorithm_digest(flash_algo: Dict[str, Any]) -> str:
    """The key of a pyOCD flash algorithm dict (:data:`piflash.flashing.multipage.KNOWN_ALGORITHMS`):
    the first 16 hex digits of the SHA-256 of its ``instructions`` (32-bit words, little-endian)."""
    words = flash_algo["instructions"]
    return hashlib.sha256(struct.pack("<%dI" % len(words), *words)).hexdigest()[:16]
