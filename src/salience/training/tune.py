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
redrawn (:func:`sample_candidates`). ``pin_last_user`` is searched too: at tight ratios
the last user turn alone can exceed the budget. The candidates depend only on
``trials`` and ``seed``, never on scores, so the nested held-out figure stays honest.

Not tuned, and why: the phase policy and its budget shares (the default policy of the
transcripts' domain applies throughout, and the profile names it, ``"policy": "<domain>"``,
so that message lists without a domain get it too; its rules, per phase and tool type,
are too many to search at random on a few folds; a policy of your own goes into the
profile in its place, ``"policy": policy.as_dict()``, see
:meth:`~salience.selector.masking.PhasePolicy.as_dict`); the session's ``trigger`` and
``min_removal`` (recall alone always prefers compacting as late and as little as
possible, ``trigger=1``; their cost is prefix-cache churn, which this objective does
not measure), so profiles leave them at their defaults; ``pin_system``, ``solver``, ``on_over_budget`` and ``budget``.

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
import inspect
import json
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import numpy as np

from salience._version import __version__
from salience.errors import BudgetError, ParameterError, ParameterTypeError, SalienceError
from salience.tokens import TokenCounter, as_counter
from salience.transcript import Transcript

if TYPE_CHECKING:
    from rich.table import Table

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
})

#: The figures :func:`tune_profile` can optimise.
METRICS: tuple[str, ...] = ("auto", "reference", "evidence")

#: Compactor parameters a profile written by tune sets.
_TUNED = ("pin_last", "pin_last_user", "critical", "max_entry_tokens", "trim_keep", "stub_values", "retain")


def _compactor_defaults() -> dict[str, Any]:
    from salience.selector.compactor import Compactor
    from salience.selector.params import DEFAULT_RETAIN

    sig = inspect.signature(Compactor.__init__)
    out = {name: sig.parameters[name].default for name in _TUNED}
    out["retain"] = dict(DEFAULT_RETAIN) if out["retain"] is None else dict(out["retain"])
    return out


#: The Compactor's own defaults for the tuned parameters (the "before" candidate).
DEFAULT_PARAMS: Mapping[str, Any] = MappingProxyType(_compactor_defaults())

Progress = Callable[[str, int, int], None]


# --------------------------------------------------------------------------
# results
# --------------------------------------------------------------------------


def _freeze(params: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType({k: (MappingProxyType(dict(v)) if isinstance(v, Mapping) else v)
                             for k, v in params.items()})


def _plain(params: Mapping[str, Any]) -> dict[str, Any]:
    """JSON-ready copy of candidate parameters (nested mappings as dicts)."""
    return {k: (dict(v) if isinstance(v, Mapping) else v) for k, v in params.items()}


@dataclass(frozen=True, slots=True)
class CandidateScore:
    """One candidate's recall on every fold.

    ``name``: ``"default"``, ``"bench"`` or ``"trial <i>"``. ``params``: the Compactor
    parameters. ``folds``: recall per fold. ``over_budget``: per fold, the steps or
    queries where its pins alone exceeded the budget (scored 0). ``units``: per fold,
    how many steps or queries were scored.
    """

    name: str
    params: Mapping[str, Any]
    folds: tuple[float, ...]
    over_budget: tuple[int, ...]
    units: tuple[int, ...]

    @property
    def mean(self) -> float:
        """Mean recall over the folds."""
        return float(np.mean(self.folds)) if self.folds else math.nan

    @property
    def std(self) -> float:
        """Standard deviation of the fold recalls (``ddof=1``; 0 for a single fold)."""
        return float(np.std(self.folds, ddof=1)) if len(self.folds) > 1 else 0.0

    @property
    def over_budget_share(self) -> float:
        """Share of the scored steps or queries that were over budget."""
        total = sum(self.units)
        return sum(self.over_budget) / total if total else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "params": _plain(self.params), "folds": [round(f, 6) for f in self.folds],
                "mean": round(self.mean, 6), "std": round(self.std, 6), "over_budget": list(self.over_budget),
                "units": list(self.units)}


