"""How long the learned scorer takes on 1,000 entries whose embeddings are cached.

Run: ``python benchmarks/bench_scoring.py [--scorer FILE] [--entries 1000] [--repeat 20]``

Three timings per call, beside the BM25 and fusion baselines on the same transcript:

* ``cold``: a transcript the scorer has not seen, but whose entry texts the
  embedder has (the common case after the first call: history grows, texts repeat);
* ``warm``: the same transcript again (per-transcript features cached);
* ``query``: query-aware scoring of the warm transcript (BM25 and the query's
  embedding are computed per call).

Prints milliseconds per call; asserts nothing (timings are not tests).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from salience import Transcript, load_transcripts
from salience.scorer.baselines import BM25Scorer, FusionScorer
from salience.scorer.model import ImportanceScorer, default_scorer

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data" / "tau-bench-airline"


def history(n: int) -> Transcript:
    """A realistic agent history of ``n`` entries: tau-bench runs one after another
    (or the project's samples, repeated, when the shared data is absent)."""
    source = load_transcripts(SHARED if SHARED.exists() else ROOT / "data")
    entries = []
    k = 0
    while len(entries) < n:
        for t in source:
            for e in t.entries:
                if e.role == "system" and entries:
                    continue
                if e.tool_calls or e.tool_call_id:
                    continue  # ids repeat across runs; plain turns keep the history valid
                entries.append(e.replace(id=f"e{k}", meta={}))
                k += 1
                if len(entries) == n:
                    break
            if len(entries) == n:
                break
    return Transcript(id="bench", entries=tuple(entries))


def timed(fn, repeat: int) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scorer", help="scorer file (default: the bundled default scorer)")
    parser.add_argument("--entries", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    scorer = ImportanceScorer.load(args.scorer) if args.scorer else default_scorer()
    t = history(args.entries)
    query = "Which reservation did the user want to cancel, and how was it paid?"
    scorer.score(t)  # embeds every text once: the cache the timings below rely on
    scorer.score(t, query)

    def cold() -> None:
        fresh = Transcript(id=f"cold-{time.perf_counter_ns()}", entries=t.entries)
        scorer.score(fresh)

    rows = [
        ("salience, new transcript (embeddings cached)", timed(cold, args.repeat)),
        ("salience, same transcript again", timed(lambda: scorer.score(t), args.repeat)),
        ("salience, query-aware", timed(lambda: scorer.score(t, query), args.repeat)),
        ("bm25 baseline, query-aware", timed(lambda: BM25Scorer().score(t, query), args.repeat)),
        ("fusion baseline (bm25 + MiniLM), query-aware", timed(lambda: FusionScorer().score(t, query), args.repeat)),
    ]
    print(f"scoring {len(t.entries)} entries, median of {args.repeat} calls")
    width = max(len(name) for name, _ in rows)
    for name, ms in rows:
        print(f"  {name:<{width}}  {ms:8.1f} ms")


if __name__ == "__main__":
    main()
