"""Pick the agent model by leave-one-data-set-out recall (issue #14), not in-domain AUC.

For each candidate (an estimator and a row weighting) and each of the five shared
tool-use sets, a scorer is trained the way ``benchmarks/bench_unseen.py`` trains its
held-out scorers (the other four sets plus ``data/``, labelled by ``prepare_transcripts``,
the same 25% group split with seed 0, no embeddings, 3 folds of isotonic calibration)
and the set left out is replayed with ``Compactor(scorer=<it>)`` and no other parameter
beside the real sliding window (:func:`salience.bench.independent.evaluate`, at most 6
steps per transcript, system + 10% / + 25%).

It prints, per candidate, salience minus the window per held-out domain, the mean and
the worst, for the independent and "ours" reference definitions, with the number of
references behind each delta (one reference of ToolTalk's 466 is 0.002), and writes
``benchmarks/out/sweep.json``. Features are computed once per transcript and shared by
the candidates (the feature extractor has no fitted state). Row weights by domain are
this script's own (:class:`WeightedScorer`): no candidate that needs them was kept, so the
library has no such parameter. Not part of the tests::

    python benchmarks/sweep_lodo.py [--candidates base,balanced] [--domains tooltalk,api-bank]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

try:
    import salience
except ImportError:  # running from a checkout without installing
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    import salience

from salience import Compactor, ImportanceScorer, Transcript, load_transcripts
from salience.bench.independent import baseline_selectors, compactor_selector, evaluate
from salience.scorer import model as model_module
from salience.scorer.features import FeatureExtractor
from salience.training.split import split_transcripts
from salience.training.train import prepare_transcripts

ROOT = Path(__file__).resolve().parents[1]
DOMAINS = ("tau-bench-airline", "mint", "swe-agent", "tooltalk", "api-bank")
OUT = ROOT / "benchmarks" / "out"
FRACTIONS = (0.10, 0.25)
DEFINITIONS = ("independent", "ours")


def _hgb(**params: Any) -> Any:
    from sklearn.ensemble import HistGradientBoostingClassifier

    base = {"learning_rate": 0.06, "max_iter": 250, "max_leaf_nodes": 31, "min_samples_leaf": 40,
            "l2_regularization": 1.0, "early_stopping": False, "random_state": 0}
    base.update(params)
    return HistGradientBoostingClassifier(**base)


def _monotonic() -> dict[str, int]:
    """Features whose rise should never lower the score: recency and what the agent has
    not acted on yet raise it; being superseded or repeated later lowers it."""
    return {"position": 1, "log_entries_after": -1, "log_steps_after": -1, "is_last_user": 1,
            "superseded": -1, "dup_later": -1, "pending_handles": 1, "pending_share": 1,
            "latest_call_handles": 1}


def _monotonic_hgb() -> Any:
    """The default trees, constrained on :func:`_monotonic`'s features; the query model's
    extra columns are left free."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    from salience.scorer.columns import BASE_FEATURES

    class MonotonicTrees(HistGradientBoostingClassifier):  # type: ignore[misc]
        def fit(self, X: Any, y: Any, sample_weight: Any = None) -> Any:
            signs = _monotonic()
            cst = [signs.get(name, 0) for name in BASE_FEATURES]
            self.monotonic_cst = cst + [0] * (X.shape[1] - len(cst))
            return super().fit(X, y, sample_weight=sample_weight)

    est = MonotonicTrees()
    est.set_params(**_hgb().get_params())
    return est


def _vote() -> Any:
    from sklearn.ensemble import VotingClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    return VotingClassifier([("linear", make_pipeline(StandardScaler(), LogisticRegression(C=0.1, max_iter=2000))),
                             ("trees", _hgb())], voting="soft")


