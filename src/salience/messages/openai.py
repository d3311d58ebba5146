"""OpenAI chat messages <-> :class:`~salience.transcript.Transcript`.

One message becomes one entry. Accepted per message: ``role`` (``system``,
``developer`` read as system, ``user``, ``assistant``, ``tool``, legacy
``function`` read as tool), ``content`` as a string, ``None``, absent, or a list of
parts, ``name``, ``tool_calls``, ``tool_call_id``, plus two keys of salience's own:
``id`` (becomes the entry id) and ``label`` (a number in [0, 1]). Any other key is
carried through untouched.

Round trip: the message is deep-copied when read, so ``from_openai(m).to_openai()
== m`` exactly (key order included), however the caller's dicts change later, and
the output never shares objects with the transcript. An entry whose fields were
changed (say ``entry.replace(content="[trimmed]")`` by a compactor) is rendered from
its new values: the original message with the changed fields replaced (text parts
give way to one part with the new text; images and other keys stay). Entries that
came from another format (Anthropic) or were built directly are rendered natively;
so is an entry whose kept original was dropped with
``entry.replace(meta=entry.public_meta)`` (its images and extra keys go with it).

>>> msgs = [{"role": "user", "content": [{"type": "text", "text": "Hi"}], "x": 1}]
>>> t = from_openai(msgs)
>>> t.entries[0].content
'Hi'
>>> to_openai(t) == msgs
True
>>> to_openai(t.replace(entries=(t.entries[0].replace(content="Hello"),)))
[{'role': 'user', 'content': [{'type': 'text', 'text': 'Hello'}], 'x': 1}]

Documented behaviour for odd input (each tested in ``tests/test_bad_input.py``):

* ``content`` that is ``None`` or absent loads as ``""`` and comes back as it was;
  a list of parts loads as its text parts joined by newlines (``text``,
  ``input_text``, ``output_text``, and ``refusal`` parts; bare strings in the list
  count as text); other parts (images, audio, files) are kept for rendering but
  are not part of ``content`` (and so are not counted as tokens);
* ``content`` of any other type (a number, a dict), a part that is not a mapping
  with a ``type``, a ``text`` part whose ``text`` is not a string: a
  :class:`~salience.errors.TranscriptError` naming transcript, message index,
  entry id and field;
* an unknown ``role`` (``"robot"``, ``"User"``): an error; map your roles first;
* a ``tool`` message whose ``tool_call_id`` names no call of an earlier assistant
  message: an error (a result without its call is invalid for every provider);
* a call that is not answered before the next message that is not one of its
  call group's results (a user turn, another assistant turn) is refused by
  :func:`from_openai`, naming the message and the call id: OpenAI's API refuses
  such a history, and salience neither passes it on nor guesses a repair (README,
  "Bad input"). The calls of the last assistant message may still wait for their
  results (the agent is running the tools): they load,
  ``Transcript.unanswered_calls()`` lists them, and they are rendered as given;
* input nested deeper, larger or with more messages than :mod:`salience.limits`
  allows (64 levels, 64 MiB, 100,000 messages by default): a
  :class:`~salience.errors.LimitError` naming the message, the limit and its value;
* ``tool_calls[].function.arguments`` must be a string, but need not be valid
  JSON (models do emit broken JSON): it is kept as given;
* text is kept exactly, however long (a 5 MB tool output loads and is counted in
  well under a second), and whatever characters it holds.

Rendering rules for entries not read from OpenAI messages: an assistant entry with
calls and no text gets ``content: None``; ``name`` is written whenever it is set;
Anthropic image blocks become ``image_url`` parts (URL or ``data:`` URL); other
Anthropic blocks (thinking, documents, images inside tool results) have no OpenAI
form and are left out; a ``tool`` entry with no ``tool_call_id`` keeps role
``tool`` (it is a free-standing observation and cannot be sent to OpenAI's API as
such).
"""

from __future__ import annotations

import copy
import math
import numbers
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from salience.errors import TranscriptError
from salience.limits import Limits, check_count, check_value
from salience.messages._common import ANTHROPIC_KEY, OPENAI_KEY, copy_json
from salience.messages._common import fail as _fail
from salience.messages._common import short as _short
from salience.messages.validate import checked_transcript
from salience.transcript import Entry, Query, ToolCall, Transcript, register_converter

__all__ = ["KEY", "entry_from_openai", "entry_to_openai", "from_openai", "message_where", "to_openai"]

#: ``Entry.meta`` key under which the original message is kept for rendering.
KEY = OPENAI_KEY

