"""Issue #12's table: a plain ``compact()`` beside LangChain's ``trim_messages``, and the solver's quality.

Run: ``python benchmarks/bench_compact.py [--sizes 100 300 1000 3000 10000] [--steps 20] [--out DIR]
[--exact-instances 4] [--recall] [--fresh-runs 3] [--bytecode-cache]``

For each size ``n`` (messages in the history, built as in ``bench_latency.py``: the
project's agent samples run one after another, varied so that no text repeats), the
budget is 30% of the history's tokens (``--share``) and the history grows by one message
per call:

* ``fresh``: **the first call of a process**, issue #12's "first call": a new Python
  process runs ``from salience import Compactor, default_scorer``, loads the scorer
  (``default_scorer()``) and builds the history, then times its first
  ``Compactor(scorer=scorer).compact(history, budget=B)``. Inside the timing: the
  tokenizer's load, whatever the call imports on first use, every cache empty. Outside:
  ``import salience`` and the scorer's imports (scikit-learn) and file load, printed
  beside it (``import``, ``load``). Median of ``--fresh-runs`` processes, wall time and
  the process's CPU time (steadier on a busy machine). Where ``PYTHONDONTWRITEBYTECODE``
  is set (as on this project's machine) each new process compiles salience's modules from
  source, the call's lazy imports included; ``--bytecode-cache`` gives the children a
  bytecode cache of their own (``PYTHONPYCACHEPREFIX``, filled by one untimed process
  first), as an installed package has;
* ``first``: the same call in this process with every cache emptied
  (``bench_latency.cold``): imports done and the tokenizer loaded, so only the per-entry
  work of a first call (token counts, features, options);
* ``plain``: the median of the same call over ``--steps`` calls, one new message each;
* ``today``: the same with ``solver="exact"``, what the default was before issue #12 (the
  DP, cost-scaled past 20M cells), median of 5 calls;
* ``session``: the median appending call of a :class:`~salience.selector.compactor.CompactionSession`
  (the calls whose method is ``session-noop``);
* ``trim``: ``langchain_core.messages.trim_messages`` on the same messages as LangChain
  messages (``strategy="last"``), with a tiktoken ``cl100k_base`` counter that encodes
  every text on every call; ``trim memo``: the same counter behind an ``lru_cache`` over
  the text, so a call is mostly lookups. Medians over the same growing histories.

Ratios are salience's time over ``trim_messages``'s (lower is better: 0.1x is ten times
faster). The solver part: every knapsack problem the plain calls solved is recorded
(costs, values, allowed options, groups, budget); up to ``--exact-instances`` per size are
solved again by the exact DP (unscaled; sizes whose DP would pass ``--exact-cells`` cells
are left out and only the certified gap is shown), and the default solver's value is
given as a share of the exact optimum, with the greedy's, today's default's (the
cost-scaled DP, ``solver="exact"``) and the share of entries that got the same option.
``--recall`` also replays the shared tool-use sets (``bench_unseen``'s five, the bundled
scorer, the system tokens plus 10% / 25%, at most 6 steps per transcript) with the
default solver (which runs the exact DP outright on small problems, as most of these
histories are), with ``solver="lp"`` (the LP on every problem) and with today's
(``solver="exact"``), and prints the reference recall of each.

Prints the tables; writes ``compact.png`` (time against history size per method,
log-log) and ``compact.json`` into ``--out`` (default ``benchmarks/out``, git-ignored).
Asserts nothing about times.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
try:
    import salience  # noqa: F401
except ImportError:  # running from a checkout without installing
    sys.path.insert(0, str(ROOT / "src"))

from bench_latency import agent_history, cold, load_scorer, ms, tiktoken_counter  # noqa: E402

from salience import Compactor, Transcript  # noqa: E402
from salience.bench.report import plot_timings  # noqa: E402
from salience.selector import knapsack  # noqa: E402

Instance = tuple[np.ndarray, np.ndarray, int, np.ndarray, np.ndarray]


def timed(fn: Any, *args: Any, **kwargs: Any) -> tuple[float, Any]:
    """(wall ms, result) of ``fn(*args, **kwargs)``."""
    started = time.perf_counter()
    out = fn(*args, **kwargs)
    return (time.perf_counter() - started) * 1000, out


class Recorder:
    """Wraps ``knapsack.solve`` for the plain calls, keeping each problem (and the time spent solving)."""

    def __init__(self) -> None:
        self.instances: list[Instance] = []
        self.solve_ms: list[float] = []
        self.gaps: list[float] = []
        self._solve = knapsack.solve

    def __enter__(self) -> Recorder:
        def solve(costs: Any, values: Any, budget: int, **kw: Any) -> knapsack.Solution:
            t0 = time.perf_counter()
            sol = self._solve(costs, values, budget, **kw)
            self.solve_ms.append((time.perf_counter() - t0) * 1000)
            self.gaps.append(sol.gap)
            self.instances.append((np.array(costs), np.array(values), int(budget), np.array(kw["allowed"]),
                                   np.array(kw["parent"])))
            return sol

        knapsack.solve = solve  # type: ignore[assignment]
        return self

    def __exit__(self, *exc: Any) -> None:
        knapsack.solve = self._solve  # type: ignore[assignment]


#: What a new process runs for ``fresh``: nothing of salience is imported before ``t0``.
FRESH_CHILD = """
import json, sys, time
t0 = time.perf_counter()
from salience import Compactor, default_scorer
t1 = time.perf_counter()
scorer = default_scorer()
t2 = time.perf_counter()
sys.path.insert(0, {benchmarks!r})
from bench_latency import agent_history
messages = agent_history({n})
compactor = Compactor(scorer=scorer)
t3, c3 = time.perf_counter(), time.process_time()
result = compactor.compact(messages, budget={budget})
t4, c4 = time.perf_counter(), time.process_time()
print(json.dumps({{"import_ms": (t1 - t0) * 1000, "load_ms": (t2 - t1) * 1000, "fresh_ms": (t4 - t3) * 1000,
                  "fresh_cpu_ms": (c4 - c3) * 1000}}))
