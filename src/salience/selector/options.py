"""Each entry's options (whole, trimmed, stubbed, dropped), their costs, and tool-group units.

:func:`entry_options` gives an entry's :class:`EntryOptions`: its token count, its
form capped to ``max_entry_tokens`` (:func:`cap`), and, worked out on demand
(:func:`work_out`), its trimmed and stubbed forms, each offered only if cheaper than
the better ones (texts from :mod:`salience.selector.render`). An
:class:`OptionsCache` keeps them per entry across calls, for one configuration.

Tool groups are atomic: :func:`units` lists them (a call then its results) beside
the singletons, and :func:`min_cost` is the least a selection can cost.

:class:`Rows` holds what a run needs of every entry that no later entry can change (its
parent, tool name, options, token counts, the option arrays, what kind of entry it is),
for one transcript; :func:`rows` builds them for a transcript that extends the last one
seen (the same entry objects first) from that one's, doing the new entries' work alone.
"""

from __future__ import annotations

import math
import operator
import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from salience.messages.dispatch import MEMO_SIZE, IdCache
from salience.scorer.handles import handles
from salience.selector import knapsack
from salience.selector.masking import tool_name
from salience.selector.params import Config
from salience.selector.render import action_lines, stub_text, trim_text
from salience.tooltypes import ToolType, tool_type
from salience.transcript import ACTION_BLOCK, Entry, Transcript
from salience.values import extract_values, value_set

__all__ = ["EntryOptions", "OptionsCache", "Rows", "cap", "entry_options", "min_cost", "outside", "rows", "unit_min",
           "unit_mins", "units", "work_out"]

_FULL, _TRIM, _STUB, _DROP = knapsack.FULL, knapsack.TRIM, knapsack.STUB, knapsack.DROP


class EntryOptions:
    """One entry's forms and their token counts (what a run needs of it, cached per entry)."""

    __slots__ = ("entry", "src_cost", "full", "full_cost", "done", "trim", "trim_cost", "stub", "stub_cost",
                 "trim_cover", "stub_cover", "call", "quoting", "values", "passed")

    def __init__(self, entry: Entry, src_cost: int, full: Entry, full_cost: int) -> None:
        self.entry = entry
        self.src_cost = src_cost
        self.full = full  # the entry, or its capped form (max_entry_tokens)
        self.full_cost = full_cost
        self.done = False  # trim and stub worked out
        self.trim: Entry | None = None
        self.trim_cost = 0
        self.stub: Entry | None = None
        self.stub_cost = 0
        self.trim_cover = -1.0  # share of the entry's values the trimmed form shows; -1: no values
        self.stub_cover = -1.0
        self.call: Entry | None = None  # the entry whose calls work_out left out of the stub
        self.quoting: Sequence[str] = ()  # the lines of the action it answers, which work_out's trim spared
        self.values: tuple[str, ...] | None = None  # its content's and calls' values (Run.digest's)
        self.passed: tuple[str, ...] | None = None  # those of them its calls pass (Run.recurring's)


class OptionsCache:
    """Entry object -> its :class:`EntryOptions`, valid for one configuration: :meth:`check`
    forgets them when the parameters they depend on changed (the counter,
    ``max_entry_tokens``, ``trim_keep``, ``stub_values``)."""

    __slots__ = ("_lock", "config", "options", "rows", "size")

    def __init__(self, size: int = MEMO_SIZE) -> None:
        self.size = size
        self.options = IdCache(size)
        self.rows: Rows | None = None  # the last transcript's (see :func:`rows`)
        self.config: tuple[object, ...] | None = None
        self._lock = threading.Lock()

    def check(self, cfg: Config) -> None:
        """Forget the options (and the last :class:`Rows`) when the parameters they depend on changed."""
        key = (cfg.counter, cfg.max_entry_tokens, cfg.trim_keep, cfg.stub_values)
        with self._lock:
            if self.config is None or self.config[0] is not cfg.counter or self.config[1:] != key[1:]:
                self.options = IdCache(self.size)
                self.rows = None
                self.config = key


