"""The Compactor on hand-made OpenAI and Anthropic transcripts, and its sessions.

The helpers ``assert_openai_valid`` and ``assert_anthropic_valid`` check what the
providers' APIs require of tool calls; the property tests reuse them.
"""

from __future__ import annotations

import copy
import json
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from salience.bench.message_baselines import sliding_window
from salience.errors import BudgetError, FormatError, ParameterError, ScorerError
from salience.messages.dispatch import to_transcript
from salience.selector import scoring as scoring_module
from salience.selector.compactor import Compaction, Compactor, PrefixReuse, detect_format
from salience.selector.masking import Option, Phase, PhasePolicy
from salience.selector.params import DEFAULT_RETAIN
from salience.selector.render import SIZE_MIN, marker_ids
from salience.selector.run import Run
from salience.selector.session import CACHE_MIN, RESTART_GAIN
from salience.tokens import TokenCounter
from salience.tooltypes import ToolType
from salience.transcript import Transcript
from salience.values import extract_values


def words(text: str) -> int:
    return len(text.split())


COUNTER = TokenCounter(words)


# -- provider validity --------------------------------------------------------------------


def openai_unanswered(messages: Sequence[Mapping[str, Any]]) -> set[str]:
    """Call ids no tool message answers."""
    answered = {m.get("tool_call_id") for m in messages if m.get("role") == "tool"}
    return {c["id"] for m in messages for c in m.get("tool_calls") or [] if c["id"] not in answered}


def assert_openai_valid(messages: Sequence[Mapping[str, Any]], *, may_be_unanswered: set[str] = frozenset()) -> None:
    """Each tool message sits in the block of tool messages right after the assistant
    message that made its call; each call is answered in that block (unless listed)."""
    for i, m in enumerate(messages):
        if m["role"] == "tool":
            j = i - 1
            while j >= 0 and messages[j]["role"] == "tool":
                j -= 1
            assert j >= 0 and messages[j]["role"] == "assistant", f"tool message {i} follows no assistant message"
            ids = {c["id"] for c in messages[j].get("tool_calls") or []}
            assert m["tool_call_id"] in ids, (
                f"tool message {i} answers {m['tool_call_id']!r}, not a call of message {j}"
            )
        calls = m.get("tool_calls") or []
        if calls:
            block = set()
            k = i + 1
            while k < len(messages) and messages[k]["role"] == "tool":
                block.add(messages[k]["tool_call_id"])
                k += 1
            missing = {c["id"] for c in calls} - block - set(may_be_unanswered)
            assert not missing, f"calls {missing} of message {i} are not answered right after it"


def assert_anthropic_valid(messages: Sequence[Mapping[str, Any]], *, may_be_unanswered: set[str] = frozenset()) -> None:
    """Each tool_result is in the user message right after the assistant message with its
    tool_use; each tool_use is answered there (unless listed); no empty content lists."""
    for i, m in enumerate(messages):
        assert m["role"] in ("user", "assistant"), f"message {i} has role {m['role']!r}"
        content = m["content"]
        if isinstance(content, list):
            assert content, f"message {i} has an empty content list"
        blocks = content if isinstance(content, list) else []
        results = [b["tool_use_id"] for b in blocks if b.get("type") == "tool_result"]
        if results:
            assert m["role"] == "user", f"message {i}: tool_result blocks in a {m['role']} message"
            prev = messages[i - 1] if i > 0 else None
            uses = {b["id"] for b in (prev or {}).get("content", []) if isinstance(b, Mapping)
                    and b.get("type") == "tool_use"} if prev and isinstance(prev["content"], list) else set()
            assert prev is not None and prev["role"] == "assistant" and set(results) <= uses, (
                f"message {i}: tool results {results} do not answer the previous message's tool_use blocks"
            )
        uses = [b["id"] for b in blocks if b.get("type") == "tool_use"]
        if uses:
            nxt = messages[i + 1] if i + 1 < len(messages) else None
            answered = set()
            if nxt is not None and isinstance(nxt["content"], list):
                answered = {b.get("tool_use_id") for b in nxt["content"] if b.get("type") == "tool_result"}
            missing = set(uses) - answered - set(may_be_unanswered)
            assert not missing, f"tool_use {missing} of message {i} not answered in the next message"


# -- fixtures ----------------------------------------------------------------------------


def lines(prefix: str, n: int, per_line: int = 8) -> str:
    return "\n".join(" ".join(f"{prefix}{i}w{j}" for j in range(per_line)) for i in range(n))


RESERVATION = '{"reservation_id": "ZFA04Y", "user_id": "mia_li_3668",\n' + lines("res", 12) + '\n"flight": "HAT136"}'
USER = '{"user_id": "mia_li_3668", "name": "Mia Li",\n' + lines("usr", 10) + '\n"payment": "credit_card_4421486"}'
SEARCH = "flights JFK to SEA:\n" + lines("flt", 14) + "\nHAT039 departs 11:00"


def call(cid: str, name: str, **args: Any) -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


def openai_messages() -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": "You are an airline agent. Be brief."},
        {"role": "user", "content": "Hi, change reservation ZFA04Y for user mia_li_3668."},
        {"role": "assistant", "content": None, "tool_calls": [
            call("c1", "get_reservation_details", reservation_id="ZFA04Y"),
            call("c2", "get_user_details", user_id="mia_li_3668"),
        ]},
        {"role": "tool", "tool_call_id": "c1", "content": RESERVATION},
        {"role": "tool", "tool_call_id": "c2", "name": "get_user_details", "content": USER},
        {"role": "assistant", "content": "Your reservation ZFA04Y has flight HAT136. What should change?"},
        {"role": "user", "content": "Search flights from JFK to SEA on May 20."},
        {"role": "assistant", "content": "Searching now.", "tool_calls": [
            call("c3", "search_direct_flight", origin="JFK", destination="SEA"),
        ]},
        {"role": "tool", "tool_call_id": "c3", "content": SEARCH},
        {"role": "assistant", "content": "I found HAT039 at 11:00. Shall I book it?"},
        {"role": "user", "content": "Yes, book HAT039."},
    ]


SYSTEM = "You are an airline agent. Be brief."


def anthropic_messages() -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "Hi, change reservation ZFA04Y for user mia_li_3668."},
        {"role": "assistant", "content": [
            {"type": "text", "text": "Let me look both up."},
            {"type": "tool_use", "id": "t1", "name": "get_reservation_details", "input": {"reservation_id": "ZFA04Y"}},
            {"type": "tool_use", "id": "t2", "name": "get_user_details", "input": {"user_id": "mia_li_3668"}},
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": RESERVATION},
            {"type": "tool_result", "tool_use_id": "t2", "content": [{"type": "text", "text": USER}]},
        ]},
        {"role": "assistant", "content": "Your reservation ZFA04Y has flight HAT136. What should change?"},
        {"role": "user", "content": "Search flights from JFK to SEA on May 20."},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "t3", "name": "search_direct_flight", "input": {"origin": "JFK"}},
        ]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t3", "content": SEARCH}]},
        {"role": "assistant", "content": [{"type": "text", "text": "I found HAT039 at 11:00. Shall I book it?"}]},
        {"role": "user", "content": "Yes, book HAT039."},
    ]


class DictScorer:
    """Scores from a dict by entry id (default for the rest); records the queries it saw."""

    def __init__(self, scores: Mapping[str, float] | None = None, default: float = 0.5) -> None:
        self.scores = dict(scores or {})
        self.default = default
        self.queries: list[str | None] = []

    def score(self, transcript: Transcript, query: str | None = None) -> np.ndarray:
        self.queries.append(query)
        return np.array([self.scores.get(e.id, self.default) for e in transcript.entries])


class NoQueryScorer:
    """A scorer whose score() takes no query at all."""

    def score(self, transcript: Transcript) -> list[float]:
        return [0.5] * len(transcript.entries)


def make(**kwargs: Any) -> Compactor:
    kwargs.setdefault("scorer", DictScorer())
    kwargs.setdefault("counter", COUNTER)
    return Compactor(**kwargs)


def total_tokens(messages: Any, **kw: Any) -> int:
    return make().compact(messages, budget=10**9, **kw).tokens


STUB_RE = re.compile(r"^\[salience: archived (\S+?)(?: \((\d+) tokens\))?(?:: (.+))?\]$")


# -- basics -----------------------------------------------------------------------------------


def test_fits_returns_the_input_unchanged() -> None:
    messages = openai_messages()
    result = make().compact(messages, budget=100_000)
    assert result.messages == messages
    assert result.method == "fits" and result.scores is None and result.phase is None
    assert result.kept == tuple(f"m{i}" for i in range(len(messages)))
    assert not result.trimmed and not result.stubbed and not result.dropped and not result.archive
    assert result.tokens == result.source_tokens == sum(COUNTER.count_entry(e) for e in result.transcript.entries)