#: name -> (description, estimator factory or None for the default, domain weight exponent or
#: None, other ImportanceScorer parameters). The exponent ``a`` gives each transcript domain a
#: total weight proportional to its row count to the power ``a`` (1: rows as they come, 0: every
#: domain alike; :func:`salience.training.train.domain_weights`).
Candidate = tuple[str, Callable[[], Any] | None, float | None, dict[str, Any]]
CANDIDATES: dict[str, Candidate] = {
    "base": ("the default: 31 leaves, 250 iterations at 0.06, min_samples_leaf 40, l2 1", None, None, {}),
    "regularised": ("15 leaves, 200 iterations at 0.05, min_samples_leaf 200, l2 5",
                    lambda: _hgb(max_leaf_nodes=15, max_iter=200, learning_rate=0.05, min_samples_leaf=200,
                                 l2_regularization=5.0), None, {}),
    "shallow": ("depth 3, 200 iterations at 0.05, min_samples_leaf 100",
                lambda: _hgb(max_depth=3, max_leaf_nodes=None, max_iter=200, learning_rate=0.05,
                             min_samples_leaf=100), None, {}),
    "sqrt-domains": ("the default, each domain weighted by the square root of its rows", None, 0.5, {}),
    "equal-domains": ("the default, every domain weighted alike", None, 0.0, {}),
    "monotonic": ("the default with monotonic constraints on recency, pending and superseded features",
                  _monotonic_hgb, None, {}),
    "vote": ("a soft vote of a logistic regression (C 0.1, standardised) and the default trees", _vote, None, {}),
    "sigmoid": ("the default trees, calibrated by a sigmoid (Platt) instead of isotonic", None, None,
                {"calibration": "sigmoid"}),
    "cuts-12": ("the default, 12 history cuts per transcript instead of 6", None, None, {"cut_points": 12}),
    "cuts-24": ("the default, 24 history cuts per transcript", None, None, {"cut_points": 24}),
    "cuts-12-regularised": ("12 cuts and the regularised trees",
                            lambda: _hgb(max_leaf_nodes=15, max_iter=200, learning_rate=0.05, min_samples_leaf=200,
                                         l2_regularization=5.0), None, {"cut_points": 12}),
    # not a candidate, the noise floor: the base model on another 75% of the training groups
    "base-split-1": ("the base model, trained on the 75% of groups that split seed 1 keeps (noise floor)",
                     None, None, {"split_seed": 1}),
    "base-split-2": ("the same with split seed 2", None, None, {"split_seed": 2}),
    # the best candidate on the same two splits: is its edge over base there too?
    "cuts-12-split-1": ("12 cuts, split seed 1", None, None, {"cut_points": 12, "split_seed": 1}),
    "cuts-12-split-2": ("12 cuts, split seed 2", None, None, {"cut_points": 12, "split_seed": 2}),
}


# --------------------------------------------------------------------------
# features once per transcript
# --------------------------------------------------------------------------

_ORIGINAL_BUILD_ROWS = model_module.build_rows
_ROWS: dict[tuple[int, bool, int], Any] = {}


def _cached_build_rows(transcripts: Sequence[Transcript], features: FeatureExtractor, *, query: bool,
                       cut_points: int = 6, progress: Callable[[int], None] | None = None) -> Any:
    """``build_rows``, each transcript's rows computed once (the objects live across folds)."""
    parts = []
    for t in transcripts:
        key = (id(t), query, cut_points)
        if key not in _ROWS:
            _ROWS[key] = _ORIGINAL_BUILD_ROWS([t], features, query=query, cut_points=cut_points)
        parts.append(_ROWS[key])
    width = parts[0].X.shape[1] if parts else 0
    X = np.vstack([p.X for p in parts]) if parts else np.zeros((0, width))
    y = np.concatenate([p.y for p in parts]) if parts else np.zeros(0, dtype=np.int8)
    g = np.concatenate([np.full(len(p.y), i) for i, p in enumerate(parts)]) if parts else np.zeros(0, dtype=int)
    return model_module.TrainingRows(X, y, g)


# --------------------------------------------------------------------------
# row weights by domain
# --------------------------------------------------------------------------


