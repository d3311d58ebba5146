"""Anthropic Messages <-> :class:`~salience.transcript.Transcript`.

Mapping, one message to one or more entries:

* the system prompt, given separately (a string or a list of text blocks),
  becomes a leading ``system`` entry with id ``"system"``;
* a ``user`` message: each ``tool_result`` block becomes its own ``tool`` entry (so
  each result can be kept, trimmed or stubbed on its own; ``name`` is the name of
  the ``tool_use`` it answers); each run of other blocks (text, images, documents)
  becomes one ``user`` entry; string content is one ``user`` entry;
* an ``assistant`` message becomes one entry: text blocks joined by newlines as
  ``content``, ``tool_use`` blocks as ``tool_calls`` (``input`` as JSON), thinking
  and other blocks kept for rendering.

Entry ids: the message's ``id`` key if it has one, else ``m<index>``; the second and
later entries of one message get ``.<k>`` appended (``m3``, ``m3.1``, ``m3.2``).

Round trip: each message is deep-copied when read, so
``from_anthropic(m, system=s).to_anthropic() == m`` and ``anthropic_system() == s``
exactly, whatever the caller does to ``m`` later; the output shares nothing with the
transcript.

>>> msgs = [{"role": "user", "content": "Weather in Oslo?"},
...         {"role": "assistant", "content": [
...             {"type": "text", "text": "Checking."},
...             {"type": "tool_use", "id": "tu1", "name": "weather", "input": {"city": "Oslo"}}]},
...         {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu1", "content": "-3C"},
...                                      {"type": "text", "text": "Thanks"}]}]
>>> t = from_anthropic(msgs, system="Be brief.")
>>> [(e.id, e.role, e.content) for e in t.entries]  # doctest: +NORMALIZE_WHITESPACE
[('system', 'system', 'Be brief.'), ('m0', 'user', 'Weather in Oslo?'), ('m1', 'assistant', 'Checking.'),
 ('m2', 'tool', '-3C'), ('m2.1', 'user', 'Thanks')]
>>> to_anthropic(t) == msgs and system_of(t) == "Be brief."
True

Rendering changed or foreign entries (:func:`to_anthropic`):

* an entry whose ``content`` (or calls) changed is rendered from its new values:
  its text blocks are replaced by one text block with the new content, its other
  blocks (images, thinking, ``cache_control``, a result's ``is_error``) are kept;
  a message whose entries are all present and unchanged comes back as given;
* a message some of whose entries were removed is rebuilt from those that remain;
  a rebuilt message left with no content is left out;
* entries that did not come from Anthropic messages (OpenAI messages, loaders) are
  rendered natively: consecutive entries of the same role share one message, so
  user and assistant messages alternate; a ``tool`` result becomes a
  ``tool_result`` block at the front of the user message right after the assistant
  message that made the call; a ``tool`` entry that answers no call becomes a user
  text block; an assistant entry with no text and no calls, and a user entry with
  no text and no image, are left out (there is nothing to send);
* a call id that an earlier call used already (OpenAI logs reuse answered ids)
  gets a suffix, ``call_x`` -> ``call_x_2``, and characters other than
  ``[a-zA-Z0-9_-]`` become ``_``, in the call and in its result: Anthropic wants
  every ``tool_use`` id unique and made of those characters;
* call ``arguments`` that are not a JSON object become ``{"_raw": arguments}``
  (Anthropic's ``input`` must be an object); empty ``arguments`` become ``{}``;
* OpenAI ``image_url`` parts become ``image`` blocks (``data:`` URLs as base64);
  other non-text OpenAI parts (audio, files) have no Anthropic form and are left out;
* ``system`` entries are not messages: :func:`system_of` joins them (all of them,
  wherever they stand, separated by blank lines) into the system prompt.

Documented behaviour for odd input: a message whose ``role`` is not ``user`` or
``assistant`` (a ``system`` message inside the list included), ``content`` that is
neither a string nor a list of blocks (a mapping with a ``type``), a ``tool_result``
whose ``tool_use_id`` names no ``tool_use`` of an earlier assistant message, one
answered twice, a ``tool_use`` id used twice, or an ``input`` that is not JSON: a
:class:`~salience.errors.TranscriptError` naming the transcript, the message index
and id, and the field (``content[2].tool_use_id``). So is a ``tool_use`` whose
``tool_result`` does not come at the start of the next user message, when more
turns follow (the error names the message and the ``tool_use`` id: Anthropic's API
refuses such a history, and salience neither sends it on nor guesses a repair); the
``tool_use`` blocks of the last assistant message may wait for their results (the
agent is running the tools): they load, and :meth:`Transcript.unanswered_calls`
lists them. Input nested deeper, larger or longer than :mod:`salience.limits`
allows is a :class:`~salience.errors.LimitError`.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from salience.errors import TranscriptError
from salience.limits import Limits, check_count, check_size, check_value
from salience.messages._common import ANTHROPIC_KEY, OPENAI_KEY, copy_json
from salience.messages._common import fail as _fail
from salience.messages._common import short as _short
from salience.messages.validate import checked_transcript
from salience.transcript import Entry, Query, ToolCall, Transcript, register_converter

__all__ = ["KEY", "Reader", "from_anthropic", "render_appended", "source_messages", "system_of", "to_anthropic"]

#: ``Entry.meta`` key under which the original message is kept for rendering.
KEY = ANTHROPIC_KEY

_THINKING = ("thinking", "redacted_thinking")
_BAD_ID_CHARS = re.compile(r"[^a-zA-Z0-9_-]")


def _blocks_text(blocks: Any, where: str, field: str) -> str:
    """The text of ``blocks`` (a str, None, or a list of blocks): text blocks joined."""
    if isinstance(blocks, str):
        return blocks
    if blocks is None:
        return ""
    if not isinstance(blocks, list):
        raise _fail(where, field, "a str or a list of content blocks", blocks)
    texts = []
    for j, block in enumerate(blocks):
        if not isinstance(block, Mapping) or not isinstance(block.get("type"), str):
            raise _fail(where, f"{field}[{j}]", "a content block (a mapping with a 'type')", block)
        if block["type"] == "text":
            if not isinstance(block.get("text"), str):
                raise _fail(where, f"{field}[{j}].text", "a str", block.get("text"))
            texts.append(block["text"])
    return "\n".join(texts)


def _arguments(value: Any, where: str, field: str) -> str:
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise _fail(where, field, f"JSON-serialisable ({exc})", value) from None


def from_anthropic(
    messages: Sequence[Mapping[str, Any]],
    *,
    system: str | Sequence[Mapping[str, Any]] | None = None,
    id: str = "transcript",
    domain: str | None = None,
    queries: Iterable[Query] = (),
    limits: Limits | None = None,
    memo: Any = None,
) -> Transcript:
    """A :class:`Transcript` from Anthropic messages; nothing given is modified or kept by reference.

    ``memo`` (a :class:`~salience.messages.dispatch.IdCache`, the compactor's message cache)
    keeps each message's entries: a message read before, the same object at the same index
    and still equal to the copy its entries keep, gives them again (the checks that span
    messages, a result answering an earlier call, run as for a fresh read), so that on a
    growing conversation a call reads its new messages alone.

    Refused with a :class:`~salience.errors.TranscriptError` naming the message and
    the ``tool_use`` id: a ``tool_result`` that answers no ``tool_use`` of an earlier
    message, and a ``tool_use`` whose ``tool_result`` is not at the start of the next
    user message (only the last assistant message's calls may still wait: see
    :func:`salience.messages.validate.require_answered`). More than
    ``limits.max_entries`` messages, or messages (and ``system``) larger or deeper
    than the limits (:mod:`salience.limits`): a :class:`~salience.errors.LimitError`.

    >>> from_anthropic([{"role": "user", "content": [
    ...     {"type": "tool_result", "tool_use_id": "x", "content": "1"}]}], id="t")
    Traceback (most recent call last):
    ...
    salience.errors.TranscriptError: transcript 't', message 0 (id 'm0'): field 'content[0].tool_use_id' must be \
the id of a tool_use block of an earlier assistant message (got 'x')
    """
    tid = id
    if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Sequence):
        raise TranscriptError(
            f"transcript {tid!r}: messages must be a list of message mappings (got a {type(messages).__name__})"
        )
    check_count(len(messages), where=f"transcript {tid!r}", limits=limits)
    reader = Reader(tid, limits=limits)
    size = 0 if system is None else check_value(system, where=f"transcript {tid!r}, system", limits=limits)
    entries: list[Entry] = [] if system is None else [reader.system(system)]
    for i, message in enumerate(messages):
        parts = reader.recall(memo, message, i) if memo is not None else None
        if parts is None:
            parts = reader.read(message, i)
            if memo is not None:
                memo.put(message, (i, _MEMO, tuple(parts), parts[0].meta[KEY]["head"]["message"], reader.size))
        entries.extend(parts)
        size += reader.size
        check_size(size, where=f"transcript {tid!r}", limits=limits, unit="bytes of JSON (about)")
    return checked_transcript(entries, id=tid, size=size, limits=limits, domain=domain, queries=tuple(queries))


def source_messages(entries: Sequence[Entry]) -> list[dict[str, Any]]:
    """The copies of the messages ``entries`` were read from, one per message, in order."""
    out: list[dict[str, Any]] = []
    last = None
    for entry in entries:
        private = _private(entry)
        if private is not None and private["head"] is not last:
            last = private["head"]
            out.append(last["message"])
    return out


#: What :func:`from_anthropic`'s ``memo`` files its entries under (beside other formats' in one cache).
_MEMO = "anthropic"


class Reader:
    """Reads Anthropic messages one at a time, as :func:`from_anthropic` does: it keeps the
    ``tool_use`` ids seen so far (and their names) and those already answered, so that the
    messages of a growing conversation can be read as they come."""

    def __init__(self, tid: str = "transcript", *, limits: Limits | None = None) -> None:
        self.tid = tid
        self.limits = limits  # None: salience.limits.current() at each read
        self.size = 0  # of the last message read (salience.limits.check_value)
        self.tool_names: dict[str, str] = {}
        self.answered: set[str] = set()

    @classmethod
    def after(cls, transcript: Transcript) -> Reader:
        """A reader in the state reading ``transcript``'s messages left it in."""
        reader = cls(transcript.id)
        for entry in transcript.entries:
            reader.tool_names.update((c.id, c.name) for c in entry.tool_calls)
            if entry.tool_call_id is not None:
                reader.answered.add(entry.tool_call_id)
        return reader

    def recall(self, memo: Any, message: Any, i: int) -> list[Entry] | None:
        """The entries ``memo`` holds for ``message`` read as the ``i``-th message, if it is the same
        object, still equal to the copy they keep, and they pass the checks :meth:`read` makes
        against the messages before it (a result answers an earlier call not yet answered, a
        call's id is new); the reader's state then moves as reading it would have moved it. Else None."""
        hit = memo.get(message)
        if hit is None or hit[0] != i or hit[1] != _MEMO or message != hit[3]:
            return None
        parts: tuple[Entry, ...] = hit[2]
        results = [e.tool_call_id for e in parts if e.tool_call_id is not None]
        calls = [c for e in parts for c in e.tool_calls]
        if (any(r not in self.tool_names or r in self.answered for r in results)
                or any(c.id in self.tool_names for c in calls)):
            return None  # read it again: the read says what is wrong
        self.answered.update(results)
        self.tool_names.update((c.id, c.name) for c in calls)
        self.size = hit[4]
        return list(parts)

    def system(self, system: Any) -> Entry:
        """The entry of the system prompt ``system`` (a str or a list of text blocks)."""
        tid = self.tid
        if not isinstance(system, (str, list)):
            raise _fail(f"transcript {tid!r}", "system", "a str, a list of text blocks or None", system)
        text = _blocks_text(system, f"transcript {tid!r}", "system")
        private = {"system": copy.deepcopy(system), "text": text}
        return Entry(id="system", role="system", content=text, meta={KEY: private})

    def read(self, message: Any, i: int) -> list[Entry]:
        """The entries of ``message``, the ``i``-th message (one per part: see the module doc)."""
        tid, tool_names, answered = self.tid, self.tool_names, self.answered
        entries: list[Entry] = []
        if not isinstance(message, Mapping):
            raise TranscriptError(
                f"transcript {tid!r}, message {i}: expected a mapping with 'role' and 'content' (got {_short(message)})"
            )
        base_id = message.get("id", f"m{i}")
        where = f"transcript {tid!r}, message {i}"
        self.size = check_value(message, where=where, limits=self.limits)
        if not isinstance(base_id, str) or not base_id:
            raise _fail(where, "id", "a non-empty str", base_id)
        where += f" (id {base_id!r})"
        role = message.get("role")
        if role not in ("user", "assistant"):
            raise _fail(where, "role", "'user' or 'assistant' (the system prompt is given separately)", role)
        if "content" not in message:
            raise TranscriptError(f"{where}: field 'content' is missing")
        original = copy_json(dict(message))
        raw_content = original["content"]
        if not isinstance(raw_content, (str, list)):
            raise _fail(where, "content", "a str or a list of content blocks", raw_content)
        content: list[Any] = raw_content if isinstance(raw_content, list) else []
        head: dict[str, Any] = {"index": i, "message": original}
        parts: list[tuple[str, list[int]]] = []  # (kind, block indices)
        if isinstance(raw_content, str):
            parts.append(("string", []))
        else:
            _blocks_text(content, where, "content")  # validates every block
            if role == "assistant":
                parts.append(("assistant", list(range(len(content)))))
            else:
                for j, block in enumerate(content):
                    if block["type"] == "tool_result":
                        parts.append(("tool", [j]))
                    elif parts and parts[-1][0] == "user":
                        parts[-1][1].append(j)
                    else:
                        parts.append(("user", [j]))
                if not parts:
                    parts.append(("user", []))
        head["n"] = len(parts)
        for k, (kind, indices) in enumerate(parts):
            eid = base_id if k == 0 else f"{base_id}.{k}"
            blocks = None if kind == "string" else [content[j] for j in indices]
            private: dict[str, Any] = {"head": head, "part": k, "blocks": blocks}
            calls: list[ToolCall] = []
            name: str | None = None
            use_id: str | None = None
            if kind == "string":
                text = str(raw_content)
                entry_role = role
            elif kind == "tool":
                j = indices[0]
                block = content[j]
                use_id = block.get("tool_use_id")
                if not isinstance(use_id, str) or not use_id:
                    raise _fail(where, f"content[{j}].tool_use_id", "a non-empty str", use_id)
                if use_id not in tool_names:
                    raise _fail(where, f"content[{j}].tool_use_id",
                                "the id of a tool_use block of an earlier assistant message", use_id)
                if use_id in answered:
                    raise _fail(where, f"content[{j}].tool_use_id",
                                "the id of a tool_use that no earlier tool_result answers", use_id)
                answered.add(use_id)
                text = _blocks_text(block.get("content"), where, f"content[{j}].content")
                name = tool_names[use_id]
                entry_role = "tool"
            elif kind == "assistant":
                text = _blocks_text(blocks, where, "content")
                for j in indices:
                    block = content[j]
                    if block["type"] != "tool_use":
                        continue
                    cid, tname = block.get("id"), block.get("name")
                    if not isinstance(cid, str) or not cid:
                        raise _fail(where, f"content[{j}].id", "a non-empty str", cid)
                    if not isinstance(tname, str):
                        raise _fail(where, f"content[{j}].name", "a str", tname)
                    if cid in tool_names:
                        raise _fail(where, f"content[{j}].id", "unique (an earlier tool_use has it)", cid)
                    tool_names[cid] = tname
                    calls.append(ToolCall(id=cid, name=tname,
                                          arguments=_arguments(block.get("input", {}), where, f"content[{j}].input")))
                entry_role = "assistant"
            else:
                text = _blocks_text(blocks, where, "content")
                entry_role = "user"
            private.update(text=text, role=entry_role, calls=tuple(calls), tool_call_id=use_id)
            entries.append(Entry(id=eid, role=entry_role, content=text, name=name, tool_calls=tuple(calls),
                                 tool_call_id=use_id, meta={KEY: private}))
        return entries


# -- rendering ---------------------------------------------------------------


def _private(entry: Entry) -> Mapping[str, Any] | None:
    private = entry.meta.get(KEY)
    return private if isinstance(private, Mapping) and "head" in private else None


def _unchanged(entry: Entry, private: Mapping[str, Any]) -> bool:
    return (
        entry.role == private["role"]
        and entry.content == private["text"]
        and entry.tool_calls == private["calls"]
        and entry.tool_call_id == private["tool_call_id"]
    )


def _tool_use(call: ToolCall, use_id: str | None = None) -> dict[str, Any]:
    return {"type": "tool_use", "id": use_id or call.id, "name": call.name, "input": call.arguments_object()}


def _image_block(part: Mapping[str, Any]) -> dict[str, Any] | None:
    image = part.get("image_url")
    url = image.get("url") if isinstance(image, Mapping) else image
    if not isinstance(url, str):
        return None
    if url.startswith("data:") and ";base64," in url:
        media_type, data = url[5:].split(";base64,", 1)
        return {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}}
    return {"type": "image", "source": {"type": "url", "url": url}}


