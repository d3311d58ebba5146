"""OpenAI, Anthropic and JSONL formats: exact round trips, no aliasing, changed and
removed entries, conversion between providers, and the real tau-bench runs."""

from __future__ import annotations

import copy
import functools
import json
import random
import re
from pathlib import Path
from typing import Any

import pytest

from salience import Entry, FormatError, ToolCall, Transcript, TranscriptError, load_transcripts, save_transcripts
from salience.datasets import detect_layout, jsonl
from salience.messages.anthropic import from_anthropic, system_of
from salience.messages.openai import entry_to_openai, from_openai, to_openai

# --------------------------------------------------------------------------
# What the providers accept (the rules their APIs enforce on tool use)
# --------------------------------------------------------------------------


def check_openai(messages: list[dict[str, Any]]) -> None:
    """Assert ``messages`` is a request OpenAI's chat API accepts (structure only)."""
    pending: set[str] = set()
    for i, m in enumerate(messages):
        role = m["role"]
        assert role in ("system", "developer", "user", "assistant", "tool"), (i, role)
        if role == "tool":
            where = f"message {i}: result {m.get('tool_call_id')!r}"
            assert m.get("tool_call_id") in pending, f"{where} not right after its call"
            pending.discard(m["tool_call_id"])
            assert isinstance(m["content"], (str, list)), i
            continue
        assert not pending, f"message {i}: calls {sorted(pending)} are not answered before it"
        if m.get("tool_calls") is not None:
            assert role == "assistant" and m["tool_calls"], i
            ids = [c["id"] for c in m["tool_calls"]]
            assert len(set(ids)) == len(ids), i
            for c in m["tool_calls"]:
                assert c["type"] == "function" and isinstance(c["function"]["arguments"], str), i
            pending = set(ids)
        else:
            assert m["content"] is not None, f"message {i}: content null without tool calls"
    assert not pending, f"calls {sorted(pending)} are never answered"


def _combined(messages: list[dict[str, Any]]) -> list[tuple[str, list[dict[str, Any]]]]:
    """Consecutive messages of one role combined into one turn, as Anthropic's API does."""
    turns: list[tuple[str, list[dict[str, Any]]]] = []
    for m in messages:
        content = m["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
        if turns and turns[-1][0] == m["role"]:
            turns[-1][1].extend(blocks)
        else:
            turns.append((m["role"], blocks))
    return turns


def check_anthropic(messages: list[dict[str, Any]], system: Any = None, *, alternate: bool = False) -> None:
    """Assert ``messages`` (and ``system``) is a request Anthropic's Messages API accepts.

    ``alternate``: also require strictly alternating roles (no same-role neighbours).
    """
    assert system is None or isinstance(system, str) or all(b["type"] == "text" for b in system)
    used: set[str] = set()
    for i, m in enumerate(messages):
        assert m["role"] in ("user", "assistant"), (i, m["role"])
        assert m["content"], f"message {i} is empty"
        if isinstance(m["content"], list):
            for b in m["content"]:
                if b["type"] == "text":
                    assert b["text"], f"message {i}: empty text block"
                if b["type"] == "tool_use":
                    assert isinstance(b["input"], dict), i
                    assert b["id"] not in used, f"message {i}: tool_use id {b['id']!r} used twice"
                    assert re.fullmatch(r"[a-zA-Z0-9_-]+", b["id"]), f"message {i}: tool_use id {b['id']!r}"
                    used.add(b["id"])
        if alternate and i:
            assert m["role"] != messages[i - 1]["role"], f"messages {i - 1} and {i} have the same role"
    turns = _combined(messages)
    for k, (role, blocks) in enumerate(turns):
        uses = [b["id"] for b in blocks if b["type"] == "tool_use"]
        results = [b for b in blocks if b["type"] == "tool_result"]
        if role == "assistant":
            assert not results, f"turn {k}: tool_result in an assistant turn"
            if uses:
                assert k + 1 < len(turns), f"turn {k}: tool_use {uses} never answered"
                nxt = turns[k + 1][1]
                lead = []
                for b in nxt:
                    if b["type"] != "tool_result":
                        break
                    lead.append(b["tool_use_id"])
                assert sorted(lead) == sorted(uses), f"turn {k + 1} must start with results for {uses} (got {lead})"
        else:
            assert not uses, f"turn {k}: tool_use in a user turn"
            if results:
                assert k > 0, "tool_result before any tool_use"
                prev = {b["id"] for b in turns[k - 1][1] if b["type"] == "tool_use"}
                assert {b["tool_use_id"] for b in results} <= prev, f"turn {k}: result without its tool_use"
                kinds = [b["type"] == "tool_result" for b in blocks]
                assert kinds == sorted(kinds, reverse=True), f"turn {k}: text before a tool_result"


def _call(cid: str, name: str, arguments: str = "{}", **extra: Any) -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": arguments}, **extra}


PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="

OPENAI: list[dict[str, Any]] = [
    {"role": "system", "content": "You are an airline agent."},
    {"role": "user", "name": "mia", "content": [
        {"type": "text", "text": "Here is my ticket."},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}", "detail": "low"}},
    ]},
    {"role": "assistant", "content": None, "tool_calls": [
        _call("c1", "get_user", '{"user_id": "mia_li_3668"}'),
        _call("c2", "get_reservation", '{"id": "NO6JO3"}', index=1),
    ]},
    {"role": "tool", "tool_call_id": "c1", "name": "get_user", "content": '{"name": "Mia Li", "tier": "gold"}'},
    {"role": "tool", "tool_call_id": "c2", "name": "get_reservation", "content": '{"flight": "HAT136"}'},
    {"role": "assistant", "content": "You are booked on HAT136.", "refusal": None},
    {"role": "user", "content": "Cancel it.", "x_custom": {"nested": [1, {"deep": True}]}},
    {"role": "assistant", "content": "Cancelling.", "tool_calls": [_call("c3", "cancel", '{"id": "NO6JO3"}')]},
    {"role": "tool", "tool_call_id": "c3", "content": [{"type": "text", "text": "cancelled"}]},
    {"role": "developer", "content": "Be concise."},
    {"role": "assistant", "content": "Done."},
]

