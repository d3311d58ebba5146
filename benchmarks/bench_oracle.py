"""How much of the independent references a perfect choice of whole messages could keep.

An upper reference for issue #14's figures: at every tool-call step of a shared tool-use set
(no ``max_steps`` cap), the best set of whole non-system messages of the history within the
budget of :func:`salience.bench.independent.history_budget` (system tokens + f x the others),
found by :func:`salience.bench.ceiling.best_whole_messages` (a 0-1 program) that knows the
step's independent references: the most references visible (a reference is covered by any
chosen message whose text holds it) within the budget. Tool pairing is ignored, so it is an
upper bound on what whole messages can do (``bench_unseen.py`` prints the ceiling with pairs
kept). Counted two ways: in text tokens (the benchmark's units) and as the default
:class:`salience.TokenCounter` counts (3 more tokens a message, 3 a call, and the system
prompt's messages charged too). Printed beside the sliding window and beside the
default ``Compactor`` fed the references as its scores (an entry holding k of them scores
min(1, k/2), the others 0): what the selector does with a perfect per-entry scorer, pins, tool
pairing and per-message costs included. Not part of the tests::

    python benchmarks/bench_oracle.py [--data ../shared/data] [--domains api-bank,tooltalk]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
try:
    import salience  # noqa: F401
except ImportError:  # running from a checkout without installing
    sys.path.insert(0, str(ROOT / "src"))

import numpy as np  # noqa: E402

from salience import BudgetError, Compactor, load_transcripts  # noqa: E402
from salience.bench.ceiling import best_whole_messages  # noqa: E402
from salience.bench.independent import (  # noqa: E402
    history_budget,
    independent_references,
    is_step,
    message_text,
    sliding_window,
    visible,
)


class ReferenceScorer:
    """Scores that know the step's references: min(1, k/2) for an entry holding k of them."""

    def __init__(self, holds: list[int]) -> None:
        self.scores = np.minimum(1.0, 0.5 * np.asarray(holds, dtype=float))

    def score(self, transcript: object, query: str | None = None) -> np.ndarray:
        return self.scores


def reference_steps(data: Path, domain: str) -> Iterator[tuple[list[dict], tuple[str, ...]]]:
    """Every tool-call step of ``data / domain`` that has independent references, as the
    history before it and those references (every step: no ``max_steps`` cap)."""
    for t in load_transcripts(data / domain):
        messages = t.to_openai()
        for s in range(1, len(messages)):
            if not is_step(messages[s]):
                continue
            refs = independent_references(messages, s).refs
            if refs:
                yield messages[:s], refs


def holds(history: list[dict], refs: tuple[str, ...]) -> list[int]:
    """How many of ``refs`` each message of ``history`` holds in its text."""
    return [sum(r in message_text(m) for r in refs) for m in history]


def with_reference_scores(history: list[dict], refs: tuple[str, ...], budget: int) -> int:
    """References visible after the default Compactor, fed :class:`ReferenceScorer`."""
    try:
        out = Compactor(scorer=ReferenceScorer(holds(history, refs))).compact(history, budget=budget).messages
    except BudgetError:
        return 0
    return visible(refs, out)


def best_cover(history: list[dict], refs: tuple[str, ...], budget: int, billed: bool, pairing: bool = False) -> int:
    """Most of ``refs`` that whole messages of ``history`` within ``budget`` can hold
    (:func:`salience.bench.ceiling.best_whole_messages`); ``pairing``: a call and its results
    together, as a provider wants them (off here: the loosest bound)."""
    picked = best_whole_messages(history, refs, budget, billed=billed, pairing=pairing)
    return visible(refs, [history[i] for i in picked])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--domains", default="api-bank,tooltalk")
    parser.add_argument("--fractions", default="0.1,0.25")
    args = parser.parse_args(argv)
    fractions = [float(f) for f in args.fractions.split(",")]
    print(f"{'domain':<18} {'budget':>6} {'refs':>6} {'window':>7} {'oracle, text':>13} {'oracle, billed':>15} "
          f"{'Compactor, reference scores':>28}")
    for domain in args.domains.split(","):
        kinds = ("window", "text", "billed", "compactor")
        seen = {(f, k): 0 for f in fractions for k in kinds}
        total = 0
        for history, refs in reference_steps(args.data, domain):
            total += len(refs)
            for f in fractions:
                budget = history_budget(history, f)
                seen[(f, "window")] += visible(refs, sliding_window(history, budget))
                seen[(f, "text")] += best_cover(history, refs, budget, billed=False)
                seen[(f, "billed")] += best_cover(history, refs, budget, billed=True)
                seen[(f, "compactor")] += with_reference_scores(history, refs, budget)
        for f in fractions:
            share = {k: seen[(f, k)] / total if total else float("nan") for k in kinds}
            print(f"{domain:<18} {f:>6.0%} {total:>6} {share['window']:>7.3f} {share['text']:>13.3f} "
                  f"{share['billed']:>15.3f} {share['compactor']:>28.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