def _with_text(blocks: Sequence[Any], text: str) -> list[dict[str, Any]]:
    """``blocks`` with their text blocks replaced by one block holding ``text``."""
    out: list[dict[str, Any]] = []
    placed = False
    for block in blocks:
        if block.get("type") == "text":
            if not placed and text:
                out.append({**copy.deepcopy(block), "text": text})
            placed = True
        else:
            out.append(copy.deepcopy(block))
    if not placed and text:
        at = 0
        while at < len(out) and out[at].get("type") in _THINKING:
            at += 1
        out.insert(at, {"type": "text", "text": text})
    return out


def _changed_blocks(entry: Entry, private: Mapping[str, Any]) -> list[dict[str, Any]]:
    blocks = private["blocks"]
    if blocks is None:  # string content
        return [{"type": "text", "text": entry.content}] if entry.content else []
    if private["role"] == "tool":
        block = copy.deepcopy(blocks[0])
        if entry.tool_call_id is not None:
            block["tool_use_id"] = entry.tool_call_id
        if entry.content != private["text"]:
            original = blocks[0].get("content")
            if isinstance(original, list):
                block["content"] = _with_text(original, entry.content)
            elif entry.content:
                block["content"] = entry.content
            else:
                block.pop("content", None)
        return [block]
    if private["role"] == "assistant":
        kept = {b.get("id"): b for b in blocks if b.get("type") == "tool_use"}
        out = _with_text([b for b in blocks if b.get("type") != "tool_use"], entry.content)
        for call in entry.tool_calls:
            original = kept.get(call.id)
            if original is not None and call in private["calls"]:
                out.append(copy.deepcopy(original))
            else:
                out.append(_tool_use(call))
        return out
    return _with_text(blocks, entry.content)


