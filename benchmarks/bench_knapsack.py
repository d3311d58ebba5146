"""Benchmark the knapsack selector on a realistic synthetic context.

1,000 entries with lognormal token sizes (about 50 to 5,000), trims at ~30%
of the full cost, 25-token stubs, ~30% of entries in tool-call groups, a few
pinned entries, and a 30,000-token budget. Prints milliseconds per call for
:func:`solve_exact` (default ``max_cells``, which scales costs at this size,
and with ``max_cells`` large enough to stay exact), :func:`solve_greedy`,
:func:`solve_lp` (the LP rounding alone, and with the core solved to a zero gap) and
:func:`solve`, plus each answer's value relative to the greedy one and its certified gap.

Run as ``python benchmarks/bench_knapsack.py [--n N] [--budget B] [--repeat R]``.
Nothing is asserted about times.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

try:
    from salience.selector.knapsack import DROP, FULL, STUB, TRIM, Solution, solve, solve_exact, solve_greedy, solve_lp
except ImportError:  # running from a checkout without installing
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    from salience.selector.knapsack import DROP, FULL, STUB, TRIM, Solution, solve, solve_exact, solve_greedy, solve_lp


def make_context(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Synthetic (costs, values, allowed, parent) for ``n`` entries."""
    rng = np.random.default_rng(seed)
    full = np.clip(np.round(rng.lognormal(np.log(350), 1.0, n)), 50, 5000).astype(np.int64)
    costs = np.zeros((n, 4), dtype=np.int64)
    costs[:, FULL] = full
    costs[:, TRIM] = np.maximum(1, np.round(0.3 * full)).astype(np.int64)
    costs[:, STUB] = np.minimum(25, full)
    recency = np.linspace(0.2, 1.0, n)  # later entries matter more
    importance = rng.beta(2, 5, n) * recency
    values = np.zeros((n, 4))
    values[:, FULL] = importance
    values[:, TRIM] = 0.7 * importance
    values[:, STUB] = 0.15 * importance

    allowed = np.ones((n, 4), dtype=bool)
    allowed[rng.random(n) < 0.2, TRIM] = False  # no trimmed form

    parent = np.full(n, -1, dtype=np.int64)
    i = 0
    while i < n:
        if rng.random() < 0.12 and i + 1 < n:  # assistant turn with tool calls
            k = int(rng.integers(1, 4))
            kids: list[int] = []
            j = i + 1
            while len(kids) < k and j < n:
                if rng.random() < 0.8:  # results mostly follow, sometimes interleaved
                    kids.append(j)
                j += 1
            parent[kids] = i
            i = j
        else:
            i += 1

    pinned = [0] + [int(x) for x in rng.choice(np.flatnonzero(parent == -1), 5, replace=False)]
    costs[pinned, FULL] = np.minimum(costs[pinned, FULL], 400)
    for p in pinned:
        allowed[p] = [True, False, False, False]
    assert (costs[:, DROP] == 0).all()
    return costs, values, allowed, parent


def time_call(fn: Callable[[], Solution], repeat: int) -> tuple[float, Solution]:
    """Median milliseconds over ``repeat`` calls, and the last result."""
    times = []
    sol = fn()  # warm-up
    for _ in range(repeat):
        t0 = time.perf_counter()
        sol = fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times), sol


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--budget", type=int, default=30_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    costs, values, allowed, parent = make_context(args.n, args.seed)
    grouped = int((parent >= 0).sum() + np.isin(np.arange(args.n), parent).sum())
    print(
        f"n={args.n} budget={args.budget} total FULL cost={int(costs[:, FULL].sum())} "
        f"entries in tool groups={grouped} ({grouped / args.n:.0%}) "
        f"cells n*(budget+1)={args.n * (args.budget + 1):,}"
    )
    big = args.n * (args.budget + 1) + 1
    runs: list[tuple[str, Callable[[], Solution]]] = [
        ("solve_greedy", lambda: solve_greedy(costs, values, args.budget, allowed=allowed, parent=parent)),
        (
            "solve_exact (default max_cells)",
            lambda: solve_exact(costs, values, args.budget, allowed=allowed, parent=parent),
        ),
        (
            f"solve_exact (max_cells={big:,})",
            lambda: solve_exact(costs, values, args.budget, max_cells=big, allowed=allowed, parent=parent),
        ),
        ("solve_lp (tol=1, no core)", lambda: solve_lp(costs, values, args.budget, allowed=allowed, parent=parent,
                                                       tol=0.999)),
        ("solve_lp (tol=0, core)", lambda: solve_lp(costs, values, args.budget, allowed=allowed, parent=parent,
                                                    tol=0.0)),
        ("solve (auto: the LP, tol=1e-4)", lambda: solve(costs, values, args.budget, allowed=allowed, parent=parent)),
    ]
    greedy_value = None
    for name, fn in runs:
        ms, sol = time_call(fn, args.repeat)
        if greedy_value is None:
            greedy_value = sol.value
        ratio = sol.value / greedy_value if greedy_value else float("nan")
        counts = np.bincount(sol.choices, minlength=4)
        print(
            f"{name:<38} {ms:9.1f} ms/call  method={sol.method:<9} exact={sol.exact!s:<5} "
            f"cost={sol.cost:>6} value={sol.value:.4f}  value/greedy={ratio:.4f}  gap={sol.gap:.1e}  "
            f"F/T/S/D={counts[FULL]}/{counts[TRIM]}/{counts[STUB]}/{counts[DROP]}"
        )


if __name__ == "__main__":
    main()
