"""The first call on a coding agent's history of long observations, beside a sliding window.

Run: ``python benchmarks/bench_big_observations.py [--pairs 10 30] [--lines 2000] [--budget 20000]``

The history: a system prompt and a task, then ``--pairs`` times a code action (a 300-line
function written in the reply, MINT-style) and its observation as a user turn (SWE-agent-style:
``--lines`` lines of output, every 40th a traceback frame that quotes a line of the action, the
rest debug lines with numbers). ``Compactor()`` with its defaults compacts it once to
``--budget`` tokens in a fresh process's first call (imports and the tokenizer loaded before
the clock starts): every entry's forms are worked out, a user turn's stub lists the handles
its values do not hold (:func:`salience.selector.options.outside`), and every observation's
trim spares the lines that quote its action. Beside it, in the same process, the sliding
window (``salience.bench.message_baselines``) on the same messages and budget, which counts
tokens and cuts; every cache is emptied before each (``bench_latency.cold``). Prints both
times and their ratio; asserts nothing.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_latency import cold  # noqa: E402

from salience import Compactor, default_scorer  # noqa: E402
from salience.bench.message_baselines import baseline_selectors  # noqa: E402


def history(pairs: int, lines: int, seed: int = 0) -> list[dict[str, Any]]:
    """The messages described in the module doc."""
    rng = random.Random(seed)
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You run Python code to fix a module."},
                                      {"role": "user", "content": "Fix the module so that its tests pass."}]
    for k in range(pairs):
        body = "\n".join(f"    value_{k}_{i} = compute_thing_{i}(alpha_{i}, beta_{i})  # step {i}" for i in range(300))
        messages.append({"role": "assistant", "content": f"<execute>\ndef run_{k}():\n{body}\n</execute>"})
        out = []
        for i in range(lines):
            if i % 40 == 0:
                j = i % 300
                out.append(f'  File "cell.py", line {i}, in run_{k}\n'
                           f"    value_{k}_{j} = compute_thing_{j}(alpha_{j}, beta_{j})  # step {j}")
            else:
                out.append(f"  debug output line {i} with some numbers {rng.randint(0, 10**6)}")
        messages.append({"role": "user", "content": "Observation:\n" + "\n".join(out)})
    return messages


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, nargs="+", default=[10, 30])
    parser.add_argument("--lines", type=int, default=2000)
    parser.add_argument("--budget", type=int, default=20_000)
    args = parser.parse_args(argv)
    window = baseline_selectors()["window"]
    scorer = default_scorer()
    Compactor(scorer=scorer).compact([{"role": "user", "content": "load the tokenizer"}], budget=100)
    print(f"{'messages':>9} {'salience first call s':>22} {'window s':>9} {'ratio':>7} {'salience tokens':>16}")
    for pairs in args.pairs:
        messages = history(pairs, args.lines)
        cold(scorer)
        started = time.perf_counter()
        window(messages, args.budget)
        base = time.perf_counter() - started
        cold(scorer)
        started = time.perf_counter()
        result = Compactor(scorer=scorer).compact(messages, budget=args.budget)
        ours = time.perf_counter() - started
        print(f"{len(messages):>9} {ours:>22.2f} {base:>9.2f} {ours / base:>6.1f}x {result.tokens:>16}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
