"""The Compactor as an MLflow ``pyfunc`` model: ``mlflow models serve`` and Spark UDFs.

A registered salience scorer is an MLflow model whose ``python_function`` flavor is
:class:`CompactorModel`: a thin :class:`mlflow.pyfunc.PythonModel` that loads the
scikit-learn-flavoured :class:`~salience.scorer.model.ImportanceScorer` (an artifact of
the model, ``artifacts/scorer``) in :meth:`~CompactorModel.load_context`, and whose
:meth:`~CompactorModel.predict` only delegates to :class:`~salience.selector.compactor.Compactor`
or to the scorer. :func:`salience.training.tracking.save_compactor_model` writes such a
model and :func:`~salience.training.tracking.log_training_run` registers it.

Input: a pandas DataFrame, one transcript per row.

============  ==========================================================================
column        meaning
============  ==========================================================================
``messages``  OpenAI (or Anthropic) messages: a JSON string or a list of message dicts;
              or an object ``{"messages": [...], "system": ...}`` (Anthropic system prompt)
``budget``    optional: the row's token budget (empty: the ``budget`` parameter)
``query``     optional: what the next step is about (empty: the ``query`` parameter)
============  ==========================================================================

Parameters (``params=``): ``mode`` (``"compact"``, the default, or ``"score"``),
``budget`` (default budget; the model's default is its compactor's budget) and
``query`` (default query; ``""`` means none).

Output of ``mode="compact"``: one row per input row with ``messages`` (the compacted
messages as a JSON string, in the format they came in; an object with ``system``
when they came as one), ``tokens``, ``budget``, ``kept``, ``trimmed``, ``stubbed``,
``dropped`` (JSON lists of entry ids) and ``over_budget`` (the pins alone exceeded the
budget: the model's compactor keeps them by default rather than failing a batch).

Output of ``mode="score"``: ``ids`` and ``scores`` (JSON lists: every entry's id and its
probability of being needed, query-aware when the row has a query), the shape a Spark
UDF scoring transcript logs wants.

This module imports MLflow (it subclasses ``PythonModel``): only
:mod:`salience.training.tracking` and MLflow's model loader import it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import mlflow.pyfunc
import pandas as pd

from salience.errors import SalienceError

__all__ = ["MODES", "CompactorModel", "compact_frame", "score_frame"]

#: What :meth:`CompactorModel.predict` can do (the ``mode`` parameter).
MODES: tuple[str, ...] = ("compact", "score")


def _missing(value: Any) -> bool:
    """None, NaN, pandas NA or a blank string: a cell left empty."""
    if value is None:
        return True
    if isinstance(value, str):
        return not value.strip()
    if isinstance(value, (list, tuple, Mapping)) or hasattr(value, "__len__"):
        return False
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):
        return False


def _messages(value: Any, row: int) -> tuple[Any, Any, bool]:
    """``(messages, system, wrapped)`` of one ``messages`` cell."""
    if isinstance(value, (bytes, bytearray)):
        value = value.decode("utf-8")
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise SalienceError(
                f"row {row}: column 'messages' is not valid JSON ({exc.msg} at char {exc.pos})"
            ) from None
    if hasattr(value, "tolist") and not isinstance(value, Mapping):  # numpy arrays from pandas / Spark
        value = value.tolist()
    if isinstance(value, Mapping):
        if "messages" not in value:
            raise SalienceError(f"row {row}: column 'messages' must be a list of messages or an object with a "
                                f"'messages' key (got an object with keys {sorted(value)[:6]})")
        inner = value["messages"]
        if hasattr(inner, "tolist"):
            inner = inner.tolist()
        return inner, value.get("system"), True
    if not isinstance(value, list):
        raise SalienceError(f"row {row}: column 'messages' must be a JSON list of messages "
                            f"(got a {type(value).__name__})")
    return value, None, False


def _budget(value: Any, default: Any, row: int) -> int | None:
    chosen = default if _missing(value) else value
    if _missing(chosen):
        return None
    if hasattr(chosen, "item"):  # numpy scalars
        chosen = chosen.item()
    try:
        number = float(chosen)
    except (TypeError, ValueError):
        raise SalienceError(f"row {row}: budget must be a positive integer (got {chosen!r})") from None
    if not number.is_integer() or number < 1:
        raise SalienceError(f"row {row}: budget must be a positive integer (got {chosen!r})")
    return int(number)


def _query(value: Any, default: Any) -> str | None:
    chosen = default if _missing(value) else value
    return None if _missing(chosen) else str(chosen)


def _frame(model_input: Any) -> pd.DataFrame:
    """``model_input`` as a DataFrame: a DataFrame, one row as a mapping, columns as a mapping, or row mappings."""
    if isinstance(model_input, pd.DataFrame):
        frame = model_input
    elif isinstance(model_input, Mapping):
        value = model_input.get("messages")
        one_row = isinstance(value, str) or _is_message_list(value)
        frame = pd.DataFrame([dict(model_input)]) if one_row else pd.DataFrame(dict(model_input))
    else:
        frame = pd.DataFrame(list(model_input))
    if "messages" not in frame.columns:
        raise SalienceError(f"input needs a 'messages' column (got columns {list(map(str, frame.columns))})")
    return frame


def _is_message_list(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and bool(value) and isinstance(value[0], Mapping)


def _cell(frame: pd.DataFrame, column: str, i: int) -> Any:
    return frame[column].iloc[i] if column in frame.columns else None


def compact_frame(compactor: Any, model_input: Any, params: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """Compact every row of ``model_input`` with ``compactor`` (see the module doc for columns)."""
    params = dict(params or {})
    frame = _frame(model_input)
    out: dict[str, list[Any]] = {k: [] for k in ("messages", "tokens", "budget", "kept", "trimmed", "stubbed",
                                                 "dropped", "over_budget")}
    for i in range(len(frame)):
        messages, system, wrapped = _messages(_cell(frame, "messages", i), i)
        budget = _budget(_cell(frame, "budget", i), params.get("budget"), i)
        query = _query(_cell(frame, "query", i), params.get("query"))
        try:
            result = compactor.compact(messages, budget=budget, query=query, system=system)
        except SalienceError as exc:
            raise type(exc)(f"row {i}: {exc}") from exc
        rendered: Any = result.messages
        if wrapped:
            rendered = {"messages": result.messages, "system": result.system}
        out["messages"].append(json.dumps(rendered, ensure_ascii=False))
        out["tokens"].append(int(result.tokens))
        out["budget"].append(int(result.budget))
        for key in ("kept", "trimmed", "stubbed", "dropped"):
            out[key].append(json.dumps(list(getattr(result, key))))
        out["over_budget"].append(bool(result.over_budget))
    return pd.DataFrame(out)


def score_frame(scorer: Any, model_input: Any, params: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """Score every entry of every row of ``model_input``: columns ``ids`` and ``scores`` (JSON lists)."""
    from salience.messages.dispatch import detect_format
    from salience.transcript import Transcript

    params = dict(params or {})
    frame = _frame(model_input)
    ids: list[str] = []
    scores: list[str] = []
    for i in range(len(frame)):
        messages, system, _ = _messages(_cell(frame, "messages", i), i)
        query = _query(_cell(frame, "query", i), params.get("query"))
        try:
            if detect_format(messages, system=system) == "anthropic":
                transcript = Transcript.from_anthropic(messages, system=system)
            else:
                transcript = Transcript.from_openai(messages)
            values = scorer.score(transcript, query)
        except SalienceError as exc:
            raise type(exc)(f"row {i}: {exc}") from exc
        ids.append(json.dumps([e.id for e in transcript.entries]))
        scores.append(json.dumps([round(float(v), 6) for v in values]))
    return pd.DataFrame({"ids": ids, "scores": scores})


class CompactorModel(mlflow.pyfunc.PythonModel):  # type: ignore[misc,name-defined]
    """A registered scorer as an MLflow model: compacts (or scores) transcripts in a DataFrame.

    ``load_context`` reads the scikit-learn-flavoured scorer from the model's
    ``scorer`` artifact and builds a :class:`~salience.selector.compactor.Compactor`
    from the model config's ``"compactor"`` mapping (its constructor parameters).
    ``predict`` delegates to :func:`compact_frame` or :func:`score_frame`.
    """

    def load_context(self, context: Any) -> None:
        from salience.selector.compactor import Compactor
        from salience.training.tracking import read_scorer_model

        config = dict(getattr(context, "model_config", None) or {})
        self.scorer_ = read_scorer_model(context.artifacts["scorer"])
        self.compactor_ = Compactor(scorer=self.scorer_, **dict(config.get("compactor") or {}))

    def predict(self, context: Any, model_input: pd.DataFrame, params: dict[str, Any] | None = None) -> pd.DataFrame:
        """Compact (``mode="compact"``) or score (``mode="score"``) each row; see the module doc."""
        if not hasattr(self, "compactor_"):
            raise SalienceError(
                "CompactorModel: load_context has not run; load the model with mlflow.pyfunc.load_model"
            )
        params = dict(params or {})
        mode = params.pop("mode", None) or "compact"
        if mode not in MODES:
            raise SalienceError(f"mode must be one of {', '.join(repr(m) for m in MODES)} (got {mode!r})")
        if mode == "score":
            return score_frame(self.scorer_, model_input, params)
        return compact_frame(self.compactor_, model_input, params)
