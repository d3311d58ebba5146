"""Query-agnostic LoCoMo recall on every way to train on four conversations and test on two.

One held-out split of six conversations is a small sample (a split moves the figure by
several points), so this runs all fifteen: for each, an ImportanceScorer's prior is
trained on the four training conversations (each turn labelled by whether any question
cites it as evidence, which is what ``fit`` does with their questions) and scored on the
two others without a question; entries are packed greedily by score to 5/10/25% of each
conversation's tokens (:func:`salience.bench.evidence_recall`), beside the
recency window. Only the prior is fitted: the query-aware model plays no part in these
figures, and leaving it out makes a split take seconds instead of a minute and a half.

Run as ``python benchmarks/bench_locomo_splits.py [--data ../shared/data]``. Prints one line
per split and the means; asserts nothing.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
try:
    import salience  # noqa: F401
except ImportError:  # running from a checkout without installing
    sys.path.insert(0, str(ROOT / "src"))

import numpy as np  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402

from salience import ImportanceScorer, Transcript, load_transcripts  # noqa: E402
from salience.bench import evidence_recall  # noqa: E402
from salience.scorer.baselines import RecencyScorer  # noqa: E402


def evidence_labels(t: Transcript) -> Transcript:
    """``t`` with each entry labelled by whether a question cites it, and no questions."""
    cited = {x for q in t.queries for x in q.evidence}
    entries = tuple(e.replace(label=float(e.id in cited)) for e in t.entries)
    return t.replace(entries=entries, queries=())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    args = parser.parse_args(argv)
    conversations = sorted(load_transcripts(args.data / "locomo"), key=lambda t: t.id)
    rows = []
    print(f"{'test':<22} {'salience 5% / 10% / 25%':>24} {'recency 25%':>12} {'ratio':>6} {'prior AUC (CV)':>15}")
    with threadpool_limits(1):
        for pair in itertools.combinations(range(len(conversations)), 2):
            started = time.perf_counter()
            test = [conversations[i] for i in pair]
            train = [evidence_labels(t) for i, t in enumerate(conversations) if i not in pair]
            scorer = ImportanceScorer(random_state=0).fit(train)
            ours = evidence_recall(scorer, test, query_aware=False).recall
            recency = evidence_recall(RecencyScorer(), test, query_aware=False).recall
            auc = scorer.cv_metrics_.get("cv_prior_roc_auc", float("nan"))
            rows.append((*ours, recency[-1]))
            print(f"{' + '.join(t.id for t in test):<22} {' / '.join(f'{r:.3f}' for r in ours):>24} "
                  f"{recency[-1]:>12.3f} {ours[-1] / recency[-1]:>5.2f}x {auc:>15.3f}  "
                  f"({time.perf_counter() - started:.0f} s)", flush=True)
    a = np.array(rows)
    ratios = a[:, 2] / a[:, 3]
    print(f"\nmean over {len(a)} splits: salience {' / '.join(f'{x:.3f}' for x in a[:, :3].mean(axis=0))}, "
          f"recency 25% {a[:, 3].mean():.3f}; at 25% {a[:, 2].mean() / a[:, 3].mean():.2f}x the recency window "
          f"(ratios {ratios.min():.2f}x to {ratios.max():.2f}x, {int((ratios >= 2).sum())} of {len(a)} at 2x or more)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