SYSTEM: list[dict[str, Any]] = [
    {"type": "text", "text": "You are an airline agent.", "cache_control": {"type": "ephemeral"}},
]
IMAGE = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}
ANTHROPIC: list[dict[str, Any]] = [
    {"role": "user", "content": [{"type": "text", "text": "Here is my ticket."}, IMAGE]},
    {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "Need the user first.", "signature": "sig-1"},
        {"type": "text", "text": "Let me check."},
        {"type": "tool_use", "id": "tu1", "name": "get_user", "input": {"user_id": "mia_li_3668"}},
        {"type": "tool_use", "id": "tu2", "name": "get_reservation", "input": {}},
    ]},
    {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "tu1",
         "content": [{"type": "text", "text": '{"name": "Mia Li"}'}, IMAGE]},
        {"type": "tool_result", "tool_use_id": "tu2", "content": "no reservation given", "is_error": True,
         "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": "Please hurry."},
    ]},
    {"role": "assistant", "content": "Which reservation?"},
    {"role": "user", "content": "NO6JO3", "id": "u4", "x_meta": {"k": [1, 2]}},
    {"role": "assistant", "content": [
        {"type": "redacted_thinking", "data": "opaque"},
        {"type": "tool_use", "id": "tu3", "name": "get_reservation", "input": {"id": "NO6JO3"}},
    ]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu3"}]},
    {"role": "assistant", "content": [{"type": "text", "text": "Found it: "}, {"type": "text", "text": "HAT136."}]},
]


def openai_transcript() -> Transcript:
    return from_openai(OPENAI, id="oa")


def anthropic_transcript() -> Transcript:
    return from_anthropic(ANTHROPIC, system=SYSTEM, id="an")


# --------------------------------------------------------------------------
# OpenAI: exact round trips
# --------------------------------------------------------------------------

OPENAI_CASES = {
    "strings": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"},
                {"role": "assistant", "content": "a"}],
    "content-null-with-calls": [{"role": "assistant", "content": None, "tool_calls": [_call("c", "f")]},
                                {"role": "tool", "tool_call_id": "c", "content": "r"}],
    "content-absent": [{"role": "assistant", "tool_calls": [_call("c", "f")]},
                       {"role": "tool", "tool_call_id": "c", "content": ""}],
    "content-empty-string": [{"role": "user", "content": ""}],
    "parts-text-image": [{"role": "user", "content": [
        {"type": "text", "text": "a"}, {"type": "image_url", "image_url": {"url": "https://x/y.png"}},
        {"type": "text", "text": "b"}]}],
    "parts-only-image": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://x"}}]}],
    "refusal-part": [{"role": "assistant", "content": [{"type": "refusal", "refusal": "no"}]}],
    "name-on-every-role": [{"role": "system", "name": "s", "content": "x"},
                           {"role": "user", "name": "u", "content": "y"}],
    "multiple-calls-extra-keys": [
        {"role": "assistant", "content": "", "tool_calls": [_call("a", "f", '{"x": 1}', index=0),
                                                            _call("b", "g", "not json", index=1)], "audio": None},
        {"role": "tool", "tool_call_id": "b", "content": "2", "name": "g"},
        {"role": "tool", "tool_call_id": "a", "content": [{"type": "text", "text": "1"}]},
    ],
    "empty-tool-calls-list": [{"role": "assistant", "content": "x", "tool_calls": []}],
    "developer-and-function": [{"role": "developer", "content": "d"},
                               {"role": "assistant", "content": None,
                                "function_call": {"name": "f", "arguments": "{}"}},
                               {"role": "function", "name": "f", "content": "r"}],
    "ids-and-labels": [{"id": "x", "role": "user", "content": "a", "label": 1},
                       {"role": "assistant", "content": "b", "label": 0.25},
                       {"id": "z", "role": "user", "content": "c"}],
    "label-null": [{"role": "user", "content": "a", "label": None}],
    "unanswered-call": [{"role": "assistant", "content": None, "tool_calls": [_call("c", "f")]}],
    "reused-call-id": [{"role": "assistant", "content": None, "tool_calls": [_call("c", "f")]},
                       {"role": "tool", "tool_call_id": "c", "content": "1"},
                       {"role": "assistant", "content": None, "tool_calls": [_call("c", "g")]},
                       {"role": "tool", "tool_call_id": "c", "content": "2"}],
    "rich": OPENAI,
}


