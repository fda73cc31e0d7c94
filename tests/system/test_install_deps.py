"""scripts/install-deps.txt against the installed pyOCD's and piflash's own metadata.

The list is what scripts/install.sh puts on a Pi with ``pip --no-deps``: nothing resolves
dependencies there, so a pyOCD release that adds or drops a requirement must fail here, in
CI, instead of at ``import`` on a user's board.
"""

from __future__ import annotations

import importlib.metadata as md
import re
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.version import Version

REPO = Path(__file__).resolve().parents[2]
DEPS = REPO / "scripts" / "install-deps.txt"
#: The Pi's environment for evaluating markers (hidapi is only required off Linux).
LINUX = {**default_environment(), "sys_platform": "linux", "platform_system": "Linux"}


def norm(name: str) -> str:
    """PEP 503 normalised distribution name."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class Row:
    name: str
    version: str          # exact pin (pip), Debian 12's version (debian:*), "-" (a stand-in)
    source: str           # "pip" or "debian:PACKAGE"
    profile: str          # "all", "full", or an extra's: "sim", "ledger", "metrics", "web", "pins" (install.sh --with-...)
    needed_by: tuple[str, ...]


def load_rows() -> dict[str, Row]:
    rows = {}
    for number, line in enumerate(DEPS.read_text().splitlines(), 1):
        fields = line.split("#", 1)[0].split()
        if not fields:
            continue
        assert len(fields) == 5, f"install-deps.txt:{number}: 5 columns expected: {line!r}"
        name, version, source, profile, needed_by = fields
        assert norm(name) == name, f"install-deps.txt:{number}: write {norm(name)!r}"
        assert name not in rows, f"install-deps.txt:{number}: {name} listed twice"
        assert source == "pip" or re.fullmatch(r"debian:[a-z0-9][a-z0-9.+-]+", source), line
        assert profile in ("all", "full", "sim", "ledger", "metrics", "web", "pins"), line
        if source == "pip":
            Version(version)  # an exact, valid version
        elif version != "-":
            Version(version)
        rows[name] = Row(name, version, source, profile, tuple(needed_by.split(",")))
    return rows


ROWS = load_rows()


def requirements(dist: str, extra: str = "") -> dict[str, Requirement]:
    """dist's installed Requires-Dist that apply on Linux without extras (or, given ``extra``,
    only those the extra adds), by normalised name."""
    reqs = {}
    for text in md.requires(dist) or []:
        req = Requirement(text)
        applies = req.marker is None or req.marker.evaluate({**LINUX, "extra": extra})
        if applies and (not extra or not (req.marker is None or req.marker.evaluate({**LINUX, "extra": ""}))):
            reqs[norm(req.name)] = req
    return reqs


def listed_for(consumer: str) -> set[str]:
    return {r.name for r in ROWS.values() if consumer in r.needed_by}


def check_against(consumer: str, reqs: dict[str, Requirement]) -> None:
    """The rows needed by consumer are exactly its requirements, at versions it accepts."""
    added = sorted(set(reqs) - listed_for(consumer))
    dropped = sorted(listed_for(consumer) - set(reqs))
    assert not added and not dropped, (
        f"{consumer} {md.version(consumer.split('[')[0])} requires {added or 'nothing'} missing from "
        f"install-deps.txt and no longer requires {dropped or 'nothing'} listed there: "
        "update scripts/install-deps.txt (and docs/install.md if a new one needs compiling)")
    for name, req in reqs.items():
        row = ROWS[name]
        if row.version != "-":
            assert req.specifier.contains(row.version, prereleases=True), (
                f"{consumer} requires {req}; install-deps.txt gives {name} {row.version} "
                f"({row.source})")


def test_pyocd_requirements_match_the_list():
    check_against("pyocd", requirements("pyocd"))


def test_pinned_pyocd_is_what_piflash_allows():
    allowed = requirements("piflash")["pyocd"].specifier
    assert allowed.contains(ROWS["pyocd"].version), (allowed, ROWS["pyocd"].version)
    if md.version("pyocd") != ROWS["pyocd"].version:
        # A new pyOCD with the same requirements is no failure, but the Pi then runs a
        # version the tests did not: say so in the summary.
        warnings.warn(f"the tests run pyOCD {md.version('pyocd')}, install.sh pins "
                      f"{ROWS['pyocd'].version}: consider re-pinning scripts/install-deps.txt")


def test_piflash_requirements_match_the_list():
    check_against("piflash", requirements("piflash"))


def test_sim_extra_matches_the_list():
    """install.sh --with-sim installs exactly piflash's [sim] extra, from Debian (no armv7l wheel)."""
    check_against("piflash[sim]", requirements("piflash", "sim"))
    assert all(ROWS[name].profile == "sim" and ROWS[name].source.startswith("debian:")
               for name in listed_for("piflash[sim]"))


