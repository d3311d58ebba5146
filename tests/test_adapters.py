"""Drop-in adapters: LangChain messages in the Compactor, the LangGraph hook, agent-loop contexts."""

from __future__ import annotations

import copy
import importlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from salience.adapters import (
    AnthropicContext,
    ContextStats,
    OpenAIContext,
    StepStats,
    compact_anthropic,
    compact_openai,
)
from salience.errors import FormatError, TranscriptError
from salience.selector.compactor import Compactor, detect_format
from salience.transcript import Transcript

lc = pytest.importorskip("langchain_core.messages", reason="langchain-core is not installed (pip install -e '.[dev]')")
from salience.adapters.langchain import (  # noqa: E402
    REMOVE_ALL_MESSAGES,
    entry_to_langchain,
    from_langchain,
    pre_model_hook,
    to_langchain,
)
from test_compactor import COUNTER, assert_openai_valid, lines  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


class PositionScorer:
    """Later entries matter more; tool results least."""

    def score(self, t: Transcript, query: str | None = None) -> np.ndarray:
        n = len(t.entries)
        role = np.array([0.5 if e.role == "tool" else 0.9 for e in t.entries])
        return np.clip(role * (np.arange(n) + 1) / max(n, 1), 0, 1)


def make(**kw: Any) -> Compactor:
    kw.setdefault("scorer", PositionScorer())
    kw.setdefault("counter", COUNTER)
    return Compactor(**kw)


def lc_messages() -> list[Any]:
    return [
        lc.SystemMessage("You are an airline agent. Be brief.", id="s0"),
        lc.HumanMessage("Change reservation ZFA04Y for mia_li_3668.", id="u1",
                        additional_kwargs={"source": "web"}),
        lc.AIMessage("", id="a2", tool_calls=[
            {"id": "c1", "name": "get_reservation_details", "args": {"reservation_id": "ZFA04Y"}},
            {"id": "c2", "name": "get_user_details", "args": {"user_id": "mia_li_3668"}},
        ], response_metadata={"model_name": "gpt-x", "finish_reason": "tool_calls"},
            usage_metadata={"input_tokens": 50, "output_tokens": 12, "total_tokens": 62}),
        lc.ToolMessage("reservation ZFA04Y flight HAT136\n" + lines("res", 30), tool_call_id="c1", id="t3",
                       name="get_reservation_details", artifact={"rows": 30}),
        lc.ToolMessage("user mia_li_3668 card credit_card_4421486\n" + lines("usr", 30), tool_call_id="c2",
                       id="t4"),
        lc.AIMessage("Flight HAT136. What should change?", id="a5"),
        lc.HumanMessage([{"type": "text", "text": "Search JFK to SEA on May 20.\n" + lines("img", 10)},
                         {"type": "image_url", "image_url": {"url": "https://example.invalid/x.png"}}], id="u6"),
        lc.AIMessage("Searching.", id="a7", tool_calls=[
            {"id": "c3", "name": "search_direct_flight", "args": {"origin": "JFK", "destination": "SEA"}}]),
        lc.ToolMessage("flights JFK to SEA\n" + lines("flt", 40) + "\nHAT039 at 11:00", tool_call_id="c3", id="t8"),
        lc.AIMessage("HAT039 at 11:00. Book it?", id="a9"),
        lc.HumanMessage("Yes, book HAT039.", id="u10"),
    ]


def assert_langchain_valid(messages: list[Any]) -> None:
    """Every tool message answers a call of the AI message right before its block; every call is answered."""
    assert_openai_valid(from_langchain(messages).to_openai())


# -- LangChain conversion ------------------------------------------------------------------