@pytest.mark.parametrize("messages", list(OPENAI_CASES.values()), ids=list(OPENAI_CASES))
def test_openai_round_trip_is_exact(messages: list[dict[str, Any]]) -> None:
    snapshot = copy.deepcopy(messages)
    t = Transcript.from_openai(messages)
    out = t.to_openai()
    assert out == snapshot
    assert [list(m) for m in out] == [list(m) for m in snapshot]  # key order too
    assert messages == snapshot  # the input is not touched


def test_openai_reused_call_ids_pair_with_the_latest_call() -> None:
    t = Transcript.from_openai(OPENAI_CASES["reused-call-id"])
    assert t.parents() == [-1, 0, -1, 2]


def test_openai_ids_labels_and_entries() -> None:
    t = Transcript.from_openai(OPENAI_CASES["ids-and-labels"])
    assert [(e.id, e.label) for e in t.entries] == [("x", 1.0), ("m1", 0.25), ("z", None)]
    t = openai_transcript()
    assert [e.role for e in t.entries] == ["system", "user", "assistant", "tool", "tool", "assistant", "user",
                                           "assistant", "tool", "system", "assistant"]
    assert t.entries[1].content == "Here is my ticket." and t.entries[1].name == "mia"
    assert t.entries[2].tool_calls == (ToolCall("c1", "get_user", '{"user_id": "mia_li_3668"}'),
                                       ToolCall("c2", "get_reservation", '{"id": "NO6JO3"}'))
    assert t.entries[8].content == "cancelled"


def test_openai_does_not_alias_the_caller_or_its_output() -> None:
    messages = copy.deepcopy(OPENAI)
    t = from_openai(messages)
    for m in messages:  # the caller reuses its dicts
        for value in m.values():
            if isinstance(value, list):
                for item in value:
                    if isinstance(item, dict):
                        item.clear()
        m["content"] = "changed"
        m["role"] = "user"
    assert t.to_openai() == OPENAI
    out = t.to_openai()
    out[1]["content"][1]["image_url"]["url"] = "mutated"
    out[2]["tool_calls"][0]["function"]["name"] = "mutated"
    out[6]["x_custom"]["nested"][1]["deep"] = False
    assert t.to_openai() == OPENAI


def test_openai_with_ids_and_labels_switches() -> None:
    t = Transcript.from_openai([{"role": "user", "content": "a"}]).replace(entries=(
        Entry(id="e0", role="user", content="a", label=0.5),))
    assert to_openai(t) == [{"role": "user", "content": "a"}]
    assert to_openai(t, with_ids=True, with_labels=True) == [{"role": "user", "content": "a", "id": "e0", "label": 0.5}]
    t = Transcript.from_openai([{"id": "k", "role": "user", "content": "a", "label": 1}])
    assert entry_to_openai(t.entries[0], with_id=False, with_label=False) == {"role": "user", "content": "a"}


# --------------------------------------------------------------------------
# Anthropic: exact round trips
# --------------------------------------------------------------------------

ANTHROPIC_CASES = {
    "strings": ([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}], "sys"),
    "no-system": ([{"role": "user", "content": "hi"}], None),
    "system-blocks": ([{"role": "user", "content": "hi"}], SYSTEM),
    "empty-system-list": ([{"role": "user", "content": "hi"}], []),
    "empty-content": ([{"role": "user", "content": ""}, {"role": "assistant", "content": []}], None),
    "same-role-neighbours": ([{"role": "user", "content": "a"}, {"role": "user", "content": [
        {"type": "text", "text": "b"}]}], None),
    "tool-result-forms": ([
        {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "f", "input": {"x": [1, "é"]}},
                                          {"type": "tool_use", "id": "b", "name": "g"}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": "1", "is_error": False},
                                     {"type": "tool_result", "tool_use_id": "b", "content": []}]},
    ], None),
    # results first, as the API wants them (text before a result: refused, tests/test_bad_input.py)
    "text-after-results": ([
        {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "f", "input": {}},
                                          {"type": "tool_use", "id": "b", "name": "f", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a"},
                                     {"type": "tool_result", "tool_use_id": "b"}, {"type": "text", "text": "x"},
                                     {"type": "text", "text": "y"}, {"type": "text", "text": "z"}]},
    ], None),
    "rich": (ANTHROPIC, SYSTEM),
}


