#!/usr/bin/env bash
# Set everything up and run the test suite (this is what CI runs).
#   scripts/test.sh [pytest args...]
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$repo/scripts/dev-setup.sh" test
"$repo/scripts/build-test-firmware.sh"
venv=${PIFLASH_VENV:-$repo/.venv}
cd "$repo"
exec "$venv/bin/python" -m pytest "$@"
