"""The layering of the bench package, training and the scorer (issue #11).

* ``salience.training.bench`` is a re-export shim of :mod:`salience.bench` and
  :mod:`salience.training.split`, with every name it had;
* train and tune take the split from ``training.split`` (that the scorer and the bench
  package import nothing from training or the command line is tests/test_import_graph.py's:
  imports run one way through the layers);
* ``ImportanceScorer.load("models:/...")`` goes through the URI loader that
  ``salience.training`` registers.

Imports are read from the source (every ``import`` statement, function-level ones
included, those under ``if TYPE_CHECKING:`` excluded).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import salience.bench
import salience.training.bench as shim
import salience.training.split
from salience.errors import ScorerError
from salience.scorer import loaders
from salience.scorer.model import ImportanceScorer

SRC = Path(salience.bench.__file__).resolve().parents[1]

#: Every public name ``salience.training.bench`` had before the move.
OLD_NAMES = (
    "BASELINE_NAMES", "BENCH_COMPACTOR_PARAMS", "CLEARED", "DEFAULT_BASELINES", "DEFAULT_FRACTIONS", "OMITTED",
    "REFERENCE_ONLY_BASELINES", "BenchKind", "BenchReport", "BenchRow", "HindsightAUC", "ProgressFn", "RecallCurve",
    "Selector", "check_fractions", "compactor_selector", "evidence_recall", "group_key", "hindsight_auc",
    "last_k_tool_results_selector", "observation_masking_selector", "pack_greedy", "recency_selector",
    "recency_window", "reference_recall", "run_benchmark", "scorer_selector", "split_transcripts",
)


def _imports(path: Path) -> set[str]:
    """Modules ``path`` imports (``from a import b`` counts ``a`` and ``a.b``), outside ``if TYPE_CHECKING:``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.add(node.module)
            out.update(f"{node.module}.{alias.name}" for alias in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return out


@pytest.mark.parametrize("name", OLD_NAMES)
def test_shim_keeps_every_old_name(name: str) -> None:
    new_home = salience.training.split if name in ("group_key", "split_transcripts") else salience.bench
    if name == "ProgressFn":
        new_home = salience.bench.metrics
    assert getattr(shim, name) is getattr(new_home, name)


def test_shim_keeps_the_private_names_tune_used() -> None:
    assert shim._reference_plan is salience.bench.reference_plan
    assert shim._reference_curve is salience.bench.reference_curve
    assert sorted(shim.__all__) == sorted(OLD_NAMES)


@pytest.mark.parametrize("module", ["train", "tune"])
def test_train_and_tune_take_the_split_from_training_split(module: str) -> None:
    imports = _imports(SRC / "training" / f"{module}.py")
    assert not {m for m in imports if m.startswith("salience.training.bench")}
    if module == "tune":
        assert "salience.training.split.group_key" in imports
        assert {"salience.bench.metrics.reference_plan", "salience.bench.metrics.reference_curve"} <= imports
    else:
        assert "salience.training.split.split_transcripts" in imports


def test_mlflow_is_imported_only_by_tracking_and_its_pyfunc_model() -> None:
    users = sorted(str(p.relative_to(SRC)) for p in SRC.rglob("*.py")
                   if any(m == "mlflow" or m.startswith("mlflow.") for m in _imports(p)))
    assert users == ["training/pyfunc.py", "training/tracking.py"]


def test_training_registers_the_mlflow_loader(monkeypatch: pytest.MonkeyPatch) -> None:
    from salience.training import tracking

    seen = []
    monkeypatch.setattr(tracking, "load_scorer", lambda uri: seen.append(uri) or ImportanceScorer())
    for uri in ("models:/salience@champion", "runs:/abc123/model"):
        assert loaders.loader_for(uri) is not None
        assert isinstance(ImportanceScorer.load(uri), ImportanceScorer)
    assert seen == ["models:/salience@champion", "runs:/abc123/model"]


def test_missing_mlflow_loader_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loaders, "_LOADERS", {})  # as if salience.training had not been imported
    with pytest.raises(ScorerError, match=r"no loader is registered for runs:/ URIs \(`import salience.training`"):
        ImportanceScorer.load("runs:/abc123/model")


def test_register_loader_checks_its_arguments(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loaders, "_LOADERS", dict(loaders._LOADERS))
    with pytest.raises(ScorerError, match="must be a URI scheme ending with ':/'"):
        loaders.register_loader("models", lambda uri: ImportanceScorer())
    with pytest.raises(ScorerError, match="must be callable"):
        loaders.register_loader("demo:/", "not a function")  # type: ignore[arg-type]
    loaders.register_loader("demo:/", lambda uri: None)  # type: ignore[arg-type,return-value]
    with pytest.raises(ScorerError, match="returned no scorer"):
        ImportanceScorer.load("demo:/x")
