#!/usr/bin/env bash
# Lint and type checks (issue 37 item 8), configured in pyproject.toml; .ci/run runs this before
# the tests. Stops at the first tool that finds something (set -e), with its exit code.
#   scripts/lint.sh
# ruff and mypy come pinned in the test extra, which dev-setup installs.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv=${PIFLASH_VENV:-$repo/.venv}
source "$repo/scripts/lib-owner.sh"
owner_guard lint.sh "$venv"
"$repo/scripts/dev-setup.sh" test
cd "$repo"
"$venv/bin/ruff" check piflash tests benchmarks
# Until the one-time `ruff format piflash` after issue 37's branches have merged, this reports the
# files the formatter would change.
"$venv/bin/ruff" format --check piflash
"$venv/bin/python" -m mypy piflash
