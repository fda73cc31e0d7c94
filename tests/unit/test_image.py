"""Firmware loading and the flash-region check: every bad input gets its own clear error."""

import pytest
from intelhex import IntelHex

from piflash.errors import ExitCode, FirmwareError, ImageRangeError
from piflash.firmware.image import check_fits, load_image, merge_segments
from piflash.targets.catalog import builtin_flash_regions


def write_hex(path, chunks):
    ih = IntelHex()
    for addr, data in chunks:
        ih.frombytes(data, offset=addr)
    ih.write_hex_file(str(path))
    return path


def test_hex_segments_are_merged_and_sorted(tmp_path):
    path = write_hex(tmp_path / "a.hex", [(0x2000, b"\x02" * 16), (0x1000, b"\x01" * 0x1000)])
    image = load_image(path)
    assert image.format == "hex"
    # 0x1000..0x1fff and 0x2000..0x200f are adjacent: one segment.
    assert [(s.address, len(s.data)) for s in image.segments] == [(0x1000, 0x1010)]
    assert image.size == 0x1010


def test_bin_needs_base_address(tmp_path):
    path = tmp_path / "a.bin"
    path.write_bytes(b"\x00" * 64)
    with pytest.raises(FirmwareError, match="--base-address") as err:
        load_image(path)
    assert err.value.exit_code == ExitCode.FIRMWARE
    image = load_image(path, base_address=0x08000000)
    assert image.start == 0x08000000 and image.end == 0x08000040


def test_base_address_refused_for_hex(tmp_path):
    path = write_hex(tmp_path / "a.hex", [(0, b"\x01" * 4)])
    with pytest.raises(FirmwareError, match="only to .bin"):
        load_image(path, base_address=0)


@pytest.mark.parametrize("content, message", [
    ("", "truncated"),
    ("hello\n", "truncated"),
    (":10000000FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF01\n:00000001FF\n", "corrupt Intel HEX file: line 1: bad checksum"),
    (":1000000\n:00000001FF\n", "corrupt"),                                   # short record
    (":00000001FF\n", "no data"),                                            # empty but valid
    (":0500000001020304F2\n:00000001FF\n", "line 1: the record's length does not match"),  # 5 said, 4 given
    (":0400000601020304EC\n:00000001FF\n", "line 1: record type 0x06"),
    (":0400000001020304F2\n:0400020001020304F0\n:00000001FF\n", "records overlap"),  # 2-3 twice
    # 0x00-0x0F, 0x20-0x2F, then 0x10-0x2F across the gap: it covers the second record too
    (":1000000000000000000000000000000000000000F0\n:1000200000000000000000000000000000000000D0\n"
     ":200010001111111111111111111111111111111111111111111111111111111111111111B0\n:00000001FF\n",
     "records overlap"),
    (":0400000001020304F2\n:00000001FF\n:0400100001020304E2\n:00000001FF\n",
     "line 3: a record after the end-of-file record of line 2"),             # two files joined
    (":020000021000EC\n:020000040800F2\n:0400000001020304F2\n:00000001FF\n",
     "both segment .type 02, line 1. and linear .type 04, line 2."),
    (":03000004080000F1\n:0400000001020304F2\n:00000001FF\n", "a type 0x04 record must carry 2 bytes"),
    (":020010040800E2\n:0400000001020304F2\n:00000001FF\n", "at address 0000"),
    (":0100000101FD\n", "a type 0x01 record must carry 0 bytes"),             # EOF with data
    (":0400000001020304F3\n:00000001FF\n", "line 1: bad checksum"),
    (":0400000001020304F2\r:00000001FF\r:0400000001020304F2\r", "line 3: a record after"),  # CR-only
])
def test_bad_hex(tmp_path, content, message):
    path = tmp_path / "bad.hex"
    path.write_text(content)
    with pytest.raises(FirmwareError, match=message):
        load_image(path)


def test_hex_extended_addresses_and_crlf(tmp_path):
    """Type 04 records give the upper 16 address bits, type 02 a segment base x 16, for the data
    records after them; CRLF line ends are what Windows tools write."""
    linear = tmp_path / "linear.hex"
    linear.write_bytes(b":020000041000EA\r\n:0400000001020304F2\r\n:020000040000FA\r\n"
                       b":020010000506E3\r\n:00000001FF\r\n")
    assert [(s.address, s.data) for s in load_image(linear).segments] == [
        (0x10, b"\x05\x06"), (0x10000000, b"\x01\x02\x03\x04")]
    segment = tmp_path / "segment.hex"
    segment.write_bytes(b":020000021000EC\n:020010000506E3\n:00000001FF\n")
    assert [(s.address, s.data) for s in load_image(segment).segments] == [(0x10010, b"\x05\x06")]