@dataclass(frozen=True, slots=True)
class TuneResult:
    """What :func:`tune_profile` found.

    ``params``: the chosen Compactor parameters (JSON-ready). ``before``: the defaults'
    scores; ``after``: the chosen candidate's. ``heldout``: per fold, the recall of the
    candidate chosen on the other folds (``nan`` with a single fold), and
    ``heldout_choice`` its name. ``candidates``: every candidate in search order.
    ``policy``: the phase policy the candidates were scored with, by domain name, when
    all the transcripts share one domain (each transcript's own domain decided it, as the
    Compactor's default does); :meth:`profile` writes it so that message lists without a
    domain get the same policy.
    """

    domain: str | None
    metric: str
    target: float
    params: Mapping[str, Any]
    before: CandidateScore
    after: CandidateScore
    heldout: tuple[float, ...]
    heldout_choice: tuple[str, ...]
    candidates: tuple[CandidateScore, ...]
    seed: int = 0
    max_steps: int | None = None
    transcripts: int = 0
    seconds: float = 0.0
    policy: str | None = None

    @property
    def trials(self) -> int:
        """How many candidates were scored (the defaults included)."""
        return len(self.candidates)

    @property
    def folds(self) -> int:
        return len(self.before.folds)

    @property
    def heldout_after(self) -> float:
        """Nested-CV recall of the tuning procedure (``nan`` with a single fold)."""
        finite = [h for h in self.heldout if math.isfinite(h)]
        return float(np.mean(finite)) if finite else math.nan

    @property
    def heldout_before(self) -> float:
        """The defaults' recall on the same folds (nothing is chosen for them)."""
        return self.before.mean

    @property
    def changed(self) -> dict[str, tuple[Any, Any]]:
        """``{parameter: (default, tuned)}`` for the parameters the tuning changed."""
        return {k: (_plain(DEFAULT_PARAMS)[k], v) for k, v in _plain(self.params).items()
                if _plain(DEFAULT_PARAMS).get(k) != v}

    def profile(self, *, scorer: str | None = None) -> dict[str, Any]:
        """The profile file's content: ``Compactor(profile=...)`` reads its ``"compactor"`` key."""
        return {
            "domain": self.domain,
            "compactor": {**_plain(self.params), **({"policy": self.policy} if self.policy else {})},
            "target": self.target,
            "metric": f"{self.metric}_recall",
            "before": round(self.before.mean, 6),
            "after": round(self.after.mean, 6),
            "before_std": round(self.before.std, 6),
            "after_std": round(self.after.std, 6),
            "heldout_before": _round(self.heldout_before),
            "heldout_after": _round(self.heldout_after),
            "folds": self.folds,
            "trials": self.trials,
            "seed": self.seed,
            "max_steps": self.max_steps,
            "scorer": scorer if scorer is not None else "unknown",
            "salience_version": __version__,
        }

    def write(self, path: str | Path, *, scorer: str | None = None) -> Path:
        """Write :meth:`profile` as JSON to ``path`` (folders created); returns the path."""
        path = Path(path)
        if path.parent != Path():
            path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.profile(scorer=scorer), indent=2) + "\n", encoding="utf-8")
        return path

    def metrics(self) -> dict[str, float]:
        """MLflow-safe metrics: recall before and after (mean, std, held-out, per fold)."""
        out = {
            "recall_before": self.before.mean,
            "recall_after": self.after.mean,
            "recall_before_std": self.before.std,
            "recall_after_std": self.after.std,
            "heldout_recall_before": self.heldout_before,
            "heldout_recall_after": self.heldout_after,
            "over_budget_share_before": self.before.over_budget_share,
            "over_budget_share_after": self.after.over_budget_share,
            "folds": float(self.folds),
            "trials": float(self.trials),
            "units": float(sum(self.before.units)),
            "seconds": self.seconds,
        }
        for i, (b, a) in enumerate(zip(self.before.folds, self.after.folds), 1):
            out[f"recall_before_fold{i}"] = b
            out[f"recall_after_fold{i}"] = a
        return {k: float(v) for k, v in out.items() if math.isfinite(v)}

    def table(self) -> Table:
        """Before (defaults) and after (tuned): recall per fold, mean ± std, held-out, over budget."""
        from rich.table import Table

        unit = "steps" if self.metric == "reference" else "queries"
        sizes = ", ".join(f"{n:,}" for n in self.before.units)
        caption = (f"{unit} per fold: {sizes}; {self.trials} candidates; held-out: each fold scored with the "
                   f"candidate chosen on the other folds; over budget: pins alone over the budget (scored 0)")
        title = (f"{self.metric} recall at {_pct(self.target)} of the tokens"
                 f"{f', domain {self.domain}' if self.domain else ''}")
        table = Table(title=title, caption=caption, title_justify="left", caption_justify="left")
        table.add_column("params", no_wrap=True)
        for i in range(1, self.folds + 1):
            table.add_column(f"fold {i}", justify="right", no_wrap=True)
        table.add_column("mean ± std", justify="right", no_wrap=True)
        table.add_column("held-out", justify="right", no_wrap=True)
        table.add_column("over budget", justify="right", no_wrap=True)
        rows = [("default", self.before, self.heldout_before), ("tuned", self.after, self.heldout_after)]
        for label, c, held in rows:
            table.add_row(label, *(f"{f:.3f}" for f in c.folds), f"{c.mean:.3f} ± {c.std:.3f}",
                          "-" if not math.isfinite(held) else f"{held:.3f}", _pct(c.over_budget_share),
                          style="bold" if label == "tuned" else None)
        return table

    def params_table(self) -> Table:
        """Each tuned parameter: default and tuned value (changed ones bold)."""
        from rich.table import Table

        table = Table(title="Compactor parameters", title_justify="left")
        for col in ("parameter", "default", "tuned"):
            table.add_column(col)
        default = _plain(DEFAULT_PARAMS)
        for key, value in _plain(self.params).items():
            same = default.get(key) == value
            table.add_row(key, _show(default.get(key)), _show(value), style=None if same else "bold")
        return table


def _round(x: float) -> float | None:
    return round(x, 6) if math.isfinite(x) else None


def _pct(x: float) -> str:
    text = f"{100 * x:.1f}".rstrip("0").rstrip(".")
    return f"{text}%"


def _show(value: Any) -> str:
    if isinstance(value, Mapping):
        return ", ".join(f"{k} {v}" for k, v in value.items())
    return "None" if value is None else str(value)


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
        return {k: pick[k] for k in _TUNED}
    chosen = set(rng.choice(len(_TUNED), size=int(rng.integers(1, 3)), replace=False).tolist())
    out = _plain(base)
    for i in chosen:
        out[_TUNED[i]] = pick[_TUNED[i]]
    return {k: out[k] for k in _TUNED}


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
    default = _plain(DEFAULT_PARAMS)
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

        self.compactor = Compactor(scorer=scorer, counter=counter, on_over_budget="raise", **_plain(params))
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
        scored.append(CandidateScore(name=name, params=_freeze(params), folds=tuple(recalls),
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
