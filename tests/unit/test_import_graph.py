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

Inside each package the folders are layers (#75), and LAYERS states every arrow allowed between them: a layer is a
subpackage (`nmt_core.gates`) or a module at the package's top (`nmt_core.config`, `sweeper.api`). An arrow not
listed fails, so a new one is a decision written here, not an accident found in a circle later.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
PACKAGES = ("nmt_core", "sweeper")  # each package whose modules must not import each other in a circle
NEVER = {
    "nmt_core": ("sweeper", "benchmarks", "tests"),
    "sweeper": ("benchmarks", "tests"),
}  # package -> what it must never import


_NMT_BELOW_COMMANDS = ("nmt_core.gates", "nmt_core.family", "nmt_core.config", "nmt_core.models", "nmt_core.data")
_NMT_ALL = _NMT_BELOW_COMMANDS + ("nmt_core", "nmt_core.training", "nmt_core.mlflow_model")  # nmt_core: its version
# layer -> the layers it may import (its own modules always); read bottom to top
LAYERS = {
    "nmt_core": (),  # the package's docstring only
    "nmt_core.gates": (),  # what comes in and goes out: knows nothing of NMT
    "nmt_core.family": (),  # the declarations: torch-free, nothing of the project
    "nmt_core.config": ("nmt_core.gates", "nmt_core.family"),
    "nmt_core.models": ("nmt_core.config", "nmt_core.family", "nmt_core.gates"),
    "nmt_core.data": ("nmt_core.config", "nmt_core.gates", "nmt_core.models"),  # models: the special token ids
    "nmt_core.training": _NMT_BELOW_COMMANDS,
    "nmt_core.mlflow_model": _NMT_BELOW_COMMANDS + ("nmt_core.training",),
    "nmt_core.cli": _NMT_ALL,
    "sweeper": ("sweeper.api",),
    "sweeper.design": (),  # pure numbers: the group-sequential boundaries and their plans
    "sweeper.space": ("sweeper.design", "nmt_core.config", "nmt_core.data", "nmt_core.family", "nmt_core.gates"),
    "sweeper.storage": ("sweeper.space", "nmt_core.config", "nmt_core.gates"),
    "sweeper.tracking": ("sweeper.storage", "sweeper.space") + _NMT_ALL,
    "sweeper.summary": ("sweeper.tracking", "sweeper.storage", "sweeper.space", "sweeper.design") + _NMT_ALL,
    "sweeper.running": ("sweeper.summary", "sweeper.tracking", "sweeper.storage", "sweeper.space", "sweeper.design")
    + _NMT_ALL,
    "sweeper.api": ("sweeper.running", "sweeper.summary", "sweeper.tracking", "sweeper.storage", "sweeper.space")
    + ("sweeper.design",)
    + _NMT_ALL,
    "sweeper.cli": ("sweeper.api", "sweeper.running", "sweeper.summary", "sweeper.storage", "sweeper.space")
    + ("sweeper", "sweeper.design", "nmt_core.gates", "nmt_core.config"),  # sweeper: `from sweeper import api`
}


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


def graph(package: str, among: tuple[str, ...] = ()) -> dict[str, set[str]]:
    """module -> the modules it imports of its package and of the packages `among` (itself left out: a package's
    __init__ is not its own importer)."""
    found = modules(package)
    known = set(found).union(*(modules(other) for other in among))
    return {
        name: {target for names in arrows(ast.parse(path.read_text(encoding="utf-8"))) for target in names}
        & known - {name}
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


def layer_of(module: str) -> str:
    """The layer a module belongs to: its subpackage (the first two names) or, at a package's top, itself."""
    return ".".join(module.split(".")[:2])


def wrong_arrows(edges: dict[str, set[str]], layers: dict[str, tuple[str, ...]]) -> list[str]:
    """Every arrow between two layers that `layers` does not allow, with the import that draws it."""
    return sorted(
        f"{name} imports {target}"
        for name, targets in edges.items()
        for target in targets
        if layer_of(target) != layer_of(name) and layer_of(target) not in layers.get(layer_of(name), ())
    )


@pytest.mark.parametrize("package", PACKAGES)
def test_every_layer_is_declared_with_its_job(package):
    """Each folder is a layer LAYERS names, and its __init__ says what it is for and what it may import."""
    folders = sorted(p.parent for p in (ROOT / package).glob("*/__init__.py"))
    undeclared = [f.name for f in folders if f"{package}.{f.name}" not in LAYERS]
    docstrings = {
        f.name: ast.get_docstring(ast.parse((f / "__init__.py").read_text(encoding="utf-8"))) for f in folders
    }
    undocumented = [name for name, text in docstrings.items() if "import" not in (text or "").lower()]
    assert undeclared == [] and undocumented == []


@pytest.mark.parametrize("package", PACKAGES)
def test_layers_import_only_the_layers_beneath_them(package):
    assert wrong_arrows(graph(package, among=PACKAGES), LAYERS) == []


def test_a_planted_arrow_up_a_layer_fails():
    """The layers' test can fail: the gates importing training, and storage importing the summary, are refused."""
    planted = {
        "nmt_core.gates.gate": {"nmt_core.training.train", "nmt_core.gates.yaml_input"},
        "sweeper.storage.store": {"sweeper.summary.report", "sweeper.space.spec"},
    }
    assert wrong_arrows(planted, LAYERS) == [
        "nmt_core.gates.gate imports nmt_core.training.train",
        "sweeper.storage.store imports sweeper.summary.report",
    ]


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
