"""Recall benchmarks: how much of what an agent needs survives a token budget.

Three figures (DESIGN.md, "Benchmarks, and what recall means here"), each a pure
function that returns numbers and prints nothing:

* :func:`evidence_recall` with ``query_aware=True``: for each query with evidence,
  keep entries of the history (greedily by score) within a fraction of its tokens,
  the query known to the scorer; recall is the share of the query's evidence kept.
* the same with ``query_aware=False``: the selection is made before the question is
  known (what a memory has to do).
* :func:`reference_recall`: replay an agent's transcript; at each assistant step,
  compact the history before it with a *selector*; recall is the share of the
  step's references (values it uses that first appeared earlier) still visible.

:func:`run_benchmark` runs the applicable figures for a scorer and every baseline
in one process and returns a :class:`BenchReport` (rows, a rich table, MLflow-safe
metrics, a PNG plot, JSON). :func:`split_transcripts` is the held-out split that
``salience train`` and ``salience bench`` share. :func:`hindsight_auc` measures how
well a prior ranks the entries that later steps use, at the same history cuts
training uses.

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
import hashlib
import json
import math
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from salience.errors import ScorerError
from salience.tokens import TokenCounter, as_counter
from salience.transcript import Transcript

if TYPE_CHECKING:
    from rich.table import Table

__all__ = [
    "BASELINE_NAMES",
    "BENCH_COMPACTOR_PARAMS",
    "DEFAULT_BASELINES",
    "DEFAULT_FRACTIONS",
    "REFERENCE_ONLY_BASELINES",
    "BenchKind",
    "BenchReport",
    "BenchRow",
    "HindsightAUC",
    "RecallCurve",
    "Selector",
    "compactor_selector",
    "evidence_recall",
    "group_key",
    "hindsight_auc",
    "last_k_tool_results_selector",
    "observation_masking_selector",
    "pack_greedy",
    "recency_selector",
    "recency_window",
    "reference_recall",
    "run_benchmark",
    "scorer_selector",
    "split_transcripts",
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
#: Baselines that only exist as selectors (reference recall), not as scorers.
REFERENCE_ONLY_BASELINES: tuple[str, ...] = ("last3_tool_results", "observation_masking")
#: What :func:`run_benchmark` compares against by default.
DEFAULT_BASELINES: tuple[str, ...] = (
    "recency", "keyword", "bm25", "embedding", "fusion", "random", "oracle", *REFERENCE_ONLY_BASELINES,
)
#: Every baseline name :func:`run_benchmark` knows.
BASELINE_NAMES: tuple[str, ...] = tuple(sorted(DEFAULT_BASELINES))

#: Compactor parameters the benchmark's Compactor-based selectors use unless told
#: otherwise: only the system prompt is pinned, so every other entry is the scorer's
#: to choose and the tightest budgets (10% of a history) can be met; the default
#: pins (the last 4 entries, the last user turn) alone often exceed them.
BENCH_COMPACTOR_PARAMS: Mapping[str, Any] = {"pin_last": 0, "pin_last_user": False}

#: Placeholders the rule-based selectors put in place of a tool result's content.
CLEARED = "[tool result cleared]"
OMITTED = "[observation omitted]"

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
        """Recall at ``fraction``; ``KeyError`` naming the fractions measured otherwise."""
        for f, r in zip(self.fractions, self.recall):
            if math.isclose(f, fraction):
                return r
        raise KeyError(f"{self.method} {self.kind}: no recall at budget {fraction} (measured: {list(self.fractions)})")

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
class BenchRow:
    """One (method, figure, budget) result; ``macro`` and ``over_budget`` only for references."""

    method: str
    kind: str
    fraction: float
    recall: float
    n: int
    macro: float | None = None
    over_budget: int | None = None


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


_TITLES: dict[str, str] = {
    BenchKind.QUERY: "evidence recall, query-aware",
    BenchKind.AGNOSTIC: "evidence recall, query-agnostic",
    BenchKind.REFERENCE: "agent reference recall",
}


def _json_float(x: float) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def _pct_label(fraction: float) -> str:
    """``0.1 -> "10"``, ``0.025 -> "2p5"``: a budget for metric names."""
    pct = round(100 * fraction, 4)
    return str(int(pct)) if pct == int(pct) else str(pct).replace(".", "p")


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]+", "_", name).strip("_") or "method"


@dataclass(frozen=True, slots=True)
class BenchReport:
    """Every curve of one :func:`run_benchmark` call.

    ``scorer_name`` is the method name of the scorer under test (the others are
    baselines); ``skipped`` lists ``(method, kind, reason)`` for combinations that
    were asked for but could not be measured; ``seconds`` is the wall time.
    """

    curves: tuple[RecallCurve, ...]
    scorer_name: str = "salience"
    skipped: tuple[tuple[str, str, str], ...] = ()
    seconds: float = 0.0
    meta: Mapping[str, Any] = field(default_factory=dict)

    @property
    def rows(self) -> tuple[BenchRow, ...]:
        """One row per (method, kind, fraction), in run order."""
        out = []
        for c in self.curves:
            for i, (f, r) in enumerate(zip(c.fractions, c.recall)):
                out.append(BenchRow(
                    method=c.method, kind=c.kind, fraction=f, recall=r, n=c.n,
                    macro=c.macro[i] if c.macro else None,
                    over_budget=c.over_budget[i] if c.over_budget else None,
                ))
        return tuple(out)

    @property
    def kinds(self) -> list[str]:
        """The figures measured, in run order."""
        return list(dict.fromkeys(c.kind for c in self.curves))

    def curve(self, method: str, kind: str) -> RecallCurve:
        """The curve of ``method`` on ``kind``; ``KeyError`` listing what exists otherwise."""
        for c in self.curves:
            if c.method == method and c.kind == kind:
                return c
        have = sorted({(c.method, c.kind) for c in self.curves})
        raise KeyError(f"no curve for method {method!r} on {kind!r} (have: {have})")

    def metrics(self) -> dict[str, float]:
        """Flat MLflow-safe metrics.

        ``recall_<kind>_<pct>pct`` for the scorer under test and
        ``recall_<kind>_<pct>pct_<method>`` for each baseline (``recall_query_10pct``,
        ``recall_query_10pct_bm25``); for references also ``recall_reference_macro_<pct>pct``
        and ``over_budget_reference_<pct>pct`` (same suffixes); and ``n_<kind>`` (queries
        or steps). ``nan`` recalls are left out.
        """
        out: dict[str, float] = {}
        for c in self.curves:
            suffix = "" if c.method == self.scorer_name else f"_{_safe(c.method)}"
            out.setdefault(f"n_{c.kind}", float(c.n))
            for i, f in enumerate(c.fractions):
                pct = _pct_label(f)
                if math.isfinite(c.recall[i]):
                    out[f"recall_{c.kind}_{pct}pct{suffix}"] = float(c.recall[i])
                if c.macro and math.isfinite(c.macro[i]):
                    out[f"recall_{c.kind}_macro_{pct}pct{suffix}"] = float(c.macro[i])
                if c.over_budget:
                    out[f"over_budget_{c.kind}_{pct}pct{suffix}"] = float(c.over_budget[i])
        return out

    def table(self, kind: str | None = None) -> Table:
        """A rich table: one row per method, one column per (figure, budget), or only
        the columns of ``kind``.

        The scorer's row is bold; the best recall of each column (the oracle aside)
        is underlined; ``+k`` after a reference recall counts outputs over budget.
        """
        from rich.table import Table

        curves = [c for c in self.curves if kind is None or c.kind == kind]
        columns: list[tuple[str, float]] = []
        for c in curves:
            for f in c.fractions:
                if not any(k == c.kind and math.isclose(g, f) for k, g in columns):
                    columns.append((c.kind, f))
        methods = list(dict.fromkeys(c.method for c in curves))
        by = {(c.method, c.kind): c for c in curves}
        best: dict[tuple[str, float], float] = {}
        for col in columns:
            values = [by[(m, col[0])].as_dict().get(col[1], math.nan) for m in methods
                      if (m, col[0]) in by and m != "oracle"]
            finite = [v for v in values if math.isfinite(v)]
            if finite:
                best[col] = max(finite)
        ns = {c.kind: c.n for c in curves}
        units = {k: "steps" if k == BenchKind.REFERENCE else "queries" for k in ns}
        if kind is None:
            title = "Recall at budget (share of the history's tokens)"
            caption = "; ".join(f"{k}: n={ns[k]:,} {units[k]}" for k in ns)
        else:
            title = f"{_TITLES.get(kind, kind)} at budget (share of the history's tokens)"
            caption = "; ".join(f"n={ns[k]:,} {units[k]}" for k in ns)
        table = Table(title=title, caption=caption, title_justify="left", caption_justify="left",
                      min_width=len(title) + 4)
        table.add_column("method", no_wrap=True)
        for k, f in columns:
            pct = _pct_label(f).replace("p", ".")
            table.add_column(f"{pct}%" if kind is not None else f"{k}\n{pct}%", justify="right", no_wrap=True)
        for m in methods:
            cells = []
            for col in columns:
                curve = by.get((m, col[0]))
                value = math.nan if curve is None else curve.as_dict().get(col[1], math.nan)
                if not math.isfinite(value):
                    cells.append("-")
                    continue
                text = f"{value:.3f}"
                if curve is not None and curve.over_budget:
                    over = curve.over_budget[curve.fractions.index(col[1])]
                    if over:
                        text += f" +{over}"
                if col in best and m != "oracle" and math.isclose(value, best[col]):
                    text = f"[underline]{text}[/underline]"
                cells.append(text)
            table.add_row(m, *cells, style="bold" if m == self.scorer_name else None)
        return table

    def plot(self, path: str | Path) -> Path:
        """Write a PNG of recall against budget: one panel per figure, one line per method.

        The scorer's line is thick and drawn on top; the oracle's is dashed. Uses
        matplotlib's Agg backend (no display needed). Returns the path written.
        """
        import matplotlib

        matplotlib.use("Agg", force=True)
        import matplotlib.pyplot as plt

        path = Path(path)
        kinds = self.kinds
        if not kinds:
            raise ValueError("BenchReport.plot: nothing to plot (the report has no curves)")
        fig, axes = plt.subplots(1, len(kinds), figsize=(5.2 * len(kinds), 4.4), squeeze=False)
        methods = list(dict.fromkeys(c.method for c in self.curves))
        tab10 = plt.get_cmap("tab10")
        palette = [tab10(i) for i in (0, 1, 2, 4, 5, 6, 8, 9)]  # no red (the scorer's) nor gray (the oracle's)
        palette += [plt.get_cmap("Dark2")(i) for i in range(8)]
        colors: dict[str, Any] = {}
        j = 0
        for m in methods:
            if m == self.scorer_name:
                colors[m] = "crimson"
            elif m == "oracle":
                colors[m] = "gray"
            else:
                colors[m] = palette[j % len(palette)]
                j += 1
        for ax, kind in zip(axes[0], kinds):
            n = 0
            for c in self.curves:
                if c.kind != kind:
                    continue
                n = c.n
                xs = [100 * f for f in c.fractions]
                mine = c.method == self.scorer_name
                ax.plot(xs, c.recall, marker="o", label=c.method, color=colors[c.method],
                        linewidth=3.0 if mine else 1.4, zorder=10 if mine else 2,
                        linestyle="--" if c.method == "oracle" else "-")
            unit = "steps" if kind == BenchKind.REFERENCE else "queries"
            ax.set_title(f"{_TITLES.get(kind, kind)} (n={n:,} {unit})", fontsize=10)
            ax.set_xticks(sorted({100 * f for c in self.curves if c.kind == kind for f in c.fractions}))
            ax.set_xlabel("budget (% of history tokens)")
            ax.set_ylabel("recall")
            ax.set_ylim(-0.02, 1.02)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8, loc="best")
        fig.tight_layout()
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=110)
        plt.close(fig)
        return path

    def to_dict(self) -> dict[str, Any]:
        return {
            "scorer": self.scorer_name,
            "curves": [c.to_dict() for c in self.curves],
            "metrics": self.metrics(),
            "skipped": [list(s) for s in self.skipped],
            "seconds": round(self.seconds, 2),
            "meta": dict(self.meta),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BenchReport:
        """The inverse of :meth:`to_dict` (to table or plot a saved report again)."""
        return cls(curves=tuple(RecallCurve.from_dict(c) for c in data["curves"]),
                   scorer_name=data.get("scorer", "salience"),
                   skipped=tuple(tuple(s) for s in data.get("skipped", ())),  # type: ignore[misc]
                   seconds=float(data.get("seconds", 0.0)), meta=dict(data.get("meta", {})))

    @classmethod
    def from_json(cls, path: str | Path) -> BenchReport:
        """A report written by :meth:`to_json`."""
        return cls.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))

    def to_json(self, path: str | Path | None = None) -> str:
        """The report as JSON text (``nan`` as ``null``); also written to ``path`` if given."""
        text = json.dumps(self.to_dict(), indent=2, default=str)
        if path is not None:
            Path(path).write_text(text + "\n", encoding="utf-8")
        return text


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------


def check_fractions(fractions: Iterable[float], name: str = "fractions") -> tuple[float, ...]:
    """``fractions`` as a tuple of floats in (0, 1], else ``ValueError`` naming the bad one."""
    if isinstance(fractions, (int, float)):
        fractions = (fractions,)
    out = []
    for f in fractions:
        if isinstance(f, bool) or not isinstance(f, (int, float, np.floating)) or not 0.0 < float(f) <= 1.0:
            raise ValueError(f"{name}: each budget must be a share of the tokens in (0, 1] (got {f!r})")
        out.append(float(f))
    if not out:
        raise ValueError(f"{name}: at least one budget fraction is needed (got none)")
    return tuple(out)


def _name_of(obj: Any) -> str:
    name = getattr(obj, "name", None)
    return name if isinstance(name, str) and name else type(obj).__name__


def _scores(scorer: Any, transcript: Transcript, query: str | None) -> np.ndarray:
    raw = scorer.score(transcript) if query is None else scorer.score(transcript, query)
    scores = np.asarray(raw, dtype=np.float64)
    n = len(transcript.entries)
    if scores.shape != (n,):
        raise ScorerError(f"scorer {_name_of(scorer)}: score() must return shape ({n},) for transcript "
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
        raise ValueError(f"pack_greedy: scores and costs must be 1-d and of one length (got {s.shape} and {c.shape})")
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
    return RecallCurve(method=method or _name_of(scorer), kind=kind.value, fractions=fr, recall=recall, n=n)


# --------------------------------------------------------------------------
# selectors
# --------------------------------------------------------------------------


class Selector(Protocol):
    """Compacts a history to a token budget: ``selector(history, budget, query) -> Transcript``.

    The result must keep every tool result beside its call (it is a valid
    :class:`Transcript`) and should fit ``budget`` tokens.
    """

    name: str

    def __call__(self, history: Transcript, budget: int, query: str | None = None) -> Transcript: ...


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
            raise ValueError(f"{name}: the number of tool results to keep must be an int >= 0 (got {keep!r})")
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
    return _CompactorSelector(scorer, name or _name_of(scorer), counter, **params)


def scorer_selector(scorer: Any, *, counter: Any = None, **params: Any) -> Selector:
    """A baseline scorer (BM25, fusion, random, ...) as a selector through the Compactor,
    named after the scorer (see :func:`compactor_selector`)."""
    return compactor_selector(scorer, name=_name_of(scorer), counter=counter, **params)


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


# --------------------------------------------------------------------------
# reference recall
# --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Step:
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


def _reference_plan(transcripts: Iterable[Transcript], max_steps: int | None,
                    counter: TokenCounter) -> list[list[_Step]]:
    """Per transcript, the steps reference recall measures (possibly none)."""
    from salience.scorer.labels import step_references

    if max_steps is not None and (isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1):
        raise ValueError(f"max_steps must be a positive int or None (got {max_steps!r})")
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
            steps.append(_Step(history=history, refs=refs_, system_tokens=system, other_tokens=sum(costs) - system))
        plan.append(steps)
    return plan


def _visible(refs: Sequence[str], transcript: Transcript) -> int:
    text = "\n".join(e.text for e in transcript.entries).casefold()
    return sum(v.casefold() in text for v in refs)


def _reference_curve(selector: Selector, plan: list[list[_Step]], fractions: tuple[float, ...],
                     counter: TokenCounter, progress: ProgressFn | None) -> RecallCurve:
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
                    raise TypeError(f"selector {_name_of(selector)}: must return a Transcript "
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
        method=_name_of(selector), kind=BenchKind.REFERENCE.value, fractions=fractions,
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
    plan = _reference_plan(transcripts, max_steps, tc)
    return _reference_curve(selector, plan, fr, tc, progress)


# --------------------------------------------------------------------------
# hindsight AUC
# --------------------------------------------------------------------------


def hindsight_auc(scorer: Any, transcripts: Iterable[Transcript], cuts: int = 6, *,
                  progress: ProgressFn | None = None) -> HindsightAUC:
    """ROC AUC of the scorer's prior against what later steps used, at history cuts.

    Each transcript is cut before up to ``cuts`` assistant steps, evenly spread (the
    cut points training uses, :func:`salience.scorer.model.build_rows`); the scorer
    sees only the history before the cut, without a query; an entry of it is a
    positive when a step at or after the cut used one of its values. Which steps
    used an entry comes from ``meta["used_by"]`` (written by
    :func:`salience.scorer.labels.label`) or, where absent, is computed with
    :func:`~salience.scorer.labels.hindsight_labels` on the full transcript. The
    AUC pools every row; it is ``nan`` when the rows hold one class only.
    """
    from sklearn.metrics import roc_auc_score

    from salience.scorer.labels import hindsight_labels
    from salience.scorer.model import _cut_points  # the same cuts as training

    if isinstance(cuts, bool) or not isinstance(cuts, int) or cuts < 1:
        raise ValueError(f"hindsight_auc: cuts must be a positive int (got {cuts!r})")
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


# --------------------------------------------------------------------------
# split
# --------------------------------------------------------------------------


def group_key(transcript: Transcript) -> str:
    """What keeps transcripts together in a split: the task (``meta["task_id"]``,
    with the domain, so tau-bench's trials of one task share it), else the id.

    >>> from salience.transcript import Transcript
    >>> group_key(Transcript(id="tau-airline-3-1", domain="airline", meta={"task_id": 3}))
    'task:airline:3'
    >>> group_key(Transcript(id="locomo-26"))
    'id:locomo-26'
    """
    task = transcript.meta.get("task_id")
    if task is not None:
        return f"task:{transcript.domain or ''}:{task}"
    return f"id:{transcript.id}"


def split_transcripts(
    transcripts: Iterable[Transcript], test_size: float | int = 0.25, seed: int = 0
) -> tuple[list[Transcript], list[Transcript]]:
    """Split ``transcripts`` into ``(train, test)`` by group (:func:`group_key`).

    Deterministic: each group's place comes from a hash of ``seed`` and its key, so
    the same data and seed always give the same split, whatever the input order,
    and a transcript added later does not move the others' groups (except at the
    size boundary). ``test_size`` is a share of the groups in (0, 1) (rounded up,
    as scikit-learn does) or a number of groups; with two groups or more, each side
    gets at least one. Both lists keep the input order. ``salience train`` and
    ``salience bench`` use this split, so the same ``test_size`` and ``seed`` give
    a held-out set that training never saw.

    >>> from salience.transcript import Transcript
    >>> ts = [Transcript(id=f"t{i}") for i in range(6)]
    >>> train, test = split_transcripts(ts, 0.33, seed=0)
    >>> len(train), len(test)
    (4, 2)
    >>> split_transcripts(ts, 1.5)
    Traceback (most recent call last):
    ...
    ValueError: split_transcripts: test_size must be a share in (0, 1) or a number of groups >= 1 (got 1.5)
    """
    items = list(transcripts)
    bad = isinstance(test_size, bool) or not isinstance(test_size, (int, float))
    if not bad and isinstance(test_size, float):
        bad = not 0.0 < test_size < 1.0
    elif not bad:
        bad = test_size < 1
    if bad:
        raise ValueError(
            f"split_transcripts: test_size must be a share in (0, 1) or a number of groups >= 1 (got {test_size!r})"
        )
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"split_transcripts: seed must be an int (got {seed!r})")
    keys = [group_key(t) for t in items]
    groups = list(dict.fromkeys(keys))
    g = len(groups)
    if g < 2:
        return items, []
    n_test = math.ceil(test_size * g) if isinstance(test_size, float) else int(test_size)
    n_test = min(max(n_test, 1), g - 1)

    def rank(key: str) -> tuple[int, str]:
        digest = hashlib.blake2b(f"{seed}\x00{key}".encode(), digest_size=8).digest()
        return int.from_bytes(digest, "big"), key

    test_keys = set(sorted(groups, key=rank)[:n_test])
    train = [t for t, k in zip(items, keys) if k not in test_keys]
    test = [t for t, k in zip(items, keys) if k in test_keys]
    return train, test


# --------------------------------------------------------------------------
# the runner
# --------------------------------------------------------------------------


def _check_names(baselines: Iterable[str]) -> tuple[str, ...]:
    if isinstance(baselines, str):
        baselines = (baselines,)
    names = tuple(dict.fromkeys(baselines))
    unknown = [b for b in names if b not in BASELINE_NAMES]
    if unknown:
        raise ValueError(f"unknown baseline {unknown[0]!r}; expected some of {', '.join(BASELINE_NAMES)}")
    return names


def _check_kinds(kinds: Iterable[str]) -> tuple[BenchKind, ...]:
    if isinstance(kinds, str):
        kinds = (kinds,)
    out = []
    for k in kinds:
        try:
            out.append(BenchKind(k))
        except ValueError:
            allowed = ", ".join(x.value for x in BenchKind)
            raise ValueError(f"unknown benchmark kind {k!r}; expected some of {allowed}") from None
    if not out:
        raise ValueError("at least one benchmark kind is needed (got none)")
    return tuple(dict.fromkeys(out))


def _fractions_for(fractions: Any, kind: BenchKind) -> tuple[float, ...]:
    if fractions is None:
        return DEFAULT_FRACTIONS[kind]
    if isinstance(fractions, Mapping):
        return check_fractions(fractions.get(kind, fractions.get(kind.value, DEFAULT_FRACTIONS[kind])))
    return check_fractions(fractions)


def _reference_selector(name: str, counter: TokenCounter, params: Mapping[str, Any]) -> Selector | None:
    from salience.scorer.baselines import make_baseline

    if name == "recency":
        return recency_selector(counter=counter)
    if name == "last3_tool_results":
        return last_k_tool_results_selector(3, counter=counter)
    if name == "observation_masking":
        return observation_masking_selector(10, counter=counter)
    if name == "oracle":
        return None
    return scorer_selector(make_baseline(name), counter=counter, **params)


def run_benchmark(
    transcripts: Sequence[Transcript],
    scorer: Any,
    *,
    fractions: Iterable[float] | Mapping[str, Iterable[float]] | None = None,
    baselines: Iterable[str] = DEFAULT_BASELINES,
    kinds: Iterable[str] = tuple(BenchKind),
    scorer_name: str = "salience",
    counter: Any = None,
    max_steps: int | None = None,
    compactor_params: Mapping[str, Any] | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> BenchReport:
    """Run every applicable figure for ``scorer`` and each baseline, in one process.

    ``kinds``: some of ``"query"``, ``"agnostic"``, ``"reference"``. The evidence
    figures need transcripts whose queries list evidence; the reference figure
    needs assistant steps that reuse values of earlier non-system entries; a kind
    with no such transcript is left out (and listed in ``skipped``).
    ``fractions``: one sequence for every figure, a mapping by kind, or ``None``
    for :data:`DEFAULT_FRACTIONS`. ``baselines``: names from :data:`BASELINE_NAMES`.
    For the evidence figures each is a scorer (:func:`~salience.scorer.baselines.make_baseline`;
    ``last3_tool_results`` and ``observation_masking`` do not apply); for the reference
    figure ``recency`` is the sliding window (:func:`recency_selector`), the two rule
    baselines are :func:`last_k_tool_results_selector` and
    :func:`observation_masking_selector`, the other scorers go through the Compactor,
    and the oracle has no labels to read. The scorer itself goes through the
    Compactor for references (:func:`compactor_selector`, with ``compactor_params``
    over :data:`BENCH_COMPACTOR_PARAMS`, the same for the scorer and the baselines).
    ``max_steps``: at most that many steps per transcript for references. A baseline that raises a
    :class:`ScorerError` (the oracle without labels) is skipped with its reason.

    ``progress(description, done, total)`` is called as transcripts are done.
    Unknown kinds or baselines and bad fractions are a ``ValueError``.
    """
    from salience.scorer.baselines import make_baseline

    started = time.perf_counter()
    kinds_ = _check_kinds(kinds)
    names = _check_names(baselines)
    tc = as_counter(counter)
    transcripts = list(transcripts)
    skipped: list[tuple[str, str, str]] = []
    evidence_ts = [t for t in transcripts if any(q.evidence for q in t.queries)]
    jobs: list[tuple[BenchKind, str, Any, tuple[float, ...]]] = []  # kind, method, scorer/selector, fractions
    plan: list[list[_Step]] = []
    for kind in kinds_:
        fr = _fractions_for(fractions, kind)
        if kind is BenchKind.REFERENCE:
            plan = [steps for steps in _reference_plan(transcripts, max_steps, tc) if steps]
            if not plan:
                skipped.append(("*", kind.value, "no assistant step reuses a value of an earlier non-system entry"))
                continue
            params = dict(compactor_params or {})
            jobs.append((kind, scorer_name, compactor_selector(scorer, name=scorer_name, counter=tc, **params), fr))
            for name in names:
                sel = _reference_selector(name, tc, params)
                if sel is None:
                    skipped.append((name, kind.value, "not defined for references (no labels to read)"))
                    continue
                jobs.append((kind, name, sel, fr))
        else:
            if not evidence_ts:
                skipped.append(("*", kind.value, "no query lists evidence"))
                continue
            jobs.append((kind, scorer_name, scorer, fr))
            jobs.extend((kind, name, make_baseline(name), fr) for name in names if name not in REFERENCE_ONLY_BASELINES)
    sizes = [len(plan) if kind is BenchKind.REFERENCE else len(evidence_ts) for kind, *_ in jobs]
    total = sum(sizes)
    done = 0
    curves: list[RecallCurve] = []
    for (kind, name, obj, fr), size in zip(jobs, sizes):
        description = f"{kind.value}: {name}"
        base = done

        def tick(description: str = description) -> None:
            nonlocal done
            done += 1
            if progress is not None:
                progress(description, done, total)

        if progress is not None:
            progress(description, done, total)
        try:
            if kind is BenchKind.REFERENCE:
                curve = _reference_curve(obj, plan, fr, tc, tick)
            else:
                curve = evidence_recall(obj, evidence_ts, fr, query_aware=kind is BenchKind.QUERY, counter=tc,
                                        method=name, progress=tick)
        except ScorerError as exc:
            if name == scorer_name:
                raise
            skipped.append((name, kind.value, str(exc)))
            done = base + size
            if progress is not None:
                progress(description, done, total)
            continue
        curves.append(curve)
    meta = {"transcripts": len(transcripts), "with_evidence": len(evidence_ts),
            "with_references": len(plan), "kinds": [k.value for k in kinds_], "baselines": list(names)}
    return BenchReport(curves=tuple(curves), scorer_name=scorer_name, skipped=tuple(skipped),
                       seconds=time.perf_counter() - started, meta=meta)

