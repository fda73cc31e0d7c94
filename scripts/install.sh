#!/usr/bin/env bash
# Installs piflash on a Raspberry Pi (or any Debian-like machine) without compiling anything:
# a venv over Debian's prebuilt packages (--system-site-packages), pyOCD and its pure-Python
# dependencies pinned in scripts/install-deps.txt (pip --no-deps --only-binary :all:), then
# piflash from this checkout. docs/install.md explains every step and failure.
#
#   bash scripts/install.sh                     # profile "minimal", for this user
#   bash scripts/install.sh --profile full      # + capstone and cmsis-pack-manager (wheels only)
#   bash scripts/install.sh --with-sim          # + the simulated board (Debian's python3-unicorn)
#   bash scripts/install.sh --with-ledger       # + the central ledger (psycopg, pure Python, on Debian's libpq5)
#   bash scripts/install.sh --with-metrics      # + the station's Prometheus metrics (prometheus-client, pure Python)
#   bash scripts/install.sh --with-web          # + the operator's live page (Starlette, uvicorn: pure Python)
#   bash scripts/install.sh --with-pins         # + SWD from the Pi's own pins (python-periphery: pure Python)
#   bash scripts/install.sh --wheelhouse DIR    # offline, from scripts/build-wheelhouse.sh's folder
#   sudo bash scripts/install.sh --system       # /opt/piflash + /usr/local/bin/piflash (the station)
#   bash scripts/install.sh --uninstall [--system]
#
# A user install goes to ~/.local/share/piflash/venv and links ~/.local/bin/piflash.
# Run it again to upgrade in place. --force goes on when the pre-flight check (free memory,
# swap, TMPDIR and disk space) says stop.
# Exit status: 0 installed, 1 a step failed, 2 usage error, 3 needs you first (root/sudo, apt),
# 4 the pre-flight check refused.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
deps=$repo/scripts/install-deps.txt
profile=minimal system=0 wheelhouse="" uninstall=0 force=0 with_sim=0 with_ledger=0 with_metrics=0 with_web=0 with_pins=0 args=("$@")

say() { printf 'install: %s\n' "$*" >&2; }
# die CODE MESSAGE [HINT LINE...]
die() {
    local code=$1
    printf 'install: error: %s\n' "$2" >&2
    shift 2
    local line
    for line in "$@"; do printf '  %s\n' "$line" >&2; done
    exit "$code"
}
usage() { sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; }

while (($#)); do
    case $1 in
        --profile)
            (($# >= 2)) || die 2 "--profile needs a value: minimal or full"
            profile=$2; shift 2 ;;
        --profile=*) profile=${1#*=}; shift ;;
        --wheelhouse)
            (($# >= 2)) || die 2 "--wheelhouse needs a directory"
            wheelhouse=$2; shift 2 ;;
        --wheelhouse=*) wheelhouse=${1#*=}; shift ;;
        --system) system=1; shift ;;
        --with-sim) with_sim=1; shift ;;
        --with-ledger) with_ledger=1; shift ;;
        --with-metrics) with_metrics=1; shift ;;
        --with-web) with_web=1; shift ;;
        --with-pins) with_pins=1; shift ;;
        --uninstall) uninstall=1; shift ;;
        --force) force=1; shift ;;
        -h|--help) usage; exit 0 ;;
        *) die 2 "unknown argument '$1'" "usage: bash scripts/install.sh [--profile minimal|full] [--with-sim] [--with-ledger] [--with-metrics] [--with-web] [--with-pins] [--system] [--wheelhouse DIR] [--uninstall] [--force]" ;;
    esac
done
[[ $profile == minimal || $profile == full ]] ||
    die 2 "unknown profile '$profile'" "choose --profile minimal (the default) or --profile full"
