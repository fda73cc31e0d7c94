"""The generic family: every target type pyOCD knows that no other family module claims.

What piflash does for such a part is pyOCD's own: no unique ID read from memory, pyOCD's erase
timeouts, no read-out protection (a protect command says which families have one), no flash
speed-ups. What piflash knows of some of these parts without a family module of their own:

- **UF2**: the familyIDs of Microsoft's ``utils/uf2families.json`` (github.com/microsoft/uf2)
  for the parts pyOCD has targets for, by target name prefix (the longest wins).
- **OTP**: the STM32F2/F4 one-time-programmable area, 512 bytes at 0x1FFF7800 (RM0090 section
  3.8 "OTP"), for a profile's ``otp`` patch.
"""

from __future__ import annotations

from typing import ClassVar, Dict, Optional, Tuple

from piflash.targets.families.base import Family

__all__ = ["GenericFamily", "FAMILY"]

#: STM32 OTP areas by target-type prefix (RM0090 3.8 "OTP"): (base address, bytes).
_STM32_OTP = {"stm32f2": (0x1FFF7800, 512), "stm32f4": (0x1FFF7800, 512)}


class GenericFamily(Family):
    """The generic family (see the module docstring)."""

    uf2_ids: ClassVar[Dict[str, Tuple[int, ...]]] = {
        "stm32f0": (0x647824B6,),
        "stm32f2": (0x5D1A0A2E,),
        "stm32f3": (0x6B846188,),
        "stm32f407": (0x6D0922FA, 0x57755A57),
        "stm32f4": (0x57755A57,),
        "stm32f7": (0x53B80F00,),
        "stm32h7": (0x6DB66082,),
        "stm32l0": (0x202E3A91,),
        "stm32l1": (0x1E1F432D,),
        "stm32l4": (0x00FF6919,),
        "stm32l5": (0x04240BDF,),
        "stm32g0": (0x300F5633,),
        "stm32g4": (0x4C71240A,),
        "stm32wb": (0x70D16653,),
        "stm32wl": (0x21460FF0,),
        "lpc55": (0x2ABC77EC,),
        "mimxrt10": (0x4FB2D5BD,),
    }

    def otp_area(self, target: str) -> Optional[Tuple[int, int]]:
        """The STM32F2/F4 OTP area (see the module docstring), else None."""
        return next((v for p, v in _STM32_OTP.items() if target.lower().startswith(p)), None)


FAMILY = GenericFamily()
