"""Baseline scorers: the rules and retrieval methods the learned scorer must beat.

Every baseline has the learned scorer's interface: ``fit(transcripts) -> self`` (a
no-op here, so a baseline stands in anywhere a scorer is expected) and
``score(transcript, query=None) -> numpy.ndarray`` of shape ``(len(transcript.entries),)``
with values in [0, 1], higher = keep. An empty transcript scores to an empty array.
Each class has a ``name``; :data:`BASELINES` maps names to classes and
:func:`make_baseline` builds one by name.

The text a baseline reads for an entry is :func:`salience.scorer.text.entry_text`:
the content and each tool call as ``name(arguments)``, prefixed with the tool name for
tool entries.

Following scikit-learn, ``__init__`` takes keyword-only parameters and only stores them.

>>> from salience import Transcript
>>> t = Transcript.from_openai([
...     {"role": "system", "content": "You are a travel agent."},
...     {"role": "user", "content": "My budget is $500 and I must fly on Monday."},
...     {"role": "assistant", "content": "Noted."},
...     {"role": "user", "content": "What was my budget?"},
... ], id="demo")
>>> RecencyScorer().score(t).round(2).tolist()
[1.0, 0.33, 0.67, 1.0]
>>> BM25Scorer().score(t, "fly on Monday").round(2).tolist()
[0.0, 1.0, 0.0, 0.0]
>>> make_baseline("nope")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
salience.errors.ScorerError: unknown baseline 'nope'; expected one of 'bm25', 'embedding', ..., 'recency'
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from sklearn.base import BaseEstimator

from salience.errors import ScorerError
from salience.scorer.text import (
    DECISION_WORDS,
    ERROR_PATTERNS,
    content_words,
    count_decision_words,
    entry_texts,
    has_error_marker,
    last_user_text,
    query_overlap,
    tokenize,
)
from salience.transcript import Transcript

if TYPE_CHECKING:
    from salience.scorer.embeddings import Embedder

__all__ = [
    "BASELINES",
    "BM25Scorer",
    "BaselineScorer",
    "DECISION_WORDS",
    "ERROR_PATTERNS",
    "EmbeddingScorer",
    "FusionScorer",
    "KeywordScorer",
    "OracleScorer",
    "RandomScorer",
    "RecencyScorer",
    "make_baseline",
]


class BaselineScorer(BaseEstimator):  # type: ignore[misc]
    """Base class: a no-op ``fit``, input checks, and the empty-transcript case.

    Subclasses implement ``_score(transcript, query)`` for a non-empty transcript,
    returning any float array of the right length; :meth:`score` clips it to [0, 1].
    """

    name: ClassVar[str] = "baseline"

    def fit(self, transcripts: Iterable[Transcript] = (), y: Any = None) -> BaselineScorer:
        """Nothing to learn: returns ``self``."""
        return self

    def __sklearn_is_fitted__(self) -> bool:
        return True

    def score(self, transcript: Transcript, query: str | None = None) -> np.ndarray:
        """Importance of each entry of ``transcript`` in [0, 1] (``query``-aware if given)."""
        if not isinstance(transcript, Transcript):
            raise ScorerError(
                f"{type(self).__name__}.score: 'transcript' must be a Transcript (got {type(transcript).__name__})"
            )
        if query is not None and not isinstance(query, str):
            raise ScorerError(
                f"{type(self).__name__}.score: 'query' must be a str or None "
                f"(got {type(query).__name__}: {query!r:.60})"
            )
        n = len(transcript.entries)
        if n == 0:
            return np.zeros(0, dtype=np.float64)
        scores = np.asarray(self._score(transcript, query), dtype=np.float64)
        if scores.shape != (n,):  # pragma: no cover - a bug in a subclass
            raise ScorerError(f"{type(self).__name__}: produced shape {scores.shape}, expected ({n},)")
        return np.clip(np.nan_to_num(scores, nan=0.0), 0.0, 1.0)

    def _score(self, transcript: Transcript, query: str | None) -> np.ndarray:
        raise NotImplementedError


def _reference_text(transcript: Transcript, query: str | None) -> str | None:
    """The query, or without one the transcript's last user turn (None if neither)."""
    if query is not None:
        return query if query.strip() else None
    return last_user_text(transcript)


class RecencyScorer(BaselineScorer):
    """Newer entries score higher: the k-th of m non-system entries scores (k + 1) / m.

    System entries score 1.0. The query is ignored. This is the sliding window's order.
    """

    name: ClassVar[str] = "recency"

    def _score(self, transcript: Transcript, query: str | None) -> np.ndarray:
        is_system = np.array([e.role == "system" for e in transcript.entries])
        scores = np.ones(len(is_system))
        m = int((~is_system).sum())
        if m:
            scores[~is_system] = np.arange(1, m + 1) / m
        return scores