@pytest.mark.parametrize(("messages", "system"), list(ANTHROPIC_CASES.values()), ids=list(ANTHROPIC_CASES))
def test_anthropic_round_trip_is_exact(messages: list[dict[str, Any]], system: Any) -> None:
    snapshot, sys_snapshot = copy.deepcopy(messages), copy.deepcopy(system)
    t = Transcript.from_anthropic(messages, system=system)
    out = t.to_anthropic()
    assert out == snapshot
    assert [list(m) for m in out] == [list(m) for m in snapshot]
    assert t.anthropic_system() == sys_snapshot
    assert messages == snapshot and system == sys_snapshot


def test_anthropic_entries_split_tool_results() -> None:
    t = anthropic_transcript()
    assert [(e.id, e.role) for e in t.entries] == [
        ("system", "system"), ("m0", "user"), ("m1", "assistant"), ("m2", "tool"), ("m2.1", "tool"),
        ("m2.2", "user"), ("m3", "assistant"), ("u4", "user"), ("m5", "assistant"), ("m6", "tool"),
        ("m7", "assistant")]
    by_id = {e.id: e for e in t.entries}
    assert by_id["m1"].content == "Let me check."
    assert by_id["m1"].tool_calls == (ToolCall("tu1", "get_user", '{"user_id": "mia_li_3668"}'),
                                      ToolCall("tu2", "get_reservation", "{}"))
    m2 = by_id["m2"]
    assert (m2.content, m2.name, m2.tool_call_id) == ('{"name": "Mia Li"}', "get_user", "tu1")
    assert by_id["m6"].content == "" and by_id["m7"].content == "Found it: \nHAT136."
    assert t.parents()[t.index("m2.1")] == t.index("m1")


def test_round_trips_survive_pickling_entries_one_by_one() -> None:
    import pickle

    t = anthropic_transcript()
    apart = t.replace(entries=tuple(pickle.loads(pickle.dumps(e)) for e in t.entries))
    assert apart.to_anthropic() == ANTHROPIC and apart.anthropic_system() == SYSTEM
    t = openai_transcript()
    apart = t.replace(entries=tuple(pickle.loads(pickle.dumps(e)) for e in t.entries))
    assert apart.to_openai() == OPENAI


def test_anthropic_does_not_alias_the_caller_or_its_output() -> None:
    messages, system = copy.deepcopy(ANTHROPIC), copy.deepcopy(SYSTEM)
    t = from_anthropic(messages, system=system)
    messages[1]["content"][2]["input"]["user_id"] = "mutated"
    messages[2]["content"][0]["content"][1]["source"]["data"] = "mutated"
    messages[4]["x_meta"]["k"].append(3)
    messages[0]["content"].clear()
    system[0]["text"] = "mutated"
    assert t.to_anthropic() == ANTHROPIC and t.anthropic_system() == SYSTEM
    out = t.to_anthropic()
    out[1]["content"][0]["thinking"] = "mutated"
    out[4]["x_meta"]["k"].clear()
    t.anthropic_system()[0]["cache_control"]["type"] = "mutated"  # type: ignore[index]
    assert t.to_anthropic() == ANTHROPIC and t.anthropic_system() == SYSTEM


# --------------------------------------------------------------------------
# Changed entries render from their new content
# --------------------------------------------------------------------------


def _changed(t: Transcript, **by_id: str) -> Transcript:
    return t.replace(entries=tuple(e.replace(content=by_id[e.id]) if e.id in by_id else e for e in t.entries))


def test_openai_changed_entries_render_new_content() -> None:
    t = _changed(openai_transcript(), m1="[trimmed]", m2="calling", m3="[stub]", m8="ok", m6="")
    out = t.to_openai()
    assert out[1]["content"] == [{"type": "text", "text": "[trimmed]"}, OPENAI[1]["content"][1]]  # image kept
    assert out[1]["name"] == "mia"
    assert out[2]["content"] == "calling" and out[2]["tool_calls"] == OPENAI[2]["tool_calls"]
    assert out[3] == {**OPENAI[3], "content": "[stub]"}
    assert out[8]["content"] == [{"type": "text", "text": "ok"}]
    assert out[6] == {**OPENAI[6], "content": ""}
    assert [m for i, m in enumerate(out) if i not in (1, 2, 3, 6, 8)] == [
        m for i, m in enumerate(OPENAI) if i not in (1, 2, 3, 6, 8)]
    back = from_openai(out)
    assert [e.content for e in back.entries] == [e.content for e in t.entries]
    check_openai(out)