_ROLES = ("system", "user", "assistant", "tool")
_ROLE_ALIASES = {"developer": "system", "function": "tool"}
_TEXT_PARTS = ("text", "input_text", "output_text")


def message_where(tid: str, i: int, entry_id: object = None) -> str:
    """Where a message is, for errors: ``transcript 't', message 3 (id 'm3')``."""
    where = f"transcript {tid!r}, message {i}"
    if isinstance(entry_id, str) and entry_id:
        where += f" (id {entry_id!r})"
    return where


def _part_text(part: Any) -> str | None:
    """The text of one content part, or None for a non-text part (image, audio...)."""
    if isinstance(part, str):
        return part
    if part.get("type") == "refusal":
        refusal = part.get("refusal")
        return refusal if isinstance(refusal, str) else None
    if part.get("type") in _TEXT_PARTS or "type" not in part:
        text = part.get("text")
        return text if isinstance(text, str) else None
    return None


def _content_text(content: Any, where: str) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for j, part in enumerate(content):
            if isinstance(part, str):
                texts.append(part)
                continue
            if not isinstance(part, Mapping) or not (isinstance(part.get("type"), str) or "text" in part):
                raise _fail(where, f"content[{j}]", "a content part (a mapping with a 'type')", part)
            if part.get("type") in _TEXT_PARTS or "type" not in part:
                if not isinstance(part.get("text"), str):
                    raise _fail(where, f"content[{j}].text", "a str", part.get("text"))
                texts.append(part["text"])
            elif part.get("type") == "refusal":
                if not isinstance(part.get("refusal"), str):
                    raise _fail(where, f"content[{j}].refusal", "a str", part.get("refusal"))
                texts.append(part["refusal"])
        return "\n".join(texts)
    raise _fail(where, "content", "a str, a list of content parts or null", content)


def _read_calls(raw_calls: Any, where: str) -> tuple[ToolCall, ...]:
    if raw_calls is None:
        return ()
    if not isinstance(raw_calls, list):
        raise _fail(where, "tool_calls", "a list", raw_calls)
    calls = []
    for j, call in enumerate(raw_calls):
        if not isinstance(call, Mapping):
            raise _fail(where, f"tool_calls[{j}]", "a mapping with 'id' and 'function'", call)
        fn = call.get("function")
        if not isinstance(fn, Mapping):
            raise _fail(where, f"tool_calls[{j}].function", "a mapping with 'name' and 'arguments'", fn)
        cid, name, args = call.get("id"), fn.get("name"), fn.get("arguments", "{}")
        if not isinstance(cid, str) or not cid:
            raise _fail(where, f"tool_calls[{j}].id", "a non-empty str", cid)
        if not isinstance(name, str):
            raise _fail(where, f"tool_calls[{j}].function.name", "a str", name)
        if not isinstance(args, str):
            raise _fail(where, f"tool_calls[{j}].function.arguments", "a JSON str", args)
        calls.append(ToolCall(id=cid, name=name, arguments=args))
    return tuple(calls)


