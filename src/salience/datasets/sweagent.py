"""SWE-agent trajectories (``*.traj``, SWE-agent/SWE-agent) -> transcripts.

A ``.traj`` file is one JSON object with ``history`` (the chat messages the model saw)
and ``trajectory`` (action, observation, thought per step), plus ``info`` and
``environment``. The loader reads ``history``, which comes in two dialects:

* the classic one: ``system``, ``user`` and ``assistant`` messages, where every
  ``user`` message after the first assistant turn is the environment's observation of
  the assistant's last ``action``. Those become ``tool`` entries (``tool_call_id`` None)
  named after the command that produced them: the first word of the previous assistant
  message's ``action`` (``"edit"``, ``"open"``, ``"python"``, ``"submit"``...), ``"bash"``
  when there is none;
* the function-calling one (SWE-agent 1.x): assistant messages carry OpenAI
  ``tool_calls`` (kept as :class:`~salience.transcript.ToolCall`), and ``tool`` messages
  answer them through ``tool_call_ids`` (a list; the first id is used, the whole list is
  kept in meta when it has more than one). Replayed runs reuse call ids after the first
  call with that id was answered; as in :mod:`salience.datasets.taubench`, the second and
  later calls with a reused id become ``<id>.<n>`` (meta ``original_call_ids`` on the
  assistant entry, ``original_tool_call_id`` on the tool entry that answers it).

``user`` messages before the first assistant turn (the issue, instructions) stay ``user``
entries. Demonstrations (messages with ``is_demo: true``, a whole worked example pasted
into the context) are kept as entries, because the agent's context held them, and are
flagged with meta ``is_demo: True`` so that a caller can drop them. Assistant entries
keep the raw ``action`` in meta; ``message_type`` and ``agent`` are kept too when present.

Entry ids are positional over ``history`` (``m0``, ``m1``, ...). One transcript per file,
id ``swe-<parent folder>-<file stem>`` (SWE-agent names run folders after the
configuration, and the same instance stem recurs across them), domain ``"coding"``.
Meta: ``exit_status`` (from ``info``), ``environment``, ``demos`` (how many demo messages).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from salience.datasets._io import read_json as _read_json
from salience.errors import FormatError, TranscriptError
from salience.errors import describe as _got
from salience.transcript import Entry, ToolCall, Transcript

__all__ = ["NAME", "history_to_transcript", "load", "sniff"]

NAME = "sweagent"
DOMAIN = "coding"
_KEPT_META = ("message_type", "agent")


def sniff(path: Path, head: str) -> bool:
    """True for a SWE-agent trajectory: a ``.traj`` JSON object, or JSON with ``history`` and ``trajectory``."""
    if not head.lstrip().startswith("{"):
        return False
    if path.suffix.lower() == ".traj":
        return True
    return bool(re.search(r'"trajectory"\s*:\s*\[', head) and re.search(r'"history"\s*:\s*\[', head))


def _text(content: Any, where: str) -> str:
    if isinstance(content, str):
        return content
    if content is None:
        return ""
    if isinstance(content, list):  # newer SWE-agent versions: a list of {"type": "text", "text": ...}
        parts = []
        for j, part in enumerate(content):
            if isinstance(part, Mapping) and isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif isinstance(part, str):
                parts.append(part)
            else:
                raise FormatError(f"{where}: field 'content[{j}]' must be a text part (got {_got(part)})")
        return "\n".join(parts)
    raise FormatError(f"{where}: field 'content' must be a str or a list of text parts (got {_got(content)})")


def _command(action: Any) -> str:
    if isinstance(action, str):
        words = action.strip().split()
        if words:
            return words[0]
    return "bash"


def _calls(raw: Any, where: str, seen: dict[str, int], current: dict[str, str]) -> tuple[ToolCall, ...]:
    """The calls of one message; a reused id gets ``.<n>`` (``current`` maps old -> latest)."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise FormatError(f"{where}: field 'tool_calls' must be a list (got {_got(raw)})")
    calls = []
    for j, call in enumerate(raw):
        fn = call.get("function") if isinstance(call, Mapping) else None
        if not isinstance(fn, Mapping):
            raise FormatError(
                f"{where}: field 'tool_calls[{j}].function' must be an object with 'name' (got {_got(fn)})"
            )
        cid, name, args = call.get("id"), fn.get("name"), fn.get("arguments", "{}")
        if not isinstance(cid, str) or not cid:
            raise FormatError(f"{where}: field 'tool_calls[{j}].id' must be a non-empty str (got {_got(cid)})")
        if not isinstance(name, str):
            raise FormatError(f"{where}: field 'tool_calls[{j}].function.name' must be a str (got {_got(name)})")
        if not isinstance(args, str):
            args = json.dumps(args, ensure_ascii=False)
        seen[cid] = seen.get(cid, 0) + 1
        current[cid] = cid if seen[cid] == 1 else f"{cid}.{seen[cid]}"
        calls.append(ToolCall(id=current[cid], name=name, arguments=args))
    return tuple(calls)


