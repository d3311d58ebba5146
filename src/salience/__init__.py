"""salience: learn which entries of an LLM agent's context matter, keep those in budget.

>>> from salience import Transcript
>>> t = Transcript.from_openai([{"role": "user", "content": "Hi"}])
>>> len(t)
1

Heavy parts (the scorer, the compactor, training) are imported on first use, so
``import salience`` stays fast.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# imported for their side effects: the converters behind Transcript.from_openai, ...
# (salience.transcript.register_converter), and the loader behind ImportanceScorer.load("models:/...")
# (salience.scorer.loaders.register_loader; neither mlflow nor scikit-learn is imported for it)
import salience.messages as messages  # noqa: F401
import salience.training as training  # noqa: F401
from salience._version import __version__
from salience.datasets import load_transcripts, save_transcripts
from salience.errors import (
    BudgetError,
    FormatError,
    NotFittedError,
    ParameterError,
    ParameterKeyError,
    ParameterTypeError,
    SalienceError,
    ScorerError,
    TrackingError,
    TranscriptError,
)
from salience.tokens import TokenCounter, count_tokens
from salience.transcript import Entry, Query, Role, ToolCall, Transcript

if TYPE_CHECKING:
    from salience.scorer.model import ImportanceScorer, default_scorer
    from salience.selector.compactor import Compaction, Compactor
    from salience.selector.masking import Phase, PhasePolicy

__all__ = [
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

_LAZY = {
    "ImportanceScorer": "salience.scorer.model",
    "default_scorer": "salience.scorer.model",
    "Compactor": "salience.selector.compactor",
    "Compaction": "salience.selector.compactor",
    "Phase": "salience.selector.masking",
    "PhasePolicy": "salience.selector.masking",
}


def __getattr__(name: str) -> Any:
    """Import the heavy public names (scorer, compactor) on first use."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'salience' has no attribute {name!r}")
    try:
        value = getattr(importlib.import_module(module), name)
    except ImportError as exc:
        raise ImportError(f"salience.{name} lives in {module}, which could not be imported: {exc}") from exc
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
