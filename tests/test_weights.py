"""A conversation's prior weighted by question shares (salience.scorer.weights), and agents left alone."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import LinearSVC

from conftest import SAMPLES
from salience import Entry, Query, Transcript, load_transcripts
from salience.scorer.estimators import conversation_estimator
from salience.scorer.features import FeatureExtractor
from salience.scorer.labels import evidence_labels, label
from salience.scorer.model import ImportanceScorer
from salience.scorer.rows import build_rows
from salience.scorer.weights import fit_weighted, share_weights


def _chat(k: int) -> Transcript:
    """A conversation whose event turns are evidence: the lake trips of three questions each,
    the rest of one, so their question shares differ."""
    entries, queries = [], []
    for i in range(30):
        lake, told = i % 6 == 0, i % 3 == 0
        text = (f"I went to the lake with Mia on day {i + k} and we caught {i} fish" if lake
                else f"I baked {i} loaves for the fair on day {i + k}" if told
                else "Wow, that sounds great!" if i % 2 else "Haha, nice.")
        entries.append(Entry(id=f"t{i}", role="user" if i % 2 else "assistant", content=text))
        for n in range(3 if lake else 1 if told else 0):
            queries.append(Query(f"What happened on day {i + k}? ({n})", evidence=(f"t{i}",)))
    return Transcript(id=f"chat{k}", entries=tuple(entries), queries=tuple(queries))


def _without_questions(t: Transcript) -> Transcript:
    cited = {x for q in t.queries for x in q.evidence}
    return t.replace(entries=tuple(e.replace(label=float(e.id in cited)) for e in t.entries), queries=())


def test_share_weights_from_the_meta_or_the_questions() -> None:
    t = _chat(0)
    y = np.array([e.id in {x for q in t.queries for x in q.evidence} for e in t.entries], dtype=np.int8)
    from_queries = share_weights(t.entries, y, t)
    assert from_queries is not None
    # lake turns (3 questions) weigh three times the others (1), the evidence averaging 1
    assert from_queries[0] == pytest.approx(3 * from_queries[3]) and from_queries[y == 1].mean() == pytest.approx(1)
    assert (from_queries[y == 0] == 1).all()
    labelled = evidence_labels(t).replace(queries=())  # the meta carries the shares without the questions
    np.testing.assert_allclose(share_weights(labelled.entries, y, labelled), from_queries)
    assert share_weights(t.entries, y, _without_questions(t)) is None  # labels alone: nothing to weigh by
    assert share_weights(t.entries, np.zeros(len(y), dtype=np.int8), t) is None  # no evidence row


def test_fit_weighted_routes_the_weights_to_each_classifier() -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4))
    y = (X[:, 0] + rng.normal(size=300) > 0.5).astype(np.int8)
    w = rng.uniform(0.2, 3.0, size=300)
    vote = fit_weighted(conversation_estimator(0), X, y, w)
    linear, trees = vote.estimators_
    # the scaler before the logistic regression is fitted unweighted, the regression weighted
    scaler = StandardScaler().fit(X)
    np.testing.assert_allclose(linear[0].mean_, scaler.mean_)
    by_hand = conversation_estimator(0).estimators[0][1][-1].fit(scaler.transform(X), y, sample_weight=w)
    np.testing.assert_allclose(linear[-1].coef_, by_hand.coef_)
    by_hand_trees = conversation_estimator(0).estimators[1][1].fit(X, y, sample_weight=w)
    np.testing.assert_allclose(trees.predict_proba(X), by_hand_trees.predict_proba(X))
    assert not np.allclose(vote.predict_proba(X), conversation_estimator(0).fit(X, y).predict_proba(X))
    # None is the plain fit; an estimator without sample_weight is fitted unweighted
    def trees20() -> HistGradientBoostingClassifier:
        return HistGradientBoostingClassifier(max_iter=20, random_state=0)

    np.testing.assert_array_equal(fit_weighted(trees20(), X, y, None).predict_proba(X),
                                  trees20().fit(X, y).predict_proba(X))

    class NoWeights(LinearSVC):
        def fit(self, X, y):  # type: ignore[override]
            return super().fit(X, y)

    unweighted = fit_weighted(make_pipeline(StandardScaler(), NoWeights(random_state=0)), X, y, w)
    np.testing.assert_allclose(unweighted[-1].coef_, make_pipeline(StandardScaler(), LinearSVC(random_state=0))
                               .fit(X, y)[-1].coef_)


def test_a_conversation_prior_is_weighted_by_question_shares() -> None:
    chats = [_chat(k) for k in range(6)]
    plain = FeatureExtractor(use_embeddings=False)
    shared = ImportanceScorer(features=plain, cv=2).fit([evidence_labels(t).replace(queries=()) for t in chats])
    binary = ImportanceScorer(features=plain, cv=2).fit([_without_questions(t) for t in chats])
    assert shared.kind_ == binary.kind_ == "conversation"
    assert shared.metadata_["prior_weights"] == "question share" and binary.metadata_["prior_weights"] is None
    test = _chat(7)
    assert not np.allclose(shared.score(test), binary.score(test))
    # the query model's rows are one per (question, turn): they count questions already, unweighted
    assert build_rows(chats, plain.fit(), query=True).shares is None
    # the same weights whether the shares come from the questions themselves or the labels' meta
    asked = ImportanceScorer(features=plain, cv=2).fit(chats)
    np.testing.assert_allclose(asked.score(test), shared.score(test))


def test_agents_are_trained_as_before() -> None:
    """Where an agent acts in some transcript, the conversations' questions weigh nothing:
    the same model as with their question shares gone."""
    samples = load_transcripts(SAMPLES)
    chats = [_chat(k) for k in range(3)]
    plain = FeatureExtractor(use_embeddings=False)
    rows = build_rows([*samples, *chats], plain.fit(), query=False)
    assert rows.shares is not None  # the chats' rows carry them ...
    mixed = ImportanceScorer(features=plain, cv=2).fit([*label(samples), *[evidence_labels(t) for t in chats]])
    bare = ImportanceScorer(features=plain, cv=2).fit([*label(samples), *[_without_questions(t) for t in chats]])
    assert mixed.kind_ == "agent" and mixed.metadata_["prior_weights"] is None
    for t in samples[:3]:  # ... and the agents' model does not use them
        np.testing.assert_array_equal(mixed.score(t), bare.score(t))