def test_dropping_the_kept_original_renders_natively() -> None:
    t = openai_transcript()
    plain = t.replace(entries=tuple(e.replace(meta=e.public_meta) if e.id in ("m1", "m6") else e for e in t.entries))
    out = plain.to_openai()
    assert out[1] == {"role": "user", "content": "Here is my ticket.", "name": "mia"}
    assert out[6] == {"role": "user", "content": "Cancel it."}
    assert plain.to_anthropic()[0] == {"role": "user", "content": "Here is my ticket."}


def test_openai_changed_calls_name_and_ids_render() -> None:
    t = openai_transcript()
    call = t.entries[2]
    new_calls = (call.tool_calls[0], ToolCall("c2", "get_reservation", '{"id": "ZZ"}'))
    t = t.replace(entries=tuple(
        call.replace(tool_calls=new_calls) if e.id == "m2" else e.replace(name=None) if e.id == "m3" else e
        for e in t.entries))
    out = t.to_openai()
    assert out[2]["tool_calls"] == [OPENAI[2]["tool_calls"][0], _call("c2", "get_reservation", '{"id": "ZZ"}')]
    assert "name" not in out[3]
    assert t.to_anthropic()[1]["content"][1]["input"] == {"id": "ZZ"}


def test_anthropic_changed_entries_render_new_content() -> None:
    t = _changed(anthropic_transcript(), m0="[ticket]", m1="Checking.", m2="[stub]", **{"m2.1": "", "m2.2": "Hurry"},
                 u4="Reservation NO6JO3", m6="result", m7="Found.")
    out = t.to_anthropic()
    assert out[0]["content"] == [{"type": "text", "text": "[ticket]"}, IMAGE]
    assert out[1]["content"][0] == ANTHROPIC[1]["content"][0]  # thinking kept, with its signature
    assert out[1]["content"][1] == {"type": "text", "text": "Checking."}
    assert out[1]["content"][2:] == ANTHROPIC[1]["content"][2:]
    assert out[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "tu1", "content": [{"type": "text", "text": "[stub]"}, IMAGE]},
        {"type": "tool_result", "tool_use_id": "tu2", "is_error": True, "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": "Hurry"},
    ]
    assert out[4] == {**ANTHROPIC[4], "content": "Reservation NO6JO3"}
    assert out[6]["content"] == [{"type": "tool_result", "tool_use_id": "tu3", "content": "result"}]
    assert out[7]["content"] == [{"type": "text", "text": "Found."}]
    check_anthropic(out, t.anthropic_system())
    back = from_anthropic(out, system=t.anthropic_system())
    assert [e.content for e in back.entries] == [e.content for e in t.entries]


def test_anthropic_changed_system_prompt() -> None:
    t = _changed(anthropic_transcript(), system="Short.")
    assert t.anthropic_system() == [{"type": "text", "text": "Short.", "cache_control": {"type": "ephemeral"}}]
    t = _changed(from_anthropic([{"role": "user", "content": "x"}], system="Long."), system="Short.")
    assert system_of(t) == "Short."
    t = openai_transcript()
    assert system_of(t) == "You are an airline agent.\n\nBe concise."


def test_entries_built_directly_render_in_both_formats() -> None:
    t = Transcript(id="t", entries=(
        Entry(id="s", role="system", content="sys"),
        Entry(id="u", role="user", content="q", label=1.0),
        Entry(id="a", role="assistant", tool_calls=(ToolCall("k", "f", '{"a": 1}'),)),
        Entry(id="r", role="tool", content="res", name="f", tool_call_id="k"),
        Entry(id="o", role="tool", content="observation", name="shell"),
        Entry(id="e", role="assistant", content=""),
        Entry(id="b", role="assistant", content="bye"),
    ))
    assert t.to_openai() == [
        {"role": "system", "content": "sys"}, {"role": "user", "content": "q"},
        {"role": "assistant", "content": None, "tool_calls": [_call("k", "f", '{"a": 1}')]},
        {"role": "tool", "content": "res", "name": "f", "tool_call_id": "k"},
        {"role": "tool", "content": "observation", "name": "shell"},
        {"role": "assistant", "content": ""}, {"role": "assistant", "content": "bye"},
    ]
    out = t.to_anthropic()
    assert out == [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "k", "name": "f", "input": {"a": 1}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "k", "content": "res"},
                                     {"type": "text", "text": "observation"}]},
        {"role": "assistant", "content": "bye"},
    ]
    check_anthropic(out, t.anthropic_system(), alternate=True)


