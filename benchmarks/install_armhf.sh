#!/usr/bin/env bash
# Install cost on an emulated 32-bit Pi (issue 3, "Measure and report"): in the Debian bookworm
# armhf root under the same cgroup memory cap as scripts/test-arm.sh, side by side,
#   A. piflash's `bash scripts/install.sh` (minimal profile), as user pi, as docs/install.md says;
#   B. a plain `pip install pyocd==0.46.0` in a venv, in a separate copy of the root that has a
#      compiler (build-essential, python3-dev installed first, not timed).
# Each: wall time, the cgroup's peak (page cache included), its sampled peak of anonymous
# memory, the largest single process's peak RSS (qemu-user included), success, OOM kills, and
# whether capstone was compiled. Both start with an empty pip cache (downloads are timed); the
# .debs apt fetches are cached. B gets a time limit and is reported as it ends (done, failed,
# OOM-killed, or stopped at the limit, with the last thing pip was doing). Then A's steps one
# by one (apt, venv, pip, ...), to show which process is the largest.
#
#   bash benchmarks/install_armhf.sh [--limit-mib 400] [--timeout 2400] [--keep] [--worktree]
#
# Not part of CI (B takes long). Needs root and cgroup v1. Writes
# benchmarks/results/install_armhf-<time>.json; docs/install.md has the figures.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${PIFLASH_CACHE_DIR:-$HOME/.cache/piflash}
limit=400 timeout=2400 keep=0 worktree=0 arch=armhf
while (($#)); do
    case $1 in
        --limit-mib) limit=$2; shift 2 ;;
        --timeout) timeout=$2; shift 2 ;;
        --keep) keep=1; shift ;;
        --worktree) worktree=1; shift ;;
        -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
        *) echo "install_armhf: unknown argument $1" >&2; exit 2 ;;
    esac
done
[[ $(id -u) -eq 0 ]] || { echo "install_armhf: needs root" >&2; exit 1; }
source "$repo/scripts/lib-root.sh"
export ROOT_PIP_CACHE=0
stamp=$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$repo/benchmarks/results"
work=$(mktemp -d /var/tmp/piflash-bench-install.XXXXXX)
cleanup() {
    set +e
    root_down
    if grep -qF " $work/" /proc/self/mounts; then echo "install_armhf: mounts left under $work" >&2
    elif ((keep)); then echo "install_armhf: kept $work" >&2
    else rm -rf "$work"; fi
}
trap cleanup EXIT
log() { echo "install_armhf: $*" >&2; }
base=$cache/roots/bookworm-$arch
bash "$repo/scripts/make-root.sh" --arch "$arch" \
    --include python3,python3-venv,python3-pip,libusb-1.0-0,ca-certificates,sudo "$base" >&2
capped() { local out=$1 t=$2; shift 2
           python3 "$repo/scripts/capped-run.py" --limit-mib "$limit" --timeout "$t" --json "$out" -- "$@"; }

log "A: scripts/install.sh (minimal) as pi, under a $limit MiB cap"
root_up "$base" "$work/a" "$arch"
root_repo
capped "$work/a.json" "$timeout" chroot "$ROOT" su - pi -c 'cd ~/piflash && bash scripts/install.sh' \
    > "$work/a.log" 2>&1 || true
cp "$ROOT/home/pi/.local/share/piflash/venv/piflash-pip.log" "$work/a-pip.log" 2>/dev/null || : > "$work/a-pip.log"
chroot "$ROOT" su - pi -c '~/.local/share/piflash/venv/bin/python -c "import capstone"' 2>/dev/null &&
    echo yes > "$work/a-capstone" || echo no > "$work/a-capstone"
root_down

log "A by phase: install.sh's steps one by one, to see which process is the largest"
root_up "$base" "$work/p" "$arch"
root_repo
awk '!/^#/ && NF == 5 && $3 == "pip" && $4 == "all" {print $1 "==" $2}' "$repo/scripts/install-deps.txt" \
    > "$ROOT/home/pi/requirements.txt"
phases=(
    "apt-update|sudo apt-get update -qq"
    "apt-install|sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-psutil python3-yaml"
    "venv|python3 -m venv --system-site-packages ~/v"
    "pip-pins|~/v/bin/pip install -q --no-deps --only-binary :all: -r ~/requirements.txt"
    "pip-piflash|cp -r ~/piflash /tmp/src && ~/v/bin/pip install -q --no-index --no-deps --no-build-isolation /tmp/src"
    "pip-check|~/v/bin/pip check; true"
    "smoke|~/v/bin/python -c 'import usb.backend.libusb1, pyocd.probe.jlink_probe, pyocd.probe.aggregator'"
    "idle-python|python3 -c pass"
)
for p in "${phases[@]}"; do
    capped "$work/phase-${p%%|*}.json" "$timeout" chroot "$ROOT" su - pi -c "${p#*|}" \
        > "$work/phase-${p%%|*}.log" 2>&1 || { cat "$work/phase-${p%%|*}.log" >&2; exit 1; }
done
root_down

