"""Firmware images: load ``.hex``, ``.bin`` and ``.elf`` files and check them against a memory map.

An image is loaded completely (and checked) before any probe is opened, so a
corrupt or misplaced file never costs a half-erased board. Intel HEX is read by
piflash (:mod:`piflash.firmware.ihex`), ELF by ``pyelftools`` (pyOCD's own), UF2 by
:mod:`piflash.firmware.uf2`.

The in-memory form is a list of :class:`Segment` (address, bytes), sorted and
non-overlapping, adjacent segments merged.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Callable, Iterable, List, Optional, Sequence, Tuple

from piflash.errors import FirmwareError, ImageRangeError

#: Accepted file formats and the file name endings that select them.
FORMAT_SUFFIXES = {
    "hex": (".hex", ".ihex", ".ihx"),
    "bin": (".bin",),
    "elf": (".elf", ".axf", ".out"),
    "uf2": (".uf2",),
}
#: Every accepted file name ending, in the order of :data:`FORMAT_SUFFIXES`.
ALL_SUFFIXES = tuple(suffix for suffixes in FORMAT_SUFFIXES.values() for suffix in suffixes)


def format_for_name(path: "os.PathLike[str] | str") -> Optional[str]:
    """The firmware format a file name's ending selects (:data:`FORMAT_SUFFIXES`), case-insensitive.

    The one place that maps a suffix to a format (the loader, profiles and the memory guard use it).

    :returns: ``"hex"``, ``"bin"``, ``"elf"`` or ``"uf2"``; None for any other ending.
    """
    suffix = Path(path).suffix.lower()
    return next((fmt for fmt, ends in FORMAT_SUFFIXES.items() if suffix in ends), None)


_ELF_MAGIC = b"\x7fELF"


@dataclass(frozen=True)
class Segment:
    """A run of bytes to place at ``address`` (int, bytes in target address space)."""

    address: int
    data: bytes

    @property
    def end(self) -> int:
        """First address after the segment (exclusive)."""
        return self.address + len(self.data)


@dataclass(frozen=True)
class FirmwareImage:
    """A firmware image ready to program.

    :ivar path: the file it came from (Path), or None for an image built in memory.
    :ivar format: ``"hex"``, ``"bin"``, ``"elf"`` or ``"uf2"``.
    :ivar segments: sorted, non-overlapping, merged list of :class:`Segment`.
    :ivar sha256: hex digest of the file's bytes (not of the segments).
    :ivar file_size: the file's size in bytes (0 for an image built in memory).
    :ivar families: a UF2's familyIDs (ints; :mod:`piflash.firmware.uf2`), checked against the
        target by :func:`check_fits`; empty for the other formats and a UF2 that names none.
    :ivar bundle_sha256: the SHA-256 (64 hex digits) of the job bundle the image came from
        (:mod:`piflash.bundle`), None for a plain firmware file; recorded with every board.
    :ivar bundle_version: that bundle's version (int), None without a bundle.
    """

    path: Optional[Path]
    format: str
    segments: Tuple[Segment, ...]
    sha256: str
    file_size: int = 0
    families: Tuple[int, ...] = ()
    bundle_sha256: Optional[str] = None
    bundle_version: Optional[int] = None

    @property
    def size(self) -> int:
        """Total number of bytes to program (sum of the segment lengths)."""
        return sum(len(s.data) for s in self.segments)

    @property
    def start(self) -> int:
        """Lowest address in the image."""
        return self.segments[0].address

    @property
    def end(self) -> int:
        """First address after the highest byte of the image (exclusive)."""
        return self.segments[-1].end

    def describe(self) -> str:
        """One line such as ``firmware.hex: hex, 245,760 bytes in 2 segments, 0x00000000-0x0003bfff``."""
        name = self.path.name if self.path else "<memory>"
        return (
            f"{name}: {self.format}, {self.size:,} bytes in {len(self.segments)} segment(s), "
            f"{self.start:#010x}-{self.end - 1:#010x}"
        )


def detect_format(path: Path, head: bytes) -> str:
    """Pick the image format from the file name, or failing that from its first bytes.

    :raises FirmwareError: when neither tells.
    """
    fmt = format_for_name(path)
    if fmt is not None:
        return fmt
    suffix = path.suffix.lower()
    if head.startswith(_ELF_MAGIC):
        return "elf"
    if head[:4] == b"UF2\n":  # the UF2 block's first magic, 0x0A324655 (piflash.firmware.uf2)
        return "uf2"
    if head[:1] == b":":
        return "hex"
    raise FirmwareError(
        f"{path}: unknown firmware format '{suffix or '(no extension)'}'",
        hint="use a .hex, .bin, .elf or .uf2 file (a .bin also needs --base-address)",
    )


def merge_segments(chunks: Iterable[Tuple[int, bytes]]) -> Tuple[Segment, ...]:
    """Sort chunks of (address, bytes), drop empty ones and merge adjacent ones.

    :raises FirmwareError: when two chunks overlap.
    """
    out: List[Segment] = []
    start = end = -1
    parts: List[bytes] = []
    # One join per segment: adding each chunk to the last segment's bytes copied the segment
    # again for every chunk (quadratic in its length).
    for address, data in sorted(((a, d) for a, d in chunks if len(d)), key=lambda c: c[0]):
        if address < end:
            raise FirmwareError(f"image data overlaps at {address:#010x}")
        if address != end:
            if parts:
                out.append(Segment(start, b"".join(parts)))
            start, parts = address, []
        parts.append(data)
        end = address + len(data)
    if parts:
        out.append(Segment(start, b"".join(parts)))
    return tuple(out)


#: ELF ``e_machine`` values (System V ABI, "ELF Header"; pyelftools ``ENUM_E_MACHINE``) of the
#: machines a Cortex-M firmware is most often confused with, by pyelftools name -> short name.
#: A Cortex-M runs only ``EM_ARM`` (40) code.
_MACHINE_NAMES = {
    "EM_ARM": "Arm",
    "EM_X86_64": "x86-64",
    "EM_386": "i386",
    "EM_RISCV": "RISC-V",
    "EM_AARCH64": "AArch64",
    "EM_XTENSA": "Xtensa",
    "EM_AVR": "AVR",
}


def _machine(elf) -> str:
    """``e_machine`` of an ELF as ``"x86-64 (e_machine 62)"``."""
    from elftools.elf.descriptions import describe_e_machine
    from elftools.elf.enums import ENUM_E_MACHINE

    value = elf["e_machine"]
    number = ENUM_E_MACHINE.get(value, value) if isinstance(value, str) else value
    name = _MACHINE_NAMES.get(value) or (describe_e_machine(value) if isinstance(value, str) else "an unknown machine")
    return f"{name} (e_machine {number})"


def _check_table(path: Path, size: int, what: str, offset: int, count: int, entsize: int) -> None:
    want = count * entsize
    if count and offset + want > size:
        have = max(0, size - offset)
        raise FirmwareError(
            f"{path}: ELF file is truncated: the file ends inside its {what} ({have:,} of {want:,} bytes)",
            hint="the file was cut short: copy it again or rebuild it",
        )


def _load_elf(path: Path, raw: bytes) -> List[Tuple[int, bytes]]:
    """The PT_LOAD segments (load address, file bytes) of an Arm ELF, whole.

    :raises FirmwareError: not an ELF pyelftools can parse, an ELF for another machine than Arm
        (``e_machine`` other than ``EM_ARM``: a Cortex-M runs no other code), or a file that ends
        before the end of its ELF header, of its program header table, of a loadable segment's bytes or of its
        section header table (a truncated file: flashing the part there is would ship half a
        firmware).
    """
    import io

    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile

    # The ELF header is 52 bytes for ELFCLASS32, 64 for ELFCLASS64 (e_ident[EI_CLASS], byte 4).
    _check_table(path, len(raw), "ELF header", 0, 1, 64 if raw[4:5] == b"\x02" else 52)
    try:
        elf = ELFFile(io.BytesIO(raw))
        if elf["e_machine"] != "EM_ARM":
            raise FirmwareError(
                f"{path}: ELF file for {_machine(elf)}, not for Arm: a Cortex-M runs only "
                f"Arm code (e_machine EM_ARM, 40)",
                hint="this is a build for another processor: flash the firmware built for "
                "the target (arm-none-eabi toolchain)",
            )
        _check_table(path, len(raw), "program header table", elf["e_phoff"], elf["e_phnum"], elf["e_phentsize"])
        chunks = []
        for number, seg in enumerate(elf.iter_segments()):
            # Load segments with file contents, at their load (physical) address, as a debugger would.
            if seg["p_type"] != "PT_LOAD" or seg["p_filesz"] == 0:
                continue
            have = max(0, min(seg["p_filesz"], len(raw) - seg["p_offset"]))
            if have < seg["p_filesz"]:  # numbered as readelf -l numbers segments, from 0
                raise FirmwareError(
                    f"{path}: ELF file is truncated: the file ends inside segment {number} "
                    f"({have:,} of {seg['p_filesz']:,} bytes, load address "
                    f"{seg['p_paddr']:#010x})",
                    hint="the file was cut short: copy it again or rebuild it",
                )
            chunks.append((seg["p_paddr"], seg.data()[: seg["p_filesz"]]))
        _check_table(path, len(raw), "section header table", elf["e_shoff"], elf["e_shnum"], elf["e_shentsize"])
    except (ELFError, ValueError, IndexError, KeyError) as exc:
        raise FirmwareError(f"{path}: corrupt ELF file: {exc}", hint="the file is damaged: rebuild it") from exc
    return chunks


#: What a file that is not a regular file is, by :mod:`stat` test, for the error message.
_FILE_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _not_regular(path: Path, mode: int) -> FirmwareError:
    kind = next((name for test, name in _FILE_KINDS if test(mode)), "not a regular file")
    return FirmwareError(
        f"{path}: is {kind}, not a regular file",
        hint="give the built .hex, .bin or .elf file itself (save a stream to a file first)",
    )


def open_firmware(path: "os.PathLike[str] | str") -> BinaryIO:
    """Open a firmware file for reading in binary, refusing anything but a regular file at once.

    A FIFO would block the read until a writer comes (for ever), ``/dev/zero`` never ends and a
    socket cannot be opened: all are refused before a byte is read. The file is opened with
    ``O_NONBLOCK`` (a FIFO without a writer does not block the open, open(2)) and checked again
    with ``fstat`` on the open descriptor, so a path swapped between the two checks is refused
    too; the descriptor is then switched back to blocking reads.

    :returns: the open file (binary, buffered); the caller closes it.
    :raises FirmwareError: missing, not a regular file (directory, FIFO, character or block
        device, socket) or not readable (exit 3).
    """
    path = Path(path)
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise FirmwareError(f"{path}: no such firmware file") from None
    except OSError as exc:
        raise FirmwareError(f"{path}: cannot read firmware file: {exc.strerror}") from None
    if not stat.S_ISREG(mode):
        raise _not_regular(path, mode)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise FirmwareError(f"{path}: no such firmware file") from None
    except OSError as exc:
        raise FirmwareError(f"{path}: cannot read firmware file: {exc.strerror}") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise _not_regular(path, mode)
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def load_image(
    path: os.PathLike | str,
    base_address: Optional[int] = None,
    file_format: Optional[str] = None,
    flash_regions: Optional[Sequence[Tuple[int, int, str]]] = None,
    target: str = "the target",
    on_digest: Optional[Callable[[str], object]] = None,
) -> FirmwareImage:
    """Read and parse a firmware file.

    :param path: the file (``.hex``, ``.bin``, ``.elf``, ``.uf2``; the format is also sniffed from
        content).
    :param base_address: load address (int) of a ``.bin``; required for ``.bin``, refused otherwise.
    :param file_format: force ``"hex"``, ``"bin"``, ``"elf"`` or ``"uf2"`` instead of detecting it.
    :param flash_regions: the target's flash, (start, end_exclusive, name) triples, when it is
        known before the file is read (``-t``, a profile's ``target:``); ``target`` names it. An
        Intel HEX record outside them then stops the parse there (a sparse file spanning 4 GiB
        is refused after its first record out of flash, not after it is all read): the image's
        full fit is still for :func:`check_fits`.
    :param on_digest: called with the file's SHA-256 (64 lower-case hex digits) before the
        content is parsed, e.g. a profile's pinned digest check, so a pinned file that is not
        the one pinned is named as such first, whatever its content.
    :returns: a :class:`FirmwareImage` with at least one non-empty segment.
    :raises FirmwareError: missing or unreadable file, not a regular file (:func:`open_firmware`),
        unknown format, corrupt, truncated or empty content, an ELF for another architecture than
        Arm, a ``.bin`` without a base address or a base address for another format, a UF2 that
        is cut short, damaged or misses blocks (:func:`piflash.firmware.uf2.parse_uf2`).
    :raises ImageRangeError: an Intel HEX record outside ``flash_regions``.
    """
    path = Path(path)
    with open_firmware(path) as fh:
        try:
            raw = fh.read()
        except OSError as exc:
            raise FirmwareError(f"{path}: cannot read firmware file: {exc.strerror}") from exc

    digest = hashlib.sha256(raw).hexdigest()
    if on_digest is not None:
        on_digest(digest)
    fmt = file_format or detect_format(path, raw[:8])
    if fmt not in FORMAT_SUFFIXES:
        raise FirmwareError(f"unknown firmware format '{fmt}'", hint="use hex, bin, elf or uf2")
    families: Tuple[int, ...] = ()
    if fmt == "bin":
        if base_address is None:
            raise FirmwareError(
                f"{path}: a .bin file has no address: give --base-address",
                hint="for example --base-address 0x08000000 (STM32), 0x0 (nRF) or 0x10000000 (RP2040)",
            )
        chunks = [(base_address, raw)]
    else:
        if base_address is not None:
            raise FirmwareError(
                f"{path}: --base-address applies only to .bin files; a .{fmt} carries its own addresses"
            )
        from piflash.firmware.cache import cached_chunks

        def parse() -> Tuple[List[Tuple[int, bytes]], Tuple[int, ...]]:
            if fmt == "uf2":
                from piflash.firmware.uf2 import (
                    parse_uf2,  # only for a UF2: kept off the start-up path
                )

                contents = parse_uf2(path, raw)
                return list(contents.chunks), contents.families
            if fmt == "hex":
                from piflash.firmware.ihex import load_hex

                inside = None if flash_regions is None else _inside_flash(flash_regions, target, path)
                return load_hex(path, raw, inside), ()
            return _load_elf(path, raw), ()

        # parsed once per host: the same bytes again are read back (piflash/firmware/cache.py)
        chunks, families, _ = cached_chunks(digest, fmt, parse)

    segments = merge_segments(chunks)
    if not segments:
        raise FirmwareError(f"{path}: the firmware file contains no data", hint="check the build: the output is empty")
    return FirmwareImage(path=path, format=fmt, segments=segments, sha256=digest, file_size=len(raw), families=families)


def image_from_bytes(data: bytes, address: int) -> FirmwareImage:
    """Wrap raw bytes (placed at ``address``) as an image, for API users and tests."""
    return FirmwareImage(
        path=None,
        format="bin",
        segments=merge_segments([(address, data)]),
        sha256=hashlib.sha256(data).hexdigest(),
        file_size=len(data),
    )


def _outside(where: str, address: int, regions: Sequence[Tuple[int, int, str]], target: str) -> ImageRangeError:
    listing = ", ".join(f"{n} {s:#010x}-{e - 1:#010x}" for s, e, n in sorted(regions)) or "none"
    return ImageRangeError(
        f"image data at {where} is outside the flash of {target} (flash: {listing})",
        address=address,
        hint="check the --target, the .bin --base-address, or the linker script",
    )


def _inside_flash(flash_regions: Sequence[Tuple[int, int, str]], target: str, path: Path) -> Callable[[int, int], None]:
    """A check of one address for :func:`piflash.firmware.ihex.load_hex`: ``check(address,
    line)`` raises :class:`ImageRangeError` when ``address`` is in none of ``flash_regions``."""
    regions = sorted(flash_regions)

    def check(address: int, line: int) -> None:
        if not any(start <= address < end for start, end, _ in regions):
            raise _outside(f"{address:#010x} (line {line} of {path})", address, regions, target)

    return check


def check_fits(image: FirmwareImage, flash_regions: Sequence[Tuple[int, int, str]], target: str = "the target") -> None:
    """Check that every byte of the image lies inside one of the flash regions.

    :param flash_regions: (start, end_exclusive, name) triples, e.g. from
        :func:`piflash.targets.catalog.flash_regions`.
    :raises ImageRangeError: naming the first address outside flash and the regions there are;
        or a UF2 whose familyID is another chip's (:func:`piflash.firmware.uf2.check_family`),
        when ``target`` names one.
    """
    if image.families and target and target != "the target":
        from piflash.firmware.uf2 import check_family

        check_family(image.families, target, image.start)
    regions = sorted(flash_regions)
    for seg in image.segments:
        addr = seg.address
        while addr < seg.end:
            region = next((r for r in regions if r[0] <= addr < r[1]), None)
            if region is None:
                nxt = next((r[0] for r in regions if r[0] > addr), seg.end)
                stop = min(seg.end, nxt)
                raise _outside(f"{addr:#010x}-{stop - 1:#010x} ({stop - addr:,} bytes)", addr, regions, target)
            addr = min(seg.end, region[1])
