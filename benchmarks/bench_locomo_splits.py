"""LoCoMo recall on every way to train on four conversations and test on two.

One held-out split of six conversations is a small sample (a split moves the figure by
several points), so this runs all fifteen: for each, an ImportanceScorer is trained on the
four training conversations (each turn labelled by whether any question cites it as
evidence, and weighted by its share of the questions, which is what ``fit`` does with their
questions) and tested on the two others.

Query-agnostic (always): the prior scores each held-out conversation without a question,
and recall at 5/10/25% of its tokens is measured two ways, side by side:

* **the figure** (:func:`salience.bench.evidence_recall`): entries packed greedily by
  score (:func:`~salience.bench.pack_greedy`), beside the recency window packed the same
  way (at 25% it keeps exactly what the contiguous sliding window keeps on all six
  conversations);
* **what a user gets**: ``Compactor(scorer=...)`` with its default parameters compacts
  the whole conversation to the same budget (the same token counter), and an evidence
  turn counts only when it is kept whole (a trimmed or stubbed turn has lost its text).
  The Compactor solves a knapsack on the sum of scores, trims and stubs, so it does not
  keep what the greedy figure keeps.

Query-aware (``--query-aware``): the scorer's query model as well (a minute or more per
split), recall at 10% with each question known, beside the untrained fusion of BM25 and
MiniLM (reciprocal-rank fusion, :class:`~salience.scorer.baselines.FusionScorer`) on the
same questions. Without it only the prior is fitted, and a split takes seconds.

Run as ``python benchmarks/bench_locomo_splits.py [--data ../shared/data] [--query-aware]``.
Prints one line per split, then the mean and the worst split of each figure, then each
conversation's own recall averaged over the five splits that hold it out (which
conversation a weak split owes its figure to), beside what the Compactor keeps of it fed
the answers (whether a question cites each turn, which the prior is trained on, and each
turn's share of the questions, which the recall counts); asserts nothing.
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

from salience import Compactor, ImportanceScorer, Transcript, load_transcripts  # noqa: E402
from salience.bench import evidence_recall  # noqa: E402
from salience.scorer import labels  # noqa: E402
from salience.scorer.baselines import FusionScorer, OracleScorer, RecencyScorer  # noqa: E402
from salience.tokens import as_counter  # noqa: E402

FRACTIONS = (0.05, 0.10, 0.25)


def evidence_labels(t: Transcript) -> Transcript:
    """``t`` labelled as ``salience train`` labels it (:func:`salience.scorer.labels.evidence_labels`:
    whether a question cites each turn, and its share of the questions, which training weights
    the prior by), without its questions (so that only the prior is fitted)."""
    return labels.evidence_labels(t, overwrite=True).replace(queries=())


def compacted_hits(scorer: ImportanceScorer, t: Transcript, fraction: float) -> tuple[float, int]:
    """Query-agnostic evidence recall of one transcript through ``Compactor(scorer=scorer)``
    with its defaults, as ``(sum of its questions' recalls, number of questions)``.

    The transcript is compacted whole to ``fraction`` of its entries' tokens (the counter
    :func:`~salience.bench.evidence_recall` uses); a question's recall is the share of its
    evidence turns kept whole. Questions with no evidence among the entries are left out.
    """
    counter = as_counter(None)
    budget = int(fraction * sum(counter.count_entries(t.entries)))
    kept = set(Compactor(scorer=scorer).compact(t, budget=budget).kept)
    ids = {e.id for e in t.entries}
    hits, n = 0.0, 0
    for q in t.queries:
        evidence = [x for x in dict.fromkeys(q.evidence) if x in ids]
        if evidence:
            hits += sum(x in kept for x in evidence) / len(evidence)
            n += 1
    return hits, n


def compacted_recall(scorer: ImportanceScorer, transcripts: list[Transcript], fraction: float) -> float:
    """Query-agnostic evidence recall through ``Compactor(scorer=scorer)`` with its defaults
    (:func:`compacted_hits`), averaged over the questions of all ``transcripts``, as the
    figure is."""
    parts = [compacted_hits(scorer, t, fraction) for t in transcripts]
    n = sum(k for _, k in parts)
    return sum(h for h, _ in parts) / n if n else float("nan")


def ceilings(t: Transcript, fraction: float) -> tuple[float, float]:
    """What the Compactor keeps of ``t`` at ``fraction`` when fed the answers instead of a
    model's scores (:class:`~salience.scorer.baselines.OracleScorer` on labels): first
    whether a question cites each turn (what the prior is trained to predict), then each
    turn's :func:`~salience.scorer.labels.question_shares` scaled to [0, 1] (what the recall counts)."""
    shares = labels.question_shares(t)
    top = max(shares.values(), default=1.0)
    out = []
    for value in (lambda x: float(x in shares), lambda x: shares.get(x, 0.0) / top):
        labelled = t.replace(entries=tuple(e.replace(label=value(e.id)) for e in t.entries))
        hits, n = compacted_hits(OracleScorer(), labelled, fraction)
        out.append(hits / n if n else float("nan"))
    return out[0], out[1]


