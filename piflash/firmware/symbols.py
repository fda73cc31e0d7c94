"""Symbols of an ELF firmware file: where the firmware keeps a named object (the RTT control
block ``_SEGGER_RTT``, a status word), read with pyelftools, which pyOCD depends on."""

from __future__ import annotations

from typing import Optional

__all__ = ["elf_symbol"]


def elf_symbol(path: Optional[str], name: str) -> Optional[int]:
    """Address (int) of symbol ``name`` in the ELF file at ``path``, or None: no path, a file that
    cannot be read or is not an ELF, no such symbol (a ``.hex``/``.bin`` has no symbols)."""
    if not path:
        return None
    try:
        from elftools.common.exceptions import ELFError
        from elftools.elf.elffile import ELFFile
        from elftools.elf.sections import SymbolTableSection
    except ImportError:
        return None
    try:
        with open(path, "rb") as f:
            if f.read(4) != b"\x7fELF":
                return None
            f.seek(0)
            for section in ELFFile(f).iter_sections():
                if isinstance(section, SymbolTableSection):
                    for sym in section.get_symbol_by_name(name) or ():
                        return int(sym["st_value"])
    except (OSError, ELFError):
        return None
    return None
