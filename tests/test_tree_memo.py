"""The trees' prediction memo (salience.scorer.treememo): the same predictions as the plain
trees, bit for bit, with most rows of a growing history looked up (issue #12).

No timings are asserted.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest

from conftest import SAMPLES
from salience import Transcript, default_scorer, load_transcripts
from salience.scorer import model as model_module
from salience.scorer import treememo
from salience.scorer.treememo import TreeMemo, memo_for, raw_predict


def plain_raw(est: Any, X: np.ndarray) -> np.ndarray:
    """The trees' raw predictions as sklearn adds them, every row run through every tree."""
    raw = np.zeros((X.shape[0], est.n_trees_per_iteration_), dtype=np.float64, order="F")
    raw += est._baseline_prediction
    est._predict_iterations(X, est._predictors, raw, False, 1)
    return raw


@pytest.fixture(scope="module")
def scorer() -> Any:
    return default_scorer()


@pytest.fixture(scope="module")
def growing(scorer: Any) -> list[np.ndarray]:
    """Feature matrices of the samples' agent runs joined end to end, growing a message at a time."""
    runs = [t for t in load_transcripts(SAMPLES) if t.domain != "conversation"]
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are an agent."}]
    for t in runs:
        messages.extend(m for m in t.to_openai(with_ids=False, with_labels=False)[1:])
    return [scorer.features_.transform_one(Transcript.from_openai(messages[:n]))
            for n in range(max(2, len(messages) - 30), len(messages) + 1)]


def _estimators(scorer: Any) -> list[Any]:
    return [m.estimator for m in (scorer.prior_model_, scorer.query_model_) if m is not None]


def test_memoised_predictions_are_the_plain_ones_on_a_growing_history(scorer: Any, growing: list[np.ndarray]) -> None:
    est = scorer.prior_model_.estimator
    memo = TreeMemo(est)
    for k, X in enumerate(growing):
        got = memo.raw(X)
        assert got.tobytes() == plain_raw(est, X).tobytes()
        if k == 0:  # every row new, each distinct key run through the trees once
            assert memo.hits == len(X) - len(set(memo.keys(X))) and memo.misses == len(set(memo.keys(X)))
            memo.hits = memo.misses = 0
    # the point of it: most rows of a later call keep their key, or move where few trees split
    # (those trees alone walked again); only the new rows run through every tree
    assert memo.hits > 0.9 * (memo.hits + memo.misses)
    assert 0 < memo.walked < 0.1 * memo.hits * memo.n_trees


@pytest.mark.parametrize(("walk_share", "walk_pairs"), [(0.0, 0), (1.0, 10**9), (0.25, 0)],
                         ids=["rows-that-moved-looked-up-and-run-through-sklearn", "everything-walked",
                              "new-keys-through-sklearn"])
def test_every_way_to_a_row_gives_the_plain_prediction(scorer: Any, growing: list[np.ndarray],
                                                       monkeypatch: pytest.MonkeyPatch, walk_share: float,
                                                       walk_pairs: int) -> None:
    """A row whose key moved walks again the trees that split where it moved, or is looked up and run
    through every tree; new keys go through the vectorised walk or sklearn's: the same bits each way."""
    monkeypatch.setattr(treememo, "WALK_SHARE", walk_share)
    monkeypatch.setattr(treememo, "WALK_PAIRS", walk_pairs)
    est = scorer.prior_model_.estimator
    memo = TreeMemo(est)
    for X in growing[:8] + growing[3:5] + growing[-3:]:  # growing, shrinking, jumping ahead
        assert memo.raw(X).tobytes() == plain_raw(est, X).tobytes()
    assert (memo.walked > 0) == (walk_share > 0)


