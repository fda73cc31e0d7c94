#!/usr/bin/env bash
# Sets up a development/demo environment on Debian or Raspberry Pi OS:
# the Debian packages needed, then a venv in .venv with piflash installed
# editable. Used by scripts/demo.sh and scripts/test.sh; idempotent.
#
#   scripts/dev-setup.sh sim    # piflash + the simulated board (unicorn)
#   scripts/dev-setup.sh test   # the above + pytest and the firmware toolchain
#
# Environment: PIFLASH_VENV (default: <repo>/.venv).
set -euo pipefail

extra=${1:-sim}
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv=${PIFLASH_VENV:-$repo/.venv}

# Debian packages: venv support, the system libusb pyOCD falls back to, and the
# released MicroPython build for the BBC micro:bit (the demo's and tests' real firmware).
pkgs=(python3-venv python3-pip libusb-1.0-0 firmware-microbit-micropython)
# The tests start a real PostgreSQL server for the ledger (tests/support/pgserver.py) and
# psycopg needs libpq. The job bundles' tests make keys and sign with ssh-keygen (openssh-client).
# The operator's page is tested in Debian's chromium, driven by Playwright (never 'playwright install').
# (The labgrid test's sshd, openssh-server, is installed by CI only: .ci/run. On a developer's
# machine the package would start an SSH server on port 22; without it that test skips, saying so.)
[[ $extra == test ]] && pkgs+=(make gcc-arm-none-eabi binutils-arm-none-eabi postgresql libpq5 openssh-client chromium)
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    sudo=()
    if [[ $(id -u) -ne 0 ]]; then
        if command -v sudo >/dev/null; then sudo=(sudo); else
            echo "dev-setup: as root run: apt-get update && apt-get install -y --no-install-recommends ${missing[*]}" >&2
            exit 1
        fi
    fi
    echo "dev-setup: installing Debian packages: ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    "${sudo[@]}" apt-get update -qq >/dev/null
    "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [[ ! -x $venv/bin/python ]]; then
    echo "dev-setup: creating venv $venv" >&2
    python3 -m venv "$venv"
fi
stamp=$venv/.piflash-$extra.stamp
deps=$repo/scripts/install-deps.txt
if [[ ! -f $stamp || $repo/pyproject.toml -nt $stamp || $deps -nt $stamp ]]; then
    echo "dev-setup: installing piflash[$extra] into $venv" >&2
    # The packages an install gets, at the versions it gets them (install-deps.txt's pip rows), so
    # the tests run what users run and a new release on PyPI cannot change a test run by itself.
    # The test-only packages (pytest, ...) float within pyproject.toml's bounds.
    constraints=$(mktemp)
    trap 'rm -f "$constraints"' EXIT
    awk '!/^[[:space:]]*(#|$)/ && $3 == "pip" && $2 != "-" {print $1 "==" $2}' "$deps" > "$constraints"
    "$venv/bin/python" -m pip install -q --disable-pip-version-check -c "$constraints" -e "$repo[$extra]"
    touch "$stamp"
fi
