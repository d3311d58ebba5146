"""``salience bench``: recall of a scorer and the baselines at token budgets.

Usage::

    salience bench PATH... [--scorer FILE|models:/NAME/VERSION|models:/NAME@ALIAS|NAME|default]
        [--budgets 0.05,0.1,0.25] [--kinds query,agnostic,reference,independent] [--baselines bm25,fusion,...]
        [--split all|train|test] [--test-split 0.25] [--seed 0] [--max-steps N]
        [--plot [FILE]] [--json FILE] [--no-track]

``--scorer`` follows the grammar of :mod:`salience.cli.scorers`; a baseline under test
is left out of the baselines beside it. Runs
:func:`salience.bench.run_benchmark` and prints a table. With
``--split test`` only the held-out part of the data is used
(:func:`~salience.training.split.split_transcripts`, the split ``salience train``
uses). ``independent`` (issue #14) replays the steps that call tools with
:func:`salience.bench.independent.evaluate`: the scorer in a default ``Compactor``
beside the message baselines that run as themselves (the sliding window, the same
charged as billed, observation masking, keep-last-3 tool results, value-stub masking),
recall by the independent definition, the user-given values, ours, code support and
actions kept, and the scorer minus the window (and minus the billed window, counted in
the compactor's own unit) with a paired bootstrap interval over transcripts. When the scorer
came from a ``models:/`` URI and MLflow tracking is available, the metrics (and the
plot and JSON, if written) are logged against that model unless ``--no-track``. Bad
input (an unknown baseline or kind, a bad budget, a missing scorer file) exits 2 with
one line.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from salience.cli.common import add_paths_argument, load_inputs, progress_bar, stdout
from salience.cli.scorers import ScorerKind, add_scorer_argument, parse_scorer
from salience.errors import SalienceError

__all__ = ["INDEPENDENT", "add_parser", "parse_budgets", "parse_names", "resolve_scorer", "run"]

#: The ``--kinds`` name of issue #14's benchmark (:mod:`salience.bench.independent`).
INDEPENDENT = "independent"


def parse_budgets(text: str) -> tuple[float, ...]:
    """``"0.05,0.1,25%"`` as ``(0.05, 0.1, 0.25)``; a :class:`SalienceError` naming a bad item.

    >>> parse_budgets("0.05, 10%")
    (0.05, 0.1)
    >>> parse_budgets("0.1,2")
    Traceback (most recent call last):
    ...
    salience.errors.SalienceError: --budgets: each budget must be a share of the tokens in (0, 1] or a \
