"""The boosted trees' raw predictions, memoised by the path each row takes through them.

A row's raw prediction (the baseline plus each tree's leaf, added tree after tree) depends
only on which side of each split it falls: for a numeric split on feature ``f`` at
threshold ``t``, whether ``x[f] <= t``, or, when ``x[f]`` is NaN, where the split sends a
missing value. So the index of ``x[f]`` among the sorted distinct thresholds the trees use
on ``f`` (``np.searchsorted``, left side: how many thresholds lie below ``x[f]``; one more
than their count for NaN) decides every split on ``f``, and these indices over the features
the trees use (the row's *key*) decide the row's leaf in every tree. Rows with the same key
have the same raw prediction, bit for bit: each row's is its own sum, in the same order,
whatever else the batch holds.

On a growing history most rows keep their key from one call to the next, and the others move
little: positional columns (position, entries and steps after) move every row a little, and
a row whose index on a feature moves from ``a`` to ``b`` changes side only at the splits on
that feature whose threshold lies between (indices ``a`` to ``b - 1``; any split on it when
either is NaN), which few trees have (on the 1,000-message latency history, ~100 rows a call
move, ~10 trees each, of 250). So :meth:`TreeMemo.raw` keeps the last call's rows (their keys,
each tree's leaf and the raw predictions: :class:`_Last`) and, row by row against the same row
of the last call:

* a row whose key did not change keeps its prediction;
* a row whose key changed walks again only the trees with a split between its old and new
  index on some feature (:meth:`_Forest.moved`; all of them are one walk, vectorised over the
  (row, tree) pairs: :meth:`_Forest.walk`), and its prediction is added up again from its
  leaves, tree after tree, as sklearn adds them;
* the other rows (new rows, rows whose trees would mostly be walked again, rows the memo served
  last time, whose leaves are not known) are looked up by key in a memo of raw predictions, and
  the keys it does not hold run through every tree (sklearn's own walk when many:
  :meth:`_Forest.leaves`), their leaves kept.

The memo is per estimator (its list of trees, so a refit starts a new one), bounded
(:data:`MEMO_ROWS` keys, emptied when full) and safe to share between threads (readers read a
dict that a writer replaces rather than empties; two threads that both miss a key store the
same value; the last call's rows belong to one call at a time, and a call that finds them taken
starts from the memo alone). Estimators with categorical splits are not memoised.

tests/test_tree_memo.py checks the memoised predictions against the plain ones on the
bundled scorer and real transcripts, bit for bit.
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

__all__ = ["MEMO_ROWS", "TreeMemo", "clear_memos", "memo_for", "raw_predict"]

#: How many keys one estimator's memo holds before it is emptied.
MEMO_ROWS = 100_000
#: A row whose key changed walks again the trees that split between its old and new key, while
#: they are at most this share of the trees; beyond, it is looked up or run through every tree.
WALK_SHARE = 0.25
#: New keys run through the trees by :meth:`_Forest.walk` up to this many (row, tree) pairs
#: (about 0.1 us a pair); more go through sklearn's walk, tree after tree (about 3 us a tree
#: and 25 ns a pair).
WALK_PAIRS = 4096


class _Forest:
    """Every tree's nodes in flat arrays, node indices global (tree ``t``'s root is ``root[t]``); the
    features the trees split on (``columns``), each one's sorted distinct thresholds, and the splits by
    feature and threshold index (what :meth:`moved` reads)."""

    def __init__(self, nodes: list[np.ndarray], predictors: list[Any]) -> None:
        sizes = np.array([len(n) for n in nodes], dtype=np.intp)
        self.n_trees = len(nodes)
        self.root = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.intp)
        self.nodes = flat = _flat(nodes)
        offset = np.repeat(self.root, sizes)  # each node's tree's root
        self.feature = flat["feature_idx"].astype(np.intp)
        self.threshold = flat["num_threshold"].astype(np.float64)
        self.missing_left = flat["missing_go_to_left"].astype(bool)
        self.left = flat["left"].astype(np.intp) + offset
        self.right = flat["right"].astype(np.intp) + offset
        self.is_leaf = flat["is_leaf"].astype(bool)
        self.value = flat["value"].astype(np.float64)
        self.local = np.arange(len(flat)) - offset  # each node's index in its tree
        most = int(sizes.max()) if len(sizes) else 1
        self.leaf_dtype: Any = np.uint8 if most <= 0x100 else np.uint16 if most <= 0x10000 else np.uint32
        # the splits sorted by feature, then threshold; each distinct (feature, threshold) once
        inner = np.flatnonzero(~self.is_leaf)
        order = np.lexsort((self.threshold[inner], self.feature[inner]))
        inner = inner[order]
        feature, threshold = self.feature[inner], self.threshold[inner]
        distinct = np.ones(len(inner), dtype=bool)
        distinct[1:] = (feature[1:] != feature[:-1]) | (threshold[1:] != threshold[:-1])
        pair = np.cumsum(distinct) - 1  # each split's distinct (feature, threshold)
        self.columns = np.unique(feature)
        start = np.searchsorted(feature[distinct], self.columns)  # each feature's first distinct pair
        self.thresholds = np.split(threshold[distinct], start[1:]) if len(start) else []
        place = np.searchsorted(self.columns, feature)
        # ``first[at[j] + k]``: the first split (in this order) on feature j whose threshold index is k or more
        # (k up to one past the last threshold: NaN's index)
        self.at = np.concatenate([[0], np.cumsum([len(t) + 2 for t in self.thresholds])]).astype(np.intp)
        self.first = np.searchsorted(self.at[place] + pair - start[place], np.arange(self.at[-1]))
        self.split_tree = np.searchsorted(self.root, inner, side="right") - 1
        self.nan_index = np.array([len(t) + 1 for t in self.thresholds], dtype=np.intp)
        self._bitsets = [p.raw_left_cat_bitsets for p in predictors]
        self._indexed: list[np.ndarray] | None = None  # for leaves(), built on first use

    def moved(self, old: np.ndarray, new: np.ndarray, most: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For rows whose keys went from ``old`` to ``new`` (``(rows, columns)`` each), the trees that may take
        another path: those with a split on a feature whose index moved, at a threshold between the two (at any
        threshold when either is NaN's). Returns the rows (indices into ``old``) for which there are at most
        ``most`` such trees, and those rows' (row, tree) pairs, each once, by row then tree."""
        r, j = np.nonzero(old != new)
        a, b = old[r, j].astype(np.intp), new[r, j].astype(np.intp)
        lo, hi = np.minimum(a, b), np.maximum(a, b)
        lo = np.where(hi == self.nan_index[j], 0, lo)
        start, stop = self.first[self.at[j] + lo], self.first[self.at[j] + hi]
        length = stop - start
        # a row with more splits than four times ``most`` in its ranges is left out before they are listed
        few = np.bincount(r, weights=length, minlength=len(old)) <= 4 * most
        r, start, length = r[few[r]], start[few[r]], length[few[r]]
        split = np.arange(int(length.sum())) - np.repeat(np.cumsum(length) - length - start, length)
        hit = np.zeros((len(old), self.n_trees), dtype=bool)
        hit[np.repeat(r, length), self.split_tree[split]] = True
        ok = np.flatnonzero(few & (hit.sum(axis=1) <= most))
        rows, trees = np.nonzero(hit[ok])
        return ok, ok[rows], trees

    def walk(self, X: np.ndarray, rows: np.ndarray, trees: np.ndarray) -> np.ndarray:
        """The leaf (its index in its tree) that row ``rows[p]`` of ``X`` reaches in tree ``trees[p]``: sklearn's
        walk (a NaN goes where the split sends missing values, else left when ``x <= threshold``), one step
        of every pair at a time."""
        node = self.root[trees]
        active = np.arange(len(rows))
        while active.size:
            at = node[active]
            going = ~self.is_leaf[at]
            if not going.all():
                active, at = active[going], at[going]
            x = X[rows[active], self.feature[at]]
            left = np.where(np.isnan(x), self.missing_left[at], x <= self.threshold[at])
            node[active] = np.where(left, self.left[at], self.right[at])
        return (node - self.root[trees]).astype(self.leaf_dtype)

    def leaves(self, X: np.ndarray) -> np.ndarray:
        """Every row's leaf in every tree, ``(rows, trees)``: sklearn's walk (``_predict_from_raw_data``), tree
        after tree, over a copy of the trees whose leaves hold their own index instead of their value (so it
        says where each row ends, not what it adds); :meth:`walk` where sklearn has no such function."""
        try:
            from sklearn.ensemble._hist_gradient_boosting._predictor import _predict_from_raw_data
        except ImportError:  # pragma: no cover - another sklearn layout
            _predict_from_raw_data = None
        if _predict_from_raw_data is not None:
            if self._indexed is None:
                indexed = self.nodes.copy()
                indexed["value"] = self.local
                ends = np.append(self.root[1:], len(indexed))
                self._indexed = [indexed[a:b] for a, b in zip(self.root.tolist(), ends.tolist())]
            out = np.empty((self.n_trees, X.shape[0]), dtype=self.leaf_dtype)  # a tree's leaves side by side
            known = np.zeros((0, 8), dtype=np.uint32)  # no categorical split (memo_for declines those)
            f_idx_map = np.zeros(X.shape[1], dtype=np.uint32)
            column = np.empty(X.shape[0], dtype=np.float64)
            try:
                for t, (nodes, bitsets) in enumerate(zip(self._indexed, self._bitsets)):
                    _predict_from_raw_data(nodes, X, bitsets, known, f_idx_map, 1, column)
                    out[t] = column
                return out.T
            except (TypeError, ValueError, AttributeError):  # pragma: no cover - another sklearn layout
                pass
        rows = np.repeat(np.arange(X.shape[0]), self.n_trees)
        return self.walk(X, rows, np.tile(np.arange(self.n_trees), X.shape[0])).reshape(X.shape[0], self.n_trees)