def test_hex_placed_as_intelhex_places_it_in_any_record_order(tmp_path):
    """piflash places every record itself (issue 38: bincopy's insert was quadratic in the
    records of a sparse file): the same bytes at the same addresses as intelhex, the format's
    reference reader, gives, for records spread over 4 GiB and written in a shuffled order."""
    import random

    rng = random.Random(38)
    chunks = [(rng.randrange(0, 1 << 16) << 16 | rng.randrange(0, 1 << 12) << 4, rng.randbytes(rng.randrange(1, 64)))
              for _ in range(300)]
    chunks = sorted(dict(chunks).items())
    chunks = [c for c, n in zip(chunks, chunks[1:] + [(1 << 33, b"")]) if c[0] + len(c[1]) <= n[0]]
    reference = write_hex(tmp_path / "ref.hex", chunks)
    lines = reference.read_text().splitlines()
    # intelhex writes each record behind the type 04 record it needs: shuffle those groups
    groups, group = [], []
    for line in lines[:-1]:
        if line[7:9] == "04" and group:
            groups.append(group)
            group = []
        group.append(line)
    groups.append(group)
    rng.shuffle(groups)
    shuffled = tmp_path / "shuffled.hex"
    shuffled.write_text("\n".join(line for g in groups for line in g) + "\n" + lines[-1] + "\n")
    ih = IntelHex(str(reference))
    expected = [(start, ih.tobinstr(start=start, end=end - 1)) for start, end in ih.segments()]
    for path in (reference, shuffled):
        assert [(s.address, s.data) for s in load_image(path).segments] == expected


def test_hex_truncated_at_line_boundary(tmp_path):
    good = write_hex(tmp_path / "good.hex", [(0, bytes(range(256)) * 8)])
    lines = good.read_text().splitlines()
    cut = tmp_path / "cut.hex"
    cut.write_text("\n".join(lines[: len(lines) // 2]) + "\n")
    with pytest.raises(FirmwareError, match="truncated"):
        load_image(cut)


def test_missing_and_directory(tmp_path):
    with pytest.raises(FirmwareError, match="no such firmware file"):
        load_image(tmp_path / "nope.hex")
    with pytest.raises(FirmwareError, match="directory"):
        load_image(tmp_path)


def test_unknown_extension_sniffs_content(tmp_path):
    path = write_hex(tmp_path / "fw.ihx.txt", [(0, b"\x01\x02")])
    assert load_image(path).format == "hex"
    junk = tmp_path / "fw.dat"
    junk.write_bytes(b"\x00\x01")
    with pytest.raises(FirmwareError, match="unknown firmware format"):
        load_image(junk)


def test_corrupt_elf(tmp_path):
    path = tmp_path / "fw.elf"
    path.write_bytes(b"\x7fELF" + b"\x01" * 40)
    with pytest.raises(FirmwareError, match=r"truncated: the file ends inside its ELF header \(44 of 52 bytes\)"):
        load_image(path)


def test_overlap_is_an_error():
    with pytest.raises(FirmwareError, match="overlaps"):
        merge_segments([(0, b"\x00" * 8), (4, b"\x00" * 8)])


def test_image_outside_flash(tmp_path):
    regions = builtin_flash_regions("nrf52840")
    path = write_hex(tmp_path / "a.hex", [(0, b"\x01" * 16), (0x20000000, b"\x02" * 16)])
    with pytest.raises(ImageRangeError) as err:
        check_fits(load_image(path), regions, "nrf52840")
    assert err.value.address == 0x20000000
    assert err.value.exit_code == ExitCode.IMAGE_RANGE
    assert "0x20000000" in err.value.message


def test_bin_past_end_of_flash(tmp_path):
    # pyOCD's stm32f103rc map (pyocd/target/builtin/target_STM32F103RC.py) has 512 KiB at 0x08000000.
    regions = builtin_flash_regions("stm32f103rc")
    end = max(e for s, e, n in regions)
    path = tmp_path / "a.bin"
    path.write_bytes(b"\x00" * 0x100)
    image = load_image(path, base_address=end - 0x80)
    with pytest.raises(ImageRangeError) as err:
        check_fits(image, regions, "stm32f103rc")
    assert err.value.address == end
