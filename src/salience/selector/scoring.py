"""Scores for a compaction: the scorer's, checked, and the fallback when none is given.

:func:`checked_scores` calls any object with ``score(transcript, query=None)`` and
checks what comes back (one number in [0, 1] per entry, else a
:class:`~salience.errors.ScorerError` naming the scorer and the entry).
:func:`unrepeated` weighs a turn said again word for word once.
:func:`fallback_scorer` is what a :class:`~salience.selector.compactor.Compactor`
without a scorer uses: :func:`salience.scorer.model.default_scorer` when available,
else a recency and role prior (with one warning saying why).

>>> from salience.transcript import Entry, Transcript
>>> t = Transcript(id="t", entries=(Entry(id="s", role="system", content="x"), Entry(id="u", role="user")))
>>> checked_scores(_PriorScorer(), t, None).round(2).tolist()
[0.75, 0.8]
"""

from __future__ import annotations

import warnings
from functools import lru_cache
from typing import Any

import numpy as np

from salience.errors import ScorerError, describe
from salience.transcript import Transcript

__all__ = ["checked_scores", "fallback_scorer", "unrepeated"]

_got = describe


class _PriorScorer:
    """Recency times role prior: what the compactor uses when no trained scorer is available."""

    ROLE = {"system": 1.0, "user": 0.8, "assistant": 0.6, "tool": 0.5}

    def score(self, transcript: Transcript, query: str | None = None) -> np.ndarray:
        n = len(transcript.entries)
        if n == 0:
            return np.zeros(0)
        recency = 0.5 + 0.5 * (np.arange(n) + 1) / n
        role = np.array([self.ROLE.get(e.role, 0.5) for e in transcript.entries])
        return np.clip(role * recency, 0.0, 1.0)

    def __repr__(self) -> str:
        return "PriorScorer()"


@lru_cache(maxsize=1)
def fallback_scorer() -> Any:
    """The shipped default scorer, or the recency and role prior when it cannot load (loaded once)."""
    try:
        from salience.scorer.model import default_scorer
    except ImportError:
        return _PriorScorer()
    try:
        return default_scorer()
    except ScorerError as exc:
        warnings.warn(f"salience: the default scorer is unavailable ({exc}); using a recency and role prior instead",
                      RuntimeWarning, stacklevel=3)
        return _PriorScorer()


def checked_scores(scorer: Any, transcript: Transcript, query: str | None) -> np.ndarray:
    """``scorer.score(transcript[, query=query])`` as a float array, checked and clipped to [0, 1]."""
    name = type(scorer).__name__
    raw = scorer.score(transcript) if query is None else scorer.score(transcript, query=query)
    try:
        scores = np.asarray(raw, dtype=float)
    except (TypeError, ValueError):
        raise ScorerError(f"scorer {name}: score() must return an array of numbers (got {_got(raw)})") from None
    n = len(transcript.entries)
    if scores.shape != (n,):
        raise ScorerError(f"scorer {name}: score() must return shape ({n},) for transcript {transcript.id!r} with "
                          f"{n} entries (got shape {scores.shape})")
    bad = ~np.isfinite(scores) | (scores < -1e-9) | (scores > 1 + 1e-9)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ScorerError(f"scorer {name}: scores must be in [0, 1] (got {float(scores[i])!r} for entry "
                          f"{transcript.entries[i].id!r})")
    return np.clip(scores, 0.0, 1.0)


def unrepeated(scores: np.ndarray, repeats: np.ndarray) -> np.ndarray:
    """``scores`` as the selection weighs them: an entry said again word for word later
    (``repeats[i]``, its newest copy, or -1; :meth:`Rows.repeats
    <salience.selector.options.Rows.repeats>`) weighs nothing, and its newest copy as much
    as the best of them. Keeping two copies of one text keeps nothing the newest alone does
    not: a user who gives the same credentials at each request (API-Bank) had two or three
    copies kept in place of what the next call needed. ``scores`` is not modified.

    >>> unrepeated(np.array([0.9, 0.2, 0.4, 0.3]), np.array([2, -1, -1, -1])).tolist()
    [0.0, 0.2, 0.9, 0.3]
    """
    older = np.flatnonzero(repeats >= 0)
    if not len(older):
        return scores
    out = scores.copy()
    np.maximum.at(out, repeats[older], scores[older])
    out[older] = 0.0
    return out
