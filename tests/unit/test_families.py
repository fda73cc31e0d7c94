"""The chip family table (piflash.targets.families): one module per family, registered once, names
claimed whole, the generic family for the rest, and the whole interface on every family."""

import importlib
import inspect
import pkgutil

import pytest

from piflash.targets import families
from piflash.targets.families import FAMILIES, GENERIC, board_targets, family_for, family_named
from piflash.targets.families.base import Family, FlashSpeedups

#: The family modules the issue names (issue 37 item 3), each with one FAMILY.
MODULES = ("nrf51", "nrf52", "stm32f1", "rp2040", "rp2350", "generic")


def test_every_family_module_is_registered_once():
    registered = [f for f in FAMILIES.values()]
    assert len({id(f) for f in registered}) == len(registered) == len(MODULES)
    assert list(FAMILIES) == [f.name for f in registered]
    for name in MODULES:
        module = importlib.import_module(f"piflash.targets.families.{name}")
        assert isinstance(module.FAMILY, Family)
        assert registered.count(module.FAMILY) == 1, name
    assert list(FAMILIES.values())[-1] is GENERIC
    # no other module of the package defines a family that is not in the table
    for info in pkgutil.iter_modules(families.__path__):
        module = importlib.import_module(f"piflash.targets.families.{info.name}")
        family = getattr(module, "FAMILY", None)
        assert family is None or family in registered, info.name


@pytest.mark.parametrize("target,family", [
    ("nrf51", "nrf51"), ("nrf51822", "nrf51"), ("nRF51822_xxAA", "nrf51"),
    ("nrf52", "nrf52"), ("nrf52832", "nrf52"), ("nrf52833", "nrf52"), ("nrf52840", "nrf52"),
    ("NRF52840", "nrf52"), ("nrf52840_xxaa", "nrf52"),
    ("stm32f103rc", "stm32f1"), ("stm32f103c8", "stm32f1"), ("stm32f100rb", "stm32f1"), ("STM32F107VC", "stm32f1"),
    ("rp2040", "rp2040"), ("rp2040_core0", "rp2040"), ("rp2040_core1", "rp2040"), ("rp2350", "rp2350"),
])
def test_names_a_family_claims(target, family):
    assert family_for(target) is family_named(family)


@pytest.mark.parametrize("target", [
    "nrf5284", "nrf52480", "nrf5", "nrf528400", "xnrf52840", "nrf52840x", "stm32f1", "stm32f13", "stm32f407vg",
    "rp2040x", "rp2040_core2", "rp2", "rp23500", "piflash_nrf52840_pack", "cortex_m", "", None,
])
def test_everything_else_is_the_generic_family(target):
    """A prefix by accident is no match: ``nrf5284`` is not an nRF52."""
    assert family_for(target) is GENERIC


def test_families_claim_disjoint_names():
    names = ["nrf51", "nrf51822", "nrf52", "nrf52840", "stm32f103rc", "rp2040", "rp2040_core1", "rp2350"]
    for name in names:
        assert [f.name for f in FAMILIES.values() if f.claims(name)] == [family_for(name).name]
    assert not GENERIC.claims("nrf52840")


def test_the_generic_family_is_the_base_behaviour():
    assert GENERIC.uid_location is None and GENERIC.erase_sector_timeout is None
    assert not GENERIC.read_out_protection and not GENERIC.needs_target_init
    assert GENERIC.flash_speedups(object()) is None
    assert GENERIC.uf2_family_ids("stm32f407vg") == (0x6D0922FA, 0x57755A57)
    assert GENERIC.otp_area("stm32f405rg") == (0x1FFF7800, 512)


def test_what_each_family_owns():
    nrf52, stm32f1, rp2040, rp2350 = (family_named(n) for n in ("nrf52", "stm32f1", "rp2040", "rp2350"))
    assert nrf52.uid_location.address == 0x10000060 and stm32f1.uid_location.address == 0x1FFFF7E8
    assert rp2040.uid_location is None and rp2350.uid_location.reverse
    assert [f.name for f in FAMILIES.values() if f.read_out_protection] == ["nrf51", "nrf52", "stm32f1"]
    assert [f.name for f in FAMILIES.values() if f.needs_target_init] == ["rp2040", "rp2350"]
    assert [f.name for f in FAMILIES.values() if f.uid_hidden_when_locked] == ["nrf52"]
    assert nrf52.expected_parts("nrf52") == frozenset({0x52832})
    assert nrf52.uf2_family_ids("nrf52840_xxaa") == (0xADA52840, 0x1B57745F)
    assert family_named("nrf51").uf2_family_ids("nrf51") is None
    assert board_targets()["pico"] == ("rp2040", "rp2350")
    assert board_targets()["micro:bit"] == ("nrf51", "nrf52833")


def _public_interface():
    """The protocol: every public attribute and method of the base class."""
    return sorted(n for n, _ in inspect.getmembers(Family) if not n.startswith("_"))


@pytest.mark.parametrize("name", list(FAMILIES))
def test_every_family_exposes_the_full_interface(name):
    family = FAMILIES[name]
    assert isinstance(family, Family)
    for attr in _public_interface():
        assert hasattr(family, attr), attr
        value = getattr(family, attr)
        base = getattr(Family, attr)
        if callable(base):
            assert callable(value), attr
            # the same parameters as the protocol's (the bound method drops self)
            assert list(inspect.signature(value).parameters) == list(inspect.signature(base).parameters)[1:], attr
    assert family.name and family.title
    assert family is GENERIC or family.names is not None


def test_speedups_default_to_pyocds_own_way():
    """An algorithm no family knows: no speed-up, and nothing is touched."""
    class Flash:
        flash_algo = {"instructions": [0xE7FE]}

    speedups = families.flash_speedups(Flash())
    assert type(speedups) is FlashSpeedups
    assert not speedups.erases_chip and not speedups.erases_blocks
    assert speedups.erase_blocks(Flash(), [0x2000, 0x1000]) == ([], [0x1000, 0x2000])