if [[ -n $wheelhouse ]]; then
    [[ -d $wheelhouse ]] || die 2 "wheelhouse '$wheelhouse' is not a directory" \
        "build one on a Pi 4/5 of the same architecture: bash scripts/build-wheelhouse.sh DIR"
    wheelhouse=$(cd "$wheelhouse" && pwd)
    source "$repo/scripts/lib-arch.sh"
    arch=$(userland_arch)   # the system's, not the kernel's (a 64-bit kernel under 32-bit OS)
    built_for=$(sed -n 's/^machine=//p' "$wheelhouse/piflash-wheelhouse.txt" 2>/dev/null || true)
    [[ -z $built_for || $built_for == "$arch" ]] ||
        die 2 "the wheelhouse holds $built_for wheels, this system is $arch (dpkg: $(dpkg --print-architecture 2>/dev/null || echo unknown))" \
            "build it on a system of the same architecture (armv7l: 32-bit Raspberry Pi OS, aarch64: 64-bit)," \
            "whatever its kernel's uname -m says: bash scripts/build-wheelhouse.sh DIR"
fi

# Where: root's own ~/.local (under /root) would be invisible to the user who runs piflash,
# so root installs only machine-wide, with --system.
uid=$(id -u)
if ((system)); then
    ((uid == 0)) || die 3 "--system installs into /opt/piflash and needs root" \
        "run: sudo bash scripts/install.sh ${args[*]}"
    venv=/opt/piflash bindir=/usr/local/bin
else
    ((uid != 0)) || die 3 "as root without --system this would install into root's own home, which your user never sees" \
        "as your user: bash scripts/install.sh   (it asks sudo only for apt)" \
        "machine-wide (the station service): sudo bash scripts/install.sh --system"
    venv=$HOME/.local/share/piflash/venv bindir=$HOME/.local/bin
fi
marker=$venv/piflash-install.json link=$bindir/piflash

# The Debian packages and pip requirements of this profile, from the one list.
apt_pkgs=(python3-venv) pip_reqs=() apt_all=(python3-venv) full_only=()
while read -r name version source prof _; do
    [[ -z $name || $name == \#* ]] && continue
    [[ $source == debian:* ]] && apt_all+=("${source#debian:}")
    [[ $source == pip && $prof == full ]] && full_only+=("$name")
    [[ $prof == all || $prof == "$profile" ]] || { [[ $prof == sim ]] && ((with_sim)); } ||
        { [[ $prof == ledger ]] && ((with_ledger)); } || { [[ $prof == metrics ]] && ((with_metrics)); } ||
        { [[ $prof == web ]] && ((with_web)); } || { [[ $prof == pins ]] && ((with_pins)); } || continue
    case $source in
        pip) pip_reqs+=("$name==$version") ;;
        debian:*) apt_pkgs+=("${source#debian:}") ;;
        *) die 1 "$deps: unknown source '$source' for $name" ;;
    esac
done < "$deps"
# psycopg's pure-Python build loads libpq, the C client library, at import: Debian's (every port).
((with_ledger)) && apt_pkgs+=(libpq5)

