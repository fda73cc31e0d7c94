#!/usr/bin/env bash
# The main job on a machine with no probe: set everything up, then flash the
# released MicroPython build for the BBC micro:bit (Debian's
# firmware-microbit-micropython) into a simulated nRF51 board, with progress,
# read-back verify and reset; then flash it again to show unchanged pages skipped.
# Run as root (sudo) in a user's checkout, it gives the files it made back to that user.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv=${PIFLASH_VENV:-$repo/.venv}
export PIFLASH_SIM_DIR=${PIFLASH_SIM_DIR:-$repo/.sim-demo}
source "$repo/scripts/lib-owner.sh"
owner_guard demo.sh "$venv" "$PIFLASH_SIM_DIR"
"$repo/scripts/dev-setup.sh" sim
hex=/usr/share/firmware-microbit-micropython/firmware.hex

"$venv/bin/piflash" sim delete microbit >/dev/null 2>&1 || true
"$venv/bin/piflash" sim create microbit --target nrf51
echo "+ piflash flash $hex --target nrf51 --probe sim:microbit"
"$venv/bin/piflash" flash "$hex" --target nrf51 --probe sim:microbit
echo "+ piflash flash (again: unchanged pages are skipped)"
"$venv/bin/piflash" flash "$hex" --target nrf51 --probe sim:microbit
# The venv's piflash is on no PATH yet: say how to get it there (README, "Using it").
echo "piflash is in $venv/bin; to run it from this shell: source $venv/bin/activate"
