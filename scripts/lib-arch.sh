# Sourced by scripts/install.sh and scripts/build-wheelhouse.sh: the architecture wheels are
# chosen for is the userland's, not the kernel's. A Pi 4/5 boots a 64-bit kernel under 32-bit
# Raspberry Pi OS: `uname -m` says aarch64 while python3 and pip are armhf and take armv7l
# wheels (the reverse happens too). So:
#
#   userland_arch   # prints armv7l, aarch64, x86_64, i686, ... (uname -m's names)
#
# from `dpkg --print-architecture` (the architecture of the installed system: armhf, arm64,
# amd64, i386), else from python3: the kernel's name corrected by the interpreter's pointer
# size (a 32-bit python3 on an aarch64 kernel is armv7l). sysconfig.get_platform() is no
# help: on Linux it repeats os.uname().machine, the kernel's answer.

userland_arch() {
    local dpkg_arch machine bits
    if dpkg_arch=$(dpkg --print-architecture 2>/dev/null) && [[ -n $dpkg_arch ]]; then
        case $dpkg_arch in
            armhf) echo armv7l ;;
            arm64) echo aarch64 ;;
            amd64) echo x86_64 ;;
            i386) echo i686 ;;
            armel) echo armv6l ;;
            *) echo "$dpkg_arch" ;;
        esac
        return 0
    fi
    machine=$(uname -m)
    bits=$(python3 -c 'import struct; print(struct.calcsize("P") * 8)' 2>/dev/null || echo 64)
    if ((bits == 32)); then
        case $machine in
            aarch64|armv8l) machine=armv7l ;;
            x86_64) machine=i686 ;;
        esac
    fi
    echo "$machine"
}
