"""The selectors reference recall compares: each compacts a history to a token budget.

A selector is ``selector(history, budget, query) -> Transcript``
(:class:`~salience.bench.metrics.Selector`). The baselines:

* :func:`recency_selector`: the sliding window (:func:`recency_window`);
* :func:`last_k_tool_results_selector`: older tool results cleared, the last ``k`` kept;
* :func:`observation_masking_selector`: tool outputs older than the last ``m`` omitted;
* :func:`compactor_selector` and :func:`scorer_selector`: a scorer (salience's or a
  baseline scorer such as BM25) through the :class:`~salience.selector.compactor.Compactor`,
  with :data:`BENCH_COMPACTOR_PARAMS`.

Tool calls and their results are kept or dropped together, so every output is a valid
:class:`~salience.transcript.Transcript`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from salience.bench.metrics import Selector, name_of
from salience.errors import ParameterError
from salience.tokens import TokenCounter, as_counter
from salience.transcript import Transcript

__all__ = [
    "BENCH_COMPACTOR_PARAMS",
    "CLEARED",
    "OMITTED",
    "compactor_selector",
    "last_k_tool_results_selector",
    "observation_masking_selector",
    "recency_selector",
    "recency_window",
    "scorer_selector",
]

#: Compactor parameters the benchmark's Compactor-based selectors use unless told
#: otherwise: only the system prompt is pinned, so every other entry is the scorer's
#: to choose and the tightest budgets (10% of a history) can be met. (The default pins,
#: ``pin_last=1`` and no separate pin on the last user turn, degrade before anything
#: raises, but they still spend a small budget on the newest entry.)
BENCH_COMPACTOR_PARAMS: Mapping[str, Any] = {"pin_last": 0, "pin_last_user": False}

#: Placeholders the rule-based selectors put in place of a tool result's content.
CLEARED = "[tool result cleared]"
OMITTED = "[observation omitted]"


def _units(transcript: Transcript) -> list[list[int]]:
    """Non-system entries grouped so that a call and its results form one unit,
    ordered by each unit's last entry."""
    parents = transcript.parents()
    groups: dict[int, list[int]] = {}
    for i, e in enumerate(transcript.entries):
        if e.role == "system":
            continue
        root = parents[i] if parents[i] >= 0 else i
        groups.setdefault(root, []).append(i)
    return sorted(groups.values(), key=lambda members: members[-1])


def recency_window(transcript: Transcript, budget: int, counter: Any = None) -> Transcript:
    """The system entries plus the most recent entries that fit ``budget``.

    Walks back from the end one unit at a time (a tool call together with all its
    results, or a single entry) and stops at the first unit that does not fit, so
    the window is contiguous and no tool result is ever kept without its call.
    System entries are always kept, even when they alone exceed the budget.

    >>> from salience.transcript import Entry
    >>> t = Transcript(id="t", entries=[Entry(id="s", role="system", content="be brief"),
    ...     *[Entry(id=f"u{i}", role="user", content="two words") for i in range(4)]])
    >>> [e.id for e in recency_window(t, 2 * 6 + 6, lambda text: len(text.split())).entries]
    ['s', 'u2', 'u3']
    """
    tc = as_counter(counter)
    entries = transcript.entries
    costs = tc.count_entries(entries)
    keep = {i for i, e in enumerate(entries) if e.role == "system"}
    left = budget - sum(costs[i] for i in keep)
    for unit in reversed(_units(transcript)):
        cost = sum(costs[i] for i in unit)
        if cost > left:
            break
        keep.update(unit)
        left -= cost
    if len(keep) == len(entries):
        return transcript
    return Transcript(id=transcript.id, entries=tuple(e for i, e in enumerate(entries) if i in keep),
                      domain=transcript.domain, meta=transcript.meta)


def _fits(transcript: Transcript, budget: int, counter: TokenCounter) -> bool:
    return sum(counter.count_entries(transcript.entries)) <= budget


class _RecencySelector:
    __slots__ = ("counter", "name")

    def __init__(self, counter: Any = None, name: str = "recency") -> None:
        self.counter = as_counter(counter)
        self.name = name

    def __call__(self, history: Transcript, budget: int, query: str | None = None) -> Transcript:
        return recency_window(history, budget, self.counter)

    def __repr__(self) -> str:
        return f"recency_selector(name={self.name!r})"


