"""What piflash does around pyOCD's RP2040/RP2350 flash algorithm: a faster SPI clock.

pyOCD's algorithm (``pyocd/target/family/target_rp2.py``) calls the boot ROM, whose
``flash_exit_xip`` sets the SSI to one SPI clock per 6 system clocks (``flash_init_spi``:
BAUDR = 6, pico-bootrom-rp2040 ``bootrom/program_flash_generic.c``, "hopefully-conservative baud
rate for boot and programming") and whose other flash functions leave BAUDR as they find it:
"this makes it possible for the debugger or user code to edit SPI settings, e.g. baud rate"
(the same file). After a debugger's reset the system clock is the ring oscillator (nominally
6.5 MHz, RP2040 datasheet 2.17), so each 256-byte page program spends about 1.9 ms shifting
its 260 bytes, against the flash's 0.4 ms typical page program time (W25Q16JV datasheet 9.6).

:func:`faster_spi` sets BAUDR to 2, the smallest divider the SSI takes (SCKDV is even, 4.10.13):
an SPI clock of half the system clock, at most about 6 MHz from the ring oscillator, far below
the 50 MHz the Pico's W25Q16JV allows for every instruction the ROM sends. It is set after each
initialisation of the algorithm for programming (``flash_exit_xip`` sets 6 again every time).
"""

from __future__ import annotations

__all__ = ["faster_spi", "RP2_ALGORITHM", "FAST_BAUDR"]

#: :func:`piflash.flashing.multipage.algorithm_digest` of pyOCD 0.46's RP2 algorithm.
RP2_ALGORITHM = "eb5eaeb7b0c14411"
#: SSI clock divider piflash programs with (RP2040 datasheet 4.10.13 BAUDR.SCKDV: even, >= 2).
FAST_BAUDR = 2
_SSI_SSIENR, _SSI_BAUDR = 0x18000008, 0x18000014


def faster_spi(flash) -> bool:
    """Set the SSI's clock divider to :data:`FAST_BAUDR` when ``flash`` (a pyOCD ``Flash``,
    initialised) runs pyOCD's RP2 algorithm; the SSI is disabled while BAUDR changes.

    :returns: whether it did (False for every other algorithm).
    :raises pyocd.core.exceptions.TransferError: a register write failed.
    """
    from piflash.flashing.multipage import algorithm_digest

    algo = getattr(flash, "flash_algo", None)
    if not algo or algorithm_digest(algo) != RP2_ALGORITHM:
        return False
    target = flash.target
    target.write32(_SSI_SSIENR, 0)
    target.write32(_SSI_BAUDR, FAST_BAUDR)
    target.write32(_SSI_SSIENR, 1)
    return True