def entry_from_openai(
    message: Mapping[str, Any],
    index: int,
    *,
    transcript_id: str = "transcript",
    default_id: str | None = None,
    limits: Limits | None = None,
) -> Entry:
    """One OpenAI message as an :class:`Entry`; ``message`` is deep-copied, never modified.

    ``index`` is the message's position (for error messages and the positional id
    ``m<index>``, unless ``default_id`` is given). ``message`` must be within
    ``limits`` (:func:`salience.limits.current` when None): nested at most
    ``max_depth`` deep, at most ``max_bytes`` large, else a
    :class:`~salience.errors.LimitError`.
    """
    tid = transcript_id
    if not isinstance(message, Mapping):
        raise TranscriptError(
            f"{message_where(tid, index)}: expected a mapping with 'role' and 'content' (got {_short(message)})"
        )
    size = check_value(message, where=message_where(tid, index, message.get("id")), limits=limits)
    entry_id = message.get("id", default_id if default_id is not None else f"m{index}")
    where = message_where(tid, index, entry_id)
    if not isinstance(entry_id, str) or not entry_id:
        raise _fail(where, "id", "a non-empty str", entry_id)
    if "role" not in message:
        raise TranscriptError(f"{where}: field 'role' is missing")
    raw_role = message["role"]
    role = _ROLE_ALIASES.get(raw_role, raw_role) if isinstance(raw_role, str) else raw_role
    if role not in _ROLES:
        raise _fail(where, "role", "one of 'system', 'developer', 'user', 'assistant', 'tool', 'function'", raw_role)
    text = _content_text(message.get("content"), where)
    calls = _read_calls(message.get("tool_calls"), where)
    name = message.get("name")
    if name is not None and not isinstance(name, str):
        raise _fail(where, "name", "a str or null", name)
    tool_call_id = message.get("tool_call_id")
    if tool_call_id is not None and (not isinstance(tool_call_id, str) or not tool_call_id):
        raise _fail(where, "tool_call_id", "a non-empty str or null", tool_call_id)
    if tool_call_id is not None and role != "tool":
        raise _fail(where, "tool_call_id", f"absent on a {raw_role!r} message (only tool messages answer calls)",
                    tool_call_id)
    if calls and role != "assistant":
        raise _fail(where, "tool_calls", f"absent on a {raw_role!r} message (only assistants call tools)",
                    message.get("tool_calls"))
    label = message.get("label")
    if label is not None:
        if isinstance(label, bool) or not isinstance(label, numbers.Real) or not (
            math.isfinite(float(label)) and 0 <= float(label) <= 1
        ):
            raise _fail(where, "label", "a number in [0, 1] or null", label)
        label = float(label)
    private = {
        "message": copy_json(dict(message)),  # bounded by check_value above: no cycles
        "role": role,
        "text": text,
        "name": name,
        "calls": calls,
        "tool_call_id": tool_call_id,
        "size": size,
    }
    try:
        return Entry(
            id=entry_id,
            role=role,
            content=text,
            name=name,
            tool_calls=calls,
            tool_call_id=tool_call_id,
            label=label,
            meta={KEY: private},
        )
    except TranscriptError as exc:  # pragma: no cover - every field is checked above
        raise TranscriptError(f"{where}: {exc}") from None


def from_openai(
    messages: Sequence[Mapping[str, Any]],
    *,
    id: str = "transcript",
    domain: str | None = None,
    queries: Iterable[Query] = (),
    limits: Limits | None = None,
) -> Transcript:
    """A :class:`Transcript` from OpenAI chat messages; ``messages`` is not modified.

    Refused, each with a :class:`~salience.errors.TranscriptError` naming the message
    and the call: a history OpenAI's API would refuse for its tool calls (a result
    before its call, or a call that is not answered before the next message that is
    not its result; the calls of the last assistant message may wait for their
    results, see :func:`salience.messages.validate.require_answered`); more than
    ``limits.max_entries`` messages, or messages larger or deeper than the limits
    (:mod:`salience.limits`): a :class:`~salience.errors.LimitError`.

    >>> t = from_openai([{"role": "user", "content": "hi"}, {"role": "function", "name": "f", "content": "1"}])
    >>> [(e.id, e.role, e.name) for e in t.entries]
    [('m0', 'user', None), ('m1', 'tool', 'f')]
    >>> from_openai([{"role": "tool", "tool_call_id": "c9", "content": "42"}], id="t")
    Traceback (most recent call last):
    ...
    salience.errors.TranscriptError: transcript 't', entry 0 (id 'm0'): field 'tool_call_id' must name a call \
made by an earlier assistant entry (got 'c9', which no entry calls)
    """
    if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Sequence):
        raise TranscriptError(
            f"transcript {id!r}: messages must be a list of message mappings (got a {type(messages).__name__})"
        )
    check_count(len(messages), where=f"transcript {id!r}", limits=limits)
    entries = [entry_from_openai(m, i, transcript_id=id, limits=limits) for i, m in enumerate(messages)]
    return checked_transcript(entries, id=id, size=sum(e.meta[KEY]["size"] for e in entries), limits=limits,
                              domain=domain, queries=tuple(queries))


# -- rendering ---------------------------------------------------------------


def _patched_content(original: Any, text: str, has_calls: bool) -> Any:
    """``original`` content with its text replaced by ``text``; non-text parts kept."""
    if isinstance(original, list):
        parts: list[Any] = []
        placed = False
        for part in original:
            if _part_text(part) is None:
                parts.append(copy.deepcopy(part))
            elif not placed:
                placed = True
                if text:
                    parts.append({"type": "text", "text": text})
        if not placed and text:
            parts.insert(0, {"type": "text", "text": text})
        if parts:
            return parts
    if not text and has_calls:
        return None
    return text


def _call_dict(call: ToolCall) -> dict[str, Any]:
    return {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}