def test_round_trip_is_exact() -> None:
    messages = lc_messages()
    before = copy.deepcopy(messages)
    t = from_langchain(messages)
    assert [e.role for e in t.entries][:5] == ["system", "user", "assistant", "tool", "tool"]
    assert t.entries[2].tool_calls[0].arguments == '{"reservation_id": "ZFA04Y"}'
    assert t.entries[3].tool_call_id == "c1" and t.entries[3].name == "get_reservation_details"
    assert t.parents()[3:5] == [2, 2]
    back = to_langchain(t)
    assert back == messages
    assert back[2].response_metadata == {"model_name": "gpt-x", "finish_reason": "tool_calls"}
    assert back[2].usage_metadata["total_tokens"] == 62 and back[3].artifact == {"rows": 30}
    assert back[1].additional_kwargs == {"source": "web"} and back[1].id == "u1"
    assert all(a is not b for a, b in zip(back, messages))
    assert messages == before


def test_positional_ids_and_chat_messages() -> None:
    t = from_langchain([lc.HumanMessage("hi"), lc.ChatMessage("ok", role="assistant"),
                        lc.ChatMessage("rules", role="developer")])
    assert [(e.id, e.role) for e in t.entries] == [("m0", "user"), ("m1", "assistant"), ("m2", "system")]


@pytest.mark.parametrize(
    ("message", "match"),
    [
        (lc.ChatMessage("x", role="robot"), r"field 'role' of a ChatMessage must be one of"),
        (lc.RemoveMessage(id="x"), "a RemoveMessage is a state update"),
        (lc.ToolMessage("42", tool_call_id="nowhere"), "field 'tool_call_id' must name a call"),
    ],
    ids=["unknown-role", "remove-message", "unanswerable-result"],
)
def test_bad_messages_are_refused(message: Any, match: str) -> None:
    with pytest.raises(TranscriptError, match=match):
        from_langchain([lc.HumanMessage("hi"), message])


@pytest.mark.parametrize(
    ("arguments", "args"),
    [('{"a": 1}', {"a": 1}), ("", {}), ("not json", {"_raw": "not json"}), ("[1, 2]", {"_raw": "[1, 2]"})],
    ids=["object", "empty", "text", "list"],
)
def test_calls_from_elsewhere_get_object_args_as_anthropic_input_does(arguments: str, args: dict) -> None:
    from salience.messages.anthropic import to_anthropic
    from salience.transcript import Entry, ToolCall

    t = Transcript(id="t", entries=(Entry(id="a", role="assistant", tool_calls=(ToolCall("c1", "f", arguments),)),))
    (message,) = to_langchain(t)
    assert message.tool_calls[0]["args"] == args == to_anthropic(t)[0]["content"][0]["input"]


def test_changed_text_replaces_text_blocks_only() -> None:
    t = from_langchain(lc_messages())
    e = t.entries[6].replace(content="[cut]")
    out = entry_to_langchain(e)
    assert out.content == [{"type": "text", "text": "[cut]"},
                           {"type": "image_url", "image_url": {"url": "https://example.invalid/x.png"}}]
    assert out.id == "u6"


def test_detect_format_and_mixing() -> None:
    assert detect_format(lc_messages()) == "langchain"
    with pytest.raises(FormatError, match="messages mix formats: message 0 is a LangChain message, but message 1"):
        make().compact([lc.HumanMessage("hi"), {"role": "user", "content": "x"}])
    with pytest.raises(ValueError, match="'langchain' needs LangChain messages"):
        make().compact([{"role": "user", "content": "x"}], format="langchain")
    with pytest.raises(ValueError, match="system= is only for Anthropic messages; LangChain"):
        make().compact(lc_messages(), system="x")


# -- compaction of LangChain messages ---------------------------------------------------------


@pytest.mark.parametrize("budget", [160, 220, 300], ids=["tight", "medium", "loose"])
def test_compact_langchain_messages(budget: int) -> None:
    messages = lc_messages()
    before = copy.deepcopy(messages)
    result = make(pin_last=2).compact(messages, budget=budget)
    assert result.format == "langchain"
    assert all(isinstance(m, lc.BaseMessage) for m in result.messages)
    assert result.tokens <= budget
    assert result.trimmed or result.stubbed or result.dropped
    assert_langchain_valid(result.messages)
    kept = {m.id: m for m in result.messages}
    for i in result.kept:
        assert kept[i] == next(m for m in messages if m.id == i)  # untouched messages come back exactly
    assert messages == before
    assert result.restore(list(result.archive)) == messages


