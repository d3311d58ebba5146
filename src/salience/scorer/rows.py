"""Training rows of :class:`~salience.scorer.model.ImportanceScorer`: feature rows, labels, the
transcript each row came from and, for a conversation's prior, its question shares.

``query=False`` gives the prior's rows: an agent transcript whose labels record which later
steps used each entry (``meta["used_by"]``) is cut at up to ``cut_points`` assistant steps, and
each cut's visible history is one set of rows labelled by what steps after the cut use (so
references already made are features, never leaked labels); otherwise entry labels, or the
evidence of any query. ``query=True`` gives one row per (query, entry) for queries with
evidence.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from salience.scorer.features import BASE_FEATURES, QUERY_FEATURES, FeatureExtractor
from salience.scorer.weights import share_weights

if TYPE_CHECKING:
    from collections.abc import Callable

    from salience.transcript import Transcript

__all__ = ["TrainingRows", "build_rows"]


@dataclass(slots=True)
class TrainingRows:
    """Feature rows with labels and the transcript each came from (for grouped splits); ``shares``:
    the prior rows' question shares where known (:func:`salience.scorer.weights.share_weights`)."""

    X: np.ndarray
    y: np.ndarray
    groups: np.ndarray
    shares: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.y)


def _cut_points(steps: list[int], k: int) -> list[int]:
    """Up to ``k`` assistant-step indices, evenly spread, where the history is cut."""
    if not steps:
        return []
    if len(steps) <= k:
        return steps
    picks = np.linspace(0, len(steps) - 1, k).round().astype(int)
    return [steps[i] for i in sorted(set(picks.tolist()))]


def build_rows(
    transcripts: Sequence[Transcript],
    features: FeatureExtractor,
    *,
    query: bool,
    cut_points: int = 6,
    progress: Callable[[int], None] | None = None,
) -> TrainingRows:
    """Training rows from ``transcripts``.

    ``query=False``: the prior's rows (entry labels; prefix cuts where ``used_by``
    is known; evidence of any query otherwise). ``query=True``: one row per
    (query, entry) for queries that have evidence.
    """
    from salience.transcript import Transcript as _T

    Xs: list[np.ndarray] = []
    ys: list[np.ndarray] = []
    gs: list[np.ndarray] = []
    ws: list[np.ndarray | None] = []  # the prior's question shares (share_weights), per transcript
    for g, t in enumerate(transcripts):
        entries = t.entries
        if query:
            for q in t.queries:
                if not q.evidence:
                    continue
                visible = entries if q.at is None else entries[: q.at]
                if not visible:
                    continue
                sub = t if q.at is None or q.at == len(entries) else _T(id=f"{t.id}@{q.at}", entries=visible)
                X = features.transform_one(sub, q.text)
                ev = set(q.evidence)
                y = np.array([e.id in ev for e in visible], dtype=np.int8)
                if y.any():
                    Xs.append(X)
                    ys.append(y)
                    gs.append(np.full(len(y), g))
                    ws.append(None)
        else:
            used = [e.meta.get("used_by") for e in entries]
            if any(u is not None for u in used):
                index = {e.id: i for i, e in enumerate(entries)}
                steps = [i for i, e in enumerate(entries) if e.role == "assistant" and i > 0]
                for cut in _cut_points(steps, cut_points):
                    visible = entries[:cut]
                    sub = _T(id=f"{t.id}@{cut}", entries=visible)
                    X = features.transform_one(sub)
                    y = np.array(
                        [any(index.get(s, -1) >= cut for s in (used[i] or ())) for i in range(cut)], dtype=np.int8
                    )
                    Xs.append(X)
                    ys.append(y)
                    gs.append(np.full(len(y), g))
                    ws.append(None)
            elif any(e.label is not None for e in entries):
                keep = [i for i, e in enumerate(entries) if e.label is not None]
                X = features.transform_one(t)[keep]
                y = np.array([entries[i].label >= 0.5 for i in keep], dtype=np.int8)  # type: ignore[operator]
                Xs.append(X)
                ys.append(y)
                gs.append(np.full(len(y), g))
                ws.append(share_weights([entries[i] for i in keep], y, t))
            elif any(q.evidence for q in t.queries):
                ev = {e for q in t.queries for e in q.evidence}
                X = features.transform_one(t)
                y = np.array([e.id in ev for e in entries], dtype=np.int8)
                Xs.append(X)
                ys.append(y)
                gs.append(np.full(len(y), g))
                ws.append(share_weights(list(entries), y, t))
        if progress is not None:
            progress(1)
    width = len(BASE_FEATURES) + (len(QUERY_FEATURES) if query else 0)
    if not Xs:
        return TrainingRows(np.zeros((0, width)), np.zeros(0, dtype=np.int8), np.zeros(0, dtype=int))
    shares = None if all(w is None for w in ws) else np.concatenate(
        [np.ones(len(y)) if w is None else w for y, w in zip(ys, ws, strict=True)])
    return TrainingRows(np.vstack(Xs), np.concatenate(ys), np.concatenate(gs), shares)