@pytest.mark.parametrize("fraction", [0.3, 0.5, 0.7, 0.9], ids=lambda f: f"budget-{f}")
def test_openai_result_is_valid_within_budget_and_restorable(fraction: float) -> None:
    messages = openai_messages()
    before = copy.deepcopy(messages)
    budget = int(total_tokens(messages) * fraction)
    result = make(pin_last=2).compact(messages, budget=budget)
    assert messages == before, "input mutated"
    assert result.tokens <= budget
    assert result.tokens == sum(COUNTER.count_entry(e) for e in result.transcript.entries)
    assert_openai_valid(result.messages)
    assert result.format == "openai" and result.system is None
    ids = [e.id for e in result.transcript.entries]
    assert ids == sorted(ids, key=lambda x: int(x[1:])), "order changed"
    assert {"m0", "m9", "m10"} <= set(result.kept), "pins must stay whole"
    # the parallel group: the call and both results are kept together or dropped together
    assert len({x in result.dropped for x in ("m2", "m3", "m4")}) == 1
    assert result.restore(list(result.archive)) == messages
    assert messages == before, "restore mutated the input"
    assert set(result.archive) == set(result.trimmed) | set(result.stubbed) | set(result.dropped)
    for x in result.archive:
        assert result.archive[x] == result.source.entries[int(x[1:])]


def test_stub_and_trim_renderings() -> None:
    messages = openai_messages()
    scorer = DictScorer({"m3": 0.01, "m4": 0.01, "m8": 0.3}, default=0.9)
    budget = total_tokens(messages) - 150
    result = make(scorer=scorer, pin_last=2, trim_keep=0.2).compact(messages, budget=budget)
    assert result.tokens <= budget
    assert result.stubbed or result.trimmed
    by_id = {e.id: e for e in result.transcript.entries}
    for x in result.stubbed:
        content = by_id[x].content
        m = STUB_RE.match(content)
        assert m, content
        eid, tokens, values = m.groups()
        assert eid == x and marker_ids(content) == [x]
        original = result.archive[x]
        size = COUNTER.count_entry(original)
        assert (int(tokens) == size) if tokens else size < SIZE_MIN  # the size from SIZE_MIN tokens
        p = result.source.parents()[int(x[1:])]
        parent = result.source.entries[p] if p >= 0 else None
        if original.role == "tool":  # the stub names no tool: the call kept beside it does
            assert parent is not None
            named = [c.name for c in by_id[parent.id].tool_calls if c.id == original.tool_call_id]
            tools = {"m3": "get_reservation_details", "m4": "get_user_details", "m8": "search_direct_flight"}
            assert named == [tools[x]]
        calls = {v for c in (parent.tool_calls if parent else ()) for v in extract_values(c.arguments)}
        # a result's stub lists its values but those its call (kept beside it) already shows
        assert (values or "").split(", ")[:2] == [v for v in extract_values(original.content) if v not in calls][:2]
        assert len((values or "").split(", ")) <= 8
    for x in result.trimmed:
        content = by_id[x].content
        original = result.archive[x].content
        marker = re.search(
            r"\n?\[salience: trimmed (\d+) tokens(?: \((\d+) lines?\))? from (\S+); "
            r"restore id (\S+) via salience_restore\]\n?", content
        )
        assert marker and marker.group(3) == marker.group(4) == x, content
        head, tail = content[: marker.start()], content[marker.end():]
        assert original.startswith(head) and original.endswith(tail)
        assert words(content) < words(original)


def test_exact_stub_line_for_a_tool_result() -> None:
    messages = openai_messages()
    scorer = DictScorer({"m3": 0.0}, default=0.95)
    budget = total_tokens(messages) - words(RESERVATION) + 25
    result = make(scorer=scorer, pin_last=0, critical=None, stub_values=3).compact(messages, budget=budget)
    assert result.choices["m3"] is Option.STUB
    tokens = COUNTER.count_entry(result.source.entries[3])
    assert result.messages[3]["content"] == (
        f"[salience: archived m3{f' ({tokens} tokens)' if tokens >= SIZE_MIN else ''}: res0w0, res0w1, res0w2]"
    )
    # ZFA04Y and mia_li_3668, the result's first values, are in the calls beside it, which stay
    assert "ZFA04Y" in result.messages[2]["tool_calls"][0]["function"]["arguments"]
    assert "mia_li_3668" in result.messages[2]["tool_calls"][1]["function"]["arguments"]
    assert result.messages[3]["tool_call_id"] == "c1"


def test_dropped_group_and_restore_brings_the_whole_group_back() -> None:
    messages = openai_messages()
    scorer = DictScorer({"m2": 0.0, "m3": 0.0, "m4": 0.0}, default=0.9)
    pins_cost = sum(COUNTER.count_entry(e) for e in Transcript.from_openai(messages).entries[5:])
    budget = pins_cost + COUNTER.count_entry(Transcript.from_openai(messages).entries[0]) + 20
    # no digest: the tail's plain assistant text stays whole to compare with below
    result = make(scorer=scorer, pin_last=6, digest=0).compact(messages, budget=budget)
    assert {"m2", "m3", "m4"} <= set(result.dropped)
    restored = result.restore(["m4"])  # a result whose call was dropped: the call and its sibling come back
    assert_openai_valid(restored)
    assert restored[:1] == result.messages[:1]
    back = {json.dumps(m, sort_keys=True) for m in restored}
    for i in (2, 3, 4):
        assert json.dumps(messages[i], sort_keys=True) in back
    assert restored[-6:] == messages[-6:]
    assert result.restore([]) == result.messages
    assert result.restore("m0") == result.messages  # kept ids are ignored
    with pytest.raises(KeyError, match="no entry with id 'm99'"):
        result.restore(["m99"])


def test_assistant_with_calls_keeps_its_calls_when_its_text_is_cut() -> None:
    messages = openai_messages()
    messages[7]["content"] = "Searching now. " + lines("think", 12)
    scorer = DictScorer({"m7": 0.0}, default=0.9)
    # Less than the newest entries from m7 on cost whole: a sliding window stops after m7, so it
    # is not an action held whole; its result (m8, pinned) keeps it in some form.
    budget = total_tokens(messages[:1]) + total_tokens(messages[7:]) - 40
    result = make(scorer=scorer, pin_last=2, critical=None).compact(messages, budget=budget)
    assert result.choices["m7"] in (Option.TRIM, Option.STUB)
    out = {e.id: e for e in result.transcript.entries}
    assert out["m7"].tool_calls == result.source.entries[7].tool_calls
    assert [m for m in result.messages if m.get("tool_calls")][-1]["tool_calls"] == messages[7]["tool_calls"]
    assert_openai_valid(result.messages)


# -- Anthropic ---------------------------------------------------------------------------------


@pytest.mark.parametrize("fraction", [0.3, 0.6, 0.9], ids=lambda f: f"budget-{f}")
def test_anthropic_round_trip_validity_and_restore(fraction: float) -> None:
    messages = anthropic_messages()
    before = copy.deepcopy(messages)
    budget = int(total_tokens(messages, system=SYSTEM) * fraction)
    result = make(pin_last=2).compact(messages, system=SYSTEM, budget=budget)
    assert messages == before
    assert result.format == "anthropic"
    assert result.system == SYSTEM
    assert result.tokens <= budget
    assert_anthropic_valid(result.messages)
    assert result.restore(list(result.archive)) == messages
    assert result.restore_transcript(list(result.archive)).anthropic_system() == SYSTEM
    # the two parallel results (entries m2 and m2.1) share their fate and their user message
    assert ("m2" in result.dropped) == ("m2.1" in result.dropped) == ("m1" in result.dropped)


def test_anthropic_stub_is_a_tool_result_block() -> None:
    messages = anthropic_messages()
    scorer = DictScorer({"m2": 0.0}, default=0.95)
    budget = total_tokens(messages, system=SYSTEM) - words(RESERVATION) + 25
    # no digest: it would trim the sibling to list m2's values beside it
    result = make(scorer=scorer, pin_last=0, critical=None, digest=0).compact(messages, system=SYSTEM, budget=budget)
    assert result.choices["m2"] is Option.STUB
    block = result.messages[2]["content"][0]
    assert block["type"] == "tool_result" and block["tool_use_id"] == "t1"
    assert STUB_RE.match(block["content"]).group(1) == "m2"
    # the stub names no tool: the call beside it does
    assert [b["name"] for b in result.messages[1]["content"] if b.get("id") == "t1"] == ["get_reservation_details"]
    assert result.messages[2]["content"][1] == messages[2]["content"][1]  # the sibling stays as it was
    assert_anthropic_valid(result.messages)


def test_anthropic_keeps_the_newest_request_where_a_stub_of_the_first_turn_would_take_its_room() -> None:
    messages = anthropic_messages()
    newest = messages[-1]
    budget = total_tokens([newest], system=SYSTEM)  # the newest request alone fits, and no more
    source, fmt = to_transcript(messages, system=SYSTEM, format=None)
    run = Run(make()._config(budget), source, fmt)
    _, costs, allowed = run.options()
    first = next(i for i, e in enumerate(source.entries) if e.role != "system")
    held = allowed.copy()
    held[[0, -1]] = [True, False, False, False]  # the system prompt and the newest request whole ...
    held[first, 3] = False  # ... beside the first user turn in some form (what Anthropic's rule held before)
    assert run.min_cost(held, costs) > budget
    result = make().compact(messages, system=SYSTEM, budget=budget)
    assert result.messages == [newest] and result.tokens <= budget
    assert_anthropic_valid(result.messages)
    dropped = source.entries[first]
    assert result.choices[dropped.id] is Option.DROP and result.archive[dropped.id] == dropped


