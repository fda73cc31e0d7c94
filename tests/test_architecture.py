"""The house plan (docs/architecture.md), checked on the code's own imports.

Every ``import``/``from ... import`` in ``piflash/`` counts: at module level, inside a function (a
lazy import is still a dependency) and under ``if TYPE_CHECKING:`` (a type-only import still ties
the two modules together: the board <-> chips circle of issue 25 was one). Read with ``ast``, so
nothing is imported to check it.

The rules (issue 25): no import circle; each room imports only the rooms below it
(:data:`PRODUCT_ROOMS`, :data:`SIM_ROOMS`, bottom first); the simulator imports nothing of the
product, and of the product only ``host`` and ``cli`` import it; no room below the CLI imports
click, rich or the CLI (the station's live view may draw with rich); every package says in its
docstring what it owns and what it may import.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, List, Set

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "piflash"

#: The product's rooms, bottom first: a room may import only the rooms before it (and itself).
#: Each entry: (room, module prefixes). ``piflash`` alone is the package's own ``__init__``.
PRODUCT_ROOMS = (
    ("shared", ("piflash", "piflash.errors", "piflash.progress", "piflash.limits", "piflash.settings")),
    ("probe", ("piflash.probe",)),
    ("host", ("piflash.host",)),
    ("targets", ("piflash.targets",)),
    ("firmware", ("piflash.firmware",)),
    ("record", ("piflash.record",)),
    ("flashing", ("piflash.flashing",)),
    ("production", ("piflash.production",)),
    ("jobs", ("piflash.jobs",)),
    ("profiles", ("piflash.profiles",)),
    ("station", ("piflash.station",)),
    ("cli", ("piflash.cli", "piflash.__main__")),
)
#: The simulator's rooms, bottom first (docs/architecture.md, "The simulated board").
SIM_ROOMS = (
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
#: Product rooms that may use the simulator: the CLI drives it. The simulated USB bus is found
#: through the entry point group ``piflash.usb_backend``, not imported.
SIM_USERS = ("cli",)
#: The rooms of piflash's API: usable without the CLI, free of click and rich.
CORE = ("shared", "probe", "targets", "firmware", "record", "flashing", "production", "jobs", "profiles")
FRONT_END = ("click", "rich", "piflash.cli")


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


def room_of(module: str) -> str:
    """The room a module of piflash belongs to (the longest matching prefix)."""
    best, best_len = "", -1
    for room, prefixes in PRODUCT_ROOMS + SIM_ROOMS:
        for prefix in prefixes:
            exact_only = prefix == "piflash"
            if module == prefix or (not exact_only and module.startswith(prefix + ".")):
                if len(prefix) > best_len:
                    best, best_len = room, len(prefix)
    assert best, f"{module} is in no room of the house plan: add it to PRODUCT_ROOMS or SIM_ROOMS"
    return best


@pytest.fixture(scope="module")
def modules() -> Dict[str, Path]:
    return {module_name(p): p for p in PACKAGE.rglob("*.py")}


@pytest.fixture(scope="module")
def graph(modules) -> Dict[str, Set[str]]:
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


def test_every_module_is_in_a_room(modules):
    for name in modules:
        room_of(name)


def test_no_import_circle_inside_piflash(graph):
    found = cycles(graph)
    assert not found, "import circles (type-only and lazy imports included): " + "; ".join(
        " <-> ".join(c) for c in found)


@pytest.mark.parametrize("rooms", [PRODUCT_ROOMS, SIM_ROOMS], ids=["product", "sim"])
def test_each_room_imports_only_the_rooms_below_it(graph, rooms):
    rank = {room: i for i, (room, _) in enumerate(rooms)}
    offenders = []
    for module, deps in graph.items():
        mine = room_of(module)
        if mine not in rank:
            continue
        for dep in deps:
            theirs = room_of(dep)
            if theirs not in rank:
                continue   # the other tree: the next test's business
            if rank[theirs] > rank[mine]:
                offenders.append(f"{module} ({mine}) -> {dep} ({theirs})")
    assert not offenders, "imports going up the house plan:\n" + "\n".join(sorted(offenders))


def test_the_simulator_knows_nothing_of_the_product_and_few_use_it(graph):
    sim = {room for room, _ in SIM_ROOMS}
    inward = sorted(f"{m} -> {d}" for m, deps in graph.items() if room_of(m) in sim
                    for d in deps if room_of(d) not in sim)
    assert not inward, "piflash.sim imports the rest of piflash:\n" + "\n".join(inward)
    users = sorted(f"{m} -> {d}" for m, deps in graph.items() if room_of(m) not in sim
                   and room_of(m) not in SIM_USERS for d in deps if room_of(d) in sim)
    assert not users, f"only {SIM_USERS} may use the simulator:\n" + "\n".join(users)


@pytest.mark.parametrize("room", CORE + ("host", "station"))
def test_no_room_below_the_cli_imports_click_rich_or_the_cli(modules, room):
    members = [m for m in modules if room_of(m) == room]
    assert members
    offenders = {}
    for m in members:
        bad = sorted(i for i in imports_of(modules[m]) if any(i == f or i.startswith(f + ".") for f in FRONT_END))
        if m == "piflash.station.status":
            bad = [i for i in bad if i.split(".")[0] == "piflash"]  # the live view draws with rich
        if bad:
            offenders[m] = bad
    assert not offenders, f"{room} modules import the front end: {offenders}"


def test_every_package_says_what_it_owns_and_may_import(modules):
    missing = []
    for name, path in modules.items():
        if path.name != "__init__.py" or name == "piflash":
            continue
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
        if "may import" not in doc.lower() or len(doc) < 120:
            missing.append(name)
    assert not missing, f"packages whose docstring does not say what they own and may import: {missing}"
