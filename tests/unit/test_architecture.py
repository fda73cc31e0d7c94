"""The house plan, docs/architecture.md's table "Packages and the imports allowed", checked on
the code's own imports.

Every ``import``/``from ... import`` in ``piflash/`` counts: at module level, inside a function (a
lazy import is still a dependency) and under ``if TYPE_CHECKING:`` (a type-only import still ties
the two modules together). Read with ``ast``, so nothing is imported to check it.

The rules: the table is read from the document (one source of truth); every module belongs to a
package of the table; no import circle between modules; a package imports only the packages its
row allows, and of the watched third-party packages only those its row names; the table itself
is ordered bottom first (a package may import only packages listed before it); the simulator's
own layers import only the layers below them; every package says in its docstring what it owns
and what it may import.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Dict, List, Set, Tuple

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "piflash"
DOC = REPO / "docs" / "architecture.md"

#: Third-party packages whose use the table governs (the standard library is always allowed).
WATCHED = ("pyocd", "usb", "click", "rich", "unicorn", "psycopg", "prometheus_client", "gpiozero", "yaml",
           "elftools", "bincopy", "intelhex", "cryptography", "labgrid", "attr", "pytest")

#: The packages at the top beside cli that only users import (labgrid's ``imports:``, pytest's
#: plugin entry point): no module of piflash outside them may import them.
OUTSIDE_ONLY = ("labgrid", "testing")

#: The simulator's layers, bottom first (docs/architecture.md, "The simulated board").
SIM_LAYERS = (
    ("sim.specs", ("piflash.sim.specs",)),
    ("sim.faults", ("piflash.sim.faults",)),
    ("sim.store", ("piflash.sim.store",)),
    ("sim", ("piflash.sim",)),
    ("sim.memory", ("piflash.sim.memory",)),
    ("sim.cpu", ("piflash.sim.cpu",)),
    ("sim.debug", ("piflash.sim.debug",)),
    ("sim.chips", ("piflash.sim.chips",)),
    ("sim.board", ("piflash.sim.board",)),
    ("sim.probes", ("piflash.sim.probes",)),
)


def read_plan(text: str) -> List[Tuple[str, Set[str], Set[str], Set[str]]]:
    """The table's rows, bottom first: (package, its shared modules' names if it is ``shared``,
    the piflash packages it may import, the third-party packages it may import)."""
    section = text.split("## Packages and the imports allowed", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        if not line.startswith("| `"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        assert len(cells) == 4, f"a row of the plan has {len(cells)} cells, not 4: {line[:80]}"
        name = cells[0].strip("`")
        modules = set(re.findall(r"`(\w+)\.py`", cells[1])) if name == "shared" else set()
        rows.append((name, modules, set(re.findall(r"`(\w+)`", cells[2])), set(re.findall(r"`(\w+)`", cells[3]))))
    assert rows, "docs/architecture.md has no table under 'Packages and the imports allowed'"
    return rows


PLAN = read_plan(DOC.read_text())
SHARED = next(mods for name, mods, _, _ in PLAN if name == "shared")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path) -> Set[str]:
    """Absolute names of the modules ``path`` imports (relative imports resolved), wherever the
    import statement sits."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: Set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            found.add(mod)
            # "from piflash.host import memguard" imports the submodule piflash.host.memguard
            found.update(f"{mod}.{alias.name}" for alias in node.names)
    return found