def test_an_anthropic_session_keeps_the_newest_request_too() -> None:
    """A session (what AnthropicContext runs) chooses its opening the way compact does."""
    messages = anthropic_messages()
    budget = total_tokens([messages[-1]], system=SYSTEM)
    session = make().session(budget=budget, trigger=1.0, min_removal=0)
    result = session.compact(messages, system=SYSTEM)
    assert result.messages == [messages[-1]] and session.triggered
    assert_anthropic_valid(result.messages)
    # the next turn: the settled drops stay dropped, and the messages still open with a user turn
    longer = [*messages, {"role": "assistant", "content": "Booked HAT039."}, {"role": "user", "content": "Thanks!"}]
    again = session.compact(longer, system=SYSTEM)
    assert again.messages[0]["role"] == "user" and again.tokens <= budget
    assert_anthropic_valid(again.messages)


def test_anthropic_holds_the_first_user_turn_where_the_selection_would_open_with_the_assistant() -> None:
    messages = [
        {"role": "user", "content": "Summarise the incident report for ticket INC-4471 please."},
        {"role": "assistant", "content": "The outage began at 09:12 when the primary database failed over; "
                                         "ticket INC-4471 lists three follow-ups for the storage team."},
        {"role": "user", "content": "ok"},
        {"role": "assistant", "content": "The follow-ups are: replace disk 7, patch the controller, and rerun the "
                                         "failover drill on Friday at 14:00."},
    ]
    scorer = DictScorer({"m0": 0.0, "m2": 0.0}, default=1.0)
    everything = total_tokens(messages, system=SYSTEM)
    for budget in range(everything // 2, everything):
        result = make(scorer=scorer, pin_last=1, pin_last_user=False, digest=0).compact(
            messages, system=SYSTEM, budget=budget)
        assert result.messages[0]["role"] == "user", budget
        assert_anthropic_valid(result.messages)
        if result.choices["m1"] is not Option.DROP:  # the assistant's words kept: a user turn opens the list
            assert result.choices["m0"] is not Option.DROP


def test_anthropic_system_blocks_come_back_as_given() -> None:
    system = [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}]
    result = make(pin_last=2).compact(anthropic_messages(), system=system, budget=120)
    assert result.system == system and result.system is not system


# -- formats ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("messages", "system", "expected"),
    [
        ([{"role": "user", "content": "hi"}], None, "openai"),
        ([{"role": "user", "content": "hi"}], "sys", "anthropic"),
        ([{"role": "user", "content": [{"type": "text", "text": "hi"}]}], None, "openai"),
        ([{"role": "user", "content": [{"type": "image", "source": {"type": "base64"}}]}], None, "anthropic"),
        ([{"role": "assistant", "content": [{"type": "tool_use", "id": "x", "name": "f", "input": {}}]}], None,
         "anthropic"),
        ([{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}], None, "openai"),
        (Transcript(id="t"), None, "transcript"),
    ],
    ids=["plain", "system-kwarg", "text-parts", "anthropic-image", "tool-use", "openai-system", "transcript"],
)
def test_detect_format(messages: Any, system: Any, expected: str) -> None:
    assert detect_format(messages, system=system) == expected


def test_mixed_formats_are_an_error() -> None:
    messages = [{"role": "system", "content": "s"}] + anthropic_messages()
    with pytest.raises(FormatError, match="messages mix formats.*message 0 is OpenAI-style"):
        make().compact(messages)
    with pytest.raises(FormatError, match="must be a Transcript or a list"):
        make().compact("hello")


def test_format_can_be_forced_and_transcripts_come_back_as_transcripts() -> None:
    t = Transcript.from_openai(openai_messages(), id="demo", domain="airline")
    result = make(pin_last=2).compact(t, budget=150)
    assert isinstance(result.messages, Transcript) and result.messages is result.transcript
    assert result.messages.id == "demo" and result.messages.domain == "airline"
    assert result.restore(list(result.archive)) == t
    as_openai = make(pin_last=2).compact(t, budget=150, format="openai")
    assert as_openai.messages == result.transcript.to_openai()
    as_transcript = make(pin_last=2).compact(openai_messages(), budget=150, format="transcript")
    assert isinstance(as_transcript.messages, Transcript)
    with pytest.raises(ValueError, match="format must be one of 'openai', 'anthropic', 'transcript'"):
        make().compact(openai_messages(), format="langchain")
    with pytest.raises(ValueError, match="system= is only for Anthropic"):
        make().compact(openai_messages(), system="x", format="openai")


# -- budgets ----------------------------------------------------------------------------------


@pytest.mark.parametrize("budget", [0, -5, 2.5, "8k", True], ids=["zero", "negative", "float", "str", "bool"])
def test_budget_must_be_a_positive_int(budget: Any) -> None:
    with pytest.raises(ValueError, match=r"budget must be a positive int number of tokens \(got "):
        make().compact(openai_messages(), budget=budget)
    with pytest.raises(ValueError, match="budget must be a positive int"):
        make(budget=budget).compact(openai_messages())


def test_pins_degrade_oldest_first_before_anything_raises() -> None:
    messages = openai_messages()
    entries = Transcript.from_openai(messages).entries
    whole = sum(COUNTER.count_entry(e) for e in entries if e.id in {"m0", "m7", "m8", "m9", "m10"})
    assert whole > 30  # system + the last 4 do not fit whole
    result = make(pin_last=4).compact(messages, budget=30)
    assert result.tokens <= 30 and not result.over_budget
    assert {"m0", "m10"} <= set(result.kept)  # the system prompt and the newest pin stay whole
    degraded = [x for x in ("m7", "m8", "m9") if result.choices[x] is not Option.FULL]
    assert degraded, result.choices
    # older pins give way first: a pin is whole only if every newer pin is whole
    order = ["m7", "m8", "m9", "m10"]
    for older, newer in zip(order, order[1:]):
        if result.choices[older] is Option.FULL:
            assert result.choices[newer] is Option.FULL, result.choices
    assert_openai_valid(result.messages)


def test_budget_error_only_when_the_system_prompt_does_not_fit() -> None:
    messages = openai_messages()
    system = COUNTER.count_entry(Transcript.from_openai(messages).entries[0])
    result = make(pin_last=4).compact(messages, budget=system + 1)
    assert result.tokens <= system + 1 and "m0" in result.kept
    with pytest.raises(BudgetError, match=r"too small .*its system prompt, kept whole .* need \d+ tokens") as info:
        make(pin_last=4).compact(messages, budget=system - 1)
    err = info.value
    # the system prompt and the last four entries that are not the assistant's plain text
    assert err.budget == system - 1 and err.required == system and err.pins == 5


def test_keep_pins_returns_the_system_prompt_whole_flagged() -> None:
    messages = openai_messages()
    system = COUNTER.count_entry(Transcript.from_openai(messages).entries[0])
    result = make(pin_last=3, on_over_budget="keep_pins").compact(messages, budget=system - 1)
    assert result.over_budget and result.tokens == system
    assert result.kept == ("m0",)
    assert_openai_valid(result.messages)
    assert "OVER BUDGET" in result.summary()


def test_critical_pins_are_soft() -> None:
    messages = openai_messages()
    scorer = DictScorer({"m3": 0.99}, default=0.1)
    result = make(scorer=scorer, pin_last=2).compact(messages, budget=70)  # m3 alone does not fit with the pins
    assert result.tokens <= 70
    assert result.choices["m3"] is not Option.FULL


def test_critical_entries_escape_phase_masking() -> None:
    t = Transcript.from_openai(openai_messages(), domain="airline")
    budget = total_tokens(t) - 5
    # CONFIRM-like phase: searches are stubbed at most, unless critical
    masked = make(scorer=DictScorer({"m8": 0.9}), pin_last=1).compact(t, budget=budget, phase="confirm")
    assert masked.choices["m8"] in (Option.STUB, Option.DROP) and masked.phase is Phase.CONFIRM
    critical = make(scorer=DictScorer({"m8": 0.99}), pin_last=1).compact(t, budget=budget, phase="confirm")
    assert critical.choices["m8"] is Option.FULL


def test_phase_masking_by_domain_and_forced_phase() -> None:
    t = Transcript.from_openai(openai_messages(), domain="airline")
    budget = total_tokens(t) - 5
    result = make(pin_last=1, critical=None).compact(t, budget=budget)
    assert result.phase is Phase.LOOKUP  # the last call was a search
    assert result.choices["m8"] is not Option.FULL  # LOOKUP trims searches (share 0.5 of the budget)
    free = make(pin_last=1, critical=None, policy=PhasePolicy.chat()).compact(t, budget=budget)
    assert free.phase is Phase.CHAT
    with pytest.raises(ValueError, match="phase must be one of policy 'customer_service'"):
        make().compact(t, budget=budget, phase="verify")