log "B: plain pip install pyocd==0.46.0 with a compiler, under a $limit MiB cap, at most $timeout s"
root_up "$base" "$work/b" "$arch"
t0=$(date +%s)
chroot "$ROOT" env DEBIAN_FRONTEND=noninteractive sh -c \
    'apt-get update -qq && apt-get install -y -qq --no-install-recommends build-essential python3-dev' \
    > "$work/b-prep.log" 2>&1 || { tail "$work/b-prep.log" >&2; exit 1; }
log "B: compiler installed in $(($(date +%s) - t0)) s (not counted)"
capped "$work/b.json" "$timeout" chroot "$ROOT" su - pi -c \
    'python3 -m venv ~/plain && ~/plain/bin/pip install --log ~/plain-pip.log pyocd==0.46.0' \
    > "$work/b.log" 2>&1 || true
cp "$ROOT/home/pi/plain-pip.log" "$work/b-pip.log" 2>/dev/null || : > "$work/b-pip.log"
cp "$work/b-pip.log" "$repo/benchmarks/results/install_armhf-$stamp-plain-pip.log"
chroot "$ROOT" su - pi -c '~/plain/bin/python -c "import capstone"' 2>/dev/null &&
    echo yes > "$work/b-capstone" || echo no > "$work/b-capstone"
root_down

python3 - "$repo/benchmarks/results/install_armhf-$stamp.json" "$work" "$limit" "$timeout" <<'EOF'
import json, os, platform, re, sys
out, work, limit, timeout = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
def route(key, label):
    r = json.load(open(f"{work}/{key}.json"))
    pip_log = open(f"{work}/{key}-pip.log", errors="replace").read()
    console = open(f"{work}/{key}.log", errors="replace").read()
    started = sorted(set(re.findall(r"Building wheel for (\S+)", pip_log)))
    built = sorted(set(re.findall(r"Created wheel for ([^:\s]+)", pip_log)))
    failed = sorted(set(" ".join(re.findall(r"Failed to build (.+)", console)).split()))
    lines = [l for l in console.splitlines() if l.strip() and not l.startswith("capped-run:")]
    # The causes, from pip's log: compiler errors, OOM kills, the final verdict.
    errors = [l.split(None, 1)[-1].strip()[:200] for l in pip_log.splitlines()
              if re.search(r"fatal error|Killed signal|MemoryError|Could not build wheels", l)][:12]
    if r["timed_out"]:
        outcome = f"stopped at the {timeout} s limit"
    elif r["oom_kills"]:
        outcome = f"failed, {r['oom_kills']} process(es) OOM-killed"
    elif r["rc"] == 0:
        outcome = "succeeded"
    else:
        outcome = f"failed (exit {r['rc']})"
    return {"route": label, **r, "outcome": outcome, "builds_started": started,
            "wheels_built": built, "failed_to_build": failed,
            "capstone_build_started": "capstone" in started,
            "capstone_importable": open(f"{work}/{key}-capstone").read().strip() == "yes",
            "errors": errors, "last_output": (lines or [""])[-1][-200:]}
rows = [route("a", "scripts/install.sh (minimal)"), route("b", "pip install pyocd, compiler present")]
report = {"machine": f"{platform.machine()} host, {os.cpu_count()} CPUs, Linux {platform.release()}; "
                     "armhf root under qemu-user", "limit_mib": limit, "timeout_s": timeout, "routes": rows}
names = ["apt-update", "apt-install", "venv", "pip-pins", "pip-piflash", "pip-check", "smoke", "idle-python"]
report["phases"] = {n: json.load(open(f"{work}/phase-{n}.json")) for n in names}
json.dump(report, open(out, "w"), indent=2)
print(f"\narmhf root (qemu-user), {limit} MiB cgroup cap; MiB; cgroup peak counts page cache")
print(f"{'route':38} {'wall s':>7} {'cg peak':>8} {'cg anon':>8} {'max RSS':>8}  outcome")
for r in rows:
    print(f"{r['route']:38} {r['wall_s']:7.1f} {r['cgroup_peak_mib']:8.1f} {r['cgroup_peak_rss_mib']:8.1f} "
          f"{r['max_rss_mib']:8.1f}  {r['outcome']}")
    print(f"{'':38} compiling started: {', '.join(r['builds_started']) or 'nothing'}; "
          f"built: {', '.join(r['wheels_built']) or 'nothing'}; "
          f"failed: {', '.join(r['failed_to_build']) or 'nothing'}")
    for e in r["errors"][:6]:
        print(f"{'':38} | {e}")
print(f"\nscripts/install.sh's steps run one by one (same cap; max RSS includes qemu-user)")
print(f"{'step':14} {'wall s':>7} {'cg peak':>8} {'cg anon':>8} {'max RSS':>8}")
for n, r in report["phases"].items():
    print(f"{n:14} {r['wall_s']:7.1f} {r['cgroup_peak_mib']:8.1f} {r['cgroup_peak_rss_mib']:8.1f} {r['max_rss_mib']:8.1f}")
print(f"written: {out}")
EOF
