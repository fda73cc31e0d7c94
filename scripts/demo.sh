#!/usr/bin/env bash
# The main job on a machine with no probe: set everything up, then flash the
# released MicroPython build for the BBC micro:bit (Debian's
# firmware-microbit-micropython) into a simulated nRF51 board, with progress,
# read-back verify and reset; then flash it again to show unchanged pages skipped.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$repo/scripts/dev-setup.sh" sim
venv=${PIFLASH_VENV:-$repo/.venv}
hex=/usr/share/firmware-microbit-micropython/firmware.hex
export PIFLASH_SIM_DIR=${PIFLASH_SIM_DIR:-$repo/.sim-demo}

"$venv/bin/piflash" sim delete microbit >/dev/null 2>&1 || true
"$venv/bin/piflash" sim create microbit --target nrf51
echo "+ piflash flash $hex --target nrf51 --probe sim:microbit"
"$venv/bin/piflash" flash "$hex" --target nrf51 --probe sim:microbit
echo "+ piflash flash (again: unchanged pages are skipped)"
"$venv/bin/piflash" flash "$hex" --target nrf51 --probe sim:microbit