def test_a_policy_of_your_own_travels_in_a_json_profile(tmp_path: Path) -> None:
    t = Transcript.from_openai(openai_messages(), domain="airline")
    budget = total_tokens(t) - 5
    # the default customer-service policy trims searches while looking up; this one keeps them whole
    mine = PhasePolicy.customer_service()
    mine = mine.replace(rules={**mine.rules, Phase.LOOKUP: {**mine.rules[Phase.LOOKUP], ToolType.SEARCH: Option.FULL}})
    assert mine.as_dict()["rules"]["lookup"]["search"] == ["full", None]
    # no digest, which here lists the trimmed search's values under either policy
    as_object = make(pin_last=1, critical=None, digest=0, policy=mine).compact(t, budget=budget)
    default = make(pin_last=1, critical=None, digest=0).compact(t, budget=budget)
    assert as_object.choices != default.choices
    path = tmp_path / "profile.json"
    path.write_text(json.dumps({"compactor": {"pin_last": 1, "critical": None, "digest": 0,
                                              "policy": mine.as_dict()}}))
    from_file = make(profile=path).compact(t, budget=budget)
    assert from_file.choices == as_object.choices and from_file.phase is Phase.LOOKUP
    # a mapping passed directly is read the same way, never changed, and read again once changed
    data = mine.as_dict()
    compactor = make(pin_last=1, critical=None, digest=0, policy=data)
    assert compactor.compact(t, budget=budget).choices == as_object.choices
    assert data == mine.as_dict()
    data["rules"]["lookup"]["search"] = ["stub", None]
    assert compactor.compact(t, budget=budget).choices["m8"] in (Option.STUB, Option.DROP)


def test_a_compactor_pickles_after_use_with_a_policy_and_a_profile_file(tmp_path: Path) -> None:
    import pickle

    t = Transcript.from_openai(openai_messages(), domain="airline")
    budget = total_tokens(t) - 5
    path = tmp_path / "profile.json"
    path.write_text(json.dumps({"compactor": {"pin_last": 1, "critical": None}}))
    for policy in (PhasePolicy.customer_service(), PhasePolicy.customer_service().as_dict()):
        compactor = make(policy=policy, profile=path)
        first = compactor.compact(t, budget=budget)
        again = pickle.loads(pickle.dumps(compactor)).compact(t, budget=budget)
        assert again.choices == first.choices and again.phase is first.phase
    # the profile file is read again once it changed
    path.write_text(json.dumps({"compactor": {"pin_last": 0, "pin_last_user": False, "budget": 40}}))
    assert compactor.compact(t).budget == 40


def test_a_compaction_and_a_session_pickle() -> None:
    import pickle

    messages = openai_messages()
    result = make(pin_last=2).compact(messages, budget=150)
    again = pickle.loads(pickle.dumps(result))
    assert (again.kept, again.trimmed, again.stubbed, again.dropped) == (result.kept, result.trimmed, result.stubbed,
                                                                         result.dropped)
    assert again.messages == result.messages and dict(again.choices) == dict(result.choices)
    assert again.restore(list(result.archive)) == messages
    assert again.scores is not None and not again.scores.flags.writeable
    with pytest.raises(TypeError):
        again.choices["m1"] = Option.DROP  # type: ignore[index]
    # a session saved mid-run carries on exactly as the one that stayed
    h = history(12)
    session = make(pin_last=2).session(budget=500)
    for k in range(5, 30):
        session.compact(h[:k])
    saved = pickle.loads(pickle.dumps(session))
    before = saved.compactions
    for k in range(30, len(h) + 1):
        a, b = session.compact(h[:k]), saved.compact(h[:k])
        assert a.messages == b.messages and session.prefix_reuse == saved.prefix_reuse
    assert session.compactions == saved.compactions > before > 0  # it compacted before and after the save
    # one saved by a version without restart_gain, cache_min and the system prompt's count carries on with the
    # defaults, but keeps its prefix at any size, as that version did
    old = make(pin_last=2).session(budget=500)
    old.compact(h[:20])
    del old.__dict__["restart_gain"], old.__dict__["_floor"], old.__dict__["cache_min"]
    loaded = pickle.loads(pickle.dumps(old))
    assert loaded.restart_gain == RESTART_GAIN and loaded.compact(h).tokens <= 500
    assert loaded.cache_min == 0 and loaded.stable


def test_max_entry_tokens_trims_on_the_way_in() -> None:
    messages = openai_messages()
    messages[8]["content"] = lines("big", 60)
    result = make(max_entry_tokens=200).compact(messages, budget=100_000)
    assert result.method == "fits"
    assert result.trimmed == ("m8",) and result.choices["m8"] is Option.TRIM
    assert COUNTER.count_entry(result.transcript.entries[8]) <= 200
    assert "[salience: trimmed" in result.messages[8]["content"]
    assert result.archive["m8"].content == messages[8]["content"]
    assert result.restore(["m8"]) == messages


# -- scorers --------------------------------------------------------------------------------


def test_query_reaches_the_scorer_and_scorers_without_query_work() -> None:
    scorer = DictScorer()
    make(scorer=scorer, pin_last=2).compact(openai_messages(), budget=150, query="book HAT039")
    make(scorer=scorer, pin_last=2).compact(openai_messages(), budget=150)
    assert scorer.queries == ["book HAT039", None]
    assert make(scorer=NoQueryScorer(), pin_last=2).compact(openai_messages(), budget=150).tokens <= 150


class BadScorer:
    def __init__(self, out: Any) -> None:
        self.out = out

    def score(self, transcript: Transcript, query: str | None = None) -> Any:
        return self.out(len(transcript.entries))


@pytest.mark.parametrize(
    ("out", "match"),
    [
        (lambda n: np.zeros(n - 1), r"must return shape \(11,\)"),
        (lambda n: np.full(n, np.nan), r"scores must be in \[0, 1\] \(got nan for entry 'm0'\)"),
        (lambda n: np.full(n, 1.5), r"got 1.5 for entry 'm0'"),
        (lambda n: ["x"] * n, "must return an array of numbers"),
    ],
    ids=["shape", "nan", "above-one", "strings"],
)
def test_bad_scores_raise_scorer_error(out: Any, match: str) -> None:
    with pytest.raises(ScorerError, match=match):
        make(scorer=BadScorer(out)).compact(openai_messages(), budget=150)


def test_default_scorer_falls_back_to_a_prior_when_the_model_module_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    scoring_module.fallback_scorer.cache_clear()
    monkeypatch.setitem(sys.modules, "salience.scorer.model", None)  # import raises ImportError
    try:
        result = Compactor(counter=COUNTER, pin_last=2).compact(openai_messages(), budget=150)
        assert scoring_module.fallback_scorer().__class__.__name__ == "_PriorScorer"
    finally:
        scoring_module.fallback_scorer.cache_clear()
    assert result.tokens <= 150
    assert result.scores is not None and result.scores[-1] > result.scores[1]  # recency prior


# -- parameters ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"pin_last": -1}, "parameter 'pin_last' must be an int >= 0"),
        ({"pin_system": "yes"}, "parameter 'pin_system' must be a bool"),
        ({"critical": 1.5}, r"parameter 'critical' must be a number in \(0, 1\] or None"),
        ({"max_entry_tokens": 0}, "parameter 'max_entry_tokens' must be a positive int or None"),
        ({"trim_keep": 1.0}, "parameter 'trim_keep' must be a float in"),
        ({"trim_keep": 0}, "parameter 'trim_keep'"),
        ({"stub_values": -1}, "parameter 'stub_values' must be an int >= 0"),
        ({"retain": {"trim": 2}}, r"parameter 'retain\['trim'\]' must be a number in \(0, 1\]"),
        ({"retain": {"trim": 0.1, "stub": 0.5}}, "at least as much for 'trim' as for 'stub'"),
        ({"retain": {"keep": 0.5}}, r"unknown keys \['keep'\]"),
        ({"solver": "fast"}, "parameter 'solver' must be one of 'auto', 'exact', 'greedy'"),
        ({"on_over_budget": "ignore"}, "parameter 'on_over_budget' must be one of 'raise', 'keep_pins'"),
        ({"policy": 3}, "parameter 'policy' must be a PhasePolicy, a domain name, a mapping"),
        ({"policy": {"name": "x", "rules": {"edit": {"read": ["keep", 0.5]}}}},
         r"parameter 'policy': PhasePolicy: rules\['edit'\]\['read'\] must be"),
        ({"scorer": object()}, r"parameter 'scorer' must have a score\(transcript, query=None\) method"),
        ({"counter": 3}, "parameter 'counter'"),
        ({"profile": {"nope": 1}}, r"parameter 'profile' has unknown keys \['nope'\]"),
        ({"profile": 5}, "parameter 'profile' must be a mapping"),
    ],
    ids=["pin_last", "pin_system", "critical", "max_entry_tokens", "trim_keep-float", "trim_keep-int",
         "stub_values", "retain-range", "retain-order", "retain-keys", "solver", "on_over_budget", "policy",
         "policy-mapping",
         "scorer", "counter", "profile-keys", "profile-type"],
)
def test_parameters_are_checked_at_compact_time(kwargs: dict, match: str) -> None:
    compactor = make(**kwargs)  # storing never fails
    with pytest.raises(ValueError, match=match):
        compactor.compact(openai_messages(), budget=150)


