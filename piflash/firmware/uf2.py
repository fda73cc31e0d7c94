"""UF2 firmware files: the format of every Pico build and many bootloaders' downloads.

The format is Microsoft's UF2 specification (github.com/microsoft/uf2, README.md "File
format"): the file is whole 512-byte blocks, each

======  ====  ==========================================================================
offset  size  field
======  ====  ==========================================================================
0       4     first magic, 0x0A324655 ("UF2\\n")
4       4     second magic, 0x9E5D5157
8       4     flags: 0x00000001 not main flash (skip it), 0x00001000 file container,
              0x00002000 familyID present, 0x00004000 MD5 checksum present,
              0x00008000 extension tags present
12      4     target address of the payload
16      4     payload size, at most 476
20      4     sequential block number, from 0
24      4     total number of blocks
28      4     familyID (with flag 0x2000), else the file size (file container) or 0
32      476   payload, padded
508     4     final magic, 0x0AB16F30
======  ====  ==========================================================================

all little-endian. A file may hold several images one after the other (pico-sdk writes an
RP2350 image and an "absolute" block together), each numbered from 0 with its own total.

Why piflash's own code: the one UF2 library on PyPI (``uf2utils``, LGPL) needs
``littlefs-python``, which has no armv7l wheel and would compile on a 32-bit Pi; Microsoft's
converter (``uf2conv.py``, on PyPI as ``adafruit-uf2``) is a script that converts without
checking block numbers. Reading firmware files is what piflash exists for, so the checks the
issue asks for (magic, sizes, numbering complete, family) are written here; ``adafruit-uf2`` is
used by the tests to make UF2 files from real firmware.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Set, Tuple, TypedDict

from piflash.errors import FirmwareError, ImageRangeError

__all__ = [
    "BLOCK_SIZE",
    "FAMILIES",
    "Uf2Contents",
    "is_uf2",
    "parse_uf2",
    "family_name",
    "target_families",
    "check_family",
    "dump_uf2",
]

BLOCK_SIZE = 512
MAGIC_START0, MAGIC_START1, MAGIC_END = 0x0A324655, 0x9E5D5157, 0x0AB16F30
MAX_PAYLOAD = 476
FLAG_NOT_MAIN_FLASH = 0x00000001
FLAG_FILE_CONTAINER = 0x00001000
FLAG_FAMILY_ID = 0x00002000
_HEADER = struct.Struct("<8I")

#: familyID -> (short name, description): the entries of Microsoft's ``utils/uf2families.json``
#: (github.com/microsoft/uf2) for the chips pyOCD has targets for, and pico-sdk's RP2350 and
#: absolute IDs (pico-sdk ``src/common/boot_uf2_headers/include/boot/uf2.h``).
FAMILIES: Dict[int, Tuple[str, str]] = {
    0x1B57745F: ("NRF52", "Nordic nRF52"),
    0x72721D4E: ("NRF52832xxAA", "Nordic nRF52832xxAA"),
    0x6F752678: ("NRF52832xxAB", "Nordic nRF52832xxAB"),
    0x621E937A: ("NRF52833", "Nordic nRF52833"),
    0xADA52840: ("NRF52840", "Nordic nRF52840"),
    0x820D9A5F: ("NRF52820", "Nordic nRF52820"),
    0x5EE21072: ("STM32F1", "ST STM32F103"),
    0x647824B6: ("STM32F0", "ST STM32F0xx"),
    0x5D1A0A2E: ("STM32F2", "ST STM32F2xx"),
    0x6B846188: ("STM32F3", "ST STM32F3xx"),
    0x57755A57: ("STM32F4", "ST STM32F4xx"),
    0x6D0922FA: ("STM32F407", "ST STM32F407"),
    0x53B80F00: ("STM32F7", "ST STM32F7xx"),
    0x6DB66082: ("STM32H7", "ST STM32H7xx"),
    0x202E3A91: ("STM32L0", "ST STM32L0xx"),
    0x1E1F432D: ("STM32L1", "ST STM32L1xx"),
    0x00FF6919: ("STM32L4", "ST STM32L4xx"),
    0x04240BDF: ("STM32L5", "ST STM32L5xx"),
    0x300F5633: ("STM32G0", "ST STM32G0xx"),
    0x4C71240A: ("STM32G4", "ST STM32G4xx"),
    0x70D16653: ("STM32WB", "ST STM32WBxx"),
    0x21460FF0: ("STM32WL", "ST STM32WLxx"),
    0x68ED2B88: ("SAMD21", "Microchip (Atmel) SAMD21"),
    0x55114460: ("SAMD51", "Microchip (Atmel) SAMD51"),
    0x1851780A: ("SAML21", "Microchip (Atmel) SAML21"),
    0x2ABC77EC: ("LPC55", "NXP LPC55xx"),
    0x4FB2D5BD: ("MIMXRT10XX", "NXP i.MX RT10XX"),
    0x7F83E793: ("KL32L2", "NXP KL32L2x"),
    0xE48BFF56: ("RP2040", "Raspberry Pi RP2040"),
    0xE48BFF57: ("RP2XXX_ABSOLUTE", "Raspberry Pi RP2xxx, absolute address (any RP2 chip)"),
    0xE48BFF58: ("RP2XXX_DATA", "Raspberry Pi RP2xxx, data"),
    0xE48BFF59: ("RP2350_ARM_S", "Raspberry Pi RP2350, Arm Secure"),
    0xE48BFF5A: ("RP2350_RISCV", "Raspberry Pi RP2350, RISC-V"),
    0xE48BFF5B: ("RP2350_ARM_NS", "Raspberry Pi RP2350, Arm Non-secure"),
    0x1C5F21B0: ("ESP32", "ESP32"),
    0x9AF03E33: ("GD32VF103", "GigaDevice GD32VF103"),
}


def family_name(family_id: int) -> str:
    """``"0xada52840 (NRF52840, Nordic nRF52840)"``, or the number alone for an unknown ID."""
    known = FAMILIES.get(family_id)
    return f"{family_id:#010x}" + (f" ({known[0]}, {known[1]})" if known else "")


def target_families(target: str) -> Optional[Tuple[int, ...]]:
    """The familyIDs a UF2 for pyOCD target ``target`` may carry (its chip family's
    :meth:`~piflash.targets.families.base.Family.uf2_family_ids`), or None when the target has none
    known (then only a UF2 without a familyID is known to fit; one with an ID is refused). nRF51 and
    most other parts have no UF2 family: a UF2 without a familyID fits any target."""
    from piflash.targets.families import family_for

    return family_for(target).uf2_family_ids(target)


@dataclass(frozen=True)
class Uf2Contents:
    """What a UF2 file holds for main flash.

    :ivar chunks: (address, payload bytes) of every main-flash block, in file order.
    :ivar families: the familyIDs of those blocks (sorted, ints; empty when none carries one).
    :ivar blocks: blocks in the file; :ivar skipped: of them, flagged "not main flash".
    """

    chunks: Tuple[Tuple[int, bytes], ...]
    families: Tuple[int, ...]
    blocks: int
    skipped: int


def is_uf2(head: bytes) -> bool:
    """Whether ``head`` (a file's first bytes, 8 at least) starts with the UF2 block magic."""
    return len(head) >= 8 and struct.unpack_from("<2I", head) == (MAGIC_START0, MAGIC_START1)


def _first_missing(present: "set[int]", total: int, count: int) -> List[int]:
    """The first ``count`` numbers of ``range(total)`` not in ``present`` (ints), in order, in time
    and memory bounded by ``len(present)`` and ``count``, whatever ``total`` is."""
    out: List[int] = []
    expect = 0
    for number in sorted(present) + [total]:
        while expect < number and len(out) < count:
            out.append(expect)
            expect += 1
        if len(out) >= count:
            break
        expect = number + 1
    return out


class _Image(TypedDict):
    """One image's blocks while a UF2 file is read: ``total`` blocks it says it has, ``seen`` so
    far, their ``numbers``, and the index of its ``first`` block in the file."""

    total: int
    seen: int
    numbers: Set[int]
    first: int


def parse_uf2(path: Path, raw: bytes) -> Uf2Contents:
    """Read and check a UF2 file's blocks (the module docstring has the layout).

    :raises FirmwareError: (exit 3) a size that is not whole blocks (the block cut short), a block
        with a wrong magic, a payload over 476 bytes, a file container (not firmware), a block
        number outside its image's total, a number given twice or missing, no main-flash block.
    """
    if not raw:
        raise FirmwareError(f"{path}: the firmware file is empty")
    if len(raw) % BLOCK_SIZE:
        whole = len(raw) // BLOCK_SIZE
        raise FirmwareError(
            f"{path}: UF2 file cut short: {len(raw):,} bytes is not whole 512-byte blocks "
            f"(block {whole} has {len(raw) % BLOCK_SIZE} of 512 bytes)",
            hint="the download or copy was interrupted: fetch the file again",
        )
    chunks: List[Tuple[int, bytes]] = []
    families = set()
    skipped = 0
    # Each image of the file numbers its blocks 0..total-1; a new image starts at block 0.
    images: List[_Image] = []
    for index in range(len(raw) // BLOCK_SIZE):
        block = raw[index * BLOCK_SIZE : (index + 1) * BLOCK_SIZE]
        m0, m1, flags, addr, size, number, total, family = _HEADER.unpack_from(block)
        (end_magic,) = struct.unpack_from("<I", block, 508)
        where = f"{path}: UF2 block {index} (at byte {index * BLOCK_SIZE:,})"
        if (m0, m1, end_magic) != (MAGIC_START0, MAGIC_START1, MAGIC_END):
            raise FirmwareError(
                f"{where} has a wrong magic number: not a UF2 block", hint="the file is damaged, or not UF2"
            )
        if flags & FLAG_FILE_CONTAINER:
            raise FirmwareError(
                f"{where} is a file container block (flag 0x1000): the file carries "
                "files for a UF2 file system, not flash contents"
            )
        if size > MAX_PAYLOAD:
            raise FirmwareError(f"{where} says its payload is {size} bytes: at most {MAX_PAYLOAD} fit")
        if total == 0 or number >= total:
            raise FirmwareError(f"{where} is number {number} of {total}: outside its image's blocks")
        if number == 0 and (not images or images[-1]["seen"] == images[-1]["total"]):
            images.append({"total": total, "seen": 0, "numbers": set(), "first": index})
        image = images[-1] if images else None
        if image is None or image["total"] != total:
            raise FirmwareError(
                f"{where} says its image has {total} blocks, the blocks before it "
                f"{image['total'] if image else 'none'}: blocks are missing or mixed"
            )
        if number in image["numbers"]:
            raise FirmwareError(
                f"{where} repeats block number {number} of the image that starts at block {image['first']}",
                hint="the file is damaged: build or fetch it again",
            )
        image["numbers"].add(number)
        image["seen"] += 1
        if flags & FLAG_NOT_MAIN_FLASH:
            skipped += 1
            continue
        if flags & FLAG_FAMILY_ID:
            families.add(family)
        chunks.append((addr, block[32 : 32 + size]))
    for image in images:
        if image["seen"] != image["total"]:
            # The numbers missing are found from those present (at most the file's blocks): a
            # block count of 0xFFFFFFFF must cost no more than the file does.
            missing = _first_missing(image["numbers"], image["total"], 5)
            more = image["total"] - image["seen"] > len(missing)
            shown = ", ".join(str(n) for n in missing) + (" ..." if more else "")
            raise FirmwareError(
                f"{path}: UF2 image starting at block {image['first']} has {image['seen']} of "
                f"its {image['total']} blocks: block(s) {shown} missing",
                hint="the file is incomplete: build or fetch it again",
            )
    if not chunks:
        raise FirmwareError(
            f"{path}: the UF2 file has no block for main flash ({skipped} block(s) flagged 'not main flash')"
        )
    return Uf2Contents(tuple(chunks), tuple(sorted(families)), len(raw) // BLOCK_SIZE, skipped)


def check_family(families: Tuple[int, ...], target: str, start: int = 0) -> None:
    """Refuse a UF2 whose familyIDs are not the target's (:func:`target_families`).

    :param families: the image's familyIDs (empty: the UF2 names none, and fits any target).
    :param start: the image's first address, for the error.
    :raises ImageRangeError: (exit 4) naming the family found and the target's.
    """
    if not families:
        return
    allowed = target_families(target)
    wrong = [f for f in families if allowed is None or f not in allowed]
    if not wrong:
        return
    found = ", ".join(family_name(f) for f in wrong)
    expected = ", ".join(family_name(f) for f in allowed) if allowed else "no UF2 family is known for it"
    raise ImageRangeError(
        f"the UF2 file is for family {found}, not for {target} ({expected})",
        address=start,
        hint="flash the build for this chip, or check --target",
    )


def dump_uf2(chunks: List[Tuple[int, bytes]], family_id: Optional[int]) -> bytes:
    """UF2 blocks of ``chunks`` (``[(address, bytes)]``): 256 payload bytes per block, each at a
    256-aligned address as pico-sdk's ``elf2uf2`` writes them (bytes of a partly covered 256-byte
    page are padded with 0xFF, the erased value), with ``family_id`` and its flag when given, block
    numbers and the total in every block (Microsoft's UF2 specification, uf2.h).
    :func:`parse_uf2` reads it back.
    """
    pages: Dict[int, bytearray] = {}
    for address, data in chunks:
        first, end = address & ~0xFF, address + len(data)
        for page in range(first, end, 256):
            buf = pages.setdefault(page, bytearray(b"\xff" * 256))
            lo, hi = max(page, address), min(page + 256, end)
            buf[lo - page : hi - page] = data[lo - address : hi - address]
    flags = FLAG_FAMILY_ID if family_id is not None else 0
    total = len(pages)
    out = []
    for number, page in enumerate(sorted(pages)):
        head = _HEADER.pack(MAGIC_START0, MAGIC_START1, flags, page, 256, number, total, family_id or 0)
        out.append(head + bytes(pages[page]).ljust(MAX_PAYLOAD, b"\0") + struct.pack("<I", MAGIC_END))
    return b"".join(out)
