"""One run over one transcript: the knapsack problem of a compaction, solved and assembled.

A :class:`Run` holds what :meth:`Compactor.compact
<salience.selector.compactor.Compactor.compact>` works out about one input:

1. each entry's options (:mod:`salience.selector.options`): whole (capped to
   ``max_entry_tokens``), trimmed, stubbed, dropped, and their token costs;
2. the scores (:mod:`salience.selector.scoring`; a user turn whose values the agent's calls have
   all passed, not all again and again, weighs :data:`ACTED_WEIGHT` of its score) and the pins. System entries
   (``pin_system``) are hard pins: whole or a :class:`~salience.errors.BudgetError`.
   The last user turn (with ``pin_last_user``, off by default) and the last ``pin_last`` entries (the
   assistant's plain text, neither a tool call nor a code action, not counted) are soft
   pins: each step down (whole, trimmed, stubbed, dropped) of one is worth more than
   every other entry and every older pin together (:func:`~salience.selector.pins.pin_worth`), so they stay whole
   whenever the budget allows and degrade, oldest first, before anything raises (a last user turn
   that alone costs more than the budget is not pinned: its score weighs it). The agent's actions (calls, code
   actions) and the request it works on (its newest user turn, unless its calls have acted on its values) that a
   sliding window keeps whole are held whole, newest first, as many as fit beside the soft pins
   (:func:`~salience.selector.pins.window_actions`). Entries scored at least ``critical`` are pinned whole too,
   highest score first, while they fit beside those (so a generous scorer never crowds out the latest messages);
3. phase masking (:mod:`salience.selector.masking`) of the other tool entries, with the
   ``policy`` (else the transcript's domain default) and the ``phase`` (else
   :func:`~salience.selector.masking.detect_phase`);
4. values ``(score + eps_i) * retain[option]`` (``retain``: FULL 1.0, TRIM 0.6, STUB
   0.15 by default; a trimmed or stubbed form's worth counts the share of the entry's
   values it keeps for :data:`VALUE_WEIGHT`; ``eps_i = EPSILON * (i + 1) / n`` so that
   ties go to the recent entries), plus :data:`ACTION_WORTH` for every form that keeps a
   state-changing call of the agent's (an edit, a booking: what a reader must know was
   done) and for the whole form of an action written as code in the reply
   (:data:`ACTION_BLOCK`; observation masking's rule: actions stay, observations go),
   in a :class:`Problem`;
5. :func:`salience.selector.knapsack.solve` picks one option per entry, tool groups
   atomic (a call is kept, in any form, iff its results are), and :meth:`Run.assemble`
   renders the choice back in the caller's format as a
   :class:`~salience.selector.result.Compaction`.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Container, Mapping
from dataclasses import dataclass

import numpy as np

from salience.errors import BudgetError
from salience.messages.dispatch import MessageCache, render
from salience.selector import knapsack
from salience.selector.masking import Phase, PhasePolicy, detect_phase, mask_options
from salience.selector.opening import digest_host
from salience.selector.options import OptionsCache, min_cost, rows, stub_to, trim_to, unit_min, unit_mins
from salience.selector.params import Config
from salience.selector.pins import (
    empty_error,
    grow_stub,
    grow_trim,
    hold_first_turn,
    must_stay_error,
    pin_worth,
    strict_pins,
    window_actions,
)
from salience.selector.problem import WHOLE_ONLY
from salience.selector.render import archived_head, digest_part, fitting_part, fitting_prefix
from salience.selector.result import Compaction, Ledger
from salience.selector.scoring import checked_scores, unrepeated
from salience.transcript import ACTION_BLOCK, Entry, Transcript
from salience.values import extract_values

__all__ = ["ACTED_WEIGHT", "ACTION_BLOCK", "ACTION_WORTH", "DIGEST_JOIN", "DIGEST_MAX", "DIGEST_MIN", "DIGEST_WEIGHT",
           "EPSILON", "RECURRING_MIN", "RECURRING_WORTH", "VALUE_WEIGHT",
           "Problem", "Run"]

#: Weight, in a trimmed or stubbed form's worth, of the share of the entry's values it keeps (the rest is ``retain``).
VALUE_WEIGHT = 0.5
#: Recency tie-breaker added to scores (scaled by position, at most this much).
EPSILON = 1e-3
#: Worth added to every form of an assistant entry that keeps a state-changing call, and to the whole form of one that
#: acts in code (:data:`ACTION_BLOCK`).
ACTION_WORTH = 0.5

#: No digest in a budget share smaller than this many tokens.
DIGEST_MIN = 16
#: What a digest adds to its host's marker before the other archived entries' parts: one billed token
#: fewer than "; also archived: " was, held out at 10%: ToolTalk +0.088 -> +0.094 over the window.
DIGEST_JOIN = "; also: "
#: The most tokens a digest takes, whatever the budget: a longer list of bare values is more than a reader can use.
DIGEST_MAX = 512
#: What a value a digest lists is worth, as a share of its entry's score divided among the
#: entry's values (a stub's listed values count :data:`VALUE_WEIGHT`). Set on held-out
#: recall (issue #14): at 1.0 a digest was taken too rarely to matter (airline +0.017 at 25%),
#: at 2.0 it was +0.066 there, and no domain lost more than 0.003.
DIGEST_WEIGHT = 2.0
#: A value that at least this many of the agent's calls passed as arguments (a session
#: token, a user id) is what its next call most likely passes again: a digest lists those
#: first (see :meth:`Run.digest`). Held out (after ``pin_last_user`` went off by default):
#: ToolTalk 0.131 / 0.491 -> 0.135 / 0.500 of the independent references at system + 10% /
#: + 25%, API-Bank 0.205 / 0.530 -> 0.202 / 0.531, airline 0.366 -> 0.368 at 10%; SWE-agent
#: and MINT unchanged. At least one call instead of two: API-Bank 0.510 at 25%.
RECURRING_MIN = 2
#: What each such value a digest lists is worth beside its entry's share (times :data:`DIGEST_WEIGHT`), at any score.
RECURRING_WORTH = 0.5
#: What a user turn's score weighs where the agent's calls have passed each of its values, not all of them
#: :data:`RECURRING_MIN` times (:meth:`Run.acted_on`): what it gave has been acted on. Held out, such a turn holds one
#: of the next call's references 18% / 18% / 13% of the time on ToolTalk / API-Bank / airline, where their scores
#: average 0.25 / 0.48 / 0.14 (25%); at 0.5, every reference figure there rises or holds (BENCHMARKS.md). The newest
#: user turn too (the login call took its credentials and answered with a token): held out, API-Bank +0.104 -> +0.110
#: over the window at 25% (ours +0.178 -> +0.190), ToolTalk +0.124 -> +0.127, the others within 0.001.
ACTED_WEIGHT = 0.5

_FULL, _TRIM, _STUB, _DROP = knapsack.FULL, knapsack.TRIM, knapsack.STUB, knapsack.DROP


@dataclass(frozen=True, slots=True)
class Problem:
    """A run's knapsack problem for one budget: costs, values and allowed options per entry."""

    costs: np.ndarray
    values: np.ndarray
    allowed: np.ndarray
    scores: np.ndarray
    phase: Phase
    pins: int
    #: The soft pins: kept whole whenever the budget allows, degraded before anything raises.
    soft: np.ndarray

    def whole_pins(self, allowed: np.ndarray | None = None) -> np.ndarray:
        """``allowed`` (default: the problem's) with every soft pin whole: what a caller
        checks to know whether a choice of its own still leaves room for the pins."""
        allowed = (self.allowed if allowed is None else allowed).copy()
        allowed[self.soft] = WHOLE_ONLY
        return allowed


