"""LangChain messages <-> :class:`~salience.transcript.Transcript`, and a LangGraph hook.

:meth:`salience.Compactor.compact` takes a list of LangChain messages
(``langchain_core.messages``: ``SystemMessage``, ``HumanMessage``, ``AIMessage`` with
``tool_calls``, ``ToolMessage`` with ``tool_call_id``, ``ChatMessage``,
``FunctionMessage``) and gives LangChain messages back; this module does the
conversion. It needs ``langchain-core``; importing it without raises an
``ImportError`` whose message is the install hint, ``pip install "salience[langchain]"``.

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

LangGraph: :func:`pre_model_hook` gives ``create_react_agent(pre_model_hook=...)`` a
hook that compacts the state's messages before each model call.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

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
    raise ImportError('salience.adapters.langchain needs langchain-core: pip install "salience[langchain]"') from exc

from salience.errors import TranscriptError, describe
from salience.formats.openai import message_where
from salience.transcript import Entry, Query, ToolCall, Transcript

if TYPE_CHECKING:
    from salience.selector.compactor import Compaction, CompactionSession, Compactor

__all__ = [
    "KEY",
    "REMOVE_ALL_MESSAGES",
    "entry_from_langchain",
    "entry_to_langchain",
    "from_langchain",
    "pre_model_hook",
    "to_langchain",
]

#: ``Entry.meta`` key under which the original message is kept for rendering.
KEY = "_langchain"
#: The id of a ``RemoveMessage`` that clears a LangGraph ``messages`` channel
#: (``langgraph.graph.message.REMOVE_ALL_MESSAGES``; LangGraph need not be installed).
REMOVE_ALL_MESSAGES = "__remove_all__"

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
    message: Any, index: int, *, transcript_id: str = "transcript", default_id: str | None = None
) -> Entry:
    """One LangChain message as an :class:`Entry`; ``message`` is deep-copied, never modified.

    ``index`` is the message's position (for error messages and the positional id
    ``m<index>`` of a message without ``id``, unless ``default_id`` is given).
    """
    where = message_where(transcript_id, index)
    if not isinstance(message, BaseMessage):
        raise TranscriptError(f"{where}: expected a LangChain message (got {_short(message)})")
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
               "tool_call_id": tool_call_id, "role": role}
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
) -> Transcript:
    """A :class:`Transcript` from LangChain messages; ``messages`` is not modified."""
    if isinstance(messages, (str, bytes, Mapping, BaseMessage)) or not isinstance(messages, Sequence):
        raise TranscriptError(
            f"transcript {id!r}: messages must be a list of LangChain messages (got a {type(messages).__name__})"
        )
    entries = [entry_from_langchain(m, i, transcript_id=id) for i, m in enumerate(messages)]
    return Transcript(id=id, entries=tuple(entries), domain=domain, queries=tuple(queries))


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


# -- LangGraph --------------------------------------------------------------------------


def _state_messages(state: Any) -> Sequence[BaseMessage]:
    if isinstance(state, Mapping):
        if "messages" not in state:
            raise KeyError(f"pre_model_hook: the graph state has no 'messages' key (got keys {sorted(state)[:8]})")
        return state["messages"]  # type: ignore[no-any-return]
    messages = getattr(state, "messages", None)
    if messages is None:
        raise AttributeError(f"pre_model_hook: the graph state has no 'messages' (got a {type(state).__name__})")
    return messages  # type: ignore[no-any-return]


def pre_model_hook(
    compactor: Compactor,
    *,
    budget: int | None = None,
    key: str = "llm_input_messages",
    query: str | Callable[[Sequence[BaseMessage]], str | None] | None = None,
    session: bool = False,
) -> Callable[[Any], dict[str, list[BaseMessage]]]:
    """A LangGraph ``pre_model_hook``: ``state -> {key: compacted messages}``.

    ``create_react_agent(model, tools, pre_model_hook=pre_model_hook(compactor, budget=8000))``
    compacts the state's ``messages`` before every model call. With the default ``key``,
    ``"llm_input_messages"``, the model sees the compacted list and the state keeps the
    whole history (so nothing is lost and :meth:`Compaction.restore` stays possible).
    With ``key="messages"`` the update replaces the state's history: it starts with
    ``RemoveMessage(id=REMOVE_ALL_MESSAGES)``, as LangGraph's ``add_messages`` expects.

    ``query``: a string, or a function of the messages returning one (say, the last
    human message), for a query-aware scorer. ``session``: keep one
    :class:`~salience.selector.compactor.CompactionSession` per conversation (told
    apart by the id of its first message) so that the prompt-cache prefix stays stable;
    it needs the default ``key`` (a session reads the whole history on every call).
    The returned function has an attribute ``last``: the last :class:`Compaction`.

    >>> from salience import Compactor
    >>> from langchain_core.messages import HumanMessage
    >>> hook = pre_model_hook(Compactor(budget=1000))
    >>> hook({"messages": [HumanMessage("hi", id="h1")]})["llm_input_messages"][0].content
    'hi'
    """
    if key not in ("llm_input_messages", "messages"):
        raise ValueError(f"pre_model_hook: key must be 'llm_input_messages' or 'messages' (got {key!r})")
    if session and key == "messages":
        raise ValueError("pre_model_hook: session=True needs the whole history on every call, and key='messages' "
                         "replaces the state's history with the compacted one; use the default key, "
                         "'llm_input_messages'")
    sessions: dict[Any, CompactionSession] = {}

    def hook(state: Any) -> dict[str, list[BaseMessage]]:
        messages = list(_state_messages(state))
        q = query(messages) if callable(query) else query
        result: Compaction
        if session and messages:
            first = messages[0]
            conversation = first.id or (type(first).__name__, str(first.content)[:200])
            current = sessions.get(conversation)
            if current is None:
                current = compactor.session(budget=budget)
                sessions[conversation] = current
                while len(sessions) > 64:
                    sessions.pop(next(iter(sessions)))
            result = current.compact(messages, query=q, format="langchain")
        else:
            result = compactor.compact(messages, budget=budget, query=q, format="langchain")
        hook.last = result  # type: ignore[attr-defined]
        out = list(result.messages)
        if key == "messages":
            out = [RemoveMessage(id=REMOVE_ALL_MESSAGES), *out]
        return {key: out}

    hook.last = None  # type: ignore[attr-defined]
    return hook
