"""``salience demo``: the whole loop on the bundled samples, in about a minute.

1. count what the sample transcripts hold (``salience stats``);
2. train a scorer on them, benchmark it on a held-out split beside the baselines,
   and log the run and a new model version to the local MLflow store (SQLite);
3. compact a sample agent transcript to a quarter of its tokens with the bundled
   default scorer, show what each entry became, and restore it from the archive.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from salience.cli.common import load_inputs, print_stats, stage_progress, stdout
from salience.errors import SalienceError, TrackingError

__all__ = ["add_parser", "run"]


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "demo",
        help="run the whole loop on the bundled samples: stats, train + track, benchmark, compact",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("data", nargs="?", default="data", help="sample transcripts (default: ./data)")
    parser.add_argument("--out", type=Path, default=Path("salience-out"),
                        help="folder for the trained scorer and plots (default: ./salience-out)")
    parser.add_argument("--no-track", action="store_true", help="do not log to MLflow")
    parser.set_defaults(handler=run)
    return parser


def run(args: argparse.Namespace) -> int:
    from salience.cli.inspect import print_inspection
    from salience.scorer.model import default_scorer
    from salience.selector.compactor import Compactor
    from salience.stats import transcript_stats
    from salience.tokens import default_counter
    from salience.training.train import train_scorer

    console = stdout()
    if not Path(args.data).exists():
        raise SalienceError(
            f"{args.data}: no such folder; run the demo from the repository root or pass the samples' path"
        )
    transcripts = load_inputs([args.data])
    console.rule("1. the sample transcripts")
    print_stats(transcript_stats(transcripts), console)

    console.rule("2. train a scorer, benchmark it against the baselines")
    args.out.mkdir(parents=True, exist_ok=True)
    with stage_progress() as progress:
        report = train_scorer(transcripts, out=args.out / "scorer.salience", test_split=0.3, max_steps=60,
                              progress=progress)
    console.print(f"trained on {report.n_train} transcripts, held out {report.n_test}; wrote {report.path}")
    if report.bench is not None and report.bench.rows:
        console.print(report.bench.table())
        console.print(f"{report.n_test} held-out sample transcripts are too few to rank these methods. The figures "
                      "that hold are in BENCHMARKS.md: five public data sets, each left out of training in turn, "
                      "beside the sliding window.")
        plot = report.bench.plot(args.out / "recall.png")
        console.print(f"recall curves: {plot}")
    if not args.no_track:
        try:
            from salience.training.tracking import log_training_run, tracking_uri

            record = log_training_run(report.scorer, name="salience-demo", params={"data": str(args.data)},
                                      metrics=report.metrics(), model_path=report.path)
            console.print(f"logged to {tracking_uri()}: {record.model_name} version {record.version} "
                          f"({record.model_uri}); list versions with `salience versions`")
        except (TrackingError, ImportError) as exc:
            print(f"salience: tracking failed, the scorer file was still written: {exc}", file=sys.stderr)

    console.rule("3. compact an agent transcript with the bundled default scorer")
    sample = next((t for t in transcripts if any(e.tool_calls for e in t.entries)), transcripts[0])
    total = sum(default_counter().count_entry(e) for e in sample.entries)
    budget = max(total // 4, 1)
    compactor = Compactor(scorer=default_scorer(), budget=budget, on_over_budget="keep_pins")
    result = compactor.compact(sample)
    print_inspection(result, scores=result.scores, notes=[f"transcript {sample.id!r}, budget {budget} tokens "
                                                          f"(a quarter of {total})"], console=console)
    restored = result.restore(list(result.archive))
    same = [e.content for e in restored.entries] == [e.content for e in sample.entries]
    console.print(f"{total} -> {result.tokens} tokens; archive holds {len(result.archive)} entries; "
                  f"restore gives the original back: {same}")
    return 0
