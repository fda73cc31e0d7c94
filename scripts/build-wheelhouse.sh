#!/usr/bin/env bash
# Builds a wheelhouse: a folder with a wheel of every pinned pip package of a profile in
# scripts/install-deps.txt, for `scripts/install.sh --wheelhouse DIR` to install offline.
# Run it on a bigger machine of the same architecture as the target (a Pi 4 or 5 for a
# Zero 2W), so that what has no wheel on PyPI (capstone on armv7l) is compiled there, not on
# the Zero. The architecture is the installed system's (armv7l for 32-bit Raspberry Pi OS,
# aarch64 for 64-bit; scripts/lib-arch.sh), not the kernel's: a Pi 4/5 runs a 64-bit kernel
# under 32-bit Raspberry Pi OS.
#
#   bash scripts/build-wheelhouse.sh [--profile minimal|full] DIR
#   # copy DIR and this checkout to the Zero 2W, then there:
#   bash scripts/install.sh --profile full --wheelhouse DIR
#
# Building capstone from source needs a compiler (sudo apt-get install build-essential
# python3-dev) and about 1.5 GB of RAM + swap; the script checks both first.
# Exit status: 0 built, 1 a step failed, 2 usage error, 3 needs a compiler, 4 too little memory.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
deps=$repo/scripts/install-deps.txt
source "$repo/scripts/lib-arch.sh"
arch=$(userland_arch)
profile=full
die() { local code=$1; printf 'build-wheelhouse: error: %s\n' "$2" >&2; shift 2
        local l; for l in "$@"; do printf '  %s\n' "$l" >&2; done; exit "$code"; }
say() { printf 'build-wheelhouse: %s\n' "$*" >&2; }
while (($#)); do
    case $1 in
        --profile) (($# >= 2)) || die 2 "--profile needs minimal or full"; profile=$2; shift 2 ;;
        -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) die 2 "unknown option $1" ;;
        *) break ;;
    esac
done
(($# == 1)) || die 2 "usage: build-wheelhouse.sh [--profile minimal|full] DIR"
[[ $profile == minimal || $profile == full ]] || die 2 "unknown profile '$profile'"
mkdir -p "$1"
out=$(cd "$1" && pwd)

reqs=()
while read -r name version source prof _; do
    [[ -z $name || $name == \#* || $source != pip ]] && continue
    # the ledger's, metrics', web page's and pins' extras are pure Python: in every wheelhouse, for
    # --with-ledger/--with-metrics/--with-web/--with-pins
    [[ $prof == all || $prof == "$profile" || $prof == ledger || $prof == metrics || $prof == web || $prof == pins ]] && reqs+=("$name==$version")
done < "$deps"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf '%s\n' "${reqs[@]}" > "$work/requirements.txt"
python3 -m venv "$work/venv" || die 1 "python3 -m venv failed" "sudo apt-get install -y python3-venv"
pip=("$work/venv/bin/python" -m pip --disable-pip-version-check --no-input)

# Wheels from the index where it has one for this machine; what has none is built here.
shopt -s nocaseglob
have_wheel() { local name=${1%%==*} version=${1#*==}; compgen -G "$out/${name//-/_}-$version-*.whl" > /dev/null; }
say "downloading ${#reqs[@]} wheels for $arch"
if ! "${pip[@]}" download -q --no-deps --only-binary :all: -d "$out" -r "$work/requirements.txt" \
        > "$work/download.log" 2>&1; then
    for req in "${reqs[@]}"; do  # one at a time, to learn which have no wheel
        have_wheel "$req" || "${pip[@]}" download -q --no-deps --only-binary :all: -d "$out" "$req" \
            >> "$work/download.log" 2>&1 || true
    done
fi
missing=()
for req in "${reqs[@]}"; do have_wheel "$req" || missing+=("$req"); done
if ((${#missing[@]})); then
    say "no wheel on the index for $arch: ${missing[*]}; building them here"
    command -v cc > /dev/null && [[ -n $(python3 -c 'import sysconfig; print(sysconfig.get_path("include"))') ]] &&
        [[ -f $(python3 -c 'import sysconfig; print(sysconfig.get_path("include"))')/Python.h ]] ||
        die 3 "building needs a C compiler and Python's headers" \
            "sudo apt-get install -y build-essential python3-dev cmake"
    avail=$(awk '/^MemAvailable:/ {m=$2} /^SwapFree:/ {s=$2} END {printf "%d", (m+s)/1024}' /proc/meminfo)
    ((avail >= 1500)) || die 4 "only $avail MiB of RAM + swap available; building capstone peaks near 1.3 GB" \
        "build on a Pi 4/5 with 2 GB or more, or raise CONF_SWAPSIZE in /etc/dphys-swapfile"
    printf '%s\n' "${missing[@]}" > "$work/missing.txt"
    "${pip[@]}" wheel --no-deps -w "$out" -r "$work/missing.txt" || die 1 "pip wheel failed"
fi
printf 'machine=%s\nprofile=%s\n' "$arch" "$profile" > "$out/piflash-wheelhouse.txt"
say "$(ls "$out"/*.whl | wc -l) wheels in $out for $arch"
say "on the target: bash scripts/install.sh --profile $profile --wheelhouse $out"
