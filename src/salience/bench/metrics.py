"""The recall figures: how much of what an agent needs survives a token budget.

Three figures (DESIGN.md, "Benchmarks, and what recall means here"), each a pure
function that returns numbers and prints nothing:

* :func:`evidence_recall` with ``query_aware=True``: for each query with evidence,
  keep entries of the history (greedily by score, :func:`pack_greedy`) within a
  fraction of its tokens, the query known to the scorer; recall is the share of the
  query's evidence kept.
* the same with ``query_aware=False``: the selection is made before the question is
  known (what a memory has to do).
* :func:`reference_recall`: replay an agent's transcript; at each assistant step,
  compact the history before it with a :class:`Selector`; recall is the share of the
  step's references (values it uses that first appeared earlier) still visible.
  :func:`reference_plan` and :func:`reference_curve` are its two halves, for callers
  (``salience tune``) that replay one plan for many selectors.

:func:`hindsight_auc` measures how well a prior ranks the entries that later steps
use, at the same history cuts training uses. The selectors themselves live in
:mod:`salience.bench.selectors`, the report in :mod:`salience.bench.report`.

>>> from salience.transcript import Entry, Query, Transcript
>>> t = Transcript(id="t", entries=[Entry(id=f"e{i}", role="user", content=f"fact number {i}")
...                                 for i in range(10)],
...                queries=[Query("which fact?", evidence=["e2"])])
>>> from salience.scorer.baselines import OracleScorer, RecencyScorer
>>> words = lambda text: len(text.split())
>>> evidence_recall(OracleScorer(), [t], (0.1, 0.5), counter=words).as_dict()
{0.1: 1.0, 0.5: 1.0}
>>> evidence_recall(RecencyScorer(), [t], (0.1, 0.5), counter=words).as_dict()
{0.1: 0.0, 0.5: 0.0}
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from salience.errors import ParameterError, ParameterKeyError, ParameterTypeError, ScorerError
from salience.tokens import TokenCounter, as_counter
from salience.transcript import Transcript

__all__ = [
    "DEFAULT_FRACTIONS",
    "BenchKind",
    "HindsightAUC",
    "ProgressFn",
    "RecallCurve",
    "ReferenceStep",
    "Selector",
    "check_fractions",
    "evidence_recall",
    "hindsight_auc",
    "name_of",
    "pack_greedy",
    "reference_curve",
    "reference_plan",
    "reference_recall",
]


class BenchKind(enum.StrEnum):
    """The three recall figures."""

    QUERY = "query"  #: evidence recall, the query known when selecting
    AGNOSTIC = "agnostic"  #: evidence recall, the selection made before the query
    REFERENCE = "reference"  #: agent reference recall, selection by a selector at each step


#: Budget fractions each figure uses unless told otherwise.
DEFAULT_FRACTIONS: Mapping[BenchKind, tuple[float, ...]] = {
    BenchKind.QUERY: (0.05, 0.10, 0.25),
    BenchKind.AGNOSTIC: (0.05, 0.10, 0.25),
    BenchKind.REFERENCE: (0.10, 0.25),
}


#: Called once per transcript done (``progress()``).
ProgressFn = Callable[[], None]

# --------------------------------------------------------------------------
# results
# --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RecallCurve:
    """Recall of one method on one figure, at each budget fraction.

    ``n`` counts what recall averages over: queries (evidence figures) or assistant
    steps (reference figure); ``recall`` is ``nan`` where ``n`` is 0. For the
    reference figure, ``recall`` is pooled over every reference of every step
    (micro average), ``macro`` is the mean of the per-step recalls, ``refs`` the
    number of references, and ``over_budget`` how many selector outputs exceeded
    their budget at each fraction (such an output earns no recall for its step).
    """

    method: str
    kind: str
    fractions: tuple[float, ...]
    recall: tuple[float, ...]
    n: int
    refs: int = 0
    macro: tuple[float, ...] = ()
    over_budget: tuple[int, ...] = ()

    def as_dict(self) -> dict[float, float]:
        """``{fraction: recall}``."""
        return dict(zip(self.fractions, self.recall))

    def at(self, fraction: float) -> float:
        """Recall at ``fraction``; ``ParameterKeyError`` (a ``KeyError``) naming the fractions measured otherwise."""
        for f, r in zip(self.fractions, self.recall):
            if math.isclose(f, fraction):
                return r
        raise ParameterKeyError(
            f"{self.method} {self.kind}: no recall at budget {fraction} (measured: {list(self.fractions)})"
        )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RecallCurve:
        """The inverse of :meth:`to_dict` (``null`` recalls come back as ``nan``)."""

        def floats(key: str) -> tuple[float, ...]:
            return tuple(math.nan if x is None else float(x) for x in data.get(key, ()))

        return cls(method=data["method"], kind=data["kind"], fractions=floats("fractions"), recall=floats("recall"),
                   n=int(data["n"]), refs=int(data.get("refs", 0)), macro=floats("macro"),
                   over_budget=tuple(int(x) for x in data.get("over_budget", ())))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"method": self.method, "kind": self.kind, "fractions": list(self.fractions),
                               "recall": [_json_float(r) for r in self.recall], "n": self.n}
        if self.kind == BenchKind.REFERENCE:
            out.update(refs=self.refs, macro=[_json_float(r) for r in self.macro], over_budget=list(self.over_budget))
        return out


@dataclass(frozen=True, slots=True)
class HindsightAUC:
    """ROC AUC of a prior against hindsight labels at history cuts (:func:`hindsight_auc`).

    ``rows`` entries were scored over ``histories`` cuts, ``positives`` of them used later.
    """

    auc: float
    rows: int
    positives: int
    histories: int

    def __float__(self) -> float:
        return self.auc


def _json_float(x: float) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)



# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------


def check_fractions(fractions: Iterable[float], name: str = "fractions") -> tuple[float, ...]:
    """``fractions`` as a tuple of floats in (0, 1], else ``ParameterError`` naming the bad one."""
    if isinstance(fractions, (int, float)):
        fractions = (fractions,)
    out = []
    for f in fractions:
        if isinstance(f, bool) or not isinstance(f, (int, float, np.floating)) or not 0.0 < float(f) <= 1.0:
            raise ParameterError(f"{name}: each budget must be a share of the tokens in (0, 1] (got {f!r})")
        out.append(float(f))
    if not out:
        raise ParameterError(f"{name}: at least one budget fraction is needed (got none)")
    return tuple(out)


def name_of(obj: Any) -> str:
    """What a curve calls ``obj``: its ``name`` attribute when it is a non-empty string,
    else its class name."""
    name = getattr(obj, "name", None)
    return name if isinstance(name, str) and name else type(obj).__name__


def _scores(scorer: Any, transcript: Transcript, query: str | None) -> np.ndarray:
    raw = scorer.score(transcript) if query is None else scorer.score(transcript, query)
    scores = np.asarray(raw, dtype=np.float64)
    n = len(transcript.entries)
    if scores.shape != (n,):
        raise ScorerError(f"scorer {name_of(scorer)}: score() must return shape ({n},) for transcript "
                          f"{transcript.id!r} (got shape {scores.shape})")
    return np.nan_to_num(scores, nan=0.0)


def pack_greedy(scores: Sequence[float] | np.ndarray, costs: Sequence[int] | np.ndarray, budget: int) -> np.ndarray:
    """Which entries to keep: highest score first, ties to the later entry, skipping
    any that no longer fits (smaller ones after it may still go in).

    Returns a boolean mask; the kept costs sum to at most ``budget``.

    >>> pack_greedy([0.9, 0.5, 0.5, 0.1], [5, 3, 3, 1], 7).tolist()
    [True, False, False, True]
    >>> pack_greedy([0.2, 0.5, 0.5, 0.1], [5, 3, 3, 1], 7).tolist()
    [False, True, True, True]
    """
    s = np.asarray(scores, dtype=np.float64)
    c = np.asarray(costs, dtype=np.int64)
    if s.shape != c.shape or s.ndim != 1:
        raise ParameterError(
            f"pack_greedy: scores and costs must be 1-d and of one length (got {s.shape} and {c.shape})"
        )
    order = np.lexsort((-np.arange(len(s)), -s))
    keep = np.zeros(len(s), dtype=bool)
    left = int(budget)
    for i in order:
        if c[i] <= left:
            keep[i] = True
            left -= int(c[i])
    return keep


def _prefix(transcript: Transcript, at: int | None) -> Transcript:
    """The transcript as it stood with ``at`` entries, with the queries that fit in it."""
    if at is None or at >= len(transcript.entries):
        return transcript
    visible = transcript.entries[:at]
    ids = {e.id for e in visible}
    queries = tuple(q for q in transcript.queries
                    if (q.at is None or q.at <= at) and all(x in ids for x in q.evidence))
    return Transcript(id=f"{transcript.id}@{at}", entries=visible, domain=transcript.domain,
                      queries=queries, meta=transcript.meta)


# --------------------------------------------------------------------------
# evidence recall
# --------------------------------------------------------------------------


def evidence_recall(
    scorer: Any,
    transcripts: Iterable[Transcript],
    fractions: Iterable[float] = (0.05, 0.10, 0.25),
    *,
    query_aware: bool = True,
    counter: Any = None,
    method: str | None = None,
    progress: ProgressFn | None = None,
) -> RecallCurve:
    """Evidence recall at budget, averaged over queries.

    For each query with evidence: the visible history is ``entries[:query.at]``
    (all of them when ``at`` is None); its budget is ``fraction`` times the visible
    entries' tokens (:meth:`TokenCounter.count_entry`, rounded down); the scorer
    scores the visible history, with the query's text when ``query_aware``, else
    once per (transcript, ``at``) without a query, reused for all its queries.
    :func:`pack_greedy` keeps entries by score within the budget, and recall is the
    share of the query's evidence ids (those inside the visible history) that were
    kept. Queries with no evidence in the visible history are left out.

    ``counter``: anything :func:`~salience.tokens.as_counter` takes. ``method``
    names the curve (default: the scorer's ``name``, else its class name).
    ``progress`` is called once per transcript. Returns a :class:`RecallCurve`
    (``kind`` ``"query"`` or ``"agnostic"``); ``.as_dict()`` gives ``{fraction: recall}``.
    """
    fr = check_fractions(fractions)
    tc = as_counter(counter)
    hits = np.zeros(len(fr))
    n = 0
    for t in transcripts:
        prior: dict[int | None, np.ndarray] = {}
        views: dict[int | None, tuple[Transcript, np.ndarray]] = {}
        for q in t.queries:
            if not q.evidence:
                continue
            at = None if q.at is None or q.at >= len(t.entries) else q.at
            if at not in views:
                view = _prefix(t, at)
                views[at] = (view, np.asarray(tc.count_entries(view.entries), dtype=np.int64))
            view, costs = views[at]
            ids = [e.id for e in view.entries]
            position = {x: i for i, x in enumerate(ids)}
            evidence = [position[x] for x in dict.fromkeys(q.evidence) if x in position]
            if not evidence:
                continue
            if query_aware:
                scores = _scores(scorer, view, q.text)
            else:
                if at not in prior:
                    prior[at] = _scores(scorer, view, None)
                scores = prior[at]
            total = int(costs.sum())
            for k, f in enumerate(fr):
                keep = pack_greedy(scores, costs, int(f * total))
                hits[k] += keep[evidence].mean()
            n += 1
        if progress is not None:
            progress()
    recall = tuple(float(h / n) if n else math.nan for h in hits)
    kind = BenchKind.QUERY if query_aware else BenchKind.AGNOSTIC
    return RecallCurve(method=method or name_of(scorer), kind=kind.value, fractions=fr, recall=recall, n=n)


# --------------------------------------------------------------------------
# reference recall
# --------------------------------------------------------------------------


class Selector(Protocol):
    """Compacts a history to a token budget: ``selector(history, budget, query) -> Transcript``.

    The result must keep every tool result beside its call (it is a valid
    :class:`Transcript`) and should fit ``budget`` tokens.
    """

    name: str

    def __call__(self, history: Transcript, budget: int, query: str | None = None) -> Transcript: ...



@dataclass(frozen=True, slots=True)
class ReferenceStep:
    """One assistant step reference recall measures (:func:`reference_plan`).

    ``history`` is the transcript before the step, ``refs`` the values the step uses
    that first appeared in an earlier non-system entry (each once, case-insensitively),
    and the history's tokens are split into ``system_tokens`` and ``other_tokens``
    (the budget is the former plus a share of the latter).
    """

    history: Transcript
    refs: tuple[str, ...]  # values, each once (case-insensitively)
    system_tokens: int
    other_tokens: int


def _spread(items: list[Any], k: int | None) -> list[Any]:
    """At most ``k`` of ``items``, evenly spread (the first and the last included)."""
    if k is None or len(items) <= k:
        return items
    if k <= 0:
        return []
    picks = sorted(set(np.linspace(0, len(items) - 1, k).round().astype(int).tolist()))
    return [items[i] for i in picks]


def reference_plan(transcripts: Iterable[Transcript], max_steps: int | None,
                    counter: TokenCounter) -> list[list[ReferenceStep]]:
    """Per transcript, the steps reference recall measures (possibly none).

    The steps are those :func:`reference_recall` describes, at most ``max_steps`` per
    transcript (evenly spread), with their tokens counted by ``counter``. A plan is
    built once and replayed for every selector (:func:`reference_curve`).
    """
    from salience.scorer.labels import step_references

    if max_steps is not None and (isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1):
        raise ParameterError(f"max_steps must be a positive int or None (got {max_steps!r})")
    plan = []
    for t in transcripts:
        entries = t.entries
        roles = {e.id: e.role for e in entries}
        candidates = []
        for sr in step_references(t):
            refs: dict[str, str] = {}
            for value, source in sr.refs:
                if roles.get(source) == "system":
                    continue
                refs.setdefault(value.casefold(), value)
            if refs and sr.step > 0:
                candidates.append((sr.step, tuple(refs.values())))
        steps = []
        for i, refs_ in _spread(candidates, max_steps):
            history = Transcript(id=f"{t.id}@{i}", entries=entries[:i], domain=t.domain, meta=t.meta)
            costs = counter.count_entries(history.entries)
            system = sum(c for c, e in zip(costs, history.entries) if e.role == "system")
            steps.append(ReferenceStep(history=history, refs=refs_, system_tokens=system,
                                       other_tokens=sum(costs) - system))
        plan.append(steps)
    return plan


def _visible(refs: Sequence[str], transcript: Transcript) -> int:
    text = "\n".join(e.text for e in transcript.entries).casefold()
    return sum(v.casefold() in text for v in refs)


def reference_curve(selector: Selector, plan: list[list[ReferenceStep]], fractions: tuple[float, ...],
                    counter: TokenCounter, progress: ProgressFn | None = None) -> RecallCurve:
    """Reference recall of ``selector`` over a :func:`reference_plan`, at each of
    ``fractions`` (already checked, see :func:`check_fractions`).

    ``progress`` is called once per transcript of the plan. See :func:`reference_recall`
    for what is measured; this is its loop, for callers that replay one plan many times.
    """
    seen = np.zeros(len(fractions))
    macro = np.zeros(len(fractions))
    over = np.zeros(len(fractions), dtype=int)
    steps = refs = 0
    for transcript_steps in plan:
        for step in transcript_steps:
            steps += 1
            refs += len(step.refs)
            for k, f in enumerate(fractions):
                budget = max(1, step.system_tokens + int(f * step.other_tokens))
                out = selector(step.history, budget, None)
                if not isinstance(out, Transcript):
                    raise ParameterTypeError(f"selector {name_of(selector)}: must return a Transcript "
                                             f"(got {type(out).__name__})")
                if sum(counter.count_entries(out.entries)) > budget:
                    over[k] += 1  # an output over the budget earns nothing for this step
                    continue
                v = _visible(step.refs, out)
                seen[k] += v
                macro[k] += v / len(step.refs)
        if progress is not None:
            progress()
    return RecallCurve(
        method=name_of(selector), kind=BenchKind.REFERENCE.value, fractions=fractions,
        recall=tuple(float(s / refs) if refs else math.nan for s in seen), n=steps, refs=refs,
        macro=tuple(float(m / steps) if steps else math.nan for m in macro),
        over_budget=tuple(int(o) for o in over),
    )


def reference_recall(
    selector: Selector,
    transcripts: Iterable[Transcript],
    fractions: Iterable[float] = (0.10, 0.25),
    *,
    counter: Any = None,
    max_steps: int | None = None,
    progress: ProgressFn | None = None,
) -> RecallCurve:
    """Agent reference recall: how many of the values each step uses are still in sight.

    For every assistant step (index ``i`` in the entries) of every transcript, the
    history is ``entries[:i]``; the step's references are the values it uses that
    first appeared in an earlier entry
    (:func:`salience.scorer.labels.step_references`), except those whose source is
    a system entry: every method keeps the system prompt (it is pinned), so they
    would say nothing. Steps without references are skipped; ``max_steps`` keeps at
    most that many steps per transcript, evenly spread.

    The budget is the history's system tokens plus ``fraction`` times its other
    tokens. ``selector(history, budget, None)`` returns the compacted history; a
    reference is *visible* when its value occurs (case-insensitively) in the text
    of the compacted entries (content and tool call arguments, so a stub that
    quotes a value keeps it in sight). Recall is pooled over all references of all
    steps (micro average); ``macro`` averages the per-step recalls. Outputs over
    budget (by ``counter``) are counted in ``over_budget`` and earn nothing: a
    selector cannot buy recall with tokens it was not given.
    """
    fr = check_fractions(fractions)
    tc = as_counter(counter)
    plan = reference_plan(transcripts, max_steps, tc)
    return reference_curve(selector, plan, fr, tc, progress)


# --------------------------------------------------------------------------
# hindsight AUC
# --------------------------------------------------------------------------


def hindsight_auc(scorer: Any, transcripts: Iterable[Transcript], cuts: int = 6, *,
                  progress: ProgressFn | None = None) -> HindsightAUC:
    """ROC AUC of the scorer's prior against what later steps used, at history cuts.

    Each transcript is cut before up to ``cuts`` assistant steps, evenly spread (the
    cut points training uses, :func:`salience.scorer.rows.build_rows`); the scorer
    sees only the history before the cut, without a query; an entry of it is a
    positive when a step at or after the cut used one of its values. Which steps
    used an entry comes from ``meta["used_by"]`` (written by
    :func:`salience.scorer.labels.label`) or, where absent, is computed with
    :func:`~salience.scorer.labels.hindsight_labels` on the full transcript. The
    AUC pools every row; it is ``nan`` when the rows hold one class only.
    """
    from sklearn.metrics import roc_auc_score

    from salience.scorer.labels import hindsight_labels
    from salience.scorer.rows import _cut_points  # the same cuts as training

    if isinstance(cuts, bool) or not isinstance(cuts, int) or cuts < 1:
        raise ParameterError(f"hindsight_auc: cuts must be a positive int (got {cuts!r})")
    ys: list[np.ndarray] = []
    ps: list[np.ndarray] = []
    histories = 0
    for t in transcripts:
        entries = t.entries
        if any("used_by" in e.meta for e in entries):
            used = [tuple(e.meta.get("used_by") or ()) for e in entries]
        else:
            used = [lab.used_by for lab in hindsight_labels(t)]
        index = {e.id: i for i, e in enumerate(entries)}
        steps = [i for i, e in enumerate(entries) if e.role == "assistant" and i > 0]
        for cut in _cut_points(steps, cuts):
            history = Transcript(id=f"{t.id}@{cut}", entries=entries[:cut], domain=t.domain, meta=t.meta)
            ys.append(np.array([any(index.get(s, -1) >= cut for s in used[i]) for i in range(cut)], dtype=bool))
            ps.append(_scores(scorer, history, None))
            histories += 1
        if progress is not None:
            progress()
    y = np.concatenate(ys) if ys else np.zeros(0, dtype=bool)
    p = np.concatenate(ps) if ps else np.zeros(0)
    auc = float(roc_auc_score(y, p)) if 0 < y.sum() < len(y) else math.nan
    return HindsightAUC(auc=auc, rows=len(y), positives=int(y.sum()), histories=histories)

