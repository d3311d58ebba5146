"""The ceiling of whole-message selection (salience.bench.ceiling): exact against brute
force, never below the sliding window, valid as a provider counts validity."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from salience import Transcript
from salience.bench.ceiling import VARIANTS, best_whole_messages, ceilings, message_cost
from salience.bench.independent import (
    baseline_selectors,
    evaluate,
    message_text,
    sliding_window,
    tool_pairing_errors,
)
from salience.errors import ParameterError
from salience.tokens import TokenCounter

WORDS = TokenCounter(lambda text: len(text.split()), message_overhead=2, call_overhead=1)
REFS = ("HAT136", "1250", "Mia", "W8812")
_word = st.sampled_from([*REFS, "alpha", "seat", "ok", "x"])
_text = st.lists(_word, min_size=0, max_size=8).map(" ".join)


def call(call_id: str, args: str, content: str = "") -> dict[str, Any]:
    return {"role": "assistant", "content": content, "tool_calls": [
        {"id": call_id, "type": "function", "function": {"name": "f", "arguments": json.dumps({"v": args})}}]}


@st.composite
def histories(draw: st.DrawFn) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if draw(st.booleans()):
        out.append({"role": "system", "content": draw(_text)})
    for k in range(draw(st.integers(1, 7))):
        kind = draw(st.sampled_from(["user", "assistant", "calls"]))
        if kind == "calls":  # one or two calls in one message, a result for each
            ids = [f"c{k}_{j}" for j in range(draw(st.integers(1, 2)))]
            out.append({"role": "assistant", "content": draw(_text), "tool_calls": [
                {"id": i, "type": "function", "function": {"name": "f", "arguments": json.dumps({"v": draw(_text)})}}
                for i in ids]})
            out.extend({"role": "tool", "tool_call_id": i, "content": draw(_text)} for i in ids)
        else:
            out.append({"role": kind, "content": draw(_text)})
    if out[-1]["role"] == "system":
        out.append({"role": "user", "content": draw(_text)})
    return out


def seen(history: list[dict[str, Any]], picked: Any, refs: tuple[str, ...]) -> int:
    text = "\n".join(message_text(history[i]) for i in picked)
    return sum(r in text for r in refs)


def brute_force(history: list[dict[str, Any]], refs: tuple[str, ...], budget: int, billed: bool,
                latest: bool) -> int:
    """The most references any valid choice of whole messages keeps, by enumeration."""
    others = [i for i, m in enumerate(history) if m["role"] != "system"]
    system = sum(message_cost(m, WORDS, billed) for m in history if m["role"] == "system")
    best = -1
    for k in range(len(others) + 1):
        for pick in itertools.combinations(others, k):
            if latest and len(history) - 1 not in pick:
                continue
            if system + sum(message_cost(history[i], WORDS, billed) for i in pick) > budget:
                continue
            chosen = [history[i] for i in pick]
            if tool_pairing_errors(chosen):
                continue
            best = max(best, seen(history, pick, refs))
    return best


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories(), st.integers(0, 40), st.sampled_from(VARIANTS))
def test_property_the_ceiling_is_what_brute_force_finds(history: list[dict[str, Any]], budget: int,
                                                         variant: tuple[str, bool, bool]) -> None:
    _, billed, latest = variant
    picked = best_whole_messages(history, REFS, budget, counter=WORDS, billed=billed, keep_latest=latest)
    best = brute_force(history, REFS, budget, billed, latest)
    if best < 0:  # nothing valid fits
        assert picked == ()
        return
    assert seen(history, picked, REFS) == best
    chosen = [history[i] for i in picked]
    assert tool_pairing_errors(chosen) == []
    system = sum(message_cost(m, WORDS, billed) for m in history if m["role"] == "system")
    assert system + sum(message_cost(m, WORDS, billed) for m in chosen) <= budget
    assert all(history[i]["role"] != "system" for i in picked) and list(picked) == sorted(set(picked))
    if latest and picked:
        assert picked[-1] == len(history) - 1


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories(), st.integers(0, 40))
def test_property_the_text_ceiling_never_sees_less_than_the_sliding_window(history: list[dict[str, Any]],
                                                                          budget: int) -> None:
    window = sliding_window(history, budget, counter=WORDS)
    text = "\n".join(message_text(m) for m in window if m["role"] != "system")
    by_window = sum(r in text for r in REFS)
    for latest in (False, True):
        if latest and not [m for m in window if m["role"] != "system"]:
            continue  # the window kept nothing but the system prompt: the latest does not fit
        picked = best_whole_messages(history, REFS, budget, counter=WORDS, keep_latest=latest)
        assert seen(history, picked, REFS) >= by_window


def test_a_call_and_its_result_go_together_and_the_tie_break_is_fewest_tokens() -> None:
    history = [
        {"role": "user", "content": "alpha alpha alpha"},
        call("c1", "x", "x"),
        {"role": "tool", "tool_call_id": "c1", "content": "HAT136"},
        {"role": "user", "content": "HAT136 seat seat seat seat"},
        {"role": "user", "content": "ok"},
    ]
    # the result alone would be 1 token, but needs its call (x, f and {"v": "x"}: 4 tokens): 5 in all
    assert best_whole_messages(history, ("HAT136",), 5, counter=WORDS) == (1, 2)
    assert best_whole_messages(history, ("HAT136",), 4, counter=WORDS) == ()
    assert best_whole_messages(history, ("HAT136",), 6, counter=WORDS, keep_latest=True) == (1, 2, 4)
    # as billed (+2 a message, +1 a call), the pair costs 10 and the user's turn 7
    assert best_whole_messages(history, ("HAT136",), 9, counter=WORDS, billed=True) == (3,)
    assert best_whole_messages(history, ("hat136",), 9, counter=WORDS, billed=True) == ()
    assert best_whole_messages(history, ("hat136",), 9, counter=WORDS, billed=True, casefold=True) == (3,)


def test_keep_latest_refuses_a_history_that_ends_with_a_system_message() -> None:
    with pytest.raises(ParameterError, match="keep_latest"):
        best_whole_messages([{"role": "user", "content": "x"}, {"role": "system", "content": "y"}], ("x",), 9,
                            counter=WORDS, keep_latest=True)


AIRLINE = [
    {"role": "system", "content": "You are the agent of Acme Air."},
    {"role": "user", "content": "Please move my booking ZFA04Y to Boston; my name is Mia Li."},
    call("c1", "ZFA04Y"),
    {"role": "tool", "tool_call_id": "c1", "content": json.dumps({"flight": "HAT136", "price": 1250})},
    {"role": "assistant", "content": "I found it. Which date would suit you best for the new flight?"},
    {"role": "user", "content": "The 2024-05-17 please, thank you very much for the help."},
    call("c2", json.dumps({"id": "ZFA04Y", "name": "Mia Li", "flight": "HAT136", "date": "2024-05-17"})),
]


def test_ceilings_are_at_or_above_the_window_the_runner_measures() -> None:
    transcripts = [Transcript.from_openai(AIRLINE, id="air")]
    fractions = (0.25, 0.5, 1.0)
    ceiling = ceilings(transcripts, fractions, counter=WORDS, definitions=("independent",))
    report = evaluate(transcripts, {"window": baseline_selectors(WORDS)["window"]}, fractions, counter=WORDS)
    assert ceiling.steps == report.steps
    for f in fractions:
        window = report.result("window", f).independent
        text = ceiling.recall[("independent", "text", f)]
        assert text.refs == window.refs > 0
        assert text.seen >= window.seen
        billed_latest = ceiling.recall[("independent", "billed, latest kept", f)]
        assert billed_latest.seen <= ceiling.recall[("independent", "billed", f)].seen <= text.seen
    assert ceiling.recall[("independent", "text", 1.0)].micro == 1.0
    metrics = ceiling.metrics(prefix="unseen_")
    assert metrics["unseen_independent_micro_100pct_ceiling_text"] == 1.0
    assert len(metrics) == len(fractions) * len(VARIANTS)
    assert ceiling.to_dict()["independent"]["text"]["1"]["seen"] == ceiling.recall[("independent", "text", 1.0)].seen
    with pytest.raises(ParameterError, match="definitions"):
        ceilings(transcripts, fractions, definitions=("mine",))
