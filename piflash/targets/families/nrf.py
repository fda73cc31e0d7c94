"""What the nRF51 and nRF52 families share: the NVMC, the UICR customer registers and FICR DEVICEID.

Sources: nRF51 Series Reference Manual v3.0 and nRF52840 Product Specification v1.7, their "NVMC",
"FICR" and "UICR" register tables (the addresses are the same on both series).
"""

from __future__ import annotations

from piflash.targets.families.base import Port, wait_until

__all__ = ["NVMC_READY", "NVMC_CONFIG", "NVMC_ERASEALL", "UICR_CUSTOMER", "nvmc_write", "nvmc_erase_all"]

# NVMC (both documents, "NVMC" register table).
NVMC_READY, NVMC_CONFIG, NVMC_ERASEALL = 0x4001E400, 0x4001E504, 0x4001E50C
#: UICR CUSTOMER[0..31]: base address and 32-bit words (nRF52840 PS v1.7 4.5, UICR registers,
#: offset 0x080; nRF51 RM v3.0 section 8.1, the same offset).
UICR_CUSTOMER = (0x10001080, 32)


def nvmc_write(port: Port, addr: int, value: int, timeout: float = 1.0) -> None:
    """Write one UICR word through the NVMC: CONFIG.WEN, the write, READY, CONFIG.REN.

    :raises ProtectError: READY did not come back within ``timeout`` seconds.
    """
    port.write32(NVMC_CONFIG, 1)  # WEN
    port.write32(addr, value)
    wait_until(
        lambda: port.read32(NVMC_READY) & 1,
        timeout,
        f"the NVMC did not finish writing the read-out protection setting (UICR at {addr:#010x})",
        port,
    )
    port.write32(NVMC_CONFIG, 0)  # REN


def nvmc_erase_all(port: Port, timeout: float) -> None:
    """NVMC ERASEALL (CONFIG = 2 EEN, ERASEALL = 1, wait READY; nRF51 RM v3.0 section 6.1): flash and
    UICR erased; the debugger may still reach it on a protected nRF51.

    :raises ProtectError: READY did not come back within ``timeout`` seconds.
    """
    port.write32(NVMC_CONFIG, 2)  # EEN
    port.write32(NVMC_ERASEALL, 1)
    wait_until(lambda: port.read32(NVMC_READY) & 1, timeout, "the NVMC ERASEALL did not finish", port)
    port.write32(NVMC_CONFIG, 0)