def entry_options(cfg: Config, cache: OptionsCache | None, entry: Entry) -> EntryOptions:
    """``entry``'s :class:`EntryOptions` (its token count and capped form), from ``cache`` when
    it has them; ``cache.check(cfg)`` must have been called."""
    if cache is not None:
        hit: EntryOptions | None = cache.options.get(entry)
        if hit is not None:
            return hit
    counter = cfg.counter
    cost = counter.count_entry(entry)
    capped = cap(cfg, entry, cost)
    if capped is None:
        opts = EntryOptions(entry, cost, entry, cost)
    else:
        opts = EntryOptions(entry, cost, capped, counter.count_entry(capped))
    if cache is not None:
        cache.options.put(entry, opts)
    return opts


def cap(cfg: Config, entry: Entry, cost: int) -> Entry | None:
    """``entry`` trimmed to ``cfg.max_entry_tokens`` (None when it fits, or trimming would not save)."""
    limit = cfg.max_entry_tokens
    if limit is None or cost <= limit or entry.role == "system" or not entry.content:
        return None
    hit = trim_to(cfg, entry, cost, limit, values=())
    return None if hit is None else hit[0]


def trim_to(cfg: Config, entry: Entry, cost: int, limit: int,
            values: Sequence[str] | None = None, quoting: Sequence[str] = ()) -> tuple[Entry, int] | None:
    """``entry`` (``cost`` tokens) trimmed to about ``limit`` tokens as the counter bills it
    (four tries to come under it; the last may not), keeping as much as that allows, and what
    it then costs; None when nothing is cut or trimming would not save. The marker lists those
    of ``values`` its cut middle held (:func:`trim_text`; ``None``: a tool result's own values,
    as :func:`work_out`'s trims); ``quoting``: the lines of the action it answers, which the cut
    spares where it can (:func:`salience.selector.render.quoted_cut`)."""
    counter = cfg.counter
    if values is None:
        values = extract_values(entry.content) if entry.role == "tool" else ()
    text_tokens = counter.count(entry.content)
    keep = limit - (cost - text_tokens) - 24  # room for the marker
    best: Entry | None = None
    for _ in range(4):
        text = trim_text(entry.content, max(0, keep), counter, entry_id=entry.id, total=text_tokens,
                         values=values, max_values=cfg.stub_values, quoting=quoting)
        if text is None:
            break
        best = entry.with_content(text)
        over = counter.count_entry(best) - limit
        if over <= 0 or keep <= 0:
            break
        keep -= over
    if best is None:
        return None
    got = counter.count_entry(best)
    return None if got >= cost else (best, got)


def stub_to(cfg: Config, entry: Entry, cost: int, limit: int, call: Entry | None = None) -> tuple[Entry, int] | None:
    """A tool result's stub that lists as many of its values as fit in ``limit`` tokens as the
    counter bills it (more than ``cfg.stub_values``, the values its ``call``'s arguments show left
    out, as its stub leaves them), and what it then costs; None for any other entry, or where no
    more than ``cfg.stub_values`` of them fit."""
    if entry.role != "tool" or not entry.content:
        return None
    values = extract_values(entry.content)
    shown = {v for c in call.tool_calls for v in extract_values(c.arguments)} if call is not None else set()
    listed = [v for v in values if v not in shown]
    rest = cost - cfg.counter.count(entry.content)
    best: tuple[Entry, int] | None = None
    lo, hi = cfg.stub_values + 1, len(listed)
    while lo <= hi:  # more values, a longer stub: the most that fit
        mid = (lo + hi) // 2
        stub = entry.with_content(stub_text(entry.id, tokens=cost, values=listed, max_values=mid))
        got = rest + cfg.counter.count(stub.content)
        if got <= limit:
            best, lo = (stub, got), mid + 1
        else:
            hi = mid - 1
    return best


def _trim_keep(cfg: Config, o: EntryOptions) -> int:
    tokens = cfg.counter.count(o.full.content)
    k = cfg.trim_keep
    return int(round(k * tokens)) if isinstance(k, float) else min(int(k), tokens)


def outside(strings: Sequence[str], values: Sequence[str]) -> list[str]:
    """Those of ``strings`` that are inside none of ``values`` (as substrings), in order: one
    search of the values joined for each (a 2,000-line observation in a user turn has thousands
    of both, and a test of each against each took a second).

    >>> outside(["justinkool", "lara.jean", "Virginia"], ["lara.jean@fmail.com", "justinkool"])
    ['Virginia']
    """
    known = set(values)
    within = "\0".join(values)
    return [h for h in strings if h not in known
            and (h not in within if "\0" not in h else not any(h in v for v in values))]