def cycles(graph: Dict[str, Set[str]]) -> List[List[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack: Set[str] = set()
    out: List[List[str]] = []

    def strongconnect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                strongconnect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            strongconnect(v)
    return out


def test_the_reader_sees_every_kind_of_import(tmp_path):
    # The checks below are only as good as imports_of: prove it on a file with every form.
    src = tmp_path / "piflash_probe.py"
    src.write_text("import click\nfrom typing import TYPE_CHECKING\n"
                   "if TYPE_CHECKING:\n    from piflash.record.result import OperationResult\n"
                   "def f():\n    from piflash.host import memguard\n")
    found = imports_of(PACKAGE / "cli" / "options.py")
    assert "click" in found and "piflash.errors" in found
    assert "piflash.host.memguard" in found or "piflash.profiles" in found  # lazy imports inside a function
    fake = PACKAGE / "_arch_probe.py"
    fake.write_text(src.read_text())
    try:
        found = imports_of(fake)
    finally:
        fake.unlink()
    assert {"click", "piflash.record.result", "piflash.host.memguard"} <= found
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def package_of(module: str) -> str:
    """The package of the plan a module of piflash belongs to."""
    parts = module.split(".")
    if module == "piflash" or (len(parts) == 2 and parts[1] in SHARED):
        return "shared"
    if module == "piflash.__main__":
        return "cli"
    return parts[1]


def sim_layer_of(module: str) -> str:
    """The simulator's layer of one of its modules (the longest matching prefix)."""
    best, best_len = "", -1
    for layer, prefixes in SIM_LAYERS:
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best_len:
                best, best_len = layer, len(prefix)
    return best


@pytest.fixture(scope="module")
def modules() -> Dict[str, Path]:
    return {module_name(p): p for p in PACKAGE.rglob("*.py")}


@pytest.fixture(scope="module")
def graph(modules) -> Dict[str, Set[str]]:
    return {name: {m for m in imports_of(path) if m in modules and m != name} for name, path in modules.items()}


def test_the_plan_is_read_from_the_document():
    names = [name for name, *_ in PLAN]
    assert names[0] == "shared" and names[-1] == "cli" and "sim" in names
    assert len(names) == len(set(names))
    assert {"errors", "progress", "limits", "settings"} <= SHARED
    made_up = "## Packages and the imports allowed\n\n| package | owns | may import | third-party |\n|---|---|---|---|\n" \
              "| `shared` | `errors.py` | | |\n| `a` | x | `shared` | `pyocd` |\n\n## Next\n| `b` | x | y | z |\n"
    assert read_plan(made_up) == [("shared", {"errors"}, set(), set()), ("a", set(), {"shared"}, {"pyocd"})]


def test_the_plan_is_ordered_bottom_first():
    seen: Set[str] = set()
    for name, _, may, _ in PLAN:
        above = may - seen
        assert not above, f"{name} may import {sorted(above)}, listed after it: the plan would allow a circle"
        seen.add(name)


def test_every_module_is_in_a_package_of_the_plan(modules):
    names = {name for name, *_ in PLAN}
    stray = sorted(m for m in modules if package_of(m) not in names)
    assert not stray, f"modules in no package of docs/architecture.md's plan: {stray}"


def test_no_import_circle_inside_piflash(graph):
    found = cycles(graph)
    assert not found, "import circles (type-only and lazy imports included): " + "; ".join(
        " <-> ".join(c) for c in found)


def test_each_package_imports_only_what_the_plan_allows(modules, graph):
    allowed = {name: may for name, _, may, _ in PLAN}
    third = {name: ext for name, _, _, ext in PLAN}
    offenders = []
    for module, deps in graph.items():
        mine = package_of(module)
        for dep in deps:
            theirs = package_of(dep)
            if theirs != mine and theirs not in allowed[mine]:
                offenders.append(f"{module} ({mine}) -> {dep} ({theirs})")
        for name in imports_of(modules[module]):
            top = name.split(".")[0]
            if top in WATCHED and top not in third[mine]:
                offenders.append(f"{module} ({mine}) -> {name} (third-party, not in its row)")
    assert not offenders, "imports the plan does not allow:\n" + "\n".join(sorted(set(offenders)))


def test_the_simulator_layers_import_only_the_layers_below(graph):
    rank = {layer: i for i, (layer, _) in enumerate(SIM_LAYERS)}
    offenders = []
    for module, deps in graph.items():
        if package_of(module) != "sim":
            continue
        for dep in deps:
            if rank[sim_layer_of(dep)] > rank[sim_layer_of(module)]:
                offenders.append(f"{module} -> {dep}")
    assert not offenders, "the simulator's layers import upwards:\n" + "\n".join(sorted(offenders))


def test_every_package_says_what_it_owns_and_may_import(modules):
    missing = []
    for name, path in modules.items():
        if path.name != "__init__.py" or name == "piflash":
            continue
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
        if "may import" not in doc.lower() or len(doc) < 120:
            missing.append(name)
    assert not missing, f"packages whose docstring does not say what they own and may import: {missing}"


def test_nothing_in_piflash_imports_the_labgrid_and_pytest_packages(graph):
    offenders = sorted(
        f"{module} -> {dep}"
        for module, deps in graph.items()
        for dep in deps
        if package_of(dep) in OUTSIDE_ONLY and package_of(module) != package_of(dep)
    )
    assert not offenders, "piflash imports its labgrid or pytest package:\n" + "\n".join(offenders)
