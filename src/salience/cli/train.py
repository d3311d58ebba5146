"""``salience train``: fit a scorer on labelled (or raw) transcripts, report, save, track.

Usage::

    salience train PATH... --out FILE [--domain NAME] [--name NAME] [--seed 0] [--test-split 0.25]
        [--budgets 0.05,0.1,0.25] [--labels auto|hindsight|evidence] [--cv 3] [--no-embeddings]
        [--no-bench] [--max-steps 400] [--no-track] [--plot FILE]

The fitting is :func:`salience.training.train.train_scorer`; the run and the new model
version are logged by :func:`salience.training.tracking.log_training_run`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from salience.cli.common import add_paths_argument, load_inputs, stage_progress, stdout
from salience.errors import SalienceError, TrackingError

__all__ = ["add_parser", "run"]


def _fractions(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"budgets must be comma-separated shares like 0.05,0.1,0.25 (got {text!r})"
        ) from None
    if not values or not all(0 < v <= 1 for v in values):
        raise argparse.ArgumentTypeError(f"budgets must be shares in (0, 1] (got {text!r})")
    return values


def _share(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a share in [0, 1) (got {text!r})") from None
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"expected a share in [0, 1) (got {text!r})")
    return value


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "train",
        help="train an importance scorer, benchmark it against the baselines, save and register it",
        description=(
            "Train an importance scorer on transcripts in any known layout. Transcripts without labels or "
            "queries get hindsight labels first. A held-out split (by task or transcript) is benchmarked: "
            "recall at token budgets beside the baselines. The scorer is written to --out and, with tracking "
            "on (the default), logged to MLflow and registered as a new model version."
        ),
    )
    add_paths_argument(parser)
    parser.add_argument("--out", required=True, type=Path, help="where to write the scorer file")
    parser.add_argument("--domain", help="train only on transcripts of this domain (and name the model after it)")
    parser.add_argument("--name", help="registered model name (default: salience-<domain>, or salience-general)")
    parser.add_argument("--seed", type=int, default=0, help="seed for the split and the model (default 0)")
    parser.add_argument("--test-split", type=_share, default=0.25,
                        help="held-out share of tasks/transcripts for the benchmark; 0 trains on all (default 0.25)")
    parser.add_argument("--budgets", type=_fractions, default=(0.05, 0.10, 0.25),
                        help="token budgets as shares for the recall benchmark (default 0.05,0.1,0.25)")
    parser.add_argument("--labels", choices=("auto", "hindsight", "evidence"), default="auto",
                        help="how to label transcripts that carry no labels (default auto)")
    parser.add_argument("--cv", type=int, default=3, help="cross-validation folds (default 3)")
    parser.add_argument("--no-embeddings", action="store_true",
                        help="leave out the sentence-embedding features (faster, weaker)")
    parser.add_argument("--no-bench", action="store_true", help="skip the held-out benchmark")
    parser.add_argument("--max-steps", type=int, default=400,
                        help="at most this many agent steps per budget in the reference benchmark (default 400)")
    parser.add_argument("--no-track", action="store_true", help="do not log to MLflow")
    parser.add_argument("--plot", type=Path, help="write the recall curves to this PNG (default: beside --out)")
    parser.set_defaults(handler=run)
    return parser


def _feature_plot(scorer: Any, path: Path) -> Path | None:
    """A bar chart of the prior's (and query model's) feature importances."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [("prior (no query)", scorer.feature_importances(query=False))]
    if getattr(scorer, "query_model_", None) is not None:
        panels.append(("query-aware", scorer.feature_importances(query=True)))
    panels = [(t, imp) for t, imp in panels if imp]
    if not panels:
        return None
    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 6), squeeze=False)
    for ax, (title, imp) in zip(axes[0], panels):
        top = list(imp.items())[:20][::-1]
        ax.barh([k for k, _ in top], [v for _, v in top], color="#3b6ea5")
        ax.set_title(f"feature importance: {title}")
        ax.set_xlabel("share of split gain")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def run(args: argparse.Namespace) -> int:
    from salience.scorer.estimators import KINDS
    from salience.scorer.features import FeatureExtractor
    from salience.scorer.model import ImportanceScorer
    from salience.training.train import train_scorer

    if args.cv < 2:
        raise SalienceError(f"--cv must be at least 2 (got {args.cv})")
    console = stdout()
    transcripts = load_inputs(args.paths)
    if not transcripts:
        raise SalienceError("no transcripts found in " + ", ".join(args.paths))
    scorer = ImportanceScorer(
        features=FeatureExtractor(use_embeddings=not args.no_embeddings), cv=args.cv, random_state=args.seed
    )
    with stage_progress() as progress:
        report = train_scorer(
            transcripts,
            out=args.out,
            domain=args.domain,
            seed=args.seed,
            test_split=args.test_split,
            scorer=scorer,
            label_mode=args.labels,
            cv=args.cv,
            bench=not args.no_bench,
            fractions=args.budgets,
            max_steps=args.max_steps,
            progress=progress,
        )
    meta = report.scorer.metadata_
    console.print(
        f"trained on {report.n_train} transcripts ({meta['n_rows']['prior']:,} prior rows, "
        f"{meta['n_rows']['query']:,} query rows; {report.labeled} labelled by hindsight), "
        f"held out {report.n_test}, in {report.seconds:.1f} s"
    )
    kind = getattr(report.scorer, "kind_", None)
    if kind in KINDS:
        console.print(f"model: the default for {kind}s, {KINDS[kind]}")
    if report.cv_metrics:
        from rich.table import Table

        table = Table(title="cross-validated (by transcript, on the training split)")
        table.add_column("metric")
        table.add_column("value", justify="right")
        for key, value in report.cv_metrics.items():
            table.add_row(key, f"{value:.3f}")
        console.print(table)
    if report.hindsight:
        console.print(
            "hindsight-label AUC on held-out histories: "
            + ", ".join(f"{k.removeprefix('test_hindsight_auc').strip('_') or 'salience'} {v:.3f}"
                        for k, v in report.hindsight.items())
        )
    artifacts: list[Path] = []
    out_dir = Path(args.out).resolve().parent
    stem = Path(args.out).stem
    if report.bench is not None and report.bench.rows:
        console.print(report.bench.table())
        plot = args.plot or out_dir / f"{stem}-recall.png"
        artifacts.append(report.bench.plot(plot))
        json_path = out_dir / f"{stem}-bench.json"
        report.bench.to_json(json_path)
        artifacts.append(json_path)
    feature_png = _feature_plot(report.scorer, out_dir / f"{stem}-features.png")
    if feature_png is not None:
        artifacts.append(feature_png)
    console.print(f"wrote {report.path}")
    if args.no_track:
        return 0
    domains = list(meta.get("domains") or [])
    domain = args.domain or (domains[0] if len(domains) == 1 else "general")
    name = args.name or f"salience-{domain}"
    try:
        from salience.training.tracking import log_training_run

        record = log_training_run(
            report.scorer,
            name=name,
            params={
                "paths": ",".join(args.paths),
                "domain": args.domain or "",
                "seed": args.seed,
                "test_split": args.test_split,
                "labels": args.labels,
                "cv": args.cv,
                "embeddings": not args.no_embeddings,
                "budgets": ",".join(str(b) for b in args.budgets),
                "n_train": report.n_train,
                "n_test": report.n_test,
            },
            metrics=report.metrics(),
            artifacts=artifacts,
            model_path=report.path,
        )
    except (TrackingError, ImportError) as exc:
        print(f"salience: tracking failed, the scorer file was still written: {exc}", file=sys.stderr)
        return 0
    console.print(f"registered {record.model_name} version {record.version} (run {record.run_id}): {record.model_uri}")
    return 0