class _MaskingSelector:
    __slots__ = ("counter", "keep", "name", "placeholder")

    def __init__(self, keep: int, placeholder: str, name: str, counter: Any = None) -> None:
        if isinstance(keep, bool) or not isinstance(keep, int) or keep < 0:
            raise ParameterError(f"{name}: the number of tool results to keep must be an int >= 0 (got {keep!r})")
        self.keep = keep
        self.placeholder = placeholder
        self.name = name
        self.counter = as_counter(counter)

    def mask(self, history: Transcript) -> Transcript:
        """``history`` with the content of every tool result but the last ``keep`` replaced."""
        tools = [i for i, e in enumerate(history.entries) if e.role == "tool"]
        old = set(tools[: max(0, len(tools) - self.keep)])
        if not old:
            return history
        entries = tuple(e.replace(content=self.placeholder) if i in old else e for i, e in enumerate(history.entries))
        return Transcript(id=history.id, entries=entries, domain=history.domain, meta=history.meta)

    def __call__(self, history: Transcript, budget: int, query: str | None = None) -> Transcript:
        masked = self.mask(history)
        if _fits(masked, budget, self.counter):
            return masked
        return recency_window(masked, budget, self.counter)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(keep={self.keep}, name={self.name!r})"


class _CompactorSelector:
    __slots__ = ("_cache", "compactor", "name")

    def __init__(self, scorer: Any, name: str, counter: Any = None, **params: Any) -> None:
        from salience.selector.compactor import Compactor

        params = {**BENCH_COMPACTOR_PARAMS, "on_over_budget": "keep_pins", **params}
        self.compactor = Compactor(scorer=_CachedScorer(scorer), counter=as_counter(counter), **params)
        self.name = name

    def __call__(self, history: Transcript, budget: int, query: str | None = None) -> Transcript:
        result = self.compactor.compact(history, budget=budget, query=query, format="transcript")
        return result.transcript

    def __repr__(self) -> str:
        return f"compactor_selector(name={self.name!r}, compactor={self.compactor!r})"


class _CachedScorer:
    """Remembers the last few scores, so one history compacted at several budgets is scored once."""

    __slots__ = ("_memo", "scorer")

    def __init__(self, scorer: Any) -> None:
        self.scorer = scorer
        self._memo: list[tuple[Transcript, str | None, np.ndarray]] = []

    def score(self, transcript: Transcript, query: str | None = None) -> np.ndarray:
        for t, q, s in self._memo:
            if t is transcript and q == query:
                return s
        s = self.scorer.score(transcript) if query is None else self.scorer.score(transcript, query)
        self._memo = [*self._memo[-3:], (transcript, query, s)]
        return s

    def __repr__(self) -> str:
        return repr(self.scorer)


def compactor_selector(scorer: Any, *, name: str | None = None, counter: Any = None, **params: Any) -> Selector:
    """A selector that compacts with :class:`~salience.selector.compactor.Compactor`.

    ``params`` go to the Compactor, over :data:`BENCH_COMPACTOR_PARAMS` (only the
    system prompt pinned) and ``on_over_budget="keep_pins"`` (a budget smaller than
    the pinned entries returns the pins rather than raising;
    :func:`reference_recall` counts such outputs as over budget). Scores
    are remembered for the last few histories, so the same history at several
    budgets is scored once. ``name`` defaults to the scorer's ``name`` or class name.
    """
    return _CompactorSelector(scorer, name or name_of(scorer), counter, **params)


def scorer_selector(scorer: Any, *, counter: Any = None, **params: Any) -> Selector:
    """A baseline scorer (BM25, fusion, random, ...) as a selector through the Compactor,
    named after the scorer (see :func:`compactor_selector`)."""
    return compactor_selector(scorer, name=name_of(scorer), counter=counter, **params)


def recency_selector(*, counter: Any = None) -> Selector:
    """The sliding window: system entries plus the most recent entries that fit
    (:func:`recency_window`); tool calls and their results kept or dropped together."""
    return _RecencySelector(counter)


def last_k_tool_results_selector(k: int = 3, *, counter: Any = None) -> Selector:
    """"Keep the last ``k`` tool results, clear the rest": older tool results keep their
    place but their content becomes ``[tool result cleared]``; then, if still over
    budget, the recency window. Named ``last<k>_tool_results``."""
    return _MaskingSelector(k, CLEARED, f"last{k}_tool_results", counter)


def observation_masking_selector(m: int = 10, *, counter: Any = None) -> Selector:
    """Observation masking: tool outputs older than the last ``m`` become
    ``[observation omitted]``; then, if still over budget, the recency window.
    Named ``observation_masking`` (with ``_<m>`` when ``m`` is not 10)."""
    return _MaskingSelector(m, OMITTED, "observation_masking" if m == 10 else f"observation_masking_{m}", counter)

