"""Per-domain tuning of the Compactor's thresholds: cross-validated random search for recall.

:func:`tune_profile` is what ``salience tune`` runs, without the printing. The scorer
is fixed (it is not retrained); what is chosen is how the
:class:`~salience.selector.compactor.Compactor` uses its scores, for one domain, at one
target token ratio.

Objective
---------
Recall at ``target`` (a share of the history's tokens), measured through the
Compactor itself:

* ``"reference"`` (agent reference recall, :func:`salience.bench.metrics.reference_recall`'s
  definition, with :func:`~salience.bench.selectors.compactor_selector`): at each
  assistant step, the history before it is compacted to its system tokens plus
  ``target`` times its other tokens; recall is the share of the step's references (values
  it uses that first appeared in an earlier non-system entry) still visible, pooled over
  the steps of a fold. Used when the domain's transcripts call tools.
* ``"evidence"`` (query-aware evidence recall through the Compactor, not greedy packing):
  for each query with evidence, the visible history is compacted to ``target`` times its
  tokens with the query's text given; recall is the share of its evidence entries kept
  whole, averaged over the queries of a fold. Used when no transcript calls tools and
  queries list evidence.

``metric="auto"`` picks as just said. A candidate whose pins alone exceed a budget gets
no credit for that step or query: with its default ``on_over_budget="raise"`` the
Compactor would raise a :class:`~salience.errors.BudgetError` there (these are counted
as ``over_budget``). Otherwise a candidate pinning everything would "win" while never
meeting the budget.

Cross-validation
----------------
The transcripts that have something to measure are grouped by
:func:`~salience.training.split.group_key` (a tau-bench task's trials stay together)
and the groups dealt into ``folds`` folds (at most one per group), in an order fixed by
a hash of ``seed`` and the group key, each to the fold with the fewest steps so far.
Every candidate is scored on every fold; the chosen one has the best mean over folds
(ties go to the earlier candidate, so the defaults win ties). ``max_steps`` caps the
steps (or queries) scored per fold, evenly spread over its transcripts.

Because choosing among many candidates on the same folds flatters the winner,
:class:`TuneResult` also holds a held-out estimate: for each fold, the candidate that
is best on the *other* folds, scored on that fold (nested cross-validation; the
defaults are fixed, so their held-out score is their plain fold score).

Search space
------------
:data:`SEARCH_SPACE` (random search; a drawn parameter takes one of its values
uniformly; duplicates are redrawn). Candidate 0 is always the Compactor's defaults
(:data:`DEFAULT_PARAMS`); candidate 1 (with ``trials >= 2``) the pins ``salience bench``
uses (:data:`~salience.bench.selectors.BENCH_COMPACTOR_PARAMS`: only the system prompt
pinned); the rest are drawn in turn as a fresh draw of every parameter, the bench
candidate with one or two parameters redrawn, and the defaults with one or two
redrawn (:func:`sample_candidates`). ``pin_last_user`` is searched too (off by default:
held out, pinning the last user turn lost recall at small budgets, where that turn alone
can take most of the budget). The candidates depend only on
``trials`` and ``seed``, never on scores, so the nested held-out figure stays honest.

Not tuned, and why: the phase policy and its budget shares (the default policy of the
transcripts' domain applies throughout, and the profile names it, ``"policy": "<domain>"``,
so that message lists without a domain get it too; its rules, per phase and tool type,
are too many to search at random on a few folds; a policy of your own goes into the
profile in its place, ``"policy": policy.as_dict()``, see
:meth:`~salience.selector.masking.PhasePolicy.as_dict`); the session's ``trigger``,
``min_removal``, ``restart_gain`` and ``cache_min`` (recall alone always prefers compacting as late and
as little as possible, and starting over at any gain; their cost is prefix-cache churn,
which this objective does not measure: ``benchmarks/bench_session.py`` prints both), so
profiles leave them at their defaults; ``pin_system``, ``solver``, ``on_over_budget`` and ``budget``.

>>> from salience.transcript import Entry, Transcript, ToolCall
>>> from salience.scorer.baselines import RecencyScorer
>>> def run(k):
...     calls = []
...     for j in range(4):
...         calls += [Entry(id=f"a{j}", role="assistant", content="",
...                         tool_calls=(ToolCall(id=f"c{j}", name="get_order", arguments='{"n": %d}' % j),)),
...                   Entry(id=f"r{j}", role="tool", tool_call_id=f"c{j}", name="get_order",
...                         content=f"order W{k}{j}0{j} status shipped " + "filler words here " * 30)]
...     return Transcript(id=f"t{k}", domain="retail", entries=(
...         Entry(id="s", role="system", content="You help with orders."),
...         Entry(id="u", role="user", content="Where are my orders?"), *calls,
...         Entry(id="f", role="assistant", content=f"Orders W{k}202 and W{k}303 shipped.")))
>>> result = tune_profile([run(k) for k in range(4)], RecencyScorer(), trials=4, folds=2, seed=0)
>>> result.metric, result.folds, result.trials
('reference', 2, 4)
>>> result.after.mean >= result.before.mean
True
>>> sorted(result.profile(scorer="recency")["compactor"]) == sorted([*DEFAULT_PARAMS, "policy"])
True
>>> result.profile()["compactor"]["policy"]  # the policy the candidates ran with: the transcripts' domain
'retail'
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np

from salience.errors import BudgetError, ParameterError, ParameterTypeError, SalienceError
from salience.tokens import TokenCounter, as_counter
from salience.training.tune_result import (
    DEFAULT_PARAMS,
    TUNED,
    CandidateScore,
    TuneResult,
    frozen_params,
    plain_params,
)
from salience.transcript import Transcript

__all__ = [
    "DEFAULT_PARAMS",
    "METRICS",
    "SEARCH_SPACE",
    "CandidateScore",
    "TuneResult",
    "sample_candidates",
    "select_domain",
    "tune_profile",
]

#: What a tuned profile may set, and the values random search draws from.
#: ``retain_trim`` and ``retain_stub`` become ``retain={"trim": ..., "stub": ...}``
#: (the stub share is capped at the trim share, as the Compactor requires).
SEARCH_SPACE: Mapping[str, tuple[Any, ...]] = MappingProxyType({
    "pin_last": (0, 1, 2, 3, 4, 6, 8),
    "pin_last_user": (True, False),
    "critical": (None, 0.8, 0.9, 0.95, 0.99),
    "max_entry_tokens": (None, 500, 1000, 2000, 4000),
    "trim_keep": (0.1, 0.15, 0.25, 0.35, 0.5),
    "stub_values": (0, 4, 8, 12, 16, 24),
    "retain_trim": (0.4, 0.5, 0.6, 0.75, 0.9),
    "retain_stub": (0.05, 0.1, 0.15, 0.25, 0.35),
    "digest": (0.0, 0.1, 0.2, 0.3, 0.5),
})

#: The figures :func:`tune_profile` can optimise.
METRICS: tuple[str, ...] = ("auto", "reference", "evidence")

Progress = Callable[[str, int, int], None]


# --------------------------------------------------------------------------
# candidates
# --------------------------------------------------------------------------


def _draw(rng: np.random.Generator, base: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A random candidate: every parameter drawn afresh, or (with ``base``) one or two of
    ``base``'s parameters redrawn (``retain`` counts as one)."""
    pick = {k: v[int(rng.integers(len(v)))] for k, v in SEARCH_SPACE.items()}
    trim = float(pick.pop("retain_trim"))
    stub = min(float(pick.pop("retain_stub")), trim)
    pick["retain"] = {"trim": trim, "stub": stub}
    if base is None:
        return {k: pick[k] for k in TUNED}
    chosen = set(rng.choice(len(TUNED), size=int(rng.integers(1, 3)), replace=False).tolist())
    out = plain_params(base)
    for i in chosen:
        out[TUNED[i]] = pick[TUNED[i]]
    return {k: out[k] for k in TUNED}


