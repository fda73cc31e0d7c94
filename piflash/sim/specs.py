"""Static descriptions of the simulated target types (pure data, no emulator import).

Every value here is either taken from pyOCD's target class for the part (the memory map must
match, or pyOCD would program the wrong addresses) or from the vendor / Arm documentation named
next to it. The rest of :mod:`piflash.sim` builds a board from a :class:`TargetSpec`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Optional, Tuple

__all__ = ["NvmSpec", "TargetSpec", "TARGETS", "SIM_TARGETS", "get_target"]


@dataclass(frozen=True)
class NvmSpec:
    """One non-volatile memory array of a target.

    :param name: Key used for the array in the board state directory (``<name>.bin``).
    :param start: First byte address (int, bytes).
    :param size: Length in bytes.
    :param page_size: Erase unit in bytes (a pyOCD "sector").
    :param factory: Contents of a new part (bytes from ``start``; the rest erased, 0xFF). Only
        the STM32 option bytes differ from erased when new (RDP 0xA5 = unprotected).
    """

    name: str
    start: int
    size: int
    page_size: int
    factory: bytes = b""

    def initial(self) -> bytes:
        """The array's contents on a new part (``size`` bytes)."""
        return self.factory[: self.size] + b"\xff" * (self.size - len(self.factory[: self.size]))

    @property
    def end(self) -> int:
        """Address one past the last byte."""
        return self.start + self.size

    def contains(self, addr: int) -> bool:
        """Whether byte address ``addr`` lies in this array."""
        return self.start <= addr < self.start + self.size


@dataclass(frozen=True)
class TargetSpec:
    """Everything that differs between simulated target types.

    :param name: pyOCD target type name (``pyocd list --targets``), also the board-name prefix
        used for auto-creation.
    :param family: Peripheral family builder key: ``"nrf"``, ``"stm32f1"``, ``"rp2040"`` or
        ``"rp2350"``.
    :param display_name: Marketing name used in the probe product name.
    :param core: Key into :data:`piflash.sim.debug.scs.CORES`.
    :param nvm: Non-volatile arrays; ``nvm[0]`` is the main flash.
    :param ram_start: RAM base address; ``ram_size`` its length in bytes.
    :param flash_alias: Address at which main flash is mirrored (STM32 boot alias), or None.
    :param uid_address: Address of the target's factory unique ID, or None when the chip has
        none in its memory map (RP2040: the flash's ID); ``uid_length`` its size in bytes.
    :param dpidr: SW-DP DPIDR value.
    :param ap_idr: AHB-AP IDR value.
    :param ap_wrap: TAR auto-increment wrap in bytes. It must equal what pyOCD assumes for
        ``ap_idr`` (``pyocd/coresight/ap.py`` AP_TYPE_MAP: variant 1 AHB-APs get AP_4K_WRAP,
        others 1 KiB), or pyOCD's 4 KiB block transfers would wrap inside the AP.
    :param extra: Family-specific constants (FICR values, DBGMCU IDCODE, ...).
    """

    name: str
    family: str
    display_name: str
    core: str
    nvm: Tuple[NvmSpec, ...]
    ram_start: int
    ram_size: int
    flash_alias: Optional[int]
    uid_address: Optional[int]
    uid_length: int
    dpidr: int
    ap_idr: int
    ap_wrap: int
    extra: Dict[str, int] = field(default_factory=dict)

    @property
    def flash(self) -> NvmSpec:
        """The main flash array."""
        return self.nvm[0]

    @property
    def product_name(self) -> str:
        """Probe product name shown by ``pyocd list``."""
        return "Simulated %s board" % self.display_name

    def nvm_by_name(self, name: str) -> NvmSpec:
        """Return the array called ``name``; raises KeyError if there is none."""
        for nvm in self.nvm:
            if nvm.name == name:
                return nvm
        raise KeyError(name)

    def nvm_at(self, addr: int) -> Optional[NvmSpec]:
        """Return the array containing byte address ``addr`` (alias not included), or None."""
        for nvm in self.nvm:
            if nvm.contains(addr):
                return nvm
        return None


