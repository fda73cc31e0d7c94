"""Chip families: what piflash knows of each, behind one protocol, in one table.

One module per family, each an instance of :class:`~piflash.targets.families.base.Family`
registered in :data:`FAMILIES`: :mod:`~piflash.targets.families.nrf51`,
:mod:`~piflash.targets.families.nrf52`, :mod:`~piflash.targets.families.stm32f1`,
:mod:`~piflash.targets.families.rp2040`, :mod:`~piflash.targets.families.rp2350` and
:mod:`~piflash.targets.families.generic`, the fallback for every other target pyOCD knows. Shared
code: :mod:`~piflash.targets.families.base` (the protocol, ports, statuses),
:mod:`~piflash.targets.families.nrf` (the nRF NVMC), :mod:`~piflash.targets.families.rp2` (the
RP2 boot flash's instructions and unique ID) and :mod:`~piflash.targets.families.rp2_flash` (the
RP2 flash speed-ups).

The operations that ask every family in turn live here too: :func:`identify` (a chip by its ID
registers), :func:`confirm`, :func:`protection_status` (identify, then the family's registers);
:mod:`piflash.targets.identify` is their documented home for callers.

A family owns which target names belong to it (:meth:`Family.claims`: the whole name, never a
prefix by accident) and how to identify its chips by their ID registers, its unique ID, its
sector erase timeout, its read-out protection (read, lock, recover), its flash speed-ups and its
UF2 familyIDs. Code outside :mod:`piflash.targets` asks :func:`family_for` and the family; it does
not branch on a family or target name.

The models: pyOCD ``pyocd/target/family/target_nRF52.py`` (the family class owns is_locked and
mass_erase), esptool ``esptool/targets/__init__.py`` (``CHIP_DEFS``), and piflash's own simulated
chips, :data:`piflash.sim.chips.FAMILIES`.

May import: :mod:`piflash.errors`, pyOCD (lazily). Never the rest of :mod:`piflash.targets` (which
asks the families), nor anything above it. A family module imports only
:mod:`~piflash.targets.families.base` and the shared family modules, never this table.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict, FrozenSet, List, Optional, Tuple

from piflash.errors import WrongTargetError
from piflash.targets.families import generic, nrf51, nrf52, rp2040, rp2350, stm32f1
from piflash.targets.families.base import (
    NO_SPEEDUPS,
    ChipIdentity,
    Family,
    FlashSpeedups,
    IdEvidence,
    Port,
    ProtectionStatus,
    TargetUidLocation,
)

if TYPE_CHECKING:
    from pyocd.flash.flash import Flash

__all__ = [
    "FAMILIES",
    "GENERIC",
    "Family",
    "FlashSpeedups",
    "Port",
    "ProtectionStatus",
    "ChipIdentity",
    "IdEvidence",
    "TargetUidLocation",
    "family_for",
    "family_named",
    "flash_speedups",
    "board_targets",
    "identifying_families",
    "identify",
    "confirm",
    "wrong_target_error",
    "expected_parts",
    "protection_status",
]

#: The generic family: every target no other family claims.
GENERIC: Family = generic.FAMILY

#: Family name -> family, in the order the table lists them (the generic family last).
FAMILIES: Dict[str, Family] = {
    f.name: f for f in (nrf51.FAMILY, nrf52.FAMILY, stm32f1.FAMILY, rp2040.FAMILY, rp2350.FAMILY, GENERIC)
}


def family_for(target: Optional[str]) -> Family:
    """The family of a pyOCD target type or CMSIS pack part name (any case): the family whose
    :meth:`~Family.claims` takes the whole name, else :data:`GENERIC` (also for None or "")."""
    for family in FAMILIES.values():
        if family is not GENERIC and family.claims(target):
            return family
    return GENERIC


def family_named(name: str) -> Family:
    """The family whose :attr:`~Family.name` is ``name`` (e.g. a :class:`ProtectionStatus`'s).

    :raises KeyError: no family has that name.
    """
    return FAMILIES[name]


def identifying_families() -> List[Family]:
    """The families in the order :func:`piflash.targets.identify.identify` asks them
    (:attr:`~Family.identify_rank`, then table order)."""
    return sorted(FAMILIES.values(), key=lambda f: f.identify_rank)


def flash_speedups(flash: Flash) -> FlashSpeedups:
    """The speed-ups for ``flash`` (a pyOCD ``Flash``, its algorithm loaded): those of the first
    family that knows its algorithm, else :data:`~piflash.targets.families.base.NO_SPEEDUPS`
    (pyOCD's own way)."""
    for family in FAMILIES.values():
        found = family.flash_speedups(flash)
        if found is not None:
            return found
    return NO_SPEEDUPS


def board_targets() -> Dict[str, Tuple[str, ...]]:
    """Board names people search for -> the target types of the chips they carry, in table order
    (e.g. ``"pico"`` -> the RP2040's and the RP2350's), from each family's :attr:`~Family.boards`."""
    out: Dict[str, Tuple[str, ...]] = {}
    for family in FAMILIES.values():
        for board, target in family.boards.items():
            out[board] = out.get(board, ()) + (target,)
    return out


def expected_parts(target: str) -> Optional[FrozenSet[int]]:
    """The part numbers a target type allows (its family's
    :meth:`~piflash.targets.families.base.Family.expected_parts`), None when the name fixes none."""
    return family_for(target).expected_parts(target)


def identify(port: Port) -> ChipIdentity:
    """Read the chip's ID registers and say what it is: each family in
    :func:`identifying_families` order reads its own (see :mod:`piflash.targets.identify`). Reads only.

    :param port: a :class:`~piflash.targets.families.base.Port`.
    :returns: the family's :class:`ChipIdentity`; for a chip no family identifies, one with
        family None named by its core (CPUID, pyOCD ``pyocd/coresight/core_ids.py``).
    :raises pyocd.core.exceptions.TransferError: the debug port itself stops answering (a
        single register that faults is taken as "not there").
    """
    evidence = IdEvidence(port)
    for family in identifying_families():
        chip = family.identify(evidence)
        if chip is not None:
            return chip
    cpuid = evidence.cpuid
    if cpuid is None:
        return ChipIdentity(None, "Cortex-M", None, None, evidence.evidence("CPUID not readable"))
    return ChipIdentity(None, _core_name(cpuid), None, None, evidence.evidence())


def _core_name(cpuid: int) -> str:
    from pyocd.coresight.core_ids import CORE_TYPE_NAME

    return CORE_TYPE_NAME.get(((cpuid >> 24) & 0xFF, (cpuid >> 4) & 0xFFF), "Cortex-M")


def wrong_target_error(chip: ChipIdentity, target: str, named_by: Optional[str] = None) -> WrongTargetError:
    """The error for ``chip`` found where ``target`` was named (exit 10).

    :param named_by: who named the target, e.g. "the probe's board type" (default: ``--target``).
    """
    named_by = named_by or "--target"
    untouched = "nothing was read as protection, erased or programmed"
    hidden_part_hint = chip.claimant.hidden_part_hint if chip.claimant is not None else None
    if chip.target:
        hint = f"use --target {chip.target} (or 'target:' in the profile); {untouched}"
    elif hidden_part_hint:
        hint = f"{hidden_part_hint}; {untouched}"
    elif chip.family:
        hint = (
            f"give the target type printed on the chip ('piflash targets PATTERN' lists them, a "
            f"CMSIS pack adds more); {untouched}"
        )
    else:
        hint = f"check the chip's marking and give its target type ('piflash targets PATTERN' lists them); {untouched}"
    return WrongTargetError(
        f"the chip is not what {named_by} {target} names: it is {chip.described}",
        found=chip.name,
        suggested=chip.target,
        hint=hint,
    )


def confirm(port: Port, target: str, named_by: Optional[str] = None) -> ChipIdentity:
    """Prove that the chip on ``port`` is the one ``target`` names.

    :returns: the :class:`ChipIdentity` read.
    :raises WrongTargetError: it is another chip (exit 10, naming the chip and the type to use).
    :raises pyocd.core.exceptions.TransferError: the debug port stops answering.
    """
    chip = identify(port)
    if not chip.matches(target):
        raise wrong_target_error(chip, target, named_by)
    return chip


def protection_status(port: Port, target: Optional[str], named_by: Optional[str] = None) -> ProtectionStatus:
    """The read-out protection of the chip on ``port``, which ``target`` names: for a family with
    :attr:`~piflash.targets.families.base.Family.read_out_protection` the chip is proved first
    (:func:`confirm`), so that a verdict only comes from a register that exists on that chip; then
    the family's :meth:`~piflash.targets.families.base.Family.protection_status`. Writes nothing.

    :raises ProtectError: the family has no protection piflash reads.
    :raises WrongTargetError: the chip is another one (exit 10).
    :raises pyocd.core.exceptions.TransferError: the chip does not answer.
    """
    family = family_for(target)
    chip = confirm(port, target or "", named_by) if family.read_out_protection else None
    return family.protection_status(port, target, named_by, chip)
