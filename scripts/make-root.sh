#!/usr/bin/env bash
# Builds (once) a Debian bookworm root file system for piflash's own tests:
# the permissions setup (--root), the systemd station test (systemd-nspawn) and
# the ARM install proof (armhf/arm64 under qemu-user-static).
#
#   scripts/make-root.sh [--arch amd64|armhf|arm64] [--include pkg,pkg] DIR
#
# Idempotent: a root that finished building (DIR/.piflash-root) is reused as is,
# so CI pays for each root once per machine. Needs root, debootstrap, and for a
# foreign architecture qemu-user-static (installed here when missing).
# Afterwards the root can reach the package indexes this machine uses: the host's
# CA bundle, resolv.conf, pip configuration and a localhost entry are copied in.
set -euo pipefail

arch=$(dpkg --print-architecture)
include=python3,python3-venv,python3-pip,libusb-1.0-0,ca-certificates
mirror=${PIFLASH_DEBIAN_MIRROR:-http://deb.debian.org/debian}
while (($#)); do
    case $1 in
        --arch) arch=$2; shift 2 ;;
        --include) include=$2; shift 2 ;;
        -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
        -*) echo "make-root: unknown option $1" >&2; exit 2 ;;
        *) break ;;
    esac
done
(($# == 1)) || { echo "usage: make-root.sh [--arch ARCH] [--include PKGS] DIR" >&2; exit 2; }
dir=$1
[[ $(id -u) -eq 0 ]] || { echo "make-root: needs root (debootstrap, chroot)" >&2; exit 1; }

# The test suite runs on several workers (pytest-xdist): two may ask for the same root at once.
# The first builds it, the others wait here and then reuse it.
mkdir -p "$(dirname "$dir")"
exec 9>"$dir.lock"
flock 9

need=()
command -v debootstrap >/dev/null || need+=(debootstrap)
if [[ $arch != "$(dpkg --print-architecture)" ]]; then
    command -v qemu-arm-static >/dev/null || need+=(qemu-user-static)
fi
if ((${#need[@]})); then
    export DEBIAN_FRONTEND=noninteractive
    apt-get -o DPkg::Lock::Timeout=600 update -qq >/dev/null
    apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# A foreign architecture runs through binfmt_misc + Debian's qemu-user-static,
# registered with the C flag (credentials from the binary) so that setuid programs such as
# sudo work inside the root, as they do on a Pi.
if [[ $arch != "$(dpkg --print-architecture)" ]]; then
    case $arch in armhf) qemu=arm ;; arm64) qemu=aarch64 ;; *) qemu=$arch ;; esac
    binfmt=/proc/sys/fs/binfmt_misc
    [[ -e $binfmt/register ]] || mount -t binfmt_misc binfmt_misc "$binfmt"
    if [[ -e $binfmt/qemu-$qemu ]] && ! grep -q '^flags: .*C' "$binfmt/qemu-$qemu"; then
        echo -1 > "$binfmt/qemu-$qemu"
    fi
    if [[ ! -e $binfmt/qemu-$qemu ]]; then
        line=$(grep -v '^#' "/usr/lib/binfmt.d/qemu-$qemu.conf" | head -n 1)
        flags=${line##*:}
        [[ $flags == *C* ]] || line=${line%:*}:${flags}C
        echo "$line" > "$binfmt/register"
    fi
fi

if [[ ! -f $dir/.piflash-root ]]; then
    rm -rf "$dir"
    mkdir -p "$dir"
    echo "make-root: debootstrap bookworm $arch into $dir (a few minutes, once)" >&2
    debootstrap --arch="$arch" --variant=minbase --include="$include" bookworm "$dir" "$mirror" \
        > "$dir.debootstrap.log" 2>&1 || { tail -20 "$dir.debootstrap.log" >&2; exit 1; }
    printf 'arch=%s\ninclude=%s\n' "$arch" "$include" > "$dir/.piflash-root"
fi

# Reach the same package indexes as the host (refreshed on every call: cheap).
install -D -m 644 /etc/ssl/certs/ca-certificates.crt "$dir/etc/ssl/certs/ca-certificates.crt"
[[ -f /etc/resolv.conf ]] && cp -L /etc/resolv.conf "$dir/etc/resolv.conf"
[[ -f /etc/pip.conf ]] && cp /etc/pip.conf "$dir/etc/pip.conf"
grep -qs '^127\.0\.0\.1[[:space:]].*localhost' "$dir/etc/hosts" ||
    printf '127.0.0.1\tlocalhost\n::1\tlocalhost\n' >> "$dir/etc/hosts"
echo "$dir"
