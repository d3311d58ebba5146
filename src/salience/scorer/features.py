"""Features of each entry of a transcript, optionally given a query.

:class:`FeatureExtractor` turns a :class:`~salience.transcript.Transcript` into a
matrix with one row per entry. The columns come in two blocks:

* *base* features, which do not depend on the query: role, tool type, keywords,
  references to and from other entries, recency and position, length, identifier
  density, near-duplicates of later entries, topic similarity to the task and to
  the recent window, speaker and session for conversations; and what places an
  entry in a conversation: its turn within its session (``meta["session"]``; a
  transcript without sessions is one session) and length rank there, how much it
  speaks of oneself, of the listener, in small talk or in the past tense, shared
  media, proper nouns, whether it asks, answers a question or draws a reaction
  ("Wow, ...") from the next entry, the words it is first to use and how often
  later entries use them again while they stay rare;
* *query* features: BM25 against the query, embedding cosine with the query (raw,
  standardised within the transcript, and as a rank), the same for the entry's
  neighbours, value and word overlap with the query, speaker named in the query,
  time cues.

Without a query the query block is left out (``query_features=False``) so that
the same extractor serves the query-agnostic prior and the query-aware score.

Everything that does not depend on the query is cached, so scoring the same
history against many queries, or again after one new message, costs little:

* per entry, by content (role, text, tool name, calls): its words, values, token
  count, keyword counts and embedding (:data:`ENTRY_CACHE_SIZE` entries);
* per growing transcript: the running state of the features that relate entries to
  each other (first appearance and reuse of values and of words, superseded calls,
  near-duplicates, task, speakers and sessions). A transcript that extends one seen before
  (the same entries first) costs its new entries plus an ``O(n log n)`` numpy assembly;
  near-duplicates compare each new entry with the earlier ones, ``O(n)`` per new
  entry (``O(n^2)`` on a cold transcript, in blocks).
"""

from __future__ import annotations

import itertools
import math
import re
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin

from salience._threads import one_thread
from salience.errors import ParameterError
from salience.scorer.baselines import build_bm25
from salience.scorer.text import (
    STOPWORDS,
    content_words,
    count_decision_words,
    count_error_markers,
    entry_text,
    tokenize,
)
from salience.tokens import as_counter
from salience.tooltypes import ToolType, tool_type
from salience.values import call_values, extract_values

if TYPE_CHECKING:
    from salience.transcript import Entry, Transcript

__all__ = ["BASE_FEATURES", "QUERY_FEATURES", "FeatureExtractor"]

_TIME_WORDS = (
    "yesterday", "today", "tomorrow", "last week", "next week", "last month", "next month", "last year",
    "ago", "weekend", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday",
    "january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
    "november", "december", "2019", "2020", "2021", "2022", "2023", "2024", "2025", "since", "when",
)
_ROLES = ("system", "user", "assistant", "tool")
_TYPES = tuple(t.value for t in ToolType)

BASE_FEATURES: tuple[str, ...] = (
    *(f"role_{r}" for r in _ROLES),
    *(f"tooltype_{t}" for t in _TYPES),
    "n_tool_calls",
    "is_task",
    "is_last_user",
    "position",
    "log_entries_after",
    "log_steps_after",
    "log_tokens",
    "decision_words",
    "error_markers",
    "domain_words",
    "n_values",
    "value_density",
    "digit_share",
    "fwd_ref_entries",
    "fwd_ref_steps",
    "fwd_ref_values",
    "bwd_ref_values",
    "superseded",
    "dup_later",
    "sim_task",
    "sim_recent_mean",
    "sim_recent_max",
    "speaker_first",
    "session_position",
    "is_question",
    "time_words",
    # conversational structure and content (0 or neutral where a transcript has none)
    "turn_in_session",
    "session_share",
    "session_first",
    "session_turns_after",
    "length_rank_session",
    "first_person",
    "second_person",
    "phatic_words",
    "past_tense",
    "shares_media",
    "proper_nouns",
    "asks",
    "after_question",
    "before_question",
    "before_reaction",
    "next_log_tokens",
    "novel_words",
    "novel_share",
    "later_word_refs",
)
QUERY_FEATURES: tuple[str, ...] = (
    "bm25",
    "bm25_norm",
    "bm25_rank",
    "cos_query",
    "cos_query_z",
    "cos_query_rank",
    "cos_neighbor_max",
    "bm25_neighbor_max",
    "rrf",
    "value_overlap",
    "word_overlap",
    "speaker_in_query",
    "time_match",
)


