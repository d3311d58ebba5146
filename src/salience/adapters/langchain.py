"""LangChain and LangGraph: a hook that compacts an agent's messages before each model call.

:meth:`salience.Compactor.compact` takes a list of LangChain messages and gives
LangChain messages back; the conversion lives in :mod:`salience.messages.langchain`
(:func:`from_langchain`, :func:`to_langchain`, :func:`entry_from_langchain`,
:func:`entry_to_langchain`, :data:`KEY`), re-exported here. This module needs
``langchain-core``; importing it without raises an ``ImportError`` whose message is
the install hint, ``pip install "salience[langchain]"``.

LangChain 1.x agents: :class:`SalienceMiddleware` (``create_agent(model, tools,
middleware=[SalienceMiddleware(compactor, budget=8_000, restore_tool=True)])``) compacts
each model request in ``wrap_model_call``, one session per thread, and can add the restore
tool and answer it; the graph state keeps the full history. It needs ``langchain>=1.0``
(``pip install "salience[langchain]"``), loaded on first use of the name.

LangGraph (the older way, still working): :func:`pre_model_hook` gives
``create_react_agent(pre_model_hook=...)`` a hook that compacts the state's messages
before each model call.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from salience.errors import ParameterError

try:
    from langchain_core.messages import BaseMessage, RemoveMessage
except ImportError as exc:  # pragma: no cover - exercised in a subprocess without langchain-core
    raise ImportError('salience.adapters.langchain needs langchain-core: pip install "salience[langchain]"') from exc

from salience.messages.langchain import KEY, entry_from_langchain, entry_to_langchain, from_langchain, to_langchain

if TYPE_CHECKING:
    from salience.adapters._middleware import SalienceMiddleware as SalienceMiddleware
    from salience.selector.compactor import Compaction, CompactionSession, Compactor

__all__ = [
    "KEY",
    "REMOVE_ALL_MESSAGES",
    "SalienceMiddleware",
    "entry_from_langchain",
    "entry_to_langchain",
    "from_langchain",
    "pre_model_hook",
    "to_langchain",
]

#: The id of a ``RemoveMessage`` that clears a LangGraph ``messages`` channel
#: (``langgraph.graph.message.REMOVE_ALL_MESSAGES``; LangGraph need not be installed).
REMOVE_ALL_MESSAGES = "__remove_all__"


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
        raise ParameterError(f"pre_model_hook: key must be 'llm_input_messages' or 'messages' (got {key!r})")
    if session and key == "messages":
        raise ParameterError("pre_model_hook: session=True needs the whole history on every call, and key='messages' "
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


def __getattr__(name: str) -> Any:
    """:class:`SalienceMiddleware`, loaded on first use (it needs ``langchain``, not only ``langchain-core``)."""
    if name == "SalienceMiddleware":
        try:
            from salience.adapters._middleware import SalienceMiddleware
        except ImportError as exc:
            raise ImportError('salience.adapters.langchain.SalienceMiddleware needs langchain>=1.0: '
                              'pip install "salience[langchain]"') from exc
        globals()[name] = SalienceMiddleware
        return SalienceMiddleware
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
