"""What an agent loop gets: a session over each growing history at one budget, held out.

``bench_unseen.py`` calls ``Compactor.compact`` once per step, each at that step's own
budget. An agent loop holds one budget for the whole run and, through ``OpenAIContext``,
``AnthropicContext`` or the LangChain middleware, one :class:`~salience.CompactionSession`,
which keeps earlier decisions ("settled") so that the provider's prompt cache keeps its
prefix, and compacts below the budget (``trigger``, ``min_removal``) to leave headroom.
This replays that: for each held-out transcript of each tool-use set (the scorer trained
without that set, ``bench_unseen.train_lodo``, cached), the budget is the system prompt
plus ``f`` of the other tokens of the history before its last tool-calling step, and at
every tool-calling step the history so far is handed to

* ``window``: the sliding window (whole messages from the end, :func:`salience.bench.independent.sliding_window`);
* ``stubs``: value-stub masking (every user and assistant message kept, the oldest tool results
  turned into one-line stubs of their values until the history fits, then the window:
  :func:`salience.bench.independent.value_stub_masking`);
* ``plain``: ``Compactor(scorer).compact(history, budget=B)``, afresh at every step;
* ``session``: one ``Compactor(scorer).session(budget=B)`` per transcript, fed the growing history
  (the library's defaults, ``trigger`` 1.0, ``min_removal`` 0.1 of the room above the system
  prompt, ``restart_gain`` 1.0 and ``cache_min`` 1,024, or ``--trigger`` / ``--removal`` /
  ``--restart-gain``);
* ``claude``: another such session fed the growing history as a Claude agent holds it, Anthropic
  messages (``Transcript.from_openai(history).to_anthropic()``, the system prompt beside them:
  what ``AnthropicContext`` runs), its result measured as OpenAI messages
  (:func:`salience.bench.message_baselines.anthropic_as_openai`).

Prints, per held-out set and fraction, the recall of each by both reference definitions at
those steps: **independent** (issue #14's: the step's argument strings and numbers found in
earlier messages, visible in what is kept) and **ours** (``salience bench``'s: the values the
step uses that first appeared in an earlier entry, visible case-insensitively); the mean and
the worst set; and for the session the mean share of the previous output that each call's
output begins with (``prefix_reuse``), on the calls that compacted too, and the tokens so
reused there; and per method (line ``cached``) the share of the tokens it sent, system prompt
aside (every method sends it first alike), that began its previous output, message for
message: what a provider's prompt cache could serve. Asserts nothing. ``--bfcl DIR`` adds
BFCL's two multi-turn sets (``bench_bfcl.py``: a domain nothing in ``shared/`` comes from), with
the bundled default scorer, which never trained on them; ``--agentdojo DIR`` adds AgentDojo's four
suites (``bench_agentdojo.py``) the same way.
``python benchmarks/bench_session.py [--domains tau-bench-airline,tooltalk] [--fractions 0.1,0.25]
[--trigger 1.0] [--removal 0.1] [--restart-gain 1.0] [--bfcl DIR] [--agentdojo DIR]`` from the
repository root.
"""

from __future__ import annotations

import argparse
import functools
import math
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
try:
    import salience  # noqa: F401
except ImportError:  # running from a checkout without installing
    sys.path.insert(0, str(ROOT / "src"))

import bench_agentdojo as agentdojo  # noqa: E402
import bench_bfcl as bfcl  # noqa: E402
from bench_unseen import train_lodo  # noqa: E402

from salience import BudgetError, Compactor, Transcript, default_scorer, load_transcripts  # noqa: E402
from salience.bench.independent import (  # noqa: E402
    _ours,
    history_budget,
    independent_references,
    message_text,
    message_tokens,
    sliding_window,
    value_stub_masking,
)
from salience.bench.message_baselines import anthropic_as_openai  # noqa: E402
from salience.selector.session import RESTART_GAIN  # noqa: E402

DOMAINS = ("tau-bench-airline", "swe-agent", "tooltalk", "api-bank")  # (MINT's steps call no tool)


METHODS = ("window", "stubs", "plain", "session", "claude")