def work_out(cfg: Config, o: EntryOptions, call: Entry | None = None, quoting: Sequence[str] = ()) -> None:
    """The trimmed and stubbed forms of ``o`` (each only if cheaper than the better ones).

    ``call``: the entry whose tool calls answer ``o`` (a tool result's), kept in every form
    while its result is: the stub lists the values its arguments do not, so that no slot
    repeats what the call beside it says. ``quoting``: the lines of the action ``o`` answers
    (:func:`~salience.selector.render.action_lines`), which its trim spares where it can, as the
    newest result's does (a traceback's frames that show the agent's code: held out, SWE-agent's
    code lines +0.255 -> +0.294 over the window at 5%, its references +0.364 -> +0.409 at 15%,
    MINT's code lines +0.173 -> +0.176 at 10%; nothing else moved at 10% or 25%).
    """
    counter = cfg.counter
    src = o.entry
    o.call = call
    o.quoting = quoting
    if src.content:
        values = extract_values(src.content)
        # A tool result's trim lists the values its cut middle held, as its stub would: the ids of a
        # search's middle rows. (Held out, 10% / 25%: airline +0.215 / +0.203 -> +0.226 / +0.197 over
        # the window, SWE-agent +0.364 / +0.182 -> +0.409 / +0.227, ToolTalk +0.105 -> +0.107 at
        # 25%; split seed 1 airline +0.218 / +0.204 -> +0.231 / +0.205. Every trim listing them
        # cost MINT's task turns 0.057 of its own-definition recall at 25%.)
        text = trim_text(src.content, _trim_keep(cfg, o), counter, entry_id=src.id,
                         values=values if src.role == "tool" else (), max_values=cfg.stub_values, quoting=quoting)
        # A form differs from the entry in its content alone: its count_entry is the entry's
        # (src_cost) less the content's count plus the form's, the same cached counts summed,
        # and the form's Entry is made only when the form is offered.
        rest = o.src_cost - counter.count(src.content)
        if text is not None:
            c = rest + counter.count(text)
            if c < o.full_cost:
                o.trim, o.trim_cost = src.with_content(text), c
                if values:
                    o.trim_cover = len(value_set(text) & set(values)) / len(values)
        # the values the call's arguments show (read only when the content has values to list)
        shown = ({v for c in call.tool_calls for v in extract_values(c.arguments)}
                 if call is not None and values else set())
        listed = [v for v in values if v not in shown] if shown else values
        if src.role == "user":
            # A user turn's handles too (salience.scorer.handles: a username, a password, a city,
            # what a later call copies and seldom a value): else the stub of "Justin (justinkool),
            # Virginia (decture)" listed nothing, cost most of the turn and kept none of it. (Held
            # out, independent, salience - window, 10% / 25%: ToolTalk +0.071 / +0.094 -> +0.079 /
            # +0.099, SWE-agent +0.318 -> +0.364 at 10%, API-Bank -0.003 / -0.003, airline within
            # 0.002; the same for the assistant's plain messages added nothing.)
            extra = outside(handles(src.content), values)
            if extra:
                values, listed = [*values, *extra], [*listed, *extra]
        if values:
            o.stub_cover = (min(cfg.stub_values, len(listed)) + len(values) - len(listed)) / len(values)
        stub = stub_text(src.id, tokens=o.src_cost, values=listed, max_values=cfg.stub_values)
        c = rest + counter.count(stub)
        best_other = o.trim_cost if o.trim is not None else o.full_cost
        if c < best_other:
            o.stub, o.stub_cost = src.with_content(stub), c
    o.done = True


# -- per-entry rows of one transcript ------------------------------------------------------


