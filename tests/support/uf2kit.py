"""UF2 files for the tests, written as pico-sdk's elf2uf2 writes them (Microsoft's UF2 spec:
512-byte blocks, 256-byte payloads, flag 0x2000 "familyID present")."""

from __future__ import annotations

import struct

RP2040_FAMILY, RP2350_ARM_S_FAMILY = 0xE48BFF56, 0xE48BFF59


def to_uf2(data: bytes, base: int, family: int = RP2040_FAMILY) -> bytes:
    """A UF2 file of ``data`` at ``base`` for ``family``."""
    chunks = [data[i:i + 256] for i in range(0, len(data), 256)]
    out = bytearray()
    for n, chunk in enumerate(chunks):
        block = struct.pack("<8I", 0x0A324655, 0x9E5D5157, 0x00002000, base + 256 * n, 256, n, len(chunks), family)
        out += block + chunk.ljust(476, b"\0") + struct.pack("<I", 0x0AB16F30)
    return bytes(out)
