"""ImportanceScorer: the scikit-learn contract, fitting, scoring, saving, loading."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.linear_model import LogisticRegression

import salience
from conftest import SAMPLES, shared_path
from salience import Entry, Transcript, load_transcripts
from salience.errors import NotFittedError, ScorerError
from salience.scorer.features import FeatureExtractor
from salience.scorer.model import ImportanceScorer


def _fast(**params: object) -> ImportanceScorer:
    """A scorer that trains in a second or two: no embeddings, a small boosted model."""
    params.setdefault("estimator", HistGradientBoostingClassifier(max_iter=40, random_state=0))
    return ImportanceScorer(features=FeatureExtractor(use_embeddings=False), **params)


@pytest.fixture(scope="module")
def samples() -> list[Transcript]:
    return load_transcripts(SAMPLES)


@pytest.fixture(scope="module")
def fitted(samples: list[Transcript]) -> ImportanceScorer:
    return _fast().fit(samples)


def test_init_only_stores_and_clones() -> None:
    scorer = _fast(cv=4, cut_points=3)
    assert scorer.get_params()["cv"] == 4
    twin = clone(scorer)
    assert twin.get_params()["cut_points"] == 3 and not hasattr(twin, "prior_model_")


def test_unfitted_scorer_names_the_remedy(samples: list[Transcript]) -> None:
    with pytest.raises(NotFittedError, match="not fitted yet. Call 'fit'"):
        ImportanceScorer().score(samples[0])


@pytest.mark.parametrize(
    ("params", "message"),
    [({"calibration": "platt"}, "calibration must be"), ({"cv": 1}, "cv must be"), ({"cut_points": 0}, "cut_points")],
    ids=["calibration", "cv", "cut_points"],
)
def test_bad_parameters_fail_in_fit(samples: list[Transcript], params: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _fast(**params).fit(samples)


def test_fit_without_labels_names_the_transcript() -> None:
    raw = Transcript(id="raw-log", entries=(Entry(id="u", role="user", content="hello"),))
    with pytest.raises(ScorerError, match="transcript 'raw-log' has no entry labels"):
        _fast().fit([raw])
    with pytest.raises(ScorerError, match="at least one transcript"):
        _fast().fit([])


def test_scores_are_probabilities_per_entry(fitted: ImportanceScorer, samples: list[Transcript]) -> None:
    for t in samples:
        prior = fitted.score(t)
        aware = fitted.score(t, query="What was decided about the budget?")
        assert prior.shape == aware.shape == (len(t.entries),)
        assert ((prior >= 0) & (prior <= 1)).all() and ((aware >= 0) & (aware <= 1)).all()
    assert fitted.score(Transcript(id="empty")).shape == (0,)
    assert fitted.query_model_ is not None  # the long chat sample has queries with evidence
    assert fitted.metadata_["library_version"] == salience.__version__


def test_isotonic_steps_keep_the_model_order(fitted: ImportanceScorer, samples: list[Transcript]) -> None:
    model = fitted.prior_model_
    for t in samples:
        X = fitted.features_.transform_one(t)
        raw = model.estimator.predict_proba(X)[:, 1]
        steps = model.calibrator.predict(raw)
        scores = fitted.score(t)
        assert np.abs(scores - steps).max() <= 1e-6  # still the calibrated probabilities
        assert len(np.unique(steps)) < len(np.unique(raw))  # the steps tie entries ...
        order = np.lexsort((-raw, -steps))
        assert (np.diff(scores[order]) <= 0).all()  # ... which the raw score orders
        assert len(np.unique(scores)) == len(np.unique(raw))


def test_any_classifier_is_accepted(samples: list[Transcript]) -> None:
    scorer = _fast(estimator=LogisticRegression(max_iter=500), calibration=None).fit(samples)
    assert scorer.score(samples[0]).shape == (len(samples[0].entries),)
    assert scorer.feature_importances()  # from coef_
    with pytest.raises(ValueError, match="predict_proba"):
        _fast(estimator=object()).fit(samples)


def test_save_load_round_trip(fitted: ImportanceScorer, samples: list[Transcript], tmp_path: Path) -> None:
    path = fitted.save(tmp_path / "s.salience")
    loaded = ImportanceScorer.load(path)
    for t in samples[:3]:
        np.testing.assert_allclose(loaded.score(t), fitted.score(t))
        np.testing.assert_allclose(loaded.score(t, "refund"), fitted.score(t, "refund"))
    header = ImportanceScorer.read_header(path)
    assert header["metadata"]["feature_names"] == fitted.feature_names_


def test_tampered_file_is_refused(fitted: ImportanceScorer, tmp_path: Path) -> None:
    path = fitted.save(tmp_path / "s.salience")
    data = bytearray(path.read_bytes())
    data[-10] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(ScorerError, match="changed after it was saved"):
        ImportanceScorer.load(path)


def test_other_version_is_refused(fitted: ImportanceScorer, tmp_path: Path) -> None:
    path = fitted.save(tmp_path / "s.salience")
    head, _, payload = path.read_bytes().partition(b"\n")
    header = json.loads(head)
    header["library_version"] = "0.0.1"
    path.write_bytes(json.dumps(header).encode() + b"\n" + payload)
    with pytest.raises(ScorerError, match="written by salience 0.0.1"):
        ImportanceScorer.load(path)


@pytest.mark.parametrize("content", [b"", b"not a scorer\n", b'{"magic": "other"}\n'], ids=["empty", "text", "json"])
def test_not_a_scorer_file(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "x.salience"
    path.write_bytes(content)
    with pytest.raises(ScorerError, match="not a salience scorer file"):
        ImportanceScorer.load(path)
    with pytest.raises(ScorerError, match="cannot read"):
        ImportanceScorer.load(tmp_path / "missing.salience")


@pytest.mark.shared
def test_learns_hindsight_labels_better_than_recency() -> None:
    from salience.bench.metrics import hindsight_auc
    from salience.scorer.baselines import RecencyScorer
    from salience.scorer.labels import label
    from salience.training.split import split_transcripts

    runs = [label(t) for t in load_transcripts(shared_path("tau-bench-airline"))]
    train, test = split_transcripts(runs, 0.3, seed=0)
    scorer = _fast(calibration=None, cut_points=4).fit(train[:40])
    ours = hindsight_auc(scorer, test[:20]).auc
    recency = hindsight_auc(RecencyScorer(), test[:20]).auc
    assert ours > recency + 0.1, (ours, recency)


def _chats(n: int = 6) -> list[Transcript]:
    """Conversations (nobody acts) whose turns that tell of a past event are the needed ones."""
    out = []
    for k in range(n):
        entries = []
        for i in range(24):
            told = (i + k) % 3 == 0
            text = (f"I went to the lake with Mia on day {i + k} and we caught {i} fish" if told
                    else "Wow, that sounds great!" if i % 2 else "Haha, nice.")
            entries.append(Entry(id=f"t{i}", role="user" if i % 2 else "assistant", content=text,
                                 label=float(told)))
        out.append(Transcript(id=f"chat{k}", entries=tuple(entries)))
    return out


def test_the_default_estimator_follows_what_it_is_trained_on(samples: list[Transcript], tmp_path: Path) -> None:
    from sklearn.ensemble import VotingClassifier

    chats = _chats()
    assert not any(t.acts() for t in chats) and any(t.acts() for t in samples)
    plain = FeatureExtractor(use_embeddings=False)
    talk = ImportanceScorer(features=plain, cv=2).fit(chats)
    assert talk.kind_ == "conversation" and talk.metadata_["kind"] == "conversation"
    assert talk.calibration_ == "sigmoid" and hasattr(talk.prior_model_.calibrator, "predict_proba")  # Platt
    assert isinstance(talk.prior_model_.estimator, VotingClassifier)  # calibrated on top
    assert talk.feature_importances()  # from the vote's boosted trees
    scores = talk.score(chats[0])
    told = np.array([e.label == 1.0 for e in chats[0].entries])
    assert scores[told].min() > scores[~told].max()
    loaded = ImportanceScorer.load(talk.save(tmp_path / "chat.salience"))
    np.testing.assert_allclose(loaded.score(chats[1]), talk.score(chats[1]))

    mixed = ImportanceScorer(features=plain, cv=2).fit([*chats, *samples])  # an agent acts in some
    assert mixed.kind_ == "agent" and isinstance(mixed.prior_model_.estimator, HistGradientBoostingClassifier)
    assert mixed.calibration_ == "isotonic"
    assert ImportanceScorer(features=plain, cv=2, calibration="isotonic").fit(chats).calibration_ == "isotonic"
    given = _fast(cv=2).fit(chats)  # an estimator passed in is used whatever the data
    assert given.kind_ == "conversation" and isinstance(given.prior_model_.estimator, HistGradientBoostingClassifier)
