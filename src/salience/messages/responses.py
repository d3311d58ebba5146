"""OpenAI Responses API input items <-> :class:`~salience.transcript.Transcript`.

The Responses API (``client.responses.create(input=[...])``, and the OpenAI Agents SDK)
takes a list of items instead of chat messages. Read per item:

* ``message`` (``{"type": "message", "role": ..., "content": ...}``, or the easy form
  without ``type``): role ``system``/``developer`` (system), ``user``, ``assistant``;
  content a string or a list of parts, whose ``input_text``, ``output_text``, ``text``
  and ``refusal`` parts are its text (others, images and files, are kept, not counted);
* ``function_call`` (``call_id``, ``name``, ``arguments``): an assistant entry with a
  :class:`~salience.transcript.ToolCall` whose id is the ``call_id``; consecutive calls
  (parallel calls, with any reasoning items among them) make one entry with one
  ToolCall each, as a Chat Completions message with several ``tool_calls`` does;
* ``function_call_output`` (``call_id``, ``output``): a tool entry answering that call;
* other ``*_call`` items with a ``call_id`` (``custom_tool_call``, ``computer_call``,
  ``local_shell_call``...) and their ``*_call_output``: a call and its result, paired the
  same way, carried through untouched;
* ``reasoning``: kept with the item that follows it, in one entry (the API refuses a
  reasoning item without its following item); its summary text is the entry's text;
* any other item (``item_reference``, ``web_search_call``...): an entry of its own whose
  text is the item's JSON, carried through untouched.

Entry ids are positional, ``m<index of the entry's first item>``, so they stay the same
as the list grows. Writing (:func:`to_responses`) gives back each entry's items exactly
when the entry did not change; a trimmed or stubbed entry has its text replaced (a
message's text parts, a call output's ``output``), a reasoning item before a changed
entry is left out (the model's reasoning cannot be cut), and an unknown item whose
entry changed becomes an assistant message with the new text.

Validity (:func:`check_responses`): every ``function_call_output`` (and other call
output) follows its call, once; every call is answered (unless pending calls are
allowed); every reasoning item has an item after it.

Reading refuses (a :class:`~salience.errors.TranscriptError` naming the item and the
field) what the API or the compactor cannot take: an item that is not a mapping, a
field of the wrong type, a call output with no call before it, and a call whose
output does not come before the next message or other item (the rule of
:func:`salience.messages.validate.require_answered`: the compactor keeps a call group
and its outputs together; the calls of the last call group may still be waiting). It
is bounded by :mod:`salience.limits` (items, and each item's depth and size) before
anything walks the items.

>>> items = [
...     {"role": "user", "content": "Find ZFA04Y"},
...     {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Look it up."}]},
...     {"type": "function_call", "call_id": "c1", "name": "get", "arguments": '{"id": "ZFA04Y"}'},
...     {"type": "function_call_output", "call_id": "c1", "output": "reservation ZFA04Y"},
... ]
>>> t = from_responses(items)
>>> [(e.id, e.role, e.content) for e in t.entries]
[('m0', 'user', 'Find ZFA04Y'), ('m1', 'assistant', 'Look it up.'), ('m3', 'tool', 'reservation ZFA04Y')]
>>> to_responses(t) == items, check_responses(items)
(True, [])
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from typing import Any

from salience.errors import TranscriptError
from salience.limits import Limits, check_count, check_size, check_value
from salience.messages._common import short
from salience.messages.validate import checked_transcript
from salience.transcript import Entry, ToolCall, Transcript

__all__ = [
    "KEY",
    "RESPONSES_TYPES",
    "check_responses",
    "from_responses",
    "is_responses_item",
    "to_responses",
]

#: ``Entry.meta`` key under which an entry's source items are kept.
KEY = "_responses"

#: Item types only the Responses API has (what :func:`is_responses_item` looks for).
RESPONSES_TYPES = frozenset({"message", "function_call", "function_call_output", "reasoning", "item_reference",
                             "web_search_call", "file_search_call", "computer_call", "computer_call_output",
                             "custom_tool_call", "custom_tool_call_output", "local_shell_call",
                             "local_shell_call_output", "image_generation_call", "code_interpreter_call",
                             "mcp_call", "mcp_list_tools", "mcp_approval_request", "mcp_approval_response",
                             "shell_call", "shell_call_output", "apply_patch_call", "apply_patch_call_output"})
_TEXT_PARTS = frozenset({"input_text", "output_text", "text", "refusal"})
_ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}


def is_responses_item(item: Any) -> bool:
    """Whether ``item`` can only be a Responses API item (a top-level ``type`` of its own, or
    ``input_text``/``output_text`` content parts)."""
    if not isinstance(item, Mapping):
        return False
    kind = item.get("type")
    if isinstance(kind, str) and (kind in RESPONSES_TYPES or kind.endswith(("_call", "_call_output"))):
        return True
    content = item.get("content")
    return isinstance(content, list) and any(
        isinstance(p, Mapping) and p.get("type") in ("input_text", "output_text", "input_image", "input_file")
        for p in content
    )


def _kind(item: Mapping[str, Any]) -> str:
    kind = item.get("type")
    if kind is None and "role" in item:
        return "message"
    return kind if isinstance(kind, str) else ""


def _is_call(kind: str, item: Mapping[str, Any]) -> bool:
    """Whether ``item`` (of type ``kind``) is a call the input must answer: a ``*_call`` with a ``call_id``."""
    call_id = item.get("call_id")
    return kind.endswith("_call") and isinstance(call_id, str) and bool(call_id)


def _is_text_part(part: Any) -> bool:
    kind = part.get("type") if isinstance(part, Mapping) else None
    return isinstance(kind, str) and kind in _TEXT_PARTS


def _parts_text(content: Any, where: str) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise TranscriptError(f"{where}: field 'content' must be a str or a list of parts (got {short(content)})")
    texts = []
    for j, part in enumerate(content):
        if isinstance(part, str):
            texts.append(part)
        elif _is_text_part(part):
            value = part.get("text", part.get("refusal"))
            if not isinstance(value, str):
                raise TranscriptError(f"{where}: field 'content[{j}]': a {part.get('type')} part's text must be "
                                      f"a str (got {short(value)})")
            texts.append(value)
    return "\n".join(texts)


def _reasoning_text(item: Mapping[str, Any]) -> str:
    parts = item.get("summary")
    if not isinstance(parts, list):
        return ""
    return "\n".join(p["text"] for p in parts if isinstance(p, Mapping) and isinstance(p.get("text"), str))


def _json(value: Any, where: str, field: str) -> str:
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError) as exc:  # in memory: a key or value JSON has no form for
        raise TranscriptError(f"{where}: field {field!r} is not JSON data ({exc})") from None


def _output_text(output: Any, where: str) -> str:
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        return _parts_text(output, where)
    return _json(output, where, "output")


def from_responses(items: Sequence[Any], *, id: str = "transcript", limits: Limits | None = None) -> Transcript:
    """A :class:`Transcript` of Responses API input ``items`` (rules in the module doc); never modifies them.

    Refused with a :class:`~salience.errors.TranscriptError` naming the item and the
    field: an item that is not a mapping, a field of the wrong type, a call output
    with no call before it, a call that is not answered before the next message (see
    the module doc); with a :class:`~salience.errors.LimitError`: more than
    ``limits.max_entries`` items, or items larger or deeper than the limits
    (:mod:`salience.limits`; :func:`salience.limits.current` when None).
    """
    if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Sequence):
        raise TranscriptError(f"transcript {id!r}: Responses input must be a list of items (got {short(items)})")
    check_count(len(items), where=f"transcript {id!r}", what="items", limits=limits)
    size = 0
    for i, raw in enumerate(items):  # bounded before anything walks them (deepcopy, repr, json)
        size += check_value(raw, where=f"transcript {id!r}, item {i}", limits=limits)
        check_size(size, where=f"transcript {id!r}", limits=limits, unit="bytes of JSON (about)")
    groups: list[tuple[dict[str, Any], dict[str, Any]]] = []  # (Entry fields, private) per entry
    names: dict[str, str] = {}
    pending: list[tuple[int, dict[str, Any]]] = []  # reasoning items waiting for their item
    previous = ""  # kind of the last item that was not reasoning
    for i, raw in enumerate(items):
        where = f"transcript {id!r}, item {i}"
        if not isinstance(raw, Mapping):
            raise TranscriptError(f"{where}: an item must be a mapping (got {short(raw)})")
        item = copy.deepcopy(dict(raw))
        kind = _kind(item)
        if kind == "reasoning":
            pending.append((i, item))
            continue
        first = pending[0][0] if pending else i
        lead = [p for _, p in pending]
        pending = []
        lead_text = "\n".join(t for t in (_reasoning_text(p) for p in lead) if t)
        fields: dict[str, Any]
        if _is_call(kind, item):
            raw_name = item.get("name")
            name: str = raw_name if isinstance(raw_name, str) else kind
            args = item.get("arguments", item.get("input", item.get("action")))
            arguments = args if isinstance(args, str) else _json(args if args is not None else {}, where,
                                                                  "arguments")
            names[item["call_id"]] = name
            call = ToolCall(id=item["call_id"], name=name, arguments=arguments)
            if groups and previous == "call":  # parallel calls: one entry, answered by the outputs after it
                fields, private = groups[-1]
                fields["tool_calls"] = (*fields["tool_calls"], call)
                fields["content"] = "\n".join(t for t in (fields["content"], lead_text) if t)
                private["items"].extend([*lead, item])
                private["content"] = fields["content"]
                continue
            previous = "call"
            fields = {"role": "assistant", "content": lead_text, "tool_calls": (call,)}
            private = {"items": [*lead, item], "kind": "call"}
        else:
            previous = kind
            private = {"items": [*lead, item], "kind": kind}
            if kind == "message":
                role_given = item.get("role")
                role = _ROLES.get(role_given) if isinstance(role_given, str) else None
                if role is None:
                    raise TranscriptError(f"{where}: field 'role' must be one of system, developer, user, "
                                          f"assistant (got {short(role_given)})")
                text = _parts_text(item.get("content"), where)
                fields = {"role": role, "content": "\n".join(t for t in (lead_text, text) if t)}
                private["text"] = text
            elif kind.endswith("_call_output"):
                call_id = item.get("call_id")
                if not isinstance(call_id, str) or not call_id:
                    raise TranscriptError(f"{where}: field 'call_id' must be a non-empty str (got {short(call_id)})")
                if call_id not in names:
                    raise TranscriptError(f"{where}: field 'call_id': {kind} answers call_id {call_id!r}, which "
                                          "no earlier call has")
                text = _output_text(item.get("output"), where)
                fields = {"role": "tool", "content": text, "tool_call_id": call_id, "name": names[call_id]}
                private["text"] = text
            else:  # carried through untouched; its JSON is what it costs
                fields = {"role": "assistant",
                          "content": "\n".join(t for t in (lead_text, _json(item, where, "item")) if t)}
        fields["id"] = f"m{first}"
        private["content"] = fields["content"]
        groups.append((fields, private))
    if pending:  # reasoning at the very end: an entry of its own
        lead = [p for _, p in pending]
        text = "\n".join(t for t in (_reasoning_text(p) for p in lead) if t)
        groups.append(({"id": f"m{pending[0][0]}", "role": "assistant", "content": text},
                       {"items": lead, "kind": "reasoning", "content": text}))
    try:
        entries = [Entry(meta={KEY: private}, **fields) for fields, private in groups]
    except TranscriptError as exc:
        raise TranscriptError(f"transcript {id!r}: {exc}") from None
    return checked_transcript(entries, id=id, size=size, limits=limits)


def _patched_parts(content: Any, text: str, part_type: str) -> Any:
    if not isinstance(content, list):
        return text
    parts: list[Any] = []
    placed = False
    for part in content:
        if isinstance(part, Mapping) and part.get("type") in _TEXT_PARTS or isinstance(part, str):
            if not placed:
                placed = True
                parts.append({"type": part_type, "text": text})
        else:
            parts.append(copy.deepcopy(part))
    if not placed:
        parts.insert(0, {"type": part_type, "text": text})
    return parts


def _native(entry: Entry) -> list[dict[str, Any]]:
    """Items for an entry that was not read from Responses items."""
    out: list[dict[str, Any]] = []
    if entry.role == "tool":
        return [{"type": "function_call_output", "call_id": entry.tool_call_id or entry.id, "output": entry.content}]
    if entry.content or not entry.tool_calls:
        role = {"system": "system", "user": "user"}.get(entry.role, "assistant")
        part = "output_text" if role == "assistant" else "input_text"
        out.append({"type": "message", "role": role, "content": [{"type": part, "text": entry.content}]
                    if role == "assistant" else entry.content})
    for call in entry.tool_calls:
        out.append({"type": "function_call", "call_id": call.id, "name": call.name, "arguments": call.arguments})
    return out


def entry_to_responses(entry: Entry) -> list[dict[str, Any]]:
    """An entry's items (new objects sharing nothing with ``entry``; rules in the module doc)."""
    private = entry.meta.get(KEY)
    if not isinstance(private, Mapping) or "items" not in private:
        return _native(entry)
    items = copy.deepcopy(private["items"])
    if entry.content == private["content"]:
        return items  # type: ignore[no-any-return]
    main = items[-1]
    kind = private["kind"]
    if kind == "reasoning":
        return []  # reasoning alone, cut: nothing left to send
    if kind == "message":
        part = "output_text" if main.get("role") == "assistant" else "input_text"
        main["content"] = _patched_parts(main.get("content"), entry.content, part)
        return [main]
    if kind.endswith("_call_output"):
        main["output"] = entry.content
        return [main]
    if kind == "call":  # the calls themselves stay; only the reasoning among them goes
        return [x for x in items if _kind(x) != "reasoning"]
    return [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": entry.content}]}]


def to_responses(transcript: Transcript) -> list[dict[str, Any]]:
    """Responses API input items for ``transcript``; the exact inverse of :func:`from_responses`."""
    return [item for e in transcript.entries for item in entry_to_responses(e)]


def check_responses(items: Sequence[Any], *, allow_pending: bool = False) -> list[str]:
    """What the Responses API would refuse in ``items``, one line per problem (empty: none found).

    Every call output follows the call with its ``call_id``, once; every call is answered
    (``allow_pending``: the calls of the last call group may wait for their output, with
    some of the group's outputs after them); every ``reasoning``
    item has an item after it; a message has a known role.
    """
    problems: list[str] = []
    if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Sequence):
        return [f"input must be a list of items (got {short(items)})"]
    calls: dict[str, int] = {}
    answered: set[str] = set()
    for i, item in enumerate(items):
        if not isinstance(item, Mapping):
            problems.append(f"item {i}: must be a mapping (got {short(item)})")
            continue
        kind = _kind(item)
        role = item.get("role")
        if kind == "message" and not (isinstance(role, str) and role in _ROLES):
            problems.append(f"item {i}: field 'role' must be one of system, developer, user, assistant "
                            f"(got {short(item.get('role'))})")
        elif kind == "reasoning" and i == len(items) - 1:
            problems.append(f"item {i}: a reasoning item must be followed by the item it came with")
        elif kind.endswith("_call_output"):
            call_id = item.get("call_id")
            if not isinstance(call_id, str) or call_id not in calls:
                problems.append(f"item {i}: {kind} with call_id {short(call_id)} has no call before it")
            elif call_id in answered:
                problems.append(f"item {i}: {kind} answers call_id {call_id!r} a second time")
            else:
                answered.add(call_id)
        elif kind.endswith("_call") and isinstance(item.get("call_id"), str):
            if item["call_id"] in calls:
                problems.append(f"item {i}: call_id {item['call_id']!r} is used by item {calls[item['call_id']]} too")
            calls[item["call_id"]] = i
    for call_id, i in calls.items():
        kind = _kind(items[i])
        if call_id in answered or kind in ("web_search_call", "file_search_call", "image_generation_call",
                                           "code_interpreter_call", "mcp_call"):
            continue
        if not (allow_pending and _in_last_group(items, i)):
            problems.append(f"item {i}: {kind} with call_id {call_id!r} is never answered")
    return problems


def _in_last_group(items: Sequence[Any], i: int) -> bool:
    """Whether call ``i`` is in the last call group: after it only more calls (and reasoning),
    then only outputs (the pending rule of :func:`salience.messages.validate.require_answered`)."""
    answered = False
    for item in items[i + 1:]:
        kind = _kind(item) if isinstance(item, Mapping) else ""
        if kind.endswith("_call_output"):
            answered = True
        elif kind.endswith("_call"):
            if answered:
                return False
        elif kind != "reasoning":
            return False
    return True
