"""scripts/install.sh's refusals: usage errors, root without --system, the pre-flight memory
check under a real cgroup cap, and --uninstall's care with directories it did not make.

The full install runs in scripts/test-arm.sh (armhf and arm64 roots, network, minutes); these
are the paths that stop before downloading anything, so they run here in milliseconds. Run as
root (CI), the script is run as the unprivileged user nobody with a throw-away HOME.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from support import unprivileged

REPO = Path(__file__).resolve().parents[2]
INSTALL = REPO / "scripts" / "install.sh"
CAPPED = REPO / "scripts" / "capped-run.py"
NOBODY = unprivileged.NOBODY
ROOT = os.geteuid() == 0


def as_user(cmd: list[str]) -> list[str]:
    """cmd, run as nobody when we are root (install.sh refuses a root user install)."""
    if not ROOT:
        return cmd
    return ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--", *cmd]


@pytest.fixture
def home():
    """A HOME the user running install.sh owns, outside pytest's root-only tmp dirs."""
    d = Path(tempfile.mkdtemp(prefix="piflash-install-test-", dir="/var/tmp"))
    if ROOT:
        os.chown(d, NOBODY, NOBODY)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def install_script() -> Path:
    """install.sh as the user running it can read it: a world-readable copy of the checkout when
    that user is nobody (CI clones into a private folder)."""
    return unprivileged.runtime().repo / "scripts" / "install.sh" if ROOT else INSTALL


def run(args, home: Path, limit_mib: int | None = None) -> subprocess.CompletedProcess:
    cmd = as_user(["bash", str(install_script()), *args])
    if limit_mib is not None:
        cmd = [sys.executable, str(CAPPED), "--limit-mib", str(limit_mib), "--", *cmd]
    env = {"HOME": str(home), "PATH": os.environ["PATH"], "LANG": "C.UTF-8"}
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60)


def test_help_is_the_header():
    proc = subprocess.run(["bash", str(INSTALL), "--help"], capture_output=True, text=True)
    assert proc.returncode == 0
    assert "--wheelhouse DIR" in proc.stdout and "Exit status" in proc.stdout


@pytest.mark.parametrize("args, message", [
    (["--profile", "huge"], "unknown profile 'huge'"),
    (["--bogus"], "unknown argument '--bogus'"),
    (["--wheelhouse", "/nonexistent/wheels"], "is not a directory"),
    (["--profile"], "--profile needs a value"),
])
def test_usage_errors_exit_2(home, args, message):
    proc = run(args, home)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr


@pytest.mark.skipif(not ROOT, reason="needs root")
def test_root_without_system_is_refused_with_the_two_ways_out(tmp_path):
    proc = subprocess.run(["bash", str(INSTALL)], capture_output=True, text=True,
                          env={"HOME": str(tmp_path), "PATH": os.environ["PATH"]})
    assert proc.returncode == 3, proc.stderr
    assert "bash scripts/install.sh" in proc.stderr and "--system" in proc.stderr
    assert not (tmp_path / ".local").exists()


@pytest.mark.skipif(ROOT, reason="needs a non-root user")
def test_system_install_needs_root(home):
    proc = run(["--system"], home)
    assert proc.returncode == 3
    assert "sudo bash scripts/install.sh --system" in proc.stderr


@pytest.mark.skipif(not (ROOT and Path("/sys/fs/cgroup/memory").is_dir()),
                    reason="needs root and the cgroup v1 memory controller")
def test_preflight_refuses_under_a_small_memory_cap(home):
    """Under a 120 MiB cgroup cap (the kind a Zero 2W's free memory looks like), it stops
    before apt or pip with the numbers and the swap advice, and creates nothing."""
    proc = run([], home, limit_mib=120)
    assert proc.returncode == 4, proc.stderr
    assert "memory cgroup limit 120 MiB" in proc.stderr
    assert "installing needs about 200 MiB" in proc.stderr
    assert "CONF_SWAPSIZE" in proc.stderr and "/etc/dphys-swapfile" in proc.stderr
    assert not (home / ".local").exists()


def test_uninstall_leaves_a_directory_it_did_not_install(home):
    venv = home / ".local" / "share" / "piflash" / "venv"
    venv.mkdir(parents=True)
    (venv / "precious.txt").write_text("not ours")
    if ROOT:
        subprocess.run(["chown", "-R", f"{NOBODY}:{NOBODY}", str(home)], check=True)
    proc = run(["--uninstall"], home)
    assert proc.returncode == 1
    assert "has no piflash-install.json" in proc.stderr
    assert (venv / "precious.txt").exists()