@pytest.mark.parametrize(("arguments", "expected"), [
    ('{"a": 1}', {"a": 1}), ("", {}), ("  ", {}), ("not json", {"_raw": "not json"}), ("[1, 2]", {"_raw": "[1, 2]"}),
], ids=["object", "empty", "blank", "broken-json", "not-an-object"])
def test_call_arguments_become_an_anthropic_input_object(arguments: str, expected: dict[str, Any]) -> None:
    t = Transcript(id="t", entries=(Entry(id="a", role="assistant", tool_calls=(ToolCall("k", "f", arguments),)),))
    assert t.to_anthropic()[0]["content"][0]["input"] == expected


# --------------------------------------------------------------------------
# Removed entries still render valid messages
# --------------------------------------------------------------------------


def _groups(t: Transcript) -> list[list[int]]:
    """Atomic groups: each call entry with its results; every other entry alone."""
    parents = t.parents()
    groups: dict[int, list[int]] = {}
    for i, p in enumerate(parents):
        groups.setdefault(p if p >= 0 else i, []).append(i)
    return list(groups.values())


def _subsets(t: Transcript, n: int, seed: int) -> list[Transcript]:
    rng = random.Random(seed)
    groups = _groups(t)
    out = []
    for k in range(n):
        keep = sorted(i for g in groups if rng.random() < (0.3 + 0.6 * k / n) for i in g)
        out.append(t.replace(entries=tuple(t.entries[i] for i in keep)))
    return out


@pytest.mark.parametrize("make", [openai_transcript, anthropic_transcript], ids=["from-openai", "from-anthropic"])
def test_removing_whole_groups_keeps_both_renderings_valid(make: Any) -> None:
    for sub in _subsets(make(), 150, seed=7):
        check_openai(sub.to_openai())
        out = sub.to_anthropic()
        check_anthropic(out, sub.anthropic_system())
        kept = [e.content for e in sub.entries if e.role != "system" and e.content]
        back = [e.content for e in from_anthropic(out).entries if e.content]
        assert "\n".join(back) == "\n".join(kept)  # nothing lost or invented (neighbours may be merged)


def test_removing_part_of_an_anthropic_message_rebuilds_it() -> None:
    t = anthropic_transcript()
    drop = {"m2.2"}
    out = t.replace(entries=tuple(e for e in t.entries if e.id not in drop)).to_anthropic()
    assert out[2] == {"role": "user", "content": ANTHROPIC[2]["content"][:2]}
    drop = {"m5", "m6"}  # a call with its result: the neighbours are messages as given
    out = t.replace(entries=tuple(e for e in t.entries if e.id not in drop)).to_anthropic()
    assert out == ANTHROPIC[:5] + ANTHROPIC[7:]


def test_emptied_entries_leave_no_empty_message() -> None:
    t = _changed(anthropic_transcript(), u4="", m3="")
    out = t.to_anthropic()
    assert len(out) == len(ANTHROPIC) - 2
    check_anthropic(out, t.anthropic_system())
    t = _changed(openai_transcript(), m6="", m5="")
    check_anthropic(t.to_anthropic(), t.anthropic_system(), alternate=True)


# --------------------------------------------------------------------------
# Conversion between providers
# --------------------------------------------------------------------------


def _shape(t: Transcript) -> list[tuple[Any, ...]]:
    return [(e.role, e.content, e.tool_call_id, [(c.id, c.name, json.loads(c.arguments)) for c in e.tool_calls])
            for e in t.entries if e.role != "system"]


def test_openai_to_anthropic_is_valid_and_keeps_the_content() -> None:
    t = openai_transcript()
    out, system = t.to_anthropic(), t.anthropic_system()
    check_anthropic(out, system, alternate=True)
    assert out[0]["content"][1] == IMAGE | {"source": {"type": "base64", "media_type": "image/png", "data": PNG}}
    back = from_anthropic(out, system=system)
    assert _shape(back) == _shape(t)
    assert back.to_anthropic() == out and back.anthropic_system() == system


def test_anthropic_to_openai_is_valid_and_keeps_the_content() -> None:
    t = anthropic_transcript()
    out = t.to_openai()
    check_openai(out)
    assert out[0] == {"role": "system", "content": "You are an airline agent."}
    assert out[1]["content"][1] == {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}
    assert out[2]["content"] == "Let me check." and [c["id"] for c in out[2]["tool_calls"]] == ["tu1", "tu2"]
    back = from_openai(out)
    assert _shape(back) == _shape(t)
    assert back.to_openai() == out


