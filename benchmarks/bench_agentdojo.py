"""A second domain from outside ``../shared``: AgentDojo's four suites of a personal assistant's tasks.

AgentDojo (ETH Zurich SPY Lab, MIT, the ``agentdojo`` package) ships 97 user tasks in four
simulated back ends: ``workspace`` (an inbox, a calendar and a cloud drive, results of hundreds to
thousands of tokens), ``travel`` (hotels, restaurants, car rentals), ``banking`` (an account, its
transactions and files) and ``slack`` (channels, messages, web pages). Each task is a user's
request and the calls that answer it. Nothing in ``../shared`` comes from it, so the bundled default
scorer never saw one of its tools, values or phrasings.

An assistant serves one user request after another, so each transcript here is a session of
:data:`TASKS_PER_SESSION` consecutive tasks of one suite on one environment, the suite's default one
(its injection vectors hold their benign defaults): AgentDojo's own system message, then for each
task its prompt as a user turn, its ground-truth calls, each executed in the package's back end
(``FunctionsRuntime.run_function``, the result as AgentDojo's agents see it, ``tool_result_to_str``,
or the error it reports), one assistant message with one tool call each, and the task's expected
answer as the assistant's closing turn (``"Done."`` where the task gives none). A later task's
calls are worked out from the environment the earlier ones left, as an agent's would be.

Measured as ``bench_bfcl.py`` measures BFCL (:func:`bench_bfcl.measure`: both reference
definitions, every measured step, the budget the system prompt plus 10% and 25% of the other
tokens, the same rows), one set a suite.

Set-up, once (into a folder of its own; only what this project lacks is read from it, since the
folder is put last on ``sys.path``; nothing is downloaded at run time)::

    pip install --target /tmp/agentdojo agentdojo==0.1.35
    python benchmarks/bench_agentdojo.py --agentdojo /tmp/agentdojo     # writes benchmarks/out/agentdojo.json
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
try:
    import salience  # noqa: F401
except ImportError:  # run from a checkout without installing
    sys.path.insert(0, str(ROOT / "src"))

from bench_bfcl import add_common_arguments, measure, parse_choice  # noqa: E402

from salience import Transcript  # noqa: E402

#: The suites measured, each a set of the tables.
SUITES = ("workspace", "travel", "banking", "slack")
#: AgentDojo's benchmark version whose tasks are read (the newest in ``VERSION``).
BENCHMARK = "v1.2.2"
VERSION = "0.1.35"
#: How many consecutive tasks of a suite one session (one transcript) holds.
TASKS_PER_SESSION = 4
#: The assistant's closing turn where a task states no expected answer.
DONE = "Done."


def _import(package: Path) -> Any:
    """The ``agentdojo`` modules this benchmark reads, ``package`` put last on ``sys.path``."""
    if str(package) not in sys.path:
        sys.path.append(str(package))
    import agentdojo  # type: ignore[import-not-found]
    import yaml
    from agentdojo.agent_pipeline.tool_execution import tool_result_to_str  # type: ignore[import-not-found]
    from agentdojo.functions_runtime import FunctionsRuntime  # type: ignore[import-not-found]
    from agentdojo.task_suite.load_suites import get_suites  # type: ignore[import-not-found]

    system = yaml.safe_load((Path(agentdojo.__file__).parent / "data" / "system_messages.yaml")
                            .read_text(encoding="utf-8"))["default"].strip()
    return get_suites, FunctionsRuntime, tool_result_to_str, system


def _task_number(task_id: str) -> int:
    return int(task_id.rsplit("_", 1)[-1])


def transcripts(package: Path, suite_name: str, per_session: int = TASKS_PER_SESSION) -> list[dict[str, Any]]:
    """The suite's user tasks, in order, as sessions of ``per_session`` tasks: ``{"id", "messages"}``
    in OpenAI's format, each session's ground truth executed in a fresh default environment."""
    get_suites, functions_runtime, to_text, system = _import(package)
    suite = get_suites(BENCHMARK)[suite_name]
    tasks = sorted(suite.user_tasks.items(), key=lambda item: _task_number(item[0]))
    out = []
    for start in range(0, len(tasks), per_session):
        env = suite.load_and_inject_default_environment(suite.get_injection_vector_defaults())
        runtime = functions_runtime(suite.tools)
        messages: list[dict[str, Any]] = [{"role": "system", "content": system}]
        calls = 0
        for _, task in tasks[start:start + per_session]:
            messages.append({"role": "user", "content": task.PROMPT})
            for call in task.ground_truth(env):
                result, error = runtime.run_function(env, call.function, call.args)
                calls += 1
                call_id = f"call_{calls}"
                messages.append({"role": "assistant", "content": None, "tool_calls": [{
                    "id": call_id, "type": "function",
                    "function": {"name": call.function, "arguments": json.dumps(dict(call.args), default=str)}}]})
                messages.append({"role": "tool", "tool_call_id": call_id,
                                 "content": error if error else to_text(result)})
            messages.append({"role": "assistant", "content": getattr(task, "GROUND_TRUTH_OUTPUT", "") or DONE})
        ids = f"{tasks[start][0]}..{tasks[min(start + per_session, len(tasks)) - 1][0]}"
        out.append({"id": f"{suite_name}/{ids}", "messages": messages})
    return out


def load(package: Path, suite_name: str, per_session: int = TASKS_PER_SESSION) -> list[Transcript]:
    """The suite ``suite_name`` as transcripts (:func:`transcripts`)."""
    return [Transcript.from_openai(t["messages"], id=t["id"]) for t in transcripts(package, suite_name, per_session)]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agentdojo", type=Path, required=True,
                        help=f"the folder holding the agentdojo package "
                             f"(pip install --target DIR agentdojo=={VERSION})")
    parser.add_argument("--suites", default=",".join(SUITES),
                        help=f"the suites to measure, comma-separated (default: {','.join(SUITES)})")
    parser.add_argument("--per-session", type=int, default=TASKS_PER_SESSION,
                        help=f"consecutive tasks a transcript holds (default {TASKS_PER_SESSION})")
    add_common_arguments(parser, "agentdojo.json")
    args = parser.parse_args(argv)
    if not (args.agentdojo / "agentdojo" / "data").is_dir():
        parser.error(f"no agentdojo package under {args.agentdojo}: pip install --target {args.agentdojo} "
                     f"agentdojo=={VERSION}")
    if args.per_session < 1:
        parser.error(f"--per-session: a positive whole number (got {args.per_session})")
    suites, fractions = parse_choice(parser, "--suites", args.suites, SUITES, args.fractions)
    loaders = {name: functools.partial(load, args.agentdojo, name, args.per_session) for name in suites}
    measure("AgentDojo", loaders, fractions, args.out,
            {"agentdojo": VERSION, "benchmark": BENCHMARK,
             "args": {"suites": suites, "per_session": args.per_session, "fractions": list(fractions)}},
            "AgentDojo")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
