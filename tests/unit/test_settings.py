"""Every environment variable piflash reads is declared once, in piflash/settings.py, and read
through that declaration; docs/environment.md lists exactly the declared ones (checked both ways,
as tests/system/test_errors_cli.py checks docs/exit-codes.md); each typed getter reads as the code did
before the table existed."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Set

import pytest

from piflash import settings
from piflash.errors import ExitCode, GuardConfigError, ProbeSyntaxError

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "piflash"
SIM = PACKAGE / "sim"
SETTINGS_PY = PACKAGE / "settings.py"
DOC = REPO / "docs" / "environment.md"
#: ``PIFLASH_`` names in piflash/ that are not environment variables: udev properties, set and
#: matched by the rules in piflash/data/60-piflash-probes.rules (``ENV{PIFLASH_PROBE}="1"``).
UDEV_PROPERTIES = {"PIFLASH_PROBE"}
#: A ``PIFLASH_`` name on its own: not inside a longer word (``_PIFLASH_COMPLETE``) or a dotted
#: file name (``piflash.PIFLASH_TEST_DFP.1.0.0.pack``).
NAME = re.compile(r"(?<![\w.])PIFLASH_[A-Z0-9_]+(?![\w.])")
#: docs/environment.md's sections of tables, by :attr:`Setting.kind`.
SECTIONS = {settings.USER: "Settings", settings.SEAM: "Test seams", settings.SYSTEM: "The system's variables"}


def product_files() -> List[Path]:
    """The product's Python files: piflash/ without the simulator and without settings.py itself."""
    return [p for p in sorted(PACKAGE.rglob("*.py")) if SIM not in p.parents and p != SETTINGS_PY]


def section(doc: str, title: str) -> str:
    """The text of ``## title`` up to the next ``## `` heading."""
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", doc, re.M | re.S)
    assert match, f"docs/environment.md has no section '## {title}'"
    return match.group(1)


def table_rows(text: str) -> Dict[str, str]:
    """``{variable: whole row}`` of the table rows in ``text`` whose first cell is a `NAME`."""
    return {m.group(1): m.group(0) for m in re.finditer(r"^\| `([A-Z_][A-Z0-9_]*)` \|.*\|$", text, re.M)}


def doc_row(s: settings.Setting) -> str:
    """The row docs/environment.md must have for ``s``."""
    return f"| `{s.name}` | {s.type} | {s.shown_default} | {', '.join(s.readers)} | {s.doc} |"


# The declaration itself.

def test_each_variable_is_declared_once_and_whole():
    names = [s.name for s in settings.SETTINGS]
    assert len(names) == len(set(names))
    for s in settings.SETTINGS:
        assert re.fullmatch(r"[A-Z][A-Z0-9_]*", s.name), s
        assert s.kind in SECTIONS, s
        assert s.readers and set(s.readers) <= {settings.PIFLASH, settings.OPTION, settings.SIMULATOR}, s
        assert s.type and s.shown_default and s.doc, s
        assert "\n" not in s.doc and "|" not in s.doc + s.type + s.shown_default, s
        assert s.seam == (s.kind == settings.SEAM)
        assert settings.by_name(s.name) is s
        assert getattr(settings, s.name) is s  # read as settings.NAME
        assert (s.kind == settings.SYSTEM) != s.name.startswith("PIFLASH_"), s
    for seam in ("PIFLASH_SYSFS_ROOT", "PIFLASH_DEV_ROOT", "PIFLASH_SYSROOT", "PIFLASH_PROC_ROOT",
                 "PIFLASH_TEST_KILL_AT"):
        assert settings.by_name(seam).seam
    with pytest.raises(KeyError):
        settings.by_name("PIFLASH_PROBE")


def test_every_piflash_name_in_the_package_is_declared():
    """Any file under piflash/ (code, rules, data): a ``PIFLASH_`` name is a declared variable or
    a udev property."""
    found: Dict[str, Path] = {}
    for path in PACKAGE.rglob("*"):
        if path.is_file() and "__pycache__" not in path.parts:
            for name in NAME.findall(path.read_text(errors="replace")):
                found.setdefault(name, path)
    declared = {s.name for s in settings.SETTINGS}
    unknown = {n: str(p.relative_to(REPO)) for n, p in found.items() if n not in declared | UDEV_PROPERTIES}
    assert not unknown, f"declare these in piflash/settings.py: {unknown}"
    assert UDEV_PROPERTIES <= set(found), "a udev property no longer used: drop it from UDEV_PROPERTIES"
    assert not UDEV_PROPERTIES & declared


