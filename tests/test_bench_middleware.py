"""The harness of benchmarks/bench_middleware.py hands each step through the real LangChain
middleware (the figures themselves are not tested)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

pytest.importorskip("langchain.agents")

from langchain.agents.middleware import ContextEditingMiddleware, SummarizationMiddleware  # noqa: E402
from langchain.agents.middleware.context_editing import DEFAULT_TOOL_PLACEHOLDER  # noqa: E402
from langchain_core.messages import HumanMessage, SystemMessage, ToolMessage  # noqa: E402

from salience import Compactor, Transcript  # noqa: E402
from salience.bench.independent import evaluate, messages_tokens  # noqa: E402

_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_middleware.py"
_spec = importlib.util.spec_from_file_location("bench_middleware", _PATH)
assert _spec is not None and _spec.loader is not None
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)

TOKENS = bench.TEXT_TOKENS


def history(rounds: int = 5) -> list[dict]:
    out: list[dict] = [{"role": "system", "content": "You are a travel agent."},
                       {"role": "user", "content": "Check flights HAT001 to HAT005 for Mia Li."}]
    for i in range(1, rounds + 1):
        out.append({"role": "assistant", "content": "", "tool_calls": [{
            "id": f"c{i}", "type": "function",
            "function": {"name": "get_flight", "arguments": json.dumps({"flight": f"HAT00{i}"})}}]})
        out.append({"role": "tool", "tool_call_id": f"c{i}", "name": "get_flight",
                    "content": "\n".join(f"HAT00{i} seat {k}: fare {100 + 7 * k} status open" for k in range(30))})
    return out


def test_clear_tool_uses_goes_through_the_real_middleware(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    real = ContextEditingMiddleware.wrap_model_call

    def spy(self, request, handler):  # type: ignore[no-untyped-def]
        calls.append(len(request.messages))
        return real(self, request, handler)

    monkeypatch.setattr(ContextEditingMiddleware, "wrap_model_call", spy)
    h = history()
    budget = messages_tokens(h, TOKENS) // 2
    out = bench.clear_tool_uses_selector(keep=3, fit=False)(h, budget)
    assert calls == [len(h) - 1]  # the system message is the request's system_message, not one of its messages
    tools = [m for m in out if m["role"] == "tool"]
    assert [m["content"] == DEFAULT_TOOL_PLACEHOLDER for m in tools] == [True, True, False, False, False]
    assert [m for m in out if m["role"] != "tool"] == [m for m in h if m["role"] != "tool"]
    assert out[-1] is h[-1]  # an unchanged message comes back as the caller's own dict


def test_clear_tool_uses_edits_only_over_the_budget() -> None:
    h = history()
    total = messages_tokens(h, TOKENS)
    assert bench.clear_tool_uses_selector(keep=3, fit=False)(h, total) == h  # trigger = budget - system: no edit
    out = bench.clear_tool_uses_selector(keep=3, fit=False)(h, total - 1)
    assert sum(m["content"] == DEFAULT_TOOL_PLACEHOLDER for m in out) == 2


def test_clear_at_least_the_excess_clears_the_oldest_first() -> None:
    h = history()
    total = messages_tokens(h, TOKENS)
    out = bench.clear_tool_uses_selector(keep=0, fit=True)(h, total - 5)
    assert [m["content"] == DEFAULT_TOOL_PLACEHOLDER for m in out if m["role"] == "tool"] == [True] + [False] * 4
    assert messages_tokens(out, TOKENS) <= total - 5


def test_wrap_model_call_hands_back_langchain_messages_marked_as_cleared() -> None:
    h = history()
    request, _ = bench.model_request(h)
    assert isinstance(request.system_message, SystemMessage) and len(request.messages) == len(h) - 1
    from langchain.agents.middleware import ClearToolUsesEdit

    mw = ContextEditingMiddleware(edits=[ClearToolUsesEdit(trigger=10, keep=1)], token_counter=bench.LCCounter(h))
    edited = bench.through_wrap_model_call(mw, request)
    cleared = [m for m in edited if isinstance(m, ToolMessage) and m.response_metadata.get("context_editing")]
    assert len(cleared) == 4 and all(m.content == DEFAULT_TOOL_PLACEHOLDER for m in cleared)
    assert request.messages[2].content != DEFAULT_TOOL_PLACEHOLDER  # the request itself is not mutated


def test_summarization_goes_through_before_model(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    real = SummarizationMiddleware.before_model

    def spy(self, state, runtime):  # type: ignore[no-untyped-def]
        calls.append(len(state["messages"]))
        return real(self, state, runtime)

    monkeypatch.setattr(SummarizationMiddleware, "before_model", spy)
    h = history()
    budget = messages_tokens(h, TOKENS) // 2
    out = bench.summarization_selector()(h, budget)
    assert calls == [len(h) - 1]
    assert out[0] is h[0] and out[1]["role"] == "user" and bench.PLACEHOLDER in out[1]["content"]
    assert out[2:] == h[-len(out) + 2:]  # the kept tail, whole
    assert messages_tokens(out, TOKENS) <= budget
    request, _ = bench.model_request(h)
    kept = bench.through_before_model(SummarizationMiddleware(
        bench.FakeListChatModel(responses=["x"]), trigger=("tokens", 10**9), summarizer=bench._placeholder_summary),
        request)
    assert [m.content for m in kept] == [m.content for m in [request.system_message, *request.messages]]
    assert not any(isinstance(m, HumanMessage) and bench.PLACEHOLDER in m.content for m in kept)


class Flat:
    def score(self, transcript, query=None):  # type: ignore[no-untyped-def]
        return [0.5] * len(transcript.entries)


def test_salience_middleware_selector_and_evaluate() -> None:
    h = history()
    budget = messages_tokens(h, TOKENS) // 3
    compactor = Compactor(scorer=Flat(), counter=TOKENS)
    out = bench.salience_selector(compactor)(h, budget)
    assert messages_tokens(out, TOKENS) <= budget
    assert out[0] is h[0]
    book = {"name": "book", "arguments": '{"flight": "HAT003", "fare": 121}'}
    t = Transcript.from_openai([*h, {"role": "assistant", "content": "", "tool_calls": [
        {"id": "c9", "type": "function", "function": book}]}])
    selectors = {"salience": bench.salience_selector(compactor),
                 "clear": bench.clear_tool_uses_selector(keep=3, fit=False), "window": bench.window_selector}
    report = evaluate([t], selectors, [0.25], reference="window")
    clear = report.result("clear", 0.25)
    assert clear.over_budget == clear.calls == 3  # ClearToolUsesEdit does not bound the request
    assert clear.independent.seen == 0 and report.result("salience", 0.25).over_budget == 0
    sent = evaluate([t], {"clear": bench.uncapped(selectors["clear"], 0.25)}, [0.25], counter=bench._nothing,
                    reference=None)
    assert sent.result("clear", 0.25).independent.micro == 1.0  # as sent: the user's turn and the last 3 results