_NO_RENAME: Mapping[str, str] = {}


def _native_blocks(entry: Entry, rename: Mapping[str, str] = _NO_RENAME) -> list[dict[str, Any]]:
    if entry.role == "tool":
        if entry.tool_call_id is None:
            return [{"type": "text", "text": entry.content}] if entry.content else []
        use_id = rename.get(entry.tool_call_id, entry.tool_call_id)
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": use_id}
        if entry.content:
            block["content"] = entry.content
        return [block]
    out: list[dict[str, Any]] = [{"type": "text", "text": entry.content}] if entry.content else []
    if entry.role == "user":
        source = (entry.meta.get(OPENAI_KEY) or {}).get("message") or {}
        parts = source.get("content") if isinstance(source, Mapping) else None
        for part in parts if isinstance(parts, list) else ():
            if isinstance(part, Mapping) and part.get("type") == "image_url":
                image = _image_block(part)
                if image is not None:
                    out.append(image)
    out.extend(_tool_use(call, rename.get(call.id, call.id)) for call in entry.tool_calls)
    return out


def _renames(transcript: Transcript) -> dict[str, dict[str, str]]:
    """New ids for calls whose id Anthropic would refuse, per entry id.

    OpenAI logs may reuse a call id once it is answered, and other providers' ids
    hold characters such as ``.`` or ``:``; Anthropic wants every ``tool_use`` id
    unique and made of ``[a-zA-Z0-9_-]``, so the second ``call_x`` becomes
    ``call_x_2``, ``fn.get:0`` becomes ``fn_get_0`` (and the result answering the
    call follows).
    """
    taken = {c.id for e in transcript.entries for c in e.tool_calls}
    used: set[str] = set()
    current: dict[str, str] = {}
    out: dict[str, dict[str, str]] = {}
    for entry in transcript.entries:
        rename: dict[str, str] = {}
        if entry.tool_call_id is not None and current.get(entry.tool_call_id, entry.tool_call_id) != entry.tool_call_id:
            rename[entry.tool_call_id] = current[entry.tool_call_id]
        for call in entry.tool_calls:
            new = call.id
            if _private(entry) is None:
                base = _BAD_ID_CHARS.sub("_", call.id)
                new = base
                k = 2
                while new in used or (new != call.id and new in taken):
                    new = f"{base}_{k}"
                    k += 1
                if new != call.id:
                    rename[call.id] = new
            used.add(new)
            current[call.id] = new
        if rename:
            out[entry.id] = rename
    return out