def _settings_attributes(path: Path) -> Set[str]:
    """Names ``NAME`` read as ``settings.NAME`` in ``path``."""
    return {node.attr for node in ast.walk(ast.parse(path.read_text(), str(path)))
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "settings"}


def _string_constants(path: Path) -> Set[str]:
    return {node.value for node in ast.walk(ast.parse(path.read_text(), str(path)))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)}


def test_every_declared_variable_is_read_by_whom_it_says():
    """Read by piflash: some product module reads ``settings.NAME``. Read by the simulator: its
    name is a string of its own in piflash/sim/ (the simulator cannot import piflash.settings).
    And the product reads nothing undeclared through ``settings.``."""
    product: Set[str] = set()
    for path in product_files():
        product |= _settings_attributes(path)
    simulator: Set[str] = set()
    for path in SIM.rglob("*.py"):
        simulator |= _string_constants(path)
    for s in settings.SETTINGS:
        assert (s.name in product) == (settings.PIFLASH in s.readers), s
        assert (s.name in simulator) == (settings.SIMULATOR in s.readers), s
    # (lower-case attributes: the CLI's own ``settings`` dicts, not this module)
    undeclared = {n for n in product if n.isupper()} - {s.name for s in settings.SETTINGS} - set(settings.__all__)
    assert not undeclared


def _options_with_envvar() -> Dict[str, list]:
    """``{variable: [click options whose envvar it is]}`` over every command of ``piflash``."""
    import click

    from piflash.cli import cli

    found: Dict[str, list] = {}
    todo = [cli]
    while todo:
        command = todo.pop()
        if isinstance(command, click.Group):
            todo.extend(command.commands.values())
        for param in command.params:
            envvars = [param.envvar] if isinstance(param.envvar, str) else list(param.envvar or ())
            for name in envvars:
                found.setdefault(name, []).append(param)
    return found


def test_options_read_the_declared_variables():
    """An option's ``envvar=`` is a declared variable read by :data:`settings.OPTION`, and the
    option's default is the declared one; each such variable has its option."""
    options = _options_with_envvar()
    for name, params in options.items():
        s = settings.by_name(name)
        assert settings.OPTION in s.readers, s
        for param in params:  # click 8.2's "no default" is a sentinel, older ones' None
            default = param.default if isinstance(param.default, (str, int, float, type(None))) else None
            assert default == s.default, (param, s)
    assert set(options) == {s.name for s in settings.SETTINGS if settings.OPTION in s.readers}


def test_the_product_reads_the_environment_only_in_settings():
    """Outside piflash/settings.py and the simulator, no ``os.environ`` and no ``getenv``."""
    offenders = [str(p.relative_to(REPO)) for p in product_files()
                 if re.search(r"os\.environ|getenv", p.read_text())]
    assert not offenders