def sample_candidates(trials: int, seed: int = 0) -> list[tuple[str, dict[str, Any]]]:
    """``trials`` named candidates: the defaults, then the bench pins, then random draws.

    The random draws cycle through three kinds: every parameter drawn from
    :data:`SEARCH_SPACE`; the bench candidate with one or two parameters redrawn; the
    defaults with one or two parameters redrawn (the pins decide most at tight
    budgets, so the other parameters are explored around both pin settings too).
    Deterministic for a seed, independent of any score; no two candidates are equal.

    >>> [name for name, _ in sample_candidates(4, seed=1)]
    ['default', 'bench', 'trial 2', 'trial 3']
    >>> sample_candidates(1)[0][1] == dict(DEFAULT_PARAMS) | {"retain": dict(DEFAULT_PARAMS["retain"])}
    True
    """
    from salience.bench.selectors import BENCH_COMPACTOR_PARAMS

    _check_int("trials", trials, 1)
    default = plain_params(DEFAULT_PARAMS)
    out = [("default", default)]
    bench = {**default, **{k: v for k, v in BENCH_COMPACTOR_PARAMS.items() if k in default}}
    if trials >= 2 and bench != default:
        out.append(("bench", bench))
    rng = np.random.default_rng(seed)
    seen = [json.dumps(p, sort_keys=True) for _, p in out]
    bases: tuple[Mapping[str, Any] | None, ...] = (None, bench, default)
    attempts = 0
    while len(out) < trials and attempts < 100 * trials:
        cand = _draw(rng, bases[attempts % len(bases)])
        attempts += 1
        key = json.dumps(cand, sort_keys=True)
        if key in seen:
            continue
        seen.append(key)
        out.append((f"trial {len(out)}", cand))
    return out


