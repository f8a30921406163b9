"""The house's drawing, kept: no import circle among a package's modules, and no arrow back up (nmt_core never
imports sweeper). Read from the source with `ast`, so a circle shows here before it shows as an ImportError in one
import order and not another.

Every import is an arrow, a lazy one inside a function too (it hides a circle, it does not remove it), and so is
`importlib.import_module("...")` with a literal name (one with a computed name is refused: it hides its arrow),
and so is an import under `if TYPE_CHECKING:`: a circle of type hints alone still ties its modules into one, where
none can be read or loaded without the others (#60: config read the models' declarations, which named config's
types).
A package's modules are its files; importing a package means its `__init__`. Add a package to PACKAGES (sweeper/)
and its own forbidden imports to NEVER to hold it to the same drawing.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
PACKAGES = ("nmt_core",)  # each package whose modules must not import each other in a circle
NEVER = {"nmt_core": ("sweeper", "benchmarks", "tests")}  # package -> what it must never import


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules(package: str) -> dict[str, Path]:
    return {module_name(path): path for path in sorted((ROOT / package).rglob("*.py"))}


def _import_module_call(node: ast.AST) -> str | None:
    """The literal name of `importlib.import_module("name")` or `import_module("name")`."""
    if not (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)):
        return None
    func = node.func
    called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    return node.args[0].value if called == "import_module" and isinstance(node.args[0].value, str) else None


def arrows(tree: ast.AST) -> list[list[str]]:
    """The names each import in the tree may load (`from p import m` may load p and p.m), type hints' too."""
    found = []
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.Import):
            found.append([alias.name for alias in node.names])
        elif isinstance(node, ast.ImportFrom):
            found.append([node.module or ""] + [f"{node.module}.{alias.name}" for alias in node.names])
        elif (name := _import_module_call(node)) is not None:
            found.append([name])
        found += arrows(node)
    return found


def graph(package: str) -> dict[str, set[str]]:
    """module -> the package's modules it imports (itself left out: a package's __init__ is not its own importer)."""
    found = modules(package)
    return {
        name: {target for names in arrows(ast.parse(path.read_text(encoding="utf-8"))) for target in names}
        & set(found) - {name}
        for name, path in found.items()
    }


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """One circle per strongly connected part of the graph with more than one module (Tarjan), each as a path."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(edges.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            part = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                part.append(member)
                if member == node:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


@pytest.mark.parametrize("package", PACKAGES)
def test_no_module_imports_itself_round_a_circle(package):
    assert cycles(graph(package)) == []


@pytest.mark.parametrize("package", sorted(NEVER))
def test_no_arrow_points_back_up(package):
    wrong = [
        f"{name} imports {target}"
        for name, path in modules(package).items()
        for names in arrows(ast.parse(path.read_text(encoding="utf-8")))
        for target in names[:1]
        if target.split(".")[0] in NEVER[package]
    ]
    assert wrong == []


@pytest.mark.parametrize("package", PACKAGES)
def test_no_module_is_imported_by_a_computed_name(package):
    """`importlib.import_module(name)` with a name worked out at run time is an arrow this reader cannot see (the
    registry once loaded the model's modules so, around a circle): name the module in an import instead."""
    hidden = [
        f"{name}: line {node.lineno}"
        for name, path in modules(package).items()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Call)
        and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module"
        and _import_module_call(node) is None
    ]
    assert hidden == []


def test_the_reader_sees_every_arrow_type_hints_too():
    """The test can fail: two modules that import each other are one circle, a lazy import, an importlib call and
    an import under TYPE_CHECKING included."""
    sources = {
        "p.a": "import p.b\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from p import c\n",
        "p.b": "import importlib\ndef f():\n    importlib.import_module('p.c')\n",
        "p.c": "def g():\n    from p import a\n",
        "p.d": "from p.a import x\n",
    }
    edges = {
        name: {t for names in arrows(ast.parse(text)) for t in names} & set(sources) for name, text in sources.items()
    }
    assert edges == {"p.a": {"p.b", "p.c"}, "p.b": {"p.c"}, "p.c": {"p.a"}, "p.d": {"p.a"}}
    assert cycles(edges) == [["p.a", "p.b", "p.c"]]
