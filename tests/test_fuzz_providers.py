"""Fuzz: tau-bench airline runs cut at random points and compacted to random budgets
must give messages the providers accept (checked with :mod:`salience.messages.validate`).

Every run of ``../shared/data/tau-bench-airline`` (skipped when absent) is cut at
seeded random points where every tool call is answered (after a tool result that
completes its call group, or after a user or assistant text message: a request with
an unanswered call is refused by both providers, so those are the realistic cuts),
rendered in OpenAI format (``t.to_openai()``) and in Anthropic format
(``t.to_anthropic()`` + ``t.anthropic_system()``), and compacted to a random budget
between the pinned minimum and the full size (one draw in ten below the minimum,
where a :class:`~salience.errors.BudgetError` is the correct answer). Each output
must have no provider problem, fit its budget (recounted from the output messages),
leave the input unmodified, and restore to the input.

Cuts inside a call group (the agent waiting on a tool) are tested separately: the
compactor must not crash, and its output may end with the same pending call, and
nothing else unanswered.

``benchmarks/bench_fuzz.py`` runs the same harness (:func:`fuzz`) at full size.
"""

from __future__ import annotations

import copy
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from conftest import shared_path
from salience import load_transcripts
from salience.errors import BudgetError
from salience.messages.dispatch import to_transcript
from salience.messages.validate import check_anthropic, check_openai, pending_calls
from salience.scorer.baselines import RecencyScorer
from salience.selector.compactor import Compactor
from salience.selector.run import Run
from salience.tokens import default_counter
from salience.transcript import Transcript

FORMATS = ("openai", "anthropic")
#: Problems about the order of roles (Anthropic), counted apart from the rest.
ROLE_PROBLEM = re.compile(r"roles must alternate|first message must have role")


# --------------------------------------------------------------------------
# the harness (benchmarks/bench_fuzz.py imports it)
# --------------------------------------------------------------------------


