#!/usr/bin/env bash
# Proof on ARM (issue 3): in a Debian bookworm armhf root and an arm64 root (qemu-user-static),
# install piflash exactly as docs/install.md tells a Pi user (as user "pi" with passwordless
# sudo: clone, then `bash scripts/install.sh`) under a 400 MiB cgroup memory cap, then flash a
# 256 KiB image with `piflash flash` inside the root into a simulated nRF52840 served from the
# host over pyOCD's remote protocol on 127.0.0.1, and check the flash from the host.
#
#   scripts/test-arm.sh [--arch armhf] [--arch arm64] [--limit-mib 400] [--keep] [--worktree]
#
# Checks: install and flash succeed under the cap; capstone was never built nor installed (no
# compiler in the root, no capstone in pip's log, `import capstone` fails); a second install
# run upgrades in place and adds the simulated board (--with-sim: Debian's python3-unicorn, as
# PyPI has no armv7l wheel), whose `piflash sim create` then works; --uninstall removes the
# venv and the link; the board's flash holds the image. Reports wall time, cgroup peak and largest process peak RSS of install and flash,
# and qemu-user's share of the flash's memory (benchmarks/qemu_share.py; the same flash
# natively on the host). Prints a table, writes benchmarks/results/test-arm-<time>.json.
# The root gets the repository as a clone holds it (git archive HEAD); --worktree copies the
# tracked files with their uncommitted changes instead, for developing.
# Roots, apt's .debs and pip's cache persist under ${PIFLASH_CACHE_DIR:-~/.cache/piflash};
# each run starts from a clean overlay of the cached root. Needs root and cgroup v1. `--arch
# amd64` runs the same steps natively (root bookworm-amd64-install), to develop this script.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${PIFLASH_CACHE_DIR:-$HOME/.cache/piflash}
archs=() limit=400 keep=0 worktree=0
while (($#)); do
    case $1 in
        --arch) archs+=("$2"); shift 2 ;;
        --limit-mib) limit=$2; shift 2 ;;
        --keep) keep=1; shift ;;
        --worktree) worktree=1; shift ;;
        -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
        *) echo "test-arm: unknown argument $1" >&2; exit 2 ;;
    esac