def replay(transcripts: Sequence[Transcript], scorer: Any, fraction: float, trigger: float, removal: float,
           gain: float | None = RESTART_GAIN) -> dict[str, float]:
    """Recall of the baselines, plain compaction and a session on ``transcripts`` (module doc)."""
    refs = {"independent": 0, "ours": 0}
    seen = {(name, d): 0 for name in METHODS for d in refs}
    sent = {name: 0 for name in METHODS}  # tokens sent, and of them the prefix of the method's previous output
    cached = {name: 0 for name in METHODS}
    calls = triggered = 0
    share = share_triggered = tokens_triggered = 0.0
    for t in transcripts:
        messages = t.to_openai()
        ours = _ours(t)
        steps = [i for i, m in enumerate(messages) if i and m["role"] == "assistant" and m.get("tool_calls")]
        if not steps:
            continue
        budget = history_budget(messages[: steps[-1]], fraction)
        plain = Compactor(scorer=scorer)
        session = Compactor(scorer=scorer).session(budget=budget, trigger=trigger, min_removal=removal,
                                                   restart_gain=gain)
        claude = Compactor(scorer=scorer).session(budget=budget, trigger=trigger, min_removal=removal,
                                                  restart_gain=gain)
        before: dict[str, list] = {}
        for i in steps:
            history = messages[:i]
            outs: dict[str, list | None] = {"window": sliding_window(history, budget),
                                            "stubs": value_stub_masking(history, budget)}
            for name, compactor in (("session", session), ("plain", plain)):
                try:
                    done = compactor.compact(history, **({} if compactor is session else {"budget": budget}))
                    outs[name] = list(done.messages)
                except BudgetError:
                    outs[name] = None  # nothing visible
            held = Transcript.from_openai(history)  # (as a Claude agent holds it: AnthropicContext's session)
            try:
                done = claude.compact(held.to_anthropic(), system=held.anthropic_system(), format="anthropic")
                outs["claude"] = anthropic_as_openai(history, done)
            except BudgetError:
                outs["claude"] = None
            if session.prefix_reuse is not None:
                calls += 1
                share += session.prefix_reuse.share
                if session.triggered:
                    triggered += 1
                    share_triggered += session.prefix_reuse.share
                    tokens_triggered += session.prefix_reuse.tokens
            found = {"independent": independent_references(messages, i).refs, "ours": ours.get(i, ())}
            for d, values in found.items():
                refs[d] += len(values)
            for name, out in outs.items():
                if out is None:
                    before.pop(name, None)
                    continue
                body = [m for m in out if m.get("role") != "system"]  # (the system prompt: cached by all alike)
                sent[name] += sum(message_tokens(m) for m in body)
                prev = before.get(name, [])
                k = next((j for j, (a, b) in enumerate(zip(prev, body)) if a != b), min(len(prev), len(body)))
                cached[name] += sum(message_tokens(m) for m in body[:k])
                before[name] = body
                text = "\n".join(message_text(m) for m in out)
                folded = text.casefold()
                seen[(name, "independent")] += sum(r in text for r in found["independent"])
                seen[(name, "ours")] += sum(r.casefold() in folded for r in found["ours"])
    out: dict[str, float] = {f"{name} {d}": seen[(name, d)] / refs[d] if refs[d] else float("nan")
                             for name, d in seen}
    out.update(refs=refs["independent"], refs_ours=refs["ours"], calls=calls, reuse=share / max(calls, 1),
               triggered=triggered, reuse_triggered=share_triggered / max(triggered, 1),
               tokens_triggered=tokens_triggered / max(triggered, 1))
    out.update({f"{name} cached": cached[name] / max(sent[name], 1) for name in METHODS})
    return out


def _held_out(domain: str, data: Path) -> tuple[list[Transcript], Any]:
    """A shared set's transcripts and the scorer trained without it (cached)."""
    return load_transcripts(data / domain), train_lodo(domain, data, retrain=False)[0]


