"""Features of each entry of a transcript, optionally given a query.

:class:`FeatureExtractor` turns a :class:`~salience.transcript.Transcript` into a
matrix with one row per entry. The columns come in two blocks:

* *base* features, which do not depend on the query: role, tool type, keywords,
  references to and from other entries, recency and position, length, identifier
  density, near-duplicates of later entries, topic similarity to the task and to
  the recent window, speaker and session for conversations;
* *query* features: BM25 against the query, embedding cosine with the query (raw,
  standardised within the transcript, and as a rank), the same for the entry's
  neighbours, value and word overlap with the query, speaker named in the query,
  time cues.

Without a query the query block is left out (``query_features=False``) so that
the same extractor serves the query-agnostic prior and the query-aware score.

Everything that does not depend on the query is cached per transcript, and the
embeddings per entry text, so scoring the same history against many queries, or
again after one new message, costs little.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin

from salience.scorer.baselines import build_bm25
from salience.scorer.text import content_words, count_decision_words, count_error_markers, entry_text, tokenize
from salience.tokens import as_counter
from salience.tooltypes import ToolType, tool_type
from salience.values import call_values, extract_values

if TYPE_CHECKING:
    from salience.transcript import Transcript

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


@dataclass(slots=True)
class _Base:
    """Query-independent state of one transcript."""

    matrix: np.ndarray
    embeddings: np.ndarray | None
    words: list[list[str]]
    values: list[set[str]]
    names: list[str | None]
    bm25: Any


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
        How many transcripts' base features to keep.
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
            raise ValueError(f"recent_window must be a positive int (got {self.recent_window!r})")
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

    def _cache(self) -> OrderedDict[Any, _Base]:
        cache: OrderedDict[Any, _Base] | None = getattr(self, "_base_cache", None)
        if cache is None:
            cache = OrderedDict()
            object.__setattr__(self, "_base_cache", cache)
        return cache

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.pop("_base_cache", None)
        return state

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embeddings of ``texts`` (zeros when embeddings are off)."""
        if not self.use_embeddings:
            return np.zeros((len(texts), 1), dtype=np.float32)
        return np.asarray(self._embedder().encode(list(texts)), dtype=np.float32)

    def base(self, transcript: Transcript) -> _Base:
        """The query-independent state of ``transcript`` (cached)."""
        key = (transcript.id, transcript.entries)
        cache = self._cache()
        hit = cache.get(key)
        if hit is not None:
            cache.move_to_end(key)
            return hit
        base = self._compute_base(transcript)
        cache[key] = base
        while len(cache) > self.cache_size:
            cache.popitem(last=False)
        return base

    def _compute_base(self, transcript: Transcript) -> _Base:
        entries = transcript.entries
        n = len(entries)
        counter = as_counter(self.counter)
        X = np.zeros((n, len(BASE_FEATURES)), dtype=np.float64)
        col = {name: j for j, name in enumerate(BASE_FEATURES)}
        if n == 0:
            return _Base(X, None, [], [], [], None)
        texts = [entry_text(e) for e in entries]
        words = [tokenize(t) for t in texts]
        values = [_entry_values(e) for e in entries]
        value_sets = [set(v) for v in values]
        names = [e.name for e in entries]
        roles = [e.role for e in entries]
        is_step = np.array([r == "assistant" for r in roles])
        steps_after = np.cumsum(is_step[::-1])[::-1] - is_step  # assistant entries strictly after i
        users = [i for i, r in enumerate(roles) if r == "user"]
        task = users[0] if users else None
        last_user = users[-1] if users else None

        # first appearance of each value, and who reuses it
        first: dict[str, int] = {}
        fwd_entries = np.zeros(n)
        fwd_steps = np.zeros(n)
        fwd_values = np.zeros(n)
        bwd_values = np.zeros(n)
        reused: list[set[str]] = [set() for _ in range(n)]
        for i in range(n):
            sources: set[int] = set()
            for v in value_sets[i]:
                j = first.get(v)
                if j is None:
                    first[v] = i
                elif j != i:
                    sources.add(j)
                    reused[j].add(v)
                    bwd_values[i] += 1
            for j in sources:
                fwd_entries[j] += 1
                if roles[i] == "assistant":
                    fwd_steps[j] += 1
        for j in range(n):
            fwd_values[j] = len(reused[j])

        # superseded: a later call of the same tool with the same arguments, or a later
        # tool result of the same tool with the same first line (re-read of a file)
        call_sig: dict[str, tuple[str, str]] = {}
        for e in entries:
            for c in e.tool_calls:
                call_sig[c.id] = (c.name, c.arguments)
        seen_sig: dict[tuple[str, str], int] = {}
        superseded = np.zeros(n)
        for i in range(n - 1, -1, -1):
            e = entries[i]
            sig = call_sig.get(e.tool_call_id) if e.tool_call_id else None
            if sig is None and e.role == "tool":
                sig = (e.name or "", e.content.split("\n", 1)[0][:200])
            if sig is not None:
                if sig in seen_sig:
                    superseded[i] = 1
                seen_sig.setdefault(sig, i)

        emb = None
        sim_task = np.zeros(n)
        sim_recent_mean = np.zeros(n)
        sim_recent_max = np.zeros(n)
        dup_later = np.zeros(n)
        if self.use_embeddings:
            emb = self.embed(texts)
            if task is not None:
                sim_task = emb @ emb[task]
            k = min(self.recent_window, n)
            recent = emb[n - k:]
            sims = emb @ recent.T  # (n, k)
            sim_recent_mean = sims.mean(axis=1)
            sim_recent_max = sims.max(axis=1)
            # near-duplicate of a later entry of the same role (cosine > 0.95)
            if n > 1:
                gram = emb @ emb.T
                upper = np.triu(gram, k=1)
                same_role = np.array(roles)[:, None] == np.array(roles)[None, :]
                dup_later = ((upper > 0.95) & same_role).any(axis=1).astype(float)

        domain_words = tuple(w.lower() for w in self.domain_words)
        speakers = [e.name for e in entries if e.role in ("user", "assistant") and e.name]
        first_speaker = speakers[0] if speakers else None
        sessions = [e.meta.get("session") for e in entries]
        numeric_sessions = [s for s in sessions if isinstance(s, (int, float))]
        max_session = max(numeric_sessions) if numeric_sessions else None

        for i, e in enumerate(entries):
            row = X[i]
            row[col[f"role_{e.role}"]] = 1
            if e.role == "tool":
                kind = tool_type(e.name, self.tool_types)
                row[col[f"tooltype_{kind.value}"]] = 1
            elif e.tool_calls:
                kind = tool_type(e.tool_calls[0].name, self.tool_types)
                row[col[f"tooltype_{kind.value}"]] = 1
            row[col["n_tool_calls"]] = len(e.tool_calls)
            row[col["is_task"]] = float(i == task)
            row[col["is_last_user"]] = float(i == last_user)
            row[col["position"]] = i / max(n - 1, 1)
            row[col["log_entries_after"]] = math.log1p(n - 1 - i)
            row[col["log_steps_after"]] = math.log1p(steps_after[i])
            tokens = counter.count_entry(e)
            row[col["log_tokens"]] = math.log1p(tokens)
            text = texts[i]
            row[col["decision_words"]] = math.log1p(count_decision_words(text))
            row[col["error_markers"]] = math.log1p(count_error_markers(text))
            row[col["domain_words"]] = math.log1p(_count_any(text, domain_words)) if domain_words else 0.0
            row[col["n_values"]] = math.log1p(len(value_sets[i]))
            row[col["value_density"]] = 100.0 * len(value_sets[i]) / max(tokens, 1)
            row[col["digit_share"]] = sum(ch.isdigit() for ch in text) / max(len(text), 1)
            row[col["fwd_ref_entries"]] = math.log1p(fwd_entries[i])
            row[col["fwd_ref_steps"]] = math.log1p(fwd_steps[i])
            row[col["fwd_ref_values"]] = math.log1p(fwd_values[i])
            row[col["bwd_ref_values"]] = math.log1p(bwd_values[i])
            row[col["superseded"]] = superseded[i]
            row[col["dup_later"]] = dup_later[i]
            row[col["sim_task"]] = sim_task[i]
            row[col["sim_recent_mean"]] = sim_recent_mean[i]
            row[col["sim_recent_max"]] = sim_recent_max[i]
            row[col["speaker_first"]] = float(first_speaker is not None and e.name == first_speaker)
            s = sessions[i]
            row[col["session_position"]] = (
                float(s) / max_session if isinstance(s, (int, float)) and max_session else row[col["position"]]
            )
            row[col["is_question"]] = float(e.content.rstrip().endswith("?"))
            row[col["time_words"]] = math.log1p(_count_any(e.content, _TIME_WORDS))

        bm25 = None
        if any(words):
            bm25 = build_bm25(words)
        return _Base(X, emb, words, value_sets, names, bm25)

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
                Q[i, col["word_overlap"]] = len(qset & set(base.words[i])) / len(qset)
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
