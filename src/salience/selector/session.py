"""Compaction across the calls of an agent loop: :class:`CompactionSession`.

A session keeps the cached prefix stable: decisions once made stay made, and entries
kept whole stay whole as far as the budget allows (rules in the class doc). A call
that only appends messages and stays below the trigger works on the new messages
alone: it reads, counts and renders them, and what remains ``O(n)`` are comparisons
and copies of lists done in C (the old messages against their copies, the messages
handed out before). What it keeps for that is a :class:`_Tail`; the result is built
by the same :meth:`~salience.selector.result.Ledger.compaction` as a whole run's.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from salience.errors import BudgetError, SalienceError
from salience.messages.dispatch import (
    MessageCache,
    copy_json,
    copy_langchain,
    reader,
    renderer,
    same_format,
    to_transcript,
)
from salience.selector import knapsack
from salience.selector.masking import Phase
from salience.selector.opening import with_digest
from salience.selector.options import EntryOptions, entry_options
from salience.selector.params import Config
from salience.selector.pins import opens_with_user
from salience.selector.problem import WHOLE_ONLY
from salience.selector.result import Compaction, Ledger, PrefixReuse
from salience.selector.run import Problem, Run
from salience.tokens import TokenCounter
from salience.transcript import Entry, Growth, Transcript

if TYPE_CHECKING:
    from salience.selector.compactor import Caches, Compactor

__all__ = ["CompactionSession", "common_prefix"]

_FULL, _DROP = knapsack.FULL, knapsack.DROP

#: A compaction starts over (giving up the cached prefix once) where an answer from scratch is worth
#: this share more, by the solver's objective with the pins aside, than the best one the session's
#: earlier decisions allow: 1.0, twice as much. Held out (benchmarks/bench_session.py), 10% / 25%,
#: airline: 0.664 / 0.897 -> 0.696 / 0.915 as OpenAI messages, 0.614 / 0.866 -> 0.654 / 0.901 as
#: Anthropic ones (value-stub masking: 0.593 / 0.875); the share of the tokens sent that began the
#: previous request, 0.268 / 0.466 -> 0.179 / 0.410 (the window's: 0.117 / 0.247). Gains of 0.5 / 0.05
#: keep 0.920 / 0.929 at 25% and 0.359 / 0.281 of the prefix.
RESTART_GAIN = 1.0
#: A session whose room (the budget above the system prompt) is smaller than this compacts as a plain
#: ``compact`` does, afresh at the budget (no ``trigger`` below it, no ``min_removal``, a restart wherever
#: an answer from scratch is worth more): providers cache no prompt shorter than 1,024 tokens (OpenAI;
#: Anthropic's Sonnet and Opus), and where the system prompt makes it longer, a stable prefix of fewer
#: tokens beside it saves too little to be worth what it costs in recall. Held out
#: (benchmarks/bench_session.py), 10% / 25%: ToolTalk 0.458 / 0.706 -> 0.464 / 0.744, API-Bank 0.385 /
#: 0.691 -> 0.387 / 0.709, airline 0.689 / 0.913 -> 0.736 / 0.935 (its share of the tokens sent that began
#: the previous request 0.185 / 0.413 -> 0.051 / 0.319); BFCL, never trained on, 0.268 / 0.701 -> 0.273 /
#: 0.754 with short results, 0.782 / 0.894 -> 0.800 / 0.920 with long ones.
CACHE_MIN = 1024


def common_prefix(a: Sequence[Any], b: Sequence[Any]) -> int:
    """How many leading items ``a`` and ``b`` have in common."""
    n = min(len(a), len(b))
    if list(a[:n]) == list(b[:n]):  # one C-level pass (same objects compare by identity first)
        return n
    k = 0
    for x, y in zip(a, b):
        if not (x is y or x == y):
            break
        k += 1
    return k


class CompactionSession:
    """Compaction across the calls of an agent loop, keeping the cached prefix stable.

    Pass the full, growing history on every call (not the previous output).
    Shares are of the *room*, the budget above the system prompt (what compaction can
    free): ``compact`` does nothing while the history (with earlier decisions applied)
    takes at most the system prompt plus ``trigger`` of the room (:attr:`limit`; with
    the default ``trigger=1.0``, the budget). Past that it compacts down to :attr:`target`,
    that less ``min_removal`` (a float: a share of the room, default 0.1; an int: tokens),
    leaving headroom for the next calls. (Held out, each 0.1 of headroom costs recall at
    every call: ``benchmarks/bench_session.py --removal``.) Rules:

    * an entry once trimmed, stubbed or dropped keeps that exact rendering ("settled");
      a result that arrives after its call was dropped is dropped with it;
    * entries kept whole before the last compaction stay whole as far as possible:
      the longest prefix of them that still lets the target be met is fixed, and only
      entries after it are chosen afresh (if the headroom target cannot be met, the
      budget itself is tried);
    * if even the settled decisions alone cannot fit the budget, the session
      recompacts from scratch (``recompacted`` is True, ``full_recompactions`` counts),
      to the target if the pins allow, else to the budget; so it does too where an
      answer from scratch is worth ``restart_gain`` more (a share; default 1.0, twice as
      much) by the solver's objective than the best the earlier decisions allow (None: never);
    * if the history is not an extension of the previous one (an entry changed or
      went missing), the session starts over (``resets`` counts);
    * a compaction lists archived values in a digest where that is worth more, as a plain
      one does (the compactor's ``digest``); the digest's host is then settled like any
      stub, and a settled entry never hosts a later one;
    * where the room is under ``cache_min`` tokens (default :data:`CACHE_MIN`, 1,024; 0: never),
      the session is not :attr:`stable`: it compacts at the budget itself, with no headroom, and
      starts over wherever an answer from scratch is worth more at all (a prefix that short is
      cached by no provider, or saves too little beside the system prompt).

    A call that only appends to the history and stays below the trigger works on the
    new messages alone (OpenAI, Anthropic and LangChain lists, Transcripts): it reads, counts and
    renders them, and checks the old messages still equal what they were and that the
    messages it handed out before were not changed (one given a change is copied
    again). Messages of successive results that did not change are the same objects,
    so copy one before changing it if an earlier result must stay as it was.

    After each call: ``triggered`` (this call compacted), ``recompacted``,
    ``prefix_reuse`` (a :class:`PrefixReuse` against the previous output, None on the
    first call), ``compactions`` (how many calls compacted).
    """

    # (class defaults: a session pickled by an earlier version, without them, carries on)
    restart_gain: float | None = RESTART_GAIN
    cache_min: int = 0
    _floor = 0

    def __init__(self, compactor: Compactor, *, budget: int, trigger: float, min_removal: float | int,
                 restart_gain: float | None = RESTART_GAIN, cache_min: int = CACHE_MIN) -> None:
        self.compactor = compactor
        self.budget = budget
        self.trigger = trigger
        self.min_removal = min_removal
        self.restart_gain = restart_gain
        self.cache_min = cache_min
        self.triggered = False
        self.recompacted = False
        self.prefix_reuse: PrefixReuse | None = None
        self.compactions = 0
        self.full_recompactions = 0
        self.resets = 0
        self._source: Transcript | None = None
        self._settled: dict[str, tuple[int, Entry | None]] = {}
        self._point = 0
        self._floor = 0  # the system prompt's tokens (hard pins), as of the last full call
        self._last: Compaction | None = None
        self._tail: _Tail | None = None

    def __repr__(self) -> str:
        return (f"CompactionSession(budget={self.budget}, trigger={self.trigger}, min_removal={self.min_removal!r}, "
                f"restart_gain={self.restart_gain!r}, cache_min={self.cache_min}, compactions={self.compactions}, "
                f"settled={len(self._settled)})")

    @property
    def room(self) -> int:
        """The budget above the system prompt (as of the last call): what compaction can free."""
        return max(0, self.budget - self._floor)

    @property
    def stable(self) -> bool:
        """Whether the session keeps its prefix stable: its :attr:`room` is at least ``cache_min``
        tokens (below, it compacts as a plain ``compact`` does: :data:`CACHE_MIN`)."""
        return self.room >= self.cache_min

    @property
    def limit(self) -> float:
        """The token count past which a call compacts: the system prompt plus ``trigger`` of the room
        (the budget where the session is not :attr:`stable`)."""
        return min(self.budget, self._floor + self.trigger * self.room) if self.stable else self.budget

    @property
    def target(self) -> int:
        """The token count a triggered compaction aims at: :attr:`limit` less ``min_removal``
        (a float: that share of the room above the system prompt; an int: tokens; none where the
        session is not :attr:`stable`)."""
        removal = self.min_removal if self.stable else 0
        tokens = int(round(removal * self.room)) if isinstance(removal, float) else int(removal)
        return max(1, int(self.limit) - tokens)

    def reset(self) -> None:
        """Forget every decision (the next call starts a new history)."""
        self._source = None
        self._settled = {}
        self._point = 0
        self._last = None
        self._tail = None

    def compact(
        self,
        messages: Any,
        *,
        query: str | None = None,
        phase: Phase | str | None = None,
        system: Any = None,
        format: str | None = None,
    ) -> Compaction:
        """This step's messages (see the class doc); never modifies ``messages``."""
        cfg = self.compactor._config(self.budget)
        caches = self.compactor._caches()
        tail, self._tail = self._tail, None
        if tail is not None:
            try:
                appended = self._append(tail, cfg, caches, messages, system, format)
            except SalienceError:  # bad new messages: the full path below says what is wrong
                appended = None
            if appended is not None:
                return appended
        source, fmt = to_transcript(messages, system=system, format=format, cache=caches.messages)
        if self._source is not None and source.entries[: len(self._source.entries)] != self._source.entries:
            self.reset()
            self.resets += 1
        run = Run(cfg, source, fmt, options=caches.options, messages=caches.messages)
        fixed = {i: self._settled[e.id] for i, e in enumerate(source.entries) if e.id in self._settled}
        for i, p in enumerate(run.parent.tolist()):
            if p >= 0 and i not in fixed and p in fixed and fixed[p][0] == _DROP:
                fixed[i] = (_DROP, None)  # a late result of a dropped call goes with it
                self._settled[source.entries[i].id] = (_DROP, None)
        choices = run.full_choices()
        view = 0
        for i in range(run.n):
            if i in fixed:
                opt, entry = fixed[i]
                choices[i] = opt
                view += 0 if entry is None else cfg.counter.count_entry(entry)
            else:
                view += run.full_cost[i]
        self.recompacted = False
        self._floor = sum(itertools.compress(run.full_cost, run.system_mask().tolist())) if run.cfg.pin_system else 0
        self.triggered = view > self.limit
        if not self.triggered:
            result = run.assemble(choices, budget=self.budget, scores=None, phase=None, method="session-noop",
                                  fixed=fixed)
        else:
            result = self._compact(run, fixed, query=query, phase=phase)
            self.compactions += 1
        self.prefix_reuse = self._reuse(result, cfg.counter)
        self._source = source
        self._last = result
        self._tail = _Tail.after(self, messages, system, format, cfg, caches.messages, result)
        return result

    def _append(
        self, tail: _Tail, cfg: Config, caches: Caches, messages: Any, system: Any, format: str | None
    ) -> Compaction | None:
        """This call's result if the history only grew since the last call and stays within
        the trigger (None otherwise: the full path then does the work), doing work for the
        new messages only, beyond C-level comparisons and copies of lists."""
        fmt = tail.fmt
        if format != tail.format or tail.key != _tail_key(cfg):
            return None
        k = len(tail.source.entries)
        if fmt == "transcript":
            if (
                not isinstance(messages, Transcript)
                or system is not None
                or len(messages.entries) < k
                or (messages.id, messages.domain, messages.meta) != (tail.source.id, tail.source.domain,
                                                                     tail.source.meta)
                or messages.entries[:k] != tail.source.entries
            ):
                return None
            source = messages
            tail.growth.check(source.id, source.entries, k)  # finds the new entries' parents
        else:
            m = len(tail.snaps)
            if (
                not isinstance(messages, (list, tuple))
                or len(messages) < m
                or system != tail.system
                or list(messages[:m]) != tail.snaps
            ):
                return None
            new = messages[m:]
            if new and format is None and not same_format(new, fmt):
                return None
            read_entries: list[Entry] = []
            if fmt == "anthropic":
                from salience.messages.anthropic import source_messages

                assert tail.reader is not None
                for i, message in enumerate(new, m):
                    read_entries.extend(tail.reader.read(message, i))
                tail.snaps.extend(source_messages(read_entries))
            else:
                read, key = reader(fmt)
                for i, message in enumerate(new, m):
                    entry = read(message, i, transcript_id="transcript")
                    caches.messages.remember(message, i, fmt, entry)
                    read_entries.append(entry)
                tail.snaps.extend(e.meta[key]["message"] for e in read_entries)
            source = tail.source.extended(read_entries, tail.growth)
        entries, parents = source.entries, tail.growth.parents
        # A call still waiting with a turn after it is a history providers refuse: the full
        # path refuses it too (messages.validate.require_answered), naming the call.
        for maker in tail.growth.open_calls.values():
            if any(entries[j].role != "tool" for j in range(max(maker + 1, k), len(entries))):
                return None
        caches.options.check(cfg)
        opts: list[EntryOptions] = []
        view = tail.tokens
        late: set[int] = set()  # late results of dropped calls: they go with their calls
        for i in range(k, len(entries)):
            p = parents[i]
            o = entry_options(cfg, caches.options, entries[i])
            opts.append(o)
            if p in tail.drops:
                late.add(i)
            else:
                view += o.full_cost
        if view > self.limit:
            return None
        out: list[Entry] = []
        ledger = tail.ledger
        for i, o in enumerate(opts, k):
            src = entries[i]
            tail.src_tokens += o.src_cost
            if i in late:
                tail.drops.add(i)
                self._settled[src.id] = (_DROP, None)
                ledger.record(src, _DROP, None)
                continue
            out.append(o.full)
            ledger.record(src, _FULL, o.full)
        tail.tokens = view
        tail.out = tail.out.extended(out, tail.out_growth)
        tail.source = source
        if fmt == "transcript":
            messages_out: Any = tail.out
        else:
            handed, internal = tail.handed, tail.internal
            copy_message = copy_json if fmt != "langchain" else copy_langchain
            if fmt == "anthropic":
                from salience.messages.anthropic import render_appended

                rendered = render_appended(out)
                roles = [m.get("role") for m in internal[-1:] + (rendered or [])]
                if rendered is None or any(a == b for a, b in zip(roles, roles[1:])):
                    return None  # messages to merge: the full path merges them
            else:
                render_one = renderer(fmt)
                rendered = [caches.messages.rendering(e, render_one) for e in out]
            if handed != internal:  # the caller changed a message it was given: a new copy
                for j, (h, r) in enumerate(zip(handed, internal)):
                    if h != r:
                        handed[j] = copy_message(r)
            internal.extend(rendered)
            handed.extend(copy_message(r) for r in rendered)
            messages_out = list(handed)
        result = ledger.compaction(messages=messages_out, system=copy.deepcopy(tail.system_out), fmt=fmt,
                                   transcript=tail.out, source=source, tokens=tail.tokens,
                                   source_tokens=tail.src_tokens, budget=self.budget, method="session-noop")
        self.recompacted = self.triggered = False
        self.prefix_reuse = self._reuse(result, cfg.counter)
        self._source = source
        self._last = result
        self._tail = tail
        return result

    def _compact(
        self, run: Run, fixed: dict[int, tuple[int, Entry | None]], *, query: str | None, phase: Phase | str | None
    ) -> Compaction:
        target = min(self.target, self.budget)
        point = min(self._point, run.n)
        free_prefix = [i for i in range(point) if i not in fixed]
        # Anthropic wants the first message from the user: each answer is chosen first without holding the
        # first user turn, and again holding it only where it opens otherwise (as Compactor.compact does:
        # held always, its stub took the newest request's room at small budgets; selector/opening.py).
        turns = (False, True) if run.fmt == "anthropic" else (True,)
        fresh: _Fresh | None = None
        start_over = False
        for goal in (target, self.budget):
            for first_turn in turns:
                prob = run.problem(goal, query=query, phase=phase, fixed=fixed, first_turn=first_turn)
                # Settled decisions stand only while the pins still fit whole beside them.
                if run.min_cost(prob.whole_pins(), prob.costs) > goal:
                    continue

                def fixed_prefix(p: int, prob: Problem = prob) -> np.ndarray:
                    allowed = prob.whole_pins()
                    for i in free_prefix[:p]:
                        if allowed[i, _FULL]:
                            allowed[i] = WHOLE_ONLY
                    return allowed

                lo, hi = 0, len(free_prefix)  # lo is feasible
                while lo < hi:
                    mid = (lo + hi + 1) // 2
                    if run.min_cost(fixed_prefix(mid), prob.costs) <= goal:
                        lo = mid
                    else:
                        hi = mid - 1
                try:
                    choices, method, over = run.solve(prob, goal, fixed_prefix(lo))
                except BudgetError:
                    if not fixed:
                        raise
                    start_over = True  # the settled decisions leave no valid answer (every entry dropped)
                    break
                if not first_turn and not opens_with_user(run.source.entries, choices):
                    continue
                gain = self.restart_gain if self.stable else 0.0
                if gain is not None and (fixed or lo) and not over:
                    # Earlier decisions cost this answer: start over where an answer from scratch is worth
                    # restart_gain more by the solver's objective (both weighed by the fresh problem's values).
                    fresh = self._fresh(run, target, query=query, phase=phase, turns=turns)
                    if fresh.ok and fresh.worth(fresh.choices) > (1 + gain) * fresh.worth(choices):
                        start_over = True
                        break
                listed: dict[int, tuple[int, Entry | None]] = {}
                if not over:  # (within what the session holds whole; a settled entry hosts no digest)
                    choices, listed = with_digest(run, replace(prob, allowed=fixed_prefix(lo)), choices, goal,
                                                  anthropic=run.fmt == "anthropic", settled=fixed)
                result = run.assemble(choices, budget=self.budget, scores=prob.scores, phase=prob.phase,
                                      method=f"session-{method}", over_budget=over, fixed={**fixed, **listed})
                self._settle(run, choices, result)
                return result
            if start_over:
                break
        # The settled decisions cannot fit, or cost too much: start over.
        self.recompacted = bool(fixed) or point > 0
        if self.recompacted:
            self.full_recompactions += 1
        if fresh is None:
            fresh = self._fresh(run, target, query=query, phase=phase, turns=turns)
        if fresh.error is not None:
            raise fresh.error
        prob, goal, choices = fresh.prob, fresh.goal, fresh.choices
        listed = {}
        if not fresh.over:
            choices, listed = with_digest(run, prob, choices, goal, anthropic=run.fmt == "anthropic")
        result = run.assemble(choices, budget=self.budget, scores=prob.scores, phase=prob.phase,
                              method=f"session-full-{fresh.method}", over_budget=fresh.over, fixed=listed)
        self._settled = {}
        self._settle(run, choices, result)
        return result

    def _fresh(self, run: Run, target: int, *, query: str | None, phase: Phase | str | None,
               turns: tuple[bool, ...]) -> _Fresh:
        """The answer from scratch: to ``target`` if the pins allow, else to the budget (Anthropic:
        first without holding the first user turn, then holding it, as in :meth:`_compact`)."""
        for first_turn in turns:
            goal = target
            prob = run.problem(goal, query=query, phase=phase, first_turn=first_turn)
            if run.min_cost(prob.whole_pins(), prob.costs) > goal:  # no headroom with the pins whole: the budget
                goal = self.budget
                prob = run.problem(goal, query=query, phase=phase, first_turn=first_turn)
            try:
                choices, method, over = run.solve(prob, goal)
            except BudgetError as exc:
                if first_turn:
                    return _Fresh(prob, goal, np.zeros(0, dtype=np.int8), "", True, exc)
                continue  # holding the first user turn says what does not fit
            if first_turn or opens_with_user(run.source.entries, choices):
                break
        return _Fresh(prob, goal, choices, method, over, None)

    def _settle(self, run: Run, choices: np.ndarray, result: Compaction) -> None:
        rendered = {e.id: e for e in result.transcript.entries}
        for i, src in enumerate(run.source.entries):
            c = int(choices[i])
            if c == _DROP:
                self._settled[src.id] = (c, None)
            elif c != _FULL:
                self._settled[src.id] = (c, rendered[src.id])
        self._point = run.n

    def _reuse(self, result: Compaction, counter: TokenCounter) -> PrefixReuse | None:
        last = self._last
        if last is None:
            return None
        if last.format != result.format or last.system != result.system:
            return PrefixReuse(messages=0, share=0.0, tokens=0)
        if result.format == "transcript":
            prev_msgs: Sequence[Any] = last.transcript.entries
            cur_msgs: Sequence[Any] = result.transcript.entries
        else:
            prev_msgs, cur_msgs = last.messages, result.messages
        k = common_prefix(prev_msgs, cur_msgs)
        prev_e, cur_e = last.transcript.entries, result.transcript.entries
        j = common_prefix(prev_e, cur_e)
        tokens = last.tokens if j == len(prev_e) else sum(counter.count_entry(e) for e in cur_e[:j])
        share = k / len(prev_msgs) if prev_msgs else 1.0
        return PrefixReuse(messages=k, share=share, tokens=tokens)


@dataclass(frozen=True, slots=True, eq=False)
class _Fresh:
    """A session's answer from scratch (:meth:`CompactionSession._fresh`): its problem, goal and
    choices, or the :class:`BudgetError` that says nothing fits."""

    prob: Problem
    goal: int
    choices: np.ndarray
    method: str
    over: bool
    error: BudgetError | None

    @property
    def ok(self) -> bool:
        """Whether this is an answer within its goal."""
        return self.error is None and not self.over

    def worth(self, choices: np.ndarray) -> float:
        """``choices`` weighed by this problem's values (the solver's objective), the soft pins
        aside (every answer holds them, and their worth is set to outweigh the rest)."""
        free = ~self.prob.soft
        return float(self.prob.values[np.arange(len(choices)), choices][free].sum())


def _tail_key(cfg: Config) -> tuple[Any, ...]:
    """What an entry's full form and token count depend on."""
    return (cfg.counter, cfg.max_entry_tokens)


@dataclass(slots=True, eq=False)
class _Tail:
    """What a :class:`CompactionSession` keeps after a call, so that a next call that only
    appends messages and does not compact works on the new messages alone
    (:meth:`CompactionSession._append`); the result's parts, kept as lists and dicts
    that grow.

    * ``source``, ``growth``: the history read so far and its validation state;
      ``snaps``: per message, the copy its entry holds (what the message must still equal);
    * ``out``, ``out_growth``: the result's transcript and its validation state;
      ``internal``: the result's messages as cached, ``handed``: the copies given out;
    * ``drops``: indices of entries settled as dropped (their late results go with them);
    * ``ledger``: what happened to each entry (the next result's kept, trimmed... ids).
    """

    fmt: str
    format: str | None  # the format argument
    system: Any  # the system argument (a copy)
    system_out: Any  # the result's system prompt
    reader: Any  # Anthropic: the reader, in the state the history left it
    key: tuple[Any, ...]  # see _tail_key
    source: Transcript
    growth: Growth
    snaps: list[Any]
    out: Transcript
    out_growth: Growth
    internal: list[Any]
    handed: list[Any]
    drops: set[int]
    ledger: Ledger
    tokens: int
    src_tokens: int

    @classmethod
    def after(
        cls, session: CompactionSession, messages: Any, system: Any, format: str | None, cfg: Config,
        cache: MessageCache, result: Compaction,
    ) -> _Tail | None:
        """The tail of a call the full path answered (None for inputs the fast path does not take)."""
        fmt, source = result.format, result.source
        anthropic_reader = None
        internal: list[Any] = []
        handed: list[Any] = []
        if fmt == "transcript":
            if not isinstance(messages, Transcript):
                return None
            snaps: list[Any] = []
        elif format not in (None, fmt) or not isinstance(messages, (list, tuple)) or fmt == "responses":
            return None  # (Responses items: an entry may hold several items; the full path answers)
        elif fmt == "anthropic":
            from salience.messages.anthropic import Reader, source_messages

            snaps = source_messages(source.entries)
            anthropic_reader = Reader.after(source)
            internal = copy_json(result.messages)
            handed = list(result.messages)
        else:
            _, key = reader(fmt)
            snaps = [e.meta[key]["message"] for e in source.entries]
            render_one = renderer(fmt)
            internal = [cache.rendering(e, render_one) for e in result.transcript.entries]
            handed = list(result.messages)
        settled = session._settled
        drops = {i for i, e in enumerate(source.entries) if settled.get(e.id, (None,))[0] == _DROP}
        return cls(
            fmt=fmt, format=format, system=copy.deepcopy(system), system_out=copy.deepcopy(result.system),
            reader=anthropic_reader, key=_tail_key(cfg), source=source,
            growth=Growth().check(source.id, source.entries), snaps=snaps, out=result.transcript,
            out_growth=Growth().check(result.transcript.id, result.transcript.entries), internal=internal,
            handed=handed, drops=drops, ledger=Ledger.of(result), tokens=result.tokens,
            src_tokens=result.source_tokens,
        )