def domain_weights(transcripts: Sequence[Transcript], exponent: float) -> np.ndarray:
    """One weight per transcript, so that each transcript domain's rows weigh in total in
    proportion to their number to the power ``exponent`` (1: as they come; 0: every domain
    alike), with a mean row weight of 1. ``transcripts`` carry their rows' count in ``_ROWS``."""
    rows = np.array([len(_ROWS[(id(t), False, _CUTS)].y) for t in transcripts], dtype=float)
    keys = [t.domain or "" for t in transcripts]
    per_domain: dict[str, float] = {}
    for k, n in zip(keys, rows):
        per_domain[k] = per_domain.get(k, 0.0) + n
    w = np.array([per_domain[k] ** exponent / per_domain[k] if per_domain[k] else 0.0 for k in keys])
    return w * (rows.sum() / float((w * rows).sum()))


_CUTS = 6


class WeightedScorer(ImportanceScorer):
    """An ImportanceScorer whose estimators fit with a weight per transcript on every row
    (the library has no such parameter: this overrides its private ``_fit_folds``, as it
    stands on this branch, with ``sample_weight`` passed to each fit)."""

    weights_: np.ndarray | None = None

    def _fit_folds(self, rows: Any, groups: np.ndarray, oof: np.ndarray, prefix: str) -> tuple[Any, dict[str, float]]:
        from sklearn.model_selection import GroupKFold

        w = None if self.weights_ is None else self.weights_[rows.groups]

        def fit(idx: Any) -> Any:
            extra = {} if w is None else {"sample_weight": w[idx]}
            return self._new_estimator().fit(rows.X[idx], rows.y[idx], **extra)

        if len(groups) >= 2:
            for tr, te in GroupKFold(n_splits=min(self.cv, len(groups))).split(rows.X, rows.y, rows.groups):
                if 0 < rows.y[tr].sum() < len(tr):
                    oof[te] = model_module._predict(fit(tr), rows.X[te])
        model = fit(slice(None))
        ok = ~np.isnan(oof)
        metrics: dict[str, float] = {}
        if ok.sum() and 0 < rows.y[ok].sum() < ok.sum():
            metrics = model_module._classification_metrics(rows.y[ok], oof[ok], prefix)
            if self.calibration_ is not None:
                model = model_module._Calibrated(model, model_module._calibrator(self.calibration_, oof[ok],
                                                                                 rows.y[ok]))
        return model, metrics


# --------------------------------------------------------------------------
# the sweep
# --------------------------------------------------------------------------


def train(candidate: Candidate, data: Sequence[Transcript]) -> ImportanceScorer:
    _, factory, exponent, params = candidate
    params = dict(params)
    train_set, _ = split_transcripts(data, 0.25, seed=params.pop("split_seed", 0))
    kind = ImportanceScorer if exponent is None else WeightedScorer
    scorer = kind(estimator=None if factory is None else factory(),
                  features=FeatureExtractor(use_embeddings=False), cv=3, random_state=0, **params)
    if isinstance(scorer, WeightedScorer):
        assert exponent is not None and scorer.cut_points == _CUTS
        _cached_build_rows(train_set, FeatureExtractor(use_embeddings=False).fit(), query=False)
        scorer.weights_ = domain_weights(train_set, exponent)
    return scorer.fit(train_set)


def _recall(result: Mapping[str, Any], definition: str) -> dict[str, Any]:
    r = result[definition]
    return {"micro": r["micro"], "refs": r["refs"], "seen": r["seen"]}


