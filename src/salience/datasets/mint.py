"""MINT benchmark outputs (xingyaoww/mint-bench) -> transcripts.

Layout: ``<model>/<category>/<task>/results.jsonl`` (e.g.
``gpt-4-0613/reasoning/gsm8k/results.jsonl``), one run per line:
``{"state": {"history": [...], "success": ..., ...}, "task": {"task_name", "task_id", ...}}``.

``state.history`` holds the turns as ``{"role": "user"|"assistant", "content"}``. MINT
has no tool-call protocol: the agent writes Python inside ``<execute>`` tags (or proposes
an answer inside ``<solution>``) and the environment's reply comes back as a ``user`` turn
starting with ``"Observation:"``. So:

* the first turn (the instructions, in-context example and task) is a ``user`` entry;
* each later ``user`` turn is a ``tool`` entry (``tool_call_id`` None) whose ``name`` says
  what it answers: ``"solution"`` when it is the verdict on a proposed answer
  (``"Your answer is wrong..."``), ``"python"`` when the turn before it ran code
  (``<execute>``), else ``"environment"`` (e.g. "I don't understand your input");
* ``assistant`` turns stay as they are, their ``<execute>`` code in the content.

Entry ids are positional (``m0``, ``m1``, ...). One transcript per line, id
``mint-<model>-<task>-<line>`` (line numbers from 1); domain is the category
(``reasoning``, ``code_generation``, ``decision_making``), from the folder, else from
``task_name``. Meta: ``model``, ``category``, ``task``, ``task_name``, ``task_id``,
``success``, ``finished``, ``terminate_reason``, ``reference`` (the gold answer),
``agent_action_count``, ``line``.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from salience.datasets._io import json_lines
from salience.errors import FormatError, TranscriptError
from salience.errors import describe as _got
from salience.transcript import Entry, Transcript

__all__ = ["NAME", "load", "run_to_transcript", "sniff"]

NAME = "mint"
CATEGORIES = ("code_generation", "decision_making", "reasoning")
_WRONG = re.compile(r"\s*Observation:\s*Your answer is wrong", re.IGNORECASE)
_EXECUTE = re.compile(r"<execute>", re.IGNORECASE)


def sniff(path: Path, head: str) -> bool:
    """True for MINT results: JSON lines whose objects start ``{"state": {"history": [``...

    (or carry ``state`` with ``history`` and a ``task`` with ``task_name``).
    """
    first = next((line for line in head.splitlines() if line.strip()), "").lstrip()
    if not first.startswith("{"):
        return False
    if re.match(r'\{\s*"state"\s*:\s*\{\s*"history"\s*:\s*\[', first):
        return True
    try:
        obj = json.loads(first)
    except (json.JSONDecodeError, RecursionError):  # broken, or nested past the parser: not ours
        return False
    state = obj.get("state") if isinstance(obj, dict) else None
    task = obj.get("task") if isinstance(obj, dict) else None
    return isinstance(state, dict) and "history" in state and isinstance(task, dict) and "task_name" in task


def _category(task_name: str, folder: str | None) -> str:
    if folder in CATEGORIES:
        return folder
    if task_name == "reasoning":
        return "reasoning"
    if task_name in ("mbpp", "humaneval") or task_name.startswith("code"):
        return "code_generation"
    if task_name.startswith("alfworld"):
        return "decision_making"
    return folder or task_name or "mint"


def _observation_name(content: str, previous: Entry | None) -> str:
    if _WRONG.match(content):
        return "solution"
    if previous is not None and previous.role == "assistant" and _EXECUTE.search(previous.content):
        return "python"
    return "environment"


def _parts(path: Path) -> tuple[str, str | None, str]:
    """(model, category folder, task) from ``<model>/<category>/<task>/results.jsonl``."""
    parents = path.resolve().parents
    if len(parents) >= 3 and parents[1].name in CATEGORIES:
        return parents[2].name, parents[1].name, parents[0].name
    task = path.parent.name if path.stem == "results" else path.stem
    return "unknown", None, task or "task"


def run_to_transcript(
    run: Mapping[str, Any],
    *,
    id: str,
    model: str = "unknown",
    folder: str | None = None,
    task: str = "",
    where: str = "",
    meta: Mapping[str, Any] | None = None,
) -> Transcript:
    """One MINT run (one line of ``results.jsonl``) as a transcript."""
    prefix = f"{where}: " if where else ""
    if not isinstance(run, Mapping):
        raise FormatError(f"{prefix}expected an object with 'state' and 'task' (got {_got(run)})")
    state, info = run.get("state"), run.get("task", {})
    if not isinstance(state, Mapping):
        raise FormatError(f"{prefix}field 'state' must be an object with 'history' (got {_got(state)})")
    if not isinstance(info, Mapping):
        raise FormatError(f"{prefix}field 'task' must be an object (got {_got(info)})")
    history = state.get("history")
    if not isinstance(history, list):
        raise FormatError(f"{prefix}field 'state.history' must be a list of turns (got {_got(history)})")
    task_name = info.get("task_name", "")
    if not isinstance(task_name, str):
        raise FormatError(f"{prefix}field 'task.task_name' must be a str (got {_got(task_name)})")
    entries: list[Entry] = []
    started = False
    for i, turn in enumerate(history):
        at = f"{prefix}state.history[{i}]"
        if not isinstance(turn, Mapping):
            raise FormatError(f"{at}: expected a turn object with 'role' and 'content' (got {_got(turn)})")
        role, content = turn.get("role"), turn.get("content")
        if role not in ("system", "user", "assistant"):
            raise FormatError(f"{at}: field 'role' must be 'user' or 'assistant' (got {_got(role)})")
        if not isinstance(content, str):
            raise FormatError(f"{at}: field 'content' must be a str (got {_got(content)})")
        name = None
        if role == "user" and started:
            role, name = "tool", _observation_name(content, entries[-1])
        started = started or role in ("user", "assistant")
        entries.append(Entry(id=f"m{i}", role=role, content=content, name=name))
    category = _category(task_name, folder)
    meta = {
        **(meta or {}),
        "model": model,
        "category": category,
        "task": task or task_name,
        "task_name": task_name,
        "task_id": info.get("task_id"),
        "success": state.get("success"),
        "finished": state.get("finished"),
        "terminate_reason": state.get("terminate_reason"),
        "reference": info.get("reference"),
        "agent_action_count": state.get("agent_action_count"),
    }
    try:
        return Transcript(id=id, entries=tuple(entries), domain=category, meta=meta)
    except TranscriptError as exc:
        raise FormatError(f"{prefix}{exc}") from None


def load(path: str | os.PathLike[str]) -> list[Transcript]:
    """Every run in MINT ``results.jsonl`` file ``path``, one transcript per line."""
    path = Path(path)
    model, folder, task = _parts(path)
    return [
        run_to_transcript(obj, id=f"mint-{model}-{task}-{lineno}", model=model, folder=folder, task=task,
                          where=where, meta={"line": lineno})
        for lineno, where, obj in json_lines(path)
    ]