def test_scikit_learn_conventions() -> None:
    sklearn_base = pytest.importorskip("sklearn.base")
    c = make(budget=500, pin_last=2)
    params = c.get_params()
    assert params["budget"] == 500 and params["pin_last"] == 2 and "profile" in params
    clone = sklearn_base.clone(c)
    assert clone is not c and clone.get_params()["budget"] == 500
    assert c.set_params(pin_last=3) is c and c.pin_last == 3
    with pytest.raises(ValueError, match="unknown parameter 'pinlast'"):
        c.set_params(pinlast=1)
    assert repr(Compactor(budget=500)) == "Compactor(budget=500)"
    with pytest.raises(TypeError):
        Compactor(None)  # type: ignore[misc]  # keyword-only


def test_nested_set_params_reach_the_scorer() -> None:
    from salience.scorer.baselines import BM25Scorer

    c = make(scorer=BM25Scorer(k1=1.5), budget=500, pin_last=2)
    deep = c.get_params(deep=True)
    assert deep["scorer__k1"] == 1.5 and "scorer__k1" not in c.get_params(deep=False)
    assert c.set_params(scorer__k1=0.9, budget=400) is c
    assert c.scorer.k1 == 0.9 and c.budget == 400
    with pytest.raises(ValueError, match="unknown parameter 'scorr__k1'"):
        c.set_params(scorr__k1=1.0)
    assert c.compact(openai_messages(), budget=150).tokens <= 150


def test_clone_copies_parameters_not_caches() -> None:
    sklearn_base = pytest.importorskip("sklearn.base")
    from salience.scorer.baselines import BM25Scorer

    policy = PhasePolicy.for_domain("airline").as_dict()
    c = make(scorer=BM25Scorer(k1=1.2), budget=150, pin_last=2, policy=policy, retain={"trim": 0.5})
    first = c.compact(openai_messages())
    assert "_cache" in c.__dict__
    twin = sklearn_base.clone(c)
    assert "_cache" not in twin.__dict__ and twin.scorer is not c.scorer and twin.scorer.k1 == 1.2
    assert twin.get_params(deep=False).keys() == c.get_params(deep=False).keys()
    assert twin.retain == {"trim": 0.5} and twin.retain is not c.retain
    again = twin.compact(openai_messages())
    assert again.messages == first.messages and again.choices == first.choices
    assert repr(twin) == repr(c) and repr(twin).startswith("Compactor(")


def test_a_session_fast_path_result_equals_a_full_one(monkeypatch: pytest.MonkeyPatch) -> None:
    from salience.selector import session as session_module

    messages = openai_messages()
    session = make().session(budget=10_000)
    session.compact(messages[:6])
    with monkeypatch.context() as m:
        m.setattr(session_module, "Run", None)  # the fast path builds no Run
        fast = session.compact(messages)  # only appends, below the trigger
    full = make().session(budget=10_000).compact(messages)
    for name in ("messages", "kept", "trimmed", "stubbed", "dropped", "tokens", "budget", "format", "method",
                 "source_tokens", "system", "over_budget"):
        assert getattr(fast, name) == getattr(full, name), name
    assert dict(fast.archive) == dict(full.archive) and dict(fast.choices) == dict(full.choices)


def test_profile_fills_defaults_and_explicit_values_win(tmp_path: Path) -> None:
    messages = openai_messages()
    scorer = DictScorer({"m0": 0.0, "m8": 0.0}, default=0.9)
    base = make(scorer=scorer).compact(messages, budget=190)
    assert "m0" in base.kept and "m8" not in base.kept  # the system prompt and the last entry are pinned
    # the last three: the search result m8, the assistant's answer m9 (plain text, never
    # pinned) and the user's turn m10
    tuned = make(scorer=scorer, profile={"pin_last": 3, "pin_system": False}).compact(messages, budget=190)
    assert "m0" not in tuned.kept and "m8" in tuned.kept
    explicit = make(scorer=scorer, pin_last=0, profile={"pin_last": 3}).compact(messages, budget=190)
    assert "m8" not in explicit.kept
    path = tmp_path / "profile.json"
    path.write_text(json.dumps({"compactor": {"budget": 200, "pin_last": 2}}))
    assert make(profile=path).compact(messages).budget == 200
    with pytest.raises(ValueError, match="not a readable JSON file"):
        make(profile=tmp_path / "missing.json").compact(messages)


def test_summary_and_repr_are_short() -> None:
    result = make(pin_last=2).compact(openai_messages(), budget=150)
    line = result.summary()
    assert "\n" not in line and len(line) < 160
    assert re.match(r"11 entries -> \d+ kept(, \d+ trimmed)?(, \d+ stubbed)?(, \d+ dropped)?; [\d,]+ -> \d+ tokens "
                    r"\(budget 150(, phase \w+)?\)$", line), line
    assert repr(result).startswith("Compaction(openai: 11 entries")
    assert isinstance(result, Compaction)
    assert result.scores is not None and not result.scores.flags.writeable


def test_empty_input() -> None:
    result = make().compact([], budget=10)
    assert result.messages == [] and result.tokens == 0 and result.kept == ()


# -- sessions ---------------------------------------------------------------------------------------


def history(steps: int, *, size: int = 6) -> list[dict[str, Any]]:
    """An agent loop's history: per step a user turn, a call, its result, an answer."""
    out: list[dict[str, Any]] = [{"role": "system", "content": "You help."}]
    for s in range(steps):
        out.append({"role": "user", "content": f"question {s} about item{s}x"})
        out.append({"role": "assistant", "content": None, "tool_calls": [call(f"c{s}", "lookup_item", n=s)]})
        out.append({"role": "tool", "tool_call_id": f"c{s}", "content": lines(f"s{s}r", size)})
        out.append({"role": "assistant", "content": f"answer {s}: item{s}x is fine"})
    return out


def test_session_is_a_noop_below_the_trigger() -> None:
    session = make(pin_last=2).session(budget=10_000)
    h = history(3)
    first = session.compact(h)
    assert first.messages == h and not session.triggered and session.prefix_reuse is None
    second = session.compact(history(4))
    assert second.messages == history(4)
    assert session.prefix_reuse == PrefixReuse(messages=len(h), share=1.0, tokens=first.tokens)


def test_session_settles_decisions_and_keeps_the_prefix() -> None:
    budget = 400
    session = make(pin_last=3, scorer=DictScorer(default=0.5)).session(budget=budget, trigger=0.9, min_removal=0.2,
                                                                       cache_min=0)
    assert session.target == 360 - 80
    settled: dict[str, Any] = {}
    triggers = 0
    previous = None
    for steps in range(1, 25):
        h = history(steps)
        before = copy.deepcopy(h)
        result = session.compact(h)
        assert h == before
        assert result.tokens <= budget
        assert_openai_valid(result.messages)
        out = {e.id: e for e in result.transcript.entries}
        if session.recompacted:
            settled = {}
        for x, rendering in settled.items():  # nothing once settled ever changes
            assert out.get(x) == rendering, x
        for x in result.trimmed + result.stubbed:
            settled.setdefault(x, out[x])
        for x in result.dropped:
            settled.setdefault(x, None)
        if session.triggered:
            triggers += 1
            assert result.tokens <= session.target or result.tokens <= budget
        elif previous is not None:
            assert session.prefix_reuse is not None and session.prefix_reuse.share == 1.0
            assert result.messages[: len(previous.messages)] == previous.messages
        previous = result
    assert triggers >= 2 and session.compactions == triggers
    assert session.full_recompactions == 0
    assert result.restore(list(result.archive)) == history(24)