def test_langchain_session_keeps_the_prefix() -> None:
    messages = lc_messages()
    # a budget and headroom where the new messages fit beside the prefix (320 to 340 tokens here, with
    # 0.3 of the room above the system prompt freed; the default 0.1 leaves too little for them)
    session = make(pin_last=2).session(budget=330, min_removal=0.3, cache_min=0)  # (a prefix kept at any size)
    first = session.compact(messages[:8])
    second = session.compact(messages)
    assert session.prefix_reuse is not None and session.prefix_reuse.share == 1.0
    assert second.messages[: len(first.messages)] == first.messages  # the whole first request is reused


# -- LangGraph hook ----------------------------------------------------------------------------


def test_pre_model_hook_gives_llm_input_messages() -> None:
    messages = lc_messages()
    hook = pre_model_hook(make(pin_last=2), budget=200)
    update = hook({"messages": messages})
    assert list(update) == ["llm_input_messages"]
    assert hook.last.tokens <= 200 and hook.last.format == "langchain"
    assert update["llm_input_messages"] == hook.last.messages
    assert_langchain_valid(update["llm_input_messages"])


def test_pre_model_hook_can_replace_the_history() -> None:
    hook = pre_model_hook(make(pin_last=2), budget=200, key="messages")
    update = hook({"messages": lc_messages()})["messages"]
    assert isinstance(update[0], lc.RemoveMessage) and update[0].id == REMOVE_ALL_MESSAGES == "__remove_all__"
    assert_langchain_valid(update[1:])


def test_pre_model_hook_sessions_and_queries() -> None:
    seen: list[str | None] = []

    class Spy(PositionScorer):
        def score(self, t: Transcript, query: str | None = None) -> np.ndarray:
            seen.append(query)
            return super().score(t, query)

    def last_human(messages: list[Any]) -> str:
        return next(m.text for m in reversed(messages) if isinstance(m, lc.HumanMessage))

    compactor = make(scorer=Spy(), pin_last=2)
    started: list[int] = []
    new_session = compactor.session
    compactor.session = lambda **kw: started.append(1) or new_session(**kw)  # type: ignore[method-assign]
    hook = pre_model_hook(compactor, budget=230, session=True, query=last_human)
    messages = lc_messages()
    hook({"messages": messages[:8]})
    hook({"messages": messages})
    assert seen and set(seen) <= {"Search JFK to SEA on May 20.\n" + lines("img", 10), "Yes, book HAT039."}
    assert hook.last.method.startswith("session")
    assert len(started) == 1  # one conversation, one session
    other = [m.model_copy(update={"id": f"other-{m.id}"}) for m in messages]
    hook({"messages": other})
    assert len(started) == 2  # another conversation (its first message differs), another session


def test_pre_model_hook_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="key must be 'llm_input_messages' or 'messages'"):
        pre_model_hook(make(), key="input")
    with pytest.raises(KeyError, match="the graph state has no 'messages' key"):
        pre_model_hook(make())({"history": []})
    empty = pre_model_hook(make())
    assert empty({"messages": []}) == {"llm_input_messages": []} and empty.last.format == "langchain"
    with pytest.raises(ValueError, match="session=True needs the whole history"):
        pre_model_hook(make(), key="messages", session=True)


def test_import_without_langchain_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "langchain_core.messages", None)
    monkeypatch.delitem(sys.modules, "salience.adapters.langchain", raising=False)
    with pytest.raises(ImportError, match=r'pip install "salience\[langchain\]"'):
        importlib.import_module("salience.adapters.langchain")
    monkeypatch.undo()
    assert importlib.import_module("salience.adapters.langchain").KEY == "_langchain"


# -- agent-loop contexts --------------------------------------------------------------------------