percentage like 10% (got '2')
    """
    out = []
    for item in (x.strip() for x in text.split(",")):
        if not item:
            continue
        try:
            value = float(item[:-1]) / 100 if item.endswith("%") else float(item)
        except ValueError:
            value = float("nan")
        if not 0.0 < value <= 1.0:
            raise SalienceError(f"--budgets: each budget must be a share of the tokens in (0, 1] or a percentage "
                                f"like 10% (got {item!r})")
        out.append(value)
    if not out:
        raise SalienceError(f"--budgets: expected a comma-separated list like 0.05,0.1,0.25 (got {text!r})")
    return tuple(dict.fromkeys(out))


def parse_names(text: str, known: tuple[str, ...], option: str) -> tuple[str, ...]:
    """A comma-separated list of names from ``known`` (``none`` or empty: no name)."""
    names = [x.strip() for x in text.split(",") if x.strip()]
    if names == ["none"]:
        return ()
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SalienceError(f"{option}: unknown name {unknown[0]!r}; expected some of {', '.join(known)}")
    return tuple(dict.fromkeys(names))


def resolve_scorer(spec: str) -> tuple[Any, str | None]:
    """The scorer ``spec`` names (:mod:`salience.cli.scorers`), and its MLflow URI when it came from one.

    ``default`` stops with a :class:`~salience.errors.ScorerError` when the bundled
    scorer is missing (a benchmark of a fallback would measure something else).
    """
    parsed = parse_scorer(spec)
    return parsed.load(), parsed.uri


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    from salience.bench import BASELINE_NAMES, DEFAULT_BASELINES, BenchKind

    parser = subparsers.add_parser(
        "bench",
        help="measure evidence and reference recall at token budgets, against the baselines",
        description="Measure how much of what is needed survives a token budget: evidence recall with the query "
        "known (query) and before it is known (agnostic), for transcripts whose queries list evidence; agent "
        "reference recall (reference), replaying tool-using agents step by step. The scorer and every baseline "
        "run on the same data in the same process.",
    )
    add_paths_argument(parser)
    add_scorer_argument(parser, what="the scorer to measure")
    parser.add_argument("--budgets", default=None, metavar="LIST",
                        help="budget fractions, e.g. 0.05,0.1,0.25 or 5%%,10%% (default: 0.05,0.1,0.25 for "
                        "evidence recall, 0.1,0.25 for reference recall)")
    parser.add_argument("--kinds", default=",".join([*(k.value for k in BenchKind), INDEPENDENT]), metavar="LIST",
                        help="which figures: some of query, agnostic, reference, independent (the steps that call "
                        "tools, by issue #14's independent definition, against the message baselines: the sliding "
                        "window, as counted and as billed, observation masking, keep-last-3, value stubs) "
                        "(default: all that apply)")
    parser.add_argument("--baselines", default=",".join(DEFAULT_BASELINES), metavar="LIST",
                        help=f"baselines to compare with, or none (default: {','.join(DEFAULT_BASELINES)}; "
                        f"known: {', '.join(BASELINE_NAMES)})")
    parser.add_argument("--split", choices=("all", "train", "test"), default="all",
                        help="which part of the data to use: all of it, or one side of the split by task or "
                        "transcript that `salience train` uses (default: all)")
    parser.add_argument("--test-split", type=float, default=0.25, metavar="SHARE",
                        help="share of the tasks or transcripts held out as the test side; use the value "
                        "`salience train` was given (default: 0.25, as there)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the split (default: 0)")
    parser.add_argument("--max-steps", type=int, default=None, metavar="N",
                        help="reference recall: at most N assistant steps per transcript, evenly spread")
    parser.add_argument("--plot", nargs="?", const="", default=None, metavar="FILE",
                        help="write a PNG of recall against budget to FILE (a .png name), or to bench-<time>.png "
                        "in the current folder when no FILE follows")
    parser.add_argument("--json", default=None, metavar="FILE", help="write the full report as JSON")
    parser.add_argument("--no-track", action="store_true",
                        help="do not log the metrics to MLflow (they are logged only for a models:/ scorer)")
    parser.set_defaults(handler=run)
    return parser


def _track(uri: str, metrics: dict[str, float], artifacts: list[Path]) -> str:
    """Log to MLflow through ``salience.training.tracking``; a one-line outcome."""
    try:
        from salience.training import tracking

        log = tracking.log_bench_metrics
    except (ImportError, AttributeError) as exc:
        return f"tracking: not logged (MLflow tracking is not available: {exc})"
    try:
        log(uri, metrics, artifacts)
    except SalienceError as exc:
        return f"tracking: not logged ({exc})"
    return f"tracking: logged {len(metrics)} metrics for {uri}"


def run(args: argparse.Namespace) -> int:
    from salience.bench import BASELINE_NAMES, BenchKind, run_benchmark
    from salience.training.split import split_transcripts

    started = time.perf_counter()
    budgets = parse_budgets(args.budgets) if args.budgets is not None else None
    kinds = parse_names(args.kinds, (*(k.value for k in BenchKind), INDEPENDENT), "--kinds")
    if not kinds:
        raise SalienceError("--kinds: at least one of query, agnostic, reference, independent is needed")
    curve_kinds = tuple(k for k in kinds if k != INDEPENDENT)
    if args.plot is not None and not curve_kinds:
        raise SalienceError("--plot: plots the recall curves of query, agnostic or reference; --kinds has none")
    baselines = parse_names(args.baselines, BASELINE_NAMES, "--baselines")
    if args.max_steps is not None and args.max_steps < 1:
        raise SalienceError(f"--max-steps: expected a positive integer (got {args.max_steps})")
    if not 0.0 < args.test_split < 1.0:
        raise SalienceError(f"--test-split: expected a share in (0, 1) (got {args.test_split})")
    if args.plot and Path(args.plot).suffix.lower() != ".png":  # `--plot data.jsonl` must not overwrite data
        raise SalienceError(f"--plot: expected the name of a .png file (got {args.plot!r}); put --plot last to "
                            "write bench-<time>.png")
    spec = parse_scorer(args.scorer)
    scorer, uri = resolve_scorer(args.scorer)
    scorer_name = "salience"
    if spec.kind is ScorerKind.BASELINE:  # a baseline under test is not also its own baseline
        scorer_name = spec.name
        baselines = tuple(b for b in baselines if b != scorer_name)
    transcripts = load_inputs(args.paths)
    if args.split != "all":
        train, test = split_transcripts(transcripts, args.test_split, args.seed)
        transcripts = test if args.split == "test" else train
        if not transcripts:
            raise SalienceError(f"--split {args.split}: no transcript on that side of the split (the data has a "
                                "single task or transcript)")

    with progress_bar() as progress:
        task = progress.add_task("benchmark", total=None)

        def report_progress(description: str, done: int, total: int) -> None:
            progress.update(task, description=description, completed=done, total=total)

        report = None
        if curve_kinds:
            report = run_benchmark(transcripts, scorer, fractions=budgets, baselines=baselines, kinds=curve_kinds,
                                   scorer_name=scorer_name, max_steps=args.max_steps, progress=report_progress)
        independent = None
        if INDEPENDENT in kinds:
            independent = _independent(transcripts, scorer, scorer_name, budgets, args.max_steps, report_progress)

    out = stdout()
    split = "" if args.split == "all" else f" ({args.split} side of the split, seed {args.seed})"
    out.print(f"{len(transcripts):,} transcripts{split}; scorer: {args.scorer}")
    if report is not None:
        for kind in report.kinds:
            out.print(report.table(kind))
        for method, kind, reason in report.skipped:
            who = "" if method == "*" else f"{method} "
            out.print(f"skipped {who}{kind}: {reason}")
    measured = independent is not None and independent.steps > 0
    if independent is not None:
        if measured:
            out.print(independent.table())
            for line in _differences(independent, scorer_name):
                out.print(line)
        else:
            out.print(f"skipped {INDEPENDENT}: no assistant step calls a tool or acts on earlier values")
    if not measured and (report is None or not report.curves):
        raise SalienceError("nothing to measure: no query lists evidence and no assistant step reuses an earlier "
                            "value in the input")
    artifacts: list[Path] = []
    if args.plot is not None and report is not None:
        path = Path(args.plot) if args.plot else Path(f"bench-{time.strftime('%Y%m%d-%H%M%S')}.png")
        artifacts.append(_write(lambda: report.plot(path), path))
        out.print(f"plot -> {path}")
    if args.json is not None:
        path = Path(args.json)
        data: dict[str, Any] = report.to_dict() if report is not None else {"scorer": scorer_name}
        if independent is not None:
            data[INDEPENDENT] = independent.to_dict()
        _write(lambda: path.write_text(json.dumps(data, indent=2, default=str) + "\n", encoding="utf-8"), path)
        artifacts.append(path)
        out.print(f"json -> {path}")
    if uri is not None and uri.startswith("models:/") and not args.no_track:
        metrics = report.metrics() if report is not None else {}
        if independent is not None and measured:
            metrics.update(independent.metrics())
        print(_track(uri, metrics, artifacts), file=sys.stderr)
    out.print(f"done in {time.perf_counter() - started:.1f}s")
    spec.warn_if_deprecated()
    return 0


def _independent(transcripts: Any, scorer: Any, name: str, budgets: tuple[float, ...] | None,
                 max_steps: int | None, progress: Any) -> Any:
    """Issue #14's benchmark on ``transcripts``: ``scorer`` in a ``Compactor`` with its
    defaults, beside the message baselines (:func:`salience.bench.independent.evaluate`)."""
    from salience.bench.independent import baseline_selectors, compactor_selector, evaluate
    from salience.selector.compactor import Compactor

    selectors = {name: compactor_selector(Compactor(scorer=scorer)), **baseline_selectors()}
    return evaluate(transcripts, selectors, budgets or (0.10, 0.25), max_steps=max_steps, reference="window",
                    progress=progress, description=INDEPENDENT)


def _differences(report: Any, name: str) -> list[str]:
    """``name`` minus the window by each definition and budget, with a 95% paired bootstrap
    interval over transcripts (too narrow over a few); then minus the window charged as the
    compactor counts (``window_billed``: both in one unit)."""
    lines = []
    for baseline, label in (("window", "window"), ("window_billed", "window, billed")):
        for definition in ("independent", "ours"):
            for f in report.fractions:
                if not getattr(report.result(name, f), definition).refs:
                    continue
                d = report.difference(name, baseline, f, definition)
                lines.append(f"{name} − {label}, {definition}, {round(100 * f, 4):g}%: {d} (95% interval, paired "
                             f"bootstrap over {d.transcripts:,} transcripts)")
    return lines


def _write(fn: Any, path: Path) -> Path:
    try:
        fn()
    except OSError as exc:
        raise SalienceError(f"cannot write {path}: {exc.strerror or exc}") from exc
    return path
