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