@dataclass
class FuzzCounts:
    """What a fuzz run found. ``problems`` counts problem kinds; ``examples`` keeps the first case of each."""

    cases: int = 0  # (cut, format, budget) triples tried
    checked: int = 0  # outputs validated
    rejected: int = 0  # outputs with a provider problem of any kind
    rejected_roles_only: int = 0  # outputs whose only problems are the order of roles
    refused: int = 0  # BudgetError below the pinned minimum: a correct refusal
    wrong_refusals: int = 0  # BudgetError at or above the minimum
    accepted_below_minimum: int = 0  # no BudgetError below the minimum (the minimum was wrong)
    over_budget: int = 0  # more tokens than the budget (recounted from the output)
    mutated: int = 0  # the input changed
    not_restored: int = 0  # restore(archive) != input
    invalid_inputs: int = 0  # the cut itself had a provider problem (a formats bug, not the compactor's)
    problems: Counter[str] = field(default_factory=Counter)
    examples: dict[str, tuple[str, int, str, int, str]] = field(default_factory=dict)

    def failures(self, *, roles: bool = True) -> int:
        """Outputs or refusals that are wrong (role problems included when ``roles``)."""
        rejected = self.rejected if roles else self.rejected - self.rejected_roles_only
        return (rejected + self.wrong_refusals + self.accepted_below_minimum + self.over_budget + self.mutated
                + self.not_restored + self.invalid_inputs)

    def add(self, other: FuzzCounts) -> None:
        for name in ("cases", "checked", "rejected", "rejected_roles_only", "refused", "wrong_refusals",
                     "accepted_below_minimum", "over_budget", "mutated", "not_restored", "invalid_inputs"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.problems.update(other.problems)
        for key, value in other.examples.items():
            self.examples.setdefault(key, value)

    def report(self) -> str:
        lines = [
            f"cases {self.cases:,}: checked {self.checked:,}, rejected {self.rejected:,} "
            f"({self.rejected_roles_only:,} for the order of roles only), BudgetError refusals {self.refused:,}",
            f"wrong refusals {self.wrong_refusals:,}, accepted below the minimum {self.accepted_below_minimum:,}, "
            f"over budget {self.over_budget:,}, mutated {self.mutated:,}, not restored {self.not_restored:,}, "
            f"invalid inputs {self.invalid_inputs:,}",
        ]
        for kind, n in self.problems.most_common():
            lines.append(f"  {n:>6,}  {kind}   e.g. {self.examples[kind]}")
        return "\n".join(lines)


def _open_calls_after(t: Transcript) -> list[tuple[int, bool]]:
    """For each prefix length ``k``, whether some call of ``t.entries[:k]`` is still unanswered."""
    open_calls: set[str] = set()
    out = []
    for k, e in enumerate(t.entries, 1):
        if e.tool_call_id is not None:
            open_calls.discard(e.tool_call_id)
        open_calls.update(c.id for c in e.tool_calls)
        out.append((k, bool(open_calls)))
    return out


def answered_cuts(t: Transcript) -> list[int]:
    """Prefix lengths ``k >= 2`` after which every tool call of ``t.entries[:k]`` is answered."""
    return [k for k, pending in _open_calls_after(t) if k >= 2 and not pending]


def pending_cuts(t: Transcript) -> list[int]:
    """Prefix lengths that end inside a call group (some call of the last calling entry unanswered)."""
    return [k for k, pending in _open_calls_after(t) if pending]


def prefix(t: Transcript, k: int) -> Transcript:
    return t.replace(entries=t.entries[:k], queries=())


def render(t: Transcript, fmt: str) -> tuple[list[dict[str, Any]], Any]:
    """(messages, system) of ``t`` in ``fmt``."""
    if fmt == "openai":
        return t.to_openai(), None
    return t.to_anthropic(), t.anthropic_system()


def problems_of(messages: Any, system: Any, fmt: str, *, allow_pending: bool = False) -> list[str]:
    if fmt == "openai":
        return check_openai(messages, allow_pending=allow_pending)
    return check_anthropic(messages, system, allow_pending=allow_pending)


def beside_roles(problems: list[str]) -> list[str]:
    """``problems`` without those about the order of roles."""
    return [p for p in problems if not ROLE_PROBLEM.search(p)]


def recount(messages: Any, system: Any, fmt: str) -> int:
    """Tokens of the output messages, counted afresh from what the provider would get."""
    t = Transcript.from_openai(messages) if fmt == "openai" else Transcript.from_anthropic(messages, system=system)
    counter = default_counter()
    return sum(counter.count_entry(e) for e in t.entries)


def _kind(problem: str) -> str:
    return re.sub(r"\d+", "N", re.sub(r"'[^']*'", "'…'", problem))


def format_kwargs(fmt: str, system: Any) -> dict[str, Any]:
    """What ``Compactor.compact`` needs besides the messages to read ``fmt``."""
    return {"system": system, "format": "anthropic"} if fmt == "anthropic" else {"format": "openai"}


def minimum_budget(compactor: Compactor, messages: Any, kwargs: dict[str, Any]) -> int:
    """The least budget the compactor accepts for ``messages`` (what its pins need)."""
    try:
        return compactor.compact(messages, budget=1, **kwargs).tokens or 1
    except BudgetError as exc:
        return max(1, exc.required)


def pins_minimum(compactor: Compactor, messages: Any, kwargs: dict[str, Any]) -> int:
    """The least budget at which every pin of ``compactor`` stays whole (pins degrade below it)."""
    source, fmt = to_transcript(messages, system=kwargs.get("system"), format=kwargs.get("format"))
    run = Run(compactor._config(1), source, fmt)
    prob = run.problem(1, query=None, phase=None)
    return max(1, int(run.min_cost(prob.whole_pins(), prob.costs)))


def fuzz_case(
    compactor: Compactor,
    t: Transcript,
    fmt: str,
    budgets: Sequence[int] | Callable[[int, int], Sequence[int]],
    counts: FuzzCounts,
) -> None:
    """Compact ``t`` (a cut) in ``fmt`` to each budget ``budgets(minimum, full)`` gives, and count."""
    messages, system = render(t, fmt)
    kwargs = format_kwargs(fmt, system)
    if problems_of(messages, system, fmt):
        counts.invalid_inputs += 1
        return
    before = copy.deepcopy(messages), copy.deepcopy(system)
    minimum = minimum_budget(compactor, messages, kwargs)
    full = compactor.compact(messages, budget=10**9, **kwargs).source_tokens
    chosen = budgets(minimum, full) if callable(budgets) else budgets
    for budget in chosen:
        counts.cases += 1
        where = (t.id, len(t.entries), fmt, int(budget))
        try:
            result = compactor.compact(messages, budget=int(budget), **kwargs)
        except BudgetError:
            if budget < minimum:
                counts.refused += 1
            else:
                counts.wrong_refusals += 1
                counts.examples.setdefault("wrong refusal", (*where, f"minimum {minimum}"))
            continue
        if budget < minimum:
            counts.accepted_below_minimum += 1
            counts.examples.setdefault("accepted below minimum", (*where, f"minimum {minimum}"))
        counts.checked += 1
        found = problems_of(result.messages, result.system, fmt)
        if found:
            counts.rejected += 1
            if all(ROLE_PROBLEM.search(p) for p in found):
                counts.rejected_roles_only += 1
            for p in found:
                kind = f"{fmt}: {_kind(p)}"
                counts.problems[kind] += 1
                counts.examples.setdefault(kind, (*where, p))
        tokens = recount(result.messages, result.system, fmt)
        if result.tokens > budget or tokens > budget:
            counts.over_budget += 1
            counts.examples.setdefault("over budget", (*where, f"{result.tokens} / recounted {tokens}"))
        if (messages, system) != before:
            counts.mutated += 1
            counts.examples.setdefault("mutated", (*where, ""))
        if result.restore(list(result.archive)) != messages:
            counts.not_restored += 1
            counts.examples.setdefault("not restored", (*where, ""))


def fuzz(
    transcripts: Sequence[Transcript],
    compactor: Compactor,
    *,
    cuts: int,
    budgets: int,
    formats: Sequence[str] = FORMATS,
    seed: int = 0,
    below: float = 0.1,
) -> dict[str, FuzzCounts]:
    """Counts per format: ``cuts`` answered cut points per run, ``budgets`` budgets per cut.

    Each budget is drawn uniformly between the pinned minimum and the full size, except
    a share ``below`` drawn below the minimum (BudgetError expected). Seeded per run.
    """
    out = {fmt: FuzzCounts() for fmt in formats}
    for index, t in enumerate(transcripts):
        rng = np.random.default_rng([seed, index])
        points = answered_cuts(t)
        picked = sorted(rng.choice(points, size=min(cuts, len(points)), replace=False).tolist()) if points else []
        for k in picked:
            draws = rng.random((len(formats), budgets, 2))
            for f, fmt in enumerate(formats):

                def choose(minimum: int, full: int, d: np.ndarray = draws[f]) -> list[int]:
                    chosen = []
                    for low_draw, value in d:
                        if low_draw < below and minimum > 1:
                            chosen.append(max(1, int(minimum // 2 + value * (minimum - minimum // 2 - 1))))
                        else:
                            chosen.append(int(minimum + value * (max(full, minimum) - minimum)))
                    return chosen

                fuzz_case(compactor, prefix(t, k), fmt, choose, out[fmt])
    return out


# --------------------------------------------------------------------------
# the tests
# --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def runs() -> list[Transcript]:
    runs = load_transcripts(shared_path("tau-bench-airline"))
    assert len(runs) == 200
    return runs


@pytest.fixture(scope="module")
def counts(runs: list[Transcript]) -> dict[str, FuzzCounts]:
    """All 200 runs x 2 cuts x 1 budget x 2 formats, with a cheap scorer."""
    return fuzz(runs, Compactor(scorer=RecencyScorer()), cuts=2, budgets=1, seed=0)


def test_answered_and_pending_cuts() -> None:
    t = Transcript.from_openai([
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}},
            {"id": "b", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "a", "content": "1"},
        {"role": "tool", "tool_call_id": "b", "content": "2"},
        {"role": "assistant", "content": "done"},
    ])
    assert answered_cuts(t) == [4, 5]
    assert pending_cuts(t) == [2, 3]


@pytest.mark.shared
def test_openai_outputs_are_all_accepted(counts: dict[str, FuzzCounts]) -> None:
    c = counts["openai"]
    assert c.cases == 400, c.report()
    assert c.checked > 300, c.report()
    assert c.failures() == 0, c.report()


@pytest.mark.shared
def test_anthropic_outputs_pair_tools_fit_and_leave_the_input_alone(counts: dict[str, FuzzCounts]) -> None:
    """Everything but the order of roles (checked on its own below)."""
    c = counts["anthropic"]
    assert c.cases == 400, c.report()
    assert c.checked > 300, c.report()
    assert c.failures(roles=False) == 0, c.report()


@pytest.mark.shared
def test_anthropic_outputs_are_all_accepted(counts: dict[str, FuzzCounts]) -> None:
    c = counts["anthropic"]
    assert c.failures() == 0, c.report()


@pytest.mark.shared
def test_refusals_happen_only_below_the_minimum(counts: dict[str, FuzzCounts]) -> None:
    for fmt, c in counts.items():
        assert c.refused > 0, f"{fmt}: no budget below the minimum was drawn\n{c.report()}"
        assert c.wrong_refusals == 0 and c.accepted_below_minimum == 0, c.report()


@pytest.mark.shared
@pytest.mark.parametrize("pin_last", [4, 0], ids=["pin-last-4", "pin-none"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_a_trailing_unanswered_call_is_kept_pending_or_dropped_whole(
    runs: list[Transcript], fmt: str, pin_last: int
) -> None:
    compactor = Compactor(scorer=RecencyScorer(), pin_last=pin_last)
    seen = 0
    for index, t in enumerate(runs[::4]):
        points = pending_cuts(t)
        if not points:
            continue
        k = points[np.random.default_rng(index).integers(len(points))]
        cut = prefix(t, k)
        messages, system = render(cut, fmt)
        pending = set(pending_calls(messages, format=fmt))
        assert pending, (t.id, k)
        assert problems_of(messages, system, fmt, allow_pending=True) == []
        before = copy.deepcopy(messages)
        kwargs = format_kwargs(fmt, system)
        minimum = pins_minimum(compactor, messages, kwargs)
        full = compactor.compact(messages, budget=10**9, **kwargs).source_tokens
        budget = (minimum + full) // 2
        result = compactor.compact(messages, budget=budget, **kwargs)
        seen += 1
        assert messages == before
        assert result.tokens <= budget
        # the order of roles is checked on its own (test_anthropic_outputs_are_all_accepted)
        assert beside_roles(problems_of(result.messages, result.system, fmt, allow_pending=True)) == [], (t.id, k)
        still = set(pending_calls(result.messages, format=fmt))
        assert still <= pending, (t.id, k, still, pending)
        strict = beside_roles(problems_of(result.messages, result.system, fmt))
        assert bool(strict) == bool(still), (t.id, k, strict)
        if pin_last:
            assert still == pending, "a pinned pending call stays where it was"
    assert seen >= 30


def test_a_pending_call_alone_at_the_end_survives_compaction() -> None:
    call = {"id": "c9", "type": "function", "function": {"name": "lookup", "arguments": '{"q": "x"}'}}
    messages = [
        {"role": "system", "content": "You help."},
        {"role": "user", "content": "Look it up. " + "context " * 300},
        {"role": "assistant", "content": "Working on it. " + "notes " * 300},
        {"role": "user", "content": "and then?"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
    ]
    result = Compactor(scorer=RecencyScorer(), pin_last=1).compact(messages, budget=120)
    assert result.tokens <= 120
    assert result.messages[-1]["tool_calls"] == [call]
    last = len(result.messages) - 1
    assert check_openai(result.messages) == [
        f"message {last} (assistant): tool call 'c9' is not answered by a tool message before the end of the list"
    ]
    assert check_openai(result.messages, allow_pending=True) == []


# -- minimal failing cases of the Compactor (Anthropic role order) ------------------------------


class _Flat:
    def score(self, transcript: Transcript, query: str | None = None) -> list[float]:
        return [0.5] * len(transcript.entries)


def _words(text: str) -> int:
    return len(text.split())


def test_anthropic_drop_keeps_roles_alternating() -> None:
    messages = [
        {"role": "user", "content": "Book a flight to Oslo"},
        {"role": "assistant", "content": "word " * 200},
        {"role": "user", "content": "Actually cancel it"},
    ]
    result = Compactor(scorer=_Flat(), counter=_words, pin_last=1).compact(messages, budget=18, format="anthropic")
    assert result.dropped == ("m1",)
    assert check_anthropic(result.messages, result.system) == []


def test_anthropic_output_starts_with_a_user_message() -> None:
    """Anthropic's messages open with a user turn: the first, trimmed or stubbed, where it fits beside
    the pins; else a later one, with nothing before it (never an assistant message first)."""
    messages = [
        {"role": "user", "content": "word " * 200},
        {"role": "assistant", "content": "Sure."},
        {"role": "user", "content": "Actually cancel it"},
    ]
    compactor = Compactor(scorer=_Flat(), counter=_words, pin_last=1)
    result = compactor.compact(messages, budget=40, format="anthropic")
    assert "m0" in result.stubbed + result.trimmed
    assert result.messages[0]["role"] == "user"
    assert check_anthropic(result.messages, result.system) == []
    # OpenAI has no such rule: there the first turn may go
    assert "m0" in compactor.compact(messages, budget=14, format="openai").dropped
    # the pinned last turn gives way before the first user turn does (a stub still starts the list)
    tight = compactor.compact(messages, budget=16, format="anthropic")
    assert tight.tokens <= 16 and tight.messages[0]["role"] == "user" and "m0" not in tight.dropped
    # below that, the newest request opens the messages alone: the first turn's stub would take its room
    newest = compactor.compact(messages, budget=10, format="anthropic")
    assert newest.messages == [messages[2]] and check_anthropic(newest.messages, newest.system) == []
    with pytest.raises(BudgetError, match="a user turn to open the messages") as raised:
        compactor.compact(messages, budget=5, format="anthropic")
    assert raised.value.required == compactor.compact(messages, budget=raised.value.required, format="anthropic").tokens


def test_consecutive_user_messages_pass_the_looser_rule() -> None:
    """What the API accepts today (it merges consecutive turns): only the first-role case remains."""
    messages = [
        {"role": "user", "content": "Book a flight to Oslo"},
        {"role": "assistant", "content": "word " * 200},
        {"role": "user", "content": "Actually cancel it"},
    ]
    result = Compactor(scorer=_Flat(), counter=_words, pin_last=1).compact(messages, budget=20, format="anthropic")
    assert check_anthropic(result.messages, result.system, alternation=False) == []
