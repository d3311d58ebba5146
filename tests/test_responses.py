"""Responses API items as a message format, and the OpenAI Agents SDK filter with the real Runner."""

from __future__ import annotations

import asyncio
import copy
import json
from typing import Any

import pytest

from salience import Compactor
from salience.errors import TranscriptError
from salience.messages.dispatch import detect_format
from salience.messages.responses import check_responses, from_responses, to_responses
from salience.selector.render import RESTORE_TOOL, marker_ids

BUDGET = 600


class Flat:
    def score(self, transcript, query=None):
        return [0.5] * len(transcript.entries)


def words(text: str) -> int:
    return len(text.split())


def log(key: str) -> str:
    return "\n".join(f"record {key} line {i}: value {key}-{i * 13} ok" for i in range(40))


def items(n: int = 5) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {"type": "message", "role": "developer", "content": "You are a booking agent."},
        {"role": "user", "content": [{"type": "input_text", "text": "Check my trips."}]},
    ]
    for i in range(n):
        out.append({"type": "reasoning", "id": f"rs_{i}", "summary": [{"type": "summary_text", "text": f"step {i}"}],
                    "encrypted_content": "opaque"})
        out.append({"type": "function_call", "id": f"fc_{i}", "call_id": f"call_{i}", "name": "lookup",
                    "arguments": json.dumps({"key": f"K{i}"}), "status": "completed"})
        out.append({"type": "function_call_output", "call_id": f"call_{i}", "output": log(f"K{i}")})
        if i == 2:
            out.append({"type": "web_search_call", "id": "ws_1", "status": "completed",
                        "action": {"type": "search", "query": "HAT136 delays"}})
    out.append({"type": "message", "role": "assistant", "id": "msg_9", "status": "completed",
                "content": [{"type": "output_text", "text": "Here is what I found.", "annotations": []}]})
    out.append({"role": "user", "content": "Which one is delayed?"})
    return out


def compactor() -> Compactor:
    return Compactor(scorer=Flat(), budget=BUDGET, counter=words, pin_last=2, max_entry_tokens=None)


def test_round_trip_and_detection():
    given = items()
    snapshot = copy.deepcopy(given)
    t = from_responses(given)
    assert to_responses(t) == given and given == snapshot
    assert detect_format(given) == "responses"
    assert detect_format([{"role": "user", "content": "hi"}]) == "openai"
    assert check_responses(given) == []
    # a reasoning item and the call after it make one entry
    assert [e.role for e in t.entries[2:4]] == ["assistant", "tool"] and t.entries[2].tool_calls[0].id == "call_0"


