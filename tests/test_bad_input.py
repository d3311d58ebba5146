"""Bad input: each case either loads with its documented behaviour, or fails with a
TranscriptError naming the transcript, the message/entry (index and id) and the field.

The behaviours are documented in the docstrings of ``salience.transcript``,
``salience.messages.openai``, ``salience.messages.anthropic`` and ``salience.datasets.jsonl``.
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from salience import FormatError, Transcript, TranscriptError, count_tokens, load_transcripts, save_transcripts
from salience.datasets import jsonl
from salience.tokens import TokenCounter


def _call(cid: str, name: str = "f", arguments: Any = "{}") -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": arguments}}


USER = {"role": "user", "content": "hi"}
CALL = {"role": "assistant", "content": None, "tool_calls": [_call("c1")]}

# --------------------------------------------------------------------------
# OpenAI messages that are refused
# --------------------------------------------------------------------------

OPENAI_ERRORS: dict[str, tuple[Any, str]] = {
    "messages-not-a-list": ({"role": "user"},
                            r"transcript 't': messages must be a list of message mappings \(got a dict\)"),
    "messages-a-string": ("hello", r"transcript 't': messages must be a list .* \(got a str\)"),
    "message-not-a-mapping": ([USER, "hi"], r"transcript 't', message 1: expected a mapping with 'role' and 'content' "
                                            r"\(got 'hi'\)"),
    "unknown-role": ([USER, {"role": "robot", "content": "beep"}],
                     r"transcript 't', message 1 \(id 'm1'\): field 'role' must be one of 'system', 'developer', "
                     r"'user', 'assistant', 'tool', 'function' \(got 'robot'\)"),
    "capitalised-role": ([{"id": "u1", "role": "User", "content": "x"}],
                         r"message 0 \(id 'u1'\): field 'role' must be one of .* \(got 'User'\)"),
    "missing-role": ([{"content": "x"}], r"transcript 't', message 0 \(id 'm0'\): field 'role' is missing"),
    "int-content": ([{"role": "user", "content": 5}],
                    r"message 0 \(id 'm0'\): field 'content' must be a str, a list of content parts or null "
                    r"\(got 5 that is a int\)"),
    "dict-content": ([{"role": "user", "content": {"text": "x"}}], r"field 'content' must be a str, a list"),
    "bytes-content": ([{"role": "user", "content": b"\xff"}], r"field 'content' .* \(got b'\\xff' that is a bytes\)"),
    "part-not-a-mapping": ([{"role": "user", "content": [{"type": "text", "text": "a"}, 7]}],
                           r"field 'content\[1\]' must be a content part \(a mapping with a 'type'\) \(got 7"),
    "text-part-without-text": ([{"role": "user", "content": [{"type": "text", "text": None}]}],
                               r"field 'content\[0\].text' must be a str \(got None\)"),
    "tool-result-without-call": ([USER, {"role": "tool", "tool_call_id": "c9", "content": "42"}],
                                 r"transcript 't', entry 1 \(id 'm1'\): field 'tool_call_id' must name a call made by "
                                 r"an earlier assistant entry \(got 'c9', which no entry calls\)"),
    "tool-result-before-call": ([{"role": "tool", "tool_call_id": "c1", "content": "42"}, CALL],
                                r"entry 0 \(id 'm0'\): field 'tool_call_id' .*which only the later entry 1 calls"),
    "answered-twice": ([CALL, {"role": "tool", "tool_call_id": "c1", "content": "1"},
                        {"role": "tool", "tool_call_id": "c1", "content": "2"}],
                       r"entry 2 \(id 'm2'\): field 'tool_call_id' 'c1' is answered twice"),
    "call-id-reused-while-open": ([CALL, CALL], r"entry 1 \(id 'm1'\): field 'tool_calls' reuses the call id 'c1'"),
    "tool-calls-not-a-list": ([{"role": "assistant", "tool_calls": {"id": "c"}}],
                              r"field 'tool_calls' must be a list \(got \{'id': 'c'\} that is a dict\)"),
    "call-without-id": ([{"role": "assistant", "tool_calls": [{"function": {"name": "f"}}]}],
                        r"field 'tool_calls\[0\].id' must be a non-empty str \(got None\)"),
    "call-without-function": ([{"role": "assistant", "tool_calls": [{"id": "c"}]}],
                              r"field 'tool_calls\[0\].function' must be a mapping with 'name' and 'arguments'"),
    "arguments-a-dict": ([{"role": "assistant", "tool_calls": [_call("c", arguments={"a": 1})]}],
                         r"field 'tool_calls\[0\].function.arguments' must be a JSON str "
                         r"\(got \{'a': 1\} that is a dict"),
    "calls-on-a-user-message": ([{"role": "user", "content": "x", "tool_calls": [_call("c")]}],
                                r"field 'tool_calls' must be absent on a 'user' message"),
    "tool-call-id-on-assistant": ([{"role": "assistant", "content": "x", "tool_call_id": "c"}],
                                  r"field 'tool_call_id' must be absent on a 'assistant' message"),
    "int-name": ([{"role": "user", "content": "x", "name": 3}], r"field 'name' must be a str or null \(got 3 that is"),
    "label-out-of-range": ([{"role": "user", "content": "x", "label": 2}],
                           r"message 0 \(id 'm0'\): field 'label' must be a number in \[0, 1\] or null \(got 2 that"),
    "label-a-string": ([{"role": "user", "content": "x", "label": "yes"}], r"field 'label' must be a number .*'yes'"),
    "label-nan": ([{"role": "user", "content": "x", "label": float("nan")}], r"field 'label' must be a number"),
    "id-not-a-string": ([{"id": 7, "role": "user", "content": "x"}],
                        r"message 0: field 'id' must be a non-empty str \(got 7 that is a int\)"),
    "duplicate-ids": ([{"id": "a", "role": "user", "content": "x"}, {"id": "a", "role": "user", "content": "y"}],
                      r"transcript 't', entry 1 \(id 'a'\): field 'id' must be unique \(entry 0 has the same id\)"),
}


@pytest.mark.parametrize(("messages", "match"), list(OPENAI_ERRORS.values()), ids=list(OPENAI_ERRORS))
def test_openai_bad_input_is_a_clear_error(messages: Any, match: str) -> None:
    snapshot = copy.deepcopy(messages)
    with pytest.raises(TranscriptError, match=match) as info:
        Transcript.from_openai(messages, id="t")
    assert info.value.__cause__ is None or isinstance(info.value.__cause__, TranscriptError)
    assert messages == snapshot  # untouched


# --------------------------------------------------------------------------
# Anthropic messages that are refused
# --------------------------------------------------------------------------

TOOL_USE = {"role": "assistant", "content": [{"type": "tool_use", "id": "tu1", "name": "f", "input": {}}]}

ANTHROPIC_ERRORS: dict[str, tuple[Any, Any, str]] = {
    "system-message-in-list": ([{"role": "system", "content": "s"}], None,
                               r"message 0 \(id 'm0'\): field 'role' must be 'user' or 'assistant' \(the system "
                               r"prompt is given separately\) \(got 'system'\)"),
    "int-content": ([{"role": "user", "content": 1}], None,
                    r"field 'content' must be a str or a list of content blocks"),
    "missing-content": ([{"role": "user"}], None, r"message 0 \(id 'm0'\): field 'content' is missing"),
    "block-without-type": ([{"role": "user", "content": [{"text": "x"}]}], None,
                           r"field 'content\[0\]' must be a content block \(a mapping with a 'type'\)"),
    "text-block-int": ([{"role": "user", "content": [{"type": "text", "text": 1}]}], None,
                       r"field 'content\[0\].text' must be a str \(got 1 that is a int\)"),
    "result-without-tool-use": ([{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "x"}]}], None,
                                r"transcript 't', message 0 \(id 'm0'\): field 'content\[0\].tool_use_id' "
                                r"must be the id of a tool_use block of an earlier assistant message \(got 'x'\)"),
    "result-answered-twice": ([TOOL_USE, {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "tu1"}, {"type": "tool_result", "tool_use_id": "tu1"}]}], None,
        r"message 1 \(id 'm1'\): field 'content\[1\].tool_use_id' must be the id of a tool_use that no earlier"),
    "duplicate-tool-use-id": ([TOOL_USE, {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu1"}]},
                               TOOL_USE], None,
                              r"message 2 \(id 'm2'\): field 'content\[0\].id' must be unique"),
    "tool-use-without-name": ([{"role": "assistant", "content": [{"type": "tool_use", "id": "a"}]}], None,
                              r"field 'content\[0\].name' must be a str \(got None\)"),
    "tool-result-content-int": ([TOOL_USE, {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "tu1", "content": 5}]}], None,
        r"field 'content\[0\].content' must be a str or a list of content blocks \(got 5"),
    "input-not-json": ([{"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "f",
                                                           "input": {"s": {1, 2}}}]}], None,
                       r"field 'content\[0\].input' must be JSON-serialisable"),
    "system-int": ([USER], 5, r"transcript 't': field 'system' must be a str, a list of text blocks or None"),
}


@pytest.mark.parametrize(("messages", "system", "match"), list(ANTHROPIC_ERRORS.values()), ids=list(ANTHROPIC_ERRORS))
def test_anthropic_bad_input_is_a_clear_error(messages: Any, system: Any, match: str) -> None:
    with pytest.raises(TranscriptError, match=match):
        Transcript.from_anthropic(messages, system=system, id="t")


# --------------------------------------------------------------------------
# Odd input that loads, with its documented behaviour
# --------------------------------------------------------------------------


def _unanswered(t: Transcript) -> None:
    assert t.unanswered_calls() == ["c1"]


def _empty(t: Transcript) -> None:
    assert [e.content for e in t.entries] == ["", ""]


def _image_only(t: Transcript) -> None:
    assert t.entries[0].content == ""


def _broken_arguments(t: Transcript) -> None:
    assert t.entries[0].tool_calls[0].arguments == '{"a": 1'


def _odd_text(t: Transcript) -> None:
    assert t.entries[0].content == "nul\x00 bell\x07 lone\udc80 rtl\u202e"
    assert count_tokens(t.entries[0].content) > 0


def _free_observation(t: Transcript) -> None:
    assert (t.entries[0].role, t.entries[0].tool_call_id, t.entries[0].name) == ("tool", None, "f")


OPENAI_LOADS: dict[str, tuple[list[dict[str, Any]], Callable[[Transcript], None]]] = {
    "call-never-answered": ([USER, CALL], lambda t: _unanswered(t)),
    "empty-and-null-content": ([{"role": "user", "content": ""}, {"role": "user", "content": None}], _empty),
    "missing-content": ([{"role": "user"}, {"role": "assistant"}], _empty),
    "image-only-content": ([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://x"}}]}],
                           _image_only),
    "broken-json-arguments": ([{"role": "assistant", "tool_calls": [_call("c", arguments='{"a": 1')]}],
                              _broken_arguments),
    "control-chars-and-lone-surrogate": ([{"role": "user", "content": "nul\x00 bell\x07 lone\udc80 rtl\u202e"}],
                                         _odd_text),
    "function-result-without-call-id": ([{"role": "function", "name": "f", "content": "1"}], _free_observation),
}


@pytest.mark.parametrize(("messages", "check"), list(OPENAI_LOADS.values()), ids=list(OPENAI_LOADS))
def test_openai_odd_input_loads_and_round_trips(messages: list[dict[str, Any]], check: Any, tmp_path: Path) -> None:
    snapshot = copy.deepcopy(messages)
    t = Transcript.from_openai(messages, id="t")
    check(t)
    assert t.to_openai() == snapshot
    (back,) = load_transcripts(save_transcripts([t], tmp_path / "t.jsonl"))
    assert [(e.role, e.content, e.tool_call_id) for e in back.entries] == [
        (e.role, e.content, e.tool_call_id) for e in t.entries]


def test_anthropic_tool_use_never_answered_loads() -> None:
    t = Transcript.from_anthropic([USER, TOOL_USE])
    assert t.unanswered_calls() == ["tu1"]
    assert t.to_anthropic() == [USER, TOOL_USE]


# --------------------------------------------------------------------------
# A 5 MB tool output
# --------------------------------------------------------------------------


def _big_output() -> str:
    row = '{"flight_number": "HAT%03d", "origin": "JFK", "destination": "SEA", "price": %d, "seats": [12, 3]}'
    rows = [row % (i % 1000, 100 + i % 900) for i in range(60_000)]
    text = "[" + ", ".join(rows) + "]"
    return text[:5_000_000]


def test_five_megabyte_tool_output_loads_and_counts(tmp_path: Path) -> None:
    big = _big_output()
    assert len(big) == 5_000_000
    messages = [USER, CALL, {"role": "tool", "tool_call_id": "c1", "content": big}]
    start = time.perf_counter()
    t = Transcript.from_openai(messages)
    counter = TokenCounter()
    n = counter.count_entry(t.entries[2])
    elapsed = time.perf_counter() - start
    assert n > 1_000_000 and elapsed < 20, (n, elapsed)
    assert t.entries[2].content is big  # not copied
    assert t.to_openai() == messages
    start = time.perf_counter()
    assert counter.count_entry(t.entries[2]) == n  # cached
    assert time.perf_counter() - start < 0.5
    path = save_transcripts([t], tmp_path / "big.jsonl")
    (back,) = load_transcripts(path)
    assert back.entries[2].content == big


# --------------------------------------------------------------------------
# JSONL files
# --------------------------------------------------------------------------

GOOD = {"id": "t1", "messages": [{"role": "user", "content": "hi"}]}


def _write(tmp_path: Path, lines: list[Any], name: str = "bad.jsonl") -> Path:
    path = tmp_path / name
    raw = b"".join((line if isinstance(line, bytes) else json.dumps(line).encode()) + b"\n" for line in lines)
    path.write_bytes(raw)
    return path


JSONL_ERRORS: dict[str, tuple[list[Any], type[Exception], str]] = {
    "malformed-json": ([GOOD, b'{"id": "t2", "messages": [', GOOD], FormatError,
                       r"bad\.jsonl:2: malformed JSON: Expecting value at column 27"),
    "truncated-last-line": ([GOOD, b'{"id": "t2", "messages": [{"role": "user"'], FormatError,
                            r"bad\.jsonl:2: malformed JSON"),
    "not-utf8": ([GOOD, GOOD, b'{"id": "t3", "messages": [{"role": "user", "content": "caf\xe9"}]}'], FormatError,
                 r"bad\.jsonl:3: not UTF-8 text \(byte 59 of the line: invalid continuation byte\)"),
    "unknown-role": ([{"id": "t1", "messages": [{"role": "user", "content": "a"}, {"role": "robot", "content": "b"}]}],
                     TranscriptError,
                     r"bad\.jsonl:1: transcript 't1', message 1 \(id 'm1'\): field 'role' must be one"),
    "tool-result-without-call": ([GOOD, {"id": "t2", "messages": [{"id": "x", "role": "tool", "tool_call_id": "c",
                                                                   "content": "1"}]}],
                                 TranscriptError, r"bad\.jsonl:2: transcript 't2', entry 0 \(id 'x'\): field "
                                                  r"'tool_call_id' must name a call"),
    "non-string-content": ([{"id": "t1", "messages": [{"role": "user", "content": 12}]}], TranscriptError,
                           r"bad\.jsonl:1: transcript 't1', message 0 \(id 'm0'\): field 'content' must be a str"),
    "line-not-an-object": ([GOOD, [1, 2]], TranscriptError,
                           r"bad\.jsonl:2: expected a JSON object with 'messages' \(got \[1, 2\]"),
    "messages-not-a-list": ([{"id": "t1", "messages": {"role": "user"}}], TranscriptError,
                            r"bad\.jsonl:1: transcript 't1': field 'messages' must be a list"),
    "message-not-an-object": ([{"id": "t1", "messages": ["hi"]}], TranscriptError,
                              r"bad\.jsonl:1: transcript 't1', message 0: expected a mapping"),
    "meta-not-an-object": ([{"id": "t1", "messages": [{"role": "user", "content": "a", "meta": [1]}]}],
                           TranscriptError,
                           r"bad\.jsonl:1: transcript 't1', message 0: field 'meta' must be an object"),
    "reserved-meta-key": ([{"id": "t1", "messages": [{"role": "user", "content": "a", "meta": {"_openai": 1}}]}],
                          TranscriptError, r"field 'meta' has keys starting with '_', which salience reserves"),
    "transcript-meta-not-an-object": ([{**GOOD, "meta": "x"}], TranscriptError,
                                      r"bad\.jsonl:1: transcript 't1': field 'meta' must be an object \(got 'x'\)"),
    "evidence-a-string": ([{**GOOD, "queries": [{"text": "q", "evidence": "m0"}]}], TranscriptError,
                          r"bad\.jsonl:1: transcript 't1', query 0: field 'evidence' must be a list of entry ids"),
    "evidence-unknown-id": ([{**GOOD, "queries": [{"text": "q", "evidence": ["m9"]}]}], TranscriptError,
                            r"bad\.jsonl:1: transcript 't1', query 0: field 'evidence' names entries that do "
                            r"not exist"),
    "query-without-text": ([{**GOOD, "queries": [{"evidence": []}]}], TranscriptError,
                           r"transcript 't1', query 0: expected an object with a str 'text'"),
    "query-at-negative": ([{**GOOD, "queries": [{"text": "q", "at": -2}]}], TranscriptError,
                          r"transcript 't1', query 0: query 'q': field 'at' must be a non-negative int"),
    "transcript-id-int": ([{"id": 5, "messages": []}], TranscriptError,
                          r"bad\.jsonl:1: transcript: field 'id' must be a non-empty str \(got 5\)"),
    "domain-int": ([{**GOOD, "domain": 1}], TranscriptError, r"bad\.jsonl:1: transcript 't1': field 'domain' must be"),
}


@pytest.mark.parametrize(("lines", "error", "match"), list(JSONL_ERRORS.values()), ids=list(JSONL_ERRORS))
def test_jsonl_bad_input_names_file_and_line(lines: list[Any], error: type[Exception], match: str,
                                             tmp_path: Path) -> None:
    path = _write(tmp_path, lines)
    with pytest.raises(error, match=match):
        jsonl.load(path)
    with pytest.raises(error, match=match):  # the same through the facade
        load_transcripts(path)


def test_jsonl_odd_but_valid_files_load(tmp_path: Path) -> None:
    path = tmp_path / "ok.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(GOOD).encode() + b"\n\n   \n" + json.dumps(
        {"messages": [{"role": "user", "content": "caf\u00e9 \U0001f600"}], "extra": [1]}).encode())
    first, second = load_transcripts(path)
    assert first.id == "t1" and second.id == "ok:4"  # default id: file stem and line
    assert second.entries[0].content == "caf\u00e9 \U0001f600"
    assert jsonl.dump_transcript(second)["extra"] == [1]


def test_a_failing_loader_is_reported_with_file_and_layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _write(tmp_path, [GOOD], name="ok.jsonl")

    def explode(p: Path) -> list[Transcript]:
        raise KeyError("deep inside")

    monkeypatch.setattr(jsonl, "load", explode)
    with pytest.raises(FormatError, match=r"ok\.jsonl: the jsonl loader failed: KeyError: 'deep inside'") as info:
        load_transcripts(path)
    assert isinstance(info.value.__cause__, KeyError)


# --------------------------------------------------------------------------
# Tool calls a provider would refuse: refused by every reader, naming the call
# --------------------------------------------------------------------------

CALL_AB = {"role": "assistant", "content": None, "tool_calls": [_call("a"), _call("b")]}
RESULT_A = {"role": "tool", "tool_call_id": "a", "content": "1"}
RESULT_B = {"role": "tool", "tool_call_id": "b", "content": "2"}
AGAIN = {"role": "user", "content": "well?"}
_NOT_ANSWERED = r"transcript 't', message {owner} \(id 'm{owner}', assistant\): tool call '{call}' is not answered " \
                r"before message {before} \(id 'm{before}', {role}\); providers refuse"

OPENAI_ORPHANS: dict[str, tuple[list[dict[str, Any]], str]] = {
    "call-then-user": ([USER, CALL, AGAIN], _NOT_ANSWERED.format(owner=1, call="c1", before=2, role="user")),
    "call-then-assistant": ([USER, CALL, {"role": "assistant", "content": "done"}],
                            _NOT_ANSWERED.format(owner=1, call="c1", before=2, role="assistant")),
    "half-answered-then-user": ([USER, CALL_AB, RESULT_A, AGAIN],
                                _NOT_ANSWERED.format(owner=1, call="b", before=3, role="user")),
    "result-after-a-user-turn": ([USER, CALL_AB, RESULT_A, AGAIN, RESULT_B],
                                 _NOT_ANSWERED.format(owner=1, call="b", before=3, role="user")),
    "call-then-free-observation": ([USER, CALL, {"role": "function", "name": "f", "content": "1"}],
                                   _NOT_ANSWERED.format(owner=1, call="c1", before=2, role="tool")),
    "call-then-next-call": ([USER, CALL_AB, RESULT_A, {"role": "assistant", "content": None,
                                                        "tool_calls": [_call("c")]}],
                            _NOT_ANSWERED.format(owner=1, call="b", before=3, role="assistant")),
}


@pytest.mark.parametrize(("messages", "match"), list(OPENAI_ORPHANS.values()), ids=list(OPENAI_ORPHANS))
def test_openai_unanswered_calls_before_more_turns_are_refused(messages: list[dict[str, Any]], match: str,
                                                               tmp_path: Path) -> None:
    from salience.messages.validate import check_openai
    from salience.scorer.baselines import RecencyScorer
    from salience.selector.compactor import Compactor

    assert check_openai(messages, allow_pending=True)  # OpenAI refuses these
    snapshot = copy.deepcopy(messages)
    with pytest.raises(TranscriptError, match=match):
        Transcript.from_openai(messages, id="t")
    with pytest.raises(TranscriptError, match=match.replace("'t'", "'transcript'")):
        Compactor(scorer=RecencyScorer()).compact(messages, budget=1_000)
    assert messages == snapshot
    path = _write(tmp_path, [{"id": "t", "messages": messages}], name="orphan.jsonl")
    with pytest.raises(TranscriptError, match=r"orphan\.jsonl:1: " + match):
        load_transcripts(path)


PENDING: dict[str, list[dict[str, Any]]] = {
    "call-at-the-end": [USER, CALL],
    "half-answered-at-the-end": [USER, CALL_AB, RESULT_A],
    "answered-then-waiting": [USER, CALL_AB, RESULT_A, RESULT_B, AGAIN, CALL],
}


@pytest.mark.parametrize("messages", list(PENDING.values()), ids=list(PENDING))
def test_calls_waiting_at_the_end_stay_valid(messages: list[dict[str, Any]]) -> None:
    from salience.messages.validate import check_openai

    assert check_openai(messages, allow_pending=True) == []
    t = Transcript.from_openai(messages)
    assert t.unanswered_calls() and t.to_openai() == messages


A_RESULT = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu1", "content": "1"}]}

ANTHROPIC_ORPHANS: dict[str, tuple[list[dict[str, Any]], str]] = {
    "tool-use-then-text": ([USER, TOOL_USE, AGAIN, A_RESULT],
                           _NOT_ANSWERED.format(owner=1, call="tu1", before=2, role="user")),
    "text-before-the-result": ([USER, TOOL_USE, {"role": "user", "content": [
        {"type": "text", "text": "x"}, {"type": "tool_result", "tool_use_id": "tu1"}]}],
        _NOT_ANSWERED.format(owner=1, call="tu1", before=2, role="user")),
    "tool-use-then-assistant": ([USER, TOOL_USE, {"role": "assistant", "content": "hm"}],
                                _NOT_ANSWERED.format(owner=1, call="tu1", before=2, role="assistant")),
}


@pytest.mark.parametrize(("messages", "match"), list(ANTHROPIC_ORPHANS.values()), ids=list(ANTHROPIC_ORPHANS))
def test_anthropic_tool_results_not_in_the_next_user_turn_are_refused(messages: list[dict[str, Any]],
                                                                      match: str) -> None:
    from salience.messages.validate import check_anthropic

    assert check_anthropic(messages, allow_pending=True, alternation=False)  # Anthropic refuses these
    snapshot = copy.deepcopy(messages)
    with pytest.raises(TranscriptError, match=match):
        Transcript.from_anthropic(messages, id="t")
    assert messages == snapshot


def test_anthropic_results_partly_given_at_the_end_stay_valid() -> None:
    use2 = {"role": "assistant", "content": [{"type": "tool_use", "id": "tu1", "name": "f", "input": {}},
                                             {"type": "tool_use", "id": "tu2", "name": "f", "input": {}}]}
    t = Transcript.from_anthropic([USER, use2, A_RESULT])
    assert t.unanswered_calls() == ["tu2"]


def test_langchain_unanswered_call_before_more_turns_is_refused() -> None:
    pytest.importorskip("langchain_core")
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    from salience.messages.langchain import from_langchain

    call = AIMessage("", tool_calls=[{"id": "c1", "name": "f", "args": {}}])
    with pytest.raises(TranscriptError, match=r"message 1 \(id 'm1', assistant\): tool call 'c1' is not answered "
                                              r"before message 2 \(id 'm2', user\)"):
        from_langchain([HumanMessage("go"), call, HumanMessage("well?")], id="t")
    assert from_langchain([HumanMessage("go"), call]).unanswered_calls() == ["c1"]
    assert len(from_langchain([HumanMessage("go"), call, ToolMessage("1", tool_call_id="c1")]).entries) == 3


def test_five_megabyte_tool_output_at_a_small_budget_is_capped_and_restored_exactly() -> None:
    """The issue's row: a 5 MB tool output with a 2,000-token budget fits (pins degrade, #14),
    and the capped original comes back exactly from the archive and through restore."""
    from salience.scorer.baselines import RecencyScorer
    from salience.selector.compactor import Compactor

    big = _big_output()
    messages = [{"role": "system", "content": "You help."}, USER, CALL,
                {"role": "tool", "tool_call_id": "c1", "content": big}]
    snapshot = copy.deepcopy(messages)
    result = Compactor(scorer=RecencyScorer()).compact(messages, budget=2_000)
    assert result.tokens <= 2_000
    assert "m3" in (*result.trimmed, *result.stubbed, *result.dropped)
    assert result.archive["m3"].content == big
    assert result.restore([*result.trimmed, *result.stubbed, *result.dropped]) == snapshot
    assert messages == snapshot