class KeywordScorer(BaselineScorer):
    """A hand-written rule score: decisions, errors, user turns, query words.

    Per entry, each signal in [0, 1] times its weight, summed and divided by the
    sum of the weights that apply (so the result is in [0, 1]):

    * ``decision_weight``: :data:`~salience.scorer.text.DECISION_WORDS` occurrences,
      ``min(1, count / decision_saturation)``;
    * ``error_weight``: 1 if the entry matches an :data:`~salience.scorer.text.ERROR_PATTERNS`
      regular expression;
    * ``user_weight``: 1 for user turns;
    * ``query_weight`` (only with a query): the share of the query's content words
      (stop words removed) that occur in the entry.
    """

    name: ClassVar[str] = "keyword"

    def __init__(
        self,
        *,
        decision_weight: float = 0.4,
        error_weight: float = 0.3,
        user_weight: float = 0.3,
        query_weight: float = 1.0,
        decision_saturation: int = 2,
    ) -> None:
        self.decision_weight = decision_weight
        self.error_weight = error_weight
        self.user_weight = user_weight
        self.query_weight = query_weight
        self.decision_saturation = decision_saturation

    def _check(self) -> None:
        for pname in ("decision_weight", "error_weight", "user_weight", "query_weight"):
            value = getattr(self, pname)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
                raise ScorerError(f"KeywordScorer: parameter {pname!r} must be a number >= 0 (got {value!r})")
        sat = self.decision_saturation
        if isinstance(sat, bool) or not isinstance(sat, int) or sat < 1:
            raise ScorerError(f"KeywordScorer: parameter 'decision_saturation' must be an int >= 1 (got {sat!r})")

    def _score(self, transcript: Transcript, query: str | None) -> np.ndarray:
        self._check()
        texts = entry_texts(transcript)
        decision = np.array([min(1.0, count_decision_words(t) / self.decision_saturation) for t in texts])
        error = np.array([float(has_error_marker(t)) for t in texts])
        user = np.array([float(e.role == "user") for e in transcript.entries])
        total = self.decision_weight * decision + self.error_weight * error + self.user_weight * user
        weights = self.decision_weight + self.error_weight + self.user_weight
        words = content_words(query) if query else []
        if words:
            total = total + self.query_weight * np.array([query_overlap(words, t) for t in texts])
            weights += self.query_weight
        return total / weights if weights > 0 else np.zeros(len(texts))


def build_bm25(docs: Sequence[list[str]], *, k1: float = 1.5, b: float = 0.75, epsilon: float = 0.25) -> Any:
    """A :class:`rank_bm25.BM25Okapi` index over ``docs`` (lists of words), with the idf
    of words found in half of the documents or more floored at ``epsilon`` times the
    mean idf (``epsilon`` if that mean is not positive), so short transcripts still rank
    by matches. Empty documents are allowed.
    """
    from rank_bm25 import BM25Okapi

    bm25 = BM25Okapi([d if d else ["\u0000"] for d in docs], k1=k1, b=b, epsilon=epsilon)
    mean_idf = float(np.mean(list(bm25.idf.values()))) if bm25.idf else 0.0
    floor = epsilon * mean_idf if mean_idf > 0 else epsilon
    for word, idf in bm25.idf.items():
        if idf <= 0:
            bm25.idf[word] = floor
    return bm25


class BM25Scorer(BaselineScorer):
    """BM25 (Okapi, :mod:`rank_bm25`) of each entry against the query.

    Without a query the reference is the transcript's last user turn (so that turn
    itself usually scores highest); with neither, every entry scores 0. Scores are
    divided by their maximum (all zeros stay zeros). Words come from
    :func:`salience.scorer.text.tokenize`.

    rank_bm25 gives words found in half of the entries or more an idf of zero or
    below (in a two-entry transcript, every word); those are floored at
    ``epsilon`` times the mean idf (``epsilon`` if that mean is not positive), so
    short transcripts still rank by matches.
    """

    name: ClassVar[str] = "bm25"

    def __init__(self, *, k1: float = 1.5, b: float = 0.75, epsilon: float = 0.25) -> None:
        self.k1 = k1
        self.b = b
        self.epsilon = epsilon

    def _score(self, transcript: Transcript, query: str | None) -> np.ndarray:
        n = len(transcript.entries)
        reference = _reference_text(transcript, query)
        terms = tokenize(reference) if reference else []
        docs = [tokenize(t) for t in entry_texts(transcript)]
        if not terms or not any(docs):
            return np.zeros(n)
        bm25 = build_bm25(docs, k1=self.k1, b=self.b, epsilon=self.epsilon)
        scores = np.maximum(np.asarray(bm25.get_scores(terms), dtype=np.float64), 0.0)
        top = scores.max()
        return scores / top if top > 0 else scores


