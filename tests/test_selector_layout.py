"""The selector's layout (issue 11): small modules, no import of the adapters, old import paths kept."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

SELECTOR = Path(__file__).resolve().parents[1] / "src" / "salience" / "selector"


def _runtime_imports(path: Path) -> set[str]:
    """Modules ``path`` imports, leaving out ``if TYPE_CHECKING:`` blocks."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
    return out


MODULES = sorted(SELECTOR.glob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=[p.stem for p in MODULES])
def test_the_selector_imports_no_adapter(path: Path) -> None:
    bad = sorted(m for m in _runtime_imports(path) if m.startswith("salience.adapters"))
    assert not bad, f"{path.name} imports {bad}"


@pytest.mark.parametrize("path", MODULES, ids=[p.stem for p in MODULES])
def test_selector_modules_stay_small(path: Path) -> None:
    if path.stem in ("commands", "validate"):  # moving out of the selector (issue 11)
        pytest.skip(f"{path.name} moves elsewhere")
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= 750, f"{path.name} has {lines} lines"


OLD_NAMES = ["Compaction", "CompactionSession", "Compactor", "PrefixReuse", "DEFAULT_RETAIN", "FORMATS", "MEMO_SIZE",
             "VALUE_WEIGHT", "EPSILON", "ON_OVER_BUDGET", "load_profile", "detect_format", "check_budget"]


@pytest.mark.parametrize("name", OLD_NAMES, ids=OLD_NAMES)
def test_the_old_compactor_module_still_exports(name: str) -> None:
    module = importlib.import_module("salience.selector.compactor")
    assert getattr(module, name) is not None


def test_the_langchain_adapter_re_exports_the_converters() -> None:
    pytest.importorskip("langchain_core")
    adapter = importlib.import_module("salience.adapters.langchain")
    converters = importlib.import_module("salience.messages.langchain")
    for name in ("KEY", "entry_from_langchain", "entry_to_langchain", "from_langchain", "to_langchain"):
        assert getattr(adapter, name) is getattr(converters, name), name
    assert callable(adapter.pre_model_hook) and adapter.REMOVE_ALL_MESSAGES == "__remove_all__"