def test_session_headroom_is_a_share_of_the_room_above_the_system_prompt() -> None:
    # A system prompt of most of the budget: headroom as a share of the whole budget would free more
    # than the history can give; as a share of the room above it, the history keeps its share.
    h = history(12)
    h[0] = {"role": "system", "content": " ".join(["rule"] * 250)}
    system = COUNTER.count_entry(Transcript.from_openai(h[:1]).entries[0])
    budget = system + 100
    session = make(pin_last=2).session(budget=budget, trigger=0.9, min_removal=0.2, cache_min=0)
    for steps in range(1, 13):
        result = session.compact(h[: 1 + 4 * steps])
        assert session.room == 100 and session.limit == system + 90 and session.target == system + 90 - 20
        assert result.tokens <= (session.limit if not session.triggered else budget)
        if session.triggered and not result.over_budget:
            assert result.tokens <= session.target or session.recompacted
    assert session.compactions >= 2
    # A system prompt over the budget: the limit is the budget, never above it (so the call compacts,
    # and with the system prompt a hard pin, says it does not fit).
    over = make(pin_last=0).session(budget=system // 2)
    with pytest.raises(BudgetError):
        over.compact(h[:5])
    assert over.room == 0 and over.limit == system // 2


@pytest.mark.parametrize("gain", [RESTART_GAIN, None], ids=["default", "never"])
def test_a_session_starts_over_where_its_earlier_decisions_cost_too_much(gain: float | None) -> None:
    # The entries a first compaction dropped turn out to matter most (their scores rise to 1 from 0.05):
    # an answer from scratch keeps them, worth far more than what the settled drops allow.
    scorer = DictScorer(default=0.05)
    session = make(pin_last=2, scorer=scorer).session(budget=300, restart_gain=gain, cache_min=0)
    h = history(12)
    first = session.compact(h[:33])
    assert session.triggered and first.dropped[:3] == ("m1", "m2", "m3")
    scorer.scores = {"m1": 1.0, "m2": 1.0, "m3": 1.0}
    second = session.compact(h[:37])
    assert session.triggered and second.tokens <= 300
    assert_openai_valid(second.messages)
    if gain is None:  # settled drops stand
        assert not session.recompacted and {"m1", "m2", "m3"} <= set(second.dropped)
    else:
        assert session.recompacted and session.full_recompactions == 1
        assert not {"m1", "m2", "m3"} & set(second.dropped)
    assert second.restore(list(second.archive)) == h[:37]
    # Scores as they were: no answer from scratch is worth twice the settled one, and the session goes on.
    scorer.scores = {}
    session.compact(h[:41])
    assert session.full_recompactions == (0 if gain is None else 1)


def test_a_session_with_little_room_compacts_as_compact_does() -> None:
    # Under cache_min tokens of room (no provider caches a prompt under 1,024 tokens) a stable prefix
    # is not worth what it costs: no headroom below the budget, and settled decisions give way wherever
    # an answer from scratch is worth more, whatever trigger, min_removal and restart_gain say.
    scorer = DictScorer(default=0.05)
    compactor = make(pin_last=2, scorer=scorer)
    session = compactor.session(budget=300, trigger=0.9, min_removal=0.2, restart_gain=None)
    h = history(12)
    first = session.compact(h[:33])
    assert session.cache_min == CACHE_MIN and not session.stable
    assert session.triggered and session.limit == 300 and session.target == 300
    assert first.messages == compactor.compact(h[:33], budget=300).messages
    scorer.scores = {"m1": 1.0, "m2": 1.0, "m3": 1.0}
    second = session.compact(h[:37])
    assert session.recompacted and not {"m1", "m2", "m3"} & set(second.dropped)
    assert second.messages == compactor.compact(h[:37], budget=300).messages
    # cache_min=0: the same session keeps its prefix at any size (its headroom, its settled drops)
    scorer.scores = {}
    stable = compactor.session(budget=300, trigger=0.9, min_removal=0.2, restart_gain=None, cache_min=0)
    stable.compact(h[:33])
    assert stable.stable and stable.limit < 300 and stable.target < stable.limit
    scorer.scores = {"m1": 1.0, "m2": 1.0, "m3": 1.0}
    assert {"m1", "m2", "m3"} <= set(stable.compact(h[:37]).dropped)
    with pytest.raises(ParameterError, match="cache_min"):
        compactor.session(budget=300, cache_min=-1)
    with pytest.raises(ParameterError, match="cache_min"):
        compactor.session(budget=300, cache_min=True)


def test_session_prefix_reuse_on_a_later_trigger() -> None:
    session = make(pin_last=3).session(budget=400, trigger=0.9, min_removal=0.2)
    reuse = []
    for steps in range(1, 25):
        session.compact(history(steps))
        if session.triggered and session.compactions > 1:
            reuse.append(session.prefix_reuse)
    assert reuse, "expected a second compaction"
    assert all(r is not None and r.messages >= 1 and r.tokens > 0 for r in reuse)


def test_session_recompacts_when_settled_decisions_cannot_fit() -> None:
    session = make(pin_last=1, pin_system=False).session(budget=300, trigger=0.9, min_removal=0.1)
    h = history(8)
    session.compact(h)
    assert session.triggered and session.compactions == 1
    assert any(o is not Option.FULL and o is not Option.DROP for o in session._last.choices.values())
    # A last user turn so large that only dropping the old stubs makes room.
    stub_cost = sum(COUNTER.count_entry(e) for e in session._last.transcript.entries
                    if session._last.choices[e.id] is not Option.FULL)
    big = {"role": "user", "content": " ".join(["word"] * (300 - 4 - stub_cost // 2))}
    result = session.compact(h + [big])
    assert session.recompacted and session.full_recompactions == 1
    assert result.tokens <= 300


def test_session_starts_over_when_the_history_changes() -> None:
    session = make(pin_last=2).session(budget=400)
    for steps in range(1, 12):
        session.compact(history(steps))
    other = history(5, size=7)
    result = session.compact(other)
    assert session.resets == 1
    assert result.tokens <= 400


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"budget": 0}, "budget must be a positive int"),
        ({"trigger": 0.0}, r"trigger must be a number in \(0, 1\]"),
        ({"trigger": 1.5}, "trigger"),
        ({"min_removal": 1.0}, r"min_removal must be a float in \[0, 1\)"),
        ({"min_removal": -3}, "min_removal"),
        ({"restart_gain": -0.1}, r"restart_gain must be a number >= 0 or None"),
        ({"restart_gain": "0.1"}, "restart_gain"),
        ({"restart_gain": float("inf")}, "restart_gain"),
    ],
    ids=["budget", "trigger-zero", "trigger-above-one", "removal-share", "removal-negative", "gain-negative",
         "gain-str", "gain-inf"],
)
def test_session_parameters(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        make().session(**kwargs)


# -- real transcripts (skipped without ../shared/data) -----------------------------------------------

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def _shared(name: str) -> Path:
    path = SHARED / name
    if not path.exists():
        pytest.skip(f"shared data set {name!r} not found at {path} (put ../shared/data beside the repo)")
    return path


@pytest.mark.shared
@pytest.mark.parametrize(("name", "fmt"), [("tau-bench-airline", "openai"), ("swe-agent", "anthropic")],
                         ids=["tau-bench-openai", "swe-agent-anthropic"])
def test_real_transcripts_stay_valid_within_budget(name: str, fmt: str) -> None:
    from salience import load_transcripts

    transcripts = load_transcripts(_shared(name))[:8]
    for t in transcripts:
        compactor = Compactor(scorer=DictScorer(default=0.5), counter=COUNTER, pin_system=False, pin_last=2,
                              policy=t.domain, on_over_budget="keep_pins")
        if fmt == "openai":
            messages, kwargs = t.to_openai(), {}
        else:
            messages, kwargs = t.to_anthropic(), {"system": t.anthropic_system() or "You code."}
        before = copy.deepcopy(messages)
        full = compactor.compact(messages, budget=10**9, **kwargs).tokens
        result = compactor.compact(messages, budget=max(1, full // 4), **kwargs)
        assert messages == before
        assert result.tokens <= full // 4 or result.over_budget
        if fmt == "openai":
            assert_openai_valid(result.messages, may_be_unanswered=set(t.unanswered_calls()))
        else:
            assert_anthropic_valid(result.messages, may_be_unanswered=set(t.unanswered_calls()))
        assert result.restore(list(result.archive)) == messages


def test_state_changing_actions_outlast_reads_of_the_same_score() -> None:
    """An edit the agent made (call kept, result at least a stub) stays before reads do."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You fix bugs."},
                                      {"role": "user", "content": "Fix the rounding bug."}]
    for k, name in enumerate(["read_file", "edit_file", "read_file", "read_file"]):
        calls = [call(f"c{k}", name, path=f"src/m{k}.py")]
        messages.append({"role": "assistant", "content": None, "tool_calls": calls})
        messages.append({"role": "tool", "tool_call_id": f"c{k}", "content": f"result {k} " + "text " * 40})
    messages.append({"role": "user", "content": "Done?"})
    flat = make(scorer=DictScorer(default=0.1))
    budget = total_tokens(messages) // 3
    result = flat.compact(messages, budget=budget)
    assert result.tokens <= budget
    assert result.choices["m4"] is not Option.DROP and result.choices["m5"] is not Option.DROP  # the edit, its result
    assert any(result.choices[x] is Option.DROP for x in ("m2", "m6", "m8"))  # some read gave way instead


def test_code_actions_in_the_reply_stay_whole_before_observations() -> None:
    """An agent that acts in its reply's text (MINT's ``<execute>``, a fenced block) keeps
    those actions whole, as observation masking does; observations give way first, even
    the cheaper ones."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Sum the squares below ten, then their cubes."}]
    for k in range(4):
        code = "\n".join(f"total_{j} = sum(i ** {j} for i in range({k}))" for j in range(3))
        messages.append({"role": "assistant", "content": f"<execute>\n{code}\n</execute>"})
        messages.append({"role": "tool", "name": "python", "content": f"Observation: {k} out"})
    # The task pinned: what is left beside it and the actions holds no observation (unpinned,
    # the task gives way to the newest cheap observation once the actions are whole).
    flat = make(scorer=DictScorer(default=0.1), pin_last_user=True)
    budget = total_tokens(messages) // 2
    result = flat.compact(messages, budget=budget)
    assert result.tokens <= budget
    kept = [x for x in ("m1", "m3", "m5", "m7") if result.choices[x] is Option.FULL]
    assert len(kept) >= 2
    # every observation older than the newest kept action gave way, though each is cheaper
    assert all(result.choices[f"m{i + 1}"] is Option.DROP for i in (1, 3, 5) if f"m{i + 2}" in kept)


