# Sourced by scripts/demo.sh and scripts/test.sh: the files a run makes in the checkout (.venv,
# .sim-demo, *.egg-info, tests/firmware/build, __pycache__) belong to whoever owns the checkout.
#
#   owner_guard NAME PATH...   # not root: fail with the fix when a PATH exists but is not ours
#                              # (an earlier `sudo bash scripts/NAME`), instead of a bare
#                              # "Permission denied" halfway through
#   owner_hand_back NAME       # root (sudo, or CI) in a checkout someone else owns: give every
#                              # root-owned file in it to the checkout's owner, and say so.
#                              # Installed as an EXIT trap by owner_guard, so it runs on failure too
#
# Needs: $repo.

owner_hand_back() {
    local name=$1 uid gid
    [[ $(id -u) -eq 0 ]] || return 0
    uid=$(stat -c %u "$repo") gid=$(stat -c %g "$repo")
    [[ $uid -ne 0 ]] || return 0            # root's own checkout (CI): nothing to hand back
    local files
    files=$(find "$repo" -xdev -path "$repo/.git" -prune -o -uid 0 -print | wc -l)
    ((files)) || return 0
    find "$repo" -xdev -path "$repo/.git" -prune -o -uid 0 -print0 | xargs -0 -r chown -h "$uid:$gid"
    echo "$name: ran as root in a checkout owned by $(id -nu "$uid" 2>/dev/null || echo "uid $uid"):" \
         "gave the $files files it made (.venv, .sim-demo, builds) back to that user" >&2
}

owner_guard() {
    local name=$1 path
    shift
    if [[ $(id -u) -eq 0 ]]; then
        trap "owner_hand_back $name" EXIT
        return 0
    fi
    for path in "$@"; do
        [[ -e $path ]] || continue
        if [[ ! -w $path ]] || [[ -n $(find "$path" -xdev ! -user "$(id -u)" -print -quit 2>/dev/null) ]]; then
            echo "$name: $path has files owned by $(stat -c %U "$path") that $(id -un) cannot change" \
                 "(an earlier run as root, e.g. 'sudo bash scripts/$name'?)." >&2
            echo "$name: give them back, then run again:  sudo chown -R $(id -un): $path" >&2
            exit 1
        fi
    done
}
