"""What a compaction gives back: :class:`Compaction`, and a session's :class:`PrefixReuse`.

Every :class:`Compaction` is built by :meth:`Ledger.compaction`: a :class:`Ledger`
records what happened to each input entry (kept, trimmed, stubbed or dropped, with
the archive of every entry that changed), whether a whole run decided it
(:meth:`salience.selector.run.Run.assemble`) or a session step that only appended
messages (:mod:`salience.selector.session`).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any

import numpy as np

from salience.errors import ParameterKeyError
from salience.messages.dispatch import render
from salience.selector import knapsack
from salience.selector.masking import Option, Phase
from salience.transcript import Entry, Transcript

__all__ = ["Compaction", "Ledger", "PrefixReuse"]

#: The option :meth:`Ledger.record` files each outcome under, by knapsack option.
_BY_OUTCOME = {knapsack.FULL: Option.FULL, knapsack.TRIM: Option.TRIM, knapsack.STUB: Option.STUB,
               knapsack.DROP: Option.DROP}


def _unpickle_compaction(state: dict[str, Any]) -> Compaction:
    """A pickled :class:`Compaction` back, read-only as it was made."""
    state = dict(state)
    state["archive"] = MappingProxyType(dict(state["archive"]))
    state["choices"] = MappingProxyType(dict(state["choices"]))
    if state["scores"] is not None:
        state["scores"] = np.array(state["scores"], dtype=float)
        state["scores"].setflags(write=False)
    return Compaction(**state)


@dataclass(frozen=True, slots=True, eq=False)
class Compaction:
    """What :meth:`Compactor.compact` returns.

    Attributes:
        messages: the compacted messages in the caller's format (a Transcript for
            ``format="transcript"``); for Anthropic, the system prompt is ``system``.
        kept, trimmed, stubbed, dropped: entry ids by what happened to them (in order).
            ``trimmed`` includes entries cut on the way in (``max_entry_tokens``).
        tokens: tokens of the result (by the compactor's counter).
        budget: the budget it was made for.
        archive: every entry that was trimmed, stubbed or dropped, whole, by id.
        scores: the entries' scores, ``None`` when nothing needed selecting.
        choices: the :class:`Option` of every input entry, by id (``TRIM`` for
            entries cut on the way in).
        format: ``"openai"``, ``"anthropic"`` or ``"transcript"``.
        transcript: the compacted :class:`Transcript` (same id, domain and meta; without
            the input's queries, whose evidence may have left).
        system: the Anthropic system prompt of the result (None for other formats).
        phase: the phase masking used (None when nothing needed selecting).
        over_budget: True when what may not give way (the system prompt whole, what must
            stay beside it) exceeds the budget and ``on_over_budget="keep_pins"`` returned
            it anyway.
        method: how the selection was made (``"fits"``, a solver method, ``"session-noop"``...).
        solver_gap: how far below the best selection (by the solver's objective) this one
            can be, as a share of the solver's upper bound: the selection is worth at least
            ``1 - solver_gap`` of the optimum (0.0 when proven optimal; None when no solver
            ran: everything fit, or a session only appended).
        source: the input as a Transcript (what :meth:`restore` restores from).
        source_tokens: tokens of the input.
    """

    messages: Any
    kept: tuple[str, ...]
    trimmed: tuple[str, ...]
    stubbed: tuple[str, ...]
    dropped: tuple[str, ...]
    tokens: int
    budget: int
    archive: Mapping[str, Entry]
    scores: np.ndarray | None
    choices: Mapping[str, Option]
    format: str
    transcript: Transcript
    source: Transcript = field(repr=False)
    source_tokens: int = 0
    system: Any = None
    phase: Phase | None = None
    over_budget: bool = False
    method: str = ""
    solver_gap: float | None = None

    def __reduce__(self) -> tuple[Any, ...]:
        # pickled with plain dicts: its read-only mappings (mappingproxy) do not pickle themselves
        state = {f.name: getattr(self, f.name) for f in fields(self)}
        state["archive"], state["choices"] = dict(self.archive), dict(self.choices)
        return (_unpickle_compaction, (state,))

    def restore_transcript(self, ids: str | Sequence[str]) -> Transcript:
        """The compacted transcript with the entries ``ids`` put back whole, at their places.

        Whatever their tool group needs comes back too: restoring a dropped tool
        result restores its call and the call's other results; restoring a dropped
        call restores its results. Ids of entries that were kept are ignored; an id
        that names no entry of the input is a :class:`~salience.errors.ParameterKeyError` (a ``KeyError``).
        """
        if isinstance(ids, str):
            ids = [ids]
        known = {e.id: i for i, e in enumerate(self.source.entries)}
        unknown = [x for x in ids if x not in known]
        if unknown:
            raise ParameterKeyError(f"restore: no entry with id {unknown[0]!r} in the input (of {len(known)} entries)")
        result = {e.id: e for e in self.transcript.entries}
        wanted = {x for x in ids if x in self.archive}
        entries = self.source.entries
        parents = self.source.parents()
        children: dict[int, list[int]] = {}
        for i, p in enumerate(parents):
            if p >= 0:
                children.setdefault(p, []).append(i)
        for x in list(wanted):
            i = known[x]
            root = parents[i] if parents[i] >= 0 else i
            group = [root, *children.get(root, [])]
            if any(entries[g].id not in result for g in group):
                wanted.update(entries[g].id for g in group if entries[g].id not in result)
        out = tuple(e if e.id in wanted else result[e.id] for e in entries if e.id in wanted or e.id in result)
        if out == entries:
            return self.source
        return Transcript(id=self.source.id, entries=out, domain=self.source.domain, meta=self.source.meta)

    def restore(self, ids: str | Sequence[str]) -> Any:
        """The messages with the entries ``ids`` put back whole (see :meth:`restore_transcript`),
        in this result's format. ``restore(list(archive))`` gives back the input exactly."""
        return render(self.restore_transcript(ids), self.format)[0]

    def summary(self) -> str:
        """One line: counts and tokens."""
        n = len(self.source.entries)
        parts = [f"{len(self.kept)} kept"]
        for name, ids in (("trimmed", self.trimmed), ("stubbed", self.stubbed), ("dropped", self.dropped)):
            if ids:
                parts.append(f"{len(ids)} {name}")
        flag = " OVER BUDGET (pins only)" if self.over_budget else ""
        phase = f", phase {self.phase.value}" if self.phase is not None else ""
        return (f"{n} entries -> {', '.join(parts)}; {self.source_tokens:,} -> {self.tokens:,} tokens "
                f"(budget {self.budget:,}{phase}){flag}")

    def __repr__(self) -> str:
        return f"Compaction({self.format}: {self.summary()})"


@dataclass(frozen=True, slots=True)
class PrefixReuse:
    """How much of the previous output a session step left unchanged at its start.

    ``messages``: leading messages equal to the previous output's; ``share``: that
    over the previous output's message count (1.0 when it had none); ``tokens``:
    the tokens of the leading entries that stayed the same.
    """

    messages: int
    share: float
    tokens: int


@dataclass(slots=True, eq=False)
class Ledger:
    """What happened to each input entry so far, in order: the parts of a :class:`Compaction`
    that grow entry by entry (a session keeps one across the calls that only append)."""

    kept: list[str] = field(default_factory=list)
    trimmed: list[str] = field(default_factory=list)
    stubbed: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    archive: dict[str, Entry] = field(default_factory=dict)
    choices: dict[str, Option] = field(default_factory=dict)

    @classmethod
    def of(cls, result: Compaction) -> Ledger:
        """The ledger of ``result`` (copies, so it can grow)."""
        return cls(kept=list(result.kept), trimmed=list(result.trimmed), stubbed=list(result.stubbed),
                   dropped=list(result.dropped), archive=dict(result.archive), choices=dict(result.choices))

    @classmethod
    def of_outcomes(cls, ids: Sequence[str], sources: Sequence[Entry], outcome: np.ndarray) -> Ledger:
        """The ledger of :meth:`record` called on every entry in order, given each entry's outcome
        (``outcome[i]``: the option :meth:`record` files entry ``i`` under: ``FULL`` for kept as it
        came, ``TRIM``, ``STUB`` or ``DROP``; ``ids[i]`` is ``sources[i].id``). Sorted by C over the
        masks (``itertools.compress``) instead of one Python step per entry: a compaction's
        ledger covers the whole history on every call."""
        masks = {o: (outcome == o).tolist() for o in (knapsack.FULL, knapsack.TRIM, knapsack.STUB, knapsack.DROP)}
        return cls(
            kept=list(itertools.compress(ids, masks[knapsack.FULL])),
            trimmed=list(itertools.compress(ids, masks[knapsack.TRIM])),
            stubbed=list(itertools.compress(ids, masks[knapsack.STUB])),
            dropped=list(itertools.compress(ids, masks[knapsack.DROP])),
            archive=dict(itertools.compress(zip(ids, sources), (outcome != knapsack.FULL).tolist())),
            choices=dict(zip(ids, map(_BY_OUTCOME.__getitem__, outcome.tolist()))),
        )

    def record(self, src: Entry, option: int, entry: Entry | None) -> None:
        """``src`` became ``entry`` under knapsack ``option`` (``entry`` None when dropped).

        An entry equal to its source counts as kept whatever the option; a changed one
        counts as stubbed for ``STUB``, else as trimmed (also a full entry capped on the
        way in), and goes to the archive whole.
        """
        outcome = self.outcome(src, option, entry)
        if outcome == knapsack.FULL:
            self.kept.append(src.id)
        else:
            (self.dropped if outcome == knapsack.DROP else self.stubbed if outcome == knapsack.STUB
             else self.trimmed).append(src.id)
            self.archive[src.id] = src
        self.choices[src.id] = _BY_OUTCOME[outcome]

    @staticmethod
    def outcome(src: Entry, option: int, entry: Entry | None) -> int:
        """The knapsack option :meth:`record` files ``src`` under: ``DROP`` when dropped,
        ``FULL`` when ``entry`` equals its source whatever the option, else ``STUB`` for a stub
        and ``TRIM`` for any other change (also a full entry capped on the way in)."""
        if option == knapsack.DROP:
            return knapsack.DROP
        if entry is src or entry == src:
            return knapsack.FULL
        return knapsack.STUB if option == knapsack.STUB else knapsack.TRIM

    def compaction(
        self,
        *,
        messages: Any,
        system: Any,
        fmt: str,
        transcript: Transcript,
        source: Transcript,
        tokens: int,
        source_tokens: int,
        budget: int,
        method: str,
        scores: np.ndarray | None = None,
        phase: Phase | None = None,
        over_budget: bool = False,
        solver_gap: float | None = None,
    ) -> Compaction:
        """The :class:`Compaction` of this ledger (read-only copies of its parts) and the rendered result."""
        if scores is not None:
            scores = np.array(scores, dtype=float)
            scores.setflags(write=False)
        return Compaction(
            messages=messages,
            kept=tuple(self.kept),
            trimmed=tuple(self.trimmed),
            stubbed=tuple(self.stubbed),
            dropped=tuple(self.dropped),
            tokens=tokens,
            budget=budget,
            archive=MappingProxyType(dict(self.archive)),
            scores=scores,
            choices=MappingProxyType(dict(self.choices)),
            format=fmt,
            transcript=transcript,
            source=source,
            source_tokens=source_tokens,
            system=system,
            phase=phase,
            over_budget=over_budget,
            method=method,
            solver_gap=solver_gap,
        )
