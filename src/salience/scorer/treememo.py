"""The boosted trees' raw predictions, memoised by the path each row takes through them.

A row's raw prediction (the baseline plus each tree's leaf, added tree after tree) depends
only on which side of each split it falls: for a numeric split on feature ``f`` at
threshold ``t``, whether ``x[f] <= t``, or, when ``x[f]`` is NaN, where the split sends a
missing value. So the index of ``x[f]`` among the sorted distinct thresholds the trees use
on ``f`` (``np.searchsorted``, left side: how many thresholds lie below ``x[f]``; one more
than their count for NaN) decides every split on ``f``, and these indices over the features
the trees use decide the row's leaf in every tree. Rows with the same indices have the same
raw prediction, bit for bit: each row's is its own sum, in the same order, whatever else
the batch holds.

On a growing history most rows of a call fall where a row of an earlier call fell (the
features of an entry move a little as entries arrive, seldom across a threshold), so
:func:`raw_predict` looks each row's key up in a memo and runs the trees on the other rows
alone. The memo is per estimator (its list of trees, so a refit starts a new one), bounded
(:data:`MEMO_ROWS` keys, emptied when full) and safe to share between threads (readers
read a dict that a writer replaces rather than empties; two threads that both miss a key
store the same value). Estimators with categorical splits are not memoised.

tests/test_tree_memo.py checks the memoised predictions against the plain ones on the
bundled scorer and real transcripts, bit for bit.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any, cast

import numpy as np

__all__ = ["MEMO_ROWS", "TreeMemo", "clear_memos", "memo_for", "raw_predict"]

#: How many keys one estimator's memo holds before it is emptied.
MEMO_ROWS = 100_000


class TreeMemo:
    """One fitted ``HistGradientBoostingClassifier``'s thresholds and its raw predictions by key."""

    __slots__ = ("__weakref__", "_lock", "_memo", "columns", "dtype", "hits", "misses", "n_trees", "nan_code",
                 "predictors", "size", "thresholds", "width")

    def __init__(self, est: Any, *, size: int = MEMO_ROWS, nodes: list[np.ndarray] | None = None) -> None:
        self.predictors = est._predictors  # the trees this memo is for (a refit makes a new list, a warm
        self.n_trees = len(est._predictors)  # start adds to it)
        feature, threshold = _splits(_nodes(est) if nodes is None else nodes)
        features = np.unique(feature)
        self.columns = features.astype(np.intp)
        self.thresholds = [np.unique(threshold[feature == f]) for f in features]
        most = max((len(t) + 1 for t in self.thresholds), default=0)  # NaN's index: one past the thresholds'
        # sklearn's trees: at most 255 bins, so uint8; None: too many thresholds for a key (memo_for declines)
        self.dtype: Any = np.uint8 if most <= 0xFF else np.uint16 if most <= 0xFFFF else None
        self.nan_code = np.array([len(t) + 1 for t in self.thresholds], dtype=self.dtype or np.uint64)
        self.width = int(est.n_trees_per_iteration_)
        self.size = size
        self._memo: dict[bytes, tuple[float, ...]] = {}
        self._lock = threading.Lock()
        self.hits = 0  # rows looked up, and keys run through the trees (statistics: threads may lose counts)
        self.misses = 0

    def keys(self, X: np.ndarray) -> list[bytes]:
        """Each row's key: per used feature, the index of its value among that feature's thresholds."""
        n = X.shape[0]
        if not len(self.columns):  # trees without a split: every row takes the same path
            return [b""] * n
        key = np.empty((len(self.columns), n), dtype=self.dtype)
        cols = np.ascontiguousarray(X[:, self.columns].T)
        missing = np.isnan(cols)
        for j, t in enumerate(self.thresholds):
            key[j] = np.searchsorted(t, cols[j], side="left")
        if missing.any():
            key[missing] = np.broadcast_to(self.nan_code[:, None], key.shape)[missing]
        rows = np.ascontiguousarray(key.T)
        # each np.void row comes out of tolist() as its bytes (numpy's stubs also allow tuples)
        return cast("list[bytes]", rows.view(np.dtype((np.void, rows.shape[1] * rows.itemsize))).ravel().tolist())

    def raw(self, X: np.ndarray, predict: Any) -> np.ndarray:
        """The raw predictions of ``X``, ``(n, width)``: from the memo, and ``predict(rows)`` for the rows
        whose key it does not hold (one row per key)."""
        keys = self.keys(X)
        memo = self._memo  # read once: a writer may replace it
        found = [memo.get(k) for k in keys]
        todo: dict[bytes, int] = {}
        for i, (k, v) in enumerate(zip(keys, found)):
            if v is None and k not in todo:
                todo[k] = i
        if todo:
            computed = np.asarray(predict(X[list(todo.values())]), dtype=np.float64).reshape(len(todo), self.width)
            new = {k: tuple(row) for k, row in zip(todo, computed.tolist())}
            for i, (k, v) in enumerate(zip(keys, found)):
                if v is None:
                    found[i] = new[k]
            with self._lock:
                if len(self._memo) + len(new) > self.size:
                    self._memo = {}
                self._memo.update(new)
        self.hits += len(keys) - len(todo)
        self.misses += len(todo)
        return np.array(found, dtype=np.float64).reshape(len(keys), self.width)