"""


def fresh(n: int, budget: int, runs: int, pycache: Path | None = None) -> dict[str, float]:
    """Medians over ``runs`` new processes (:data:`FRESH_CHILD`) of the import, the scorer's load and the first call
    (wall, and the first call's CPU time); ``pycache``: the children's own bytecode cache, filled by one untimed run."""
    code = FRESH_CHILD.format(benchmarks=str(ROOT / "benchmarks"), n=n, budget=budget)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(ROOT / "src"), os.environ.get("PYTHONPATH"))
                                                      if p))
    if pycache is not None:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(pycache)
    got = []
    for k in range(runs + (pycache is not None)):
        out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, env=env).stdout
        if pycache is None or k > 0:
            got.append(json.loads(out.strip().splitlines()[-1]))
    return {key: statistics.median(g[key] for g in got) for key in ("import_ms", "load_ms", "fresh_ms", "fresh_cpu_ms")}


def bench_size(n: int, steps: int, scorer: Any, share: float,
               fresh_runs: int = 3, pycache: Path | None = None) -> tuple[dict[str, Any], list[Instance]]:
    from langchain_core.messages import trim_messages

    from salience.adapters.langchain import to_langchain

    messages = agent_history(n + steps + 1)
    tokens = Compactor(scorer=scorer).compact(messages[:n], budget=10**12).source_tokens
    budget = max(1000, int(tokens * share))
    row: dict[str, Any] = {"entries": n, "tokens": tokens, "budget": budget}
    if fresh_runs:
        row.update(fresh(n, budget, fresh_runs, pycache))

    cold(scorer)
    compactor = Compactor(scorer=scorer)
    c0 = time.process_time()
    row["first_ms"], first = ms(lambda: compactor.compact(messages[:n], budget=budget))
    row["first_cpu_ms"] = (time.process_time() - c0) * 1000
    row["first_method"] = first.method
    plain = []
    with Recorder() as rec:
        for k in range(1, steps + 1):
            t, result = ms(lambda k=k: compactor.compact(messages[: n + k], budget=budget))
            assert result.tokens <= budget
            plain.append(t)
    row["plain_ms"] = statistics.median(plain)
    row["solve_ms"] = statistics.median(rec.solve_ms) if rec.solve_ms else 0.0
    row["gap_max"] = max(rec.gaps) if rec.gaps else 0.0
    row["method"] = result.method

    today = Compactor(scorer=scorer, solver="exact")  # today's default: the (cost-scaled) DP
    today.compact(messages[:n], budget=budget)
    row["today_ms"] = statistics.median(
        ms(lambda k=k: today.compact(messages[: n + k], budget=budget))[0] for k in range(1, min(steps, 5) + 1))

    session = Compactor(scorer=scorer, budget=budget).session()
    session.compact(messages[:n])
    appends = []
    for k in range(1, steps + 1):
        t, result = ms(lambda k=k: session.compact(messages[: n + k]))
        if result.method == "session-noop":
            appends.append(t)
    row["session_ms"] = statistics.median(appends) if appends else float("nan")
    row["session_appends"] = len(appends)

    lc = to_langchain(Transcript.from_openai(messages))
    for key, counter in (("trim_ms", tiktoken_counter()), ("trim_memo_ms", tiktoken_counter(cached=True))):
        trims = []
        for k in range(0, min(steps, 6) + 1):
            t, _ = ms(lambda k=k, counter=counter: trim_messages(
                lc[: n + k], max_tokens=budget, token_counter=counter, strategy="last", include_system=True,
                start_on="human"))
            trims.append(t)
        row[key] = statistics.median(trims[1:])  # the memoized counter's first call fills its cache
    for key in ("plain", "session"):
        row[f"{key}_vs_trim"] = row[f"{key}_ms"] / row["trim_ms"]
        row[f"{key}_vs_trim_memo"] = row[f"{key}_ms"] / row["trim_memo_ms"]
    return row, rec.instances


def quality(instances: list[Instance], count: int, exact_cells: int) -> dict[str, Any]:
    """The default solver against the exact DP on up to ``count`` of the recorded problems."""
    out: dict[str, Any] = {"instances": 0}
    picks = instances[:: max(1, len(instances) // max(count, 1))][:count]
    ratios, greedy, today, agree, solve_ms, exact_ms = [], [], [], [], [], []
    for costs, values, budget, allowed, parent in picks:
        kw = dict(allowed=allowed, parent=parent)
        cells = costs.shape[0] * (budget + 1)
        if cells > exact_cells:
            continue
        t, sol = timed(knapsack.solve, costs, values, budget, **kw)
        te, ex = timed(knapsack.solve_exact, costs, values, budget, max_cells=exact_cells, **kw)
        assert ex.exact
        solve_ms.append(t)
        exact_ms.append(te)
        ratios.append(sol.value / ex.value)
        greedy.append(knapsack.solve_greedy(costs, values, budget, **kw).value / ex.value)
        today.append(knapsack.solve_exact(costs, values, budget, **kw).value / ex.value)
        agree.append(float(np.mean(np.asarray(sol.choices) == np.asarray(ex.choices))))
    if ratios:
        out = {"instances": len(ratios), "value_vs_exact_min": min(ratios),
               "value_vs_exact_mean": float(np.mean(ratios)),
               "greedy_vs_exact_min": min(greedy), "today_vs_exact_min": min(today),
               "same_option_min": min(agree), "solve_ms": statistics.median(solve_ms),
               "exact_ms": statistics.median(exact_ms)}
    return out


def synthetic_quality() -> dict[str, Any]:
    """``bench_knapsack``'s synthetic 1,000-entry context (no pins' worth in the values)."""
    from bench_knapsack import make_context

    rows = []
    for seed in range(5):
        costs, values, allowed, parent = make_context(1000, seed=seed)
        kw = dict(allowed=allowed, parent=parent)
        t, sol = timed(knapsack.solve, costs, values, 30_000, **kw)
        ex = knapsack.solve_exact(costs, values, 30_000, max_cells=10**9, **kw)
        g = knapsack.solve_greedy(costs, values, 30_000, **kw)
        rows.append((sol.value / ex.value, g.value / ex.value, t, sol.method, sol.gap))
    return {"value_vs_exact_min": min(r[0] for r in rows), "greedy_vs_exact_min": min(r[1] for r in rows),
            "solve_ms_median": statistics.median(r[2] for r in rows), "methods": sorted({r[3] for r in rows}),
            "gap_max": max(r[4] for r in rows)}


def recall(data: Path, max_steps: int) -> dict[str, Any]:
    """Reference recall on the shared tool-use sets, the default solver beside today's."""
    from salience import default_scorer, load_transcripts
    from salience.bench.independent import compactor_selector, evaluate

    scorer = default_scorer()
    out: dict[str, Any] = {}
    for domain in ("tau-bench-airline", "mint", "swe-agent", "tooltalk", "api-bank"):
        if not (data / domain).exists():
            print(f"  {domain}: not found under {data}, skipped", flush=True)
            continue
        transcripts = load_transcripts(data / domain)
        selectors = {"default": compactor_selector(Compactor(scorer=scorer)),
                     "lp only": compactor_selector(Compactor(scorer=scorer, solver="lp")),
                     "today": compactor_selector(Compactor(scorer=scorer, solver="exact"))}
        t0 = time.perf_counter()
        report = evaluate(transcripts, selectors, (0.10, 0.25), max_steps=max_steps, reference=None)
        out[domain] = {
            f"{method} {f:.0%}": {"independent_micro": report.result(method, f).independent.micro,
                                  "ours_micro": report.result(method, f).ours.micro,
                                  "over_budget": report.result(method, f).over_budget}
            for method in selectors for f in (0.10, 0.25)
        }
        print(f"  {domain}: {report.steps} steps, {time.perf_counter() - t0:.0f} s", flush=True)
    return out


