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

``--readers N`` runs the reader fuzz instead (``tests/test_fuzz_readers.py``, every
reader, data set loader and both entry points, the Responses items reader with
``Compactor.compact`` on Responses items, and the proxy's request bodies on its three
endpoints through the real Starlette app to an ``httpx.MockTransport`` upstream, with N
hypothesis cases each where the test run has 100; the loaders, the command line and
each proxy endpoint get N/2) and prints, per reader, the cases run, how many gave a
valid result and how many a SalienceError (for the proxy: a 400 or 413) naming where,
and the internal errors (the proxy: any other status, a 500 included), mutated inputs
and hangs (all three must be 0; exit 1 otherwise); for the proxy also the restore calls
its fake model made that the proxy answered (``restored``); for ``Compactor.compact`` on
OpenAI and Anthropic messages, how many inputs were valid for the provider and had their
output checked in full (an empty list fails: nothing fitting is a BudgetError).

``--values`` times value extraction (:mod:`salience.values`, which every reader's entries
go through when they are scored or compacted) on adversarial strings of ``--sizes``
characters (default 2,000, 20,000 and 200,000): long runs that the path and identifier
patterns once scanned again from every place inside them (quadratic: 29 s for 20 KB of
'a-'). Prints the seconds per string and how much longer each size took than the one
before (about the size ratio when linear, its square when quadratic); exits 1 when a
string took longer than ``--hang`` seconds (default 20, the reader fuzz's limit).
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


def readers(examples: int) -> int:
    """The reader fuzz with ``examples`` cases per reader; prints the counts (see the module doc)."""
    import json
    import os
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "counts.json"
        env = {**os.environ, "SALIENCE_FUZZ_EXAMPLES": str(examples), "SALIENCE_FUZZ_REPORT": str(report),
               "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
        start = time.perf_counter()
        code = subprocess.call([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                                str(ROOT / "tests" / "test_fuzz_readers.py")], env=env, cwd=ROOT)
        seconds = time.perf_counter() - start
        counts = json.loads(report.read_text()) if report.exists() else {}
    print(f"== reader fuzz: {examples} cases per reader in {seconds:.0f}s (pytest exit {code})")
    print(f"{'reader':36} {'cases':>7} {'valid':>7} {'refused':>8} {'internal':>9} {'mutated':>8} {'hangs':>6} "
          f"{'ms/case':>8} {'restored':>8}")
    total = {"cases": 0, "internal": 0, "mutated": 0, "hangs": 0}
    for name, c in sorted(counts.items()):
        per = c.get("seconds_x1000", 0) / max(1, c.get("cases", 0))
        print(f"{name:36} {c.get('cases', 0):7,} {c.get('valid', 0):7,} {c.get('refused', 0):8,} "
              f"{c.get('internal', 0):9,} {c.get('mutated', 0):8,} {c.get('hangs', 0):6,} {per:8.1f} "
              f"{c['restore_answered'] if 'restore_answered' in c else '':>8}")
        for key in total:
            total[key] += c.get(key, 0)
    print(f"{'total':36} {total['cases']:7,} {'':7} {'':8} {total['internal']:9,} {total['mutated']:8,} "
          f"{total['hangs']:6,}")
    for name, c in sorted(counts.items()):
        if "valid in, checked out" in c:
            print(f"{name}: {c['valid in, checked out']:,} valid inputs whose output was checked in full "
                  f"(salience.messages.validate)")
    return 1 if code != 0 or total["internal"] or total["mutated"] or total["hangs"] else 0


#: Repeated units that made the value patterns quadratic, and the runs they stand for.
ADVERSARIAL = {
    "a-": "a [\\w-] run: path part, file name, identifier",
    "a/": "a chain of path parts",
    "a/.": "a chain of parts each starting after '.'",
    "a#": "an identifier run with '#'",
    "1-": "digits and '-'",
    "é-": "non-ASCII letters and '-'",
    "a_b-": "snake and kebab case",
    "---ab1 ": "runs behind three '-'",
    "x.py#L12 ": "a run entered from inside, after a match",
    "z": "one letter (the email pattern, quadratic until #15's first fix)",
}


def value_timings(sizes: list[int], hang: float) -> int:
    """Time :func:`salience.values.extract_values` and ``call_values`` on each adversarial string."""
    from salience import values

    print("== value extraction on adversarial strings (seconds per string, CPU time; x: growth over the size before)")
    print(f"{'unit':12} " + " ".join(f"{size:>16,}" for size in sizes) + "  what it stands for")
    slowest = 0.0
    for unit, what in ADVERSARIAL.items():
        cells, before = [], None
        for size in sizes:
            text = (unit * (size // len(unit) + 1))[:size]
            values._extract.cache_clear()
            start = time.process_time()
            values.extract_values(text)
            values.call_values(text)
            seconds = time.process_time() - start
            slowest = max(slowest, seconds)
            grow = f"x{seconds / before:5.1f}" if before else ""
            cells.append(f"{seconds:9.3f} {grow:>6}")
            before = max(seconds, 1e-6)
        print(f"{unit!r:12} " + " ".join(cells) + f"  {what}")
    print(f"slowest: {slowest:.3f}s (limit {hang:.0f}s)")
    return 1 if slowest > hang else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cuts", type=int, default=10, help="cut points per run (default: 10)")
    parser.add_argument("--budgets", type=int, default=3, help="budgets per cut and format (default: 3)")
    parser.add_argument("--scorers", nargs="+", default=["default", "random"],
                        help="'default' and/or baseline names (default: default random)")
    parser.add_argument("--runs", type=int, default=None, help="only the first N runs")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data", type=Path, default=SHARED, help=f"tau-bench folder (default: {SHARED})")
    parser.add_argument("--readers", type=int, default=None, metavar="N",
                        help="run the reader fuzz with N cases per reader instead (tests/test_fuzz_readers.py)")
    parser.add_argument("--values", action="store_true",
                        help="time value extraction on adversarial strings instead (see --sizes)")
    parser.add_argument("--sizes", type=int, nargs="+", default=[2_000, 20_000, 200_000],
                        help="string lengths for --values (default: 2000 20000 200000)")
    parser.add_argument("--hang", type=float, default=20.0, help="seconds per string for --values (default: 20)")
    args = parser.parse_args(argv)
    if args.values:
        return value_timings(args.sizes, args.hang)
    if args.readers is not None:
        return readers(args.readers)
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
