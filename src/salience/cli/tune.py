"""``salience tune``: choose a domain's Compactor thresholds and write them as a profile.

Usage::

    salience tune PATH... --domain NAME [--target 0.25] [--trials 24] [--folds 3] [--seed 0]
        [--max-steps 200] [--metric auto|reference|evidence]
        [--scorer default|FILE|models:/NAME/VERSION|models:/NAME@ALIAS|NAME]
        [--out PROFILE.json] [--no-track]

Runs :func:`salience.training.tune.tune_profile` on the transcripts of ``--domain``,
prints recall before (the Compactor's defaults) and after (the tuned parameters) per
fold with mean ± std and the nested held-out figure, and the parameters it changed;
writes the profile (default ``salience-<domain>.profile.json``), which
``Compactor(profile="...json")`` and ``salience compact --profile`` load; then, unless
``--no-track``, logs the run to MLflow (:func:`salience.training.tracking.log_tuning_run`). When tracking fails the
profile is still written and one line says why tracking failed.

``--scorer`` follows the grammar of :mod:`salience.cli.scorers`, as every command does.
``default`` uses :func:`salience.default_scorer`; when the bundled model is missing, the
``recency`` baseline is used instead and a line says so. The profile records the value
as given. Bad input (an unknown domain, a target outside (0, 1], fewer than one trial, a
scorer that is none of the accepted forms) exits 2 with one line.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

from salience.cli.common import add_paths_argument, load_inputs, progress_bar, stdout
from salience.cli.scorers import ScorerKind, add_scorer_argument, parse_scorer
from salience.errors import SalienceError, ScorerError

__all__ = ["add_parser", "resolve_tune_scorer", "run"]


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    from salience.training.tune import METRICS

    parser = subparsers.add_parser(
        "tune",
        help="tune the compactor's thresholds for a domain and write a profile",
        description="Choose the Compactor's thresholds (pins, critical score, trim and stub settings, value "
        "shares, entry cap) for one domain by cross-validated random search for the best recall at a target "
        "token ratio; write them as a profile that Compactor(profile=FILE) and 'salience compact --profile FILE' "
        "load, and log the run to MLflow. "
        "Reference recall for tool-using agents, query-aware evidence recall (through the Compactor) otherwise.",
    )
    add_paths_argument(parser)
    parser.add_argument("--domain", required=True, help="tune on the transcripts of this domain")
    parser.add_argument("--target", type=float, default=0.25, metavar="SHARE",
                        help="budget as a share of the history's tokens, in (0, 1] (default: 0.25)")
    parser.add_argument("--trials", type=int, default=24, metavar="N",
                        help="candidates to score, the defaults included (default: 24)")
    parser.add_argument("--folds", type=int, default=3, metavar="K",
                        help="cross-validation folds, by task or transcript (default: 3)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the folds and the search (default: 0)")
    parser.add_argument("--max-steps", type=int, default=200, metavar="N",
                        help="at most N agent steps (or queries) scored per fold, evenly spread (default: 200)")
    parser.add_argument("--metric", choices=METRICS, default="auto",
                        help="what to maximise (default: auto: reference recall when the agents call tools, "
                        "else query-aware evidence recall)")
    add_scorer_argument(parser, what="the fixed scorer")
    parser.add_argument("--out", type=Path, default=None, metavar="FILE",
                        help="where to write the profile (default: salience-<domain>.profile.json)")
    parser.add_argument("--no-track", action="store_true", help="do not log the run to MLflow")
    parser.set_defaults(handler=run)
    return parser


def resolve_tune_scorer(spec: str) -> tuple[Any, str, str | None]:
    """``(scorer, label, note)`` for ``--scorer`` (:mod:`salience.cli.scorers`): the label
    goes into the profile, the note (or None) tells the user about a fallback.

    ``default`` falls back to the ``recency`` baseline when the bundled model is missing.
    """
    from salience.scorer.baselines import make_baseline

    parsed = parse_scorer(spec)
    if parsed.kind is ScorerKind.DEFAULT:
        try:
            return parsed.load(), "default", None
        except ScorerError as exc:
            note = f"default scorer unavailable ({exc}); tuning with the recency baseline instead"
            return make_baseline("recency"), "recency", note
    return parsed.load(), spec, None


def _default_out(domain: str) -> Path:
    safe = re.sub(r"[^\w.\-]+", "_", domain).strip("._") or "domain"
    return Path(f"salience-{safe}.profile.json")


def run(args: argparse.Namespace) -> int:
    from salience.training.tune import select_domain, tune_profile

    started = time.perf_counter()
    if not 0.0 < args.target <= 1.0:
        raise SalienceError(f"--target: expected a share of the tokens in (0, 1] (got {args.target})")
    if args.trials < 1:
        raise SalienceError(f"--trials: expected a positive integer (got {args.trials})")
    if args.folds < 1:
        raise SalienceError(f"--folds: expected a positive integer (got {args.folds})")
    if args.max_steps < 1:
        raise SalienceError(f"--max-steps: expected a positive integer (got {args.max_steps})")
    out_path = args.out if args.out is not None else _default_out(args.domain)
    if out_path.is_dir():
        raise SalienceError(f"--out: {out_path} is a folder; give the profile's file name")
    scorer, label, fallback = resolve_tune_scorer(args.scorer)
    transcripts = select_domain(load_inputs(args.paths), args.domain)
    out = stdout()
    if fallback:
        print(f"salience tune: {fallback}", file=sys.stderr)

    with progress_bar() as progress:
        task = progress.add_task("tuning", total=None)

        def report(description: str, done: int, total: int) -> None:
            progress.update(task, description=f"tuning: {description}", completed=done, total=total)

        result = tune_profile(transcripts, scorer, target=args.target, trials=args.trials, folds=args.folds,
                              seed=args.seed, max_steps=args.max_steps, metric=args.metric, domain=args.domain,
                              progress=report)

    out.print(f"{result.transcripts:,} of {len(transcripts):,} {args.domain} transcripts measured; scorer: {label}; "
              f"chosen: {result.after.name}")
    out.print(result.table())
    out.print(result.params_table())
    if result.folds < 2:
        out.print("one fold only (a single task or transcript): no held-out figure")
    try:
        path = result.write(out_path, scorer=label)
    except OSError as exc:
        raise SalienceError(f"cannot write {out_path}: {exc.strerror or exc}") from exc
    gain = result.after.mean - result.before.mean
    out.print(f"{result.metric} recall at {result.target:g}: {result.before.mean:.3f} -> {result.after.mean:.3f} "
              f"({gain:+.3f}); profile -> {path}")
    if not args.no_track:
        print(_track(path, result, label, args), file=sys.stderr)
    out.print(f"done in {time.perf_counter() - started:.1f}s")
    parse_scorer(args.scorer).warn_if_deprecated()
    return 0


def _track(path: Path, result: Any, label: str, args: argparse.Namespace) -> str:
    """Log to MLflow through ``salience.training.tracking``; a one-line outcome."""
    params: dict[str, Any] = {"domain": args.domain, "target": result.target, "trials": result.trials,
                              "folds": result.folds, "seed": result.seed, "max_steps": result.max_steps,
                              "metric": result.metric, "scorer": label, "chosen": result.after.name}
    for key, value in result.profile(scorer=label)["compactor"].items():
        params[f"compactor.{key}"] = json.dumps(value) if isinstance(value, dict) else value
    try:
        from salience.training.tracking import log_tuning_run

        run_id = log_tuning_run(path, params=params, metrics=result.metrics(),
                                tags={"salience.domain": args.domain})
    except (ImportError, SalienceError) as exc:
        return f"tracking failed: {exc} (the profile is written)"
    return f"tracking: logged run {run_id}"
