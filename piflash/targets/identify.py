"""Which chip is behind the debug port, from its ID registers: proved before any protection verdict.

The registers are the families' (each family module's ``identify``, asked in the order of
:func:`piflash.targets.families.identifying_families`, by :func:`piflash.targets.families.identify`,
which this module re-exports with :func:`confirm` and :func:`wrong_target_error`).

A wrong ``--target`` must never be read as read-out protection: the protection
registers of one family mean nothing on another (an nRF51 has no CTRL-AP, so its absent AP reads
0, which is "APPROTECT enabled" on an nRF52). So every verdict first calls :func:`confirm`, which
reads these registers (reads only; a read that faults means "not there") and raises
:class:`~piflash.errors.WrongTargetError` (exit 10) when the chip is not the family and part the
target type names:

AP1 IDR (ADIv5.2, offset 0xFC of APSEL 1: an AP that is not implemented reads 0), the nRF52's
CTRL-AP and FICR INFO.PART (:mod:`piflash.targets.families.nrf52`), CPUID (ARMv7-M ARM B3.2.3:
PARTNO names the core), the STM32F1's DBGMCU_IDCODE (:mod:`piflash.targets.families.stm32f1`)
and the nRF51's FICR (:mod:`piflash.targets.families.nrf51`); each family module's docstring gives
its registers and their sources.

DPIDR (ADIv5.2, the DP Identification Register) is quoted as evidence only: the same SW-DP sits in many chips.
No click, no rich; pyOCD is imported lazily.
"""

from __future__ import annotations

from typing import Optional

from piflash.targets.families import confirm, expected_parts, family_for, identify, wrong_target_error
from piflash.targets.families.base import ChipIdentity

__all__ = ["ChipIdentity", "family_of", "identify", "confirm", "expected_parts", "wrong_target_error"]


def family_of(target: Optional[str]) -> Optional[str]:
    """The protection family of a pyOCD target type: the name of its family when piflash
    identifies its chips and reads their read-out protection (``"nrf52"``, ``"nrf51"``,
    ``"stm32f1"``; :attr:`~piflash.targets.families.base.Family.read_out_protection`), else None.
    :mod:`piflash.production.protect` re-exports it."""
    family = family_for(target)
    return family.name if family.read_out_protection else None
