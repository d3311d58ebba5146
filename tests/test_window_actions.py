"""The agent's actions that a sliding window keeps whole stay whole (issue #14: never fewer of the
agent's own actions than the window keeps), beside the soft pins whole, where what must stay allows."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from salience import Compactor
from salience.bench.message_baselines import sliding_window
from salience.bench.references import actions_kept
from salience.errors import BudgetError
from salience.selector.masking import Option
from salience.selector.pins import window_actions
from salience.tokens import TokenCounter
from salience.transcript import ACTION_BLOCK, Transcript

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_compactor_properties import COUNTER, SeededScorer, openai_histories  # noqa: E402

WORDS = TokenCounter(lambda text: len(text.split()))


class ByRole:
    """Observations score high and the agent's actions nothing: what a scorer trained on values
    in tool output does, and what the rule keeps from costing the actions."""

    def __init__(self, scores: Mapping[str, float]) -> None:
        self.scores = scores

    def score(self, transcript: Transcript, query: str | None = None) -> np.ndarray:
        return np.array([self.scores.get(e.role, 0.5) for e in transcript.entries])


def _code(i: int) -> dict[str, Any]:
    body = "\n".join(f"check(rows[{i}], column_{k}, strict = True)" for k in range(12))
    return {"role": "assistant", "content": f"Step {i}.\n```python\nrows = load({i})\n{body}\n```"}


def _observation(i: int) -> dict[str, Any]:
    return {"role": "user", "content": "Observation: " + " ".join(f"row{i}_{k}" for k in range(8))}


def _call(i: int) -> dict[str, Any]:
    return {"role": "assistant", "content": f"Opening part {i}.", "tool_calls": [
        {"id": f"c{i}", "type": "function", "function": {"name": "open_file", "arguments": f'{{"part": {i}}}'}}]}


def _result(i: int) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": f"c{i}", "content": " ".join(f"line{i}_{k}" for k in range(30))}


def history(act: Callable[[int], dict[str, Any]], observe: Callable[[int], dict[str, Any]],
            steps: int = 5) -> list[dict[str, Any]]:
    """A system prompt, the task, then ``steps`` actions, each followed by what it observed."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You fix bugs."},
                                      {"role": "user", "content": "Fix the crash in part 3."}]
    for i in range(steps):
        messages += [act(i), observe(i)]
    return messages


def code_history() -> list[dict[str, Any]]:
    return history(_code, _observation)


def call_history() -> list[dict[str, Any]]:
    return history(_call, _result)


def _window_budget(messages: list[dict[str, Any]], newest: int) -> int:
    """The system prompt and the ``newest`` messages, whole, as WORDS bills them."""
    probe = Compactor(scorer=ByRole({}), counter=WORDS)
    return probe.compact(messages[:1] + messages[-newest:], budget=10**9).tokens


@pytest.mark.parametrize(("make", "observed_as"), [(code_history, "user"), (call_history, "tool")],
                         ids=["code-actions", "tool-calls"])
def test_the_actions_the_window_keeps_stay_whole(make: Callable[[], list[dict[str, Any]]], observed_as: str) -> None:
    messages = make()
    budget = _window_budget(messages, 4)  # the window: the last two actions and what they observed
    window = sliding_window(messages, budget, counter=WORDS)
    assert actions_kept(messages, window) == (2, 5)
    result = Compactor(scorer=ByRole({observed_as: 0.9, "assistant": 0.0}), counter=WORDS, pin_last=1).compact(
        messages, budget=budget)
    assert result.tokens <= budget
    assert result.choices["m8"] is Option.FULL and result.choices["m10"] is Option.FULL
    assert result.choices["m9"] is not Option.DROP  # (a call kept keeps its result, in some form)
    assert actions_kept(messages, result.messages)[0] >= 2


def test_older_actions_are_left_to_the_scores() -> None:
    """Only the window's actions are held: an older one goes when the scores say so."""
    messages = code_history()
    budget = _window_budget(messages, 4)
    result = Compactor(scorer=ByRole({"user": 0.9, "assistant": 0.0}), counter=WORDS, pin_last=1).compact(
        messages, budget=budget)
    assert result.choices["m2"] is not Option.FULL


def test_window_actions_hold_only_what_still_fits() -> None:
    # system, an old user turn that may not go (its stub costs 8), two actions, the newest result
    costs = np.array([[10, 5, 2, 0], [20, 12, 8, 0], [30, 10, 4, 0], [30, 10, 4, 0], [5, 3, 2, 0]])
    allowed = np.ones((5, 5 - 1), dtype=bool)
    allowed[1, 3] = False
    system = np.array([True, False, False, False, False])
    acting = np.array([False, False, True, True, False])

    def least(a: np.ndarray) -> float:
        return float(np.where(a, costs, 10**9).min(axis=1).sum())

    assert window_actions(costs[:, 0], allowed, system, acting, least, 80).tolist() == [3, 2]  # the window: 4, 3, 2
    assert window_actions(costs[:, 0], allowed, system, acting, least, 50).tolist() == [3]  # the window: 4, 3
    assert window_actions(costs[:, 0], allowed, system, acting, least, 40).tolist() == []  # the window: 4
    held = allowed.copy()
    held[[0, 4]] = [True, False, False, False]  # the system prompt and the newest, whole
    # both actions are in the window, but whole beside those and the old turn's stub only one fits
    assert window_actions(costs[:, 0], held, system, acting, least, 80).tolist() == [3]
    assert window_actions(costs[:, 0], held, system, acting, least, 53).tolist() == [3]
    assert window_actions(costs[:, 0], held, system, acting, least, 52).tolist() == []


@st.composite
def _compactors(draw: st.DrawFn) -> Compactor:
    """Compactors whose pins the window's actions sit beside: the last user turn not pinned apart
    (an old one may not fit beside them), no entry cut on the way in (its whole form is the cut)."""
    return Compactor(
        scorer=SeededScorer(draw(st.integers(0, 1000))), counter=COUNTER, pin_last=draw(st.integers(0, 5)),
        pin_system=draw(st.booleans()), critical=draw(st.sampled_from([None, 0.9])),
        solver=draw(st.sampled_from(["auto", "greedy"])), policy=draw(st.sampled_from([None, "coding", "airline"])),
        digest=draw(st.sampled_from([0.0, 0.2, 0.5])))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages=openai_histories(), c=_compactors(), fraction=st.floats(0.05, 1.0))
def test_never_fewer_whole_actions_than_the_window(messages: list[dict[str, Any]], c: Compactor,
                                                    fraction: float) -> None:
    """As many of the agent's actions whole as a sliding window of whole messages keeps at the
    same budget, counted as the compactor counts (the window the system prompt, then the newest
    entries while they fit)."""
    source = Transcript.from_openai(messages)
    costs = [COUNTER.count_entry(e) for e in source.entries]
    budget = max(1, int(sum(costs) * fraction))
    try:
        result = c.compact(messages, budget=budget)
    except BudgetError:
        return
    assume(not result.over_budget)
    acting = [bool(e.tool_calls) or (e.role == "assistant" and ACTION_BLOCK.search(e.content or "") is not None)
              for e in source.entries]
    left = budget - sum(k for k, e in zip(costs, source.entries) if e.role == "system")
    in_window = 0
    for i in reversed([i for i, e in enumerate(source.entries) if e.role != "system"]):
        left -= costs[i]
        if left < 0:
            break
        in_window += acting[i]
    whole = sum(result.choices[e.id] is Option.FULL for e, a in zip(source.entries, acting) if a)
    assert whole >= in_window, (whole, in_window, result.choices)