def by_conversation(
    results: dict[str, list[tuple[float, float, float]]], *, bounds: dict[str, tuple[float, float]] | None = None
) -> list[str]:
    """One line per held-out conversation from ``{id: [(Compactor, figure, recency), ...]}``
    (one tuple per split that holds it out): the means over those splits, the range of
    the Compactor's recall, and its ratio to the recency window (the same in every split),
    worst first; with ``bounds`` (``{id: ceilings(...)}``) the Compactor fed the answers too."""
    lines = []
    for cid, rows in sorted(results.items(), key=lambda kv: np.mean([r[0] / r[2] for r in kv[1]])):
        a = np.array(rows)
        window = a[:, 2].mean()
        line = (f"{cid}: Compactor {a[:, 0].mean():.3f} ({a[:, 0].min():.3f} to {a[:, 0].max():.3f} over "
                f"{len(a)} splits), {a[:, 0].mean() / window:.2f}x recency {window:.3f}; "
                f"the figure {a[:, 1].mean():.3f}")
        if bounds and cid in bounds:
            cited, share = bounds[cid]
            line += (f"; fed the labels {cited:.3f} ({cited / window:.2f}x), "
                     f"fed the question shares {share:.3f} ({share / window:.2f}x)")
        lines.append(line)
    return lines