class EmbeddingScorer(BaselineScorer):
    """Cosine similarity of each entry to the query, clipped to [0, 1].

    Without a query the reference is the last user turn; with neither, every entry
    scores 0. Negative similarities (unrelated text) and blank entries score 0.
    ``embedder`` defaults to :func:`salience.scorer.embeddings.default_embedder`,
    resolved at scoring time.
    """

    name: ClassVar[str] = "embedding"

    def __init__(self, *, embedder: Embedder | None = None) -> None:
        self.embedder = embedder

    def _score(self, transcript: Transcript, query: str | None) -> np.ndarray:
        from salience.scorer.embeddings import default_embedder

        n = len(transcript.entries)
        reference = _reference_text(transcript, query)
        if reference is None:
            return np.zeros(n)
        embedder = self.embedder if self.embedder is not None else default_embedder()
        vectors = embedder.encode([*entry_texts(transcript), reference])
        return vectors[:-1] @ vectors[-1]


def _ranks(scores: np.ndarray) -> np.ndarray:
    """1-based ranks, best (highest) first; ties share their average rank."""
    from scipy.stats import rankdata

    return rankdata(-scores, method="average")


class FusionScorer(BaselineScorer):
    """Reciprocal-rank fusion: ``sum_i 1 / (k + rank_i)`` over ``scorers``.

    ``scorers`` default to BM25 and embedding similarity. Ranks start at 1; tied
    entries share their average rank. The sums are divided by their maximum, so
    the best fused entry scores 1.
    """

    name: ClassVar[str] = "fusion"

    def __init__(self, *, scorers: Sequence[BaselineScorer] | None = None, k: float = 60) -> None:
        self.scorers = scorers
        self.k = k

    def _score(self, transcript: Transcript, query: str | None) -> np.ndarray:
        k = self.k
        if isinstance(k, bool) or not isinstance(k, (int, float)) or not k >= 0:
            raise ScorerError(f"FusionScorer: parameter 'k' must be a number >= 0 (got {k!r})")
        scorers = self.scorers if self.scorers is not None else (BM25Scorer(), EmbeddingScorer())
        if not scorers:
            raise ScorerError("FusionScorer: parameter 'scorers' must name at least one scorer (got none)")
        fused = np.zeros(len(transcript.entries))
        for scorer in scorers:
            fused += 1.0 / (k + _ranks(scorer.score(transcript, query)))
        return fused / fused.max()


class RandomScorer(BaselineScorer):
    """Uniform random scores, the same for the same ``seed`` and transcript id.

    The query is ignored.
    """

    name: ClassVar[str] = "random"

    def __init__(self, *, seed: int = 0) -> None:
        self.seed = seed

    def _score(self, transcript: Transcript, query: str | None) -> np.ndarray:
        digest = hashlib.blake2b(transcript.id.encode("utf-8"), digest_size=8).digest()
        rng = np.random.default_rng([int(self.seed), int.from_bytes(digest, "little")])
        return rng.random(len(transcript.entries))


class OracleScorer(BaselineScorer):
    """The labels themselves: the upper bound where labels exist.

    With a query whose text (stripped) equals that of a :class:`~salience.Query` of
    the transcript, the query's evidence entries score 1 and the rest 0 (the union
    of evidence if several queries share the text). Otherwise each entry scores its
    ``label``, unlabeled entries 0. Raises :class:`~salience.errors.ScorerError` when
    neither applies (no matching query and no entry labelled): an oracle without
    labels would report a meaningless figure.
    """

    name: ClassVar[str] = "oracle"

    def _score(self, transcript: Transcript, query: str | None) -> np.ndarray:
        if query is not None:
            matching = [q for q in transcript.queries if q.text.strip() == query.strip()]
            if matching:
                evidence = {eid for q in matching for eid in q.evidence}
                return np.array([float(e.id in evidence) for e in transcript.entries])
        labels = transcript.labels
        if all(label is None for label in labels):
            what = f"no query of it has the text {query[:60]!r} and " if query is not None else ""
            raise ScorerError(
                f"OracleScorer: transcript {transcript.id!r} has no labels to read: {what}no entry has a 'label'"
            )
        return np.array([0.0 if label is None else label for label in labels])


#: Baseline classes by name.
BASELINES: dict[str, type[BaselineScorer]] = {
    cls.name: cls
    for cls in (
        RecencyScorer,
        KeywordScorer,
        BM25Scorer,
        EmbeddingScorer,
        FusionScorer,
        RandomScorer,
        OracleScorer,
    )
}


def make_baseline(name: str, **params: Any) -> BaselineScorer:
    """A new baseline scorer by ``name`` (a key of :data:`BASELINES`), with ``params``.

    Raises :class:`~salience.errors.ScorerError` listing the known names for an
    unknown one, and naming the parameters for a bad parameter.
    """
    cls = BASELINES.get(name) if isinstance(name, str) else None
    if cls is None:
        known = ", ".join(repr(n) for n in sorted(BASELINES))
        raise ScorerError(f"unknown baseline {name!r}; expected one of {known}")
    try:
        return cls(**params)
    except TypeError as exc:
        accepted = ", ".join(sorted(cls._get_param_names())) or "none"
        raise ScorerError(f"baseline {name!r}: bad parameters {sorted(params)!r} (accepted: {accepted})") from exc
