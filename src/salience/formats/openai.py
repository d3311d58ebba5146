"""OpenAI chat messages <-> :class:`~salience.transcript.Transcript`.

Accepted per message: ``role`` (``system``, ``developer`` is read as system,
``user``, ``assistant``, ``tool``, ``function``), ``content`` as a string, ``None``
or a list of parts (text parts are joined by newlines, other parts are carried
through), ``name``, ``tool_calls``, ``tool_call_id``, plus two keys of salience's
own: ``id`` (becomes the entry id) and ``label``. Any other key is carried through
untouched, so ``from_openai(m).to_openai() == m``.

Documented behaviour for odd input:

* a ``tool`` message whose ``tool_call_id`` names no earlier call is an error;
* a call never answered loads (the agent may still be waiting on it);
* ``content: null`` on an assistant message with tool calls loads as ``""`` and
  comes back as ``None``.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from salience.errors import TranscriptError
from salience.transcript import Entry, Query, ToolCall, Transcript

__all__ = ["entry_from_openai", "entry_to_openai", "from_openai", "to_openai"]

_OWN_KEYS = {"role", "content", "name", "tool_calls", "tool_call_id", "id", "label"}
_ROLE_ALIASES = {"developer": "system", "function": "tool"}
KEY = "_openai"


def _fail(tid: str, i: int, field: str, expected: str, got: object) -> TranscriptError:
    text = repr(got)
    if len(text) > 60:
        text = text[:57] + "..."
    return TranscriptError(f"transcript {tid!r}, message {i}: field {field!r} must be {expected} (got {text})")


def _content_text(content: Any, tid: str, i: int) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for j, part in enumerate(content):
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, Mapping):
                if part.get("type") in ("text", "input_text", "output_text") or (
                    "text" in part and isinstance(part.get("text"), str)
                ):
                    text = part.get("text")
                    if not isinstance(text, str):
                        raise _fail(tid, i, f"content[{j}].text", "a str", text)
                    texts.append(text)
                elif part.get("type") == "refusal" and isinstance(part.get("refusal"), str):
                    texts.append(part["refusal"])
            else:
                raise _fail(tid, i, f"content[{j}]", "a content part (a mapping with a 'type')", part)
        return "\n".join(texts)
    raise _fail(tid, i, "content", "a str, a list of parts or null", content)


def entry_from_openai(
    message: Mapping[str, Any], index: int, *, transcript_id: str = "transcript", default_id: str | None = None
) -> Entry:
    """One OpenAI message as an :class:`Entry` (the message is not modified)."""
    tid = transcript_id
    if not isinstance(message, Mapping):
        raise TranscriptError(
            f"transcript {tid!r}, message {index}: expected a mapping with 'role' and 'content' "
            f"(got a {type(message).__name__})"
        )
    if "role" not in message:
        raise _fail(tid, index, "role", "present", None)
    raw_role = message["role"]
    role = _ROLE_ALIASES.get(raw_role, raw_role) if isinstance(raw_role, str) else raw_role
    if role not in ("system", "user", "assistant", "tool"):
        raise _fail(tid, index, "role", "one of 'system', 'developer', 'user', 'assistant', 'tool'", raw_role)
    content = message.get("content")
    text = _content_text(content, tid, index)
    entry_id = message.get("id", default_id if default_id is not None else f"m{index}")
    if not isinstance(entry_id, str) or not entry_id:
        raise _fail(tid, index, "id", "a non-empty str", entry_id)
    calls: list[ToolCall] = []
    raw_calls = message.get("tool_calls")
    if raw_calls is not None:
        if not isinstance(raw_calls, list):
            raise _fail(tid, index, "tool_calls", "a list", raw_calls)
        for j, call in enumerate(raw_calls):
            if not isinstance(call, Mapping):
                raise _fail(tid, index, f"tool_calls[{j}]", "a mapping", call)
            fn = call.get("function")
            if not isinstance(fn, Mapping):
                raise _fail(tid, index, f"tool_calls[{j}].function", "a mapping with 'name' and 'arguments'", fn)
            cid, name, args = call.get("id"), fn.get("name"), fn.get("arguments", "{}")
            if not isinstance(cid, str) or not cid:
                raise _fail(tid, index, f"tool_calls[{j}].id", "a non-empty str", cid)
            if not isinstance(name, str):
                raise _fail(tid, index, f"tool_calls[{j}].function.name", "a str", name)
            if not isinstance(args, str):
                raise _fail(tid, index, f"tool_calls[{j}].function.arguments", "a JSON str", args)
            calls.append(ToolCall(id=cid, name=name, arguments=args))
    name = message.get("name")
    if name is not None and not isinstance(name, str):
        raise _fail(tid, index, "name", "a str or null", name)
    tool_call_id = message.get("tool_call_id")
    if raw_role == "function" and tool_call_id is None:
        tool_call_id = None
    label = message.get("label")
    if label is not None and (isinstance(label, bool) or not isinstance(label, (int, float)) or not 0 <= label <= 1):
        raise _fail(tid, index, "label", "a number in [0, 1] or null", label)
    private: dict[str, Any] = {
        "has_id": "id" in message,
        "extra": {k: copy.deepcopy(v) for k, v in message.items() if k not in _OWN_KEYS},
        "keys": [k for k in ("content", "name", "tool_calls", "tool_call_id", "label") if k in message],
    }
    if raw_role != role:
        private["role"] = raw_role
    if not isinstance(content, str):
        private["content"] = copy.deepcopy(content)
        private["text"] = text
    if raw_calls is not None:
        private["tool_calls"] = copy.deepcopy(raw_calls)
    try:
        return Entry(
            id=entry_id,
            role=role,
            content=text,
            name=name,
            tool_calls=tuple(calls),
            tool_call_id=tool_call_id,
            label=label,
            meta={KEY: private},
        )
    except TranscriptError as exc:
        raise TranscriptError(f"transcript {tid!r}, message {index}: {exc}") from None


def from_openai(
    messages: Sequence[Mapping[str, Any]],
    *,
    id: str = "transcript",
    domain: str | None = None,
    queries: Iterable[Query] = (),
) -> Transcript:
    """A :class:`Transcript` from OpenAI chat messages; ``messages`` is not modified."""
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise TranscriptError(
            f"transcript {id!r}: messages must be a list of message mappings (got a {type(messages).__name__})"
        )
    entries = [entry_from_openai(m, i, transcript_id=id) for i, m in enumerate(messages)]
    return Transcript(id=id, entries=tuple(entries), domain=domain, queries=tuple(queries))


def _render_calls(entry: Entry, private: Mapping[str, Any]) -> list[dict[str, Any]]:
    raw = private.get("tool_calls")
    if raw is not None:
        try:
            same = [
                (c["id"], c["function"]["name"], c["function"].get("arguments", "{}")) for c in raw
            ] == [(c.id, c.name, c.arguments) for c in entry.tool_calls]
        except (KeyError, TypeError):
            same = False
        if same:
            return copy.deepcopy(raw)
    return [
        {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
        for c in entry.tool_calls
    ]


def entry_to_openai(entry: Entry, *, with_id: bool | None = None, with_label: bool = True) -> dict[str, Any]:
    """One entry as an OpenAI message.

    ``with_id``: ``None`` writes the ``id`` key only if the source message had it;
    ``True`` always; ``False`` never.
    """
    private = entry.meta.get(KEY) or {}
    keys = private.get("keys")
    message: dict[str, Any] = {"role": private.get("role", entry.role)}
    if with_id or (with_id is None and private.get("has_id")):
        message["id"] = entry.id
    if "content" in private and private.get("text") == entry.content:
        message["content"] = copy.deepcopy(private["content"])
    elif "content" in private and private["content"] is None and entry.content == "":
        message["content"] = None
    else:
        message["content"] = entry.content
    if entry.name is not None or (keys is not None and "name" in keys):
        message["name"] = entry.name
    if entry.tool_calls or (keys is not None and "tool_calls" in keys):
        message["tool_calls"] = _render_calls(entry, private)
    if entry.tool_call_id is not None or (keys is not None and "tool_call_id" in keys):
        message["tool_call_id"] = entry.tool_call_id
    if with_label and (entry.label is not None or (keys is not None and "label" in keys)):
        message["label"] = entry.label
    for k, v in (private.get("extra") or {}).items():
        message[k] = copy.deepcopy(v)
    return message


def to_openai(transcript: Transcript, *, with_ids: bool | None = None) -> list[dict[str, Any]]:
    """OpenAI chat messages for ``transcript``; exact inverse of :func:`from_openai`."""
    return [entry_to_openai(e, with_id=with_ids) for e in transcript.entries]