#: Words that speak of oneself / of the listener (shares of an entry's words).
_FIRST_PERSON = frozenset(
    "i i'm i've i'd i'll my me mine myself we we're we've we'd we'll our us ours ourselves".split()
)
_SECOND_PERSON = frozenset("you you're you've you'd you'll your yours yourself yourselves".split())
#: Small talk: thanks, praise, agreement, greetings. An entry made of these says little.
_PHATIC = frozenset(
    """thanks thank great awesome amazing cool wow love glad happy proud nice sounds congrats
    congratulations wonderful fantastic sweet appreciate totally agree absolutely yeah yes lovely
    beautiful inspiring incredible super really so good hey hi haha lol""".split()
)
_PAST_IRREGULAR = frozenset(
    """went got took made saw did had was were came found started finished bought won met gave told
    thought felt began became ran wrote read learned tried moved joined visited decided""".split()
)
#: A reply that reacts to what came before it ("Wow, ...", "That's ...", "What ...?").
_REACTION = re.compile(
    r"\s*(?:wow|whoa|that's|thats|that sounds|sounds|congrat\w*|awesome|amazing|cool|oh|omg|great|nice"
    r"|what|how|really)\b",
    re.IGNORECASE,
)
#: A shared photo or file as conversation readers render it ("[shares a photo: ...]").
_MEDIA = re.compile(r"\[shares? an? (?:photo|image|picture|file|video)\b", re.IGNORECASE)
_MEDIA_SPAN = re.compile(r"\[shares?[^\]]*\]", re.IGNORECASE)
#: A capitalised word that does not start a sentence: a rough proper noun.
_PROPER = re.compile(r"(?<![.!?]\s)(?<!^)\b[A-Z][a-z]+")
#: A word introduced by an entry counts as a later reference only while it stays this rare.
_RARE_WORD_DF = 20


def _count_any(text: str, words: Sequence[str]) -> int:
    low = text.lower()
    return sum(low.count(w) for w in words if w)


def _entry_values(entry: Any) -> list[str]:
    values = extract_values(entry.content)
    for call in entry.tool_calls:
        values.extend(call_values(call.arguments))
    return values


def _rank_pct(x: np.ndarray) -> np.ndarray:
    """1.0 for the largest value, down to 1/n for the smallest (ties share)."""
    n = len(x)
    if n == 0:
        return x.astype(float)
    order = np.argsort(-x, kind="stable")
    ranks = np.empty(n, dtype=float)
    ranks[order] = np.arange(n)
    return 1.0 - ranks / n


_COL = {name: j for j, name in enumerate(BASE_FEATURES)}
_ROLE_CODE = {r: k for k, r in enumerate(_ROLES)}
_ASSISTANT = _ROLE_CODE["assistant"]
#: How many entries' position-free data (words, values, counts, embedding) one extractor keeps.
ENTRY_CACHE_SIZE = 50_000
#: How many entries the growing-transcript states of one extractor hold in all.
PREFIX_CACHE_ENTRIES = 200_000
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
                     "novel", "distinct", "later_refs", "reaction"):
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
            for v in d.values:
                j = first.get(v)
                if j is None:
                    first[v] = i
                else:  # j < i: an entry's values are a set
                    sources.add(j)
                    if v not in reused[j]:
                        reused[j].add(v)
                        fwd_values[j] += 1
                    bwd_values[i] += 1
            for j in sources:
                fwd_entries[j] += 1
                if role == "assistant":
                    fwd_steps[j] += 1
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
            for w in d.content:
                j = word_first.get(w)
                if j is None:
                    word_first[w] = i
                    word_df[w] = 1
                    self.novel[i] += 1
                    continue
                df = word_df[w] = word_df[w] + 1
                if df <= _RARE_WORD_DF:
                    self.later_refs[j] += 1
                elif df == _RARE_WORD_DF + 1:  # no longer rare: none of its uses count
                    self.later_refs[j] -= _RARE_WORD_DF - 1
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
        self.entries = self.entries + tuple(entries)
        self.n = n
        self.base = None

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
        data = self.data
        self.base = _Base(X, emb, [d.words for d in data], [d.values for d in data], list(self.names),
                          [d.word_set for d in data])
        return self.base


def _frozen(mapping: Mapping[str, str] | None) -> Any:
    return None if mapping is None else tuple(sorted((str(k), str(v)) for k, v in mapping.items()))