def run(names: Sequence[str], domains: Sequence[str], data_dir: Path, max_steps: int | None,
        out: Path) -> dict[str, Any]:
    model_module.build_rows = _cached_build_rows  # type: ignore[assignment]
    started = time.perf_counter()
    labelled: dict[str, list[Transcript]] = {}
    for d in DOMAINS:
        labelled[d], _ = prepare_transcripts(load_transcripts(data_dir / d))
    labelled["data"], _ = prepare_transcripts(load_transcripts(ROOT / "data"))
    held: dict[str, list[Transcript]] = {d: load_transcripts(data_dir / d) for d in domains}
    print(f"{time.strftime('%H:%M:%S')} salience {salience.__version__}: loaded and labelled in "
          f"{time.perf_counter() - started:.0f} s", flush=True)
    results: dict[str, Any] = json.loads(out.read_text()) if out.exists() else {}
    window = baseline_selectors()["window"]
    for name in names:
        for d in domains:
            t0 = time.perf_counter()
            data = [t for other in DOMAINS if other != d for t in labelled[other]] + labelled["data"]
            scorer = train(CANDIDATES[name], data)
            t1 = time.perf_counter()
            report = evaluate(held[d], {"salience": compactor_selector(Compactor(scorer=scorer)), "window": window},
                              FRACTIONS, max_steps=max_steps, reference="window").to_dict()
            cell: dict[str, Any] = {}
            for r in report["results"]:
                cell.setdefault(r["method"], {})[str(r["fraction"])] = {k: _recall(r, k) for k in DEFINITIONS}
            results.setdefault(name, {})[d] = cell
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
            deltas = "  ".join(f"{k[:5]} " + " / ".join(f"{_delta(cell, k, f):+.3f}" for f in FRACTIONS)
                               for k in DEFINITIONS if _delta(cell, k, FRACTIONS[0]) == _delta(cell, k, FRACTIONS[0]))
            print(f"{time.strftime('%H:%M:%S')} {name:14s} {d:18s} train {t1 - t0:5.0f} s, "
                  f"evaluate {time.perf_counter() - t1:5.0f} s  {deltas}", flush=True)
    return results


def _delta(cell: Mapping[str, Any], definition: str, fraction: float) -> float:
    s = cell["salience"][str(fraction)][definition]["micro"]
    w = cell["window"][str(fraction)][definition]["micro"]
    return float("nan") if s is None or w is None else s - w


def _stats(results: Mapping[str, Any], name: str, definition: str, fraction: float) -> tuple[float, float, int]:
    """Mean and worst of salience - window over the domains with references, and the
    references kept beyond the base candidate, summed."""
    deltas, gained = [], 0
    for d in DOMAINS:
        cell = results.get(name, {}).get(d)
        if cell is None:
            continue
        v = _delta(cell, definition, fraction)
        if v == v:
            deltas.append(v)
        base = results.get("base", {}).get(d)
        if base is not None:
            gained += (cell["salience"][str(fraction)][definition]["seen"]
                       - base["salience"][str(fraction)][definition]["seen"])
    return (float(np.mean(deltas)) if deltas else float("nan"), min(deltas) if deltas else float("nan"), gained)


