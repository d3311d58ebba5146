"""Each entry's options (whole, trimmed, stubbed, dropped), their costs, and tool-group units.

:func:`entry_options` gives an entry's :class:`EntryOptions`: its token count, its
form capped to ``max_entry_tokens`` (:func:`cap`), and, worked out on demand
(:func:`work_out`), its trimmed and stubbed forms, each offered only if cheaper than
the better ones (texts from :mod:`salience.selector.render`). An
:class:`OptionsCache` keeps them per entry across calls, for one configuration.

Tool groups are atomic: :func:`units` lists them (a call then its results) beside
the singletons, and :func:`min_cost` is the least a selection can cost.
"""

from __future__ import annotations

import math
import threading

import numpy as np

from salience.messages.dispatch import MEMO_SIZE, IdCache
from salience.selector import knapsack
from salience.selector.params import Config
from salience.selector.render import stub_text, trim_text
from salience.transcript import Entry
from salience.values import extract_values, value_set

__all__ = ["EntryOptions", "OptionsCache", "cap", "entry_options", "min_cost", "unit_min", "units", "work_out"]

_DROP = knapsack.DROP


class EntryOptions:
    """One entry's forms and their token counts (what a run needs of it, cached per entry)."""

    __slots__ = ("entry", "name", "src_cost", "full", "full_cost", "done", "trim", "trim_cost", "stub", "stub_cost",
                 "trim_cover", "stub_cover", "call", "values")

    def __init__(self, entry: Entry, name: str | None, src_cost: int, full: Entry, full_cost: int) -> None:
        self.entry = entry
        self.name = name  # the tool name the stub quotes
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
        self.values: tuple[str, ...] | None = None  # its content's and calls' values (Run.digest's)


class OptionsCache:
    """Entry object -> its :class:`EntryOptions`, valid for one configuration: :meth:`check`
    forgets them when the parameters they depend on changed (the counter,
    ``max_entry_tokens``, ``trim_keep``, ``stub_values``)."""

    __slots__ = ("_lock", "config", "options", "size")

    def __init__(self, size: int = MEMO_SIZE) -> None:
        self.size = size
        self.options = IdCache(size)
        self.config: tuple[object, ...] | None = None
        self._lock = threading.Lock()

    def check(self, cfg: Config) -> None:
        """Forget the options when the parameters they depend on changed."""
        key = (cfg.counter, cfg.max_entry_tokens, cfg.trim_keep, cfg.stub_values)
        with self._lock:
            if self.config is None or self.config[0] is not cfg.counter or self.config[1:] != key[1:]:
                self.options = IdCache(self.size)
                self.config = key


def entry_options(cfg: Config, cache: OptionsCache | None, entry: Entry, name: str | None) -> EntryOptions:
    """``entry``'s :class:`EntryOptions` (its token count and capped form), from ``cache`` when
    it has them; ``cache.check(cfg)`` must have been called."""
    if cache is not None:
        hit: EntryOptions | None = cache.options.get(entry)
        if hit is not None and hit.name == name:
            return hit
    counter = cfg.counter
    cost = counter.count_entry(entry)
    capped = cap(cfg, entry, cost)
    if capped is None:
        opts = EntryOptions(entry, name, cost, entry, cost)
    else:
        opts = EntryOptions(entry, name, cost, capped, counter.count_entry(capped))
    if cache is not None:
        cache.options.put(entry, opts)
    return opts


def cap(cfg: Config, entry: Entry, cost: int) -> Entry | None:
    """``entry`` trimmed to ``cfg.max_entry_tokens`` (None when it fits, or trimming would not save)."""
    limit = cfg.max_entry_tokens
    if limit is None or cost <= limit or entry.role == "system" or not entry.content:
        return None
    counter = cfg.counter
    text_tokens = counter.count(entry.content)
    keep = limit - (cost - text_tokens) - 24  # room for the marker
    best: Entry | None = None
    for _ in range(4):
        text = trim_text(entry.content, max(0, keep), counter, entry_id=entry.id, total=text_tokens)
        if text is None:
            break
        best = entry.replace(content=text)
        over = counter.count_entry(best) - limit
        if over <= 0 or keep <= 0:
            break
        keep -= over
    if best is not None and counter.count_entry(best) >= cost:
        return None
    return best


def _trim_keep(cfg: Config, o: EntryOptions) -> int:
    tokens = cfg.counter.count(o.full.content)
    k = cfg.trim_keep
    return int(round(k * tokens)) if isinstance(k, float) else min(int(k), tokens)


def work_out(cfg: Config, o: EntryOptions, call: Entry | None = None) -> None:
    """The trimmed and stubbed forms of ``o`` (each only if cheaper than the better ones).

    ``call``: the entry whose tool calls answer ``o`` (a tool result's), kept in every form
    while its result is: the stub lists the values its arguments do not, so that no slot
    repeats what the call beside it says.
    """
    counter = cfg.counter
    src = o.entry
    o.call = call
    shown = {v for c in call.tool_calls for v in extract_values(c.arguments)} if call is not None else set()
    if src.content:
        values = extract_values(src.content)
        text = trim_text(src.content, _trim_keep(cfg, o), counter, entry_id=src.id)
        if text is not None:
            candidate = src.replace(content=text)
            c = counter.count_entry(candidate)
            if c < o.full_cost:
                o.trim, o.trim_cost = candidate, c
                if values:
                    o.trim_cover = len(value_set(text) & set(values)) / len(values)
        listed = [v for v in values if v not in shown] if shown else values
        if values:
            o.stub_cover = (min(cfg.stub_values, len(listed)) + len(values) - len(listed)) / len(values)
        stub = stub_text(src.id, src.role, tokens=o.src_cost, tool_name=o.name,
                         values=listed, max_values=cfg.stub_values)
        candidate = src.replace(content=stub)
        c = counter.count_entry(candidate)
        best_other = o.trim_cost if o.trim is not None else o.full_cost
        if c < best_other:
            o.stub, o.stub_cost = candidate, c
    o.done = True


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
    if all(allowed[m, _DROP] for m in members):
        return 0.0
    total = 0.0
    for m in members:
        row = allowed[m, :_DROP]
        if not row.any():
            return math.inf
        total += float(costs[m, :_DROP][row].min())
    return total


def min_cost(costs: np.ndarray, allowed: np.ndarray, groups: list[list[int]]) -> float:
    """Least cost of a selection: the sum of each unit's :func:`unit_min`."""
    return sum(unit_min(costs, allowed, u) for u in groups)
