"""Anthropic Messages <-> :class:`~salience.transcript.Transcript`.

Mapping, one message to one or more entries:

* a ``user`` message: its ``tool_result`` blocks each become their own ``tool``
  entry (so each result can be kept, trimmed or stubbed on its own); each run of
  other blocks (text, images, documents) becomes one ``user`` entry;
* an ``assistant`` message becomes one entry: text blocks joined as content,
  ``tool_use`` blocks as ``tool_calls`` (``input`` serialised to JSON), ``thinking``
  and other blocks carried through;
* the system prompt, given separately, becomes a leading ``system`` entry.

Entry ids: a message's ``id`` key if it has one, else ``m<index>``; the second and
later entries from the same message get ``.<k>`` appended. Everything needed to give
the messages back exactly is kept under ``meta["_anthropic"]``, so
``from_anthropic(m).to_anthropic() == m``. Entries whose content was changed (say,
trimmed by the compactor) are rendered from their new content; entries that came
from another format are rendered natively (a ``tool`` entry becomes a
``tool_result`` block in a user message, next to its siblings).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from salience.errors import TranscriptError
from salience.transcript import Entry, Query, ToolCall, Transcript

__all__ = ["from_anthropic", "system_of", "to_anthropic"]

KEY = "_anthropic"


def _fail(tid: str, i: int, field: str, expected: str, got: object) -> TranscriptError:
    text = repr(got)
    if len(text) > 60:
        text = text[:57] + "..."
    return TranscriptError(f"transcript {tid!r}, message {i}: field {field!r} must be {expected} (got {text})")


def _blocks_text(blocks: Any, tid: str, i: int, field: str) -> str:
    if isinstance(blocks, str):
        return blocks
    if blocks is None:
        return ""
    if not isinstance(blocks, list):
        raise _fail(tid, i, field, "a str or a list of blocks", blocks)
    texts = []
    for j, block in enumerate(blocks):
        if not isinstance(block, Mapping) or "type" not in block:
            raise _fail(tid, i, f"{field}[{j}]", "a block (a mapping with a 'type')", block)
        if block["type"] == "text":
            if not isinstance(block.get("text"), str):
                raise _fail(tid, i, f"{field}[{j}].text", "a str", block.get("text"))
            texts.append(block["text"])
    return "\n".join(texts)


def from_anthropic(
    messages: Sequence[Mapping[str, Any]],
    *,
    system: str | Sequence[Mapping[str, Any]] | None = None,
    id: str = "transcript",
    domain: str | None = None,
    queries: Iterable[Query] = (),
) -> Transcript:
    """A :class:`Transcript` from Anthropic messages; nothing given is modified."""
    tid = id
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise TranscriptError(
            f"transcript {tid!r}: messages must be a list of message mappings (got a {type(messages).__name__})"
        )
    entries: list[Entry] = []
    tool_names: dict[str, str] = {}
    if system is not None:
        text = _blocks_text(system, tid, -1, "system")
        entries.append(
            Entry(id="system", role="system", content=text,
                  meta={KEY: {"system": copy.deepcopy(system), "text": text}})
        )
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise TranscriptError(
                f"transcript {tid!r}, message {i}: expected a mapping with 'role' and 'content' "
                f"(got a {type(message).__name__})"
            )
        role = message.get("role")
        if role not in ("user", "assistant"):
            raise _fail(tid, i, "role", "'user' or 'assistant' (the system prompt is given separately)", role)
        if "content" not in message:
            raise _fail(tid, i, "content", "present", None)
        content = message["content"]
        base_id = message.get("id", f"m{i}")
        if not isinstance(base_id, str) or not base_id:
            raise _fail(tid, i, "id", "a non-empty str", base_id)
        extra = {k: copy.deepcopy(v) for k, v in message.items() if k not in ("role", "content", "id")}
        common = {"message": i, "message_id": base_id, "has_id": "id" in message, "extra": extra, "role": role}
        if isinstance(content, str):
            entries.append(Entry(id=base_id, role=role, content=content,
                                 meta={KEY: {**common, "string": True, "text": content}}))
            continue
        if not isinstance(content, list):
            raise _fail(tid, i, "content", "a str or a list of blocks", content)
        _blocks_text(content, tid, i, "content")  # validates the blocks
        parts: list[tuple[str, list[Mapping[str, Any]]]] = []  # (kind, blocks)
        if role == "assistant":
            parts.append(("assistant", list(content)))
        else:
            for block in content:
                if block["type"] == "tool_result":
                    parts.append(("tool", [block]))
                elif parts and parts[-1][0] == "user":
                    parts[-1][1].append(block)
                else:
                    parts.append(("user", [block]))
            if not parts:
                parts.append(("user", []))
        for k, (kind, blocks) in enumerate(parts):
            eid = base_id if k == 0 else f"{base_id}.{k}"
            private = {**common, "part": k, "blocks": copy.deepcopy(blocks)}
            if kind == "tool":
                block = blocks[0]
                use_id = block.get("tool_use_id")
                if not isinstance(use_id, str) or not use_id:
                    raise _fail(tid, i, "content[].tool_use_id", "a non-empty str", use_id)
                text = _blocks_text(block.get("content"), tid, i, "content[].content")
                private["text"] = text
                entry = Entry(id=eid, role="tool", content=text, name=tool_names.get(use_id),
                              tool_call_id=use_id, meta={KEY: private})
            elif kind == "assistant":
                text = _blocks_text(blocks, tid, i, "content")
                calls = []
                for j, block in enumerate(blocks):
                    if block["type"] == "tool_use":
                        cid, name = block.get("id"), block.get("name")
                        if not isinstance(cid, str) or not cid:
                            raise _fail(tid, i, f"content[{j}].id", "a non-empty str", cid)
                        if not isinstance(name, str):
                            raise _fail(tid, i, f"content[{j}].name", "a str", name)
                        tool_names[cid] = name
                        calls.append(ToolCall(id=cid, name=name,
                                              arguments=json.dumps(block.get("input", {}), ensure_ascii=False)))
                private["text"] = text
                private["calls"] = [(c.id, c.name, c.arguments) for c in calls]
                entry = Entry(id=eid, role="assistant", content=text, tool_calls=tuple(calls), meta={KEY: private})
            else:
                text = _blocks_text(blocks, tid, i, "content")
                private["text"] = text
                entry = Entry(id=eid, role="user", content=text, meta={KEY: private})
            entries.append(entry)
    try:
        return Transcript(id=tid, entries=tuple(entries), domain=domain, queries=tuple(queries))
    except TranscriptError as exc:
        raise TranscriptError(str(exc).replace("field 'tool_call_id'", "tool_result 'tool_use_id'")) from None


def system_of(transcript: Transcript) -> str | list[dict[str, Any]] | None:
    """The system prompt as Anthropic takes it: the given form if unchanged, else text."""
    texts = []
    for entry in transcript.entries:
        if entry.role != "system":
            continue
        private = entry.meta.get(KEY) or {}
        if "system" in private and private.get("text") == entry.content and len(texts) == 0:
            only = [e for e in transcript.entries if e.role == "system"]
            if len(only) == 1:
                return copy.deepcopy(private["system"])
        texts.append(entry.content)
    return "\n\n".join(texts) if texts else None


def _render_blocks(entry: Entry) -> list[dict[str, Any]]:
    """The content blocks for one entry (its own, if unchanged)."""
    private = entry.meta.get(KEY) or {}
    if "blocks" in private and private.get("text") == entry.content and (
        entry.role != "assistant" or private.get("calls") == [(c.id, c.name, c.arguments) for c in entry.tool_calls]
    ):
        return copy.deepcopy(private["blocks"])
    if entry.role == "tool":
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": entry.tool_call_id, "content": entry.content}
        for b in private.get("blocks", [])[:1]:
            if b.get("is_error"):
                block["is_error"] = True
        return [block]
    blocks: list[dict[str, Any]] = []
    kept_other = [copy.deepcopy(b) for b in private.get("blocks", [])
                  if b.get("type") in ("thinking", "redacted_thinking")]
    blocks.extend(kept_other)
    if entry.content:
        blocks.append({"type": "text", "text": entry.content})
    for call in entry.tool_calls:
        try:
            arguments = json.loads(call.arguments) if call.arguments else {}
        except json.JSONDecodeError:
            arguments = {"_raw": call.arguments}
        blocks.append({"type": "tool_use", "id": call.id, "name": call.name, "input": arguments})
    return blocks


def to_anthropic(transcript: Transcript) -> list[dict[str, Any]]:
    """Anthropic messages for ``transcript``; exact inverse of :func:`from_anthropic`.

    System entries are left out (see :func:`system_of`). Entries that came from the
    same message are put back together; ``tool`` entries from other formats join the
    user message that follows their call.
    """
    messages: list[dict[str, Any]] = []
    current_key: object = None
    for entry in transcript.entries:
        if entry.role == "system":
            continue
        private = entry.meta.get(KEY) or {}
        role = "assistant" if entry.role == "assistant" else "user"
        if "message" in private:
            key: object = ("msg", private["message"])
        elif entry.role == "tool":
            key = ("tools",)
        else:
            key = ("native", entry.id)
        if (
            messages
            and key == current_key
            and messages[-1]["role"] == role
            and isinstance(messages[-1]["content"], list)
        ):
            messages[-1]["content"].extend(_render_blocks(entry))
            continue
        current_key = key
        if private.get("string") and private.get("text") == entry.content:
            content: Any = entry.content
        elif not private and entry.role in ("user", "assistant") and not entry.tool_calls:
            content = entry.content
        else:
            content = _render_blocks(entry)
        message: dict[str, Any] = {"role": role, "content": content}
        if private.get("has_id"):
            message["id"] = private.get("message_id", entry.id)
        for k, v in (private.get("extra") or {}).items():
            message[k] = copy.deepcopy(v)
        messages.append(message)
    return messages