# --------------------------------------------------------------------------
# evaluation
# --------------------------------------------------------------------------


class _MemoScorer:
    """Scores each history once for all candidates (the scorer is fixed while tuning)."""

    __slots__ = ("_memo", "name", "scorer")

    def __init__(self, scorer: Any) -> None:
        self.scorer = scorer
        self.name = getattr(scorer, "name", None) or type(scorer).__name__
        self._memo: dict[int, tuple[Transcript, dict[str | None, np.ndarray]]] = {}

    def score(self, transcript: Transcript, query: str | None = None) -> np.ndarray:
        slot = self._memo.get(id(transcript))
        if slot is None or slot[0] is not transcript:
            slot = (transcript, {})
            self._memo[id(transcript)] = slot
        if query not in slot[1]:
            raw = self.scorer.score(transcript) if query is None else self.scorer.score(transcript, query)
            scores = np.array(raw, dtype=float)
            scores.setflags(write=False)
            slot[1][query] = scores
        return slot[1][query]


class _StrictSelector:
    """:func:`~salience.bench.selectors.compactor_selector` with every tuned parameter set and
    ``on_over_budget="raise"``: where the pins alone exceed the budget, only the system
    entries stay (the step scores 0) and ``over`` counts it."""

    __slots__ = ("compactor", "name", "over")

    def __init__(self, scorer: Any, counter: TokenCounter, params: Mapping[str, Any]) -> None:
        from salience.selector.compactor import Compactor

        self.compactor = Compactor(scorer=scorer, counter=counter, on_over_budget="raise", **plain_params(params))
        self.name = "tune"
        self.over = 0

    def __call__(self, history: Transcript, budget: int, query: str | None = None) -> Transcript:
        try:
            return self.compactor.compact(history, budget=budget, query=query, format="transcript").transcript
        except BudgetError:
            self.over += 1
            return Transcript(id=history.id, entries=tuple(e for e in history.entries if e.role == "system"),
                              domain=history.domain, meta=history.meta)


@dataclass(frozen=True, slots=True)
class _Query:
    view: Transcript
    text: str
    evidence: tuple[str, ...]
    tokens: int


def _query_units(t: Transcript, counter: TokenCounter) -> list[_Query]:
    views: dict[int, tuple[Transcript, int]] = {}
    out = []
    for q in t.queries:
        if not q.evidence:
            continue
        at = len(t.entries) if q.at is None else min(q.at, len(t.entries))
        if at not in views:
            view = t if at == len(t.entries) else Transcript(id=f"{t.id}@{at}", entries=t.entries[:at],
                                                             domain=t.domain, meta=t.meta)
            views[at] = (view, sum(counter.count_entries(view.entries)))
        view, tokens = views[at]
        ids = {e.id for e in view.entries}
        evidence = tuple(x for x in dict.fromkeys(q.evidence) if x in ids)
        if evidence:
            out.append(_Query(view=view, text=q.text, evidence=evidence, tokens=tokens))
    return out


def _evidence_fold(selector: _StrictSelector, units: Sequence[_Query], target: float,
                   tick: Callable[[], None]) -> float:
    compactor = selector.compactor
    total = 0.0
    for u in units:
        budget = max(1, int(target * u.tokens))
        try:
            kept = set(compactor.compact(u.view, budget=budget, query=u.text, format="transcript").kept)
        except BudgetError:
            selector.over += 1
            kept = set()
        total += sum(x in kept for x in u.evidence) / len(u.evidence)
        tick()
    return total / len(units) if units else math.nan