def test_with_ledger_and_with_metrics_are_options(home):
    """Issue 39: the extras a station config may need have their install.sh options."""
    proc = run(["--with-ledger", "--with-metrics", "--with-web", "--uninstall"], home)
    assert proc.returncode == 0 and "nothing installed" in proc.stderr, proc.stderr
    shown = run(["--help"], home).stdout
    assert "--with-ledger" in shown and "--with-web" in shown and "set -euo" not in shown


def test_uninstall_removes_venv_link_and_marker(home):
    venv = home / ".local" / "share" / "piflash" / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "piflash").write_text("#!/bin/sh\n")
    (venv / "piflash-install.json").write_text(json.dumps({
        "profile": "minimal", "venv": str(venv), "system": False,
        "installed_at": "2026-11-21T00:00:00+00:00", "wheelhouse": None}))
    link = home / ".local" / "bin" / "piflash"
    link.parent.mkdir(parents=True)
    link.symlink_to(venv / "bin" / "piflash")
    other = home / ".local" / "bin" / "other-tool"
    other.write_text("keep")
    if ROOT:
        subprocess.run(["chown", "-R", "-h", f"{NOBODY}:{NOBODY}", str(home)], check=True)
    proc = run(["--uninstall"], home)
    assert proc.returncode == 0, proc.stderr
    assert not venv.exists() and not link.is_symlink()
    assert not venv.parent.exists()  # ~/.local/share/piflash, empty now
    assert other.exists()


def fake_kernel(directory: Path, machine: str) -> Path:
    """A bin directory whose ``uname`` answers ``-m`` with ``machine`` (a 64-bit kernel under a
    32-bit system, or the reverse), everything else as the real uname."""
    directory.mkdir(parents=True, exist_ok=True)
    stub = directory / "uname"
    stub.write_text(f'#!/bin/sh\n[ "$1" = -m ] && {{ echo {machine}; exit 0; }}\nexec /bin/uname "$@"\n')
    stub.chmod(0o755)
    os.chmod(directory, 0o755)
    return directory


def userland() -> str:
    """This system's architecture in uname -m's names, from dpkg (the scripts' own answer)."""
    proc = subprocess.run(["bash", "-c", f"source {REPO / 'scripts/lib-arch.sh'}; userland_arch"],
                          capture_output=True, text=True, check=True)
    return proc.stdout.strip()


def test_userland_arch_is_dpkgs_not_the_kernels(tmp_path):
    if not shutil.which("dpkg"):
        pytest.skip("needs dpkg (Debian, Raspberry Pi OS)")
    dpkg = subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True).stdout.strip()
    names = {"armhf": "armv7l", "arm64": "aarch64", "amd64": "x86_64", "i386": "i686"}
    other = "aarch64" if names.get(dpkg) != "aarch64" else "armv7l"
    env = dict(os.environ, PATH=f"{fake_kernel(tmp_path / 'bin', other)}:{os.environ['PATH']}")
    proc = subprocess.run(["bash", "-c", f"uname -m; source {REPO / 'scripts/lib-arch.sh'}; userland_arch"],
                          capture_output=True, text=True, env=env, check=True)
    assert proc.stdout.split() == [other, names.get(dpkg, dpkg)]


@pytest.mark.parametrize("labelled", ["userland", "kernel"])
def test_wheelhouse_architecture_is_the_systems(home, labelled):
    """On a 64-bit kernel under a 32-bit system (or the reverse) a wheelhouse is matched against
    the system's architecture: one labelled with it is taken, one labelled with the kernel's is
    refused, naming both."""
    if not shutil.which("dpkg"):
        pytest.skip("needs dpkg (Debian, Raspberry Pi OS)")
    system = userland()
    kernel = "aarch64" if system != "aarch64" else "armv7l"
    wheels = home / "wheels"
    wheels.mkdir()
    (wheels / "piflash-wheelhouse.txt").write_text(
        f"machine={system if labelled == 'userland' else kernel}\nprofile=minimal\n")
    if ROOT:
        subprocess.run(["chown", "-R", f"{NOBODY}:{NOBODY}", str(wheels)], check=True)
    bindir = fake_kernel(home / "bin", kernel)
    cmd = as_user(["bash", str(install_script()), "--wheelhouse", str(wheels), "--uninstall"])
    env = {"HOME": str(home), "PATH": f"{bindir}:{os.environ['PATH']}", "LANG": "C.UTF-8"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60)
    if labelled == "userland":
        assert proc.returncode == 0 and "nothing installed" in proc.stderr, proc.stderr
    else:
        assert proc.returncode == 2, proc.stderr
        assert f"the wheelhouse holds {kernel} wheels, this system is {system}" in proc.stderr