def _patched_calls(raw: Any, calls: tuple[ToolCall, ...]) -> list[dict[str, Any]]:
    """The original call dicts for calls that did not change, new ones for the rest."""
    by_id: dict[str, Any] = {}
    if isinstance(raw, list):
        for c in raw:
            fn = c.get("function") or {}
            by_id[c.get("id")] = (c, (fn.get("name"), fn.get("arguments", "{}")))
    out = []
    for call in calls:
        found = by_id.get(call.id)
        if found is not None and found[1] == (call.name, call.arguments):
            out.append(copy.deepcopy(found[0]))
        else:
            out.append(_call_dict(call))
    return out


def _image_part(block: Mapping[str, Any]) -> dict[str, Any] | None:
    source = block.get("source")
    if not isinstance(source, Mapping):
        return None
    if source.get("type") == "base64" and isinstance(source.get("data"), str):
        url = f"data:{source.get('media_type', 'image/png')};base64,{source['data']}"
    elif source.get("type") == "url" and isinstance(source.get("url"), str):
        url = source["url"]
    else:
        return None
    return {"type": "image_url", "image_url": {"url": url}}


def _native_content(entry: Entry) -> Any:
    """Content for an entry that was not read from an OpenAI message."""
    images: list[dict[str, Any]] = []
    if entry.role == "user":
        for block in (entry.meta.get(ANTHROPIC_KEY) or {}).get("blocks") or ():
            if isinstance(block, Mapping) and block.get("type") == "image":
                part = _image_part(block)
                if part is not None:
                    images.append(part)
    if images:
        return ([{"type": "text", "text": entry.content}] if entry.content else []) + images
    if not entry.content and entry.tool_calls:
        return None
    return entry.content


def _native(entry: Entry) -> dict[str, Any]:
    message: dict[str, Any] = {"role": entry.role, "content": _native_content(entry)}
    if entry.name is not None:
        message["name"] = entry.name
    if entry.tool_calls:
        message["tool_calls"] = [_call_dict(c) for c in entry.tool_calls]
    if entry.tool_call_id is not None:
        message["tool_call_id"] = entry.tool_call_id
    return message


def _from_original(entry: Entry, private: Mapping[str, Any]) -> dict[str, Any]:
    original: dict[str, Any] = private["message"]
    message: dict[str, Any] = copy_json(original)
    if entry.role != private["role"]:
        message["role"] = entry.role
    if entry.content != private["text"]:
        message["content"] = _patched_content(original.get("content"), entry.content, bool(entry.tool_calls))
    if entry.name != private["name"]:
        if entry.name is None:
            message.pop("name", None)
        else:
            message["name"] = entry.name
    if entry.tool_calls != private["calls"]:
        if entry.tool_calls:
            message["tool_calls"] = _patched_calls(original.get("tool_calls"), entry.tool_calls)
        else:
            message.pop("tool_calls", None)  # the API refuses an empty list
    if entry.tool_call_id != private["tool_call_id"]:
        if entry.tool_call_id is None:
            message.pop("tool_call_id", None)
        else:
            message["tool_call_id"] = entry.tool_call_id
    return message


def entry_to_openai(entry: Entry, *, with_id: bool | None = None, with_label: bool | None = None) -> dict[str, Any]:
    """One entry as an OpenAI message (a new dict sharing nothing with ``entry``).

    ``with_id`` and ``with_label``: ``None`` writes the ``id`` / ``label`` key only if
    the source message had it (so API-bound output carries no key the API does not
    know); ``True`` always (``label`` only when it is set); ``False`` never.
    """
    private = entry.meta.get(KEY)
    if isinstance(private, Mapping) and "message" in private:
        message = _from_original(entry, private)
    else:
        message = _native(entry)
    if with_id or (with_id is None and "id" in message):
        message["id"] = entry.id
    elif with_id is False:
        message.pop("id", None)
    if with_label is False:
        message.pop("label", None)
    elif ("label" in message and message["label"] != entry.label) or (
        "label" not in message and with_label and entry.label is not None
    ):
        message["label"] = entry.label
    return message


def to_openai(
    transcript: Transcript, *, with_ids: bool | None = None, with_labels: bool | None = None
) -> list[dict[str, Any]]:
    """OpenAI chat messages for ``transcript``; exact inverse of :func:`from_openai`.

    Entries are rendered in order, one message each (see :func:`entry_to_openai`).
    """
    return [entry_to_openai(e, with_id=with_ids, with_label=with_labels) for e in transcript.entries]


register_converter("from_openai", from_openai)
register_converter("to_openai", to_openai)