def summary(results: Mapping[str, Any], names: Sequence[str]) -> str:
    """One row a candidate: mean and worst of salience - window, both definitions, at
    10% / 25%, and the references kept beyond the base candidate over all domains."""
    lines = ["| candidate | independent: mean | worst | refs vs base | ours: mean | worst | refs vs base |",
             "|---|---|---|---|---|---|---|"]
    for n in names:
        cells = []
        for k in DEFINITIONS:
            st = [_stats(results, n, k, f) for f in FRACTIONS]
            cells.append(" / ".join(f"{m:+.3f}" for m, _, _ in st))
            cells.append(" / ".join(f"{w:+.3f}" for _, w, _ in st))
            cells.append(" / ".join(f"{g:+d}" for _, _, g in st))
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def table(results: Mapping[str, Any], names: Sequence[str]) -> str:
    """A Markdown table: salience - window per held-out domain at 10% / 25%, mean and worst."""
    lines = ["**summary** (salience − window, system + 10% / + 25%)\n", summary(results, names)]
    for definition in DEFINITIONS:
        domains = [d for d in DOMAINS if any(d in results.get(n, {}) for n in names)]
        lines.append(f"\n**{definition}, salience − window** (system + 10% / + 25%)\n")
        lines.append("| candidate | " + " | ".join(domains) + " | mean | worst |")
        lines.append("|---|" + "---|" * (len(domains) + 2))
        for n in names:
            row: list[str] = []
            per_f: dict[float, list[float]] = {f: [] for f in FRACTIONS}
            for d in domains:
                cell = results.get(n, {}).get(d)
                if cell is None or _delta(cell, definition, FRACTIONS[0]) != _delta(cell, definition, FRACTIONS[0]):
                    row.append("–")
                    continue
                vals = [_delta(cell, definition, f) for f in FRACTIONS]
                for f, v in zip(FRACTIONS, vals):
                    per_f[f].append(v)
                row.append(" / ".join(f"{v:+.3f}" for v in vals))
            mean = " / ".join(f"{np.mean(per_f[f]):+.3f}" if per_f[f] else "–" for f in FRACTIONS)
            worst = " / ".join(f"{min(per_f[f]):+.3f}" if per_f[f] else "–" for f in FRACTIONS)
            lines.append(f"| {n} | " + " | ".join(row) + f" | {mean} | {worst} |")
        refs = []
        for d in domains:
            cell = next((results[n][d] for n in names if d in results.get(n, {})), None)
            if cell is not None:
                refs.append(f"{d} {cell['window'][str(FRACTIONS[0])][definition]['refs']:,}")
        lines.append("\nreferences: " + ", ".join(refs))
    if "base" in names:
        lines.append("\n**references kept beyond the base candidate**, independent | ours "
                     "(system + 10% / + 25%; summed over the domains)\n")
        lines.append("| candidate | " + " | ".join(DOMAINS) + " | total |")
        lines.append("|---|" + "---|" * (len(DOMAINS) + 1))
        for n in names:
            row, total = [], {(k, f): 0 for k in DEFINITIONS for f in FRACTIONS}
            for d in DOMAINS:
                cell, base = results.get(n, {}).get(d), results["base"].get(d)
                if cell is None or base is None:
                    row.append("–")
                    continue
                parts = []
                for k in DEFINITIONS:
                    gained = [cell["salience"][str(f)][k]["seen"] - base["salience"][str(f)][k]["seen"]
                              for f in FRACTIONS]
                    for f, v in zip(FRACTIONS, gained):
                        total[(k, f)] += v
                    parts.append(" / ".join(f"{v:+d}" for v in gained))
                row.append(" \\| ".join(parts))
            tot = " \\| ".join(" / ".join(f"{total[(k, f)]:+d}" for f in FRACTIONS) for k in DEFINITIONS)
            lines.append(f"| {n} | " + " | ".join(row) + f" | {tot} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--candidates", default=",".join(CANDIDATES),
                        help=f"comma-separated, of {', '.join(CANDIDATES)} (default: all)")
    parser.add_argument("--domains", default=",".join(DOMAINS), help="held-out domains, comma-separated")
    parser.add_argument("--max-steps", type=int, default=6)
    parser.add_argument("--out", type=Path, default=OUT / "sweep.json")
    parser.add_argument("--table-only", action="store_true", help="print the table of --out and stop")
    args = parser.parse_args(argv)
    names = [n for n in args.candidates.split(",") if n]
    unknown = [n for n in names if n not in CANDIDATES]
    if unknown:
        parser.error(f"unknown candidate {unknown[0]!r}; expected some of {', '.join(CANDIDATES)}")
    domains = [d for d in args.domains.split(",") if d]
    if any(d not in DOMAINS for d in domains):
        parser.error(f"domains must be some of {', '.join(DOMAINS)}")
    if not args.table_only:
        run(names, domains, args.data, args.max_steps or None, args.out)
    results = json.loads(args.out.read_text())
    print(table(results, [n for n in names if n in results]))
    for n in names:
        print(f"  {n}: {CANDIDATES[n][0]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
