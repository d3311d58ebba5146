"""The data model: Entry, ToolCall, Query, Transcript validation and navigation."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from salience import Entry, Query, Role, ToolCall, Transcript, TranscriptError


def call(i: int, cid: str = "c", name: str = "f") -> Entry:
    return Entry(id=f"a{i}", role="assistant", tool_calls=(ToolCall(cid, name, "{}"),))


def result(i: int, cid: str = "c") -> Entry:
    return Entry(id=f"r{i}", role="tool", content="ok", tool_call_id=cid)


# --------------------------------------------------------------------------
# Entry
# --------------------------------------------------------------------------


def test_entry_defaults_and_normalisation() -> None:
    e = Entry(id="e", role=Role.USER, content="hi", tool_calls=[], meta={"k": 1})
    assert (e.role, e.tool_calls, e.label, e.name, e.tool_call_id) == ("user", (), None, None, None)
    assert type(e.role) is str
    assert Entry(id="x", role="user", label=np.float32(0.5)).label == 0.5
    assert type(Entry(id="x", role="user", label=1).label) is float
    with pytest.raises(dataclasses.FrozenInstanceError):
        e.content = "changed"  # type: ignore[misc]


def test_entry_meta_is_copied_and_public_meta_hides_reserved_keys() -> None:
    meta = {"k": 1, "_openai": {"x": 1}}
    e = Entry(id="e", role="user", meta=meta)
    meta["k"] = 2
    assert e.meta["k"] == 1
    assert e.public_meta == {"k": 1}


def test_entry_replace_validates_again() -> None:
    e = Entry(id="e", role="assistant", content="long text")
    assert e.replace(content="short").content == "short" and e.content == "long text"
    match = r"entry 'e': field 'content' must be a str \(got None that is a NoneType"
    with pytest.raises(TranscriptError, match=match):
        e.replace(content=None)


def test_entry_text_covers_calls() -> None:
    e = Entry(id="e", role="assistant", content="look", tool_calls=(ToolCall("c", "search", '{"q": 1}'),))
    assert e.text == 'look\nsearch({"q": 1})'
    assert e.is_tool_call and not Entry(id="u", role="user").is_tool_call


def test_entry_equality_and_hash() -> None:
    a = Entry(id="e", role="user", content="x")
    assert a == Entry(id="e", role="user", content="x") and hash(a) == hash(Entry(id="e", role="user", content="x"))
    assert a != a.replace(content="y")
    assert len({a, a.replace(label=0.5)}) == 2


ENTRY_ERRORS: dict[str, tuple[dict[str, Any], str]] = {
    "empty-id": ({"id": "", "role": "user"}, r"entry: field 'id' must be a non-empty str \(got ''\)"),
    "int-id": ({"id": 3, "role": "user"}, r"entry: field 'id' must be a non-empty str \(got 3 that is a int\)"),
    "unknown-role": ({"id": "e", "role": "robot"}, r"entry 'e': field 'role' must be one of 'system', 'user', "
                                                   r"'assistant', 'tool' \(got 'robot'\)"),
    "bytes-content": ({"id": "e", "role": "user", "content": b"x"},
                      r"field 'content' must be a str \(got b'x' that is"),
    "int-name": ({"id": "e", "role": "tool", "name": 5}, r"field 'name' must be a str or None \(got 5 that is a int"),
    "calls-on-user": ({"id": "e", "role": "user", "tool_calls": (ToolCall("c", "f"),)},
                      r"field 'tool_calls' is only allowed on assistant entries \(got role 'user'\)"),
    "calls-not-toolcall": ({"id": "e", "role": "assistant", "tool_calls": ({"id": "c"},)},
                           r"field 'tool_calls' must be a tuple of ToolCall"),
    "call-id-on-user": ({"id": "e", "role": "user", "tool_call_id": "c"},
                        r"field 'tool_call_id' is only allowed on tool entries \(got role 'user'\)"),
    "empty-call-id": ({"id": "e", "role": "tool", "tool_call_id": ""},
                      r"field 'tool_call_id' must be a non-empty str or None \(got ''\)"),
    "label-too-big": ({"id": "e", "role": "user", "label": 1.5}, r"field 'label' must be a number in \[0, 1\] or None"),
    "label-nan": ({"id": "e", "role": "user", "label": float("nan")}, r"field 'label' must be a number in \[0, 1\]"),
    "label-bool": ({"id": "e", "role": "user", "label": True}, r"field 'label' must be a number .* \(got True that is"),
    "label-str": ({"id": "e", "role": "user", "label": "high"}, r"field 'label' must be a number .* \(got 'high'\)"),
    "meta-list": ({"id": "e", "role": "user", "meta": [1]},
                  r"field 'meta' must be a mapping \(got \[1\] that is a list"),
}


@pytest.mark.parametrize(("kwargs", "match"), list(ENTRY_ERRORS.values()), ids=list(ENTRY_ERRORS))
def test_entry_errors_name_field_expected_and_got(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(TranscriptError, match=match):
        Entry(**kwargs)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"id": "", "name": "f"}, r"tool call: field 'id' must be a non-empty str \(got ''\)"),
    ({"id": None, "name": "f"}, r"tool call: field 'id' must be a non-empty str \(got None"),
    ({"id": "c", "name": 1}, r"tool call 'c': field 'name' must be a str \(got 1 that is a int\)"),
    ({"id": "c", "name": "f", "arguments": {"a": 1}}, r"tool call 'c': field 'arguments' must be a str"),
], ids=["empty-id", "none-id", "int-name", "dict-arguments"])
def test_toolcall_errors(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(TranscriptError, match=match):
        ToolCall(**kwargs)


# --------------------------------------------------------------------------
# Query
# --------------------------------------------------------------------------


def test_query_normalises_evidence() -> None:
    assert Query("q", evidence=["a", "b"]).evidence == ("a", "b")
    assert Query("q", evidence="a").evidence == ("a",)
    assert Query("q").at is None


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"text": 1}, r"query: field 'text' must be a str \(got 1 that is a int\)"),
    ({"text": "q", "evidence": [1]}, r"query 'q': field 'evidence' must be a sequence of entry ids"),
    ({"text": "q", "at": -1}, r"query 'q': field 'at' must be a non-negative int or None \(got -1"),
    ({"text": "q", "at": True}, r"field 'at' must be a non-negative int or None \(got True"),
    ({"text": "q", "meta": "x"}, r"query 'q': field 'meta' must be a mapping \(got 'x'\)"),
], ids=["int-text", "int-evidence", "negative-at", "bool-at", "str-meta"])
def test_query_errors(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(TranscriptError, match=match):
        Query(**kwargs)


# --------------------------------------------------------------------------
# Transcript
# --------------------------------------------------------------------------


def test_transcript_accepts_lists_and_iterables() -> None:
    t = Transcript(id="t", entries=[call(0), result(0)], queries=(q for q in [Query("q", evidence=["r0"], at=2)]))
    assert isinstance(t.entries, tuple) and isinstance(t.queries, tuple) and len(t) == 2
    assert t.index("r0") == 1
    with pytest.raises(KeyError, match="transcript 't' has no entry 'zz'"):
        t.index("zz")


def test_transcript_parents_and_unanswered_calls() -> None:
    t = Transcript(id="t", entries=(
        Entry(id="u", role="user", content="go"),
        Entry(id="a", role="assistant", tool_calls=(ToolCall("x", "f"), ToolCall("y", "g"), ToolCall("z", "h"))),
        Entry(id="ry", role="tool", content="2", tool_call_id="y"),
        Entry(id="rx", role="tool", content="1", tool_call_id="x"),
        Entry(id="obs", role="tool", content="free-standing"),
    ))
    assert t.parents() == [-1, -1, 1, 1, -1]
    assert t.unanswered_calls() == ["z"]
    assert t.call_owner() == {"x": 1, "y": 1, "z": 1}


def test_transcript_reused_call_id_after_its_answer() -> None:
    t = Transcript(id="t", entries=(call(0), result(0), call(1), result(1), call(2)))
    assert t.parents() == [-1, 0, -1, 2, -1]
    assert t.unanswered_calls() == ["c"]
    assert all(p < i for i, p in enumerate(t.parents()))


TRANSCRIPT_ERRORS: dict[str, tuple[dict[str, Any], str]] = {
    "empty-id": ({"id": ""}, r"transcript: field 'id' must be a non-empty str"),
    "entries-str": ({"id": "t", "entries": "abc"}, r"transcript 't': field 'entries' must be a tuple or list of Entry"),
    "entry-not-entry": ({"id": "t", "entries": [{"role": "user"}]}, r"transcript 't', entry 0: expected an Entry"),
    "duplicate-id": ({"id": "t", "entries": [Entry(id="e", role="user"), Entry(id="e", role="user")]},
                     r"transcript 't', entry 1 \(id 'e'\): field 'id' must be unique \(entry 0 has the same id\)"),
    "missing-call": ({"id": "t", "entries": [result(0, "nope")]},
                     r"transcript 't', entry 0 \(id 'r0'\): field 'tool_call_id' must name a call made by an earlier "
                     r"assistant entry \(got 'nope', which no entry calls\)"),
    "result-before-call": ({"id": "t", "entries": [result(0), call(1)]},
                           r"entry 0 \(id 'r0'\): field 'tool_call_id' .* "
                           r"\(got 'c', which only the later entry 1 calls\)"),
    "answered-twice": ({"id": "t", "entries": [call(0), result(0), result(1)]},
                       r"entry 2 \(id 'r1'\): field 'tool_call_id' 'c' is answered twice \(entry 1 answered it"),
    "reuse-while-open": ({"id": "t", "entries": [call(0), call(1)]},
                         r"entry 1 \(id 'a1'\): field 'tool_calls' reuses the call id 'c' of entry 0, whose call is "
                         r"not answered yet"),
    "same-id-twice-in-one-entry": (
        {"id": "t", "entries": [Entry(id="a", role="assistant", tool_calls=(ToolCall("c", "f"), ToolCall("c", "g")))]},
        r"entry 0 \(id 'a'\): field 'tool_calls' reuses the call id 'c' of entry 0"),
    "domain-int": ({"id": "t", "domain": 3}, r"transcript 't': field 'domain' must be a str or None \(got 3"),
    "queries-str": ({"id": "t", "queries": "q"}, r"transcript 't': field 'queries' must be a sequence of Query"),
    "query-not-query": ({"id": "t", "queries": ["q"]}, r"transcript 't', query 0: expected a Query \(got 'q'\)"),
    "evidence-unknown": ({"id": "t", "entries": [Entry(id="e", role="user")], "queries": [Query("q", ("e", "x"))]},
                         r"transcript 't', query 0: field 'evidence' names entries that do not exist \(got \['x'\]\)"),
    "at-too-big": ({"id": "t", "entries": [Entry(id="e", role="user")], "queries": [Query("q", at=2)]},
                   r"query 0: field 'at' must be at most the number of entries, 1 \(got 2\)"),
    "meta-list": ({"id": "t", "meta": []}, r"transcript 't': field 'meta' must be a mapping"),
}


@pytest.mark.parametrize(("kwargs", "match"), list(TRANSCRIPT_ERRORS.values()), ids=list(TRANSCRIPT_ERRORS))
def test_transcript_errors_name_transcript_entry_and_field(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(TranscriptError, match=match):
        Transcript(**kwargs)


def test_transcript_replace_and_labels() -> None:
    t = Transcript(id="t", entries=(Entry(id="e", role="user", label=1.0), Entry(id="f", role="user")))
    assert t.labels == [1.0, None]
    assert t.replace(domain="airline").domain == "airline" and t.domain is None
    with pytest.raises(TranscriptError, match="field 'id' must be unique"):
        t.replace(entries=t.entries + (t.entries[0],))


def test_role_enum_is_a_str() -> None:
    assert Role.TOOL == "tool" and str(Role.ASSISTANT) == "assistant" and f"{Role.USER}" == "user"
    assert [r.value for r in Role] == ["system", "user", "assistant", "tool"]


@pytest.mark.parametrize(("entry", "acts"), [
    (Entry(id="a", role="assistant", content="Sure, here it is."), False),
    (Entry(id="a", role="assistant", content="<execute>print(1)</execute>"), True),
    (Entry(id="a", role="assistant", content="```\nls\n```"), True),
    (Entry(id="a", role="user", content="```\nls\n```"), False),  # a user's code is not the agent acting
    (Entry(id="a", role="assistant", tool_calls=(ToolCall("c", "search"),)), True),
    (Entry(id="a", role="tool", content="Observation: 3"), True),
])
def test_acts_tells_an_agent_from_a_conversation(entry: Entry, acts: bool) -> None:
    t = Transcript(id="t", entries=(Entry(id="u", role="user", content="hi"), entry))
    assert t.acts() is acts


def test_with_content_is_replace_without_validating_again() -> None:
    e = Entry(id="m1", role="tool", content="long text", name="f", tool_call_id="c1", label=1, meta={"k": [1]})
    a, b = e.with_content("short"), e.replace(content="short")
    assert a == b and hash(a) == hash(b)
    names = [f.name for f in dataclasses.fields(Entry)]
    assert [getattr(a, n) for n in names] == [getattr(b, n) for n in names]
    assert a.meta is not e.meta and a.meta == e.meta
    call = Entry(id="m2", role="assistant", content="", tool_calls=(ToolCall("c1", "f", "{}"),))
    assert call.with_content("x").tool_calls == call.tool_calls
    with pytest.raises(TranscriptError, match="content"):
        e.with_content(None)  # type: ignore[arg-type]
