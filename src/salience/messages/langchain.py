"""LangChain messages <-> :class:`~salience.transcript.Transcript`.

:meth:`salience.Compactor.compact` takes a list of LangChain messages
(``langchain_core.messages``: ``SystemMessage``, ``HumanMessage``, ``AIMessage`` with
``tool_calls``, ``ToolMessage`` with ``tool_call_id``, ``ChatMessage``,
``FunctionMessage``) and gives LangChain messages back; this module does the
conversion (:mod:`salience.messages.dispatch` calls it; the LangGraph hook is in
:mod:`salience.adapters.langchain`, which re-exports these names). It needs
``langchain-core``; importing it without raises an ``ImportError`` whose message is
the install hint, ``pip install "salience[langchain]"``.

Reading (:func:`from_langchain`, :func:`entry_from_langchain`), one message per entry:

* role from the class (``ChatMessage`` from its ``role``: ``system``, ``developer``,
  ``user``, ``human``, ``assistant``, ``ai``, ``tool``); a ``RemoveMessage`` is a
  state update, not a message, and is refused;
* ``content``: a string as is; a list of blocks reads as its text (bare strings and
  ``{"type": "text"}`` blocks, joined by newlines); other blocks (images, reasoning)
  stay in the message but are not counted;
* the entry id is the message's ``id`` when it has one, else ``m<index>``;
* ``AIMessage.tool_calls`` become :class:`~salience.transcript.ToolCall` s with the
  arguments as JSON (a call without an id gets ``<entry id>.call<j>``, which no
  result can answer); ``ToolMessage.tool_call_id`` pairs a result with its call;
* the message itself is deep-copied into the entry (``meta["_langchain"]``), so
  ``id``, ``additional_kwargs``, ``response_metadata``, ``artifact``, usage metadata
  and every other field come back exactly.

Writing (:func:`to_langchain`, :func:`entry_to_langchain`): an entry read from a
LangChain message comes back as a copy of that message, with only what changed
replaced (a trimmed or stubbed text: the text blocks give way to one block with the
new text, other blocks stay). Entries from elsewhere are built natively.

>>> from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
>>> messages = [
...     HumanMessage("Find reservation ZFA04Y", id="u1"),
...     AIMessage("", id="a1", tool_calls=[{"id": "c1", "name": "get_reservation", "args": {"id": "ZFA04Y"}}]),
...     ToolMessage("reservation ZFA04Y flight HAT136 " * 40, tool_call_id="c1", id="t1"),
...     HumanMessage("Thanks, cancel it", id="u2"),
... ]
>>> t = from_langchain(messages)
>>> [(e.id, e.role) for e in t.entries]
[('u1', 'user'), ('a1', 'assistant'), ('t1', 'tool'), ('u2', 'user')]
>>> to_langchain(t) == messages
True
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from functools import partial
from typing import Any

try:
    from langchain_core.messages import (
        AIMessage,
        BaseMessage,
        ChatMessage,
        FunctionMessage,
        HumanMessage,
        RemoveMessage,
        SystemMessage,
        ToolMessage,
    )
except ImportError as exc:  # pragma: no cover - exercised in a subprocess without langchain-core
    raise ImportError('salience.messages.langchain needs langchain-core: pip install "salience[langchain]"') from exc

from salience.errors import TranscriptError, describe
from salience.limits import Limits, check_count, check_value
from salience.messages._common import LANGCHAIN_KEY
from salience.messages.openai import message_where
from salience.messages.validate import checked_transcript
from salience.transcript import Entry, Query, ToolCall, Transcript

__all__ = [
    "KEY",
    "entry_from_langchain",
    "entry_to_langchain",
    "from_langchain",
    "to_langchain",
]

#: ``Entry.meta`` key under which the original message is kept for rendering.
KEY = LANGCHAIN_KEY

_CHAT_ROLES = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "human": "user",
    "assistant": "assistant",
    "ai": "assistant",
    "tool": "tool",
    "function": "tool",
}


_short = partial(describe, none_typed=False)


def _role(message: BaseMessage, where: str) -> str:
    if isinstance(message, RemoveMessage):
        raise TranscriptError(f"{where}: a RemoveMessage is a state update, not a message; apply it to the "
                              "history first (LangGraph's add_messages does)")
    if isinstance(message, SystemMessage):
        return "system"
    if isinstance(message, HumanMessage):
        return "user"
    if isinstance(message, AIMessage):
        return "assistant"
    if isinstance(message, (ToolMessage, FunctionMessage)):
        return "tool"
    if isinstance(message, ChatMessage):
        role = _CHAT_ROLES.get(str(message.role).lower())
        if role is None:
            raise TranscriptError(f"{where}: field 'role' of a ChatMessage must be one of "
                                  f"{', '.join(repr(r) for r in _CHAT_ROLES)} (got {_short(message.role)})")
        return role
    raise TranscriptError(f"{where}: a {type(message).__name__} has no salience role (expected a SystemMessage, "
                          "HumanMessage, AIMessage, ToolMessage, ChatMessage or FunctionMessage)")


def _block_text(block: Any) -> str | None:
    """The text of one content block, or None for a non-text block."""
    if isinstance(block, str):
        return block
    if isinstance(block, Mapping) and block.get("type") == "text" and isinstance(block.get("text"), str):
        return str(block["text"])
    return None


def _text(content: Any, where: str) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(t for t in (_block_text(b) for b in content) if t is not None)
    raise TranscriptError(f"{where}: field 'content' must be a str or a list of content blocks (got {_short(content)})")


def _arguments(args: Any) -> str:
    if isinstance(args, str):
        return args
    return json.dumps(args, ensure_ascii=False, default=str)


def entry_from_langchain(
    message: Any,
    index: int,
    *,
    transcript_id: str = "transcript",
    default_id: str | None = None,
    limits: Limits | None = None,
) -> Entry:
    """One LangChain message as an :class:`Entry`; ``message`` is deep-copied, never modified.

    ``index`` is the message's position (for error messages and the positional id
    ``m<index>`` of a message without ``id``, unless ``default_id`` is given). Its
    fields must be within ``limits`` (:mod:`salience.limits`), else a
    :class:`~salience.errors.LimitError`.
    """
    where = message_where(transcript_id, index)
    if not isinstance(message, BaseMessage):
        raise TranscriptError(f"{where}: expected a LangChain message (got {_short(message)})")
    size = check_value(dict(message), where=message_where(transcript_id, index, message.id), limits=limits)
    raw_id = message.id
    entry_id = raw_id if isinstance(raw_id, str) and raw_id else (
        default_id if default_id is not None else f"m{index}"
    )
    where = message_where(transcript_id, index, entry_id)
    role = _role(message, where)
    text = _text(message.content, where)
    name = message.name if isinstance(message.name, str) else None
    calls: tuple[ToolCall, ...] = ()
    if isinstance(message, AIMessage) and message.tool_calls:
        calls = tuple(
            ToolCall(id=str(tc.get("id") or f"{entry_id}.call{j}"), name=str(tc.get("name") or ""),
                     arguments=_arguments(tc.get("args", {})))
            for j, tc in enumerate(message.tool_calls)
        )
    tool_call_id = None
    if isinstance(message, ToolMessage):
        tool_call_id = message.tool_call_id if isinstance(message.tool_call_id, str) and message.tool_call_id else None
    private = {"message": message.model_copy(deep=True), "text": text, "calls": calls, "name": name,
               "tool_call_id": tool_call_id, "role": role, "size": size}
    try:
        return Entry(id=entry_id, role=role, content=text, name=name, tool_calls=calls, tool_call_id=tool_call_id,
                     meta={KEY: private})
    except TranscriptError as exc:
        raise TranscriptError(f"{where}: {exc}") from None


def from_langchain(
    messages: Sequence[Any],
    *,
    id: str = "transcript",
    domain: str | None = None,
    queries: Iterable[Query] = (),
    limits: Limits | None = None,
) -> Transcript:
    """A :class:`Transcript` from LangChain messages; ``messages`` is not modified.

    Refused as :func:`salience.messages.openai.from_openai` refuses: a tool call not
    answered before the next message that is not one of its results (the last
    ``AIMessage``'s calls may wait), and input past :mod:`salience.limits`.
    """
    if isinstance(messages, (str, bytes, Mapping, BaseMessage)) or not isinstance(messages, Sequence):
        raise TranscriptError(
            f"transcript {id!r}: messages must be a list of LangChain messages (got a {type(messages).__name__})"
        )
    check_count(len(messages), where=f"transcript {id!r}", limits=limits)
    entries = [entry_from_langchain(m, i, transcript_id=id, limits=limits) for i, m in enumerate(messages)]
    return checked_transcript(entries, id=id, size=sum(e.meta[KEY]["size"] for e in entries), limits=limits,
                              domain=domain, queries=tuple(queries))


# -- writing --------------------------------------------------------------------------


def _patched_content(original: Any, text: str) -> Any:
    """``original`` content with its text replaced by ``text``; non-text blocks kept."""
    if isinstance(original, list):
        blocks: list[Any] = []
        placed = False
        for block in original:
            if _block_text(block) is None:
                blocks.append(block)
            elif not placed:
                placed = True
                if text:
                    blocks.append({"type": "text", "text": text})
        if not placed and text:
            blocks.insert(0, {"type": "text", "text": text})
        if blocks:
            return blocks
    return text


def _call_dict(call: ToolCall) -> dict[str, Any]:
    return {"name": call.name, "args": call.arguments_object(), "id": call.id, "type": "tool_call"}


def _native(entry: Entry) -> BaseMessage:
    if entry.role == "system":
        return SystemMessage(entry.content, id=entry.id, name=entry.name)
    if entry.role == "user":
        return HumanMessage(entry.content, id=entry.id, name=entry.name)
    if entry.role == "assistant":
        return AIMessage(entry.content, id=entry.id, name=entry.name,
                         tool_calls=[_call_dict(c) for c in entry.tool_calls])
    return ToolMessage(entry.content, id=entry.id, name=entry.name, tool_call_id=entry.tool_call_id or "")


def entry_to_langchain(entry: Entry) -> BaseMessage:
    """One entry as a LangChain message (a new object sharing nothing with ``entry``)."""
    private = entry.meta.get(KEY)
    if not (isinstance(private, Mapping) and isinstance(private.get("message"), BaseMessage)):
        return _native(entry)
    original: BaseMessage = private["message"]
    if entry.role != private["role"]:
        return _native(entry)
    changes: dict[str, Any] = {}
    if entry.content != private["text"]:
        changes["content"] = _patched_content(original.content, entry.content)
    if entry.name != private["name"]:
        changes["name"] = entry.name
    if entry.tool_calls != private["calls"] and isinstance(original, AIMessage):
        changes["tool_calls"] = [_call_dict(c) for c in entry.tool_calls]
    if entry.tool_call_id != private["tool_call_id"] and isinstance(original, ToolMessage):
        changes["tool_call_id"] = entry.tool_call_id or ""
    return original.model_copy(update=changes, deep=True)


def to_langchain(transcript: Transcript) -> list[BaseMessage]:
    """LangChain messages for ``transcript``; exact inverse of :func:`from_langchain`."""
    return [entry_to_langchain(e) for e in transcript.entries]
