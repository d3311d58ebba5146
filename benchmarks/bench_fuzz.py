"""Provider-validity fuzz at full size: every tau-bench airline run, cut and compacted.

All 200 runs of ``../shared/data/tau-bench-airline`` x ``--cuts`` answered cut points
(default 10) x ``--budgets`` random budgets (default 3) x 2 formats (OpenAI, Anthropic),
for each scorer in ``--scorers`` (default: ``default`` and ``random``). The harness is
:func:`fuzz` in ``tests/test_fuzz_providers.py`` (the test suite runs it small): cut
points where every tool call is answered, budgets uniform between the pinned minimum
and the full size with one draw in ten below the minimum (a BudgetError there is a
correct refusal), and every output checked with :mod:`salience.messages.validate`,
its tokens recounted, the input compared with a copy, and the archive restored.

Run as ``python benchmarks/bench_fuzz.py [--cuts 10] [--budgets 3] [--scorers default random]
[--runs N] [--seed 0]``. Prints the counts per scorer and format (outputs checked,
rejected, BudgetError refusals, and every kind of failure with a first example) and
exits 1 when anything other than the known Anthropic role-order problem failed.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
try:
    import salience  # noqa: F401
except ImportError:  # running from a checkout without installing
    sys.path.insert(0, str(ROOT / "src"))

from salience import load_transcripts  # noqa: E402
from salience.scorer.baselines import make_baseline  # noqa: E402
from salience.selector.compactor import Compactor  # noqa: E402
from test_fuzz_providers import FORMATS, FuzzCounts, fuzz  # noqa: E402

SHARED = ROOT.parent / "shared" / "data" / "tau-bench-airline"


def scorer_for(name: str) -> object | None:
    """``None`` (the compactor's default, with its fallback) for ``default``, else a baseline."""
    return None if name == "default" else make_baseline(name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cuts", type=int, default=10, help="cut points per run (default: 10)")
    parser.add_argument("--budgets", type=int, default=3, help="budgets per cut and format (default: 3)")
    parser.add_argument("--scorers", nargs="+", default=["default", "random"],
                        help="'default' and/or baseline names (default: default random)")
    parser.add_argument("--runs", type=int, default=None, help="only the first N runs")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data", type=Path, default=SHARED, help=f"tau-bench folder (default: {SHARED})")
    args = parser.parse_args(argv)
    if not args.data.exists():
        print(f"tau-bench data not found at {args.data}", file=sys.stderr)
        return 2
    runs = load_transcripts(args.data)[: args.runs]
    failed = False
    for name in args.scorers:
        start = time.perf_counter()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            counts = fuzz(runs, Compactor(scorer=scorer_for(name)), cuts=args.cuts, budgets=args.budgets,
                          seed=args.seed)
        seconds = time.perf_counter() - start
        total = FuzzCounts()
        for c in counts.values():
            total.add(c)
        print(f"== scorer {name}: {len(runs)} runs x {args.cuts} cuts x {args.budgets} budgets x "
              f"{len(FORMATS)} formats in {seconds:.1f}s ({total.cases / seconds:.0f} cases/s)")
        for note in {str(w.message) for w in caught}:
            print(f"   note: {note}")
        for fmt, c in counts.items():
            print(f"-- {fmt}")
            print(c.report())
            failed = failed or c.failures(roles=False) > 0
        print()
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