@pytest.mark.parametrize("extra", ["ledger", "metrics", "web", "pins"])
def test_ledger_and_metrics_extras_match_the_list(extra):
    """install.sh --with-ledger / --with-metrics / --with-web install exactly piflash's extra (issues 39, 44), pinned,
    from pip: pure-Python wheels (py3-none-any, so the same file on armv7l and aarch64), their own
    requirements listed too."""
    check_against(f"piflash[{extra}]", requirements("piflash", extra))
    for name in listed_for(f"piflash[{extra}]"):
        assert ROWS[name].profile == extra and ROWS[name].source == "pip", ROWS[name]
        if md.version(name) == ROWS[name].version:
            check_against(name, requirements(name))
            wheel = md.distribution(name).read_text("WHEEL") or ""
            assert "Root-Is-Purelib: true" in wheel and "Tag: py3-none-any" in wheel, (name, wheel)


def test_requirements_of_requirements_are_listed():
    """Walk the list: each pinned package installed here at its pin has its own needs listed."""
    checked = []
    for row in ROWS.values():
        if row.version == "-":
            continue
        try:
            installed = md.version(row.name)
        except md.PackageNotFoundError:
            continue
        if installed != row.version:
            continue  # (Debian's build, or another pin: its metadata is not the one here)
        check_against(row.name, requirements(row.name))
        checked.append(row.name)
    # Most of the list is installed at its pin in the test venv; the walk is not vacuous.
    assert {"pyocd", "pylink-square", "rich", "intervaltree", "prettytable"} <= set(checked)


def test_every_consumer_is_listed():
    for row in ROWS.values():
        for consumer in row.needed_by:
            assert consumer in ("piflash", "piflash[sim]", "piflash[ledger]", "piflash[metrics]", "piflash[web]", "piflash[pins]", "build") \
                or consumer in ROWS, (
                f"{row.name} is needed by {consumer}, which install-deps.txt does not list")
            if consumer in ROWS and ROWS[consumer].profile == "full":
                assert row.profile == "full" or set(row.needed_by) - {consumer}, (
                    f"{row.name} is only needed by the full profile's {consumer}")


def test_minimal_profile_leaves_out_the_heavy_ones():
    """issue 3: no capstone, no cmsis-pack-manager, no libusb-package in the minimal profile."""
    assert ROWS["capstone"].profile == "full"
    assert ROWS["cmsis-pack-manager"].profile == "full"
    assert ROWS["libusb-package"].source == "debian:libusb-1.0-0"
    # No armv7l wheel on PyPI: these must come from Debian (PyPI lists no armv7l wheel for them).
    for name in ("psutil", "pyyaml", "cffi"):
        assert ROWS[name].source.startswith("debian:"), name


def test_build_backend_pin_satisfies_pyproject():
    tomllib = pytest.importorskip("tomllib")
    build = tomllib.loads((REPO / "pyproject.toml").read_text())["build-system"]["requires"]
    reqs = {norm(Requirement(r).name): Requirement(r) for r in build}
    assert set(reqs) == listed_for("build")
    for name, req in reqs.items():
        assert req.specifier.contains(ROWS[name].version), (req, ROWS[name])


def test_python_requirement_of_the_pins_is_met_by_bookworm():
    """install.sh refuses Python < 3.11; every pin installed here must accept 3.11."""
    for row in ROWS.values():
        if row.source != "pip":
            continue
        try:
            if md.version(row.name) != row.version:
                continue
            requires_python = md.metadata(row.name).get("Requires-Python")
        except md.PackageNotFoundError:
            continue
        if requires_python:
            from packaging.specifiers import SpecifierSet

            assert SpecifierSet(requires_python).contains("3.11.2"), (row.name, requires_python)
    assert sys.version_info >= (3, 9)
