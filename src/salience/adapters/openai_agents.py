"""The OpenAI Agents SDK: a ``call_model_input_filter`` that compacts each model call's input.

>>> from salience import Compactor
>>> from salience.adapters.openai_agents import input_filter
>>> run_filter = input_filter(Compactor(), budget=8_000)

then ``Runner.run(agent, task, run_config=RunConfig(call_model_input_filter=run_filter))``.
Before every model call the SDK hands the filter the instructions and the input items
(Responses API items, :mod:`salience.messages.responses`); the filter compacts them
together to the budget and gives back the items the model is sent. The run's own history
(``result.new_items``, sessions) is not touched.

``restore_tool``: ``filter.tool`` is then an Agents SDK ``FunctionTool`` for the restore
tool (:mod:`salience.selector.restore`): add it to the agent's ``tools`` and the model can
ask for archived entries back, answered from the filter's last compaction.

Needs ``openai-agents`` for the tool only (``pip install "salience[openai-agents]"``); the
filter itself works on the SDK's plain data.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from salience.errors import ParameterError, describe
from salience.messages.responses import from_responses, to_responses
from salience.selector.restore import RestoreTool
from salience.transcript import Transcript

if TYPE_CHECKING:
    from salience.selector.compactor import Compaction, CompactionSession, Compactor

__all__ = ["InputFilter", "input_filter"]

#: The id of the entry made from the instructions (put first, pinned as a system entry).
INSTRUCTIONS_ID = "instructions"


class InputFilter:
    """What :func:`input_filter` returns: call it with the SDK's ``CallModelData``.

    Attributes: ``last`` (the last :class:`Compaction`), ``tool`` (the restore tool as a
    ``FunctionTool``, with ``restore_tool=True``), ``sessions`` (by conversation).
    """

    def __init__(self, compactor: Compactor, *, budget: int | None, query: Any, session: bool,
                 restore_tool: bool, max_sessions: int) -> None:
        self.compactor = compactor
        self.budget = budget
        self.query = query
        self.session = session
        self.max_sessions = max_sessions
        self.last: Compaction | None = None
        self.sessions: OrderedDict[Any, CompactionSession] = OrderedDict()
        self._lock = threading.Lock()
        self._restore = RestoreTool()
        self.tool = self._function_tool() if restore_tool else None

    def _function_tool(self) -> Any:
        try:
            from agents import FunctionTool
        except ImportError as exc:
            raise ImportError('the restore tool for the OpenAI Agents SDK needs openai-agents: '
                              'pip install "salience[openai-agents]"') from exc

        async def invoke(ctx: Any, arguments: str) -> str:
            return self._restore.answer(self.last, arguments)

        return FunctionTool(name=self._restore.name, description=self._restore.description,
                            params_json_schema=self._restore.parameters, on_invoke_tool=invoke,
                            strict_json_schema=False)

    def _session_for(self, agent: Any, items: Sequence[Any]) -> CompactionSession:
        first = json.dumps(items[0], sort_keys=True, default=str)[:400] if items else ""
        key = (getattr(agent, "name", None), first)
        with self._lock:
            current = self.sessions.get(key)
            if current is None:
                current = self.compactor.session(budget=self.budget)
                self.sessions[key] = current
                while len(self.sessions) > self.max_sessions:
                    self.sessions.popitem(last=False)
            else:
                self.sessions.move_to_end(key)
        return current

    def compact(self, items: Sequence[Any], instructions: str | None, *, agent: Any = None) -> tuple[list[Any],
                                                                                                   str | None]:
        """(items, instructions) compacted together to the budget."""
        plain = [_plain(x) for x in items]
        source = from_responses(plain)
        if instructions:
            from salience.transcript import Entry

            system = Entry(id=INSTRUCTIONS_ID, role="system", content=instructions)
            source = Transcript(id=source.id, entries=(system, *source.entries))
        q = self.query(plain) if callable(self.query) else self.query
        if self.session:
            result = self._session_for(agent, plain).compact(source, query=q)
        else:
            result = self.compactor.compact(source, budget=self.budget, query=q)
        self.last = result
        entries = result.transcript.entries
        new_instructions = instructions
        if instructions and entries and entries[0].id == INSTRUCTIONS_ID:
            new_instructions = entries[0].content
            entries = entries[1:]
        return to_responses(Transcript(id=source.id, entries=entries)), new_instructions

    def __call__(self, data: Any) -> Any:
        model_data = data.model_data
        items, instructions = self.compact(list(model_data.input), model_data.instructions,
                                           agent=getattr(data, "agent", None))
        return replace(model_data, input=items, instructions=instructions)


def _plain(item: Any) -> Any:
    """An input item as plain data (the SDK's items are dicts; a pydantic one is dumped)."""
    dump = getattr(item, "model_dump", None)
    return dump(exclude_unset=True) if callable(dump) else item


def input_filter(
    compactor: Compactor,
    *,
    budget: int | None = None,
    query: str | Callable[[list[Any]], str | None] | None = None,
    session: bool = True,
    restore_tool: bool = False,
    max_sessions: int = 256,
) -> InputFilter:
    """A ``RunConfig(call_model_input_filter=...)`` filter that compacts each call's input (module doc).

    ``budget``: tokens for the instructions and input items (default: the compactor's).
    ``query``: a string, or a function of the items returning one. ``session``: one
    prefix-stable :class:`~salience.selector.compactor.CompactionSession` per conversation
    (told apart by the agent's name and the first item). ``restore_tool``: build
    ``filter.tool`` (module doc).
    """
    if not callable(getattr(compactor, "compact", None)):
        raise ParameterError(f"input_filter: compactor must be a salience Compactor (got {describe(compactor)})")
    if isinstance(max_sessions, bool) or not isinstance(max_sessions, int) or max_sessions < 1:
        raise ParameterError(f"input_filter: max_sessions must be an int >= 1 (got {describe(max_sessions)})")
    return InputFilter(compactor, budget=budget, query=query, session=session, restore_tool=restore_tool,
                       max_sessions=max_sessions)
