"""A domain from outside ``../shared``: the Berkeley Function Calling Leaderboard's multi-turn sets.

BFCL (gorilla-llm, Apache 2.0, the ``bfcl-eval`` package) ships multi-turn tasks in eight simulated
back ends (a file system, messaging, posting, tickets, trading, travel booking, a vehicle, maths),
each task with its initial state, its user turns and the calls that solve each turn. Nothing in
``../shared`` comes from it, so the bundled default scorer, trained on every shared set, never saw
one of its tools, values or phrasings: what a new user of another domain gets.

Each task becomes one transcript here: its ground-truth calls are executed, turn by turn, in the
package's own back ends from the task's initial state (parsed with ``ast``, never ``eval``), and
written as OpenAI messages: a one-line system prompt naming the tools, each user turn, each call as
an assistant message with one tool call, and its result (or error) as a tool message. Two sets:

* ``base`` (``multi_turn_base``, 200 tasks): short results, tens of tokens each;
* ``long-context`` (``multi_turn_long_context``, 200 tasks): the same kind of tasks in back ends
  loaded with many more files, messages and records, so that results run long.

Measured as ``bench_unseen.py`` measures a held-out set (``salience.bench.independent.evaluate``,
both reference definitions, every measured step, the budget the system prompt plus 10% and 25%
of the other tokens), with the same rows: ``salience`` is ``Compactor(scorer=default_scorer())``
with no other parameter, the bundled default; beside it the same counting text tokens, the same
handed Anthropic messages, constant scores, the sliding window (also charged as billed),
observation masking, the last three tool results and value stubs.

Set-up, once (``--no-deps``: only the package's data and back ends are read, and their imports are
met by this project's own dependencies; nothing is downloaded at run time)::

    pip install --no-deps --target /tmp/bfcl bfcl-eval==2026.3.23
    python benchmarks/bench_bfcl.py --bfcl /tmp/bfcl        # ~1 min; writes benchmarks/out/bfcl.json
"""

from __future__ import annotations

import argparse
import ast
import copy
import functools
import importlib
import inspect
import json
import platform
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
try:
    import salience  # noqa: F401
except ImportError:  # run from a checkout without installing
    sys.path.insert(0, str(ROOT / "src"))

from bench_unseen import (  # noqa: E402
    ANTHROPIC,
    BOOTSTRAP,
    CONSTANT,
    FIGURES,
    OUT,
    SALIENCE,
    SAME_UNITS,
    TEXT_TOKENS,
    WINDOW,
    WINDOW_BILLED,
    ConstantScores,
    ci_notes,
    console,
    domain_table,
    note,
    one_line_lists,
    summarise,
    summary_table,
)

import salience  # noqa: E402
from salience import Compactor, Transcript, default_scorer  # noqa: E402
from salience.bench.independent import (  # noqa: E402
    anthropic_compactor_selector,
    baseline_selectors,
    compactor_selector,
    evaluate,
)

#: The sets measured, by the names the tables print: (BFCL category, whether its back ends load the long context).
SETS = {"base": ("multi_turn_base", False), "long-context": ("multi_turn_long_context", True)}
VERSION = "2026.3.23"


def _call(text: str) -> tuple[str, list[Any], dict[str, Any]]:
    """A ground-truth call such as ``mv(source='a.txt', destination='b')``: its name, positional
    arguments and keyword arguments, every argument a literal."""
    node = ast.parse(text, mode="eval").body
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise ValueError(f"not a plain call: {text!r}")
    return (node.func.id, [ast.literal_eval(a) for a in node.args],
            {k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg is not None})


