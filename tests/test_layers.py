"""The package layout is the architecture: data -> heads -> engine -> eval/syntax -> studies
-> atlas -> report, with workflow and cli on top. A module imports only its own layer's packages
and those below (any import, module-level or inside a function), and every package
imports on its own."""
import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "headlab"

#: top-level module or package -> layer; a higher number may import a lower one
LAYERS = {
    "__init__": 0, "checkpoints": 0, "errors": 0, "io": 0, "globs": 0, "naming": 0, "options": 0, "sourcecode": 0,
    "data": 1,
    "heads": 2,
    "engine": 3,
    "eval": 4, "syntax": 4,
    "studies": 5,
    "atlas": 5.5,      # reads the studies' model lists and paper D's syntactic-head rule
    "report": 6,
    "workflow": 7, "cli": 7, "bench": 7,
}
#: packages of one layer that may import each other
SIBLINGS = {frozenset({"eval", "syntax"})}


def _top(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _imports(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
            if node.module == "headlab":
                found += [(node.lineno, f"headlab.{a.name}") for a in node.names]
    return [(line, name) for line, name in found if name.startswith("headlab.")]


def upward_imports(package: Path = PACKAGE) -> list[str]:
    bad = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package.parent).with_suffix("")
        here = _top(".".join(rel.parts))
        if here not in LAYERS:
            bad.append(f"{rel}: top-level module {here!r} has no layer in tests/test_layers.py")
            continue
        for line, name in _imports(path):
            there = _top(name)
            if there == here or frozenset({here, there}) in SIBLINGS:
                continue
            if there not in LAYERS or LAYERS[there] > LAYERS[here] or (
                    LAYERS[there] == LAYERS[here] and LAYERS[here] > 0):
                bad.append(f"{rel}.py:{line}: {here} imports {name}")
    return bad


def test_no_module_imports_a_layer_above_its_own():
    assert upward_imports() == []


def test_the_check_sees_an_upward_import(tmp_path):
    pkg = tmp_path / "headlab"
    (pkg / "heads").mkdir(parents=True)
    (pkg / "heads" / "kind.py").write_text("def f():\n    from headlab.engine import plugin\n")
    assert upward_imports(pkg) == ["headlab/heads/kind.py:2: heads imports headlab.engine"]


@pytest.mark.parametrize("package", sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()))
def test_each_package_imports_alone(package):
    """A package imported first, in a fresh interpreter (no other headlab module loaded
    before it), must not hit an import circle."""
    done = subprocess.run([sys.executable, "-W", "ignore", "-c", f"import headlab.{package}"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