def debian_packages(profiles=("all", "sim")) -> list[str]:
    """The Debian packages install.sh wants for these profiles of scripts/install-deps.txt."""
    pkgs = {"python3-venv"}
    for line in (REPO / "scripts" / "install-deps.txt").read_text().splitlines():
        fields = line.split("#", 1)[0].split()
        if len(fields) == 5 and fields[2].startswith("debian:") and fields[3] in profiles:
            pkgs.add(fields[2].split(":", 1)[1])
    return sorted(pkgs)


def install_debian_packages(profiles=("all", "sim"), extra=()) -> None:
    """As root, apt-get the Debian packages install.sh wants for ``profiles`` (and ``extra``) that
    are missing: the install itself runs as nobody and can only name them. Skips the test when
    apt-get fails (no network, no index)."""
    missing = [p for p in [*debian_packages(profiles), *extra]
               if subprocess.run(["dpkg-query", "-W", "-f=${Status}", p], capture_output=True,
                                 text=True).stdout.find("ok installed") < 0]
    if missing:
        apt = subprocess.run(["apt-get", "-o", "DPkg::Lock::Timeout=600", "install", "-y", "-qq",
                              "--no-install-recommends", *missing],
                             capture_output=True, text=True, timeout=600,
                             env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
        if apt.returncode != 0:
            pytest.skip(f"apt-get install {' '.join(missing)} failed: {apt.stderr.strip()[-300:]}")


@pytest.mark.slow
@pytest.mark.skipif(not ROOT, reason="needs root (apt-get for the Debian packages; the install runs as nobody)")
def test_with_sim_installs_the_simulated_board(home):
    """`install.sh --with-sim` (a real user install, pip from the configured index): the venv
    sees Debian's python3-unicorn, the marker says so, and the README's simulated-board
    commands work with the installed piflash. About 40 s."""
    install_debian_packages()
    proc = subprocess.run(as_user(["bash", str(install_script()), "--with-sim"]), capture_output=True,
                          text=True, timeout=900,
                          env={"HOME": str(home), "PATH": os.environ["PATH"], "LANG": "C.UTF-8"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "profile minimal + simulated board" in proc.stderr
    assert "USB probes without root: sudo " in proc.stderr  # the full path: sudo's PATH lacks ~/.local/bin
    venv = home / ".local" / "share" / "piflash" / "venv"
    assert json.loads((venv / "piflash-install.json").read_text())["sim"] is True
    piflash = home / ".local" / "bin" / "piflash"
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin", "PIFLASH_SIM_DIR": str(home / "sim"), "LANG": "C.UTF-8"}
    created = subprocess.run(as_user([str(piflash), "sim", "create", "bench", "--target", "nrf52840"]),
                             capture_output=True, text=True, env=env, timeout=120)
    assert created.returncode == 0 and "created sim:bench" in created.stdout, created.stderr
    where = subprocess.run(as_user([str(venv / "bin" / "python"), "-c", "import unicorn; print(unicorn.__file__)"]),
                           capture_output=True, text=True, env=env, timeout=60)
    assert where.stdout.startswith("/usr/lib/python3/dist-packages/"), where  # Debian's, not a wheel


@pytest.mark.slow
@pytest.mark.skipif(not ROOT, reason="needs root (apt-get for the Debian packages; the install runs as nobody)")
def test_with_ledger_and_metrics_install_the_extras(home):
    """`install.sh --with-ledger --with-metrics` (a real user install, pip from the configured
    index): Debian's libpq5 under psycopg, prometheus-client, the marker says so, and `station check`
    of a config with `ledger:` and `metrics_port:` gets past the extras (issue 39)."""
    # python3-psutil & co. (profile all) and libpq5 (install.sh --with-ledger adds it); on a fresh
    # machine nothing else may have installed them before this test runs
    install_debian_packages(("all",), extra=("libpq5",))
    proc = subprocess.run(as_user(["bash", str(install_script()), "--with-ledger", "--with-metrics"]),
                          capture_output=True, text=True, timeout=900,
                          env={"HOME": str(home), "PATH": os.environ["PATH"], "LANG": "C.UTF-8"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "profile minimal + ledger + metrics" in proc.stderr
    venv = home / ".local" / "share" / "piflash" / "venv"
    marker = json.loads((venv / "piflash-install.json").read_text())
    assert marker["ledger"] is True and marker["metrics"] is True and marker["sim"] is False
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
    probe = subprocess.run(as_user([str(venv / "bin" / "python"), "-c",
                                    "import psycopg, prometheus_client; print(psycopg.pq.__impl__)"]),
                           capture_output=True, text=True, env=env, timeout=60)
    assert probe.stdout.strip() == "python", probe  # pure Python over Debian's libpq