def openai_history(n_steps: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."},
                                 {"role": "user", "content": "Fix the failing test in invoice.py"}]
    for k in range(n_steps):
        out.append({"role": "assistant", "content": f"Step {k}: reading.", "tool_calls": [
            {"id": f"c{k}", "type": "function", "function": {"name": "read_file", "arguments": json.dumps(
                {"path": f"src/mod{k}.py"})}}]})
        out.append({"role": "tool", "tool_call_id": f"c{k}", "content": lines(f"f{k}x", 12)})
    return out


def test_openai_context_over_a_growing_history() -> None:
    context = OpenAIContext(make(pin_last=3), budget=600, cache_min=0)
    history = openai_history(30)
    sent = []
    for k in range(4, len(history) + 1, 2):
        before = copy.deepcopy(history[:k])
        out = context.prepare(history[:k])
        assert history[:k] == before
        sent.append(out)
        assert context.last is not None and context.last.tokens <= 600
    steps = context.history
    assert [s.step for s in steps] == list(range(1, len(steps) + 1))
    assert steps[0].prefix_share is None and steps[-1].tokens_before > steps[-1].tokens_after
    assert any(s.compacted for s in steps) and not all(s.compacted for s in steps)
    assert all(s.prefix_messages is not None and s.prefix_messages >= 1 for s in steps[1:])
    stats = context.stats()
    assert isinstance(stats, ContextStats) and stats.steps == len(steps)
    assert stats.compactions == sum(s.compacted for s in steps)
    assert 0 < stats.saved < 1 and stats.mean_prefix_share is not None and stats.mean_prefix_share > 0.5
    assert "calls" in stats.summary() and steps[-1].line().startswith(f"step {steps[-1].step}: ")
    context.reset()
    assert context.history == [] and context.last is None


def test_anthropic_context_and_functions() -> None:
    messages = [{"role": "user", "content": "Fix the test."}]
    for k in range(12):
        messages.append({"role": "assistant", "content": [
            {"type": "text", "text": f"Reading {k}."},
            {"type": "tool_use", "id": f"t{k}", "name": "read_file", "input": {"path": f"m{k}.py"}}]})
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"t{k}", "content": lines(f"a{k}x", 10)}]})
    context = AnthropicContext(make(pin_last=2), budget=400)
    system, out = context.prepare(messages, system="You are terse.")
    assert system == "You are terse." and context.last is not None and context.last.tokens <= 400
    assert isinstance(context.history[0], StepStats)
    system2, out2 = compact_anthropic(messages, make(pin_last=2), system="You are terse.", budget=400)
    assert system2 == "You are terse." and out2 == make(pin_last=2).compact(messages, budget=400,
                                                                            system="You are terse.").messages
    session = make(pin_last=2).session(budget=400)
    _, out3 = compact_anthropic(messages, make(), system="You are terse.", session=session)
    assert out3 == out  # a context runs a session with the default trigger and headroom


def test_compact_openai_with_and_without_a_session() -> None:
    history = openai_history(20)
    compactor = make(pin_last=3)
    plain = compact_openai(history, compactor, budget=500)
    assert compactor.compact(history, budget=500).messages == plain
    session = compactor.session(budget=500)
    assert compact_openai(history, compactor, session=session) == compactor.session(budget=500).compact(
        history).messages
    with pytest.raises(ValueError, match="budget 400 differs from the session's budget 500"):
        compact_openai(history, compactor, budget=400, session=session)


# -- the example -------------------------------------------------------------------------------


@pytest.mark.slow
def test_agent_loop_example_runs() -> None:
    proc = subprocess.run([sys.executable, str(ROOT / "examples" / "agent_loop.py"), "--steps", "9"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    steps = [line for line in proc.stdout.splitlines() if line.startswith("step ")]
    assert len(steps) == 9 and all(" -> " in line and "visible" in line for line in steps)
    assert any("[compacted]" in line for line in steps)  # the 2,000-token budget is passed by step 8
    assert "summary: 9 calls" in proc.stdout and "values the steps needed that were visible" in proc.stdout
