"""Reproduce the recall figures on the shared data (LoCoMo and tau-bench airline).

(a) LoCoMo, split by conversation: an ImportanceScorer trained on the first four
    conversations (sorted by id) and tested on the other two; evidence recall at
    5/10/25% of the tokens with the query known (query-aware) and before it is known
    (query-agnostic), beside every baseline (BM25, fusion, embedding, keyword rules,
    recency, random, oracle).
(b) tau-bench airline, split by task (``split_transcripts``, test_size 0.3, so the
    four trials of a task stay on one side): hindsight labels, an ImportanceScorer
    trained on the train side; on the test side the hindsight AUC of its prior at
    history cuts (beside recency's), and agent reference recall at 10/25% for the
    Compactor with the trained scorer against the recency window, keep-last-3 tool
    results, observation masking, the scorer baselines through the Compactor, and the
    Compactor with the recency score (which separates what the Compactor's stubs and
    trims give from what the scorer gives).

Prints tables and writes ``locomo.png``, ``tau_airline.png`` and a JSON report per part
to ``--out`` (default /tmp). Takes several minutes on two cores; not part of the tests.

Run as ``python benchmarks/bench_recall.py [--data ../shared/data] [--out /tmp] [--part locomo|tau|all]``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

try:
    import salience  # noqa: F401
except ImportError:  # running from a checkout without installing
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from rich.console import Console

from salience import ImportanceScorer, load_transcripts
from salience.bench import (
    BenchReport,
    compactor_selector,
    hindsight_auc,
    reference_recall,
    run_benchmark,
)
from salience.scorer.baselines import RecencyScorer
from salience.scorer.labels import label
from salience.training.split import split_transcripts

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
console = Console()


def note(text: str) -> None:
    console.print(f"[dim]{time.strftime('%H:%M:%S')}[/dim] {text}")


def show(report: BenchReport, out: Path, name: str) -> None:
    for kind in report.kinds:
        console.print(report.table(kind))
    for method, kind, reason in report.skipped:
        console.print(f"skipped {method} {kind}: {reason}")
    png = report.plot(out / f"{name}.png")
    report.to_json(out / f"{name}.json")
    note(f"wrote {png} and {out / f'{name}.json'} ({report.seconds:.0f}s of benchmark)")


def locomo(data: Path, out: Path) -> None:
    conversations = sorted(load_transcripts(data / "locomo"), key=lambda t: t.id)
    train, test = conversations[:4], conversations[4:]
    note(f"LoCoMo: train on {[t.id for t in train]}, test on {[t.id for t in test]} "
         f"({sum(len(t.queries) for t in test)} test questions)")
    started = time.perf_counter()
    scorer = ImportanceScorer().fit(train)
    note(f"fitted in {time.perf_counter() - started:.0f}s ({scorer.n_rows_})")
    report = run_benchmark(test, scorer, kinds=("query", "agnostic"),
                           baselines=("recency", "keyword", "bm25", "embedding", "fusion", "random", "oracle"))
    show(report, out, "locomo")


def tau(data: Path, out: Path, max_steps: int | None) -> None:
    runs = label(load_transcripts(data / "tau-bench-airline"))
    train, test = split_transcripts(runs, 0.3, seed=0)
    tasks = sorted({t.meta["task_id"] for t in test})
    note(f"tau-bench airline: {len(train)} train runs, {len(test)} test runs ({len(tasks)} tasks: {tasks})")
    started = time.perf_counter()
    scorer = ImportanceScorer().fit(train)
    note(f"fitted in {time.perf_counter() - started:.0f}s ({scorer.n_rows_})")
    ours = hindsight_auc(scorer, test)
    recency = hindsight_auc(RecencyScorer(), test)
    console.print(f"hindsight AUC on the test runs ({ours.rows:,} entries at {ours.histories} cuts, "
                  f"{ours.positives:,} used later): salience {ours.auc:.3f}, recency {recency.auc:.3f}")
    report = run_benchmark(test, scorer, kinds=("reference",), max_steps=max_steps,
                           baselines=("recency", "last3_tool_results", "observation_masking", "keyword", "bm25",
                                      "embedding", "fusion", "random"))
    control = reference_recall(compactor_selector(RecencyScorer(), name="compactor+recency"), test,
                               report.curves[0].fractions, max_steps=max_steps)
    report = BenchReport(curves=(*report.curves, control), scorer_name=report.scorer_name, skipped=report.skipped,
                         seconds=report.seconds,
                         meta={**report.meta, "hindsight_auc": ours.auc, "hindsight_auc_recency": recency.auc})
    show(report, out, "tau_airline")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA, help=f"the shared data folder (default: {DATA})")
    parser.add_argument("--out", type=Path, default=Path("/tmp"), help="where plots and JSON go (default: /tmp)")
    parser.add_argument("--part", choices=("locomo", "tau", "all"), default="all")
    parser.add_argument("--max-steps", type=int, default=None, help="reference recall: steps per run (default: all)")
    args = parser.parse_args(argv)
    if not args.data.is_dir():
        parser.error(f"no shared data at {args.data}")
    args.out.mkdir(parents=True, exist_ok=True)
    if args.part in ("locomo", "all"):
        locomo(args.data, args.out)
    if args.part in ("tau", "all"):
        tau(args.data, args.out, args.max_steps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
