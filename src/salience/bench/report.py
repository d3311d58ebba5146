"""What a benchmark run returns: :class:`BenchReport`, its rows, tables and plots.

:class:`BenchReport` holds every :class:`~salience.bench.metrics.RecallCurve` of one
:func:`~salience.bench.runner.run_benchmark` call and turns them into rows
(:class:`BenchRow`), flat MLflow-safe metrics, a rich table, a matplotlib PNG (Agg
backend) and JSON. rich and matplotlib are imported only by the methods that draw.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from salience.bench.metrics import BenchKind, RecallCurve
from salience.errors import ParameterError, ParameterKeyError

if TYPE_CHECKING:
    from rich.table import Table

__all__ = ["BenchReport", "BenchRow", "plot_timings"]


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


_TITLES: dict[str, str] = {
    BenchKind.QUERY: "evidence recall, query-aware",
    BenchKind.AGNOSTIC: "evidence recall, query-agnostic",
    BenchKind.REFERENCE: "agent reference recall",
}


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
        """The curve of ``method`` on ``kind``; ``ParameterKeyError`` (a ``KeyError``) listing what exists otherwise."""
        for c in self.curves:
            if c.method == method and c.kind == kind:
                return c
        have = sorted({(c.method, c.kind) for c in self.curves})
        raise ParameterKeyError(f"no curve for method {method!r} on {kind!r} (have: {have})")

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
            raise ParameterError("BenchReport.plot: nothing to plot (the report has no curves)")
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


def plot_timings(
    rows: Sequence[Mapping[str, Any]],
    path: str | Path,
    series: Sequence[tuple[str, str, str]],
    *,
    xlabel: str,
    ylabel: str,
    title: str,
) -> Path:
    """Write a log-log PNG of time against history size: one line per ``(key, label, style)``
    of ``series``, ``row["entries"]`` on x and ``row[key]`` on y. Returns the path written."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    path = Path(path)
    sizes = [r["entries"] for r in rows]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for key, label, style in series:
        ax.plot(sizes, [r[key] for r in rows], style, label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