def test_reused_call_ids_get_unique_anthropic_ids() -> None:
    t = Transcript.from_openai(OPENAI_CASES["reused-call-id"])
    out = t.to_anthropic()
    check_anthropic(out, alternate=False)
    assert [b["id"] for m in out for b in m["content"] if b["type"] == "tool_use"] == ["c", "c_2"]
    assert [b["tool_use_id"] for m in out for b in m["content"] if b["type"] == "tool_result"] == ["c", "c_2"]


def test_call_ids_anthropic_refuses_are_rewritten() -> None:
    t = Transcript.from_openai([
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [_call("fn.get:0", "f"), _call("fn_get_0", "g")]},
        {"role": "tool", "tool_call_id": "fn.get:0", "content": "1"},
        {"role": "tool", "tool_call_id": "fn_get_0", "content": "2"},
    ])
    out = t.to_anthropic()
    check_anthropic(out, alternate=True)
    assert [b["id"] for b in out[1]["content"]] == ["fn_get_0_2", "fn_get_0"]
    assert [b["tool_use_id"] for b in out[2]["content"]] == ["fn_get_0_2", "fn_get_0"]
    assert Transcript.from_anthropic(out).to_anthropic() == out


def test_out_of_order_openai_result_is_placed_right_after_its_call() -> None:
    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [_call("a", "f"), _call("b", "f")]},
        {"role": "tool", "tool_call_id": "a", "content": "1"},
        {"role": "user", "content": "faster"},
        {"role": "tool", "tool_call_id": "b", "content": "2"},
    ]
    # OpenAI refuses this history (call 'b' is not answered before the user turn), so its reader does too ...
    with pytest.raises(TranscriptError, match=r"message 1 \(id 'm1', assistant\): tool call 'b' is not answered "
                                              r"before message 3 \(id 'm3', user\)"):
        Transcript.from_openai(messages)
    # ... but a Transcript built so (the data model allows it) renders with each result right after its call
    t = Transcript(id="t", entries=(
        Entry(id="m0", role="user", content="go"),
        Entry(id="m1", role="assistant", tool_calls=(ToolCall("a", "f"), ToolCall("b", "f"))),
        Entry(id="m2", role="tool", content="1", tool_call_id="a"),
        Entry(id="m3", role="user", content="faster"),
        Entry(id="m4", role="tool", content="2", tool_call_id="b"),
    ))
    out = t.to_anthropic()
    check_anthropic(out, alternate=True)
    assert [b.get("tool_use_id", b.get("text")) for b in out[2]["content"]] == ["a", "b", "faster"]


# --------------------------------------------------------------------------
# JSONL
# --------------------------------------------------------------------------


def test_jsonl_save_load_round_trip(tmp_path: Path) -> None:
    import numpy as np

    t1 = openai_transcript()
    t1 = t1.replace(domain="airline", meta={"reward": np.float64(1.0), "split": "train"}, entries=tuple(
        e.replace(label=0.5, meta={**e.meta, "needed_in": [3]}) if e.id == "m3" else e for e in t1.entries))
    t2 = Transcript(id="built", entries=(
        Entry(id="u", role="user", content="q\udc80 lone surrogate", label=np.float32(1.0)),
        Entry(id="a", role="assistant", tool_calls=(ToolCall("k", "f", "{}"),)),
        Entry(id="r", role="tool", content="", name="f", tool_call_id="k"),
        Entry(id="o", role="tool", content="obs", name="shell"),
    ))
    t3 = anthropic_transcript()
    path = save_transcripts([t1, t2, t3], tmp_path / "sub" / "out.jsonl")
    assert detect_layout(path) == "jsonl"
    back = load_transcripts(path)
    assert [t.id for t in back] == ["oa", "built", "an"]
    dumped = [{k: v for k, v in m.items() if k != "meta"} for m in jsonl.dump_transcript(t1)["messages"]]
    assert back[0].to_openai() == dumped and back[0].domain == "airline"
    assert back[0].meta == {"reward": 1.0, "split": "train"}
    assert back[0].entries[3].label == 0.5 and back[0].entries[3].public_meta == {"needed_in": [3]}
    for old, new in zip([t1, t2, t3], back):
        assert _shape(old) == _shape(new) and [e.id for e in old.entries] == [e.id for e in new.entries]
        assert [e.label for e in old.entries] == [e.label for e in new.entries]
        assert [e.name for e in old.entries] == [e.name for e in new.entries]
    assert back[1].entries[0].content == "q\udc80 lone surrogate"
    assert jsonl.dump_transcript(back[1]) == jsonl.dump_transcript(t2)
    assert not list(tmp_path.glob("sub/.*tmp"))


