"""The public names of ``salience``: pinned, resolvable, and cheap to import."""

from __future__ import annotations

import importlib
import importlib.util
import subprocess
import sys

import pytest

import salience

EXPECTED = [
    "BudgetError",
    "Compaction",
    "Compactor",
    "Entry",
    "FormatError",
    "ImportanceScorer",
    "NotFittedError",
    "ParameterError",
    "ParameterKeyError",
    "ParameterTypeError",
    "Phase",
    "PhasePolicy",
    "Query",
    "Role",
    "SalienceError",
    "ScorerError",
    "TokenCounter",
    "ToolCall",
    "TrackingError",
    "Transcript",
    "TranscriptError",
    "__version__",
    "count_tokens",
    "default_scorer",
    "load_transcripts",
    "save_transcripts",
]

#: Names imported on first use, and the module each lives in.
LAZY = {
    "Compaction": "salience.selector.compactor",
    "Compactor": "salience.selector.compactor",
    "ImportanceScorer": "salience.scorer.model",
    "Phase": "salience.selector.masking",
    "PhasePolicy": "salience.selector.masking",
    "default_scorer": "salience.scorer.model",
}


def test_all_is_pinned_and_sorted() -> None:
    assert salience.__all__ == EXPECTED
    assert sorted(salience.__all__) == salience.__all__
    assert set(LAZY) <= set(EXPECTED)


def _module_exists(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # a parent package is missing
        return False


@pytest.mark.parametrize("name", EXPECTED, ids=EXPECTED)
def test_every_public_name_resolves(name: str) -> None:
    module = LAZY.get(name)
    if module is not None and not _module_exists(module):
        pytest.skip(f"{name} lives in {module}, which does not exist yet")
    value = getattr(salience, name)
    assert value is not None
    if module is not None:
        assert value is getattr(importlib.import_module(module), name)
    assert name in dir(salience)


def test_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match=r"module 'salience' has no attribute 'nope'"):
        salience.nope  # noqa: B018
    assert not hasattr(salience, "nope")


def test_errors_share_one_base() -> None:
    for name in EXPECTED:
        if name.endswith("Error"):
            assert issubclass(getattr(salience, name), salience.SalienceError), name
    assert issubclass(salience.FormatError, salience.TranscriptError)
    assert issubclass(salience.TranscriptError, ValueError)
    assert issubclass(salience.ParameterError, ValueError)
    assert issubclass(salience.ParameterTypeError, salience.ParameterError)
    assert issubclass(salience.ParameterTypeError, TypeError)
    assert issubclass(salience.ParameterKeyError, salience.ParameterError)
    assert issubclass(salience.ParameterKeyError, KeyError)


def test_import_registers_the_mlflow_loader_without_mlflow() -> None:
    """``import salience`` is enough for ``ImportanceScorer.load("models:/...")``: the loader is
    registered, and neither mlflow, scikit-learn nor the tracking module is imported for it."""
    code = (
        "import sys, salience\n"
        "from salience.scorer import loaders\n"
        "assert loaders.loader_for('models:/x/1') is not None and loaders.loader_for('runs:/abc') is not None\n"
        "print(','.join(sorted(m for m in ('mlflow', 'sklearn', 'salience.training.tracking') if m in sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == ""


def test_import_is_light() -> None:
    code = (
        "import sys, salience\n"
        "salience.Transcript.from_openai([{'role': 'user', 'content': 'hi'}]).to_anthropic()\n"
        "heavy = sorted(m for m in ('torch', 'mlflow', 'sentence_transformers', 'sklearn', 'tiktoken')"
        " if m in sys.modules)\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == ""