def _frozen(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


class Rows:
    """What a run needs of every entry of one transcript that no later entry changes: its
    parent (:meth:`Transcript.parents`), tool group (``units``, ``unit_of``), tool name,
    :class:`EntryOptions` and costs; and, worked out on demand, its option arrays
    (:meth:`arrays`) and whether it is a system entry, a code action, an edit
    (:meth:`system`, :meth:`code`, :meth:`edits`). Built by :func:`rows`; its arrays and
    lists are not to be changed (the arrays are read-only): the next transcript's rows
    share them for its first entries."""

    __slots__ = ("_arrays", "_base", "_calls", "_code", "_edits", "_passed", "_repeats", "_system", "_users", "entries",
                 "full", "full_cost", "ids", "names", "opts", "parent", "parents", "pretrimmed", "src_cost", "unit_of",
                 "units")

    def __init__(self) -> None:
        self.entries: tuple[Entry, ...] = ()
        self.ids: list[str] = []  # each entry's id
        self.parents: list[int] = []
        self.parent = np.zeros(0, dtype=np.int64)
        self.units: list[list[int]] = []
        self.unit_of = np.zeros(0, dtype=np.int64)
        self.names: list[str | None] = []
        self.opts: list[EntryOptions] = []
        self.src_cost: list[int] = []
        self.full: list[Entry] = []
        self.full_cost: list[int] = []
        self.pretrimmed: frozenset[int] = frozenset()
        # (renders, costs, available, cover) once worked out; _base: the earlier rows' and how many to reuse
        self._arrays: tuple[list[list[Entry | None]], np.ndarray, np.ndarray, np.ndarray] | None = None
        self._base: tuple[Rows, int] | None = None
        self._system: np.ndarray | None = None
        self._users: np.ndarray | None = None
        self._code: np.ndarray | None = None
        self._calls: np.ndarray | None = None
        self._repeats: np.ndarray | None = None
        self._edits: tuple[dict[str, Any], np.ndarray] | None = None
        # (how many calls passed each value, the values passed at least `least` times, least) over every entry
        self._passed: tuple[Counter[str], frozenset[str], int] | None = None

    def _reuse(self) -> tuple[Rows | None, int]:
        base = self._base  # read once: the next rows may clear it from another thread
        return base if base is not None else (None, 0)

    def arrays(self, cfg: Config) -> tuple[list[list[Entry | None]], np.ndarray, np.ndarray, np.ndarray]:
        """Per entry: the FULL, TRIM, STUB renderings (None if not offered), and the (n, 4)
        costs, availability and value cover (share of the entry's values each form keeps,
        -1 if it has none) of its options; the trimmed and stubbed forms worked out
        (:func:`work_out`) for the entries that the earlier rows did not hold."""
        if self._arrays is not None:
            return self._arrays
        base, m = self._reuse()
        old = base._arrays if base is not None else None
        if old is None:
            m = 0
        entries, parents, opts = self.entries, self.parents, self.opts
        n = len(opts)
        # the lines of the newest action so far, which what answers it quotes (an action itself quotes nothing: its
        # lines that repeat the one before are not what it adds)
        code, acting = self.code(), self.acting()
        before = np.flatnonzero(acting[:m])
        quoting = action_lines(entries[before[-1]], bool(code[before[-1]])) if len(before) else ()
        for i in range(m, n):
            o = opts[i]
            p = parents[i]
            # A tool result is kept only beside its call: the call's values need no slot in its stub.
            call = entries[p] if p >= 0 else None
            answers = () if acting[i] else quoting
            # an entry's options are cached by the entry: another history may put another action before it
            if not o.done or o.call is not call or o.quoting != answers:
                work_out(cfg, o, call, quoting=answers)
            if acting[i]:
                quoting = action_lines(entries[i], bool(code[i]))
        new = opts[m:]
        costs = np.zeros((n, 4), dtype=np.int64)
        available = np.zeros((n, 4), dtype=bool)
        cover = np.full((n, 4), -1.0)
        if old is not None and m:
            costs[:m] = old[1][:m]
            available[:m] = old[2][:m]
            cover[:m] = old[3][:m]
        if n > m:
            costs[m:, _FULL] = self.full_cost[m:]
            costs[m:, _TRIM] = [o.trim_cost for o in new]
            costs[m:, _STUB] = [o.stub_cost for o in new]
            available[m:, _FULL] = True
            available[m:, _DROP] = True
            available[m:, _TRIM] = [o.trim is not None for o in new]
            available[m:, _STUB] = [o.stub is not None for o in new]
            cover[m:, _TRIM] = [o.trim_cover for o in new]
            cover[m:, _STUB] = [o.stub_cover for o in new]
        renders: list[list[Entry | None]] = (old[0][:m] if old is not None else []) + [[o.full, o.trim, o.stub]
                                                                                       for o in new]
        self._arrays = (renders, _frozen(costs), _frozen(available), _frozen(cover))
        return self._arrays

    def _flags(self, attr: str, flag: Any, dtype: Any = bool) -> np.ndarray:
        base, m = self._reuse()
        old: np.ndarray | None = getattr(base, attr) if base is not None else None
        m = m if old is not None else 0
        head = old[:m] if old is not None else np.zeros(0, dtype=dtype)
        tail = np.fromiter(map(flag, self.entries[m:]), dtype=dtype, count=len(self.entries) - m)
        return _frozen(np.concatenate([head, tail]))

    def system(self) -> np.ndarray:
        """System entries."""
        if self._system is None:
            self._system = self._flags("_system", lambda e: e.role == "system")
        return self._system

    def users(self) -> np.ndarray:
        """User entries."""
        if self._users is None:
            self._users = self._flags("_users", lambda e: e.role == "user")
        return self._users

    def code(self) -> np.ndarray:
        """Assistant entries without tool calls that act in their text (:data:`ACTION_BLOCK`)."""
        if self._code is None:
            self._code = self._flags("_code", lambda e: e.role == "assistant" and not e.tool_calls and bool(e.content)
                                     and ACTION_BLOCK.search(e.content) is not None)
        return self._code

    def repeats(self) -> np.ndarray:
        """Per entry, the newest later entry that says it again word for word (a user turn or
        the assistant's plain words, the same role and the same text), or -1.

        >>> from salience import Transcript
        >>> login = {"role": "user", "content": "My username is ann, password pw1."}
        >>> t = Transcript.from_openai([login, {"role": "assistant", "content": "Thanks."},
        ...     {"role": "user", "content": "Book it."}, {"role": "assistant", "content": "Thanks."}, login])
        >>> r = Rows()
        >>> r.entries = t.entries
        >>> r.repeats().tolist()
        [4, 3, -1, -1, -1]
        """
        if self._repeats is None:
            out = np.full(len(self.entries), -1, dtype=np.int64)
            newest: dict[tuple[str, str], int] = {}
            for i in range(len(self.entries) - 1, -1, -1):
                e = self.entries[i]
                if e.role in ("user", "assistant") and e.content and not e.tool_calls:
                    out[i] = newest.setdefault((e.role, e.content), i)
            out[out == np.arange(len(out))] = -1
            self._repeats = _frozen(out)
        return self._repeats

    def acting(self) -> np.ndarray:
        """The entries that act: call a tool, or run code written in the reply."""
        return self.code() | (self.calls() > 0)

    def newest_action(self) -> int:
        """The newest entry that acts (:meth:`acting`), or -1."""
        acts = np.flatnonzero(self.acting())
        return int(acts[-1]) if len(acts) else -1

    def calls(self) -> np.ndarray:
        """How many tool calls each entry makes."""
        if self._calls is None:
            self._calls = self._flags("_calls", lambda e: len(e.tool_calls), np.int64)
        return self._calls

    def edits(self, types: Mapping[str, Any]) -> np.ndarray:
        """Assistant entries with a call to a state-changing tool (:attr:`ToolType.EDIT`, with
        the tool ``types`` given)."""
        key = dict(types)
        if self._edits is not None and self._edits[0] == key:
            return self._edits[1]
        kinds: dict[str, bool] = {}  # a history calls a few tools many times: each name typed once

        def edit(name: str) -> bool:
            if name not in kinds:
                kinds[name] = tool_type(name, types) is ToolType.EDIT
            return kinds[name]

        base, m = self._reuse()
        old = base._edits if base is not None else None
        m = m if old is not None and old[0] == key else 0
        head = old[1][:m] if old is not None and m else np.zeros(0, dtype=bool)
        tail = np.fromiter((e.role == "assistant" and any(edit(c.name) for c in e.tool_calls)
                            for e in self.entries[m:]), dtype=bool, count=len(self.entries) - m)
        mask = _frozen(np.concatenate([head, tail]))
        self._edits = (key, mask)
        return mask

    def acted_on(self, values: Callable[[int], tuple[str, ...]]) -> np.ndarray:
        """Per entry, for the user turns that hold a value (``values(i)``), the newest too, the fewest
        times the entries' calls passed one of their values, as :meth:`passes` last counted them;
        -1 for every other entry, and for every entry where no call passed a value (a conversation:
        no turn's values are worked out). At 1 or more, what the turn gave the agent has acted on.

        >>> from collections import Counter
        >>> from salience import Transcript
        >>> t = Transcript.from_openai([{"role": "user", "content": "I am u_1, card 4417."},
        ...     {"role": "user", "content": "Book it."}, {"role": "user", "content": "And u_1?"}])
        >>> r = Rows()
        >>> r.entries = t.entries
        >>> r._passed = (Counter({"u_1": 2, "4417": 1}), frozenset({"u_1"}), 2)
        >>> r.acted_on({0: ("u_1", "4417"), 1: (), 2: ("u_1",)}.__getitem__).tolist()
        [1, -1, 2]
        >>> r._passed = (Counter(), frozenset(), 2)
        >>> r.acted_on({}.__getitem__).tolist()  # no call: no value is looked up
        [-1, -1, -1]
        """
        passes = self.passes()
        out = np.full(len(self.entries), -1, dtype=np.int64)
        for i in np.flatnonzero(self.users()).tolist() if passes else ():
            least = None
            for v in values(i):  # most of a long observation's values were never passed: stop at the first
                k = passes.get(v, 0)
                least = k if least is None or k < least else least
                if not k:
                    break
            if least is not None:
                out[i] = least
        return out

    def passed_by_calls(self, passed: Callable[[int], tuple[str, ...]], least: int) -> frozenset[str]:
        """The values that at least ``least`` of the entries' calls pass (``passed(i)``: entry ``i``'s,
        each once; asked only of the assistant's entries that call tools), counted for the entries
        that the earlier rows did not hold when those counted theirs: a count only grows as
        entries arrive, and each entry's values are its own (cached with its options)."""
        if self._passed is not None and self._passed[2] == least:
            return self._passed[1]
        base, m = self._reuse()
        old = base._passed if base is not None else None
        if base is not None and old is not None and old[2] == least and m == len(base.entries):
            count, found = old[0].copy(), set(old[1])
        else:
            m, count, found = 0, Counter(), set()
        entries = self.entries
        for j in range(m, len(entries)):
            e = entries[j]
            if e.tool_calls and e.role != "system":
                for v in passed(j):
                    k = count[v] + 1
                    count[v] = k
                    if k == least:
                        found.add(v)
        result = frozenset(found)
        self._passed = (count, result, least)
        return result

    def passes(self) -> Counter[str]:
        """How many of the entries' calls passed each value, as :meth:`passed_by_calls` last
        counted them (empty before it has)."""
        return self._passed[0] if self._passed is not None else Counter()


def _same_prefix(a: tuple[Entry, ...], b: tuple[Entry, ...]) -> int:
    """How many leading entries ``a`` and ``b`` share (the same objects)."""
    n = min(len(a), len(b))
    if all(map(operator.is_, a[:n], b[:n])):
        return n
    k = 0
    for x, y in zip(a, b):
        if x is not y:
            break
        k += 1
    return k


def rows(cfg: Config, cache: OptionsCache | None, source: Transcript) -> Rows:
    """The :class:`Rows` of ``source``: from ``cache``'s last rows for the entries they share
    with it (the same entry objects first), worked out for the others; kept in ``cache`` as
    its last rows. ``cache.check(cfg)`` must have been called."""
    entries = source.entries
    prev = cache.rows if cache is not None else None
    m = _same_prefix(prev.entries, entries) if prev is not None else 0
    if prev is not None and m == len(entries) == len(prev.entries):
        return prev
    out = Rows()
    out.entries = entries
    parents = out.parents = source.parents()
    n = len(entries)
    out.parent = _frozen(np.asarray(parents, dtype=np.int64).reshape(n))
    if prev is not None and m:
        k = int(prev.unit_of[:m].max()) + 1  # the units of the shared entries (units are in their roots' order)
        units = [u if u[-1] < m else [x for x in u if x < m] for u in prev.units[:k]]
        unit_of: list[int] = prev.unit_of[:m].tolist()
        names = prev.names[:m]
        opts = prev.opts[:m]
    else:
        m = 0
        units, unit_of, names, opts = [], [], [], []
        prev = None
    for i in range(m, n):
        p = parents[i]
        if p < 0:
            unit_of.append(len(units))
            units.append([i])
        else:
            u = unit_of[p]
            unit_of.append(u)
            units[u] = [*units[u], i]  # a copy: the earlier rows share the list
        name = tool_name(entries, i, p)
        names.append(name)
        opts.append(entry_options(cfg, cache, entries[i]))
    out.units = units
    out.unit_of = _frozen(np.asarray(unit_of, dtype=np.int64).reshape(n))
    out.names = names
    out.opts = opts
    new = opts[m:]
    if prev is not None:
        out.ids = prev.ids[:m] + [e.id for e in entries[m:]]
        out.src_cost = prev.src_cost[:m] + [o.src_cost for o in new]
        out.full = prev.full[:m] + [o.full for o in new]
        out.full_cost = prev.full_cost[:m] + [o.full_cost for o in new]
        shared = frozenset(i for i in prev.pretrimmed if i < m)
    else:
        out.ids = [e.id for e in entries]
        out.src_cost = [o.src_cost for o in new]
        out.full = [o.full for o in new]
        out.full_cost = [o.full_cost for o in new]
        shared = frozenset()
    out.pretrimmed = shared | {i for i in range(m, n) if opts[i].full is not opts[i].entry}
    if prev is not None:
        out._base = (prev, m)
        prev._base = None  # no chain of rows: the earlier rows' own base is not needed any more
    if cache is not None:
        cache.rows = out
    return out


# -- tool-group units ------------------------------------------------------------------------


def units(parent: np.ndarray) -> tuple[list[list[int]], np.ndarray]:
    """Tool groups (root then children) and singletons, and each entry's unit index."""
    n = len(parent)
    unit_of = np.full(n, -1, dtype=np.int64)
    out: list[list[int]] = []
    for i in range(n):
        p = int(parent[i])
        if p < 0:
            unit_of[i] = len(out)
            out.append([i])
        else:
            unit_of[i] = unit_of[p]
            out[int(unit_of[p])].append(i)
    return out, unit_of


def unit_min(costs: np.ndarray, allowed: np.ndarray, members: list[int]) -> float:
    """Least cost of one unit: 0 if every member may drop, else each member's cheapest kept option."""
    if len(members) == 1:  # most units: one entry, whose row is read once
        row = allowed[members[0]].tolist()
        if row[_DROP]:
            return 0.0
        kept = [c for c, ok in zip(costs[members[0], :_DROP].tolist(), row) if ok]
        return float(min(kept)) if kept else math.inf
    if all(allowed[m, _DROP] for m in members):
        return 0.0
    total = 0.0
    for m in members:
        row = allowed[m, :_DROP]
        if not row.any():
            return math.inf
        total += float(costs[m, :_DROP][row].min())
    return total


def unit_mins(costs: np.ndarray, allowed: np.ndarray, unit_of: np.ndarray, n_units: int) -> np.ndarray:
    """:func:`unit_min` of every unit at once (``unit_of``: each entry's unit), as floats: a run
    asks for all of them on every call, which one by one is a Python loop over the entries."""
    cheapest = np.where(allowed[:, :_DROP], costs[:, :_DROP], np.inf).min(axis=1)
    kept = np.bincount(unit_of, weights=cheapest, minlength=n_units)  # inf where a member cannot be kept
    stays = np.bincount(unit_of, weights=~allowed[:, _DROP], minlength=n_units) > 0  # some member may not drop
    return np.where(stays, kept, 0.0)


def min_cost(costs: np.ndarray, allowed: np.ndarray, unit_of: np.ndarray, n_units: int) -> float:
    """Least cost of a selection: the sum of each unit's :func:`unit_min` (whole numbers: the
    sum is exact in any order)."""
    return float(unit_mins(costs, allowed, unit_of, n_units).sum())