class Run:
    """Everything :meth:`Compactor.compact` works out about one input transcript.

    With the compactor's caches, per-entry work (token counts, capped, trimmed and
    stubbed forms: ``options``) and renderings (``messages``) are looked up for entries
    seen in earlier calls.
    """

    def __init__(
        self,
        cfg: Config,
        source: Transcript,
        fmt: str,
        *,
        options: OptionsCache | None = None,
        messages: MessageCache | None = None,
    ) -> None:
        self.cfg = cfg
        self.source = source
        self.fmt = fmt
        self.messages = messages
        self.n = len(source.entries)
        if options is not None:
            options.check(cfg)
        self.rows = r = rows(cfg, options, source)  # per-entry facts, the last transcript's reused
        self.parent = r.parent
        self.units, self.unit_of = r.units, r.unit_of
        self.names = r.names
        self.opts = r.opts
        self.src_cost = r.src_cost
        self.full: list[Entry] = r.full
        self.pretrimmed: frozenset[int] = r.pretrimmed
        self.full_cost = r.full_cost
        self._renders: list[list[Entry | None]] | None = None
        self._costs: np.ndarray | None = None
        self._available: np.ndarray | None = None
        self._cover: np.ndarray | None = None  # (n, 4): share of values each form keeps, -1 if none
        self._scores: dict[str | None, np.ndarray] = {}
        self._system: np.ndarray | None = None
        self._edits: np.ndarray | None = None
        self.solver_gap: float | None = None  # of the last solve (None: no solver ran)
        self._code: np.ndarray | None = None
        self._tail: np.ndarray | None = None
        self._recurring: frozenset[str] | None = None
        self._acted: np.ndarray | None = None  # acted_on()
        self._last_user = -2  # -1: no user turn; -2: not worked out yet
        self.grown: dict[tuple[int, int], Entry] = {}  # a soft pin's form grown to fit (problem(); assemble)

    # -- renderings -----------------------------------------------------------
    def options(self) -> tuple[list[list[Entry | None]], np.ndarray, np.ndarray]:
        """Per entry: the FULL, TRIM, STUB renderings (None if not offered), their costs, availability."""
        if self._renders is not None:
            assert self._costs is not None and self._available is not None
            return self._renders, self._costs, self._available
        renders, costs, available, cover = self.rows.arrays(self.cfg)
        self._cover = cover
        self._renders, self._costs, self._available = renders, costs, available
        return renders, costs, available

    # -- scoring, pins ------------------------------------------------------
    def scores(self, query: str | None) -> np.ndarray:
        if query not in self._scores:
            self._scores[query] = checked_scores(self.cfg.scorer, self.source, query)
        return self._scores[query]

    def pins(self) -> np.ndarray:
        """Which entries are pinned: system entries (``pin_system``), the last user turn
        (``pin_last_user``) and the last ``pin_last`` entries that are not the assistant's
        plain text (neither a call nor a code action) nor system entries."""
        cfg = self.cfg
        pins = np.zeros(self.n, dtype=bool)
        if cfg.pin_system:
            pins |= self.system_mask()
        if cfg.pin_last_user and self.last_user() is not None:
            pins[self.last_user()] = True
        return pins | self.tail_pins()

    def tail_pins(self) -> np.ndarray:
        """The last ``pin_last`` entries that are neither system entries nor the assistant's
        plain text (neither a call nor a code action), worked out once per run."""
        if self._tail is not None:
            return self._tail
        pins = np.zeros(self.n, dtype=bool)
        left, entries, code = self.cfg.pin_last, self.source.entries, self.code_actions()
        # The newest entries are what the agent answers: a user turn, a result, its own action. Its own plain
        # words ("Let me get your token.") answer nothing: the score weighs those like any other entry, and they
        # do not count, so that the result the agent just got stays pinned when it then said "Now let me modify
        # the alarm." (API-Bank, held out, 25%: 0.506 -> 0.515 of the references, code support 0.189 -> 0.252
        # where the window keeps 0.261; the other sets unchanged.)
        for i in range(self.n - 1, -1, -1):
            if not left:
                break
            e = entries[i]
            if e.role != "system" and (e.role != "assistant" or e.tool_calls or code[i]):
                pins[i] = True
                left -= 1
        pins.setflags(write=False)
        self._tail = pins
        return pins

    def last_user(self) -> int | None:
        """Index of the last user turn (None: there is none), worked out once per run."""
        if self._last_user == -2:
            self._last_user = next((i for i in range(self.n - 1, -1, -1) if self.source.entries[i].role == "user"), -1)
        return self._last_user if self._last_user >= 0 else None

    def edit_actions(self) -> np.ndarray:
        """Assistant entries with a call to a state-changing tool (:attr:`ToolType.EDIT`, the
        run's policy's ``tool_types`` honoured), worked out once per run (a session's
        compaction asks for every goal it tries)."""
        if self._edits is None:
            self._edits = self.rows.edits(self.policy().tool_types)
        return self._edits

    def code_actions(self) -> np.ndarray:
        """Assistant entries without tool calls that act in their text: a fenced code block,
        ``<execute>`` or ``<solution>`` (the agents that run code from the reply, MINT- and
        SWE-agent-style), worked out once per run."""
        if self._code is None:
            self._code = self.rows.code()
        return self._code

    def acts(self) -> bool:
        """Whether the transcript holds an action: a tool call, or code run from the reply.

        Narrower than :meth:`Transcript.acts <salience.transcript.Transcript.acts>` (which the
        scorer's choice of model reads): a tool result after a reply that holds no action
        block does not count here. Six shared transcripts (MINT, SWE-agent) start that way;
        one definition for both would change their early compactions, so it waits for a
        measured change."""
        return any(e.tool_calls for e in self.source.entries) or bool(self.code_actions().any())

    def system_mask(self) -> np.ndarray:
        """System entries (worked out once per run)."""
        if self._system is None:
            self._system = self.rows.system()
        return self._system

    def policy(self) -> PhasePolicy:
        return self.cfg.policy if self.cfg.policy is not None else PhasePolicy.for_domain(self.source.domain)

    # -- the problem ----------------------------------------------------------
    def problem(
        self,
        budget: int,
        *,
        query: str | None,
        phase: Phase | str | None,
        fixed: Mapping[int, tuple[int, Entry | None]] | None = None,
        first_turn: bool = True,
    ) -> Problem:
        """Costs, values and allowed options for ``budget``; ``fixed`` entries get exactly their option."""
        cfg = self.cfg
        _, base_costs, available = self.options()
        costs = base_costs.copy()
        allowed = available.copy()
        fixed = fixed or {}
        for i, (opt, entry) in fixed.items():
            allowed[i] = False
            allowed[i, opt] = True
            if entry is not None:
                costs[i, opt] = cfg.counter.count_entry(entry)
        raw = self.scores(query)
        # A text said again word for word weighs once, on its newest copy (scoring.unrepeated); reported: the scorer's
        scores = unrepeated(raw, self.rows.repeats())
        # A user turn whose values the agent's calls have all passed, none again and again, weighs ACTED_WEIGHT.
        acted = self.acted_on()
        scores = np.where((acted >= 1) & (acted < RECURRING_MIN), scores * ACTED_WEIGHT, scores)
        pins = self.pins()
        if cfg.pin_last_user:
            # A last user turn that cannot fit whole is no pin: it would only ever be kept
            # as a stub, crowding out the rest; its score weighs it like any other entry.
            u = self.last_user()
            if u is not None and not self.tail_pins()[u] and costs[u, _FULL] > budget:
                pins[u] = False
        for i in fixed:
            pins[i] = False
        # System entries are hard pins: whole or nothing. The other pins are soft: they stay whole whenever the
        # budget allows, and degrade (trim, stub, then drop), oldest first, before a BudgetError is raised.
        hard = pins & self.system_mask() if self.cfg.pin_system else np.zeros(self.n, dtype=bool)
        soft = pins & ~hard
        allowed[hard] = WHOLE_ONLY
        if self.fmt == "anthropic" and first_turn:
            hold_first_turn(self.source.entries, fixed, allowed)  # Anthropic wants the first message from the user
        # the newest soft pin that cannot stay whole keeps as much as fits (grow_trim, grow_stub) beside the request
        ents, opts, src, u = self.source.entries, self.opts, self.src_cost, self.last_user()

        def least(a: np.ndarray) -> float:
            return self.min_cost(a, costs)
        spare = int(costs[u, _FULL]) if u is not None and not pins[u] and soft[u + 1:].any() else 0
        self.grown = grow_trim(costs, allowed, soft, budget, least, lambda i, n: trim_to(
            cfg, ents[i], int(src[i]), n, quoting=opts[i].quoting), spare) or grow_stub(
            costs, allowed, soft, budget, least, lambda i, n: stub_to(cfg, ents[i], int(src[i]), n, opts[i].call),
            u if spare else None)
        exempt = pins | np.isin(np.arange(self.n), list(fixed))  # the pins and the fixed entries
        whole = allowed.copy()  # with the soft pins whole
        whole[soft] = WHOLE_ONLY
        # The agent's actions that a sliding window keeps stay whole, and the request it works on (the last user turn,
        # unless the calls have acted on its values, ACTED_WEIGHT's), as many as what must stay allows beside the soft
        # pins (newest first), before the critical entries: observation masking's rule (actions and requests stay), no
        # fewer of the agent's actions than the window, counted by the messages' text as trimmers count it, keeps (held
        # out, billed, 10% / 25%, steps with fewer: airline 53 / 117 -> 12 / 3, MINT 85 / 73 -> 29 / 44). The request:
        # never trained on, BFCL +0.005 / +0.008, AgentDojo +0.002 / +0.003; held out, the mean as before (BENCHMARKS).
        calls = self.rows.calls()
        acting = (calls > 0) | self.code_actions()
        if acting.any():
            if u is not None and not 1 <= acted[u] < RECURRING_MIN:
                acting[u] = True
            acting[list(fixed)] = False
            base = allowed
            if soft.any():
                base = whole if least(whole) <= budget else strict_pins(allowed, soft, least, budget)
            text = np.maximum(costs[:, _FULL] - cfg.counter.message_overhead - cfg.counter.call_overhead * calls, 0)
            held = window_actions(text, base, self.system_mask(), acting, least, budget)
            allowed[held] = whole[held] = WHOLE_ONLY
            exempt[held] = True
        if cfg.critical is not None:
            # Critical entries are pinned only while they fit beside the soft pins and those actions, whole.
            unit_cost = unit_mins(costs, whole, self.unit_of, len(self.units)).tolist()
            total = sum(unit_cost)
            order = np.flatnonzero((scores >= cfg.critical) & ~exempt)
            for i in order[np.lexsort((-order, -scores[order]))].tolist():  # best score first, then newest
                row = allowed[i].copy()
                allowed[i] = whole[i] = WHOLE_ONLY
                u = int(self.unit_of[i])
                new = unit_min(costs, whole, self.units[u])
                if total - unit_cost[u] + new <= budget:
                    total += new - unit_cost[u]
                    unit_cost[u] = new
                    exempt[i] = True
                else:
                    allowed[i] = whole[i] = row
        policy = self.policy()
        ph = policy.check_phase(phase) if phase is not None else detect_phase(self.source, policy)
        allowed = mask_options(self.source, policy, ph, allowed=allowed, costs=costs, scores=scores,
                               budget=budget, exempt=exempt)
        retain = np.tile(np.asarray(cfg.retain, dtype=float), (self.n, 1))
        # A trimmed or stubbed entry keeps some of its values (ids, numbers, paths) in sight; what the next steps
        # reuse are those values, so the share it keeps counts for half of what the form is worth.
        assert self._cover is not None  # set by options() above
        known = self._cover >= 0
        if not self.acts():
            # A conversation (no tool call, no code action): what it is asked later is what
            # its turns say, which a list of their names and dates does not keep, nor a head
            # and a tail. A stub is worth only its retain share there (LoCoMo, unseen: 0.453 ->
            # 0.51 of the evidence), and a turn is not trimmed: kept whole, or stubbed or left
            # out (to the archive); the pins still degrade before anything raises. (LoCoMo, 15
            # unseen splits at 25%: 0.508 -> 0.535 of the evidence kept whole.)
            known[:, _STUB] = False
            free = ~soft & ~hard & allowed[:, _DROP]  # (Anthropic's first user turn may not go)
            free[-1:] = False  # the latest entry degrades rather than leave an empty list
            allowed[free, _TRIM] = False
        retain[known] = (1 - VALUE_WEIGHT) * retain[known] + VALUE_WEIGHT * self._cover[known]
        retain[:, _TRIM] = np.maximum(retain[:, _TRIM], retain[:, _STUB])
        eps = EPSILON * (np.arange(self.n) + 1) / max(self.n, 1)
        values = (scores + eps)[:, None] * retain
        # The agent's own state-changing actions (an edit, a booking, a cancellation) are
        # what a reader needs to know was done, and cost little: every form that keeps
        # the call is worth ACTION_WORTH more (the call stays whole in each of them).
        values[self.edit_actions(), :_DROP] += ACTION_WORTH
        # An action written as code in the reply is kept only by its whole form.
        values[self.code_actions(), _FULL] += ACTION_WORTH
        values[:, _DROP] = 0.0
        if soft.any():
            values = values + pin_worth(values, soft)
        return Problem(costs=costs, values=values, allowed=allowed, scores=raw, phase=ph, pins=int(pins.sum()),
                       soft=soft)

    def min_cost(self, allowed: np.ndarray, costs: np.ndarray) -> float:
        """Least a selection can cost: summed over the units that cannot all go (the others
        cost nothing at their cheapest)."""
        return min_cost(costs, allowed, self.unit_of, len(self.units))

    def solve(self, prob: Problem, budget: int, allowed: np.ndarray | None = None) -> tuple[np.ndarray, str, bool]:
        """(choices, method, over_budget); raises :class:`BudgetError` per ``on_over_budget``.
        The solver's certified gap is kept in :attr:`solver_gap` for :meth:`assemble`."""
        allowed = prob.allowed if allowed is None else allowed
        held = allowed
        if self.cfg.solver == "greedy" and prob.soft.any():  # a greedy fill does not keep the pins' order
            held = strict_pins(allowed, prob.soft, lambda a: self.min_cost(a, prob.costs), budget)
        kwargs = dict(allowed=held, parent=self.parent, method=self.cfg.solver)
        try:
            sol = knapsack.solve(prob.costs, prob.values, budget, **kwargs)  # type: ignore[arg-type]
            over = False
        except knapsack.InfeasibleError as exc:
            required = exc.min_cost
            if required is None or self.cfg.on_over_budget == "raise":
                raise must_stay_error(self.source.id, budget, required, prob.pins,
                                      system=self.cfg.pin_system and bool(self.system_mask().any()),
                                      anthropic=self.fmt == "anthropic") from None
            sol = knapsack.solve(prob.costs, prob.values, required, **kwargs)  # type: ignore[arg-type]
            over = True
        choices = np.asarray(sol.choices, dtype=np.int64)
        if len(choices) and (choices == _DROP).all():  # providers refuse an empty list
            forced = allowed.copy()
            forced[-1, _DROP] = False
            need = self.min_cost(forced, prob.costs)
            if self.cfg.on_over_budget == "raise" or not np.isfinite(need):
                raise empty_error(self.source.id, budget, need)
            kwargs["allowed"] = forced
            sol = knapsack.solve(prob.costs, prob.values, int(math.ceil(need)), **kwargs)  # type: ignore[arg-type]
            choices, over = np.asarray(sol.choices, dtype=np.int64), True
        self.solver_gap = sol.gap
        return choices, sol.method, over

    def digest(self, prob: Problem, choices: np.ndarray, budget: int, share: float,
               settled: Container[int] = (), opening: bool = False,
               ) -> tuple[np.ndarray, dict[int, tuple[int, Entry | None]]] | None:
        """A better answer than ``choices`` that lists archived entries' values in one stub, or None.

        A stub stands for one entry, and a tool result's stub needs its call kept whole beside it: at
        a small budget, the values of most dropped tool groups are out of sight. A digest takes what
        the pins whole leave beside them, up to ``share`` of the budget (``share`` where they cannot
        be whole at all), and never more than the cheapest answer leaves: the rest is solved again,
        and the latest archived entry (stubbed, or else dropped and neither a call nor a result)
        becomes a stub that also lists (after :data:`DIGEST_JOIN`), entry by entry, the values of the
        other archived entries that no whole entry shows, each entry's id first (restorable), its tool's name
        where it fits: first the agent's newest action's, where it is archived (what it just did, as many
        as fit; held out, 10%: airline 0.450 -> 0.463, MINT by our definition +0.370 -> +0.380), then
        the values that at least :data:`RECURRING_MIN` of the agent's calls passed (:meth:`recurring`:
        a session token, a user id, what the next call most likely passes again), under their newest
        archived holder (as many as fit, the most passed first: held out, 10%, airline 0.447 -> 0.450,
        ToolTalk 0.200 -> 0.202), then best score first. The agent's actions that ``choices`` keeps
        (its state-changing calls, its code actions whole) are kept in the new solve too, and so are
        the user turns it keeps, each in its form (values are no stand-in for a request), but for an
        older one whose values are all recurring (:meth:`Rows.acted_on`), or any where the pins cannot
        be whole at all; its read calls may go, their values listed. The digest is taken only if the
        whole answer is then worth more, each value it lists being worth its entry's score times
        :data:`DIGEST_WEIGHT`, shared over the entry's values, and each recurring value
        :data:`RECURRING_WORTH` times :data:`DIGEST_WEIGHT` more. Only where the transcript acts (a
        conversation's turns are not their names and dates); with ``opening``, hosted where Anthropic's
        messages still open with a user turn (:func:`~salience.selector.opening.digest_host`). Returns
        ``(choices, fixed)`` for :meth:`assemble`.
        """
        if not self.acts():
            return None
        # What the pins whole leave beside them, up to ``share``: the digest costs no pin its form (a fifth at least,
        # as before, degraded one wherever they left less, and the answer was then mostly worth less: airline held
        # out, 10% / 25%, +0.145 / +0.187 -> +0.215 / +0.203 over the window, SWE-agent +0.273 -> +0.364 at 10%, the
        # others unchanged, as on split seed 1). Where they cannot be whole at all (the call the newest result answers
        # may alone cost more), ``share``: a session token in one line is what no whole message could keep (ToolTalk
        # held out, 10%: 0.144 -> 0.230, the window 0.114; a fifth was below DIGEST_MIN).
        room = budget - self.min_cost(prob.whole_pins(), prob.costs)
        reserve = int(budget * share) if room <= 0 else min(int(budget * share), int(room))
        reserve = min(reserve, DIGEST_MAX)
        if reserve < DIGEST_MIN:
            return None
        # The agent's own actions that the answer keeps stay as they are: a digest lists
        # values, and must not cost what a reader needs to know was done.
        allowed = prob.allowed.copy()
        allowed[self.edit_actions() & (choices != _DROP), _DROP] = False
        allowed[self.code_actions() & (choices == _FULL)] = WHOLE_ONLY
        # Nor what the user said: a user turn it keeps stays in its form (values are no stand-in for a request;
        # held out, user turns kept whole: mean 0.119 / 0.227 -> 0.158 / 0.310, BENCHMARKS.md), but for an older
        # one whose every value is recurring, which the digest lists first (held out, 10%: ToolTalk +0.094 ->
        # +0.101, airline +0.236 -> +0.242 over the window; user turns whole 0.266 -> 0.258, 0.272 -> 0.264). The
        # newest, the request the agent answers now, keeps its form whatever its values (held out: the references
        # the same to the digit, user turns whole ToolTalk 0.244 -> 0.245 at 10%, airline 0.377 -> 0.378 at 25%).
        # Where the pins cannot be whole (the agent's last step exceeds the budget), none is held (held out, 3 splits,
        # 10%: ToolTalk +0.118..+0.122 -> +0.144..+0.157 over the window; its whole user turns 0.245 -> 0.201).
        if room > 0:
            users = self.rows.users() & (self.acted_on() < RECURRING_MIN)
            if self.last_user() is not None:
                users[self.last_user()] = True
            allowed[users & (choices == _FULL)] = WHOLE_ONLY
            trimmed = users & (choices == _TRIM)
            allowed[trimmed, _STUB] = allowed[trimmed, _DROP] = False
        # Never more than the cheapest answer leaves, beyond which the solve below has no answer
        # (held out, 10%: airline +0.210 -> +0.215, SWE-agent +0.273 -> +0.364, others unchanged).
        reserve = min(reserve, budget - int(math.ceil(self.min_cost(allowed, prob.costs))))
        if reserve < DIGEST_MIN:
            return None
        gap = self.solver_gap  # the plain answer's, unless the digest is taken
        try:
            alt, _, over = self.solve(prob, budget - reserve, allowed)
        except BudgetError:
            return None
        finally:
            alt_gap, self.solver_gap = self.solver_gap, gap
        if over:
            return None
        entries = self.source.entries
        host = digest_host(entries, alt, self.parent, settled, opening=opening)
        if host is None:
            return None
        renders = self.options()[0]
        costs = prob.costs
        rows = np.arange(self.n)
        room = budget - (int(costs[rows, alt].sum()) - int(costs[host, alt[host]]))
        shown: set[str] = set()
        for i in np.flatnonzero(alt == _FULL).tolist():
            shown.update(self._values(i))
        stub = renders[host][_STUB] if alt[host] == _STUB else None
        if stub is not None:
            head = stub.content[:-1]
            shown.update(v for v in self._values(host) if v in head)
        else:
            head = archived_head(entries[host].id, int(self.src_cost[host]))
        head += DIGEST_JOIN
        counter = self.cfg.counter
        used = counter.count_entry(entries[host].replace(content=head + "]"))
        scores = prob.scores
        archived = np.flatnonzero(alt != _FULL)
        parts: list[str] = []
        worth = 0.0
        misses = 0
        recurring = self.recurring()
        # Lazily (the room mostly fills long before the end); an entry with no recurring value lists nothing in the
        # first part (the loop's `fresh` tests the rest). The agent's newest action, archived, before them all.
        newest = self.rows.newest_action()
        holders = archived[::-1].tolist() if recurring else ()
        first = itertools.chain([(newest, False)] if newest >= 0 and alt[newest] != _FULL else [],
                                ((i, True) for i in holders if not recurring.isdisjoint(self._values(i))))
        rest = ((i, False) for i in archived[np.lexsort((-archived, -scores[archived]))].tolist())
        listed: dict[int, int] = {}  # entry -> its part
        for i, only_recurring in itertools.chain(first, rest):
            if room - used < DIGEST_MIN // 2 or misses >= 8:  # full, or what is left fits no entry's list
                break
            if i == host:
                continue
            values = self._values(i)
            if shown.issuperset(values):  # nothing fresh (most entries, here): one set test
                continue
            fresh = [v for v in values if v not in shown and (not only_recurring or v in recurring)]
            if not fresh:
                continue
            at = listed.get(i)
            label = self.names[i] or (entries[i].tool_calls[0].name if entries[i].tool_calls else None)
            part = functools.partial(digest_part, entries[i].id, label, more=at is not None)
            if (only_recurring or i == newest) and len(fresh) > 1 and used + counter.count(part(fresh)) + 1 > room:
                passes = self.rows.passes()
                fresh = sorted(fresh, key=lambda v: -passes[v])
                fresh = fresh[:max(fitting_prefix(fresh, part, counter.count, room - used - 1), 1)]
            text = fitting_part(entries[i].id, label, fresh, at is not None, counter.count, room - used - 1)
            extra = counter.count(text) + 1
            if used + extra > room:
                misses += 1
                continue
            misses = 0
            used += extra
            if at is None:
                listed[i] = len(parts)
                parts.append(text)
            else:
                parts[at] += text
            shown.update(fresh)
            worth += (float(scores[i]) + EPSILON) * DIGEST_WEIGHT * len(fresh) / len(values)
            worth += RECURRING_WORTH * DIGEST_WEIGHT * sum(v in recurring for v in fresh)
        entry = None
        while parts:  # tokens can merge across the joins: drop the last parts until it fits
            entry = entries[host].replace(content=head + "; ".join(parts) + "]")
            cost = counter.count_entry(entry)
            if cost <= room:
                break
            parts.pop()
        if not parts or entry is None:
            return None
        old = float(prob.values[rows, choices].sum())
        new = float(prob.values[rows, alt].sum()) - float(prob.values[host, alt[host]]) \
            + float(prob.values[host, _STUB]) + worth
        if new <= old:
            return None
        alt = alt.copy()
        alt[host] = _STUB
        self.solver_gap = alt_gap
        return alt, {host: (_STUB, entry)}

    def recurring(self) -> frozenset[str]:
        """The values that at least :data:`RECURRING_MIN` of the agent's calls passed as
        arguments (worked out once per run)."""
        if self._recurring is None:
            # counted over the new entries alone on a growing history (Rows.passed_by_calls)
            self._recurring = self.rows.passed_by_calls(self._passed, RECURRING_MIN)
        return self._recurring

    def acted_on(self) -> np.ndarray:
        """:meth:`Rows.acted_on` for this run's calls (counted once per run, with :meth:`recurring`)."""
        if self._acted is None:
            self.recurring()
            self._acted = self.rows.acted_on(self._values)
        return self._acted

    def _passed(self, i: int) -> tuple[str, ...]:
        """The values of entry ``i`` that its calls pass as arguments (cached with its options,
        so a growing history works out only its new entries')."""
        o = self.opts[i]
        if o.passed is None:
            calls = self.source.entries[i].tool_calls
            o.passed = tuple(v for v in self._values(i) if any(v in c.arguments for c in calls))
        return o.passed

    def _values(self, i: int) -> tuple[str, ...]:
        """The values of entry ``i``: its content's and its calls' arguments' (cached with its options)."""
        o = self.opts[i]
        if o.values is None:
            e = self.source.entries[i]
            values = dict.fromkeys(extract_values(e.content) if e.content else ())
            for c in e.tool_calls:
                values.update(dict.fromkeys(extract_values(c.arguments)))
            o.values = tuple(values)
        return o.values

    # -- the result -----------------------------------------------------------
    def assemble(
        self,
        choices: np.ndarray,
        *,
        budget: int,
        scores: np.ndarray | None,
        phase: Phase | None,
        method: str,
        over_budget: bool = False,
        fixed: Mapping[int, tuple[int, Entry | None]] | None = None,
    ) -> Compaction:
        fixed = fixed or {}
        srcs = self.source.entries
        ch = np.asarray(choices)
        full, full_cost = self.full, self.full_cost
        # Most entries are dropped, or kept whole as they came: those are sorted by arrays
        # (Ledger.of_outcomes); the others (trimmed, stubbed, fixed, or whole in a form capped
        # on the way in) get Ledger.outcome, the rule Ledger.record files by, one by one.
        kept_mask = ch != _DROP
        outcome = np.where(kept_mask, _FULL, _DROP)  # Ledger.record's option per entry
        special = kept_mask & (ch != _FULL)
        for i in self.pretrimmed:
            special[i] |= bool(kept_mask[i])
        for i in fixed:
            special[i] |= bool(kept_mask[i])
        kept_list = kept_mask.tolist()
        entries: list[Entry] = list(itertools.compress(full, kept_list))
        tokens = sum(itertools.compress(full_cost, kept_list))
        if special.any():
            renders: list[list[Entry | None]] | None = None
            at = np.cumsum(kept_mask) - 1  # each kept entry's place in the output
            counter = self.cfg.counter
            for i in np.flatnonzero(special).tolist():
                c = int(ch[i])
                src = srcs[i]
                hit = fixed.get(i)
                entry: Entry | None
                if hit is not None and hit[1] is not None:
                    entry = hit[1]
                elif c == _FULL:
                    entry = full[i]
                else:
                    if renders is None:
                        renders = self.options()[0]
                    entry = self.grown.get((i, c), renders[i][c])
                assert entry is not None, (i, c)
                entries[int(at[i])] = entry
                if entry is not full[i]:
                    tokens += counter.count_entry(entry) - full_cost[i]
                outcome[i] = Ledger.outcome(src, c, entry)
        ledger = Ledger.of_outcomes(self.rows.ids, srcs, outcome)
        transcript = Transcript(id=self.source.id, entries=tuple(entries), domain=self.source.domain,
                                meta=self.source.meta)
        messages, system = render(transcript, self.fmt, self.messages)
        return ledger.compaction(messages=messages, system=system, fmt=self.fmt, transcript=transcript,
                                 source=self.source, tokens=tokens, source_tokens=sum(self.src_cost), budget=budget,
                                 method=method, scores=scores, phase=phase, over_budget=over_budget,
                                 solver_gap=self.solver_gap)

    def full_choices(self) -> np.ndarray:
        return np.zeros(self.n, dtype=np.int64)