def test_a_last_user_turn_larger_than_the_budget_is_not_pinned() -> None:
    """MINT-style: the task is the only (so the last) user turn and alone costs more than
    the budget. Pinned, it would be kept as a stub that leaves no room for the newest
    action; unpinned, the action and its observation stay whole."""
    task = "Solve the task below and write the answer in a solution block. " + "rule " * 300
    messages = [
        {"role": "user", "content": task},
        {"role": "assistant", "content": "<execute>\nprint(sorted([3, 1, 2]))\n</execute>\n" + "why " * 40},
        {"role": "tool", "name": "python", "content": "Observation:\n[1, 2, 3]"},
    ]
    # pin_last_user=True (off by default): the last user turn is pinned when newer entries came after it
    flat = make(scorer=DictScorer({"m0": 0.4}, default=0.5), pin_last_user=True)
    budget = total_tokens(messages[1:]) + 2  # the action and the observation fit, not a stub beside them
    result = flat.compact(messages, budget=budget)
    assert result.tokens <= budget
    assert result.choices["m1"] is Option.FULL and result.choices["m2"] is Option.FULL
    # a last user turn that fits is pinned as before, whatever its score
    fits = total_tokens(messages[:1]) + total_tokens(messages[2:]) + 2
    pinned = make(scorer=DictScorer({"m0": 0.0}, default=0.5), pin_last_user=True).compact(messages, budget=fits)
    assert pinned.choices["m0"] is Option.FULL and pinned.choices["m1"] is Option.DROP


def test_the_assistants_plain_last_words_are_not_pinned() -> None:
    """API-Bank-style: the newest entry is the assistant's "Thank you." and the budget holds
    one message. Pinned, it would crowd out the user's credentials that the next call needs;
    unpinned, the scores decide. A newest call or code action stays pinned."""
    messages = [
        {"role": "user", "content": "Delete my reminder to call the dentist."},
        {"role": "assistant", "content": "Sure. What are your username and password?"},
        {"role": "user", "content": "My username is user4 and my password is user4pass."},
        {"role": "assistant", "content": "Thank you."},
    ]
    scorer = DictScorer({"m2": 0.8}, default=0.0)
    budget = total_tokens(messages[2:3]) + 1
    result = make(scorer=scorer, pin_last_user=False).compact(messages, budget=budget)
    assert result.tokens <= budget
    assert result.kept == ("m2",)
    acting = [*messages[:3], {"role": "assistant", "content": "```\ndelete_reminder(user='user4')\n```"}]
    result = make(scorer=scorer, pin_last_user=False).compact(acting, budget=total_tokens(acting[3:]) + 1)
    assert result.kept == ("m3",)


def test_a_turn_said_again_word_for_word_weighs_once() -> None:
    """API-Bank-style: the user gives the same credentials at each request. A second copy keeps
    nothing the newest does not, so the room goes to what else the user said; the scores
    reported stay the scorer's."""
    login = {"role": "user",
             "content": "My username is testuser, password is testpass, and email is testuser@example.com."}
    messages = [
        login,
        {"role": "assistant", "content": "Thank you. What is the description, time and place of the agenda item?"},
        {"role": "user", "content": "The description is Dinner with friends, the time is March 20th, 2023 and the "
                                    "location is the Cheesecake Factory."},
        {"role": "assistant", "content": "Please give me your username, password and email again."},
        login,
        {"role": "assistant", "content": "Got it."},
    ]
    assert total_tokens(messages[:1]) <= total_tokens(messages[2:3])  # either fits beside the newest copy
    scorer = DictScorer({"m0": 0.9, "m2": 0.5, "m4": 0.3}, default=0.0)
    budget = total_tokens([messages[2], messages[4]]) + 1
    result = make(scorer=scorer).compact(messages, budget=budget)
    assert result.tokens <= budget
    assert result.kept == ("m2", "m4")
    assert result.scores is not None and result.scores.tolist() == [0.9, 0.0, 0.5, 0.0, 0.3, 0.0]


def test_a_budget_that_holds_no_message_is_a_budget_error_not_an_empty_list() -> None:
    # No system prompt, and the budget is below the latest message in any form: an empty
    # list is no answer (providers refuse it). keep_pins gives the latest message, over budget.
    from salience.scorer.baselines import RecencyScorer

    messages = [{"role": "user", "content": "Please summarise the quarterly report for the board meeting."},
                {"role": "assistant", "content": "Here is the summary of the quarterly report, in three parts."}]
    with pytest.raises(BudgetError, match="holds no message, not even the latest"):
        Compactor(scorer=RecencyScorer()).compact(messages, budget=2)
    out = Compactor(scorer=RecencyScorer(), on_over_budget="keep_pins").compact(messages, budget=2)
    assert out.over_budget and len(out.messages) == 1
    assert out.messages[0]["role"] == "assistant"  # the latest message, in its cheapest form


def test_a_stub_is_worth_its_values_where_the_transcript_acts_and_only_its_retain_in_a_chat() -> None:
    chat = [
        {"role": "user", "content": "We met Caroline at the LGBTQ support group in Boston on 2023-05-07, remember?"},
        {"role": "assistant", "content": "Yes, she told us about her adoption plans."},
        {"role": "user", "content": "What else did she say?"},
    ]
    call_ = {"role": "assistant", "content": None, "tool_calls": [call("c9", "lookup", person="Caroline")]}
    acting = [chat[0], call_, {"role": "tool", "tool_call_id": "c9", "content": "{}"}, *chat[1:]]
    compactor = make(scorer=DictScorer(default=0.5))
    worth = {}
    for name, messages in (("chat", chat), ("acting", acting)):
        source, fmt = to_transcript(messages, system=None, format=None)
        run = Run(compactor._config(10), source, fmt)
        prob = run.problem(10, query=None, phase=None)
        assert run.options()[0][0][Option.STUB] is not None  # the first turn has a stub, listing values
        worth[name] = prob.values[0, Option.STUB] / prob.values[0, Option.FULL]
    # in a chat, a turn's stub keeps a list of names and dates, not what the turn says: its retain share
    assert worth["chat"] == pytest.approx(DEFAULT_RETAIN["stub"])
    # where the transcript acts, the values it lists are what calls copy, and they count
    assert worth["acting"] > worth["chat"] + 0.2


def test_a_chat_turn_is_kept_whole_or_not_at_all_but_pins_still_degrade() -> None:
    """In a conversation (no call, no code action) a turn that is not pinned is never trimmed;
    where the transcript acts, the same turn may be."""
    long_turn = "We talked about the adoption agency, the paperwork and the home visit. " * 12
    chat = [
        {"role": "user", "content": long_turn},
        {"role": "assistant", "content": "That sounds like a lot of work, how did it go? " * 6},
        {"role": "user", "content": long_turn},
        {"role": "assistant", "content": "Glad to hear it."},
        {"role": "user", "content": "What did I say about the home visit?"},
    ]
    acting = [*chat[:2], {"role": "assistant", "content": None, "tool_calls": [call("c1", "lookup", q="visit")]},
              {"role": "tool", "tool_call_id": "c1", "content": "{}"}, *chat[2:]]
    compactor = make(scorer=DictScorer(default=0.5), digest=0)
    trims = {}
    for name, messages in (("chat", chat), ("acting", acting)):
        total = sum(COUNTER.count_entry(e) for e in to_transcript(messages, system=None, format=None)[0].entries)
        trims[name] = 0
        for share in (0.2, 0.3, 0.4, 0.5, 0.6, 0.7):
            result = compactor.compact(messages, budget=int(total * share))
            assert result.tokens <= int(total * share)
            last = result.source.entries[-1].id
            trims[name] += sum(x != last for x in result.trimmed)
    assert trims["chat"] == 0 and trims["acting"] > 0
    # a pinned latest turn that cannot fit whole still degrades rather than raise
    latest_long = [*chat[:4], {"role": "user", "content": long_turn}]
    tight = make(scorer=DictScorer(default=0.5), pin_last=1).compact(latest_long, budget=60)
    assert tight.tokens <= 60 and (tight.trimmed or tight.stubbed)


def test_the_newest_pin_keeps_its_best_form_that_fits_before_an_older_pin() -> None:
    # The latest result is the newest pin and the last user turn an older one: at every
    # budget, the result keeps the best of its forms that fits beside its call and the
    # system prompt, whatever the user turn and the rest are worth (pin worths that only
    # grew with the rank made dropping the result cheaper than stubbing the user turn and
    # trimming the result); but where the request it answers fits beside its stub and not
    # beside its trim, it is stubbed and the request stays, whole or, beside the actions a window
    # keeps, trimmed (pins.grow_trim).
    messages = [
        {"role": "system", "content": "You are a calendar agent."},
        {"role": "user", "content": "Set a reminder to buy cake on September 27, please."},
        {"role": "assistant", "content": None, "tool_calls": [
            call("c1", "AddReminder", session_token="98a5a87a-7714-b404", task="Buy cake")]},
        {"role": "tool", "tool_call_id": "c1", "content": '{"reminder_id": "5b-dd80"}'},
        {"role": "user", "content": " ".join(["Can you search my messages for the guest list my friend sent me "
                                              "for the birthday party at her house next week?"] * 2)},
        {"role": "assistant", "content": None, "tool_calls": [
            call("c2", "SearchMessages", session_token="98a5a87a-7714-b404", query="birthday guests")]},
        {"role": "tool", "tool_call_id": "c2", "content": lines("guest", 12)},
    ]
    scores = {"m2": 1.0, "m3": 0.5, "m6": 1.0}
    compactor = make(scorer=DictScorer(scores, default=0.0))
    run = Run(compactor._config(10**6), *to_transcript(messages, system=None, format=None))
    _, costs, available = run.options()
    fixed = int(costs[0, 0] + costs[5, 0])  # the system prompt and the result's call, whole
    forms = [Option(o) for o in (0, 1, 2) if available[6, o]]
    assert len(forms) == 3  # whole, trimmed, stubbed: each cheaper than the one before
    request = int(costs[4, 0])
    seen, given_way = set(), 0
    for budget in range(fixed + int(costs[6, 2]), total_tokens(messages) + 1):
        result = compactor.compact(messages, budget=budget)
        assert result.tokens <= budget and not result.over_budget
        best = next(o for o in forms if fixed + costs[6, int(o)] <= budget)
        if best is Option.TRIM and fixed + costs[6, 1] + request > budget >= fixed + costs[6, 2] + request:
            best = Option.STUB
            assert result.choices["m4"] is not Option.DROP, (budget, result.choices)  # (the window's actions first)
            given_way += 1
        assert result.choices["m6"] is best, (budget, best, result.choices)
        seen.add(best)
    assert seen == set(forms) and given_way


