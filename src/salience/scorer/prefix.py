"""Base features of a growing transcript: per-entry data and the running state.

:class:`_Prefix` keeps, for a transcript that grows one entry after another, every
feature that relates entries to each other as running state, so that an extension
costs its new entries; :meth:`_Prefix.assemble` turns the state into the base
feature matrix. :class:`_EntryData` is what one entry contributes wherever it stands
(cached by content by :class:`~salience.scorer.features.FeatureExtractor`), and
:class:`_Base` the assembled result. Private to :mod:`salience.scorer.features`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from salience._threads import one_thread
from salience.scorer.baselines import build_bm25
from salience.scorer.columns import _ASSISTANT, _COL, _ROLE_CODE, BASE_FEATURES
from salience.scorer.latest import LatestState, act_on

if TYPE_CHECKING:
    from salience.transcript import Entry

#: A word introduced by an entry counts as a later reference only while it stays this rare.
_RARE_WORD_DF = 20

#: Near-duplicate pairs are found this many new entries at a time (bounds memory).
_DUP_BLOCK = 1024


_LOG1P = np.array([math.log1p(k) for k in range(1024)])
#: Matrix products with fewer multiply-adds than this run on one BLAS thread: starting and
#: syncing threads costs more than such a product (8x more for 1,000 x 384 x 8 on two busy cores).
_ONE_THREAD_BELOW = 50_000_000


def _blas_threads(work: int) -> Any:
    """A context that runs BLAS on one thread when ``work`` (multiply-adds) is small."""
    return one_thread("blas", when=work < _ONE_THREAD_BELOW)


def _log1p(counts: np.ndarray) -> np.ndarray:
    """``math.log1p`` of each whole number in ``counts`` (the very floats the row-by-row code gave)."""
    global _LOG1P
    c = np.asarray(counts).astype(np.int64)
    top = int(c.max()) if c.size else 0
    table = _LOG1P
    if top >= len(table):
        table = np.array([math.log1p(k) for k in range(max(top + 1, 2 * len(table)))])
        _LOG1P = table
    return table[c]



@dataclass(slots=True)
class _EntryData:
    """What one entry contributes to the features wherever it stands; cached by content."""

    static: np.ndarray  # its BASE_FEATURES row, only the columns that do not depend on other entries
    words: list[str]
    word_set: frozenset[str]
    values: frozenset[str]
    embedding: np.ndarray | None
    content: tuple[str, ...] = ()  # its distinct non-stop words, in order of first use
    reaction: bool = False  # it opens by reacting to what came before
    handles: tuple[str, ...] = ()  # its handles (content and call arguments), in order of first use
    call_tokens: frozenset[str] = frozenset()  # the tokens of its calls' arguments
    call_words: frozenset[str] = frozenset()  # salience.scorer.latest.call_words of the entry


@dataclass(slots=True)
class _Base:
    """Query-independent state of one transcript."""

    matrix: np.ndarray
    embeddings: np.ndarray | None
    words: list[list[str]]
    values: list[frozenset[str]]
    names: list[str | None]
    word_sets: list[frozenset[str]] = field(default_factory=list)
    index: Any = None  # the BM25 index, built on first use

    @property
    def bm25(self) -> Any:
        """The BM25 index over the entries' words (None when no entry has a word)."""
        if self.index is None and any(self.words):
            self.index = build_bm25(self.words)
        return self.index


