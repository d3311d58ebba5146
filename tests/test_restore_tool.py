"""The restore tool: definitions per format, and a scripted model that calls it in a loop."""

from __future__ import annotations

import json

import pytest

from salience import Compactor
from salience.selector.render import RESTORE_TOOL, marker_ids
from salience.selector.restore import RESTORE_FORMATS, RestoreError, RestoreTool


class Flat:
    def score(self, transcript, query=None):
        return [0.5] * len(transcript.entries)


def words(text: str) -> int:
    return len(text.split())


LOG = "\n".join(f"reservation ZFA04Y line {i}: flight HAT136 seat {i}A fare 412.{i:02d}" for i in range(60))
LOG2 = "\n".join(f"flight HAT136 status line {i}: on time, gate B{i}, crew {i * 7}" for i in range(60))


def history() -> list[dict]:
    return [
        {"role": "system", "content": "You are a booking agent."},
        {"role": "user", "content": "Find my reservation ZFA04Y please."},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function",
            "function": {"name": "get_reservation_details", "arguments": '{"id": "ZFA04Y"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": LOG},
        {"role": "assistant", "content": "Your flight is HAT136."},
        {"role": "user", "content": "Is it on time?"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c2", "type": "function",
            "function": {"name": "get_flight_status", "arguments": '{"flight": "HAT136"}'}}]},
        {"role": "tool", "tool_call_id": "c2", "content": LOG2},
        {"role": "assistant", "content": "It is on time."},
        {"role": "user", "content": "Which fare did line 37 of my reservation have?"},
    ]


def compactor(budget: int = 120) -> Compactor:
    return Compactor(scorer=Flat(), budget=budget, counter=words, pin_last=1, max_entry_tokens=None)




def test_markers_name_the_tool():
    result = compactor().compact(history())
    assert result.stubbed or result.trimmed
    changed = [m["content"] for m in result.messages if "[salience:" in (m.get("content") or "")]
    assert changed and all(marker_ids(c) for c in changed)


@pytest.mark.parametrize("fmt", RESTORE_FORMATS[:3], ids=list(RESTORE_FORMATS[:3]))
def test_definitions(fmt):
    tool = compactor().restore_tool()
    d = tool.definition(fmt)
    json.dumps(d)  # plain JSON, ready for a request body
    if fmt == "openai":
        assert d["type"] == "function" and d["function"]["name"] == RESTORE_TOOL
        schema = d["function"]["parameters"]
    elif fmt == "responses":
        assert d["type"] == "function" and d["name"] == RESTORE_TOOL
        schema = d["parameters"]
    else:
        assert d["name"] == RESTORE_TOOL
        schema = d["input_schema"]
    assert schema["required"] == ["ids"] and schema["properties"]["ids"]["type"] == "array"


def test_bad_format_and_parameters():
    with pytest.raises(RestoreError, match="format must be one of"):
        RestoreTool().definition("gemini")
    with pytest.raises(ValueError, match="max_ids must be an int >= 1"):
        compactor().restore_tool(max_ids=0)


def scripted_model(requests: list[list[dict]]):
    """A model that, while a marker is in sight and it has not restored yet, calls the restore
    tool with the marker's id; then answers in text."""

    def model(messages: list[dict]) -> dict:
        requests.append(messages)
        restored = any(m.get("role") == "tool" and m.get("tool_call_id", "").startswith("r") for m in messages)
        ids = [x for m in messages for x in marker_ids(m.get("content") or "")]
        if ids and not restored:
            return {"role": "assistant", "content": None, "tool_calls": [{"id": "r1", "type": "function",
                    "function": {"name": RESTORE_TOOL, "arguments": json.dumps({"ids": ids[:1]})}}]}
        return {"role": "assistant", "content": "Line 37 had fare 412.37."}

    return model


@pytest.mark.parametrize("with_session", [False, True], ids=["compact", "session"])
def test_scripted_model_restores_the_exact_text(with_session):
    budget = 900
    c = compactor(budget)
    tool = c.restore_tool()
    session = c.session() if with_session else None
    requests: list[list[dict]] = []
    model = scripted_model(requests)
    messages = history()
    answers: list[str] = []
    asked: list[str] = []
    for _ in range(4):
        result = session.compact(messages) if session else c.compact(messages)
        assert result.tokens <= budget
        reply = model(result.messages)
        messages.append(reply)
        calls = reply.get("tool_calls") or []
        if not calls:
            break
        for call in calls:
            assert tool.is_call(call["function"]["name"])
            asked.extend(json.loads(call["function"]["arguments"])["ids"])
            text = tool.answer(session if session else result, call["function"]["arguments"])
            answers.append(text)
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": text})
    original = {f"m{i}": m["content"] for i, m in enumerate(history())}
    assert len(asked) == 1 and answers == [original[asked[0]]]  # the archived entry, exactly
    assert answers[0] in (LOG, LOG2)
    assert all(len(r) <= len(messages) for r in requests)
    # The restored entry is an entry like any other: it counts against the budget, and
    # once it is old it may be archived again.
    messages += [{"role": "user", "content": "Thanks."}, {"role": "assistant", "content": "Anything else?"},
                 {"role": "user", "content": "No."}]
    final = c.compact(messages)
    assert final.tokens <= budget
    assert final.source_tokens >= words(LOG) + words(LOG2) + words(answers[0])
    restored_id = f"m{len(history()) + 1}"
    assert restored_id in final.choices
    assert messages[len(history())]["tool_calls"][0]["function"]["name"] == RESTORE_TOOL


def test_answer_several_and_unknown_ids():
    result = compactor(300).compact(history())
    tool = RestoreTool()
    archived = list(result.archive)
    assert "m3" in archived
    text = tool.answer(result, {"ids": ["m3", "m99"]})
    assert text.startswith("[salience: restored m3]\n" + LOG)
    assert "no entry with id m99" in text
    assert "not JSON" in tool.answer(result, "{ids")
    assert "'ids' must be a non-empty list" in tool.answer(result, {"ids": []})
    assert tool.answer(None, {"ids": ["m3"]}).startswith("[salience: no entry with id m3")
    assert tool.handler(lambda: result)('{"id": "m3"}') == LOG


def test_langchain_tool():
    pytest.importorskip("langchain_core")
    result = compactor().compact(history())
    lc = compactor().restore_tool().definition("langchain", source=result)
    assert lc.name == RESTORE_TOOL
    assert lc.invoke({"ids": ["m3"]}) == LOG
