"""The compactor's message cache: a list read before is detected and read again from the new
messages alone, and gives what a cold read gives whatever changed (a message appended,
changed in place, or moved), in every format the cache sees."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from salience.errors import TranscriptError
from salience.messages import dispatch
from salience.messages.dispatch import MessageCache, to_transcript


def history(n: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "system", "content": "You are an agent."}]
    for i in range(n):
        out.append({"role": "user", "content": f"question {i}"})
        out.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": "lookup", "arguments": f'{{"q": {i}}}'}}]})
        out.append({"role": "tool", "tool_call_id": f"c{i}", "content": f"result {i} " * 5})
    return out


def read(messages: Any, cache: MessageCache | None, **kw: Any) -> tuple[Any, str]:
    kw.setdefault("system", None)
    kw.setdefault("format", None)
    return to_transcript(messages, cache=cache, **kw)


def same_as_cold(messages: Any, cache: MessageCache) -> None:
    warm, fmt = read(messages, cache)
    cold, cold_fmt = read(copy.deepcopy(messages), None)
    assert fmt == cold_fmt
    assert warm.entries == cold.entries


def test_a_known_list_reads_only_the_new_message(monkeypatch: pytest.MonkeyPatch) -> None:
    messages = history(10)
    cache = MessageCache()
    read(messages, cache)
    kinds: list[Any] = []
    real = dispatch._kind
    monkeypatch.setattr(dispatch, "_kind", lambda m: kinds.append(m) or real(m))
    messages.append({"role": "user", "content": "one more"})
    same_as_cold(messages, cache)
    assert kinds == [messages[-1]]


ANTHROPIC_IMAGE = {"role": "user", "content": [{"type": "text", "text": "see"},
                                               {"type": "image", "source": {"type": "url", "url": "u"}}]}
RESPONSES_PART = {"role": "user", "content": [{"type": "input_text", "text": "see"}]}
BAD_ANTHROPIC = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x"}]}
BAD_RESPONSES = {"type": "function_call_output", "call_id": "c0", "output": "42"}


@pytest.mark.parametrize(("new", "fmt"), [(ANTHROPIC_IMAGE, "anthropic"), (RESPONSES_PART, "responses")],
                         ids=["anthropic-block", "responses-part"])
def test_a_new_message_of_another_format_is_detected_as_cold(new: dict[str, Any], fmt: str) -> None:
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    cache = MessageCache()
    assert read(messages, cache)[1] == "openai"
    grown = [*messages, copy.deepcopy(new)]
    warm, cold = read(grown, cache), read(copy.deepcopy(grown), None)
    assert warm[1] == cold[1] == fmt
    assert warm[0].entries == cold[0].entries


@pytest.mark.parametrize("new", [BAD_ANTHROPIC, BAD_RESPONSES], ids=["anthropic", "responses"])
def test_a_bad_new_message_of_another_format_fails_as_cold(new: dict[str, Any]) -> None:
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    cache = MessageCache()
    read(messages, cache)
    grown = [*messages, copy.deepcopy(new)]
    with pytest.raises(TranscriptError) as cold:
        read(copy.deepcopy(grown), None)
    with pytest.raises(TranscriptError) as warm:
        read(grown, cache)
    assert str(warm.value) == str(cold.value)


def test_a_known_message_changed_in_place_to_another_format_is_detected() -> None:
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    cache = MessageCache()
    read(messages, cache)
    messages[0]["content"] = [{"type": "input_text", "text": "hi"}]  # a Responses part
    warm = read(messages, cache)
    assert warm[1] == read(copy.deepcopy(messages), None)[1] == "responses"


def test_moved_and_changed_messages_are_read_again() -> None:
    messages = history(6)
    cache = MessageCache()
    read(messages, cache)
    messages[4]["content"] = "changed in place"
    same_as_cold(messages, cache)
    shifted = [messages[0], *messages[4:]]  # the same objects at other indices
    same_as_cold(shifted, cache)
    same_as_cold(messages, cache)


def test_a_list_forced_as_openai_is_not_taken_for_a_detected_one() -> None:
    messages = [{"role": "user", "content": [{"type": "text", "text": "hi"},
                                             {"type": "image", "source": {"type": "url", "url": "u"}}]}]
    cache = MessageCache()
    assert read(messages, cache, format="openai")[1] == "openai"
    assert read(messages, cache)[1] == "anthropic"


def test_a_bad_new_message_fails_as_in_a_cold_read() -> None:
    messages = history(3)
    cache = MessageCache()
    read(messages, cache)
    messages.append({"role": "wizard", "content": "?"})
    with pytest.raises(TranscriptError) as cold:
        read(copy.deepcopy(messages), None)
    with pytest.raises(TranscriptError) as warm:
        read(messages, cache)
    assert str(warm.value) == str(cold.value)