def test_settings_imports_the_standard_library_only():
    """At module level the standard library only; piflash.errors and piflash.limits inside the
    functions that refuse a value. Importing it brings in no other piflash module and reads nothing."""
    tree = ast.parse(SETTINGS_PY.read_text())
    for node in tree.body:
        if isinstance(node, ast.Import):
            assert all(a.name.split(".")[0] in sys.stdlib_module_names for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.module == "__future__" or node.module.split(".")[0] in sys.stdlib_module_names, node.module
    code = "import sys, piflash.settings; print(sorted(m for m in sys.modules if m.startswith('piflash')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['piflash', 'piflash.settings']"


# docs/environment.md, both ways.

def test_environment_md_lists_every_declared_variable_as_declared():
    doc = DOC.read_text()
    for kind, title in SECTIONS.items():
        rows = table_rows(section(doc, title))
        declared = {s.name: doc_row(s) for s in settings.SETTINGS if s.kind == kind}
        missing = [declared[n] for n in declared if rows.get(n) != declared[n]]
        assert not missing, f"docs/environment.md, '{title}', should have these rows:\n" + "\n".join(missing)
        extra = sorted(set(rows) - set(declared))
        assert not extra, f"docs/environment.md, '{title}', lists undeclared (or misplaced) variables: {extra}"


def test_environment_md_explains_every_type():
    types = table_rows_of_types(section(DOC.read_text(), "Types"))
    assert {s.type for s in settings.SETTINGS} <= types


def table_rows_of_types(text: str) -> Set[str]:
    return {m.group(1) for m in re.finditer(r"^\| ([a-zA-Z][a-zA-Z ]*) \|", text, re.M)} - {"Type"}


def test_every_piflash_name_in_the_docs_is_a_setting_or_said_not_to_be():
    """docs/*.md and README.md: a ``PIFLASH_`` name is declared, or is in environment.md's
    'Not settings' (udev properties, the scripts' and the test suite's own variables)."""
    doc = DOC.read_text()
    not_settings = set(NAME.findall(section(doc, "Not settings")))
    assert UDEV_PROPERTIES <= not_settings
    declared = {s.name for s in settings.SETTINGS}
    assert not not_settings & declared
    for path in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        unknown = set(NAME.findall(path.read_text())) - declared - not_settings
        assert not unknown, f"{path.relative_to(REPO)}: {sorted(unknown)}"


def test_the_readme_links_environment_md():
    assert "docs/environment.md" in (REPO / "README.md").read_text()


# The typed getters read as the code did before.

@pytest.fixture
def env(monkeypatch):
    """Set (str) or unset (None) variables for one test."""
    def put(name, value):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    return put


@pytest.mark.parametrize("raw, expected", [(None, True), ("1", True), ("yes", True), ("", True),
                                           ("0", False), (" Off ", False), ("FALSE", False), ("no", False)])
def test_flag(env, raw, expected):
    from piflash.probe.batched_dap import batching_enabled

    env("PIFLASH_DAP_BATCH", raw)
    assert settings.PIFLASH_DAP_BATCH.value() is expected
    assert batching_enabled() is expected


def test_seconds(env):
    from piflash.limits import PROBE_TIMEOUT_MAX_S
    from piflash.probe.remote import REPLY_TIMEOUT, reply_timeout

    env("PIFLASH_PROBE_TIMEOUT", None)
    assert settings.PIFLASH_PROBE_TIMEOUT.value() == REPLY_TIMEOUT == 10.0 == reply_timeout()
    env("PIFLASH_PROBE_TIMEOUT", "")
    assert reply_timeout() == 10.0
    env("PIFLASH_PROBE_TIMEOUT", " 2.5 ")
    assert reply_timeout() == 2.5
    for bad in ("abc", "inf", "0", "-1", "3601"):
        env("PIFLASH_PROBE_TIMEOUT", bad)
        with pytest.raises(ProbeSyntaxError) as info:
            reply_timeout()
        assert info.value.exit_code == ExitCode.USAGE
        assert info.value.message.startswith(f"PIFLASH_PROBE_TIMEOUT={bad!r} must be ")
        assert info.value.message.endswith(f"at most {PROBE_TIMEOUT_MAX_S:g} seconds)" if bad == "abc"
                                           else f"at most {PROBE_TIMEOUT_MAX_S:g} seconds")
    assert f"at most {PROBE_TIMEOUT_MAX_S:g})" in settings.PIFLASH_PROBE_TIMEOUT.doc


def test_choice(env):
    from piflash.host.memguard import GUARD_MODES, guard_mode

    assert GUARD_MODES == ("refuse", "warn", "off")
    env("PIFLASH_MEMORY_GUARD", None)
    assert settings.PIFLASH_MEMORY_GUARD.value() is None
    assert guard_mode() == "refuse" and guard_mode("warn") == "warn"
    env("PIFLASH_MEMORY_GUARD", " WARN ")
    assert guard_mode("off") == "warn"
    env("PIFLASH_MEMORY_GUARD", "  ")
    assert guard_mode("off") == "off"
    env("PIFLASH_MEMORY_GUARD", "Maybe")
    with pytest.raises(GuardConfigError) as info:
        guard_mode()
    assert info.value.exit_code == ExitCode.USAGE
    assert info.value.message == "PIFLASH_MEMORY_GUARD='Maybe' is not one of refuse, warn, off"
    assert info.value.hint == "unset it, or set PIFLASH_MEMORY_GUARD=warn to never refuse"


def test_path_or_off(env, tmp_path):
    from piflash.firmware.cache import cache_dir
    from piflash.record.history import default_path

    env("STATE_DIRECTORY", None)
    env("XDG_STATE_HOME", str(tmp_path / "state"))
    for off in ("off", "OFF", "0", "no", "false"):
        env("PIFLASH_HISTORY", off)
        assert settings.PIFLASH_HISTORY.value() is settings.OFF and default_path() is None
    env("PIFLASH_HISTORY", "")
    assert default_path() == tmp_path / "state" / "piflash" / "history.sqlite3"
    env("PIFLASH_HISTORY", str(tmp_path / "h.sqlite3"))
    assert default_path() == tmp_path / "h.sqlite3"
    env("PIFLASH_HISTORY", None)
    env("STATE_DIRECTORY", f"{tmp_path}/a:{tmp_path}/b")
    assert default_path() == tmp_path / "a" / "history.sqlite3"

    env("CACHE_DIRECTORY", None)
    env("XDG_CACHE_HOME", str(tmp_path / "cache"))
    for off in ("", " ", "off", "No", "0"):
        env("PIFLASH_CACHE", off)
        assert cache_dir() is None
    env("PIFLASH_CACHE", "false")  # not one of the cache's words: a folder of that name, as before
    assert cache_dir() == Path("false")
    env("PIFLASH_CACHE", None)
    assert cache_dir() == tmp_path / "cache" / "piflash"
    env("CACHE_DIRECTORY", f"{tmp_path}/c:{tmp_path}/d")
    assert cache_dir() == tmp_path / "c"


def test_paths_and_text(env, tmp_path):
    from piflash.host.machine import proc_root
    from piflash.probe.usbscan import roots_from_env
    from piflash.profiles import profile_dirs

    for name in ("PIFLASH_SYSFS_ROOT", "PIFLASH_DEV_ROOT", "PIFLASH_SYSROOT"):
        env(name, None)
    assert roots_from_env() == {"sysfs_root": "/sys", "dev_root": "/dev", "sysroot": "/"}
    env("PIFLASH_SYSFS_ROOT", "")  # taken as given, as os.environ.get(name, default) did
    assert roots_from_env()["sysfs_root"] == ""
    env("PIFLASH_PROC_ROOT", "")
    assert proc_root() == Path("/")
    env("PIFLASH_PROC_ROOT", str(tmp_path))
    assert proc_root() == tmp_path

    env("PIFLASH_PROFILE_PATH", f"a{':'}{tmp_path}/b{':'}")
    assert profile_dirs(tmp_path) == [tmp_path / "a", tmp_path / "b"]
    env("PIFLASH_PROFILE_PATH", "")
    env("XDG_CONFIG_HOME", "relative")  # not absolute: ignored
    assert profile_dirs(tmp_path)[1] == Path("~/.config").expanduser() / "piflash" / "profiles"

    env("PIFLASH_SETUP_SCRIPT", None)
    assert settings.PIFLASH_SETUP_SCRIPT.value() == "python3 -m piflash.probe.permissions"
    env("PIFLASH_SIM_USB", "  ")
    assert settings.PIFLASH_SIM_USB.value() is None
    env("PIFLASH_SIM_USB", " bay1@debugprobe ")
    assert settings.PIFLASH_SIM_USB.value() == "bay1@debugprobe"
    env("PIFLASH_LEDGER", "")
    assert settings.PIFLASH_LEDGER.value() is None


def test_kill_points_are_documented():
    from piflash.production.serials import KILL_POINTS

    assert f"({', '.join(KILL_POINTS)})" in settings.PIFLASH_TEST_KILL_AT.doc


def test_environment_for_the_systemd_notifier(env):
    from piflash.station.sdnotify import Notifier

    env("NOTIFY_SOCKET", "@piflash-test")
    env("WATCHDOG_USEC", "4000000")
    env("WATCHDOG_PID", None)
    assert settings.environment(settings.NOTIFY_SOCKET, settings.WATCHDOG_USEC, settings.WATCHDOG_PID) == {
        "NOTIFY_SOCKET": "@piflash-test", "WATCHDOG_USEC": "4000000"}
    notifier = Notifier()
    assert notifier.enabled and notifier.watchdog_interval == 4.0
    env("NOTIFY_SOCKET", None)
    assert not Notifier().enabled
