#!/usr/bin/env bash
# Lets a user open USB debug probes, and the Raspberry Pi's SPI and GPIO nodes,
# without root: creates the plugdev, spi and gpio groups if missing, adds the
# user to them ($SUDO_USER or --user NAME), installs piflash's udev rules and
# reloads udev. Same as `piflash setup permissions`; this script runs
# the code with the system python3, so it works before piflash is installed.
#
#   sudo scripts/setup-probe-permissions.sh [--user NAME] [--dry-run] [--uninstall] [--root DIR]
#
# Idempotent; --uninstall reverts exactly what earlier runs changed; --root DIR
# works on another root file system (image builders). See docs/permissions.md.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export PIFLASH_SETUP_SCRIPT=$0  # named in the "needs root" hint
PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" exec python3 -m piflash.probe.permissions "$@"
