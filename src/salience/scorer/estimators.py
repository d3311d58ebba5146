"""The estimators an :class:`~salience.scorer.model.ImportanceScorer` fits when it is
given none: which one depends on what it is trained on (``ImportanceScorer.kind_``).

* Agent transcripts (some transcript acts: :meth:`Transcript.acts
  <salience.transcript.Transcript.acts>`): :func:`default_estimator`, boosted trees.
* Conversations: :func:`conversation_estimator`, a soft vote of a logistic regression
  and shallow boosted trees.

Both were picked by recall on data the scorer never saw (``benchmarks/bench_unseen.py``
and ``benchmarks/sweep_lodo.py`` leave one tool-use set out;
``benchmarks/bench_locomo_splits.py`` leaves two LoCoMo conversations out), not by
in-sample AUC.
"""

from __future__ import annotations

from typing import Any

__all__ = ["CONVERSATION_C", "KINDS", "conversation_estimator", "default_estimator"]

#: What the default model is for each ``ImportanceScorer.kind_``, as ``salience train`` reports it.
KINDS = {
    "agent": "boosted trees (31 leaves), isotonic calibration",
    "conversation": "a soft vote of a logistic regression and depth-3 boosted trees, sigmoid calibration",
}

#: Inverse L2 strength of :func:`conversation_estimator`'s logistic regression.
CONVERSATION_C = 0.1


def default_estimator(random_state: int | None) -> Any:
    """The default for agent transcripts: histogram gradient-boosted trees of up to 31
    leaves. Hindsight labels give tens of thousands of rows across domains, enough for
    trees this deep to transfer to a domain left out.

    Kept after a leave-one-data-set-out sweep (``benchmarks/sweep_lodo.py``, BENCHMARKS.md):
    shallower or more regularised trees, monotonic constraints, a soft vote with a logistic
    regression, Platt calibration, domain-balanced row weights and more history cuts all
    moved salience minus the window by less than retraining this model on another 75% of
    the groups does."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    return HistGradientBoostingClassifier(
        learning_rate=0.06,
        max_iter=250,
        max_leaf_nodes=31,
        min_samples_leaf=40,
        l2_regularization=1.0,
        early_stopping=False,
        random_state=random_state,
    )


def conversation_estimator(random_state: int | None) -> Any:
    """The default for conversations: a soft vote of a logistic regression on standardised
    features and shallow boosted trees.

    Trained on four LoCoMo conversations and tested on the two others, over all 15 splits,
    it keeps 2.11x what the recency window keeps at 25% through the Compactor (worst split
    1.83x; 2.14x and 1.84x calibrated by a sigmoid, the default for conversations), where
    :func:`default_estimator` keeps 1.98x (worst 1.64x): a few thousand turns of one kind
    of chat do not hold enough to fit 31-leaf trees that transfer. Agent transcripts have
    far more rows, and there the deeper trees transfer better (held-out ToolTalk 0.464
    against 0.453 at 25%)."""
    from sklearn.ensemble import HistGradientBoostingClassifier, VotingClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    return VotingClassifier(
        [
            ("linear", make_pipeline(StandardScaler(), LogisticRegression(C=CONVERSATION_C, max_iter=2000))),
            ("trees", HistGradientBoostingClassifier(
                learning_rate=0.05, max_iter=200, max_depth=3, min_samples_leaf=40, l2_regularization=1.0,
                early_stopping=False, random_state=random_state)),
        ],
        voting="soft",
    )