@pytest.mark.parametrize("bad, problem", [
    ([{"type": "function_call_output", "call_id": "x", "output": "o"}], "has no call before it"),
    ([{"role": "user", "content": "a"}, {"type": "reasoning", "id": "r", "summary": []}], "must be followed"),
    ([{"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
      {"role": "user", "content": "a"}], "never answered"),
], ids=["orphan-output", "reasoning-last", "unanswered"])
def test_validity_problems(bad, problem):
    assert any(problem in p for p in check_responses(bad))


def test_compact_keeps_items_valid_and_unknown_items_untouched():
    given = items(8)
    result = compactor().compact(given)
    assert result.format == "responses" and result.tokens <= BUDGET
    out = result.messages
    assert check_responses(out) == []
    kept_unknown = [x for x in out if x.get("type") == "web_search_call"]
    assert kept_unknown in ([], [given[2 + 3 * 3]]) or kept_unknown[0] == next(
        x for x in given if x.get("type") == "web_search_call")
    # a reasoning item is only ever sent right before the call it came with
    for i, x in enumerate(out):
        if x.get("type") == "reasoning":
            original = given.index(x)
            assert out[i + 1] == given[original + 1]
    assert result.restore(list(result.archive)) == given


# -- the OpenAI Agents SDK ---------------------------------------------------------------------

agents = pytest.importorskip("agents")

from agents import Agent, ModelResponse, RunConfig, Runner, function_tool  # noqa: E402
from agents.models.interface import Model  # noqa: E402
from agents.usage import Usage  # noqa: E402
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText  # noqa: E402

from salience.adapters.openai_agents import input_filter  # noqa: E402


@function_tool
def lookup(key: str) -> str:
    """Look a record up."""
    return log(key)


class ScriptedModel(Model):
    """Calls ``lookup`` ``steps`` times, then (with ``restore``) the restore tool for a marker it
    sees, then answers. Records every request."""

    def __init__(self, steps: int, restore: bool = False) -> None:
        self.steps = steps
        self.restore = restore
        self.requests: list[tuple[str | None, list[Any], list[str]]] = []
        self.step = 0
        self.restored = False

    async def get_response(self, system_instructions, input, model_settings, tools, output_schema, handoffs,
                           tracing, *, previous_response_id=None, conversation_id=None, prompt=None, **kw):
        items = list(input) if not isinstance(input, str) else [{"role": "user", "content": input}]
        self.requests.append((system_instructions, copy.deepcopy(items), [t.name for t in tools]))
        ids = [x for it in items for x in marker_ids(json.dumps(it))]
        n = self.step
        if self.restore and ids and not self.restored:
            self.restored = True
            out: Any = ResponseFunctionToolCall(type="function_call", call_id=f"r{n}", name=RESTORE_TOOL,
                                                arguments=json.dumps({"ids": ids[:1]}))
        elif n < self.steps:
            self.step += 1
            out = ResponseFunctionToolCall(type="function_call", call_id=f"c{n}", name="lookup",
                                           arguments=json.dumps({"key": f"K{n}"}))
        else:
            out = ResponseOutputMessage(id="msg_done", type="message", role="assistant", status="completed",
                                        content=[ResponseOutputText(type="output_text", text="All done.",
                                                                    annotations=[])])
        return ModelResponse(output=[out], usage=Usage(), response_id=None)

    def stream_response(self, *args, **kwargs):  # pragma: no cover - the test runs without streaming
        raise NotImplementedError


def tokens(instructions: str | None, items: list[Any]) -> int:
    t = from_responses(items)
    return sum(words(e.text) for e in t.entries) + words(instructions or "")


@pytest.mark.parametrize("restore", [False, True], ids=["plain", "restore-tool"])
def test_runner_with_the_filter(restore):
    model = ScriptedModel(steps=7, restore=restore)
    run_filter = input_filter(compactor(), restore_tool=restore)
    tools = [lookup] + ([run_filter.tool] if restore else [])
    agent = Agent(name="booker", instructions="You are a booking agent.", model=model, tools=tools)
    result = asyncio.run(Runner.run(agent, "Check my trips.", max_turns=20,
                                    run_config=RunConfig(call_model_input_filter=run_filter,
                                                         tracing_disabled=True)))
    assert result.final_output == "All done."
    assert len(model.requests) >= 8
    for instructions, sent, _ in model.requests:
        assert instructions == "You are a booking agent."
        assert tokens(instructions, sent) <= BUDGET
        assert check_responses(sent) == []
    assert any("[salience:" in json.dumps(sent) for _, sent, _ in model.requests)  # it had to compact
    # The run's own history keeps every item whole.
    history = result.to_input_list()
    outputs = [x for x in history if x.get("type") == "function_call_output"]
    assert [x["output"] for x in outputs if not str(x["call_id"]).startswith("r")] == [log(f"K{i}") for i in
                                                                                        range(7)]
    assert not any("[salience:" in json.dumps(x) for x in history if not str(x.get("call_id", "")).startswith("r"))
    if restore:
        assert all(RESTORE_TOOL in names for _, _, names in model.requests)
        answer = next(x for x in outputs if str(x["call_id"]).startswith("r"))
        assert answer["output"] in [log(f"K{i}") for i in range(7)]  # the archived text, exactly


def _fc(call_id: str) -> dict[str, Any]:
    return {"type": "function_call", "call_id": call_id, "name": "f", "arguments": "{}"}


def _out(call_id: str) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": "x"}


@pytest.mark.parametrize("items, pending_ok", [
    ([{"role": "user", "content": "u"}, _fc("a"), _fc("b"), _out("b")], True),
    ([{"role": "user", "content": "u"}, _fc("a"), _out("a"), _fc("b")], True),
    ([{"role": "user", "content": "u"}, _fc("a"), _fc("z"), _out("z"), _fc("b"), _out("b")], False),
    ([{"role": "user", "content": "u"}, _fc("a"), {"role": "user", "content": "well?"}], False),
], ids=["group-partly-answered", "last-call", "earlier-group", "turn-after"])
def test_pending_calls_are_those_of_the_last_group(items, pending_ok):
    """check_responses(allow_pending=True) allows what the reader allows: the last call group's calls
    waiting, some of its outputs after them (found by the reader fuzz: the compactor's output for
    a partly answered parallel group was flagged)."""
    assert (check_responses(items, allow_pending=True) == []) is pending_ok
    assert check_responses(items) != []  # never without allow_pending
    if pending_ok:
        assert to_responses(from_responses(items)) == items
    else:
        with pytest.raises(TranscriptError, match="not answered before"):
            from_responses(items)