def history_to_transcript(
    history: list[Any], *, id: str, where: str = "", meta: Mapping[str, Any] | None = None
) -> Transcript:
    """SWE-agent ``history`` messages as a transcript (see the module docstring)."""
    prefix = f"{where}: " if where else ""
    entries: list[Entry] = []
    call_names: dict[str, str] = {}
    seen_ids: dict[str, int] = {}
    current: dict[str, str] = {}
    last_action: Any = None
    seen_assistant = False
    demos = 0
    for i, message in enumerate(history):
        at = f"{prefix}history[{i}]"
        if not isinstance(message, Mapping):
            raise FormatError(f"{at}: expected a message object with 'role' and 'content' (got {_got(message)})")
        role = message.get("role")
        if role not in ("system", "user", "assistant", "tool"):
            raise FormatError(
                f"{at}: field 'role' must be one of 'system', 'user', 'assistant', 'tool' (got {_got(role)})"
            )
        content = _text(message.get("content"), at)
        meta_i: dict[str, Any] = {k: message[k] for k in _KEPT_META if k in message}
        name: str | None = None
        calls: tuple[ToolCall, ...] = ()
        tool_call_id: str | None = None
        if message.get("is_demo"):
            meta_i["is_demo"] = True
            demos += 1
        if role == "assistant":
            seen_assistant = True
            calls = _calls(message.get("tool_calls"), at, seen_ids, current)
            renamed = {c.id: c.id.rsplit(".", 1)[0] for c in calls if c.id not in seen_ids}
            if renamed:
                meta_i["original_call_ids"] = renamed
            for call in calls:
                call_names[call.id] = call.name
            last_action = message.get("action")
            if "action" in message:
                meta_i["action"] = message["action"]
        elif role == "tool":
            ids = message.get("tool_call_ids", [message["tool_call_id"]] if "tool_call_id" in message else [])
            if not isinstance(ids, list) or not all(isinstance(x, str) and x for x in ids):
                raise FormatError(f"{at}: field 'tool_call_ids' must be a list of call ids (got {_got(ids)})")
            if ids:
                first = str(ids[0])
                answered = current.get(first, first)
                if answered != first:
                    meta_i["original_tool_call_id"] = first
                tool_call_id, name = answered, call_names.get(answered)
                if len(ids) > 1:
                    meta_i["tool_call_ids"] = list(ids)
            else:
                name = _command(last_action)
        elif role == "user" and seen_assistant and not meta_i.get("is_demo"):
            role, name = "tool", _command(last_action)
        try:
            entries.append(Entry(id=f"m{i}", role=role, content=content, name=name, tool_calls=calls,
                                 tool_call_id=tool_call_id, meta=meta_i))
        except TranscriptError as exc:
            raise FormatError(f"{at}: {exc}") from None
    try:
        return Transcript(id=id, entries=tuple(entries), domain=DOMAIN, meta={**(meta or {}), "demos": demos})
    except TranscriptError as exc:
        raise FormatError(f"{prefix}{exc}") from None


def load(path: str | os.PathLike[str]) -> list[Transcript]:
    """The trajectory in SWE-agent file ``path``, as a one-transcript list."""
    path = Path(path)
    data = _read_json(path)
    if not isinstance(data, Mapping):
        raise FormatError(f"{path}: expected a JSON object with 'history' (got {_got(data)})")
    history = data.get("history")
    if not isinstance(history, list):
        raise FormatError(f"{path}: field 'history' must be a list of chat messages (got {_got(history)})")
    info = data.get("info", {})
    meta = {
        "exit_status": info.get("exit_status") if isinstance(info, Mapping) else None,
        "environment": data.get("environment"),
    }
    parent = path.parent.name
    tid = f"swe-{parent}-{path.stem}" if parent else f"swe-{path.stem}"
    return [history_to_transcript(history, id=tid, where=str(path), meta=meta)]