if ((uninstall)); then
    if [[ -f $marker ]]; then
        rm -rf "$venv"
        say "removed $venv"
    elif [[ -e $venv ]]; then
        die 1 "$venv has no piflash-install.json: not removing a directory this script did not install"
    else
        say "nothing installed at $venv"
    fi
    if [[ -L $link && $(readlink "$link") == "$venv/bin/piflash" ]]; then
        rm -f "$link"
        say "removed $link"
    fi
    ((system)) || rmdir "$(dirname "$venv")" 2>/dev/null || true
    installed=()   # the Python modules from Debian; libusb-1.0-0 and python3-venv are base packages
    for p in $(printf '%s\n' "${apt_all[@]}" | grep '^python3-' | grep -vx python3-venv | sort -u); do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" && installed+=("$p")
    done
    if ((${#installed[@]})); then
        say "Debian packages left in place (other software may use them): ${installed[*]}"
        say "to remove them too: sudo apt-get remove ${installed[*]} && sudo apt-get autoremove"
    fi
    exit 0
fi

command -v python3 >/dev/null || die 3 "python3 is missing" "sudo apt-get install -y python3"
python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' ||
    die 1 "needs Python 3.11 or newer (Raspberry Pi OS / Debian 12 bookworm or later), found $(python3 -V 2>&1)" \
        "the pins in scripts/install-deps.txt are chosen for Python 3.11+"

# Pre-flight, before any download: enough memory (RAM + swap, or a cgroup's limit), TMPDIR
# space for pip's unpacking, disk space for the venv. Figures: docs/install.md, "What it costs".
need_mem=200 need_tmp=150 need_disk=200
[[ $profile == full ]] && need_disk=260
mib() { echo $(($1 / 1048576)); }
# (KiB from awk: mawk's printf %d stops at 2^31, so no bytes there)
read -r mem_avail swap_free < <(awk '/^MemAvailable:/ {m=$2} /^SwapFree:/ {s=$2} END {print m, s}' /proc/meminfo)
mem_avail=$((mem_avail * 1024)) swap_free=$((swap_free * 1024))
avail=$((mem_avail + swap_free))
# A memory cgroup limit (systemd slice, container, the ARM test's cap) counts too.
cg_limit="" cg_usage=""
if cg=$(awk -F: '$1 == "0" && $2 == "" {print $3}' /proc/self/cgroup 2>/dev/null) && [[ -n $cg && -r /sys/fs/cgroup$cg/memory.max ]]; then
    cg_limit=$(cat "/sys/fs/cgroup$cg/memory.max") cg_usage=$(cat "/sys/fs/cgroup$cg/memory.current")
elif cg=$(awk -F: '$2 ~ /(^|,)memory(,|$)/ {print $3}' /proc/self/cgroup 2>/dev/null) && [[ -n $cg && -r /sys/fs/cgroup/memory$cg/memory.limit_in_bytes ]]; then
    cg_limit=$(cat "/sys/fs/cgroup/memory$cg/memory.limit_in_bytes") cg_usage=$(cat "/sys/fs/cgroup/memory$cg/memory.usage_in_bytes")
fi
if [[ $cg_limit =~ ^[0-9]+$ ]] && ((cg_limit - cg_usage < avail)); then
    avail=$((cg_limit - cg_usage))
    say "memory cgroup limit $(mib "$cg_limit") MiB, $(mib "$cg_usage") MiB used"
fi
tmp=${TMPDIR:-/tmp}
tmp_free=$(($(df -Pk "$tmp" | awk 'NR==2 {print $4}') * 1024))
vparent=$venv
until [[ -d $vparent ]]; do vparent=$(dirname "$vparent"); done
disk_free=$(($(df -Pk "$vparent" | awk 'NR==2 {print $4}') * 1024))
problems=()
if (($(mib "$avail") < need_mem)); then
    problems+=("only $(mib "$avail") MiB of memory is available (RAM $(mib "$mem_avail") MiB + swap $(mib "$swap_free") MiB); installing needs about $need_mem MiB"
        "  stop what you can (other services, a running station), or add swap: set"
        "  CONF_SWAPSIZE=512 in /etc/dphys-swapfile, then: sudo dphys-swapfile setup && sudo dphys-swapfile swapon")
fi
if (($(mib "$tmp_free") < need_tmp)); then
    problems+=("only $(mib "$tmp_free") MiB free in $tmp (TMPDIR); pip unpacks there and needs about $need_tmp MiB"
        "  use a folder on the SD card instead: TMPDIR=/var/tmp bash scripts/install.sh ...")
fi
if (($(mib "$disk_free") < need_disk)); then
    problems+=("only $(mib "$disk_free") MiB free in $vparent; the venv and pip's cache need about $need_disk MiB"
        "  free some space (sudo apt-get clean; rm -rf ~/.cache/pip) and run this again")
fi
if ((${#problems[@]})); then
    ((force)) || die 4 "pre-flight check: this would not finish" "${problems[@]}" \
        "(--force goes on regardless)"
    printf 'install: warning: %s\n' "${problems[@]}" >&2
fi
say "pre-flight: $(mib "$avail") MiB memory, $(mib "$tmp_free") MiB in $tmp, $(mib "$disk_free") MiB in $vparent: ok"

# Debian packages: with apt when root or when sudo works without a password, else the command.
missing=()
for p in $(printf '%s\n' "${apt_pkgs[@]}" | sort -u); do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    if ((uid == 0)); then
        as_root=()
    elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
        as_root=(sudo -n)
    else
        die 3 "Debian packages missing: ${missing[*]}" \
            "install them, then run this script again:" \
            "sudo apt-get update && sudo apt-get install -y --no-install-recommends ${missing[*]}"
    fi
    say "${as_root[*]:+${as_root[*]} }apt-get install ${missing[*]}"
    aptlog=$(mktemp)
    if ! { "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
           "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
               apt-get install -y -qq --no-install-recommends "${missing[@]}"; } > "$aptlog" 2>&1; then
        tail -n 20 "$aptlog" >&2
        die 1 "apt-get install ${missing[*]} failed (output above)"
    fi
    rm -f "$aptlog"
fi

# The venv; reused when it is healthy (the upgrade path), rebuilt when its Python is gone.
if [[ -e $venv && ! -f $venv/pyvenv.cfg ]] && [[ -n $(ls -A "$venv") ]]; then
    die 1 "$venv exists and is not a venv: not touching it" "move it away and run this again"
fi
if ! "$venv/bin/python" -c '' 2>/dev/null ||
    ! grep -qiE '^include-system-site-packages *= *true' "$venv/pyvenv.cfg"; then
    say "creating venv $venv (over the system's site-packages)"
    mkdir -p "$(dirname "$venv")"
    python3 -m venv --clear --system-site-packages "$venv" || die 1 "python3 -m venv failed" \
        "is python3-venv installed? sudo apt-get install -y python3-venv"
fi
py=$venv/bin/python
log=$venv/piflash-pip.log
rm -f "$log"
pip=("$py" -m pip --disable-pip-version-check --no-input install --log "$log")
src=()
[[ -n $wheelhouse ]] && src=(--no-index --find-links "$wheelhouse")

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf '%s\n' "${pip_reqs[@]}" > "$work/requirements.txt"
say "pip: ${#pip_reqs[@]} pinned packages ($profile profile)${wheelhouse:+ from $wheelhouse}"
if ! "${pip[@]}" --no-deps --only-binary :all: "${src[@]}" -r "$work/requirements.txt"; then
    hints=("pip's log: $log")
    [[ $profile == full ]] && hints+=("capstone has no wheel for armv7l on PyPI: build a wheelhouse on a Pi 4/5"
        "(bash scripts/build-wheelhouse.sh --profile full DIR) and install with --wheelhouse DIR,"
        "or use the minimal profile")
    die 1 "pip install of the pinned packages failed" "${hints[@]}"
fi

# Going from full back to minimal: the venv must then hold what the marker says.
if [[ $profile == minimal ]]; then
    drop=()
    while IFS== read -r name _; do
        name=$(sed 's/[_.]/-/g' <<< "${name,,}")
        [[ " ${full_only[*]} " == *" $name "* ]] && drop+=("$name")
    done < <("$py" -m pip --disable-pip-version-check list --local --format=freeze 2>/dev/null)
    if ((${#drop[@]})); then
        say "minimal profile: removing ${drop[*]}"
        "$py" -m pip --disable-pip-version-check uninstall -q -y "${drop[@]}" || die 1 "pip uninstall ${drop[*]} failed"
    fi
fi

# piflash itself, from a copy of this checkout (the build leaves nothing in it), with the
# pinned setuptools already in the venv: no index, no build isolation, no download.
mkdir "$work/src"
tar -C "$repo" --exclude=__pycache__ -cf - pyproject.toml README.md piflash | tar -C "$work/src" -xf -
"${pip[@]}" -q --no-index --no-deps --no-build-isolation --force-reinstall "$work/src" ||
    die 1 "pip install of piflash from $repo failed" "pip's log: $log"

# What pip check reports and why some of it is deliberate.
deliberate=(libusb-package)
[[ $profile == minimal ]] && deliberate+=(capstone cmsis-pack-manager)
ours=" piflash $(printf '%s ' "${pip_reqs[@]%%==*}")"
gaps=() bad=()
while IFS= read -r line; do
    [[ -z $line || $line == "No broken requirements found." ]] && continue
    who=${line%% *}
    who=$(sed 's/[_.]/-/g' <<< "${who,,}")
    if [[ $line =~ requires\ ([^,]+),\ which\ is\ not\ installed ]] &&
        [[ " ${deliberate[*]} " == *" ${BASH_REMATCH[1],,} "* ]]; then
        gaps+=("${BASH_REMATCH[1]}")
    elif [[ $ours == *" $who "* ]]; then
        bad+=("$line")
    else
        say "note: a system package reports: $line"
    fi
done < <("$py" -m pip check 2>&1 || true)
((${#bad[@]} == 0)) || die 1 "pip check found broken requirements" "${bad[@]}"
if ((${#gaps[@]})); then
    say "pip check: pyOCD's $(printf '%s\n' "${gaps[@]}" | sort -u | paste -sd, | sed 's/,/, /g') left out on purpose (docs/install.md)"
fi

# Smoke test: the system libusb-1.0 through pyusb (libusb-package's stand-in), the J-Link
# plugin's import of pylink -> psutil (a compiled module: pyOCD imports it for every probe
# scan), and piflash's own entry point.
"$py" - <<'EOF' || die 1 "the installed pyOCD does not load (see above)"
import usb.backend.libusb1
assert usb.backend.libusb1.get_backend() is not None, "pyusb finds no libusb-1.0 (apt-get install libusb-1.0-0)"
import pyocd.probe.jlink_probe
import pyocd.probe.aggregator
EOF
if ((with_sim)); then  # the simulated board's CPU emulator: Debian's build, its C library loads
    "$py" -c 'import unicorn; unicorn.Uc(unicorn.UC_ARCH_ARM, unicorn.UC_MODE_THUMB)' ||
        die 1 "the simulated board's CPU emulator (unicorn, Debian's python3-unicorn) does not load" \
            "check: apt-cache policy python3-unicorn; dpkg -L python3-unicorn"
fi
if ((with_ledger)); then  # the ledger's client: psycopg finds Debian's libpq at import
    "$py" -c 'import psycopg; print(psycopg.pq.version())' >/dev/null ||
        die 1 "the ledger's client (psycopg over Debian's libpq5) does not load" "check: dpkg -L libpq5"
fi
if ((with_metrics)); then
    "$py" -c 'import prometheus_client' || die 1 "the station's metrics (prometheus-client) do not load"
fi
if ((with_web)); then
    "$py" -c 'import starlette.applications, uvicorn' || die 1 "the operator's page (Starlette, uvicorn) does not load"
fi
if ((with_pins)); then
    "$py" -c 'import periphery.spi, periphery.gpio_cdev2' || die 1 "SWD from the Pi's pins (python-periphery) does not load"
fi
version=$("$venv/bin/piflash" --version) || die 1 "$venv/bin/piflash does not run"

mkdir -p "$bindir"
ln -sfn "$venv/bin/piflash" "$link"
"$py" - "$marker" "$profile" "$venv" "$system" "$wheelhouse" "$with_sim" "$with_ledger" "$with_metrics" "$with_web" "$with_pins" <<'EOF'
import datetime, json, sys
path, profile, venv, system, wheelhouse, with_sim, with_ledger, with_metrics, with_web, with_pins = sys.argv[1:]
record = {"profile": profile, "venv": venv, "system": system == "1", "sim": with_sim == "1",
          "ledger": with_ledger == "1", "metrics": with_metrics == "1", "web": with_web == "1",
          "pins": with_pins == "1",
          "installed_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
          "wheelhouse": wheelhouse or None}
with open(path, "w") as f:
    json.dump(record, f, indent=2)
    f.write("\n")
EOF

pyocd_version=$("$py" -c 'import importlib.metadata as m; print(m.version("pyocd"))')
extras=$( ((with_sim)) && printf ' + simulated board'; ((with_ledger)) && printf ' + ledger'; ((with_metrics)) && printf ' + metrics'; ((with_web)) && printf ' + web'; ((with_pins)) && printf ' + pins'; true)
say "done: $version, pyOCD $pyocd_version, profile $profile$extras, in $venv"
say "command: $link"
# sudo's secure_path has no ~/.local/bin: give it the full path (docs/permissions.md).
say "USB probes without root: sudo $(printf '%q' "$link") setup permissions   (then log out and back in)"
if [[ ":$PATH:" != *":$bindir:"* ]]; then
    say "warning: $bindir is not on your PATH yet; log out and back in (~/.profile adds it"
    say "  once it exists), or run: export PATH=\"$bindir:\$PATH\""
fi
