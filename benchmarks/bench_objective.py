"""What the selection objective can reach with perfect scores, and what each part of it costs.

Issue #14 wants the sliding window + 0.10 of the independent references in every held-out
domain. :mod:`bench_oracle` showed that at 10% on ToolTalk and API-Bank the default Compactor
misses that even when fed perfect per-entry scores. This splits the rest up, at every tool-call
step of a shared tool-use set (no ``max_steps`` cap), budget :func:`history_budget` (system
tokens + f x the others):

* ``window``: the benchmark's sliding window (text tokens);
* ``default``: ``Compactor(scorer=ReferenceScorer)`` (an entry holding k of the step's
  references scores min(1, k/2), the others 0), every other parameter at its default;
* ``no pins``: the same with ``pin_last=0, pin_last_user=False`` (only the system prompt pinned);
* ``no digest``: the same with ``digest=0``;
* ``text tokens``: the same counting the budget in the benchmark's units
  (``TokenCounter(message_overhead=0, call_overhead=0)``), not as billed;
* ``oracle``: the best set of whole non-system messages within the budget as the default
  counter bills them (3 tokens a message, 3 a call, the system messages charged too), found
  by ``scipy.optimize.milp``, tool pairing ignored;
* ``oracle, paired``: the same with each call and its results together
  (:func:`salience.bench.ceiling.best_whole_messages`; before the thirteenth session, a result
  only beside its call, a call without its results allowed).

Not part of the tests::

    python benchmarks/bench_objective.py [--data ../shared/data] [--domains tooltalk,api-bank]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
try:
    import salience  # noqa: F401
except ImportError:  # running from a checkout without installing
    sys.path.insert(0, str(ROOT / "src"))

from bench_oracle import ReferenceScorer, best_cover, holds, reference_steps  # noqa: E402

from salience import BudgetError, Compactor, TokenCounter  # noqa: E402
from salience.bench.independent import (  # noqa: E402
    history_budget,
    sliding_window,
    visible,
)

VARIANTS: dict[str, dict[str, Any]] = {
    "default": {},
    "no pins": {"pin_last": 0, "pin_last_user": False},
    "no digest": {"digest": 0.0},
    "text tokens": {"counter": TokenCounter("cl100k_base", message_overhead=0, call_overhead=0)},
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--domains", default="tooltalk,api-bank")
    parser.add_argument("--fractions", default="0.1,0.25")
    args = parser.parse_args(argv)
    fractions = [float(f) for f in args.fractions.split(",")]
    kinds = ("window", *VARIANTS, "oracle", "oracle, paired")
    print(f"{'domain':<18} {'budget':>6} {'refs':>5} " + " ".join(f"{k:>14}" for k in kinds))
    for domain in args.domains.split(","):
        seen = {(f, k): 0 for f in fractions for k in kinds}
        total = 0
        for history, refs in reference_steps(args.data, domain):
            total += len(refs)
            scorer = ReferenceScorer(holds(history, refs))
            for f in fractions:
                budget = history_budget(history, f)
                seen[(f, "window")] += visible(refs, sliding_window(history, budget))
                for name, params in VARIANTS.items():
                    try:
                        out = Compactor(scorer=scorer, **params).compact(history, budget=budget)
                        seen[(f, name)] += visible(refs, out.messages)
                    except BudgetError:
                        pass
                seen[(f, "oracle")] += best_cover(history, refs, budget, billed=True)
                seen[(f, "oracle, paired")] += best_cover(history, refs, budget, billed=True, pairing=True)
        for f in fractions:
            cells = " ".join(f"{seen[(f, k)] / total if total else float('nan'):>14.3f}" for k in kinds)
            print(f"{domain:<18} {f:>6.0%} {total:>5} {cells}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