def test_a_result_too_long_to_stay_whole_leaves_room_for_the_request_it_answers() -> None:
    # A stock list of thousands of tokens answers a one-line question: trimmed to keep as much
    # as fits, it took all the room, and the question went (BFCL's long-context set). It now
    # keeps as much as fits beside the newest user turn, where the trim keeps room for it; and
    # only beside it: the rest of the room is still the result's.
    question = "Which of these technology stocks did AAPL beat this quarter?"
    messages = [
        {"role": "system", "content": "You are a trading assistant."},
        {"role": "user", "content": question},
        {"role": "assistant", "content": None, "tool_calls": [call("c1", "get_available_stocks", sector="Tech")]},
        {"role": "tool", "tool_call_id": "c1", "content": lines("stock", 200)},
    ]
    compactor = make(scorer=DictScorer({"m1": 0.6}, default=0.1))
    full = total_tokens(messages)
    for budget in (full // 3, full // 2, 3 * full // 4):  # above the trim's least form (a quarter of the result)
        result = compactor.compact(messages, budget=budget)
        assert result.tokens <= budget
        assert result.choices["m1"] is Option.FULL and result.choices["m3"] is Option.TRIM, (budget, result.choices)
        assert budget - result.tokens < len(question.split()), budget  # the result's trim took the rest
    # with no room for the question beside the trim's least form, the trim takes what there is
    tight = compactor.compact(messages, budget=total_tokens(messages[:3]) + 5)
    assert tight.choices["m1"] is Option.DROP and tight.choices["m3"] is not Option.FULL


def test_a_result_that_can_only_be_stubbed_lists_as_many_of_its_values_as_fit() -> None:
    # The newest result (the pin the agent answers) fits neither whole nor trimmed beside its call:
    # its stub listed 8 of its 40 order ids and left the rest of the room empty. It now lists as
    # many as fit, beside the request it answers; where the trim fits, the trim is kept as before.
    ids = [f"ORD-{n:04d}" for n in range(1, 41)]
    messages = [
        {"role": "system", "content": "You are a shop assistant."},
        {"role": "user", "content": "Which orders do I have? I am u_77."},
        {"role": "assistant", "content": None, "tool_calls": [call("c1", "list_orders", user="u_77")]},
        {"role": "tool", "tool_call_id": "c1", "content": "\n".join(f"order {i} shipped to Paris" for i in ids)},
    ]
    eight = make().compact(messages, budget=44)  # the request, the call and the stub of 8 values: no more room
    assert eight.choices["m1"] is Option.FULL and eight.choices["m3"] is Option.STUB
    for budget in (52, 60, 70):
        result = make().compact(messages, budget=budget)
        assert result.tokens <= budget
        assert result.choices["m1"] is Option.FULL and result.choices["m3"] is Option.STUB, (budget, result.choices)
        match = STUB_RE.match(result.messages[3]["content"])
        assert match is not None and match.group(1) == "m3"
        listed = match.group(3).split(", ")
        assert listed == ids[: len(listed)] and len(listed) > 8, (budget, listed)  # the result's own, in order
        assert budget - result.tokens < 3, budget  # and as many as fit: a value is two words with its comma
        assert result.restore(["m3"])[3] == messages[3]
    trimmed = make().compact(messages, budget=120)
    assert trimmed.choices["m3"] is Option.TRIM
    # where the trim's least form leaves the request no room and the stub does, the result is
    # stubbed and the request stays (the trim kept 18 ids and dropped the request here before)
    for budget in (92, 96, 100):
        result = make().compact(messages, budget=budget)
        assert result.tokens <= budget
        assert result.choices["m1"] is Option.FULL and result.choices["m3"] is Option.STUB, (budget, result.choices)
    beside = make().compact(messages, budget=104)  # the trim fits beside the request: trimmed, as before
    assert beside.choices["m1"] is Option.FULL and beside.choices["m3"] is Option.TRIM


def test_the_result_before_the_agents_plain_words_stays_pinned() -> None:
    # "Now let me modify the alarm." answers nothing: it is not pinned and not counted, so
    # the default pin_last=1 pins the token the agent just got, whatever its score.
    messages = [
        {"role": "system", "content": "You are an assistant."},
        {"role": "user", "content": "Modify my alarm from 6:30 to 7:30, user JaneSmith, password hunter2."},
        {"role": "assistant", "content": None, "tool_calls": [
            call("c1", "GetUserToken", username="JaneSmith", password="hunter2")]},
        {"role": "tool", "tool_call_id": "c1", "content": '{"token": "o8i7u6y5t4r3e2w1q0"}'},
        {"role": "assistant", "content": "Okay. Now let me modify the alarm for you, from 6:30 to 7:30, as you asked."},
    ]
    scorer = DictScorer({"m2": 0.0, "m3": 0.0}, default=1.0)
    # Room for the system prompt, the call and its result: a sliding window holds the plain words
    # and the result, not the call (so no action of the window's is held whole, pinned or not).
    entries = Transcript.from_openai(messages).entries
    budget = sum(COUNTER.count_entry(entries[i]) for i in (0, 2, 3))
    result = make(scorer=scorer).compact(messages, budget=budget)
    assert {"m2", "m3"} <= set(result.kept), result.choices
    assert result.tokens <= budget
    unpinned = make(scorer=scorer, pin_last=0, pin_last_user=False).compact(messages, budget=budget)
    assert "m3" not in unpinned.kept  # what the pin changes: its score alone would drop it


def test_the_last_user_turn_is_pinned_by_default_only_as_the_newest_entry() -> None:
    """``pin_last_user`` is off by default: an older user turn that a sliding window would not
    keep is weighed by its score (a better-scored entry may take its place); one the window
    keeps whole is the request the agent works on, held whole as the agent's actions are
    (:func:`~salience.selector.pins.window_actions`); and a user turn that is the newest entry
    the agent answers stays pinned by ``pin_last``, whatever its score."""
    call = {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "PAR01"}'}}
    request = "Check the weather in Paris for me please, I am flying there tomorrow."
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": request + " It is for the conference on the fourth."},
        {"role": "assistant", "content": "Noted: the forecast key is KEY-ABC-123 and the city code is PAR01 today, "
                                         "with the forecast for the whole week ahead of the trip."},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "Sunny, 21 degrees."},
    ]
    scorer = DictScorer({"m0": 0.0, "m1": 0.9}, default=0.5)
    group = total_tokens(messages[2:])
    budget = group + max(total_tokens(messages[:1]), total_tokens(messages[1:2])) + 1
    assert budget < total_tokens(messages)
    # the window, by the messages' text, does not reach the user turn: its score weighs it (no
    # digest, which would list the words' key in the turn's stub instead)
    assert sliding_window(messages, budget, counter=COUNTER) == messages[1:]
    result = make(scorer=scorer, digest=0).compact(messages, budget=budget)
    assert result.tokens <= budget
    assert result.choices["m1"] is Option.FULL and result.choices["m0"] is not Option.FULL
    assert result.choices["m2"] is Option.FULL and result.choices["m3"] is Option.FULL  # the newest group: pin_last
    pinned = make(scorer=scorer, pin_last_user=True, digest=0).compact(messages, budget=budget)
    assert pinned.choices["m0"] is Option.FULL and pinned.choices["m1"] is not Option.FULL
    # a shorter request the window keeps whole stays whole, its score aside; the better-scored words give way
    held = [{"role": "user", "content": request}, {**messages[1], "content": "Noted: the forecast key is "
                                                   "KEY-ABC-123 and the city code is PAR01 today."}, *messages[2:]]
    budget = total_tokens(held[2:]) + max(total_tokens(held[:1]), total_tokens(held[1:2])) + 1
    assert sliding_window(held, budget, counter=COUNTER) == held
    kept = make(scorer=scorer, digest=0).compact(held, budget=budget)
    assert kept.tokens <= budget
    assert kept.choices["m0"] is Option.FULL and kept.choices["m1"] is not Option.FULL
    # the newest entry a user turn: pinned by pin_last, though a better-scored entry would fit in its place
    chat = messages[1:2] + messages[:1]
    alone = max(total_tokens(chat[:1]), total_tokens(chat[1:])) + 1
    newest = make(scorer=DictScorer({"m0": 0.9, "m1": 0.0})).compact(chat, budget=alone)
    assert newest.choices["m1"] is Option.FULL and newest.choices["m0"] is Option.DROP
