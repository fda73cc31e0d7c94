"""Read a board's flash to a file (``piflash read``): a backup, or a range of it.

The model is probe-rs ``read``, picotool ``save`` and esptool ``read_flash``. Over SWD the bytes
are read through the debug port (pyOCD's ``read_memory_block8``, in
:data:`~piflash.flashing.verify.READBACK_BLOCK` pieces, with progress), then checked: what was
read is verified against the flash as an image is after a flash
(:func:`piflash.jobs.workflow.verify_session`: pyOCD's CRC32 analyzer runs on the target, one
CRC per page, against ``binascii.crc32`` of the bytes read; pages without an analyzer are read a
second time and compared), so a byte garbled on the wire is caught, not saved.

Without ``ranges`` the read covers the target's main flash: the flash region pyOCD marks as boot
memory, else the first flash region, cut to the size the flash reports where piflash reads it
(an RP2040's or RP2350's JEDEC ID: :func:`piflash.targets.families.rp2.reported_flash_regions`).
A range must lie inside the flash (exit 4, as an image outside it).

Formats, by the output's extension (:data:`FORMATS`): ``.bin`` (one range: the bytes as read),
``.hex`` (:func:`piflash.firmware.ihex.dump_hex`), ``.uf2`` (:func:`piflash.firmware.uf2.dump_uf2`,
with the target family's UF2 familyID when it has one).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

from piflash.errors import FirmwareError, ImageRangeError, OperationInterrupted
from piflash.firmware.image import FirmwareImage, Segment
from piflash.jobs.workflow import ConnectedHook, _run, phase, verify_session
from piflash.progress import ProgressSink
from piflash.record.result import OperationResult

__all__ = ["FORMATS", "READ_PHASE", "read_flash", "read_bootsel", "encode"]

#: Output formats, by file extension.
FORMATS = (".bin", ".hex", ".uf2")
#: The phase that reads the flash (its text in ``durations``, ``phase`` and the progress display).
READ_PHASE = "read"


def _main_flash(session) -> List[Tuple[int, int, str]]:
    """The target's flash regions as (start, end_exclusive, name), cut to the size the flash
    reports; the boot-memory one first."""
    from piflash.targets.catalog import flash_regions
    from piflash.targets.families.rp2 import reported_flash_regions

    regions = reported_flash_regions(session.target, flash_regions(session.target.memory_map))
    boot = session.target.memory_map.get_boot_memory()
    return sorted(regions, key=lambda r: (not (boot is not None and boot.start == r[0]), r[0]))


def _check_ranges(ranges: Sequence[Tuple[int, int]], regions: Sequence[Tuple[int, int, str]], target: str) -> None:
    listing = ", ".join(f"{n} {s:#010x}-{e - 1:#010x}" for s, e, n in sorted(regions)) or "none"
    for start, end in ranges:
        if not any(s <= start and end <= e for s, e, _ in regions):
            raise ImageRangeError(
                f"range {start:#010x}-{end - 1:#010x} is not inside the flash of {target} (flash: {listing})",
                address=start,
                hint="read inside one flash region: --range START+SIZE",
            )


def encode(chunks: List[Tuple[int, bytes]], suffix: str, target: Optional[str]) -> bytes:
    """The file bytes of ``chunks`` in the format of ``suffix`` (one of :data:`FORMATS`).

    :raises ValueError: a ``.bin`` of more than one range, or an unknown suffix.
    """
    if suffix == ".bin":
        if len(chunks) != 1:
            raise ValueError("a .bin holds one range: read one --range, or write .hex or .uf2")
        return chunks[0][1]
    if suffix == ".hex":
        from piflash.firmware.ihex import dump_hex

        return dump_hex(chunks)
    if suffix == ".uf2":
        from piflash.firmware.uf2 import dump_uf2, target_families

        ids = target_families(target) if target else None
        return dump_uf2(chunks, ids[0] if ids else None)
    raise ValueError(f"unknown output format '{suffix}': use {', '.join(FORMATS)}")


def read_flash(
    output: "os.PathLike[str] | str",
    probe: Optional[str] = None,
    target: Optional[str] = None,
    ranges: Sequence[Tuple[int, int]] = (),
    frequency: Optional[int] = None,
    progress: Optional[ProgressSink] = None,
    reset: bool = True,
    options: Optional[dict] = None,
    on_connected: ConnectedHook = None,
) -> OperationResult:
    """Read the target's flash (or ``ranges`` of it), check it, and write ``output``.

    The file is written only after the check passed, to a temporary name beside it, then renamed:
    a failed read never leaves half a backup under the name asked for.

    :param output: the file to write; its extension picks the format (:data:`FORMATS`).
    :param ranges: (start, end_exclusive) byte addresses, each inside one flash region; empty: the
        main flash.
    :param reset: reset the target afterwards (the CRC check runs code on the core).
    :returns: the :class:`~piflash.record.result.OperationResult` (operation ``read``): its
        ``firmware`` is ``output``'s absolute path, ``firmware_sha256`` the SHA-256 of the file
        written, ``image_bytes`` the bytes read.
    :raises ValueError: an unknown extension, or several ranges for a ``.bin`` (before connecting).
    :raises ImageRangeError: a range outside the flash (exit 4).
    :raises VerifyError: what was read does not match the flash (exit 12); and the connect and
        transfer errors of :func:`piflash.jobs.workflow.flash_firmware`.
    """
    out = _checked_output(output, ranges)

    def body(session, result: OperationResult, sink: ProgressSink) -> None:
        try:
            _read(session, result, sink)
        except OperationInterrupted:
            raise _interrupted(out, result) from None

    def _read(session, result: OperationResult, sink: ProgressSink) -> None:
        from piflash.flashing.verify import READBACK_BLOCK
        from piflash.jobs.workflow import check_protection

        check_protection(session, result)
        regions = _main_flash(session)
        wanted = list(ranges) or [(regions[0][0], regions[0][1])]
        _check_ranges(wanted, regions, result.target or "the target")
        total = sum(end - start for start, end in wanted)
        chunks: List[Tuple[int, bytes]] = []
        with phase(result, sink, READ_PHASE):
            sink.phase_start(READ_PHASE, total)
            done = 0
            for start, end in wanted:
                parts = []
                for at in range(start, end, READBACK_BLOCK):
                    n = min(READBACK_BLOCK, end - at)
                    parts.append(bytes(session.target.read_memory_block8(at, n)))
                    done += n
                    sink.phase_update(READ_PHASE, done)
                chunks.append((start, b"".join(parts)))
            sink.phase_end(READ_PHASE, f"{total:,} bytes read")
        image = _image_of(out, chunks)
        result.image_bytes = total
        verify_session(session, image, result, sink, reset)
        _write(out, chunks, result)

    return _run("read", None, probe, target, frequency, progress, body, options, on_connected)


def _checked_output(output: "os.PathLike[str] | str", ranges: Sequence[Tuple[int, int]]) -> Path:
    """``output`` as a Path, checked before any probe is opened.

    :raises ValueError: an unknown extension, several ranges for a ``.bin``, a directory, a
        folder that does not exist.
    """
    out = Path(output)
    suffix = out.suffix.lower()
    if suffix not in FORMATS:
        raise ValueError(f"unknown output format '{out.suffix or '(no extension)'}': use {', '.join(FORMATS)}")
    if suffix == ".bin" and len(ranges) > 1:
        raise ValueError("a .bin holds one range: read one --range, or write .hex or .uf2")
    if out.is_dir():
        raise ValueError(f"{out} is a directory: give the file to write, e.g. {out / ('backup' + suffix)}")
    if not out.parent.is_dir():
        raise ValueError(f"{out.parent} does not exist: create it first")
    return out


def _image_of(out: Path, chunks: List[Tuple[int, bytes]]) -> FirmwareImage:
    """What was read, as an image to verify against the flash."""
    return FirmwareImage(
        path=out,
        format=out.suffix.lower()[1:],
        segments=tuple(Segment(a, d) for a, d in sorted(chunks)),
        sha256=hashlib.sha256(b"".join(d for _, d in chunks)).hexdigest(),
        file_size=sum(len(d) for _, d in chunks),
    )


def _write(out: Path, chunks: List[Tuple[int, bytes]], result: OperationResult) -> None:
    """Write ``chunks`` to ``out`` in its format, through a temporary name and a rename; fill
    ``result``'s firmware fields.

    :raises FirmwareError: the file cannot be written (exit 3), naming why.
    """
    suffix = out.suffix.lower()
    total = sum(len(d) for _, d in chunks)
    data = encode(chunks, suffix, result.target)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.part")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, out)
    except OSError as exc:
        raise FirmwareError(
            f"{out}: cannot write the {total:,} bytes read: {exc.strerror}",
            hint="write somewhere with room and permission, e.g. in your home folder",
        ) from None
    finally:
        if tmp.exists():
            tmp.unlink()
    result.firmware = os.path.abspath(out)
    result.firmware_format = suffix[1:]
    result.firmware_sha256 = hashlib.sha256(data).hexdigest()


def _interrupted(out: Path, result: OperationResult) -> OperationInterrupted:
    return OperationInterrupted(
        f"interrupted during {result.phase}: the board was not changed and {out} was not written",
        hint="run the same command again",
    )


def read_bootsel(
    output: "os.PathLike[str] | str",
    probe: Optional[str] = None,
    target: Optional[str] = None,
    ranges: Sequence[Tuple[int, int]] = (),
    progress: Optional[ProgressSink] = None,
    reset: bool = False,
    on_connected=None,
) -> OperationResult:
    """:func:`read_flash` for a Pico in BOOTSEL mode (``-u picoboot``): PICOBOOT READ in
    :data:`~piflash.flashing.verify.READBACK_BLOCK` pieces, then the chip's CRC32 of every 4 KiB
    page read against the host's (:func:`piflash.jobs.bootsel.verify_bootsel`'s check); the
    main flash is the ``xip`` region cut to the size the flash's JEDEC ID gives. ``reset``:
    REBOOT into the flash afterwards.

    :raises: what :func:`read_flash` raises, and those of :func:`piflash.jobs.bootsel.bootsel_session`.
    """
    from piflash.flashing.verify import READBACK_BLOCK
    from piflash.jobs.bootsel import _compare, _reboot, bootsel_session
    from piflash.jobs.workflow import tracking
    from piflash.progress import Phase
    from piflash.targets.catalog import resolve_target
    from piflash.targets.families.rp2 import regions_of_size, size_of_jedec

    out = _checked_output(output, ranges)
    sink = progress or ProgressSink()
    result = OperationResult.start("read", None, probe, target)
    with tracking(result):
        with bootsel_session(probe, result, sink, on_connected, target) as conn:
            try:
                regions = (resolve_target(result.target).flash_regions if result.target else None) or []
                jedec = conn.flash_jedec_id()
                size = size_of_jedec(jedec) if jedec is not None else None
                if size and jedec:
                    regions = regions_of_size(regions, size, jedec)
                wanted = list(ranges) or [(regions[0][0], regions[0][1])]
                _check_ranges(wanted, regions, result.target or "the target")
                total = sum(end - start for start, end in wanted)
                chunks: List[Tuple[int, bytes]] = []
                with phase(result, sink, READ_PHASE):
                    sink.phase_start(READ_PHASE, total)
                    done = 0
                    for start, end in wanted:
                        parts = []
                        for at in range(start, end, READBACK_BLOCK):
                            parts.append(conn.read(at, min(READBACK_BLOCK, end - at)))
                            done += len(parts[-1])
                            sink.phase_update(READ_PHASE, done)
                        chunks.append((start, b"".join(parts)))
                    sink.phase_end(READ_PHASE, f"{total:,} bytes read")
                image = _image_of(out, chunks)
                result.image_bytes = total
                with phase(result, sink, Phase.VERIFY):
                    sink.phase_start(Phase.VERIFY, total)
                    result.verify = _compare(conn, image, sink)
                    sink.phase_end(
                        Phase.VERIFY,
                        f"all match: {result.verify.crc_pages} pages by CRC32, "
                        f"{result.verify.readback_bytes:,} B read back",
                    )
                _write(out, chunks, result)
            except OperationInterrupted:
                raise _interrupted(out, result) from None
            if reset:
                _reboot(conn, result, sink)
    return result