def _blocks(entry: Entry, rename: Mapping[str, str] = _NO_RENAME) -> list[dict[str, Any]]:
    """The content blocks of one entry, as a new list sharing nothing with it."""
    private = _private(entry)
    if private is None:
        return _native_blocks(entry, rename)
    if _unchanged(entry, private):
        if private["blocks"] is None:
            return [{"type": "text", "text": entry.content}] if entry.content else []
        return copy_json(private["blocks"])
    return _changed_blocks(entry, private)


@dataclass
class _Message:
    role: str
    head: Mapping[str, Any] | None  # the source message, for entries read from Anthropic
    entries: list[Entry] = field(default_factory=list)
    foreign: bool = False  # holds an entry from elsewhere


def _same_head(a: Mapping[str, Any] | None, b: Mapping[str, Any]) -> bool:
    """Whether two entries came from the same source message (also after a pickle round trip)."""
    return a is b or (a is not None and a["index"] == b["index"] and a["message"] == b["message"])


def _is_result(entry: Entry) -> bool:
    return entry.role == "tool" and entry.tool_call_id is not None


def _group(entries: Sequence[Entry], renames: Mapping[str, Mapping[str, str]]) -> list[_Message]:
    messages: list[_Message] = []
    owner: dict[str, int] = {}  # call id -> index of the message holding the call
    for entry in entries:
        if entry.role == "system":
            continue
        private = _private(entry)
        if private is not None:
            head = private["head"]
            role = head["message"]["role"]
            if messages and _same_head(messages[-1].head, head):
                messages[-1].entries.append(entry)
            else:
                messages.append(_Message(role, head, [entry]))
        elif not _native_blocks(entry, renames.get(entry.id, _NO_RENAME)):
            continue  # nothing to send
        elif _is_result(entry):
            at = owner.get(entry.tool_call_id or "", -1)
            if at == len(messages) - 1:
                messages.append(_Message("user", None, [entry]))
            elif at == len(messages) - 2 and messages[-1].role == "user":
                target = messages[-1]
                pos = 0
                while pos < len(target.entries) and _is_result(target.entries[pos]):
                    pos += 1
                target.entries.insert(pos, entry)
                target.foreign = target.foreign or target.head is not None
            elif messages and messages[-1].head is None and messages[-1].role == "user":
                messages[-1].entries.append(entry)
            else:
                messages.append(_Message("user", None, [entry]))
        else:
            role = "assistant" if entry.role == "assistant" else "user"
            if messages and messages[-1].head is None and messages[-1].role == role:
                messages[-1].entries.append(entry)
            else:
                messages.append(_Message(role, None, [entry]))
        if entry.tool_calls:
            for call in entry.tool_calls:
                owner[call.id] = len(messages) - 1
    return messages