def _spread(items: list[Any], k: int | None) -> list[Any]:
    if k is None or len(items) <= k:
        return items
    picks = sorted(set(np.linspace(0, len(items) - 1, k).round().astype(int).tolist()))
    return [items[i] for i in picks]


def _fold_of_groups(keys: Sequence[str], sizes: Sequence[int], folds: int, seed: int) -> dict[str, int]:
    """Each group's fold: groups in an order fixed by a hash of ``seed`` and their key, each
    to the fold with the fewest units so far (so folds measure similar amounts)."""
    weight: dict[str, int] = {}
    for key, size in zip(keys, sizes):
        weight[key] = weight.get(key, 0) + size

    def rank(key: str) -> tuple[int, str]:
        digest = hashlib.blake2b(f"{seed}\x00{key}".encode(), digest_size=8).digest()
        return int.from_bytes(digest, "big"), key

    load = [0] * folds
    out: dict[str, int] = {}
    for key in sorted(weight, key=rank):
        f = int(np.argmin(load))
        out[key] = f
        load[f] += weight[key]
    return out


def _check_int(name: str, value: Any, minimum: int, *, none: bool = False) -> int | None:
    if value is None and none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ParameterError(f"tune_profile: {name} must be an int >= {minimum}{' or None' if none else ''} "
                             f"(got {value!r})")
    return int(value)


def select_domain(transcripts: Iterable[Transcript], domain: str) -> list[Transcript]:
    """The transcripts whose ``domain`` is ``domain``; a :class:`SalienceError` listing the
    domains found when there is none.

    >>> select_domain([Transcript(id="a", domain="airline")], "retail")
    Traceback (most recent call last):
    ...
    salience.errors.SalienceError: no transcript has domain 'retail' (domains found: airline)
    """
    items = list(transcripts)
    kept = [t for t in items if t.domain == domain]
    if not kept:
        found = sorted({str(t.domain) for t in items})
        raise SalienceError(f"no transcript has domain {domain!r} (domains found: {', '.join(found) or 'none'})")
    return kept


