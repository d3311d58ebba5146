"""``SalienceMiddleware``: LangChain 1.x ``create_agent`` middleware (see :mod:`salience.adapters.langchain`)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from langchain.agents.middleware import AgentMiddleware, ModelRequest
from langchain_core.messages import BaseMessage, SystemMessage, ToolMessage

from salience.errors import ParameterError, SalienceError, describe
from salience.messages.langchain import from_langchain
from salience.selector.render import RESTORE_TOOL
from salience.selector.restore import RestoreTool
from salience.selector.session import CACHE_MIN, RESTART_GAIN

if TYPE_CHECKING:
    from salience.selector.compactor import Compaction, CompactionSession, Compactor

__all__ = ["SalienceMiddleware"]


class MiddlewareError(ParameterError):
    """A :class:`SalienceMiddleware` made with bad parameters."""


def _thread_id() -> Any:
    """The LangGraph thread id of the run in progress (None outside a graph, or without a checkpointer)."""
    try:
        from langgraph.config import get_config

        configurable = get_config().get("configurable") or {}
    except (ImportError, RuntimeError):
        return None
    return configurable.get("thread_id")


class SalienceMiddleware(AgentMiddleware):  # type: ignore[misc]  # langchain's generics are not typed for mypy
    """Compacts each model request of a ``create_agent`` agent to a token budget.

    ``create_agent(model, tools, middleware=[SalienceMiddleware(compactor, budget=8_000)])``:
    in ``wrap_model_call`` (and ``awrap_model_call``) the request's system message and
    messages are compacted together, and the model sees the result; the graph state is
    not touched, so it keeps every message whole (and checkpoints stay whole).

    Parameters:
        compactor: the :class:`~salience.Compactor`.
        budget: tokens for the system message and messages (default: the compactor's);
            the tool definitions are not counted.
        query: a string, or a function of the request's messages returning one, for a
            query-aware scorer.
        session: keep one :class:`~salience.selector.compactor.CompactionSession` per
            thread (the LangGraph ``thread_id``; without one, per first message), so the
            provider's cached prefix stays stable. ``False``: compact each request afresh.
        restore_tool: add the restore tool (:mod:`salience.selector.restore`) to the agent's
            tools and answer its calls from the state's full history, exactly.
        trigger, min_removal, restart_gain, cache_min: the sessions' (see :meth:`Compactor.session`).
        max_sessions: how many threads' sessions are kept (the least recently used go).

    After each request: ``last``, the last :class:`Compaction`.
    """

    def __init__(
        self,
        compactor: Compactor,
        *,
        budget: int | None = None,
        query: str | Callable[[Sequence[BaseMessage]], str | None] | None = None,
        session: bool = True,
        restore_tool: bool = False,
        trigger: float = 1.0,
        min_removal: float | int = 0.1,
        restart_gain: float | None = RESTART_GAIN,
        cache_min: int = CACHE_MIN,
        max_sessions: int = 256,
    ) -> None:
        super().__init__()
        if not callable(getattr(compactor, "compact", None)):
            raise MiddlewareError(f"SalienceMiddleware: compactor must be a salience Compactor "
                                  f"(got {describe(compactor)})")
        if isinstance(max_sessions, bool) or not isinstance(max_sessions, int) or max_sessions < 1:
            raise MiddlewareError(f"SalienceMiddleware: max_sessions must be an int >= 1 "
                                  f"(got {describe(max_sessions)})")
        self.compactor = compactor
        self.budget = budget
        self.query = query
        self.session = session
        self.restore_tool = restore_tool
        self.trigger = trigger
        self.min_removal = min_removal
        self.restart_gain = restart_gain
        self.cache_min = cache_min
        self.max_sessions = max_sessions
        if session and callable(getattr(compactor, "session", None)):  # a bad setting fails here, not at a request
            compactor.session(budget=budget, trigger=trigger, min_removal=min_removal, restart_gain=restart_gain,
                              cache_min=cache_min)
        self.last: Compaction | None = None
        self._restore = RestoreTool()
        self._sessions: OrderedDict[Any, CompactionSession] = OrderedDict()
        self._lock = threading.Lock()
        self.tools = [self._restore.langchain(lambda: self.last)] if restore_tool else []

    @property
    def name(self) -> str:
        return "SalienceMiddleware"

    # -- the model request ------------------------------------------------------------------------
    def _session_for(self, messages: Sequence[BaseMessage]) -> CompactionSession:
        key = _thread_id()
        if key is None:
            first = messages[0]
            key = ("first", first.id or (type(first).__name__, str(first.content)[:200]))
        with self._lock:
            current = self._sessions.get(key)
            if current is None:
                current = self.compactor.session(budget=self.budget, trigger=self.trigger,
                                                 min_removal=self.min_removal, restart_gain=self.restart_gain,
                                                 cache_min=self.cache_min)
                self._sessions[key] = current
                while len(self._sessions) > self.max_sessions:
                    self._sessions.popitem(last=False)
            else:
                self._sessions.move_to_end(key)
        return current

    def compact_request(self, request: ModelRequest) -> ModelRequest:
        """``request`` with its system message and messages compacted (what the model is sent)."""
        system = request.system_message
        messages: list[BaseMessage] = ([system] if system is not None else []) + list(request.messages)
        if not messages:
            return request
        q = self.query(request.messages) if callable(self.query) else self.query
        if self.session:
            result = self._session_for(messages).compact(messages, query=q, format="langchain")
        else:
            result = self.compactor.compact(messages, budget=self.budget, query=q, format="langchain")
        self.last = result
        out = list(result.messages)
        new_system = None
        if system is not None and out and isinstance(out[0], SystemMessage):
            new_system = out.pop(0)
        return request.override(system_message=new_system, messages=out)

    def wrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], Any]) -> Any:
        return handler(self.compact_request(request))

    async def awrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[Any]]) -> Any:
        return await handler(self.compact_request(request))

    # -- the restore tool -------------------------------------------------------------------------
    def answer_restore(self, state: Any, arguments: Any) -> str:
        """The restore tool's answer from the graph state's full history (then from the last
        compaction, for entries the state does not hold, such as a system prompt)."""
        messages = state.get("messages", []) if isinstance(state, dict) else getattr(state, "messages", [])
        entries: dict[str, Any] = dict(self.last.archive) if self.last is not None else {}
        try:  # messages with ids of their own (add_messages gives every state message one)
            history = from_langchain([m for m in messages if isinstance(m, BaseMessage) and m.id])
        except SalienceError:
            history = None
        if history is not None:
            entries.update({e.id: e for e in history.entries})
        return self._restore.answer(entries, arguments)

    def _restore_message(self, request: Any) -> ToolMessage | None:
        call = request.tool_call
        if not self.restore_tool or call.get("name") != RESTORE_TOOL:
            return None
        text = self.answer_restore(request.state, call.get("args") or {})
        return ToolMessage(content=text, tool_call_id=call.get("id") or "", name=RESTORE_TOOL)

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        answer = self._restore_message(request)
        return answer if answer is not None else handler(request)

    async def awrap_tool_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        answer = self._restore_message(request)
        return answer if answer is not None else await handler(request)