done
((${#archs[@]})) || archs=(armhf arm64)
[[ $(id -u) -eq 0 ]] || { echo "test-arm: needs root (debootstrap, chroot, cgroups)" >&2; exit 1; }
[[ -d /sys/fs/cgroup/memory ]] || { echo "test-arm: needs the cgroup v1 memory controller" >&2; exit 1; }
source "$repo/scripts/lib-root.sh"

bash "$repo/scripts/dev-setup.sh" sim >&2     # the host side: piflash sim serve
hostpy=${PIFLASH_VENV:-$repo/.venv}/bin/python
stamp=$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$repo/benchmarks/results"
work=$(mktemp -d /var/tmp/piflash-test-arm.XXXXXX)
server_pid=""
cleanup() {
    set +e   # clean up everything, whatever fails
    [[ -n $server_pid ]] && kill -TERM "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
    root_down
    if grep -qF " $work/" /proc/self/mounts; then
        echo "test-arm: mounts left under $work; not removing it" >&2
    elif ((keep)); then
        echo "test-arm: kept $work" >&2
    else
        rm -rf "$work"
    fi
}
trap cleanup EXIT
fail() { echo "test-arm: FAIL: $*" >&2; exit 1; }
log() { echo "test-arm: $*" >&2; }
capped() { # capped JSON_OUT CMD... -> the command under the cap, measured
    local out=$1; shift
    python3 "$repo/scripts/capped-run.py" --limit-mib "$limit" --json "$out" -- "$@"
}
jget() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }

# The test image: 256 KiB of seeded random bytes, flashed at 0 on an nRF52840 (1 MiB flash).
python3 -c 'import random, sys; random.seed(3); open(sys.argv[1], "wb").write(random.randbytes(262144))' \
    "$work/image.bin"
export PIFLASH_SIM_DIR=$work/sim
serve() { # serve BOARD -> the host serves a fresh simulated board; sets server_pid and port
    "$hostpy" -m piflash sim serve --board "$1" --target nrf52840 --port 0 > "$work/serve-$1.out" 2>&1 &
    server_pid=$!
    local i
    for ((i = 0; i < 100; i++)); do
        port=$(grep -oE '127\.0\.0\.1:[0-9]+' "$work/serve-$1.out" | head -n 1 | cut -d: -f2) || true
        [[ -n $port ]] && return 0
        sleep 0.1
    done
    cat "$work/serve-$1.out" >&2
    fail "piflash sim serve did not start"
}
stop_server() { kill -TERM "$server_pid"; wait "$server_pid" || true; server_pid=""; }
check_flash() { # check_flash BOARD -> the board's first 256 KiB equal the image
    "$hostpy" -m piflash sim dump "$1" --out "$work/dump-$1.bin" >&2
    cmp -n 262144 "$work/image.bin" "$work/dump-$1.bin" || fail "$1: flash does not hold the image"
}

# The reference for qemu's share: the same flash natively on the host.
serve native
capped "$work/native-flash.json" "$(dirname "$hostpy")/piflash" flash "$work/image.bin" -a 0 \
    -t nrf52840 -u "remote:127.0.0.1:$port" -q || fail "native flash"
stop_server
check_flash native

rows=()
for arch in "${archs[@]}"; do
    name=bookworm-$arch
    [[ $arch == "$(dpkg --print-architecture)" ]] && name=bookworm-$arch-install
    base=$cache/roots/$name run=$work/$arch
    t0=$(date +%s)
    bash "$repo/scripts/make-root.sh" --arch "$arch" \
        --include python3,python3-venv,python3-pip,libusb-1.0-0,ca-certificates,sudo "$base" >&2
    root_s=$(($(date +%s) - t0))
    root_up "$base" "$run" "$arch"
    root_repo
    cp "$work/image.bin" "$ROOT/home/pi/image.bin"
    if chroot "$ROOT" sh -c 'command -v gcc || command -v cc' > /dev/null; then
        fail "$arch: the root has a compiler; it must not (capstone could build)"
    fi

    log "$arch: install, as docs/install.md says: cd piflash && bash scripts/install.sh"
    capped "$run/install.json" chroot "$ROOT" su - pi -c 'cd ~/piflash && bash scripts/install.sh' \
        > "$run/install.log" 2>&1 || true
    [[ $(jget "$run/install.json" rc) == 0 ]] || { tail -n 30 "$run/install.log" >&2; fail "$arch: install.sh failed"; }
    venv=/home/pi/.local/share/piflash/venv
    [[ -L $ROOT/home/pi/.local/bin/piflash ]] || fail "$arch: no ~/.local/bin/piflash link"
    python3 - "$ROOT$venv/piflash-install.json" <<'EOF' || fail "$arch: bad install marker"
import json, sys
m = json.load(open(sys.argv[1]))
assert m["profile"] == "minimal" and m["system"] is False and m["wheelhouse"] is None, m
assert m["venv"] == "/home/pi/.local/share/piflash/venv", m
EOF
    if grep -qi capstone "$ROOT$venv/piflash-pip.log"; then fail "$arch: pip's log mentions capstone"; fi
    built=$(grep -oE 'Building wheel for [^ ]+' "$ROOT$venv/piflash-pip.log" | sort -u | paste -sd, || true)
    [[ -z $built || $built == "Building wheel for piflash" ]] || fail "$arch: pip built: $built"
    if as_pi "$venv/bin/python -c 'import capstone'" 2> /dev/null; then fail "$arch: capstone importable"; fi
    found=$(find "$ROOT/home/pi" "$ROOT/usr/lib/python3" -iname '*capstone*' 2> /dev/null | head -n 3)
    [[ -z $found ]] || fail "$arch: capstone files present: $found"

    log "$arch: piflash flash of 256 KiB into a simulated nRF52840 served from the host"
    serve "$arch"
    capped "$run/flash.json" chroot "$ROOT" su - pi -c \
        "piflash flash ~/image.bin -a 0 -u remote:127.0.0.1:$port -t nrf52840 -q" \
        > "$run/flash.out" 2>&1 || { cat "$run/flash.out" >&2; fail "$arch: piflash flash failed"; }
    stop_server
    check_flash "$arch"
    # The same flash once more, into a fresh board, splitting its memory into guest and qemu.
    serve "$arch-share"
    as_pi "$venv/bin/python ~/piflash/benchmarks/qemu_share.py ~/share.json flash ~/image.bin -a 0 \
        -u remote:127.0.0.1:$port -t nrf52840 -q" > "$run/share.out" 2>&1 ||
        { cat "$run/share.out" >&2; fail "$arch: flash under benchmarks/qemu_share.py failed"; }
    stop_server
    check_flash "$arch-share"
    cp "$ROOT/home/pi/share.json" "$run/share.json"

    log "$arch: install again with --with-sim (upgrade in place, + the simulated board), then --uninstall"
    capped "$run/reinstall.json" chroot "$ROOT" su - pi -c 'cd ~/piflash && bash scripts/install.sh --with-sim' \
        > "$run/reinstall.log" 2>&1 || { cat "$run/reinstall.log" >&2; fail "$arch: second install failed"; }
    python3 -c 'import json, sys; assert json.load(open(sys.argv[1]))["sim"] is True' \
        "$ROOT$venv/piflash-install.json" || fail "$arch: the install marker does not record --with-sim"
    as_pi 'PIFLASH_SIM_DIR=~/sim piflash sim create smoke --target nrf51' >> "$run/reinstall.log" 2>&1 ||
        { tail -n 5 "$run/reinstall.log" >&2; fail "$arch: piflash sim create after --with-sim"; }
    as_pi 'cd ~/piflash && bash scripts/install.sh --uninstall' >> "$run/reinstall.log" 2>&1 ||
        fail "$arch: --uninstall failed"
    [[ ! -e $ROOT$venv && ! -e $ROOT/home/pi/.local/bin/piflash ]] || fail "$arch: --uninstall left files"
    root_down
    rows+=("$arch:$root_s")
done

python3 - "$repo/benchmarks/results/test-arm-$stamp.json" "$work" "$limit" "${rows[@]}" <<'EOF'
import json, os, platform, sys
out, work, limit, rows = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
load = lambda *p: json.load(open(os.path.join(work, *p)))
report = {"machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Linux {platform.release()}",
          "limit_mib": limit, "native_flash": load("native-flash.json"), "roots": []}
for row in rows:
    arch, root_s = row.split(":")
    report["roots"].append({"arch": arch, "root_build_s": int(root_s), "capstone_built": False,
                            **{k: load(arch, f"{k}.json") for k in
                               ("install", "reinstall", "flash", "share")}})
with open(out, "w") as f:
    json.dump(report, f, indent=2)
print(f"\nARM install proof under a {limit} MiB cgroup cap (MiB; cgroup peak counts page cache;"
      "\nmax RSS = the largest single process, qemu-user included)")
print(f"{'root':7} {'step':10} {'wall s':>7} {'cg peak':>8} {'cg anon':>8} {'max RSS':>8}  result")
def line(root, step, r):
    ok = "ok" if r["rc"] == 0 else f"exit {r['rc']}"
    print(f"{root:7} {step:10} {r['wall_s']:7.1f} {r['cgroup_peak_mib']:8.1f} "
          f"{r['cgroup_peak_rss_mib']:8.1f} {r['max_rss_mib']:8.1f}  {ok}")
for r in report["roots"]:
    for step in ("install", "reinstall", "flash"):
        line(r["arch"], step, r[step])
line("native", "flash", report["native_flash"])
for r in report["roots"]:
    s = r["share"]
    split = (f"guest {s['guest_mib']} + qemu {s['qemu_mib']}" if s["guest_mib"] is not None
             else f"qemu at least {s['qemu_known_mib']}")
    print(f"{r['arch']}: flash peak RSS {s['vm_hwm_mib']} MiB, at exit {s['rss_mib']} = {split}; "
          f"root cached/built in {r['root_build_s']} s; capstone built: no")
print(f"written: {out}")
EOF
