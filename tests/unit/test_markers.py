"""The suite's own conventions: a test module that boots containers, debootstraps a root or runs
qemu carries ``@pytest.mark.slow`` (so ``pytest -m "not slow"`` is a quick run), and the marker
is registered (an unregistered one is a typo pytest would only warn about)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
#: What makes a test heavy: a Debian root (debootstrap, scripts/make-root.sh), a container boot
#: (systemd-nspawn, support.nspawn), a foreign architecture (qemu-user, scripts/test-arm.sh).
HEAVY = re.compile(r"make-root\.sh|debootstrap\b|support\.nspawn|systemd-nspawn|qemu-|test-arm\.sh")


def used_words(tree: ast.Module) -> str:
    """The module's string constants (docstrings left out) and imported module names: what it
    runs and uses, not what its prose mentions."""
    docs = {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef)) and node.body
            and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    words = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            words.append(node.value)
        elif isinstance(node, ast.ImportFrom):
            words.append(f"{node.module}." + " ".join(a.name for a in node.names))
        elif isinstance(node, ast.Import):
            words.extend(a.name for a in node.names)
    return "\n".join(words)


def test_heavy_modules_are_marked_slow():
    unmarked = []
    for path in sorted(TESTS.rglob("test_*.py")):
        text = path.read_text()
        hit = HEAVY.search(used_words(ast.parse(text)))
        if hit and "pytest.mark.slow" not in text:
            unmarked.append(f"{path.name} ({hit.group(0)})")
    assert not unmarked, "heavy test modules without pytest.mark.slow: " + ", ".join(unmarked)


def test_slow_marker_is_registered(pytestconfig):
    assert any(m.startswith("slow:") for m in pytestconfig.getini("markers"))