def plot(rows: list[dict[str, Any]], path: Path, what: str) -> None:
    series = (
        ("fresh_ms", "salience compact(), first call of a new process", "*-"),
        ("first_ms", "salience compact(), first call (caches emptied, tokenizer loaded)", "o-"),
        ("plain_ms", "salience compact(), one new message per call", "s-"),
        ("solve_ms", "  of which the knapsack solver", "s:"),
        ("today_ms", "salience compact(), before (solver='exact', the scaled DP)", "d--"),
        ("session_ms", "salience session, appending call", "^-"),
        ("trim_ms", "LangChain trim_messages (tiktoken)", "x--"),
        ("trim_memo_ms", "LangChain trim_messages (tiktoken, lru_cache)", "+:"),
    )
    plot_timings(rows, path, series, xlabel="messages in the history", ylabel="ms per call (median)",
                 title=f"compact() against trim_messages, budget 30% of the history\n({what})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 300, 1000, 3000, 10000])
    parser.add_argument("--steps", type=int, default=20, help="calls per size, one new message each")
    parser.add_argument("--share", type=float, default=0.30, help="budget as a share of the history's tokens")
    parser.add_argument("--exact-instances", type=int, default=4, help="recorded problems per size solved exactly")
    parser.add_argument("--exact-cells", type=int, default=200_000_000, help="the largest exact DP to run")
    parser.add_argument("--recall", action="store_true", help="also the reference recall on the shared sets")
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--max-steps", type=int, default=6, help="--recall: measured steps per transcript")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "out")
    parser.add_argument("--fresh-runs", type=int, default=3, help="new processes timed per size for the first call")
    parser.add_argument("--bytecode-cache", action="store_true",
                        help="fresh: the new processes keep a bytecode cache (PYTHONPYCACHEPREFIX under --out), "
                             "as an installed package has, even where PYTHONDONTWRITEBYTECODE is set")
    args = parser.parse_args(argv)
    scorer, what = load_scorer()
    print(f"scorer: {what}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores", flush=True)
    rows, qualities = [], []
    for n in args.sizes:
        pycache = args.out / "pycache" if args.bytecode_cache else None
        row, instances = bench_size(n, args.steps, scorer, args.share, args.fresh_runs, pycache)
        rows.append(row)
        qualities.append(quality(instances, args.exact_instances, args.exact_cells))
        if "fresh_ms" in row:
            print(f"  {n:>6} messages: first call of a new process {row['fresh_ms']:.0f} ms, CPU "
                  f"{row['fresh_cpu_ms']:.0f} ms (after import salience {row['import_ms']:.0f} ms and the scorer's "
                  f"load {row['load_ms']:.0f} ms{'; bytecode cached' if pycache else ''})", flush=True)
        print(f"  {n:>6} messages: first (caches emptied) {row['first_ms']:.0f} ms, CPU {row['first_cpu_ms']:.0f} ms, "
              f"plain {row['plain_ms']:.1f} ms "
              f"(solver {row['solve_ms']:.1f} ms), session {row['session_ms']:.2f} ms, trim_messages "
              f"{row['trim_ms']:.1f} ms / {row['trim_memo_ms']:.2f} ms memoized", flush=True)

    head = (f"{'messages':>8} {'tokens':>10} {'fresh':>8} {'first':>8} {'plain':>8} {'solver':>7} {'before':>8} "
            f"{'session':>8} {'trim':>8} "
            f"{'memo':>7} {'plain/trim':>10} {'plain/memo':>10} {'sess/trim':>9} {'max gap':>8}")
    print("\n" + head + "\n" + "-" * len(head))
    for r in rows:
        print(f"{r['entries']:>8,} {r['tokens']:>10,} {r.get('fresh_ms', float('nan')):>6.0f}ms "
              f"{r['first_ms']:>6.0f}ms {r['plain_ms']:>6.1f}ms "
              f"{r['solve_ms']:>5.1f}ms {r['today_ms']:>6.1f}ms {r['session_ms']:>6.2f}ms {r['trim_ms']:>6.1f}ms "
              f"{r['trim_memo_ms']:>5.2f}ms "
              f"{r['plain_vs_trim']:>9.2f}x {r['plain_vs_trim_memo']:>9.1f}x {r['session_vs_trim']:>8.3f}x "
              f"{r['gap_max']:>8.1e}")
    by_n = {r["entries"]: r for r in rows}
    if 1000 in by_n and 10000 in by_n:
        print(f"\n10,000 / 1,000 messages: plain compact() {by_n[10000]['plain_ms'] / by_n[1000]['plain_ms']:.1f}x, "
              f"solver {by_n[10000]['solve_ms'] / max(by_n[1000]['solve_ms'], 1e-9):.1f}x, trim_messages "
              f"{by_n[10000]['trim_ms'] / by_n[1000]['trim_ms']:.1f}x")

    print("\nselection value against the exact DP on the recorded problems (share of the exact optimum)")
    for r, q in zip(rows, qualities):
        if q["instances"]:
            print(f"  {r['entries']:>6} messages, {q['instances']} problems: default min {q['value_vs_exact_min']:.6f} "
                  f"(mean {q['value_vs_exact_mean']:.6f}; same option for >= {q['same_option_min']:.1%} of entries), "
                  f"today's default (scaled DP) min {q['today_vs_exact_min']:.6f}, greedy min "
                  f"{q['greedy_vs_exact_min']:.6f}; {q['solve_ms']:.1f} ms vs exact DP {q['exact_ms']:.0f} ms")
        else:
            print(f"  {r['entries']:>6} messages: the exact DP is past --exact-cells; certified gap at most "
                  f"{r['gap_max']:.1e}")
    synth = synthetic_quality()
    print(f"  bench_knapsack's synthetic 1,000 entries, 30,000 tokens (5 seeds): default min "
          f"{synth['value_vs_exact_min']:.6f} ({', '.join(synth['methods'])}, {synth['solve_ms_median']:.1f} ms), "
          f"greedy min {synth['greedy_vs_exact_min']:.6f}")
    report: dict[str, Any] = {"scorer": what, "share": args.share, "rows": rows, "quality": qualities,
                              "synthetic": synth}
    if args.recall:
        print("\nreference recall: the default solver, solver='lp' and today's (solver='exact'):", flush=True)
        report["recall"] = recall(args.data, args.max_steps)
        for domain, cells in report["recall"].items():
            print(f"  {domain:<18} " + "  ".join(
                f"{key}: independent {c['independent_micro']:.3f} ours {c['ours_micro']:.3f} over {c['over_budget']}"
                for key, c in cells.items()))
    args.out.mkdir(parents=True, exist_ok=True)
    plot(rows, args.out / "compact.png", what)
    (args.out / "compact.json").write_text(json.dumps(report, indent=2, default=float) + "\n")
    print(f"\nplot: {args.out / 'compact.png'}; figures: {args.out / 'compact.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