def summary(name: str, values: np.ndarray, baseline: np.ndarray) -> str:
    ratios = values / baseline
    return (f"{name}: mean {values.mean():.3f} ({values.mean() / baseline.mean():.2f}x recency), worst split "
            f"{ratios.min():.2f}x, best {ratios.max():.2f}x, {int((ratios >= 2).sum())} of {len(values)} at 2x or more")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--query-aware", action="store_true",
                        help="also fit the query model and compare query-aware recall at 10%% with the fusion")
    parser.add_argument("--splits", default=None,
                        help="only these held-out pairs, comma-separated, e.g. locomo-43+locomo-44 (default: all 15)")
    args = parser.parse_args(argv)
    conversations = sorted(load_transcripts(args.data / "locomo"), key=lambda t: t.id)
    pairs = list(itertools.combinations(range(len(conversations)), 2))
    if args.splits:
        ids = [t.id for t in conversations]
        wanted = {frozenset(s.split("+")) for s in args.splits.split(",")}
        unknown = {c for w in wanted for c in w} - set(ids)
        if unknown or any(len(w) != 2 for w in wanted):
            parser.error(f"--splits: pairs of two of {', '.join(ids)} joined by '+' (got {args.splits!r})")
        pairs = [p for p in pairs if frozenset(ids[i] for i in p) in wanted]
    rows = []
    head = (f"{'test':<22} {'figure 5% / 10% / 25%':>22} {'recency 25%':>12} {'ratio':>6} "
            f"{'Compactor 25%':>14} {'ratio':>6} {'prior AUC (CV)':>15}")
    if args.query_aware:
        head += f" {'query 10%':>10} {'fusion 10%':>11} {'gain':>7}"
    print(head)
    fusion: dict[str, tuple[float, int]] = {}
    per_conversation: dict[str, list[tuple[float, float, float]]] = {}
    with threadpool_limits(1):
        for pair in pairs:
            started = time.perf_counter()
            test = [conversations[i] for i in pair]
            rest = [t for i, t in enumerate(conversations) if i not in pair]
            train = rest if args.query_aware else [evidence_labels(t) for t in rest]
            scorer = ImportanceScorer(random_state=0).fit(train)
            # one conversation at a time, pooled over questions as one call on both would be
            parts = []
            for t in test:
                mine = evidence_recall(scorer, [t], FRACTIONS, query_aware=False)
                window = evidence_recall(RecencyScorer(), [t], FRACTIONS, query_aware=False)
                hits, n = compacted_hits(scorer, t, FRACTIONS[-1])
                parts.append((np.array(mine.recall) * mine.n, np.array(window.recall) * mine.n, mine.n, hits, n))
                per_conversation.setdefault(t.id, []).append((hits / n, mine.recall[-1], window.recall[-1]))
            ours = tuple(float(x) for x in sum(p[0] for p in parts) / sum(p[2] for p in parts))
            recency = tuple(float(x) for x in sum(p[1] for p in parts) / sum(p[2] for p in parts))
            compacted = sum(p[3] for p in parts) / sum(p[4] for p in parts)
            auc = scorer.cv_metrics_.get("cv_prior_roc_auc", float("nan"))
            row = [*ours, recency[-1], compacted]
            line = (f"{' + '.join(t.id for t in test):<22} {' / '.join(f'{r:.3f}' for r in ours):>22} "
                    f"{recency[-1]:>12.3f} {ours[-1] / recency[-1]:>5.2f}x {compacted:>14.3f} "
                    f"{compacted / recency[-1]:>5.2f}x {auc:>15.3f}")
            if args.query_aware:
                aware = evidence_recall(scorer, test, (0.10,), query_aware=True)
                for t in test:  # the fusion is untrained: once per conversation
                    if t.id not in fusion:
                        curve = evidence_recall(FusionScorer(), [t], (0.10,), query_aware=True)
                        fusion[t.id] = (curve.recall[0], curve.n)
                n = sum(fusion[t.id][1] for t in test)
                fused = sum(fusion[t.id][0] * fusion[t.id][1] for t in test) / n
                row += [aware.recall[0], fused]
                line += f" {aware.recall[0]:>10.3f} {fused:>11.3f} {aware.recall[0] - fused:>+7.3f}"
            rows.append(row)
            print(f"{line}  ({time.perf_counter() - started:.0f} s)", flush=True)
    a = np.array(rows)
    print(f"\nquery-agnostic at 25%, over {len(a)} splits (recency window {a[:, 3].mean():.3f} on average):")
    print("  " + summary("the figure (greedy by score)", a[:, 2], a[:, 3]))
    print("  " + summary("the Compactor, default parameters", a[:, 4], a[:, 3]))
    print(f"  the figure at 5% / 10% / 25%: {' / '.join(f'{x:.3f}' for x in a[:, :3].mean(axis=0))}")
    print("by held-out conversation, at 25%, over the splits that hold it out (worst first), and what the "
          "Compactor keeps fed the answers:")
    bounds = {t.id: ceilings(t, FRACTIONS[-1]) for t in conversations}
    for line in by_conversation(per_conversation, bounds=bounds):
        print("  " + line)
    if args.query_aware:
        gain = a[:, 5] - a[:, 6]
        print(f"query-aware at 10%: salience {a[:, 5].mean():.3f}, fusion {a[:, 6].mean():.3f} on average; "
              f"gain {gain.mean():+.3f} (worst split {gain.min():+.3f}, best {gain.max():+.3f}, "
              f"{int((gain >= 0.05).sum())} of {len(a)} at +0.05 or more)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
