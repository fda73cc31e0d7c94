#!/usr/bin/env bash
# Set everything up and run the test suite (this is what CI runs).
#   scripts/test.sh [pytest args...]
# Run as root (sudo) in a user's checkout, it gives the files it made back to that user.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv=${PIFLASH_VENV:-$repo/.venv}
source "$repo/scripts/lib-owner.sh"
owner_guard test.sh "$venv" "$repo/tests/firmware/build"
"$repo/scripts/dev-setup.sh" test
"$repo/scripts/build-test-firmware.sh"
cd "$repo"
"$venv/bin/python" -m pytest "$@"  # not exec: the EXIT trap of a root run hands files back