def tune_profile(
    transcripts: Sequence[Transcript],
    scorer: Any,
    *,
    target: float = 0.25,
    trials: int = 24,
    folds: int = 3,
    seed: int = 0,
    max_steps: int | None = 200,
    metric: str = "auto",
    domain: str | None = None,
    counter: Any = None,
    progress: Progress | None = None,
) -> TuneResult:
    """Choose Compactor parameters for ``transcripts`` by cross-validated random search.

    See the module docstring for the objective, the folds and the search space.
    ``scorer``: any object with ``score(transcript, query=None)``, fixed throughout.
    ``target``: the budget as a share of the history's tokens, in (0, 1]. ``trials``:
    candidates scored, the defaults included (>= 1). ``folds``: cross-validation
    folds (>= 1; fewer when there are fewer groups). ``max_steps``: at most this many
    steps (or queries) scored per fold, or None for all. ``metric``: ``"auto"``,
    ``"reference"`` or ``"evidence"``. ``domain`` only labels the result.
    ``progress(description, done, total)`` is called as steps are scored.

    Raises:
        ParameterError: a parameter out of range (the message names it; also a ValueError).
        SalienceError: nothing to measure (no step reuses an earlier non-system value,
            no query lists evidence), or the chosen ``metric`` has no data.
        ScorerError: the scorer's scores are malformed.
    """
    from salience.bench.metrics import reference_curve, reference_plan
    from salience.training.split import group_key

    started = time.perf_counter()
    if isinstance(target, bool) or not isinstance(target, (int, float)) or not 0.0 < float(target) <= 1.0:
        raise ParameterError(f"tune_profile: target must be a share of the tokens in (0, 1] (got {target!r})")
    target = float(target)
    trials = _check_int("trials", trials, 1)  # type: ignore[assignment]
    folds = _check_int("folds", folds, 1)  # type: ignore[assignment]
    max_steps = _check_int("max_steps", max_steps, 1, none=True)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise ParameterTypeError(f"tune_profile: seed must be an int (got {seed!r})")
    if metric not in METRICS:
        raise ParameterError(f"tune_profile: metric must be one of {', '.join(map(repr, METRICS))} (got {metric!r})")
    if not callable(getattr(scorer, "score", None)):
        raise ParameterTypeError(f"tune_profile: scorer must have a score(transcript, query=None) method "
                                 f"(got a {type(scorer).__name__})")
    items = list(transcripts)
    if not items:
        raise SalienceError("tune_profile: no transcripts to tune on")
    tc = as_counter(counter)
    note = progress or (lambda description, done, total: None)

    # what each transcript offers to measure
    note("finding steps", 0, len(items))
    calls_tools = any(e.role == "tool" or e.tool_calls for t in items for e in t.entries)
    with_queries = any(q.evidence for t in items for q in t.queries)
    kind = metric
    if kind == "auto":
        kind = "reference" if calls_tools or not with_queries else "evidence"
    # a first cap per transcript keeps the plan small; the per-fold cap comes after
    per_transcript = None if max_steps is None else max(2, math.ceil(max_steps * folds / len(items)))
    units: list[list[Any]]
    if kind == "reference":
        units = [list(steps) for steps in reference_plan(items, per_transcript, tc)]
    else:
        units = [_spread(_query_units(t, tc), per_transcript) for t in items]
    note("finding steps", len(items), len(items))
    measured = [(t, u) for t, u in zip(items, units) if u]
    if not measured:
        what = ("no assistant step reuses a value of an earlier non-system entry" if kind == "reference"
                else "no query lists evidence")
        raise SalienceError(f"nothing to tune on: {what} in the {len(items)} transcripts"
                            f"{f' of domain {domain!r}' if domain else ''}")

    domains = {t.domain for t, _ in measured}  # one domain: its policy is the one the candidates run with
    # folds by group; a fixed order (by group, then id) makes the result independent of the input order
    measured.sort(key=lambda tu: (group_key(tu[0]), tu[0].id))
    keys = [group_key(t) for t, _ in measured]
    k = min(folds, len(set(keys)))
    fold_of = _fold_of_groups(keys, [len(u) for _, u in measured], k, int(seed))
    fold_units: list[list[Any]] = [[] for _ in range(k)]
    for key, (_, u) in zip(keys, measured):
        fold_units[fold_of[key]].extend(u)
    fold_units = [_spread(u, max_steps) for u in fold_units]

    # score every candidate on every fold
    memo = _MemoScorer(scorer)
    candidates = sample_candidates(trials, int(seed))
    total = len(candidates) * sum(len(u) for u in fold_units)
    done = 0
    scored: list[CandidateScore] = []
    for name, params in candidates:
        description = f"{name}"

        def tick(description: str = description) -> None:
            nonlocal done
            done += 1
            note(description, done, total)

        note(description, done, total)
        recalls, overs = [], []
        for u in fold_units:
            selector = _StrictSelector(memo, tc, params)
            if kind == "reference":
                curve = reference_curve(selector, [[s] for s in u], (target,), tc, tick)
                recalls.append(float(curve.recall[0]))
            else:
                recalls.append(_evidence_fold(selector, u, target, tick))
            overs.append(selector.over)
        scored.append(CandidateScore(name=name, params=frozen_params(params), folds=tuple(recalls),
                                     over_budget=tuple(overs), units=tuple(len(u) for u in fold_units)))

    means = [c.mean for c in scored]
    best = int(np.argmax(means))  # the first best: the defaults win ties
    heldout: list[float] = []
    heldout_choice: list[str] = []
    for f in range(k):
        if k == 1:
            heldout.append(math.nan)
            heldout_choice.append("")
            continue
        others = [float(np.mean([c.folds[g] for g in range(k) if g != f])) for c in scored]
        j = int(np.argmax(others))
        heldout.append(scored[j].folds[f])
        heldout_choice.append(scored[j].name)
    return TuneResult(
        domain=domain,
        metric=kind,
        target=target,
        params=scored[best].params,
        before=scored[0],
        after=scored[best],
        heldout=tuple(heldout),
        heldout_choice=tuple(heldout_choice),
        candidates=tuple(scored),
        seed=int(seed),
        max_steps=max_steps,
        transcripts=len(measured),
        seconds=time.perf_counter() - started,
        policy=next(iter(domains)) if len(domains) == 1 else None,
    )