class _Prefix:
    """Base features of a transcript that grows: entries are added one after another.

    Every feature of entry ``i`` that depends on other entries is kept as running
    state (first appearance of each value, who reused it, the last entry of each call
    signature, near-duplicates, the task and speakers), updated in ``O(new entries)``
    per extension. :meth:`assemble` turns the state into the feature matrix with
    vectorised numpy. A cold computation is the same extension from an empty state,
    so warm and cold results are the same by construction.
    """

    def __init__(self) -> None:
        self.entries: tuple[Entry, ...] = ()
        self.n = 0
        self.cap = 0
        width = len(BASE_FEATURES)
        self.static = np.zeros((0, width))
        self.emb: np.ndarray | None = None
        self.role = np.zeros(0, dtype=np.int8)
        self.fwd_entries = np.zeros(0)
        self.fwd_steps = np.zeros(0)
        self.fwd_values = np.zeros(0)
        self.bwd_values = np.zeros(0)
        self.superseded = np.zeros(0)
        self.dup_later = np.zeros(0, dtype=bool)
        self.speaker = np.zeros(0)
        self.session_value = np.zeros(0)
        self.session_numeric = np.zeros(0, dtype=bool)
        self.session_code = np.zeros(0, dtype=np.int64)
        self.turn_in_session = np.zeros(0)
        self.novel = np.zeros(0)
        self.distinct = np.zeros(0)
        self.later_refs = np.zeros(0)
        self.reaction = np.zeros(0, dtype=bool)
        self.new_handles = np.zeros(0)
        self.pending = np.zeros(0)
        self.acted = np.zeros(0)
        self.handle_first: dict[str, int] = {}  # handle -> the entry that introduced it
        self.handle_acted: set[str] = set()  # handles a call has used
        self.data: list[_EntryData] = []
        self.names: list[str | None] = []
        self.first: dict[str, int] = {}
        self.reused: list[set[str]] = []
        self.call_sig: dict[str, tuple[str, str]] = {}
        self.last_sig: dict[tuple[str, str], int] = {}
        self.users: list[int] = []
        self.first_speaker: str | None = None
        self.max_session: Any = None
        self.sessions: dict[Any, int] = {}  # session key -> code
        self.session_turns: list[int] = []  # entries seen so far, per session code
        self.word_first: dict[str, int] = {}  # content word -> the entry that introduced it
        self.word_df: dict[str, int] = {}  # content word -> how many entries use it
        self.latest = LatestState()  # the columns of salience.scorer.latest
        self.base: _Base | None = None

    def _reserve(self, n: int, dim: int | None) -> None:
        if self.emb is None and dim is not None:
            self.emb = np.zeros((self.cap, dim), dtype=np.float32)
        if n <= self.cap:
            return
        cap = max(64, n, 2 * self.cap)

        def grow(a: np.ndarray) -> np.ndarray:
            out = np.zeros((cap, *a.shape[1:]), dtype=a.dtype)
            out[: self.n] = a[: self.n]
            return out

        for name in ("static", "role", "fwd_entries", "fwd_steps", "fwd_values", "bwd_values", "superseded",
                     "dup_later", "speaker", "session_value", "session_numeric", "session_code", "turn_in_session",
                     "novel", "distinct", "later_refs", "reaction", "new_handles", "pending", "acted"):
            setattr(self, name, grow(getattr(self, name)))
        if self.emb is not None:
            self.emb = grow(self.emb)
        self.cap = cap

    def extend(self, entries: Sequence[Entry], data: Sequence[_EntryData], dim: int | None) -> None:
        """Add ``entries`` (with their cached ``data``) after the ones seen so far."""
        m = self.n
        n = m + len(entries)
        self._reserve(n, dim)
        first, reused, call_sig, last_sig = self.first, self.reused, self.call_sig, self.last_sig
        fwd_entries, fwd_steps, fwd_values, bwd_values = (self.fwd_entries, self.fwd_steps, self.fwd_values,
                                                          self.bwd_values)
        fwd_values_add: dict[int, int] = {}  # entry -> what the new entries add to its count
        fwd_entries_add: dict[int, int] = {}
        fwd_steps_add: dict[int, int] = {}
        later_refs_add: dict[int, int] = {}
        fresh_words: list[list[str]] = []  # per new entry, the words it introduces
        for i, (e, d) in enumerate(zip(entries, data), start=m):
            role = e.role
            self.static[i] = d.static
            self.role[i] = _ROLE_CODE[role]
            if self.emb is not None and d.embedding is not None:
                self.emb[i] = d.embedding
            self.data.append(d)
            reused.append(set())
            # first appearance of each value, and who reuses it
            sources: set[int] = set()
            back = 0
            for v in d.values:
                j = first.get(v)
                if j is None:
                    first[v] = i
                else:  # j < i: an entry's values are a set
                    sources.add(j)
                    if v not in reused[j]:
                        reused[j].add(v)
                        fwd_values_add[j] = fwd_values_add.get(j, 0) + 1
                    back += 1
            bwd_values[i] += back
            for j in sources:
                fwd_entries_add[j] = fwd_entries_add.get(j, 0) + 1
                if role == "assistant":
                    fwd_steps_add[j] = fwd_steps_add.get(j, 0) + 1
            # superseded: a later call of the same tool with the same arguments, or a later
            # tool result of the same tool with the same first line (re-read of a file)
            sig = call_sig.get(e.tool_call_id) if e.tool_call_id else None
            if sig is None and role == "tool":
                sig = (e.name or "", e.content.split("\n", 1)[0][:200])
            if sig is not None:
                j = last_sig.get(sig)
                if j is not None:
                    self.superseded[j] = 1
                last_sig[sig] = i
            for c in e.tool_calls:
                call_sig[c.id] = (c.name, c.arguments)
            # task, speakers, sessions
            if role == "user":
                self.users.append(i)
            name = e.name
            self.names.append(name)
            if self.first_speaker is None:
                if role in ("user", "assistant") and name:
                    self.first_speaker = name
                    for j in range(i + 1):
                        self.speaker[j] = float(self.names[j] == name)
            else:
                self.speaker[i] = float(name == self.first_speaker)
            s = e.meta.get("session")
            if isinstance(s, (int, float)):
                self.session_numeric[i] = True
                self.session_value[i] = float(s)
                self.max_session = s if self.max_session is None else max(self.max_session, s)
            # turn within its session (a transcript without sessions is one session)
            key = s if isinstance(s, (int, float, str)) and not isinstance(s, bool) else None
            code = self.sessions.get(key)
            if code is None:
                code = self.sessions[key] = len(self.session_turns)
                self.session_turns.append(0)
            self.session_code[i] = code
            self.turn_in_session[i] = self.session_turns[code]
            self.session_turns[code] += 1
            # words this entry introduces, and later entries that use them again while rare
            self.reaction[i] = d.reaction
            self.distinct[i] = len(d.content)
            word_first, word_df = self.word_first, self.word_df
            fresh: list[str] = []  # the words entry i is first to use (LatestState reads them too)
            fresh_words.append(fresh)
            for w in d.content:
                j = word_first.get(w)
                if j is None:
                    word_first[w] = i
                    word_df[w] = 1
                    fresh.append(w)
                    continue
                df = word_df[w] = word_df[w] + 1
                if df <= _RARE_WORD_DF:
                    later_refs_add[j] = later_refs_add.get(j, 0) + 1
                elif df == _RARE_WORD_DF + 1:  # no longer rare: none of its uses count
                    later_refs_add[j] = later_refs_add.get(j, 0) - (_RARE_WORD_DF - 1)
            self.novel[i] += len(fresh)
            self._handles(i, d)
        # what the entries added to earlier ones' counts, summed above in Python ints (whole
        # numbers, so the floats are the ones adding one at a time gave)
        for target, add in ((fwd_values, fwd_values_add), (fwd_entries, fwd_entries_add),
                            (fwd_steps, fwd_steps_add), (self.later_refs, later_refs_add)):
            if add:
                at = np.fromiter(add, dtype=np.int64, count=len(add))
                target[at] += np.fromiter(add.values(), dtype=np.float64, count=len(add))
        # near-duplicate of a later entry of the same role (cosine > 0.95)
        if self.emb is not None:
            role_codes = self.role
            for start in range(m, n, _DUP_BLOCK):
                stop = min(n, start + _DUP_BLOCK)
                with _blas_threads(stop * (stop - start) * self.emb.shape[1]):
                    sims = self.emb[:stop] @ self.emb[start:stop].T  # (stop, block)
                later = np.arange(stop)[:, None] < np.arange(start, stop)[None, :]
                same_role = role_codes[:stop, None] == role_codes[None, start:stop]
                self.dup_later[:stop] |= ((sims > 0.95) & later & same_role).any(axis=1)
        self.latest.extend(entries, data, fresh_words)
        self.entries = self.entries + tuple(entries)
        self.n = n
        self.base = None

    def _handles(self, i: int, d: _EntryData) -> None:
        """Handles entry ``i`` introduces, and those of earlier entries its calls act on:
        a handle is pending from the entry that introduced it until a call uses it."""
        first, acted = self.handle_first, self.handle_acted
        # act_on moves counts of earlier entries only: ``first`` holds none of entry i's handles yet
        act_on(d.call_tokens, first, acted, self.acted, self.pending)
        new = pending = 0  # counted here and added once (whole numbers: the same floats)
        for h in d.handles:
            if h not in first:
                first[h] = i
                new += 1
                if h in d.call_tokens:  # a call's own new string: acted on where it appears
                    acted.add(h)
                else:
                    pending += 1
        if new:
            self.new_handles[i] += new
            self.pending[i] += pending

    def _conversation(self, X: np.ndarray, n: int) -> None:
        """The columns that place an entry in its session and among its neighbours."""
        if n == 0:
            return
        code = self.session_code[:n]
        turn = self.turn_in_session[:n]
        length = np.asarray(self.session_turns, dtype=np.float64)[code]
        X[:, _COL["turn_in_session"]] = _log1p(turn)
        X[:, _COL["session_share"]] = turn / np.maximum(length - 1, 1)
        X[:, _COL["session_first"]] = turn == 0
        X[:, _COL["session_turns_after"]] = _log1p(length - 1 - turn)
        tokens = X[:, _COL["log_tokens"]]
        order = np.lexsort((np.arange(n), -tokens, code))  # by session, longest first
        rank = np.empty(n)
        rank[order] = np.arange(n)
        first_of_session = np.zeros(len(self.session_turns))
        sorted_codes = code[order]
        starts = np.r_[0, np.flatnonzero(sorted_codes[1:] != sorted_codes[:-1]) + 1]
        first_of_session[sorted_codes[starts]] = starts
        X[:, _COL["length_rank_session"]] = (rank - first_of_session[code]) / np.maximum(length - 1, 1)
        asks = X[:, _COL["asks"]]
        X[1:, _COL["after_question"]] = asks[:-1]
        X[:-1, _COL["before_question"]] = asks[1:]
        X[:-1, _COL["before_reaction"]] = self.reaction[1:n]
        X[:-1, _COL["next_log_tokens"]] = tokens[1:]
        novel = self.novel[:n]
        X[:, _COL["novel_words"]] = _log1p(novel)
        X[:, _COL["novel_share"]] = novel / np.maximum(self.distinct[:n], 1)
        X[:, _COL["later_word_refs"]] = _log1p(self.later_refs[:n])
        new = self.new_handles[:n]
        X[:, _COL["new_handles"]] = _log1p(new)
        X[:, _COL["pending_handles"]] = _log1p(self.pending[:n])
        X[:, _COL["acted_handles"]] = _log1p(self.acted[:n])
        X[:, _COL["pending_share"]] = self.pending[:n] / np.maximum(new, 1)

    def assemble(self, recent_window: int) -> _Base:
        """The base features of the ``n`` entries seen so far."""
        if self.base is not None:
            return self.base
        n = self.n
        X = self.static[:n].copy()
        idx = np.arange(n)
        is_step = self.role[:n] == _ASSISTANT
        steps_after = np.cumsum(is_step[::-1])[::-1] - is_step  # assistant entries strictly after i
        if self.users:
            X[self.users[0], _COL["is_task"]] = 1
            X[self.users[-1], _COL["is_last_user"]] = 1
        position = idx / max(n - 1, 1)
        X[:, _COL["position"]] = position
        X[:, _COL["log_entries_after"]] = _log1p(n - 1 - idx)
        X[:, _COL["log_steps_after"]] = _log1p(steps_after)
        X[:, _COL["fwd_ref_entries"]] = _log1p(self.fwd_entries[:n])
        X[:, _COL["fwd_ref_steps"]] = _log1p(self.fwd_steps[:n])
        X[:, _COL["fwd_ref_values"]] = _log1p(self.fwd_values[:n])
        X[:, _COL["bwd_ref_values"]] = _log1p(self.bwd_values[:n])
        X[:, _COL["superseded"]] = self.superseded[:n]
        emb = None
        if self.emb is not None and n:
            emb = self.emb[:n].copy()
            k = min(recent_window, n)
            with _blas_threads(emb.size * (k + 1)):
                if self.users:
                    X[:, _COL["sim_task"]] = emb @ emb[self.users[0]]
                sims = emb @ emb[n - k:].T  # (n, k)
            X[:, _COL["sim_recent_mean"]] = sims.mean(axis=1)
            X[:, _COL["sim_recent_max"]] = sims.max(axis=1)
            X[:, _COL["dup_later"]] = self.dup_later[:n]
        X[:, _COL["speaker_first"]] = self.speaker[:n]
        if self.max_session:
            X[:, _COL["session_position"]] = np.where(
                self.session_numeric[:n], self.session_value[:n] / self.max_session, position
            )
        else:
            X[:, _COL["session_position"]] = position
        self._conversation(X, n)
        self.latest.fill(X)
        data = self.data
        self.base = _Base(X, emb, [d.words for d in data], [d.values for d in data], list(self.names),
                          [d.word_set for d in data])
        return self.base


