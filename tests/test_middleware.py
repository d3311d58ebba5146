"""SalienceMiddleware in a real LangChain 1.x ``create_agent`` loop, with a scripted chat model."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

pytest.importorskip("langchain.agents")

from langchain.agents import create_agent  # noqa: E402
from langchain_core.language_models import BaseChatModel  # noqa: E402
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage  # noqa: E402
from langchain_core.outputs import ChatGeneration, ChatResult  # noqa: E402
from langchain_core.tools import tool  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402

from salience import Compactor  # noqa: E402
from salience.adapters.langchain import SalienceMiddleware, pre_model_hook  # noqa: E402
from salience.messages.langchain import from_langchain  # noqa: E402
from salience.messages.validate import check_openai  # noqa: E402
from salience.selector.render import RESTORE_TOOL, marker_ids  # noqa: E402

BUDGET = 700


class Flat:
    def score(self, transcript, query=None):
        return [0.5] * len(transcript.entries)


def words(text: str) -> int:
    return len(text.split())


def log(kind: str, key: str) -> str:
    return "\n".join(f"{kind} {key} line {i}: value {key}-{i * 17} status ok" for i in range(40))


@tool
def get_reservation(reservation_id: str) -> str:
    """Look up a reservation."""
    return log("reservation", reservation_id)


@tool
def get_flight(flight: str) -> str:
    """Look up a flight's status."""
    return log("flight", flight)


class ScriptedModel(BaseChatModel):
    """Calls the tools in ``script`` one step at a time; once ``restore`` and a marker is in sight,
    calls the restore tool for it; then answers. Records every request it gets."""

    script: list[tuple[str, dict[str, Any]]]
    restore: bool = False
    requests: list[list[BaseMessage]] = []
    tools_seen: list[list[str]] = []
    state: dict[str, Any] = {}

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        self.tools_seen.append([getattr(t, "name", None) or t.get("name") for t in tools])
        return self

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        self.requests.append(list(messages))
        if isinstance(messages[-1], HumanMessage):  # a new run: the script starts over
            self.state.update(step=0, restored=False)
        ids = [x for m in messages for x in marker_ids(str(m.content))]
        step = self.state["step"]
        if self.restore and ids and not self.state["restored"]:
            self.state["restored"] = True
            msg = AIMessage("", tool_calls=[{"id": f"r{step}", "name": RESTORE_TOOL, "args": {"ids": ids[:1]}}])
        elif step < len(self.script):
            name, args = self.script[step]
            self.state["step"] = step + 1
            msg = AIMessage("", tool_calls=[{"id": f"c{step}", "name": name, "args": args}])
        else:
            msg = AIMessage("All done.")
        return ChatResult(generations=[ChatGeneration(message=msg)])


SCRIPT = [("get_reservation", {"reservation_id": f"R{i}"}) if i % 2 == 0 else ("get_flight", {"flight": f"HAT{i}"})
          for i in range(6)]


def compactor() -> Compactor:
    return Compactor(scorer=Flat(), budget=BUDGET, counter=words, pin_last=2, max_entry_tokens=None)


def tokens(messages: list[BaseMessage]) -> int:
    return Compactor(counter=words, budget=10**9).compact(messages, format="langchain").source_tokens


def check_request(messages: list[BaseMessage]) -> None:
    assert tokens(messages) <= BUDGET
    assert check_openai(from_langchain(messages).to_openai(), allow_pending=True) == []


@pytest.mark.parametrize("restore", [False, True], ids=["plain", "restore-tool"])
def test_create_agent_loop(restore):
    model = ScriptedModel(script=SCRIPT, restore=restore, requests=[], tools_seen=[], state={})
    middleware = SalienceMiddleware(compactor(), restore_tool=restore)
    agent = create_agent(model, [get_reservation, get_flight], system_prompt="You are a booking agent.",
                         middleware=[middleware], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t1"}}
    state = agent.invoke({"messages": [HumanMessage("Check my trips.")]}, config)
    assert len(model.requests) >= len(SCRIPT) + 1
    for request in model.requests:
        check_request(request)
    assert any("[salience:" in str(m.content) for r in model.requests for m in r)  # it had to compact
    # The state holds every message, whole.
    messages = state["messages"]
    results = [m for m in messages if isinstance(m, ToolMessage) and m.name != RESTORE_TOOL]
    assert [m.content for m in results] == [log("reservation" if n == "get_reservation" else "flight",
                                                next(iter(a.values()))) for n, a in SCRIPT]
    assert not any("[salience:" in str(m.content) for m in messages if m.name != RESTORE_TOOL)
    assert messages[-1].content == "All done."
    assert tokens(messages) > BUDGET
    if restore:
        assert all(RESTORE_TOOL in seen for seen in model.tools_seen)
        answers = [m for m in messages if isinstance(m, ToolMessage) and m.name == RESTORE_TOOL]
        assert len(answers) == 1
        asked = next(m for m in messages if isinstance(m, AIMessage) and m.tool_calls
                     and m.tool_calls[0]["name"] == RESTORE_TOOL).tool_calls[0]["args"]["ids"][0]
        original = next(m for m in messages if m.id == asked)
        assert answers[0].content == original.content  # exactly the archived text
    else:
        assert all(RESTORE_TOOL not in seen for seen in model.tools_seen)
    # One session for the thread: later requests keep the earlier compacted prefix.
    assert len(middleware._sessions) == 1


def test_async_loop_and_threads():
    model = ScriptedModel(script=SCRIPT[:4], requests=[], tools_seen=[], state={})
    middleware = SalienceMiddleware(compactor())
    agent = create_agent(model, [get_reservation, get_flight], middleware=[middleware],
                         checkpointer=InMemorySaver())

    async def run() -> list[Any]:
        return [await agent.ainvoke({"messages": [HumanMessage(f"Trip {t}.")]},
                                    {"configurable": {"thread_id": t}}) for t in ("a", "b")]

    states = asyncio.run(run())
    for request in model.requests:
        check_request(request)
    assert len(middleware._sessions) == 2
    assert all(len(s["messages"]) == 1 + 2 * 4 + 1 for s in states)


def test_bad_parameters():
    with pytest.raises(ValueError, match="compactor must be a salience Compactor"):
        SalienceMiddleware(object())
    with pytest.raises(ValueError, match="max_sessions must be an int >= 1"):
        SalienceMiddleware(compactor(), max_sessions=0)


def test_pre_model_hook_still_works():
    hook = pre_model_hook(compactor(), session=True)
    messages = [HumanMessage("hi", id="h1")]
    for i in range(6):
        messages += [AIMessage("", id=f"a{i}", tool_calls=[{"id": f"c{i}", "name": "get_flight",
                                                           "args": {"flight": f"F{i}"}}]),
                     ToolMessage(log("flight", f"F{i}"), tool_call_id=f"c{i}", id=f"t{i}")]
    out = hook({"messages": messages})["llm_input_messages"]
    check_request(out)
    assert json.dumps([m.content for m in messages])  # the input untouched, still plain
