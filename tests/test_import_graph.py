"""The import graph of ``src/salience`` has no cycle (issue #11).

Every module is read with :mod:`ast`; every ``import`` and ``from ... import`` counts,
relative ones and those inside functions included, except under ``if TYPE_CHECKING:``
(its ``else`` branch counts). ``from salience.pkg import name`` is an edge to
``salience.pkg.name`` when that is a module, else to ``salience.pkg``. In a module that
calls ``importlib.import_module``, a string constant that is a module's dotted name (or
``"module:attribute"``) is an edge too: the lazy attribute tables of the facades and the
command registry of the CLI import by name, and a cycle through them is still a cycle.
The implicit import of a module's parent packages is not an edge (it would tie every
package to each of its modules). Imports of other projects are not edges.

A cycle fails the test with the modules that form it, in import order.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "src"
PACKAGE = "salience"


def module_names(root: Path = ROOT, package: str = PACKAGE) -> dict[str, Path]:
    """Every module of ``package`` under ``root``: dotted name -> file."""
    out = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _statements(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """The import statements of ``tree`` at any depth, leaving out ``if TYPE_CHECKING:`` bodies."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
            continue
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))


def _imports_by_name(tree: ast.AST, modules: dict[str, Path]) -> set[str]:
    """The modules named by string constants of ``tree``, if it calls ``importlib.import_module``."""
    calls = any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "import_module"
                for n in ast.walk(tree))
    if not calls:
        return set()
    names = {n.value.partition(":")[0] for n in ast.walk(tree)
             if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    return names & set(modules)


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The modules of ``modules`` that module ``name`` (the file ``path``) imports."""
    is_package = path.name == "__init__.py"
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    out = _imports_by_name(tree, modules)
    for node in _statements(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
            continue
        if node.level:
            base = name.split(".") if is_package else name.split(".")[:-1]
            base = base[: len(base) - (node.level - 1)]
            source = ".".join(base + ([node.module] if node.module else []))
        else:
            source = node.module or ""
        for alias in node.names:
            child = f"{source}.{alias.name}"
            out.add(child if child in modules else source)
    return {m for m in out if m in modules and m != name}


def import_graph(root: Path = ROOT, package: str = PACKAGE) -> dict[str, set[str]]:
    """Module -> the modules it imports, over every module of ``package``."""
    modules = module_names(root, package)
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle through each strongly connected component of more than one module (Tarjan),
    as ``[a, b, ..., a]``: ``a`` imports ``b`` ... imports ``a``."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []

    def strongconnect(v: str) -> None:  # the graph is a hundred modules: recursion is fine
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
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            strongconnect(v)
    return [_cycle_in(graph, set(c)) for c in sorted(components)]


def _cycle_in(graph: dict[str, set[str]], component: set[str]) -> list[str]:
    """A shortest cycle through the first module of ``component`` (breadth first)."""
    start = min(component)
    paths = {start: [start]}
    queue = [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(graph[v] & component):
            if w == start:
                return paths[v] + [start]
            if w not in paths:
                paths[w] = paths[v] + [w]
                queue.append(w)
    raise AssertionError(f"no cycle through {start}")  # pragma: no cover - a component always has one


def test_the_import_graph_has_no_cycle() -> None:
    found = cycles(import_graph())
    assert not found, "import cycles:\n" + "\n".join("  " + " -> ".join(c) for c in found)


def test_the_graph_covers_every_module_and_sees_known_edges() -> None:
    graph = import_graph()
    assert len(graph) == len(list((ROOT / PACKAGE).rglob("*.py")))
    assert "salience.errors" in graph["salience.transcript"]  # from salience.errors import ...
    assert "salience.selector.knapsack" in graph["salience.selector.params"]  # from salience.selector import knapsack
    assert "salience.messages" in graph["salience"]  # import salience.messages as messages
    assert "salience.scorer.model" in graph["salience"]  # by name, in the lazy table (TYPE_CHECKING aside)
    assert "salience.cli.compact" in graph["salience.cli.dispatch"]  # by name, in COMMANDS
    assert "salience.selector.compactor" in graph["salience.selector"]  # by name, in the lazy table


#: The layers of DESIGN.md's data flow, bottom first: a module imports only from its own
#: layer or a lower one (the cycle test alone would let a module import upward).
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors", "_version", "_threads"),
    ("transcript", "tokens", "values", "tooltypes", "limits"),
    ("messages",),
    ("datasets", "stats"),
    ("scorer",),
    ("selector",),
    ("bench",),
    ("training",),
    ("adapters",),
    ("cli",),
    ("", "__main__"),  # the facade, salience/__init__.py, and ``python -m salience``
)

#: Re-export shims of the old paths (kept for one release): they point at the new homes,
#: wherever those are.
SHIMS = ("salience.formats", "salience.demo", "salience.selector.commands", "salience.selector.validate",
         "salience.training.bench", "salience.training.bench_command", "salience.training.commands",
         "salience.training.registry_commands", "salience.training.tune_command")


def _layer(module: str) -> tuple[int, str]:
    part = module.split(".")[1] if "." in module else ""
    for rank, parts in enumerate(LAYERS):
        if part in parts:
            return rank, part
    raise AssertionError(f"{module} is in no layer of LAYERS (add its part there)")


def _is_shim(module: str) -> bool:
    return any(module == s or module.startswith(s + ".") for s in SHIMS)


def test_imports_run_one_way_through_the_layers() -> None:
    upward = []
    for module, imported in sorted(import_graph().items()):
        if _is_shim(module):
            continue
        rank, part = _layer(module)
        for other in sorted(imported):
            other_rank, other_part = _layer(other)
            if other_part != part and (other_rank > rank or _is_shim(other)):
                upward.append(f"{module} -> {other}")
    assert not upward, "imports that go up a layer (or into a shim):\n  " + "\n  ".join(upward)


# --------------------------------------------------------------------------
# the walker itself, on a small tree
# --------------------------------------------------------------------------


def _tree(tmp_path: Path, files: dict[str, str]) -> dict[str, set[str]]:
    for rel, text in files.items():
        path = tmp_path / "pkg" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return import_graph(tmp_path, "pkg")


def test_walker_resolves_relative_function_level_and_from_imports(tmp_path: Path) -> None:
    graph = _tree(tmp_path, {
        "__init__.py": "from pkg.sub import leaf\nfrom pkg.sub import NAME\n",
        "sub/__init__.py": "NAME = 1\nfrom . import leaf\n",
        "sub/leaf.py": "def f():\n    from ..other import g\n    import pkg.third\n",
        "other.py": "from .sub.leaf import f\ndef g(): ...\n",
        "third.py": (
            "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n    import pkg.other\nelse:\n    import pkg.sub\n"
            "import os, json\n"
        ),
        "lazy.py": "import importlib\nTABLE = {'f': 'pkg.third:f', 'g': 'pkg.nothing'}\n"
                   "def get(k):\n    return importlib.import_module(TABLE[k])\n",
        "names.py": "WHERE = 'pkg.third'  # a module's name, but nothing here imports by name\n",
    })
    assert graph == {
        "pkg": {"pkg.sub.leaf", "pkg.sub"},
        "pkg.sub": {"pkg.sub.leaf"},
        "pkg.sub.leaf": {"pkg.other", "pkg.third"},
        "pkg.other": {"pkg.sub.leaf"},
        "pkg.third": {"pkg.sub"},
        "pkg.lazy": {"pkg.third"},
        "pkg.names": set(),
    }
    assert cycles(graph) == [["pkg.other", "pkg.sub.leaf", "pkg.other"]]


@pytest.mark.parametrize(("files", "expected"), [
    ({"a.py": "import pkg.b\n", "b.py": "import pkg.c\n", "c.py": "from pkg import a\n"},
     [["pkg.a", "pkg.b", "pkg.c", "pkg.a"]]),
    ({"a.py": "import pkg.b\n", "b.py": "x = 1\n"}, []),
    ({"a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pkg.b\n", "b.py": "import pkg.a\n"}, []),
], ids=["three-module-cycle", "no-cycle", "type-checking-only"])
def test_walker_finds_cycles(tmp_path: Path, files: dict[str, str], expected: list[list[str]]) -> None:
    graph = _tree(tmp_path, {"__init__.py": "", **files})
    assert cycles(graph) == expected