def _same(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    return all(x is y or (type(x) is type(y) and x == y) for x, y in zip(a, b))


class _Caches:
    """One extractor's caches for one set of parameters: per-entry data by content, and
    the states of recently seen growing transcripts."""

    def __init__(self, params: tuple[Any, ...], counter: Any) -> None:
        self.params = params
        self.counter = counter
        self.dim: int | None = None
        self.entries: dict[tuple[Any, ...], _EntryData] = {}
        self.states: OrderedDict[int, _Prefix] = OrderedDict()
        self.lock = threading.Lock()

    def put(self, key: tuple[Any, ...], data: _EntryData) -> None:
        store = self.entries
        store[key] = data
        if len(store) > ENTRY_CACHE_SIZE:  # drop the oldest tenth
            for old in list(itertools.islice(store, ENTRY_CACHE_SIZE // 10)):
                store.pop(old, None)

    def find(self, entries: tuple[Entry, ...]) -> _Prefix | None:
        """The state whose entries are the longest prefix of ``entries``, if any."""
        best: _Prefix | None = None
        n = len(entries)
        for state in reversed(self.states.values()):
            m = state.n
            if m > n or (best is not None and m <= best.n):
                continue
            if m and not (entries[m - 1] is state.entries[m - 1] or entries[m - 1] == state.entries[m - 1]):
                continue
            if state.entries == entries[:m]:
                best = state
                if m == n:
                    break
        return best

    def keep(self, state: _Prefix, limit: int) -> None:
        states = self.states
        states[id(state)] = state
        states.move_to_end(id(state))
        total = sum(s.n for s in states.values())
        while len(states) > 1 and (len(states) > max(limit, 1) or total > PREFIX_CACHE_ENTRIES):
            _, old = states.popitem(last=False)
            total -= old.n


class FeatureExtractor(TransformerMixin, BaseEstimator):  # type: ignore[misc]
    """Entry features of a transcript (see the module docstring for the columns).

    Parameters
    ----------
    embedder:
        An object with ``encode(texts) -> (n, d)`` L2-normalised array; ``None``
        uses the package's shared MiniLM embedder. Ignored when
        ``use_embeddings`` is False (similarity features are then 0).
    use_embeddings:
        Compute the embedding-similarity features.
    tool_types:
        Per-domain override map from tool name to tool type.
    domain_words:
        Extra per-domain keywords counted in ``domain_words``.
    recent_window:
        How many of the last entries make "the recent window".
    counter:
        Token counter (name or callable); default ``cl100k_base``.
    cache_size:
        How many growing transcripts' states to keep (least recently used go first;
        :data:`PREFIX_CACHE_ENTRIES` entries in all at most).
    """

    def __init__(
        self,
        *,
        embedder: Any = None,
        use_embeddings: bool = True,
        tool_types: Mapping[str, str] | None = None,
        domain_words: Sequence[str] = (),
        recent_window: int = 8,
        counter: Any = None,
        cache_size: int = 256,
    ) -> None:
        self.embedder = embedder
        self.use_embeddings = use_embeddings
        self.tool_types = tool_types
        self.domain_words = domain_words
        self.recent_window = recent_window
        self.counter = counter
        self.cache_size = cache_size

    # -- scikit-learn protocol ----------------------------------------------
    def fit(self, X: Any = None, y: Any = None) -> FeatureExtractor:
        """Stateless: records the feature names and returns ``self``."""
        if not isinstance(self.recent_window, int) or self.recent_window < 1:
            raise ParameterError(f"recent_window must be a positive int (got {self.recent_window!r})")
        self.feature_names_in_query_ = np.array(BASE_FEATURES + QUERY_FEATURES, dtype=object)
        self.feature_names_base_ = np.array(BASE_FEATURES, dtype=object)
        return self

    def get_feature_names_out(self, input_features: Any = None, *, query: bool = True) -> np.ndarray:
        return np.array(BASE_FEATURES + QUERY_FEATURES if query else BASE_FEATURES, dtype=object)

    def transform(self, X: Sequence[Transcript], query: str | None = None) -> np.ndarray:
        """Stacked features of every entry of the transcripts in ``X``."""
        blocks = [self.transform_one(t, query) for t in X]
        width = len(BASE_FEATURES) + (len(QUERY_FEATURES) if query is not None else 0)
        return np.vstack(blocks) if blocks else np.zeros((0, width))

    # -- the work ------------------------------------------------------------
    def _embedder(self) -> Any:
        if self.embedder is not None:
            return self.embedder
        from salience.scorer.embeddings import default_embedder

        return default_embedder()

    def _caches(self) -> _Caches:
        """This extractor's caches, emptied whenever a parameter they depend on changed."""
        params = (self.counter, tuple(self.domain_words), _frozen(self.tool_types), bool(self.use_embeddings),
                  self.embedder)
        caches: _Caches | None = getattr(self, "_runtime", None)
        if caches is None or not _same(caches.params, params):
            caches = _Caches(params, as_counter(self.counter))
            object.__setattr__(self, "_runtime", caches)
        return caches

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.pop("_runtime", None)
        return state

    def clear_cache(self) -> None:
        """Forget every cached entry and transcript state (the embedder's own cache stays)."""
        self.__dict__.pop("_runtime", None)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embeddings of ``texts`` (zeros when embeddings are off)."""
        if not self.use_embeddings:
            return np.zeros((len(texts), 1), dtype=np.float32)
        return np.asarray(self._embedder().encode(list(texts)), dtype=np.float32)

    def base(self, transcript: Transcript) -> _Base:
        """The query-independent state of ``transcript`` (cached).

        Incremental: when ``transcript`` extends a transcript seen before (the same
        entries first, new ones after), only the new entries' words, values, token
        counts and embeddings are computed; the rest is the running state of the
        earlier call and an ``O(n)`` numpy assembly. Per-entry data is also cached by
        entry content, so a moved or repeated entry costs nothing either.
        """
        entries = transcript.entries
        caches = self._caches()
        with caches.lock:
            state = caches.find(entries)
            if state is None:
                state = _Prefix()
            if state.n < len(entries):
                new = entries[state.n:]
                state.extend(new, self._entry_data(new, caches), caches.dim)
            caches.keep(state, self.cache_size)
            return state.assemble(self.recent_window)

    def _entry_data(self, entries: Sequence[Entry], caches: _Caches) -> list[_EntryData]:
        """The position-free data of ``entries``: cached by content, computed for the rest."""
        store = caches.entries
        keys = [(e.role, e.content, e.name, e.tool_calls) for e in entries]
        out: list[_EntryData | None] = [store.get(k) for k in keys]
        missing = [i for i, d in enumerate(out) if d is None]
        if not missing:
            return out  # type: ignore[return-value]
        texts = [entry_text(entries[i]) for i in missing]
        vectors = self.embed(texts) if self.use_embeddings else None
        if vectors is not None and caches.dim is None:
            caches.dim = int(vectors.shape[1])
        domain_words = tuple(w.lower() for w in self.domain_words)
        for row, (i, text) in enumerate(zip(missing, texts)):
            d = self._one_entry(entries[i], text, caches.counter, domain_words)
            if vectors is not None:
                d.embedding = vectors[row].copy()
            out[i] = d
            caches.put(keys[i], d)
        return out  # type: ignore[return-value]

    def _one_entry(self, e: Entry, text: str, counter: Any, domain_words: tuple[str, ...]) -> _EntryData:
        row = np.zeros(len(BASE_FEATURES), dtype=np.float64)
        row[_COL[f"role_{e.role}"]] = 1
        if e.role == "tool":
            row[_COL[f"tooltype_{tool_type(e.name, self.tool_types).value}"]] = 1
        elif e.tool_calls:
            row[_COL[f"tooltype_{tool_type(e.tool_calls[0].name, self.tool_types).value}"]] = 1
        row[_COL["n_tool_calls"]] = len(e.tool_calls)
        tokens = counter.count_entry(e)
        values = frozenset(_entry_values(e))
        row[_COL["log_tokens"]] = math.log1p(tokens)
        row[_COL["decision_words"]] = math.log1p(count_decision_words(text))
        row[_COL["error_markers"]] = math.log1p(count_error_markers(text))
        row[_COL["domain_words"]] = math.log1p(_count_any(text, domain_words)) if domain_words else 0.0
        row[_COL["n_values"]] = math.log1p(len(values))
        row[_COL["value_density"]] = 100.0 * len(values) / max(tokens, 1)
        row[_COL["digit_share"]] = sum(map(str.isdigit, text)) / max(len(text), 1)
        row[_COL["is_question"]] = float(e.content.rstrip().endswith("?"))
        row[_COL["time_words"]] = math.log1p(_count_any(e.content, _TIME_WORDS))
        words = tokenize(text)
        own = words if text == e.content else tokenize(e.content)
        share = 1.0 / max(len(own), 1)
        row[_COL["first_person"]] = share * sum(w in _FIRST_PERSON for w in own)
        row[_COL["second_person"]] = share * sum(w in _SECOND_PERSON for w in own)
        row[_COL["phatic_words"]] = share * sum(w in _PHATIC for w in own)
        row[_COL["past_tense"]] = share * sum(w in _PAST_IRREGULAR or (len(w) > 4 and w.endswith("ed")) for w in own)
        row[_COL["shares_media"]] = float(_MEDIA.search(e.content) is not None)
        row[_COL["proper_nouns"]] = math.log1p(len(_PROPER.findall(_MEDIA_SPAN.sub("", e.content))))
        row[_COL["asks"]] = float("?" in e.content)
        content = tuple(dict.fromkeys(w for w in words if w not in STOPWORDS))
        return _EntryData(static=row, words=words, word_set=frozenset(words), values=values, embedding=None,
                          content=content, reaction=_REACTION.match(e.content) is not None)

    def query_block(self, transcript: Transcript, query: str, base: _Base | None = None) -> np.ndarray:
        """The query features of every entry of ``transcript`` for ``query``."""
        base = base if base is not None else self.base(transcript)
        n = len(transcript.entries)
        Q = np.zeros((n, len(QUERY_FEATURES)), dtype=np.float64)
        if n == 0:
            return Q
        col = {name: j for j, name in enumerate(QUERY_FEATURES)}
        qwords = content_words(query)
        if base.bm25 is not None and qwords:
            bm = np.asarray(base.bm25.get_scores(qwords), dtype=np.float64)
        else:
            bm = np.zeros(n)
        top = bm.max() if n else 0.0
        bm_norm = bm / top if top > 0 else np.zeros(n)
        Q[:, col["bm25"]] = bm
        Q[:, col["bm25_norm"]] = bm_norm
        Q[:, col["bm25_rank"]] = _rank_pct(bm)
        if base.embeddings is not None and self.use_embeddings:
            qv = self.embed([query])[0]
            cos = base.embeddings @ qv
        else:
            cos = np.zeros(n)
        sd = cos.std()
        Q[:, col["cos_query"]] = cos
        Q[:, col["cos_query_z"]] = (cos - cos.mean()) / sd if sd > 1e-9 else 0.0
        Q[:, col["cos_query_rank"]] = _rank_pct(cos)
        left_cos = np.concatenate([[cos[0]], cos[:-1]])
        right_cos = np.concatenate([cos[1:], [cos[-1]]])
        Q[:, col["cos_neighbor_max"]] = np.maximum(left_cos, right_cos)
        left_bm = np.concatenate([[bm_norm[0]], bm_norm[:-1]])
        right_bm = np.concatenate([bm_norm[1:], [bm_norm[-1]]])
        Q[:, col["bm25_neighbor_max"]] = np.maximum(left_bm, right_bm)
        rank_bm = np.argsort(np.argsort(-bm, kind="stable"), kind="stable")
        rank_cos = np.argsort(np.argsort(-cos, kind="stable"), kind="stable")
        rrf = 1.0 / (60 + rank_bm) + 1.0 / (60 + rank_cos)
        Q[:, col["rrf"]] = rrf * 30.0  # in [0, 1]
        qvalues = set(extract_values(query))
        qset = set(qwords)
        low_query = query.lower()
        q_time = any(w in low_query for w in ("when", "date", "time", "year", "month", "day", "how long"))
        for i in range(n):
            if qvalues:
                Q[i, col["value_overlap"]] = len(qvalues & base.values[i])
            if qset:
                Q[i, col["word_overlap"]] = len(qset & base.word_sets[i]) / len(qset)
            name = base.names[i]
            Q[i, col["speaker_in_query"]] = float(bool(name) and name.lower() in low_query)  # type: ignore[union-attr]
        if q_time:
            Q[:, col["time_match"]] = base.matrix[:, BASE_FEATURES.index("time_words")]
        return Q

    def transform_one(self, transcript: Transcript, query: str | None = None) -> np.ndarray:
        """Features of every entry of one transcript: base, plus query block if ``query``."""
        base = self.base(transcript)
        if query is None:
            return base.matrix.copy()
        return np.hstack([base.matrix, self.query_block(transcript, query, base)])