def _render(message: _Message, renames: Mapping[str, Mapping[str, str]]) -> dict[str, Any] | None:
    entries = message.entries
    head = message.head
    if head is None:
        if len(entries) == 1 and entries[0].role in ("user", "assistant") and not entries[0].tool_calls:
            blocks = _native_blocks(entries[0])
            if len(blocks) == 1 and blocks[0]["type"] == "text":
                return {"role": message.role, "content": entries[0].content}
        return {
            "role": message.role,
            "content": [b for e in entries for b in _native_blocks(e, renames.get(e.id, _NO_RENAME))],
        }
    privates = [_private(e) for e in entries]
    whole = (
        not message.foreign
        and [p["part"] if p is not None else -1 for p in privates] == list(range(head["n"]))
        and all(p is not None and _unchanged(e, p) for e, p in zip(entries, privates))
    )
    out: dict[str, Any] = copy_json(dict(head["message"]))  # (a JSON-like copy made on reading)
    if whole:
        return out
    first = privates[0]
    if len(entries) == 1 and first is not None and first["blocks"] is None:
        content: Any = entries[0].content
    else:
        content = [b for e in entries for b in _blocks(e, renames.get(e.id, _NO_RENAME))]
    if not content:
        return None
    out["content"] = content
    return out


def render_appended(entries: Sequence[Entry]) -> list[dict[str, Any]] | None:
    """The messages :func:`to_anthropic` renders for ``entries`` at the end of a transcript
    whose earlier entries came from earlier messages (None if an entry was not read from
    Anthropic messages: then only the whole transcript says how it renders)."""
    if any(entry.role == "system" or _private(entry) is None for entry in entries):
        return None
    return _render_all(_group(entries, {}), {})


