"""Which selection :meth:`Compactor.compact <salience.selector.compactor.Compactor.compact>`
takes, and Anthropic's rule that the first message comes from the user.

:func:`choose` solves the run's problem, lists archived values in a digest where that is
worth more (:meth:`Run.digest <salience.selector.run.Run.digest>`), and for Anthropic
messages makes sure the answer opens with a user turn. Holding the first user turn in every
answer (at least its stub) did that, and at small budgets its stub took the room of the
newest request, the turn the agent answers now (held out, in Anthropic form, 10%: API-Bank's
references 0.094 against the window's 0.160, BENCHMARKS.md). So the answer is first chosen
without that rule; only where it opens with something else (an assistant message, kept for
its words or as a digest's host) is it chosen again, two ways, and the one worth more by the
solver's objective is taken:

* holding the first user turn (at least as a stub), as before;
* leaving out everything before the first user turn the answer keeps, holding that turn.

Both open with a user turn, the first by construction, the second too: a digest's host is
one that keeps it so (:func:`digest_host`), and an answer that would not is taken without
its digest. Where neither fits the
budget, the user turn that opens the messages at the least cost does, with nothing before
it; where none can, :class:`~salience.errors.BudgetError` says so, with that least cost as
``required``. A :class:`~salience.selector.session.CompactionSession` (what ``AnthropicContext``
runs) chooses the same way but for the second and third answers: first without holding the first
user turn, then holding the first user turn its settled drops leave; its digest is
:func:`with_digest` too. An input that does not open with a user turn is taken as it is.
"""

from __future__ import annotations

import math
from collections.abc import Container, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from salience.errors import BudgetError
from salience.selector.pins import must_stay_error, opens_with_user
from salience.selector.problem import DROP, STUB

if TYPE_CHECKING:
    from salience.selector.masking import Phase
    from salience.selector.params import Config
    from salience.selector.run import Problem, Run
    from salience.transcript import Entry

__all__ = ["Choice", "choose", "digest_host", "with_digest"]


@dataclass(frozen=True)
class Choice:
    """A selection ready for :meth:`Run.assemble`: the problem it solves, the option of each
    entry, how it was solved, whether it is over budget, the digest's fixed entries, and the
    soft pin's grown trim or stub it was made with (``Run.grown``)."""

    prob: Problem
    choices: np.ndarray
    method: str
    over: bool
    fixed: dict[int, tuple[int, Entry | None]] | None
    grown: dict[tuple[int, int], Entry]

    def worth(self) -> float:
        """The solver's objective: the sum of each entry's value in its option."""
        return float(self.prob.values[np.arange(len(self.choices)), self.choices].sum())


def with_digest(run: Run, prob: Problem, choices: np.ndarray, budget: int, *, anthropic: bool,
                settled: Container[int] = ()) -> tuple[np.ndarray, dict[int, tuple[int, Entry | None]]]:
    """``choices`` with archived values listed in a digest where that is worth more
    (:meth:`Run.digest`; ``settled``: a session's settled entries, which host none), and the
    digest's host as a fixed entry (``{}`` without a digest). With ``anthropic``, an answer that
    opens with a user turn keeps doing so: its digest's host is one that allows it
    (:func:`digest_host`), and an answer that would not is taken without a digest."""
    if not run.cfg.digest:
        return choices, {}
    entries = run.source.entries
    opening = anthropic and opens_with_user(entries, choices)
    better = run.digest(prob, choices, budget, run.cfg.digest, settled=settled, opening=opening)
    if better is None or (opening and not opens_with_user(entries, better[0])):
        return choices, {}
    return better[0], dict(better[1])


def digest_host(entries: Sequence[Entry], alt: np.ndarray, parent: np.ndarray, settled: Container[int], *,
                opening: bool) -> int | None:
    """Which archived entry's stub lists a digest under ``alt`` (:meth:`Run.digest`): the newest
    stubbed one, else the newest dropped one that is neither a call nor a result, nor a system
    entry, nor empty; never a session's ``settled`` entry (its rendering stands). With
    ``opening`` (Anthropic's messages open with a user turn), only one that keeps them so: the
    first entry ``alt`` keeps where that is a user turn, or one after it, or a user turn before
    it (its stub then opens them; before, a digest whose newest host came before the first user
    turn kept was left out). Held out, bench_unseen's Anthropic row, 10% / 25%: ToolTalk 0.266 /
    0.526 -> 0.283 / 0.539 (the OpenAI row: 0.285 / 0.543), airline 0.451 / 0.688 -> 0.448 /
    0.693, API-Bank 0.210 / 0.534 -> 0.207 / 0.534; over the window, mean +0.175 / +0.163 ->
    +0.178 / +0.168, worst (API-Bank) +0.050 / +0.103 -> +0.048 / +0.103."""
    n = len(entries)
    hosts = (i for i in range(n - 1, -1, -1) if alt[i] == STUB and i not in settled)
    dropped = (i for i in range(n - 1, -1, -1) if alt[i] == DROP and i not in settled and parent[i] < 0
               and not entries[i].tool_calls and entries[i].role != "system" and entries[i].content)
    if opening:
        first = next((i for i in range(n) if alt[i] != DROP and entries[i].role != "system"), n)
        opens = first < n and entries[first].role == "user"

        def fits(i: int) -> bool:
            return (opens and i >= first) or (i < first and entries[i].role == "user")

        hosts, dropped = (i for i in hosts if fits(i)), (i for i in dropped if fits(i))
    host = next(hosts, None)
    return host if host is not None else next(dropped, None)


