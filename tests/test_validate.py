"""salience.messages.validate: what the providers would reject, one rule at a time."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest

from salience.messages.validate import check_anthropic, check_openai, pending_calls
from salience.transcript import Transcript


def call(cid: str, name: str = "lookup", arguments: str = "{}") -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": arguments}}


def asks(*ids: str) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": [call(i) for i in ids]}


def answer(cid: str, content: str = "ok") -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": cid, "content": content}


USER = {"role": "user", "content": "hi"}
SYSTEM = {"role": "system", "content": "be brief"}


def use(uid: str, name: str = "lookup", **extra: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": uid, "name": name, "input": {}, **extra}


def result(uid: str, content: Any = "ok") -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": uid, "content": content}


def text(t: str) -> dict[str, Any]:
    return {"type": "text", "text": t}


def one(problems: list[str], pattern: str, count: int = 1) -> None:
    """``count`` problems, the first matching ``pattern``."""
    assert len(problems) == count, problems
    assert re.search(pattern, problems[0]), problems[0]


# --------------------------------------------------------------------------
# OpenAI
# --------------------------------------------------------------------------

OPENAI_VALID = {
    "plain": [SYSTEM, USER, {"role": "assistant", "content": "hello"}],
    "one-call": [USER, asks("a"), answer("a"), {"role": "assistant", "content": "done"}],
    "parallel-calls-any-order": [USER, asks("a", "b"), answer("b"), answer("a"), USER],
    "reused-id-after-answer": [USER, asks("a"), answer("a"), asks("a"), answer("a")],
    "parts-content": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
    "developer-role": [{"role": "developer", "content": "rules"}, USER],
    "assistant-text-and-calls": [USER, {"role": "assistant", "content": "checking", "tool_calls": [call("a")]},
                                 answer("a")],
    "tool-calls-null": [USER, {"role": "assistant", "content": "hi", "tool_calls": None}],
}


@pytest.mark.parametrize("messages", list(OPENAI_VALID.values()), ids=list(OPENAI_VALID))
def test_openai_valid(messages: list[dict[str, Any]]) -> None:
    before = copy.deepcopy(messages)
    assert check_openai(messages) == []
    assert messages == before


OPENAI_INVALID = {
    "empty": ([], r"must not be empty"),
    "not-a-list": ({"role": "user"}, r"must be a list"),
    "not-a-mapping": ([USER, "hello"], r"message 1: must be a mapping"),
    "unknown-role": ([{"role": "robot", "content": "x"}], r"field 'role' must be one of"),
    "user-without-content": ([{"role": "user"}], r"message 0 \(user\): field 'content' is required"),
    "assistant-empty": ([USER, {"role": "assistant", "content": None}], r"needs 'content' or 'tool_calls'"),
    "empty-parts": ([{"role": "user", "content": []}], r"must not be an empty list"),
    "bad-part": ([{"role": "user", "content": ["hi"]}], r"content\[0\] must be a mapping with a 'type'"),
    "empty-tool-calls": ([USER, {"role": "assistant", "content": "x", "tool_calls": []}],
                         r"'tool_calls' must not be an empty list"),
    "calls-on-user": ([{"role": "user", "content": "x", "tool_calls": [call("a")]}, answer("a")],
                      r"only assistant messages may have 'tool_calls'"),
    "duplicate-call-id": ([USER, asks("a", "a"), answer("a")], r"tool_calls\[1\]\.id 'a' is used twice"),
    "call-type": ([USER, {"role": "assistant", "tool_calls": [{**call("a"), "type": "code"}]}, answer("a")],
                  r"type must be 'function'"),
    "arguments-not-str": ([USER, {"role": "assistant", "tool_calls": [
        {"id": "a", "type": "function", "function": {"name": "f", "arguments": {}}}]}, answer("a")],
        r"function\.arguments must be a str"),
    "orphan-result": ([USER, answer("a")], r"message 1 \(tool\): answers call 'a', but no assistant message"),
    "result-after-text": ([USER, asks("a"), answer("a"), {"role": "assistant", "content": "so"}, answer("a")],
                          r"message 4 \(tool\): answers call 'a', but no assistant"),
    "result-of-other-call": ([USER, asks("a"), answer("b"), answer("a")],
                             r"answers call 'b' which is not a call of message 1"),
    "answered-twice": ([USER, asks("a"), answer("a"), answer("a")], r"answers call 'a' a second time"),
    "unanswered-before-user": ([USER, asks("a", "b"), answer("a"), USER],
                               r"message 1 \(assistant\): tool call 'b' is not answered .* before message 3 \(user\)"),
    "unanswered-at-end": ([USER, asks("a")], r"tool call 'a' is not answered .* before the end of the list"),
    "tool-without-id": ([USER, asks("a"), {"role": "tool", "content": "x"}, answer("a")],
                        r"field 'tool_call_id' must be a non-empty str"),
    "tool-without-content": ([USER, asks("a"), {"role": "tool", "tool_call_id": "a"}],
                             r"message 2 \(tool\): field 'content' is required"),
}


@pytest.mark.parametrize(("messages", "pattern"), list(OPENAI_INVALID.values()), ids=list(OPENAI_INVALID))
def test_openai_invalid(messages: Any, pattern: str) -> None:
    one(check_openai(messages), pattern)


def test_openai_pending_calls() -> None:
    waiting = [USER, asks("a", "b"), answer("a")]
    one(check_openai(waiting), r"tool call 'b' is not answered .* before the end of the list")
    assert check_openai(waiting, allow_pending=True) == []
    assert pending_calls(waiting) == ["b"]
    # only the trailing group may wait: an earlier unanswered call is still a problem
    earlier = [USER, asks("a"), USER, asks("b")]
    one(check_openai(earlier, allow_pending=True), r"tool call 'a' is not answered .* before message 2")
    assert pending_calls([USER, asks("a"), answer("a")]) == []
    assert pending_calls([USER]) == []


def test_openai_round_trip_of_a_transcript_is_valid() -> None:
    messages = [SYSTEM, USER, asks("a", "b"), answer("a"), answer("b"), {"role": "assistant", "content": "done"}]
    assert check_openai(Transcript.from_openai(messages).to_openai()) == []


# --------------------------------------------------------------------------
# Anthropic
# --------------------------------------------------------------------------

A_USER = {"role": "user", "content": "hi"}
A_DONE = {"role": "assistant", "content": "done"}

ANTHROPIC_VALID = {
    "plain": ([A_USER, A_DONE], None),
    "system-str": ([A_USER], "be brief"),
    "system-blocks": ([A_USER], [text("be brief")]),
    "tool-round": ([A_USER, {"role": "assistant", "content": [text("checking"), use("t1")]},
                    {"role": "user", "content": [result("t1"), text("thanks")]}, A_DONE], None),
    "parallel": ([A_USER, {"role": "assistant", "content": [use("t1"), use("t2")]},
                  {"role": "user", "content": [result("t2"), result("t1", [text("1")])]}], None),
    "final-assistant-empty": ([A_USER, {"role": "assistant", "content": ""}], None),
    "final-assistant-empty-list": ([A_USER, {"role": "assistant", "content": []}], None),
    "result-without-content": ([A_USER, {"role": "assistant", "content": [use("t1")]},
                                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1"}]}], None),
    "thinking-and-image": ([{"role": "user", "content": [text("look"), {"type": "image", "source": {}}]},
                            {"role": "assistant", "content": [{"type": "thinking", "thinking": "hm"}, text("ok")]}],
                           None),
}


@pytest.mark.parametrize(("messages", "system"), list(ANTHROPIC_VALID.values()), ids=list(ANTHROPIC_VALID))
def test_anthropic_valid(messages: list[dict[str, Any]], system: Any) -> None:
    before = copy.deepcopy((messages, system))
    assert check_anthropic(messages, system) == []
    assert (messages, system) == before


def _calls(*uses: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": list(uses)}


def _results(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": list(blocks)}


ANTHROPIC_INVALID = {
    "empty": ([], None, r"must not be empty"),
    "system-role": ([{"role": "system", "content": "x"}, A_USER], None, r"field 'role' must be 'user' or 'assistant'"),
    "starts-with-assistant": ([A_DONE, A_USER], None, r"first message must have role 'user'"),
    "two-users": ([A_USER, A_USER], None, r"message 1: roles must alternate"),
    "empty-user-string": ([{"role": "user", "content": ""}], None, r"content must not be empty"),
    "whitespace-user-string": ([{"role": "user", "content": "  \n"}], None, r"content must not be empty"),
    "empty-list-mid": ([A_USER, {"role": "assistant", "content": []}, A_USER], None,
                       r"message 1: content must not be an empty list"),
    "empty-text-block": ([{"role": "user", "content": [text("")]}], None, r"content\[0\] \(text\): text must hold"),
    "content-number": ([{"role": "user", "content": 3}], None, r"field 'content' must be a str or a list"),
    "block-without-type": ([{"role": "user", "content": [{"text": "x"}]}], None,
                           r"content\[0\] must be a mapping with a 'type'"),
    "bad-system": ([A_USER], {"text": "x"}, r"system: must be None, a str or a list"),
    "empty-system-block": ([A_USER], [text(" ")], r"system\[0\]: text must hold non-whitespace"),
    "bad-use-id": ([A_USER, _calls(use("call.1")), _results(result("call.1"))], None,
                   r"id 'call\.1' must match"),
    "duplicate-use-id": ([A_USER, _calls(use("t1")), _results(result("t1")), _calls(use("t1")),
                          _results(result("t1"))], None, r"message 3: content\[0\] \(tool_use\): id 't1' is used by"),
    "use-in-user": ([{"role": "user", "content": [use("t1")]}], None, r"tool_use blocks belong in assistant"),
    "input-not-object": ([A_USER, _calls(use("t1", input="x")), _results(result("t1"))], None,
                         r"input must be an object"),
    "result-in-assistant": ([A_USER, _calls(use("t1"), result("t1"))], None,
                            r"tool_result blocks belong in user messages"),
    "result-after-text": ([A_USER, _calls(use("t1")), _results(text("here"), result("t1"))], None,
                          r"tool_result blocks must come before any other block"),
    "orphan-result": ([_results(result("t9"))], None, r"answers tool_use 't9'.*no tool_use has that id"),
    "result-two-messages-late": ([A_USER, _calls(use("t1")), _results(result("t1")), A_DONE,
                                  _results(result("t1"))], None,
                                 r"message 4: .*answers tool_use 't1'.*a tool_use of an earlier message"),
    "unanswered-use": ([A_USER, _calls(use("t1"), use("t2")), _results(result("t1"))], None,
                       r"message 1: tool_use 't2' not answered by a tool_result at the start of message 2"),
    "answered-by-text-only": ([A_USER, _calls(use("t1")), A_USER], None, r"tool_use 't1' not answered"),
    "use-at-end": ([A_USER, _calls(use("t1"))], None, r"message 1: tool_use 't1' not answered \(the conversation"),
    "answered-twice": ([A_USER, _calls(use("t1")), _results(result("t1"), result("t1"))], None,
                       r"answers tool_use 't1' a second time"),
    "empty-text-in-result": ([A_USER, _calls(use("t1")), _results(result("t1", [text("")]))], None,
                             r"content\[0\] \(tool_result\)\.content\[0\]\.text must hold"),
}


#: Cases that break one rule and, by consequence, another (the first problem is the cause).
ANTHROPIC_COUNTS = {
    "duplicate-use-id": 2,  # ... and its result then answers an earlier message's tool_use
    "use-in-user": 2,  # ... and nothing answers it
    "result-in-assistant": 4,  # ... its own message's tool_use, and that stays unanswered
}


@pytest.mark.parametrize(("messages", "system", "pattern"), list(ANTHROPIC_INVALID.values()),
                         ids=list(ANTHROPIC_INVALID))
def test_anthropic_invalid(messages: Any, system: Any, pattern: str, request: pytest.FixtureRequest) -> None:
    case = request.node.callspec.id
    one(check_anthropic(messages, system), pattern, ANTHROPIC_COUNTS.get(case, 1))


def test_anthropic_pending_calls() -> None:
    waiting = [A_USER, _calls(use("t1"), use("t2"))]
    one(check_anthropic(waiting), r"not answered \(the conversation ends with it\)")
    assert check_anthropic(waiting, allow_pending=True) == []
    assert pending_calls(waiting, format="anthropic") == ["t1", "t2"]
    partly = [*waiting, _results(result("t1"))]
    one(check_anthropic(partly), r"tool_use 't2' not answered")
    assert check_anthropic(partly, allow_pending=True) == []
    assert pending_calls(partly, format="anthropic") == ["t2"]
    # a user message with text after partial results is not waiting: the call is simply unanswered
    mixed = [*waiting, _results(result("t1"), text("and?"))]
    one(check_anthropic(mixed, allow_pending=True), r"tool_use 't2' not answered")
    assert pending_calls(mixed, format="anthropic") == []


def test_anthropic_looser_role_rule() -> None:
    assert check_anthropic([A_USER, A_USER, A_DONE, A_DONE], alternation=False) == []
    one(check_anthropic([A_DONE, A_USER], alternation=False), r"first message must have role 'user'")


def test_pending_calls_rejects_unknown_formats() -> None:
    with pytest.raises(ValueError, match=r"format must be 'openai' or 'anthropic' \(got 'gemini'\)"):
        pending_calls([USER], format="gemini")


def test_anthropic_rendering_of_an_openai_transcript_is_valid() -> None:
    messages = [SYSTEM, USER, asks("call.1", "call.1b"), answer("call.1"), answer("call.1b"),
                {"role": "assistant", "content": "done"}, USER, asks("call.1"), answer("call.1")]
    t = Transcript.from_openai(messages)
    assert check_openai(messages) == []
    assert check_anthropic(t.to_anthropic(), t.anthropic_system()) == []