def _render_all(messages: Sequence[_Message], renames: Mapping[str, Mapping[str, str]]) -> list[dict[str, Any]]:
    return [r for r in (_render(message, renames) for message in messages) if r is not None]


def to_anthropic(transcript: Transcript) -> list[dict[str, Any]]:
    """Anthropic messages for ``transcript``; exact inverse of :func:`from_anthropic`.

    System entries are left out (see :func:`system_of`); the rules for entries that
    changed, were removed or came from elsewhere are in the module docstring.

    >>> from salience.transcript import Transcript
    >>> t = Transcript.from_openai([
    ...     {"role": "user", "content": "2+2?"},
    ...     {"role": "assistant", "content": None,
    ...      "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "calc", "arguments": "{}"}}]},
    ...     {"role": "tool", "tool_call_id": "c1", "content": "4"},
    ...     {"role": "user", "content": "ok"}])
    >>> to_anthropic(t)  # doctest: +NORMALIZE_WHITESPACE
    [{'role': 'user', 'content': '2+2?'},
     {'role': 'assistant', 'content': [{'type': 'tool_use', 'id': 'c1', 'name': 'calc', 'input': {}}]},
     {'role': 'user', 'content': [{'type': 'tool_result', 'tool_use_id': 'c1', 'content': '4'},
                                  {'type': 'text', 'text': 'ok'}]}]
    """
    renames = _renames(transcript)
    return _render_all(_group(transcript.entries, renames), renames)


def system_of(transcript: Transcript) -> str | list[dict[str, Any]] | None:
    """The system prompt as Anthropic takes it, or None when there is no system entry.

    The form given to :func:`from_anthropic` if that entry is the only one and
    unchanged (a changed list of blocks keeps its first block's keys, such as
    ``cache_control``); else the system entries' texts joined by blank lines.
    """
    systems = [e for e in transcript.entries if e.role == "system"]
    if not systems:
        return None
    if len(systems) == 1:
        entry = systems[0]
        private = entry.meta.get(KEY)
        if isinstance(private, Mapping) and "system" in private:
            if entry.content == private["text"]:
                return copy.deepcopy(private["system"])
            if isinstance(private["system"], list):
                return _with_text(private["system"], entry.content)
        return entry.content
    return "\n\n".join(e.content for e in systems if e.content)


register_converter("from_anthropic", from_anthropic)
register_converter("to_anthropic", to_anthropic)
register_converter("anthropic_system", system_of)
