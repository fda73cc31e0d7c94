# Sourced by scripts/test-arm.sh and benchmarks/install_armhf.sh: a throw-away, Pi-like copy of
# a cached Debian root (scripts/make-root.sh), so every run starts clean.
#
#   root_up BASE RUN ARCH   # overlay of BASE at RUN/root (sets ROOT), /proc /dev /sys inside,
#                           # user "pi" with passwordless sudo (as Raspberry Pi OS's first user),
#                           # apt's .debs and pi's pip cache kept under $cache (across runs;
#                           # ROOT_PIP_CACHE=0 leaves the pip cache out)
#   root_repo               # the repository as a clone holds it, in ~pi/piflash
#   as_pi CMD               # a login shell of pi inside ROOT runs CMD
#   root_down               # unmount everything root_up mounted
#
# Needs: $repo, $cache, and $worktree (1: copy tracked files with uncommitted changes, 0: HEAD).

ROOT_MOUNTS=()

root_up() {
    local base=$1 run=$2 arch=$3 d
    ROOT=$run/root
    mkdir -p "$run"/{upper,ovl,root} "$cache/apt-archives-$arch" "$cache/pip-$arch"
    mount -t overlay overlay -o "lowerdir=$base,upperdir=$run/upper,workdir=$run/ovl" "$ROOT"
    ROOT_MOUNTS+=("$ROOT")
    for d in proc dev sys; do
        mount --rbind "/$d" "$ROOT/$d"
        ROOT_MOUNTS+=("$ROOT/$d")
    done
    mount --bind "$cache/apt-archives-$arch" "$ROOT/var/cache/apt/archives"
    ROOT_MOUNTS+=("$ROOT/var/cache/apt/archives")
    chroot "$ROOT" useradd -m -s /bin/bash -G sudo pi
    printf '127.0.1.1\t%s\n' "$(uname -n)" >> "$ROOT/etc/hosts"   # as Raspberry Pi OS has it
    echo 'pi ALL=(ALL) NOPASSWD: ALL' > "$ROOT/etc/sudoers.d/010_pi-nopasswd"
    chmod 440 "$ROOT/etc/sudoers.d/010_pi-nopasswd"
    if ((${ROOT_PIP_CACHE:-1})); then   # ROOT_PIP_CACHE=0: pi's pip starts with an empty cache
        mkdir -p "$ROOT/home/pi/.cache/pip"
        mount --bind "$cache/pip-$arch" "$ROOT/home/pi/.cache/pip"
        ROOT_MOUNTS+=("$ROOT/home/pi/.cache/pip")
    fi
    chroot "$ROOT" chown -R pi:pi /home/pi
}

root_repo() {
    mkdir -p "$ROOT/home/pi/piflash"
    if ((worktree)); then
        git -C "$repo" ls-files -z | tar -C "$repo" --null --ignore-failed-read -T - -cf - |
            tar -x -C "$ROOT/home/pi/piflash"
    else
        git -C "$repo" archive HEAD | tar -x -C "$ROOT/home/pi/piflash"   # what a clone holds
    fi
    chroot "$ROOT" chown -R pi:pi /home/pi/piflash
}

as_pi() { chroot "$ROOT" su - pi -c "$1"; }

root_down() {
    local i
    for ((i = ${#ROOT_MOUNTS[@]} - 1; i >= 0; i--)); do umount -l "${ROOT_MOUNTS[i]}" || true; done
    ROOT_MOUNTS=()
}