def test_jsonl_keeps_queries_and_unknown_keys(tmp_path: Path) -> None:
    line = {"id": "t", "messages": [{"role": "user", "content": "a", "meta": {"session": 2}}],
            "queries": [{"text": "q?", "evidence": ["m0"], "at": 1, "category": 4}], "source": {"run": 7}}
    path = tmp_path / "one.jsonl"
    path.write_text("\n" + json.dumps(line) + "\n\n", encoding="utf-8")
    (t,) = load_transcripts(path)
    assert t.queries[0].evidence == ("m0",) and t.queries[0].meta == {"category": 4}
    assert t.entries[0].public_meta == {"session": 2}
    assert jsonl.dump_transcript(t) == {**line, "messages": [{"id": "m0", **line["messages"][0]}]}


def test_jsonl_save_refuses_unserialisable_meta_and_keeps_the_file(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text("old\n", encoding="utf-8")
    bad = Transcript(id="bad", entries=(Entry(id="e", role="user", content="x", meta={"f": object()}),))
    with pytest.raises(TranscriptError, match=r"transcript 'bad': cannot be written as JSON \(a object is not"):
        save_transcripts([bad], path)
    assert path.read_text(encoding="utf-8") == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["t.jsonl"]


@pytest.mark.parametrize(("head", "expected"), [
    ('{"id": "t", "messages": [{"role": "user"', True),
    ('\ufeff\n\n{"messages": []}\n', True),
    ('{"id": "t", "messages": [ {"rol', True),
    ('{"state": {"history": [{"role": "user", "content": "\\"messages\\": x"}]}}', False),
    ('[{"task_id": 0, "traj": []}]', False),
    ('{"role": "User", "text": "hi"}', False),
    ("", False),
], ids=["canonical", "bom-and-blank-lines", "cut-off-line", "mint-like", "json-list", "api-bank-like", "empty"])
def test_jsonl_sniff(head: str, expected: bool) -> None:
    assert jsonl.sniff(Path("x.jsonl"), head) is expected


def test_load_transcripts_folders_and_files(tmp_path: Path) -> None:
    save_transcripts([openai_transcript()], tmp_path / "a.jsonl")
    (tmp_path / "README.md").write_text("notes", encoding="utf-8")
    (tmp_path / "empty.jsonl").write_bytes(b"")
    (tmp_path / "notes.txt").write_text("not a transcript", encoding="utf-8")
    assert [t.id for t in load_transcripts(tmp_path)] == ["oa"]
    assert load_transcripts(tmp_path / "empty.jsonl") == []
    with pytest.raises(FormatError, match=r"notes\.txt: not in a layout salience knows \(known: jsonl"):
        load_transcripts(tmp_path / "notes.txt")
    with pytest.raises(FormatError, match=r"missing: no such file or folder"):
        load_transcripts(tmp_path / "missing")
    (tmp_path / "a.jsonl").unlink()
    with pytest.raises(FormatError, match=r"no transcripts found in any layout salience knows"):
        load_transcripts(tmp_path)


# --------------------------------------------------------------------------
# Real data: the 200 tau-bench airline runs
# --------------------------------------------------------------------------


@functools.cache
def _tau_runs(path: Path) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))
    return runs


@pytest.fixture
def tau_trajs(shared: Any) -> list[list[dict[str, Any]]]:
    """The runs' messages (a fresh copy per test); skips when the shared data is absent."""
    path = shared("tau-bench-airline") / "gpt-4o-airline.json"
    return copy.deepcopy([run["traj"] for run in _tau_runs(path)])


@pytest.mark.shared
def test_taubench_openai_round_trips_exactly(tau_trajs: list[list[dict[str, Any]]]) -> None:
    assert len(tau_trajs) == 200
    for k, traj in enumerate(tau_trajs):
        snapshot = copy.deepcopy(traj)
        t = Transcript.from_openai(traj, id=f"run{k}")
        assert t.to_openai() == snapshot, k
        check_openai(t.to_openai())


@pytest.mark.shared
def test_taubench_converted_to_anthropic_is_valid_and_round_trips(tau_trajs: list[list[dict[str, Any]]]) -> None:
    renamed = 0
    for k, traj in enumerate(tau_trajs):
        t = Transcript.from_openai(traj, id=f"run{k}")
        messages, system = t.to_anthropic(), t.anthropic_system()
        check_anthropic(messages, system, alternate=True)
        assert isinstance(system, str) and system == traj[0]["content"]
        back = Transcript.from_anthropic(messages, system=system, id=f"run{k}")
        assert back.to_anthropic() == messages and back.anthropic_system() == system, k
        assert [e.content for e in back.entries if e.content] == [e.content for e in t.entries if e.content], k
        renamed += any(b["id"].endswith("_2") for m in messages if isinstance(m["content"], list)
                       for b in m["content"] if b["type"] == "tool_use")
    assert renamed == 49  # the runs that reuse an answered call id