def _solve(run: Run, prob: Problem, cfg: Config, *, anthropic: bool) -> Choice:
    choices, method, over = run.solve(prob, cfg.budget)
    fixed: dict[int, tuple[int, Entry | None]] = {}
    if not over:
        choices, fixed = with_digest(run, prob, choices, cfg.budget, anthropic=anthropic)
    return Choice(prob, choices, method, over, fixed or None, dict(run.grown))


def choose(run: Run, cfg: Config, *, query: str | None, phase: Phase | str | None) -> Choice:
    """The selection :meth:`Compactor.compact` assembles (module doc). Raises
    :class:`~salience.errors.BudgetError` as :meth:`Run.solve` does; for Anthropic messages,
    where no user turn can open them within the budget (its ``required``: the least that can)."""
    entries = run.source.entries
    first = next((e for e in entries if e.role != "system"), None)
    if run.fmt != "anthropic" or first is None or first.role != "user":  # (an input that opens otherwise: as it is)
        return _solve(run, run.problem(cfg.budget, query=query, phase=phase), cfg, anthropic=False)
    prob = run.problem(cfg.budget, query=query, phase=phase, first_turn=False)
    grown = dict(run.grown)
    answers: list[Choice] = []
    try:
        free = _solve(run, prob, cfg, anthropic=True)
    except BudgetError:
        free = None
    if free is not None and opens_with_user(entries, free.choices):
        return _with_grown(run, free)
    if free is not None:
        answers.append(free)  # (taken only where nothing else opens with a user turn)
    try:
        answers.append(_solve(run, run.problem(cfg.budget, query=query, phase=phase), cfg, anthropic=True))
    except BudgetError:
        pass
    users = [i for i, e in enumerate(entries) if e.role == "user"]
    kept = [i for i in users if free is not None and free.choices[i] != DROP]
    if kept:  # the first user turn the free answer keeps, with nothing before it
        answers.extend(_opening(run, prob, grown, cfg, kept[0]))
    if not any(opens_with_user(entries, a.choices) for a in answers):
        # the user turn that opens the messages at the least cost, with nothing before it
        costs = {u: run.min_cost(_opened(prob.allowed, entries, u), prob.costs) for u in users}
        cheapest = min(costs, key=lambda u: (costs[u], -u))
        if costs[cheapest] <= cfg.budget:
            answers.extend(_opening(run, prob, grown, cfg, cheapest))
        elif cfg.on_over_budget == "raise" or not answers:
            raise must_stay_error(run.source.id, cfg.budget, int(math.ceil(costs[cheapest])), prob.pins,
                                  system=cfg.pin_system and bool(run.system_mask().any()), anthropic=True)
    valid = [a for a in answers if opens_with_user(entries, a.choices)] or answers
    return _with_grown(run, max(valid, key=Choice.worth))


def _opened(allowed: np.ndarray, entries: Sequence[Entry], user: int) -> np.ndarray:
    """``allowed`` with every entry before ``user`` (but the system's) left out and ``user`` kept."""
    out = allowed.copy()
    before = np.array([i < user and e.role != "system" for i, e in enumerate(entries)], dtype=bool)
    out[before] = False
    out[before, DROP] = True
    if out[user, :DROP].any():
        out[user, DROP] = False
    return out


def _opening(run: Run, prob: Problem, grown: dict[tuple[int, int], Entry], cfg: Config, user: int) -> list[Choice]:
    """The answer that opens with ``user`` (:func:`_opened`), or none where it cannot."""
    run.grown = dict(grown)
    try:
        return [_solve(run, replace(prob, allowed=_opened(prob.allowed, run.source.entries, user)), cfg,
                       anthropic=True)]
    except BudgetError:
        return []


def _with_grown(run: Run, choice: Choice) -> Choice:
    run.grown = dict(choice.grown)  # what assemble renders a soft pin's grown trim or stub from
    return choice