def _result(value: Any) -> str:
    """A back end's return value as its tool message's text (BFCL's own rule: a string as it
    is, a dict as JSON, anything else as ``str``)."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        try:
            return json.dumps(value)
        except TypeError:
            return str(value)
    return str(value)


def transcripts(package: Path, category: str, long_context: bool) -> list[dict[str, Any]]:
    """Each task of ``category`` as ``{"id", "messages"}``, its ground truth executed in the
    back ends of the ``bfcl_eval`` package found in ``package``."""
    if str(package) not in sys.path:
        sys.path.insert(0, str(package))
    from bfcl_eval.constants.executable_backend_config import (  # type: ignore[import-not-found]
        CLASS_FILE_PATH_MAPPING,
        STATELESS_CLASSES,
    )

    data = package / "bfcl_eval" / "data"
    tasks = [json.loads(line) for line in (data / f"BFCL_v4_{category}.json").open(encoding="utf-8")]
    answers = {a["id"]: a["ground_truth"] for a in map(json.loads, (data / "possible_answer" /
                                                                    f"BFCL_v4_{category}.json").open(encoding="utf-8"))}
    out = []
    for task in tasks:
        methods: dict[str, Any] = {}
        for name in task["involved_classes"]:
            backend = getattr(importlib.import_module(CLASS_FILE_PATH_MAPPING[name]), name)()
            if name not in STATELESS_CLASSES:
                backend._load_scenario(copy.deepcopy(task["initial_config"].get(name, {})), long_context=long_context)
            methods.update((m, f) for m, f in inspect.getmembers(backend, predicate=inspect.ismethod)
                           if not m.startswith("_"))
        messages: list[dict[str, Any]] = [{"role": "system", "content": "You are an assistant that acts through "
                                           "these tools: " + ", ".join(sorted(methods)) + "."}]
        calls = 0
        for turn, solution in zip(task["question"], answers[task["id"]], strict=True):
            messages.extend({"role": m["role"], "content": m["content"]} for m in turn)
            for text in solution:
                name, args, kwargs = _call(text)
                method = methods[name]
                kwargs.update(zip(inspect.signature(method).parameters, args))
                try:
                    result = _result(method(**kwargs))
                except Exception as exc:  # the back end's own error, as BFCL's executor reports it
                    result = f"Error during execution: {exc}"
                calls += 1
                call_id = f"call_{calls}"
                messages.append({"role": "assistant", "content": None, "tool_calls": [{
                    "id": call_id, "type": "function",
                    "function": {"name": name, "arguments": json.dumps(kwargs)}}]})
                messages.append({"role": "tool", "tool_call_id": call_id, "content": result})
        out.append({"id": task["id"], "messages": messages})
    return out


def load(package: Path, name: str) -> list[Transcript]:
    """The set ``name`` of :data:`SETS` as transcripts (:func:`transcripts`)."""
    category, long_context = SETS[name]
    return [Transcript.from_openai(t["messages"], id=t["id"]) for t in transcripts(package, category, long_context)]


def add_common_arguments(parser: argparse.ArgumentParser, out: str) -> None:
    """``--fractions`` and ``--out`` (default ``benchmarks/out/<out>``), as every unseen-domain benchmark takes them."""
    parser.add_argument("--fractions", default="0.1,0.25",
                        help="budgets over the system prompt, as shares of the other tokens (default 0.1,0.25)")
    parser.add_argument("--out", type=Path, default=OUT / out, help="the JSON report to write")


def parse_choice(parser: argparse.ArgumentParser, flag: str, value: str, known: Sequence[str],
                 fractions: str) -> tuple[list[str], tuple[float, ...]]:
    """The names ``value`` lists (comma-separated, each one of ``known``) and the budgets ``fractions``
    lists; a usage error (exit code 2) naming ``flag`` or ``--fractions`` otherwise."""
    names = [n.strip() for n in value.split(",") if n.strip()]
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        parser.error(f"{flag}: unknown {unknown or 'none given'} (known: {', '.join(known)})")
    try:
        return names, tuple(float(f) for f in fractions.split(","))
    except ValueError:
        parser.error(f"--fractions: comma-separated numbers in (0, 1] (got {fractions!r})")


def measure(label: str, loaders: dict[str, Callable[[], list[Transcript]]], fractions: Sequence[float],
            out_path: Path, meta: dict[str, Any], source: str) -> dict[str, Any]:
    """Measure each set of a domain never trained on as ``bench_unseen.py`` measures a held-out one
    (the bundled default and its variants beside every baseline), print the tables and write the
    report to ``out_path``. ``loaders`` maps each set's name to what loads its transcripts; ``meta``
    joins the report's header; ``source`` names the data in the methods' descriptions."""
    started = time.perf_counter()
    scorer = default_scorer()
    reports: dict[str, dict[str, Any]] = {}
    sizes: dict[str, Any] = {}
    for name, loader in loaders.items():
        t0 = time.perf_counter()
        history = loader()
        sizes[name] = {"transcripts": len(history), "messages": sum(len(t.entries) for t in history),
                       "convert_seconds": round(time.perf_counter() - t0, 1)}
        selectors: dict[str, Any] = {
            SALIENCE: compactor_selector(Compactor(scorer=scorer)),
            SAME_UNITS: compactor_selector(Compactor(scorer=scorer, counter=TEXT_TOKENS)),
            ANTHROPIC: anthropic_compactor_selector(Compactor(scorer=scorer)),
            CONSTANT: compactor_selector(Compactor(scorer=ConstantScores())),
        }
        baselines = baseline_selectors()
        selectors[WINDOW] = baselines.pop(WINDOW)
        selectors[WINDOW_BILLED] = baselines.pop(WINDOW_BILLED)
        selectors.update(baselines)
        tag = f"{label.lower()} {name}"
        report = evaluate(history, selectors, fractions, reference=WINDOW, second_reference=WINDOW_BILLED,
                          progress=True, description=f"[{tag}] steps")
        reports[name] = report.to_dict()
        note(f"[{tag}] {report.steps:,} steps from {len(history):,} transcripts "
             f"({sizes[name]['messages']:,} messages) in {report.seconds:.1f} s")
        console.print(domain_table(f"{label} {name} (never trained on)", reports[name], fractions))
    summary = summarise(reports, fractions)
    for key, title in FIGURES:
        console.print(summary_table(key, title, summary, list(loaders), fractions))
    for line in ci_notes(summary, fractions):
        note(line)
    out = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "salience_version": salience.__version__, "python": platform.python_version(), **meta,
        "methods": {SALIENCE: "Compactor(scorer=default_scorer()), no other parameter: the bundled default, "
                              f"trained on every shared set, none from {source}",
                    SAME_UNITS: "the same, counting the budget in text tokens (the benchmark's units)",
                    ANTHROPIC: "the same Compactor handed each history as Anthropic messages",
                    CONSTANT: "Compactor(scorer=ConstantScores()): the selector's structure alone",
                    **{m: "baseline, salience.bench.message_baselines" for m in baseline_selectors()}},
        "sets": sizes, "bootstrap": {**BOOTSTRAP, "method": "percentile, paired", "unit": "transcript"},
        "seconds": round(time.perf_counter() - started, 1), "domains": reports, "summary": summary,
    }
    for set_report in reports.values():
        for r in set_report["results"]:
            if r["method"] not in (SALIENCE, SAME_UNITS, ANTHROPIC, CONSTANT, WINDOW, WINDOW_BILLED):
                r.pop("by_transcript", None)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(one_line_lists(json.dumps(out, indent=1, default=str)) + "\n", encoding="utf-8")
    note(f"wrote {out_path}")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bfcl", type=Path, required=True,
                        help=f"the folder holding the bfcl_eval package (pip install --no-deps --target DIR "
                             f"bfcl-eval=={VERSION})")
    parser.add_argument("--sets", default=",".join(SETS),
                        help=f"the sets to measure, comma-separated (default: {','.join(SETS)})")
    add_common_arguments(parser, "bfcl.json")
    args = parser.parse_args(argv)
    if not (args.bfcl / "bfcl_eval" / "data").is_dir():
        parser.error(f"no bfcl_eval package under {args.bfcl}: pip install --no-deps --target {args.bfcl} "
                     f"bfcl-eval=={VERSION}")
    sets, fractions = parse_choice(parser, "--sets", args.sets, list(SETS), args.fractions)
    loaders = {name: functools.partial(load, args.bfcl, name) for name in sets}
    measure("BFCL", loaders, fractions, args.out,
            {"bfcl_eval": VERSION, "categories": {name: SETS[name][0] for name in sets},
             "args": {"sets": sets, "fractions": list(fractions)}}, "BFCL")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