def test_the_forest_walk_reaches_sklearns_leaves(scorer: Any) -> None:
    """_Forest.walk (the vectorised walk over (row, tree) pairs) and _Forest.leaves (sklearn's walk over
    index-valued trees) agree on every tree, values on thresholds, NaN and infinities included."""
    est = scorer.prior_model_.estimator
    memo = TreeMemo(est)
    forest = memo.forest
    rng = np.random.default_rng(8)
    X = rng.normal(size=(30, est.n_features_in_))
    for f, t in zip(memo.columns, memo.thresholds):
        X[:, f] = rng.choice(t, size=30)
    X[rng.random(X.shape) < 0.1] = np.nan
    X[0], X[1] = np.inf, -np.inf
    leaves = forest.leaves(X)
    rows, trees = np.repeat(np.arange(30), forest.n_trees), np.tile(np.arange(forest.n_trees), 30)
    assert leaves.tobytes() == forest.walk(X, rows, trees).reshape(30, -1).tobytes()
    assert memo._sums(leaves).tobytes() == plain_raw(est, X).tobytes()


def test_the_scorer_gives_the_plain_predict_proba_through_the_memo(scorer: Any, growing: list[np.ndarray]) -> None:
    for est in _estimators(scorer):
        width = est.n_features_in_
        for X in growing:
            if X.shape[1] != width:
                continue
            fast = model_module._hgb_proba(est, X)
            assert fast is not None
            assert fast.tobytes() == np.asarray(est.predict_proba(X)[:, 1]).tobytes()
    memo = memo_for(scorer.prior_model_.estimator)
    assert memo is not None and memo.hits > 0


def test_rows_on_thresholds_and_missing_values(scorer: Any) -> None:
    """Values on, just below and just above every threshold, NaN and infinities: the key tells
    each side of each split as the trees do."""
    est = scorer.prior_model_.estimator
    memo = TreeMemo(est)
    rng = np.random.default_rng(1)
    width = est.n_features_in_
    rows = []
    for _ in range(3):
        x = rng.normal(size=(40, width))
        for f, t in zip(memo.columns, memo.thresholds):
            pick = rng.choice(t, size=40)
            x[:, f] = np.where(rng.random(40) < 0.5, pick, np.nextafter(pick, np.where(rng.random(40) < 0.5,
                                                                                     np.inf, -np.inf)))
        x[rng.random(x.shape) < 0.1] = np.nan
        x[0, :] = np.inf
        x[1, :] = -np.inf
        x[2, :] = np.nan
        rows.append(x)
    for X in rows + rows:  # the second time from the memo
        assert memo.raw(X).tobytes() == plain_raw(est, X).tobytes()
    assert memo.hits >= sum(len(X) for X in rows)


def test_a_full_memo_starts_again_and_stays_right(scorer: Any, growing: list[np.ndarray]) -> None:
    est = scorer.prior_model_.estimator
    memo = TreeMemo(est, size=50)
    for X in growing[:5]:
        assert memo.raw(X).tobytes() == plain_raw(est, X).tobytes()
        assert len(memo._memo) <= max(50, len(X))