def _unseen(load: Callable[[Path, str], list[Transcript]], package: Path, name: str) -> tuple[list[Transcript], Any]:
    """A set of a domain never trained on (``load(package, name)``: bench_bfcl.load,
    bench_agentdojo.load) and the bundled default scorer."""
    return load(package, name), default_scorer()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--domains", default=",".join(DOMAINS), help=f"comma-separated (default: {','.join(DOMAINS)})")
    parser.add_argument("--fractions", default="0.1,0.25", help="budgets over the system prompt (default 0.1,0.25)")
    parser.add_argument("--trigger", type=float, default=1.0, help="the session's trigger (default: 1.0)")
    parser.add_argument("--removal", type=float, default=0.1, help="the session's min_removal (default: 0.1)")
    parser.add_argument("--restart-gain", type=float, default=RESTART_GAIN,
                        help=f"the session's restart_gain (default: {RESTART_GAIN}; negative: None, never)")
    parser.add_argument("--bfcl", type=Path, default=None,
                        help="also BFCL's multi-turn sets, from the folder holding the bfcl_eval package "
                             "(bench_bfcl.py), scored by the bundled default")
    parser.add_argument("--agentdojo", type=Path, default=None,
                        help="also AgentDojo's four suites, from the folder holding the agentdojo package "
                             "(bench_agentdojo.py), scored by the bundled default")
    args = parser.parse_args(argv)
    domains = [d for d in args.domains.split(",") if d]
    unknown = [d for d in domains if not (args.data / d).exists()]
    if unknown:
        parser.error(f"data sets not found under {args.data}: {', '.join(unknown)} (use --data)")
    if args.bfcl is not None and not (args.bfcl / "bfcl_eval" / "data").is_dir():
        parser.error(f"no bfcl_eval package under {args.bfcl} (see bench_bfcl.py)")
    if args.agentdojo is not None and not (args.agentdojo / "agentdojo" / "data").is_dir():
        parser.error(f"no agentdojo package under {args.agentdojo} (see bench_agentdojo.py)")
    sets: dict[str, Callable[[], tuple[list[Transcript], Any]]] = {
        d: functools.partial(_held_out, d, args.data) for d in domains}
    if args.bfcl is not None:
        sets.update({f"bfcl-{name}": functools.partial(_unseen, bfcl.load, args.bfcl, name) for name in bfcl.SETS})
    if args.agentdojo is not None:
        sets.update({f"agentdojo-{name}": functools.partial(_unseen, agentdojo.load, args.agentdojo, name)
                     for name in agentdojo.SUITES})
    domains = list(sets)
    fractions = [float(f) for f in args.fractions.split(",")]
    print(f"{'held out':<18} {'f':>5} {'definition':<12} {'refs':>6} " + " ".join(f"{m:>8}" for m in METHODS)
          + f" {'reuse':>6} {'compacting calls':>17} {'reuse there':>12} {'tokens there':>13}")
    rows: dict[tuple[str, float], dict[str, float]] = {}
    for domain in domains:
        for fraction in fractions:
            started = time.perf_counter()
            gain = None if args.restart_gain < 0 else args.restart_gain
            r = rows[(domain, fraction)] = replay(*sets[domain](), fraction, args.trigger, args.removal, gain)
            for d, n in (("independent", r["refs"]), ("ours", r["refs_ours"])):
                line = (f"{domain:<18} {fraction:>5.2f} {d:<12} {n:>6.0f} "
                        + " ".join(f"{r[f'{m} {d}']:>8.3f}" for m in METHODS))
                if d == "independent":
                    line += (f" {r['reuse']:>6.3f} {r['triggered']:>8.0f} of {r['calls']:<6.0f} "
                             f"{r['reuse_triggered']:>12.3f} {r['tokens_triggered']:>13.0f}  "
                             f"({time.perf_counter() - started:.0f} s)")
                print(line, flush=True)
            print(f"{domain:<18} {fraction:>5.2f} {'cached':<12} {'':>6} "
                  + " ".join(f"{r[f'{m} cached']:>8.3f}" for m in METHODS), flush=True)
    print("session (OpenAI messages; claude: Anthropic) − window and − value stubs, mean and worst over the sets:")
    for fraction in fractions:
        for d in ("independent", "ours"):
            for name in ("session", "claude"):
                for base in ("window", "stubs"):
                    gaps = {dom: rows[(dom, fraction)][f"{name} {d}"] - rows[(dom, fraction)][f"{base} {d}"]
                            for dom in domains if math.isfinite(rows[(dom, fraction)][f"{name} {d}"])}
                    if gaps:
                        worst = min(gaps, key=gaps.get)  # type: ignore[arg-type]
                        print(f"  {fraction:.2f} {d:<12} {name:<8} − {base:<7} mean "
                              f"{sum(gaps.values()) / len(gaps):+.3f}, worst {gaps[worst]:+.3f} ({worst})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
