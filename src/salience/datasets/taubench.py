"""tau-bench historical trajectories (sierra-research/tau-bench) -> transcripts.

A tau-bench results file is a JSON list of runs, each ``{"task_id", "trial", "reward",
"info", "traj"}`` (a single run object is accepted too). ``traj`` is a list of OpenAI chat
messages (system policy, user turns, assistant turns with ``tool_calls``, ``tool``
results); it is read with :func:`salience.messages.openai.entry_from_openai`, so entry ids
are positional (``m0``, ``m1``, ...) and :meth:`Transcript.to_openai` gives the messages back.

One transcript per run:

* id ``tau-<domain>-<task_id>-<trial>`` (``-<k>`` appended, k the run's position in the
  file, if that pair repeats);
* domain: ``"airline"`` or ``"retail"`` when the file name says which, else ``"airline"``
  (the tau-bench domain this loader was written against);
* meta: ``task_id``, ``trial``, ``reward``, ``actions`` (the gold tool calls,
  ``info.task.actions``), ``instruction`` and ``user_id`` (the simulated user's task).

Reused call ids: in some runs (49 of the 200 of ``gpt-4o-airline.json``) a tool call id
comes back in a later assistant message, after the first call with that id was
answered. A transcript needs its call ids unique, so the second and later calls with a
reused id get ``<id>.<n>`` (n = 2, 3, ...), and the ``tool`` message that follows (tau-bench
answers every call at once, in order) points at the renamed id. Entries whose ids changed
say so in meta: ``original_call_ids`` (``{new: old}``, on the assistant entry) and
``original_tool_call_id`` (on the tool entry). Runs without reused ids round-trip exactly.
"""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from salience.datasets._io import read_json as _read_json
from salience.errors import FormatError, TranscriptError
from salience.errors import describe as _got
from salience.messages.openai import entry_from_openai
from salience.transcript import Entry, Transcript

__all__ = ["NAME", "load", "run_to_transcript", "sniff"]

NAME = "taubench"
_DOMAINS = ("airline", "retail")


def sniff(path: Path, head: str) -> bool:
    """True for a tau-bench results file: JSON runs with ``task_id`` and ``traj``."""
    start = head.lstrip()[:1]
    return start in ("[", "{") and bool(
        re.search(r'"task_id"\s*:', head) and re.search(r'"traj"\s*:\s*\[', head)
    )


def _domain(path: Path) -> str:
    name = path.name.lower()
    for domain in _DOMAINS:
        if domain in name:
            return domain
    return "airline"


def _dedupe_call_ids(traj: list[Any]) -> tuple[list[Any], dict[int, dict[str, Any]]]:
    """Messages with reused call ids renamed, and per message index the meta to add."""
    seen: dict[str, int] = {}
    current: dict[str, str] = {}  # original id -> the id of its latest call
    out: list[Any] = []
    notes: dict[int, dict[str, Any]] = {}
    for i, message in enumerate(traj):
        if not isinstance(message, Mapping):
            out.append(message)
            continue
        calls = message.get("tool_calls")
        if isinstance(calls, list) and calls:
            renamed: dict[str, str] = {}
            new_calls = []
            for call in calls:
                cid = call.get("id") if isinstance(call, Mapping) else None
                if isinstance(cid, str) and cid:
                    n = seen.get(cid, 0) + 1
                    seen[cid] = n
                    new_id = cid if n == 1 else f"{cid}.{n}"
                    current[cid] = new_id
                    if new_id != cid:
                        call = {**call, "id": new_id}
                        renamed[new_id] = cid
                new_calls.append(call)
            if renamed:
                message = {**message, "tool_calls": new_calls}
                notes[i] = {"original_call_ids": renamed}
        tcid = message.get("tool_call_id")
        if isinstance(tcid, str) and current.get(tcid, tcid) != tcid:
            message = {**message, "tool_call_id": current[tcid]}
            notes[i] = {"original_tool_call_id": tcid}
        out.append(message)
    return out, notes


def run_to_transcript(run: Mapping[str, Any], *, id: str, domain: str = "airline", where: str = "") -> Transcript:
    """One tau-bench run (``task_id``, ``trial``, ``reward``, ``info``, ``traj``) as a transcript."""
    prefix = f"{where}: " if where else ""
    if not isinstance(run, Mapping):
        raise FormatError(f"{prefix}expected a run object with 'task_id' and 'traj' (got {_got(run)})")
    traj = run.get("traj")
    if not isinstance(traj, list):
        raise FormatError(f"{prefix}field 'traj' must be a list of OpenAI chat messages (got {_got(traj)})")
    info = run.get("info", {})
    if not isinstance(info, Mapping):
        raise FormatError(f"{prefix}field 'info' must be an object (got {_got(info)})")
    task = info.get("task", {})
    if not isinstance(task, Mapping):
        raise FormatError(f"{prefix}field 'info.task' must be an object (got {_got(task)})")
    messages, notes = _dedupe_call_ids(traj)
    entries: list[Entry] = []
    try:
        for i, message in enumerate(messages):
            entry = entry_from_openai(message, i, transcript_id=id)
            if i in notes:
                entry = entry.replace(meta={**entry.meta, **copy.deepcopy(notes[i])})
            entries.append(entry)
        meta = {
            "task_id": run.get("task_id"),
            "trial": run.get("trial"),
            "reward": run.get("reward"),
            "actions": copy.deepcopy(task.get("actions", [])),
            "instruction": task.get("instruction"),
            "user_id": task.get("user_id"),
        }
        return Transcript(id=id, entries=tuple(entries), domain=domain, meta=meta)
    except TranscriptError as exc:
        raise FormatError(f"{prefix}{exc}") from None


def load(path: str | os.PathLike[str]) -> list[Transcript]:
    """Every run in tau-bench results file ``path``, one transcript each."""
    path = Path(path)
    data = _read_json(path)
    runs = [data] if isinstance(data, Mapping) else data
    if not isinstance(runs, list):
        raise FormatError(f"{path}: expected a JSON list of runs (got {_got(data)})")
    domain = _domain(path)
    out: list[Transcript] = []
    used: set[str] = set()
    for k, run in enumerate(runs):
        where = f"{path}: run {k}"
        if not isinstance(run, Mapping):
            raise FormatError(f"{where}: expected a run object with 'task_id' and 'traj' (got {_got(run)})")
        for key in ("task_id", "traj"):
            if key not in run:
                raise FormatError(f"{where}: field {key!r} is missing")
        task_id, trial = run["task_id"], run.get("trial", 0)
        if not isinstance(task_id, (int, str)) or isinstance(task_id, bool):
            raise FormatError(f"{where}: field 'task_id' must be an int or str (got {_got(task_id)})")
        tid = f"tau-{domain}-{task_id}-{trial}"
        if tid in used:
            tid = f"{tid}-{k}"
        used.add(tid)
        out.append(run_to_transcript(run, id=tid, domain=domain, where=where))
    return out
