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
  later entries use them again while they stay rare; and its *handles*
  (:mod:`salience.scorer.handles`: the distinctive strings a later call may copy,
  whatever the domain): how many, how dense, how many it introduces, and of those how
  many a later call has used (acted on) and how many are still pending; and where it
  stands relative to what the agent does now (:mod:`salience.scorer.latest`): user turns
  and calls after it, the handles of it the latest call uses, whether it is a call or
  result of the latest call's tool, and the handles no other entry holds;
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
  near-duplicates, task, speakers and sessions; the holders of each handle and the
  latest call). A transcript that extends one seen before
  (the same entries first) costs its new entries plus an ``O(n log n)`` numpy assembly;
  near-duplicates compare each new entry with the earlier ones, ``O(n)`` per new
  entry (``O(n^2)`` on a cold transcript, in blocks).
"""

from __future__ import annotations

import itertools
import math
import re
import threading
from collections import Counter, OrderedDict
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin

from salience.errors import ParameterError
from salience.scorer.columns import _COL, BASE_FEATURES, QUERY_FEATURES
from salience.scorer.handles import call_text, entry_handles
from salience.scorer.handles import tokens as find_tokens
from salience.scorer.latest import arg_words
from salience.scorer.prefix import _Base, _EntryData, _Prefix
from salience.scorer.text import (
    STOPWORDS,
    content_words,
    count_decision_words,
    count_error_markers,
    entry_text,
    tokenize,
)
from salience.tokens import as_counter
from salience.tooltypes import tool_type
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
#: :data:`_PROPER` as the regex engine scans fastest: a capital first (which it looks for
#: alone), then what must come before it, looked behind. The same matches (tests/test_speed_paths.py).
_PROPER_FAST = re.compile(r"[A-Z](?<=\b[A-Z])(?<!^[A-Z])(?<![.!?]\s[A-Z])[a-z]+")
_DIGIT_BYTES = b"0123456789"


def _count_any(text: str, words: Sequence[str]) -> int:
    low = text.lower()
    return sum(map(low.count, filter(None, words)))


def _grouped(words: Sequence[str], needles: Sequence[str]) -> tuple[tuple[str | None, tuple[str, ...]], ...]:
    """``words`` as (needle, the words holding it) groups, each word in the first group whose
    needle it holds, the rest in a group of their own (needle None): :func:`_count_grouped`."""
    left = [w for w in words if w]
    groups: list[tuple[str | None, tuple[str, ...]]] = []
    for needle in needles:
        held = tuple(w for w in left if needle in w)
        left = [w for w in left if needle not in w]
        if held:
            groups.append((needle, held))
    return (*groups, (None, tuple(left)))


def _count_grouped(text: str, groups: tuple[tuple[str | None, tuple[str, ...]], ...]) -> int:
    """:func:`_count_any` of the groups' words: a text without a group's needle holds none of
    its words, which are not looked for (one scan of the text instead of one per word)."""
    low = text.lower()
    total = 0
    for needle, words in groups:
        if needle is None or needle in low:
            total += sum(map(low.count, words))
    return total


#: :data:`_TIME_WORDS` by the strings most of them share (what :func:`_count_grouped` reads).
_TIME_GROUPS = _grouped(_TIME_WORDS, ("day", "week", "month", "ber", "uary", "20"))


def _digit_count(text: str) -> int:
    """``sum(map(str.isdigit, text))``; in ASCII text, where only 0-9 are digits, the characters
    that deleting them takes away (one pass in C over the text's bytes, instead of ten counts)."""
    if text.isascii():
        data = text.encode("ascii")
        return len(data) - len(data.translate(None, _DIGIT_BYTES))
    return sum(map(str.isdigit, text))


def _words(text: str, content: str) -> tuple[list[str], list[str]]:
    """``tokenize(text)`` and ``tokenize(content)``, where ``text`` holds ``content`` (an entry's
    text and its content): ``content`` is read once when ``text`` is ASCII and ``content``
    begins or ends it beside a character no word holds (neither a word character nor an
    apostrophe), where the words of ``text`` are those of its two sides."""
    own = tokenize(content)
    if text == content:
        return own, own
    n = len(content)
    if n and len(text) > n and text.isascii():
        if text.endswith(content) and _apart(text[-n - 1]):
            return tokenize(text[:-n]) + own, own
        if text.startswith(content) and _apart(text[n]):
            return own + tokenize(text[n:]), own
    return tokenize(text), own


def _apart(c: str) -> bool:
    return not (c.isalnum() or c == "_" or c == "'")


def _person_counts(words: list[str]) -> tuple[int, int, int, int]:
    """How many of ``words`` are first-person, second-person, phatic, past-tense words (each
    distinct word looked up once)."""
    first = second = phatic = past = 0
    for w, k in Counter(words).items():
        if w in _FIRST_PERSON:
            first += k
        if w in _SECOND_PERSON:
            second += k
        if w in _PHATIC:
            phatic += k
        if w in _PAST_IRREGULAR or (len(w) > 4 and w.endswith("ed")):
            past += k
    return first, second, phatic, past


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


#: The columns :meth:`FeatureExtractor._one_entry` works out from the entry alone (beside its
#: role and tool type), in the order it lists their values, and where they are in a row.
_ENTRY_COLUMNS = ("n_tool_calls", "log_tokens", "decision_words", "error_markers", "domain_words", "n_values",
                  "value_density", "digit_share", "is_question", "time_words", "first_person", "second_person",
                  "phatic_words", "past_tense", "shares_media", "proper_nouns", "asks", "n_handles",
                  "handle_density")
_ENTRY_AT = np.array([_COL[c] for c in _ENTRY_COLUMNS], dtype=np.intp)

#: How many entries' position-free data (words, values, counts, embedding) one extractor keeps.
ENTRY_CACHE_SIZE = 50_000
#: How many entries the growing-transcript states of one extractor hold in all.
PREFIX_CACHE_ENTRIES = 200_000
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
        tokens = counter.count_entry(e)
        values = frozenset(_entry_values(e))
        words, own = _words(text, e.content)
        share = 1.0 / max(len(own), 1)
        first, second, phatic, past = _person_counts(own)
        unshared = _MEDIA_SPAN.sub("", e.content) if "[" in e.content else e.content
        distinct = dict.fromkeys(words)  # the words in order of first use
        args = call_text(e)
        hs = entry_handles(e, args)
        # the columns of _ENTRY_COLUMNS, in order, written at once
        row[_ENTRY_AT] = (
            len(e.tool_calls),
            math.log1p(tokens),
            math.log1p(count_decision_words(text)),
            math.log1p(count_error_markers(text)),
            math.log1p(_count_any(text, domain_words)) if domain_words else 0.0,
            math.log1p(len(values)),
            100.0 * len(values) / max(tokens, 1),
            _digit_count(text) / max(len(text), 1),
            float(e.content.rstrip().endswith("?")),
            math.log1p(_count_grouped(e.content, _TIME_GROUPS)),
            share * first,
            share * second,
            share * phatic,
            share * past,
            float(_MEDIA.search(e.content) is not None),
            math.log1p(len(_PROPER_FAST.findall(unshared))),
            float("?" in e.content),
            math.log1p(len(hs)),
            100.0 * len(hs) / max(tokens, 1),
        )
        return _EntryData(static=row, words=words, word_set=frozenset(distinct), values=values, embedding=None,
                          content=tuple(itertools.filterfalse(STOPWORDS.__contains__, distinct)),
                          reaction=_REACTION.match(e.content) is not None, handles=hs,
                          call_tokens=frozenset(find_tokens(args)) if args else frozenset(),
                          call_words=arg_words(args) if e.tool_calls else frozenset())

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