def test_threads_share_a_memo(scorer: Any, growing: list[np.ndarray]) -> None:
    est = scorer.prior_model_.estimator
    memo = TreeMemo(est, size=200)  # small, so that threads also empty it under each other
    expected = [plain_raw(est, X).tobytes() for X in growing]
    errors: list[str] = []

    def work(offset: int) -> None:
        for k in range(len(growing)):
            i = (k + offset) % len(growing)
            if memo.raw(growing[i]).tobytes() != expected[i]:
                errors.append(f"matrix {i}")

    threads = [threading.Thread(target=work, args=(k * 3,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_a_refit_estimator_gets_a_new_memo() -> None:
    from sklearn.ensemble import HistGradientBoostingClassifier

    rng = np.random.default_rng(2)
    X = rng.normal(size=(300, 4))
    est = HistGradientBoostingClassifier(max_iter=20, random_state=0).fit(X, X[:, 0] > 0)
    first = raw_predict(est, X)
    memo = memo_for(est)
    assert memo is not None and memo_for(est) is memo
    est.fit(X, X[:, 1] > 0)  # new trees: the old memo's rows mean nothing now
    assert memo_for(est) is not memo
    again = raw_predict(est, X)
    assert again.tobytes() == plain_raw(est, X).tobytes()
    assert again.tobytes() != first.tobytes()


def test_categorical_splits_are_not_memoised() -> None:
    from sklearn.ensemble import HistGradientBoostingClassifier

    rng = np.random.default_rng(3)
    X = np.column_stack([rng.integers(0, 5, size=300), rng.normal(size=300)]).astype(np.float64)
    est = HistGradientBoostingClassifier(max_iter=10, categorical_features=[0], random_state=0)
    est.fit(X, X[:, 0] == 2)
    assert memo_for(est) is None
    assert raw_predict(est, X).tobytes() == plain_raw(est, X).tobytes()


def test_the_trees_are_added_as_sklearn_adds_them_with_several_per_iteration() -> None:
    """treememo._add_trees calls sklearn's tree walk itself: one column per class, tree after tree."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    rng = np.random.default_rng(5)
    X = rng.normal(size=(200, 4))
    X[rng.random(X.shape) < 0.05] = np.nan
    est = HistGradientBoostingClassifier(max_iter=8, random_state=0).fit(X, (X[:, 0] > 0).astype(int) + (X[:, 1] > 0.5))
    assert est.n_trees_per_iteration_ == 3
    raw = np.zeros((X.shape[0], 3), order="F")
    raw += est._baseline_prediction
    treememo._add_trees(est, X, raw)
    assert raw.tobytes() == plain_raw(est, X).tobytes()
    assert raw_predict(est, X).tobytes() == plain_raw(est, X).tobytes()


def test_the_memo_holds_no_reference_to_its_estimator() -> None:
    import gc
    import weakref

    from sklearn.ensemble import HistGradientBoostingClassifier

    rng = np.random.default_rng(4)
    X = rng.normal(size=(100, 3))
    est = HistGradientBoostingClassifier(max_iter=5, random_state=0).fit(X, X[:, 0] > 0)
    raw_predict(est, X)
    memo = weakref.ref(treememo._MEMOS[est])
    gone = weakref.ref(est)
    del est
    gc.collect()
    assert gone() is None and memo() is None  # the estimator, and its memo with it, freed


def test_clear_memos_forgets_every_memo() -> None:
    from sklearn.ensemble import HistGradientBoostingClassifier

    rng = np.random.default_rng(5)
    X = rng.normal(size=(100, 3))
    est = HistGradientBoostingClassifier(max_iter=5, random_state=0).fit(X, X[:, 0] > 0)
    raw_predict(est, X)
    memo = memo_for(est)
    assert memo is not None and memo.hits + memo.misses == len(X)
    treememo.clear_memos()
    assert est not in treememo._MEMOS
    fresh = memo_for(est)
    assert fresh is not memo and fresh is not None and fresh.hits == fresh.misses == 0


def test_trees_without_a_split_give_every_row_one_key() -> None:
    from sklearn.ensemble import HistGradientBoostingClassifier

    rng = np.random.default_rng(6)
    X = np.zeros((60, 3))  # nothing to split on: every tree is one leaf
    est = HistGradientBoostingClassifier(max_iter=5, random_state=0).fit(X, rng.random(60) < 0.3)
    memo = memo_for(est)
    assert memo is not None and len(memo.columns) == 0
    Z = rng.normal(size=(7, 3))
    got = raw_predict(est, Z)
    assert got.shape == (7, 1) and got.tobytes() == plain_raw(est, Z).tobytes()
    assert memo.misses == 1 and memo.hits == 6


def test_a_warm_start_that_adds_trees_gets_a_new_memo() -> None:
    from sklearn.ensemble import HistGradientBoostingClassifier

    rng = np.random.default_rng(7)
    X = rng.normal(size=(300, 4))
    y = X[:, 0] + 0.5 * X[:, 1] > 0
    est = HistGradientBoostingClassifier(max_iter=5, warm_start=True, early_stopping=False, random_state=0).fit(X, y)
    first = raw_predict(est, X)
    memo = memo_for(est)
    est.set_params(max_iter=15).fit(X, y)  # sklearn adds ten trees to the same list
    assert memo_for(est) is not memo
    again = raw_predict(est, X)
    assert again.tobytes() == plain_raw(est, X).tobytes() and again.tobytes() != first.tobytes()