TARGETS: Dict[str, TargetSpec] = {
    # Memory map: pyocd/target/builtin/target_nRF51822_xxAA.py (flash 256 KiB in 1 KiB pages, UICR
    # 0x100 bytes, RAM 16 KiB). DPIDR 0x0BB11477 = Cortex-M0 SW-DP (DPv1, MINDP); AHB-AP IDR
    # 0x04770021 is listed in pyocd/coresight/ap.py as "used on nrf51" (variant 2: 1 KiB wrap).
    # FICR values: nRF51 Series Reference Manual v3.0 section 7 (FICR).
    "nrf51": TargetSpec(
        name="nrf51",
        family="nrf",
        display_name="nRF51822",
        core="cortex-m0",
        nvm=(NvmSpec("flash", 0x00000000, 0x40000, 0x400), NvmSpec("uicr", 0x10001000, 0x100, 0x100)),
        ram_start=0x20000000,
        ram_size=0x4000,
        flash_alias=None,
        uid_address=0x10000060,
        uid_length=8,
        dpidr=0x0BB11477,
        ap_idr=0x04770021,
        ap_wrap=0x400,
        extra={
            "ficr_configid": 0x00000072,
            "ficr_numramblock": 2,
            "ficr_sizeramblocks": 0x2000,
            "has_ctrl_ap": 0,
            "has_readynext": 0,
        },
    ),
    # Memory map: pyocd/target/builtin/target_nRF52840_xxAA.py (flash 1 MiB in 4 KiB pages, UICR
    # 0x400 bytes, RAM 256 KiB). DPIDR 0x2BA01477 = Cortex-M4 SW-DP; AHB-AP IDR 0x24770011 (M3/M4
    # AHB-AP, 4 KiB wrap per pyOCD). INFO.* values: nRF52840 Product Specification v1.7 section
    # 4.4 (FICR): PART 0x52840, VARIANT "AAD0", PACKAGE 0x2004 (QI), RAM 256 KiB, FLASH 1024 KiB.
    # Build code D0 is below pyOCD's HARDENED_APPROTECT_REVISIONS F0, so pyOCD does not write
    # UICR.APPROTECT on every connect (see pyocd/target/family/target_nRF52.py).
    "nrf52840": TargetSpec(
        name="nrf52840",
        family="nrf",
        display_name="nRF52840",
        core="cortex-m4f",
        nvm=(NvmSpec("flash", 0x00000000, 0x100000, 0x1000), NvmSpec("uicr", 0x10001000, 0x400, 0x400)),
        ram_start=0x20000000,
        ram_size=0x40000,
        flash_alias=None,
        uid_address=0x10000060,
        uid_length=8,
        dpidr=0x2BA01477,
        ap_idr=0x24770011,
        ap_wrap=0x1000,
        extra={
            "ficr_part": 0x52840,
            "ficr_variant": 0x41414430,
            "ficr_package": 0x2004,
            "ficr_ram": 0x100,
            "ficr_flash": 0x400,
            "has_ctrl_ap": 1,
            "has_readynext": 1,
        },
    ),
    # Memory map: pyocd/target/builtin/target_STM32F103RC.py (flash 0x08000000, 0x80000 bytes in
    # 2 KiB pages; RAM 64 KiB) -- pyOCD's map is larger than the RC's datasheet 256 KiB/48 KiB and
    # the model follows pyOCD. DPIDR 0x1BA01477 = Cortex-M3 SW-DP; AHB-AP IDR 0x14770011 (M3
    # AHB-AP, variant 1: 4 KiB wrap per pyOCD). DBGMCU_IDCODE 0x10036414: DEV_ID 0x414 (high
    # density), REV_ID 0x1003 (rev Y), RM0008 rev 21 section 31.6.1. UID at 0x1FFFF7E8 and F_SIZE
    # at 0x1FFFF7E0: RM0008 section 30.
    "stm32f103rc": TargetSpec(
        name="stm32f103rc",
        family="stm32f1",
        display_name="STM32F103RC",
        core="cortex-m3",
        # Option bytes 0x1FFFF800-0x1FFFF80F (PM0075 section 2.5, table 5): RDP 0xA5 with its
        # complement 0x5A = read protection off; USER 0xFF/0x00; Data0/1 and WRP0-3 0xFF/0x00.
        nvm=(
            NvmSpec("flash", 0x08000000, 0x80000, 0x800),
            NvmSpec("option", 0x1FFFF800, 0x10, 0x10, factory=bytes.fromhex("a55aff00ff00ff00ff00ff00ff00ff00")),
        ),
        ram_start=0x20000000,
        ram_size=0x10000,
        flash_alias=0x00000000,
        uid_address=0x1FFFF7E8,
        uid_length=12,
        dpidr=0x1BA01477,
        ap_idr=0x14770011,
        ap_wrap=0x1000,
        extra={"dbgmcu_idcode": 0x10036414},
    ),
    # Memory map: pyocd/target/family/target_rp2.py (RP2Base: xip flash at 0x10000000 in 4 KiB
    # sectors, 256-byte pages; SRAM 0x20000000 + 0x40000 and 0x20040000 + 0x2000), with the
    # Pico's 2 MiB W25Q16JV (Raspberry Pi Pico datasheet, section 2.1) instead of pyOCD's
    # 16 MiB XIP window. DPIDR 0x0BC12477: SW-DP version 2, MINDP (RP2040 datasheet 2.3.4.2);
    # AHB-AP IDR 0x04770031: the Cortex-M0+ AHB-AP (pyocd/coresight/ap.py, variant 3: 1 KiB
    # wrap). No unique ID in the chip: the flash's 64-bit unique ID (W25Q16JV instruction 4Bh)
    # is the board's, as pico-sdk's pico_get_unique_board_id reads it.
    "rp2040": TargetSpec(
        name="rp2040",
        family="rp2040",
        display_name="RP2040 (Pico)",
        core="cortex-m0plus",
        nvm=(NvmSpec("flash", 0x10000000, 0x200000, 0x1000),),
        ram_start=0x20000000,
        ram_size=0x42000,
        flash_alias=None,
        uid_address=None,
        uid_length=8,
        dpidr=0x0BC12477,
        ap_idr=0x04770031,
        ap_wrap=0x400,
    ),
    # The Raspberry Pi Pico 2: RP2350 (Arm, Secure) with a 4 MiB W25Q32RV (Pico 2 datasheet
    # chapter 1). Memory: SRAM 520 KiB at 0x20000000 (RP2350 datasheet 2.2.3: SRAM0-7 striped,
    # SRAM8-9 at 0x20080000), XIP flash at 0x10000000 in 4 KiB sectors. pyOCD's builtin
    # ``rp2350`` uses the RP2040's map (pyocd/target/family/target_rp2.py RP2Base; the fix is
    # pyOCD PR #1916): its 264 KiB of SRAM lie within the real 520, so its algorithm runs.
    # DPIDR 0x4C013477: SW-DP version 3 (ADIv6), MINDP (datasheet 3.5; pyOCD issue #1760's log).
    # AP IDR 0x14770005: an AHB5-AP, which pyOCD maps to AHB_AP with 1 KiB wrap
    # (pyocd/coresight/ap.py AP_TYPE_MAP). The unique ID is the chip's, in OTP (CHIPID0-3).
    "rp2350": TargetSpec(
        name="rp2350",
        family="rp2350",
        display_name="RP2350 (Pico 2)",
        core="cortex-m33",
        nvm=(NvmSpec("flash", 0x10000000, 0x400000, 0x1000),),
        ram_start=0x20000000,
        ram_size=0x82000,
        flash_alias=None,
        uid_address=0x40130000,
        uid_length=8,
        dpidr=0x4C013477,
        ap_idr=0x14770005,
        ap_wrap=0x400,
    ),
}

#: Target type names a simulated board can have.
SIM_TARGETS: Tuple[str, ...] = ("nrf51", "nrf52840", "stm32f103rc", "rp2040", "rp2350")


def get_target(name: str) -> TargetSpec:
    """Return the :class:`TargetSpec` for target type ``name``.

    :raises ValueError: ``name`` is not one of :data:`SIM_TARGETS`.
    """
    try:
        return TARGETS[name]
    except KeyError:
        raise ValueError("unknown simulated target type %r (choose from %s)" % (name, ", ".join(SIM_TARGETS))) from None
