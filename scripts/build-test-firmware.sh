#!/usr/bin/env bash
# Builds the test firmware under tests/firmware/ and makes sure the micro:bit
# MicroPython image is installed.  Installs what is missing with apt-get when
# run as root; otherwise prints the command to run and fails.  Silent when
# everything is already in place and built.
#
#   scripts/build-test-firmware.sh                 # -> tests/firmware/build/
#   scripts/build-test-firmware.sh BUILD=/some/dir # extra arguments go to make
set -euo pipefail

MICROBIT_HEX=/usr/share/firmware-microbit-micropython/firmware.hex
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

missing=()
command -v make >/dev/null 2>&1 || missing+=(make)
command -v arm-none-eabi-gcc >/dev/null 2>&1 || missing+=(gcc-arm-none-eabi)
command -v arm-none-eabi-objcopy >/dev/null 2>&1 || missing+=(binutils-arm-none-eabi)
[[ -f $MICROBIT_HEX ]] || missing+=(firmware-microbit-micropython)

if ((${#missing[@]})); then
    cmd="apt-get install -y --no-install-recommends ${missing[*]}"
    if [[ $(id -u) -ne 0 ]]; then
        echo "build-test-firmware: missing packages; as root run:" >&2
        echo "  apt-get update && $cmd" >&2
        exit 1
    fi
    echo "build-test-firmware: installing ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    log=$(mktemp)
    if ! { apt-get update -qq && $cmd -qq; } >"$log" 2>&1; then
        cat "$log" >&2
        rm -f "$log"
        echo "build-test-firmware: '$cmd' failed" >&2
        exit 1
    fi
    rm -f "$log"
fi

make -s --no-print-directory -C "$repo/tests/firmware" "$@"

# pyOCD's own test binaries (rp2040.bin and rp2350.bin: pico-examples "blink" builds that nobody
# here wrote) and its functional tests, from the source distribution on PyPI of the pyOCD the
# venv has: tests/firmware/build/pyocd/ (tests/firmware/README.md).
venv=${PIFLASH_VENV:-$repo/.venv}
pyocd_dir=$repo/tests/firmware/build/pyocd
if [[ ! -f $pyocd_dir/binaries/rp2040.bin ]]; then
    version=$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("pyocd"))')
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    if ! "$venv/bin/python" -m pip download -q --no-deps --no-binary :all: -d "$tmp" "pyocd==$version" 2>"$tmp/log"; then
        cat "$tmp/log" >&2
        echo "build-test-firmware: could not download pyOCD $version's source distribution from PyPI" >&2
        exit 1
    fi
    tar -xzf "$tmp/pyocd-$version.tar.gz" -C "$tmp" "pyocd-$version/test"
    rm -rf "$pyocd_dir"
    mkdir -p "$pyocd_dir"
    mv "$tmp/pyocd-$version/test/data/binaries" "$pyocd_dir/binaries"
    mv "$tmp/pyocd-$version/test" "$pyocd_dir/test"
    echo "$version" >"$pyocd_dir/VERSION"
fi

# The files the README and docs/ flash, under the names they use (README, "Using it"), in
# tests/firmware/build/examples/: our nRF52840 blink as blink.hex/firmware.hex/app.hex/fw.hex and
# blink.elf, the nRF52840 boot-check image that prints "self-test: PASS" over RTT as app.elf and
# rtt.elf/rtt.hex, the one that exits by semihosting as test.elf (docs/boot-check.md)
# (piflash run, --boot-check), our STM32F103RC blink as app.bin (at 0x08000000), and pico-examples
# blink for the RP2040 and RP2350 as blink.uf2 and blink-rp2350.uf2 (written by piflash's own UF2
# writer, families from pico-sdk boot/uf2.h: RP2040 0xE48BFF56, RP2350 Arm Secure 0xE48BFF59).
build=$repo/tests/firmware/build
examples=$build/examples
mkdir -p "$examples"
for name in firmware.hex app.hex fw.hex blink.hex; do cp "$build/nrf52840/firmware.hex" "$examples/$name"; done
cp "$build/nrf52840/firmware.elf" "$examples/blink.elf"
cp "$build/boot/nrf52840/rtt.elf" "$examples/app.elf"
cp "$build/boot/nrf52840/rtt.elf" "$build/boot/nrf52840/rtt.hex" "$examples/"
cp "$build/boot/nrf52840/semihost.elf" "$examples/test.elf"
cp "$build/stm32f103rc/firmware.bin" "$examples/app.bin"
PYTHONPATH=$repo "$venv/bin/python" - "$pyocd_dir/binaries" "$examples" <<'PY'
import sys
from pathlib import Path
from piflash.firmware.uf2 import dump_uf2
src, out = map(Path, sys.argv[1:])
for chip, family, name in (("rp2040", 0xE48BFF56, "blink.uf2"), ("rp2350", 0xE48BFF59, "blink-rp2350.uf2")):
    (out / name).write_bytes(dump_uf2([(0x10000000, (src / f"{chip}.bin").read_bytes())], family))
PY
