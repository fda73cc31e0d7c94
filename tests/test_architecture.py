"""The house plan (docs/architecture.md), checked on the code's own imports.

Every ``import``/``from ... import`` in ``piflash/`` counts, at module level or inside a function
(a lazy import is still a dependency), except under ``if TYPE_CHECKING:``. Read with ``ast``, so
nothing is imported to check it.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, List, Set

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "piflash"

#: The core: piflash's API, usable without the CLI (docs/architecture.md, "Rooms"): every module
#: at the top of the package but the entry point.
CORE = tuple(sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem not in ("__init__", "__main__")))
#: What no core or host module may import.
FRONT_END = ("click", "rich", "piflash.cli")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imports_of(path: Path) -> Set[str]:
    """Absolute names of the modules ``path`` imports (relative imports resolved)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: Set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for sub in child.orelse:
                    visit(sub)
                continue
            if isinstance(child, ast.Import):
                found.update(alias.name for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package.split(".")
                    base = base[:len(base) - child.level + 1]
                    mod = ".".join(base + ([child.module] if child.module else []))
                else:
                    mod = child.module or ""
                found.add(mod)
                # "from piflash.host import memguard" imports the submodule piflash.host.memguard
                found.update(f"{mod}.{alias.name}" for alias in child.names)
            visit(child)

    visit(ast.parse(path.read_text(), str(path)))
    return found


@pytest.fixture(scope="module")
def graph() -> Dict[str, Set[str]]:
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    return {name: {m for m in imports_of(path) if m in modules and m != name}
            for name, path in modules.items()}


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
    pkg = PACKAGE / "cli" / "options.py"
    found = imports_of(pkg)
    assert "click" in found and "piflash.errors" in found
    assert "piflash.host.memguard" in found          # a lazy import inside a function
    fake = cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}})
    assert fake == [["a", "b", "c"]]


def test_no_import_circle_inside_piflash(graph):
    found = cycles(graph)
    assert not found, "import circles (outside TYPE_CHECKING): " + "; ".join(
        " <-> ".join(c) for c in found)


@pytest.mark.parametrize("room", ["core", "host", "station", "sim"])
def test_no_room_below_the_cli_imports_click_rich_or_the_cli(graph, room):
    if room == "core":
        members = [f"piflash.{m}" for m in CORE]
        assert len(members) >= 12 and all(m in graph for m in members)
    else:
        members = [m for m in graph if m.startswith(f"piflash.{room}")]
    offenders = {}
    for m in members:
        path = PACKAGE.parent / (m.replace(".", "/") + ".py")
        if not path.exists():
            path = PACKAGE.parent / m.replace(".", "/") / "__init__.py"
        bad = sorted(i for i in imports_of(path) if any(i == f or i.startswith(f + ".") for f in FRONT_END))
        if room == "station" and m.endswith(".status"):
            bad = [i for i in bad if i.split(".")[0] == "piflash"]  # the live view draws with rich
        if bad:
            offenders[m] = bad
    assert not offenders, f"{room} modules import the front end: {offenders}"


def test_the_simulator_knows_nothing_of_piflash(graph):
    offenders = {m: sorted(i for i in deps if not i.startswith("piflash.sim"))
                 for m, deps in graph.items() if m.startswith("piflash.sim")}
    offenders = {m: d for m, d in offenders.items() if d}
    assert not offenders, f"piflash.sim imports the rest of piflash: {offenders}"