def _flat(nodes: list[np.ndarray]) -> np.ndarray:
    """The trees' ``nodes`` in one array, joined as bytes (``np.concatenate`` of the structured arrays
    themselves promotes their dtype pair by pair: about 15 ms for 250 trees)."""
    dtype = nodes[0].dtype
    return np.concatenate([np.ascontiguousarray(n, dtype=dtype).view(np.uint8) for n in nodes]).view(dtype)


@dataclass(slots=True)
class _Last:
    """The last call's rows: keys, leaves (per tree), whether those are known (a row served by the memo of
    raw predictions has none), raw predictions; the first ``n`` rows of arrays that grow by doubling."""

    keys: np.ndarray
    leaves: np.ndarray
    known: np.ndarray
    raw: np.ndarray
    n: int = 0

    def fit(self, n: int) -> None:
        """Room for ``n`` rows (the rows held kept)."""
        cap = self.keys.shape[0]
        if n <= cap:
            return
        cap = max(n, 2 * cap)
        for name in ("keys", "leaves", "known", "raw"):
            old = getattr(self, name)
            new = np.zeros((cap, *old.shape[1:]), dtype=old.dtype)
            new[: self.n] = old[: self.n]
            setattr(self, name, new)


class TreeMemo:
    """One fitted ``HistGradientBoostingClassifier``'s thresholds, its trees as a :class:`_Forest`, its raw
    predictions by key and its last call's rows (module doc)."""

    __slots__ = ("__weakref__", "_last", "_lock", "_memo", "baseline", "columns", "dtype", "forest", "hits",
                 "misses", "n_trees", "nan_code", "predictors", "size", "thresholds", "walked", "width")

    def __init__(self, est: Any, *, size: int = MEMO_ROWS, nodes: list[np.ndarray] | None = None) -> None:
        self.predictors = est._predictors  # the trees this memo is for (a refit makes a new list, a warm
        self.n_trees = len(est._predictors)  # start adds to it)
        nodes = _nodes(est) if nodes is None else nodes
        self.forest = _Forest(nodes, [p for stage in est._predictors for p in stage])
        self.columns = self.forest.columns.astype(np.intp)
        self.thresholds = self.forest.thresholds
        most = max((len(t) + 1 for t in self.thresholds), default=0)  # NaN's index: one past the thresholds'
        # sklearn's trees: at most 255 bins, so uint8; None: too many thresholds for a key (memo_for declines)
        self.dtype: Any = np.uint8 if most <= 0xFF else np.uint16 if most <= 0xFFFF else None
        self.nan_code = np.array([len(t) + 1 for t in self.thresholds], dtype=self.dtype or np.uint64)
        self.width = int(est.n_trees_per_iteration_)
        # what sklearn's raw predictions start from: zeros plus the baseline
        self.baseline = np.zeros((1, self.width)) + est._baseline_prediction
        self.size = size
        self._memo: dict[bytes, tuple[float, ...]] = {}
        self._last: _Last | None = None
        self._lock = threading.Lock()
        self.hits = 0  # rows not run through every tree, and keys that were (statistics: threads may lose counts)
        self.misses = 0
        self.walked = 0  # (row, tree) pairs walked again for rows whose key changed

    def key_matrix(self, X: np.ndarray) -> np.ndarray:
        """Each row's key, ``(rows, used features)``: per used feature, the index of its value among that
        feature's thresholds (one past their count for NaN)."""
        key = np.empty((len(self.columns), X.shape[0]), dtype=self.dtype)
        cols = np.ascontiguousarray(X[:, self.columns].T)
        missing = np.isnan(cols)
        for j, t in enumerate(self.thresholds):
            key[j] = np.searchsorted(t, cols[j], side="left")
        if missing.any():
            key[missing] = np.broadcast_to(self.nan_code[:, None], key.shape)[missing]
        return np.ascontiguousarray(key.T)

    def keys(self, X: np.ndarray) -> list[bytes]:
        """Each row's key as bytes (what the memo of raw predictions is keyed by)."""
        return self._bytes(self.key_matrix(X))

    def _bytes(self, key: np.ndarray) -> list[bytes]:
        if not key.shape[1]:  # trees without a split: every row takes the same path
            return [b""] * key.shape[0]
        key = np.ascontiguousarray(key)
        # each np.void row comes out of tolist() as its bytes (numpy's stubs also allow tuples)
        return cast("list[bytes]", key.view(np.dtype((np.void, key.shape[1] * key.itemsize))).ravel().tolist())

    def _sums(self, leaves: np.ndarray) -> np.ndarray:
        """The raw predictions of rows with these ``leaves``: zeros plus the baseline, then each tree's leaf
        value added, tree after tree, as sklearn adds them (the same additions in the same order)."""
        f = self.forest
        values = f.value[f.root[:, None] + leaves.T].reshape(-1, self.width, len(leaves))  # (iterations, width, rows)
        raw = np.zeros((self.width, len(leaves))) + self.baseline.T
        for value in values:
            raw += value
        return raw.T

    def raw(self, X: np.ndarray) -> np.ndarray:
        """The raw predictions of ``X``, ``(n, width)``: the last call's rows kept or walked again where their
        keys moved, the memo's, and every tree run for the keys that neither holds (module doc)."""
        n, f = X.shape[0], self.forest
        key = self.key_matrix(X)
        with self._lock:  # the last call's rows are this call's alone while it runs
            last, self._last = self._last, None
        if last is None or last.keys.shape[1] != key.shape[1]:
            last = _Last(keys=np.zeros((0, key.shape[1]), dtype=key.dtype),
                         leaves=np.zeros((0, f.n_trees), dtype=f.leaf_dtype),
                         known=np.zeros(0, dtype=bool), raw=np.zeros((0, self.width)))
        m = min(n, last.n)
        last.fit(n)
        moved = np.flatnonzero((key[:m] != last.keys[:m]).any(axis=1))
        # rows whose key moved and whose leaves are known: the trees that split where it moved, walked again
        walk = moved[last.known[moved]]
        ok, rows, trees = f.moved(last.keys[walk], key[walk], WALK_SHARE * f.n_trees)
        walk, rows = walk[ok], walk[rows]
        self.walked += len(rows)
        last.keys[:n] = key
        last.n = n
        # the others: from the memo, or run through every tree (one row per key)
        fresh = np.concatenate([np.setdiff1d(moved, walk, assume_unique=True), np.arange(m, n)])
        memo = self._memo  # read once: a writer may replace it
        todo: dict[bytes, list[int]] = {}  # key -> its rows
        hits: list[int] = []
        found: list[tuple[float, ...]] = []
        for i, k in zip(fresh.tolist(), self._bytes(key[fresh])):
            v = memo.get(k)
            if v is None:
                todo.setdefault(k, []).append(i)
            else:
                hits.append(i)
                found.append(v)
        if hits:
            last.raw[hits] = found
            last.known[hits] = False
        first = np.array([at[0] for at in todo.values()], dtype=np.intp)
        if len(first) * f.n_trees <= WALK_PAIRS:
            rows = np.concatenate([rows, np.repeat(first, f.n_trees)])
            trees = np.concatenate([trees, np.tile(np.arange(f.n_trees), len(first))])
        elif len(first):
            last.leaves[first] = f.leaves(X[first])
        if len(rows):
            last.leaves[rows, trees] = f.walk(X, rows, trees)
        for at in todo.values():
            if len(at) > 1:
                last.leaves[at[1:]] = last.leaves[at[0]]
        done = np.concatenate([walk, *(np.array(at, dtype=np.intp) for at in todo.values())]).astype(np.intp)
        if len(done):
            last.known[done] = True
            last.raw[done] = self._sums(last.leaves[done])
        if todo:
            new = {k: tuple(row) for k, row in zip(todo, last.raw[first].tolist())}
            with self._lock:
                if len(self._memo) + len(new) > self.size:
                    self._memo = {}
                self._memo.update(new)
        self.hits += n - len(todo)
        self.misses += len(todo)
        out = last.raw[:n].copy()
        with self._lock:
            self._last = last
        return out


_MEMOS: weakref.WeakKeyDictionary[Any, TreeMemo] = weakref.WeakKeyDictionary()
_MEMOS_LOCK = threading.Lock()


def _nodes(est: Any) -> list[np.ndarray]:
    return [p.nodes for stage in est._predictors for p in stage]


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

    memo = memo_for(est)
    if memo is not None:
        return memo.raw(X)
    raw = np.zeros((X.shape[0], est.n_trees_per_iteration_), dtype=est._baseline_prediction.dtype, order="F")
    raw += est._baseline_prediction
    _add_trees(est, X, raw)
    return raw