_MEMOS: weakref.WeakKeyDictionary[Any, TreeMemo] = weakref.WeakKeyDictionary()
_MEMOS_LOCK = threading.Lock()


def _nodes(est: Any) -> list[np.ndarray]:
    return [p.nodes for stage in est._predictors for p in stage]


def _splits(nodes: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The feature and threshold of every split of the trees' ``nodes`` (field by field: concatenating the
    structured arrays whole promotes their dtype pair by pair, about 15 ms for 250 trees)."""
    inner = np.concatenate([n["is_leaf"] == 0 for n in nodes])
    feature = np.concatenate([n["feature_idx"] for n in nodes])[inner]
    threshold = np.concatenate([n["num_threshold"] for n in nodes])[inner]
    return feature, threshold


def _memoisable(nodes: list[np.ndarray]) -> bool:
    """Whether there are trees and none has a categorical split."""
    return bool(nodes) and not any(n["is_categorical"].any() for n in nodes)


def clear_memos() -> None:
    """Forget every estimator's memo (a first call's cost is measured from nothing)."""
    with _MEMOS_LOCK:
        _MEMOS.clear()


def memo_for(est: Any) -> TreeMemo | None:
    """``est``'s memo (made on first use; a new one when its trees changed: a refit, or a warm start
    that added trees), or None when it has categorical splits or is not weak-referable."""
    try:
        memo = _MEMOS.get(est)
    except TypeError:
        return None
    if memo is not None and memo.predictors is est._predictors and memo.n_trees == len(est._predictors):
        return memo
    with _MEMOS_LOCK:
        memo = _MEMOS.get(est)
        if memo is None or memo.predictors is not est._predictors or memo.n_trees != len(est._predictors):
            nodes = _nodes(est)
            if not _memoisable(nodes):
                return None
            memo = TreeMemo(est, nodes=nodes)
            if memo.dtype is None:  # 65,535 thresholds or more on a feature: not a tree sklearn grows
                return None
            _MEMOS[est] = memo
    return memo


def _add_trees(est: Any, rows: np.ndarray, raw: np.ndarray) -> None:
    """``est._predict_iterations(rows, est._predictors, raw, False, 1)``: each tree's leaf values
    added to its column of ``raw`` (Fortran order), tree after tree, on one OpenMP thread.

    The same additions in the same order, by the same tree walk (sklearn's
    ``_predict_from_raw_data``, which ``TreePredictor.predict`` calls) called directly: without a
    ``partial``, the known-categories bitsets and an output array made again for each of the
    250 trees (0.5-0.9 ms of a 2-4 ms prediction of the rows a growing history's call misses).
    Where sklearn no longer has that walk, or takes other arguments, ``_predict_iterations``.
    """
    try:
        from sklearn.ensemble._hist_gradient_boosting._predictor import _predict_from_raw_data
        from sklearn.ensemble._hist_gradient_boosting.common import Y_DTYPE
    except ImportError:  # pragma: no cover - another sklearn layout
        est._predict_iterations(rows, est._predictors, raw, False, 1)
        return
    start = raw.copy()
    known, f_idx_map = est._bin_mapper.make_known_categories_bitsets()
    out = np.empty(rows.shape[0], dtype=Y_DTYPE)
    columns = [raw[:, k] for k in range(raw.shape[1])]
    try:
        for stage in est._predictors:
            for column, predictor in zip(columns, stage):
                _predict_from_raw_data(predictor.nodes, rows, predictor.raw_left_cat_bitsets, known, f_idx_map, 1,
                                       out)
                column += out
    except (TypeError, ValueError, AttributeError):  # pragma: no cover - another sklearn layout
        raw[...] = start
        est._predict_iterations(rows, est._predictors, raw, False, 1)


def raw_predict(est: Any, X: np.ndarray) -> np.ndarray:
    """``est``'s raw predictions of ``X`` (the baseline plus every tree's leaf), ``(n, trees per
    iteration)``, on one OpenMP thread, the memoised rows looked up (see the module doc)."""

    def plain(rows: np.ndarray) -> np.ndarray:
        raw = np.zeros((rows.shape[0], est.n_trees_per_iteration_), dtype=est._baseline_prediction.dtype, order="F")
        raw += est._baseline_prediction
        _add_trees(est, rows, raw)
        return raw

    memo = memo_for(est)
    if memo is None:
        return plain(X)
    return memo.raw(X, plain)
