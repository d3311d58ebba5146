"""Baseline scorers: the shared contract, each one's ordering, the registry, text helpers."""

from __future__ import annotations

import pickle

import joblib
import numpy as np
import pytest
from sklearn.base import clone

from salience.errors import ScorerError
from salience.scorer import text
from salience.scorer.baselines import (
    BASELINES,
    DECISION_WORDS,
    ERROR_PATTERNS,
    BaselineScorer,
    BM25Scorer,
    EmbeddingScorer,
    FusionScorer,
    KeywordScorer,
    OracleScorer,
    RandomScorer,
    RecencyScorer,
    make_baseline,
)
from salience.scorer.embeddings import Embedder
from salience.transcript import Entry, Query, Transcript


def _call(id: str, name: str, args: str) -> dict:
    return {"id": id, "type": "function", "function": {"name": name, "arguments": args}}


MESSAGES = [
    {"id": "s", "role": "system", "content": "You are an airline agent. Never book without confirmation."},
    {"id": "u1", "role": "user", "content": "I want a refund for my cancelled flight HAT136."},
    {
        "id": "a1",
        "role": "assistant",
        "content": "",
        "tool_calls": [_call("c1", "get_reservation", '{"id": "8JX2YL"}')],
    },
    {
        "id": "t1",
        "role": "tool",
        "tool_call_id": "c1",
        "name": "get_reservation",
        "content": '{"reservation_id": "8JX2YL", "flight": "HAT136", "status": "cancelled", "price": 412}',
    },
    {"id": "a2", "role": "assistant", "content": "Your reservation 8JX2YL is cancelled. I will check the refund."},
    {"id": "t0", "role": "assistant", "content": "Let me look at the weather in Paris too."},
    {"id": "u2", "role": "user", "content": "OK. My budget is tight, the refund must reach my card."},
    {"id": "a3", "role": "assistant", "content": "Traceback (most recent call last):\nValueError: card declined"},
]


@pytest.fixture(scope="module")
def transcript() -> Transcript:
    t = Transcript.from_openai(MESSAGES, id="airline-1")
    labels = {"u1": 1.0, "t1": 1.0, "a2": 0.5}
    entries = tuple(e.replace(label=labels.get(e.id, 0.0)) for e in t.entries)
    return t.replace(entries=entries, queries=(Query(text="Which flight was cancelled?", evidence=("t1",)),))


EMPTY = Transcript(id="empty")

FAST = ["recency", "keyword", "bm25", "random", "oracle"]
ALL = FAST + [pytest.param("embedding", marks=pytest.mark.slow), pytest.param("fusion", marks=pytest.mark.slow)]
ALL_IDS = FAST + ["embedding", "fusion"]


# -- the shared contract ---------------------------------------------------------


def test_registry_names_every_baseline() -> None:
    assert sorted(BASELINES) == ["bm25", "embedding", "fusion", "keyword", "oracle", "random", "recency"]
    for name, cls in BASELINES.items():
        assert cls.name == name and issubclass(cls, BaselineScorer)


@pytest.mark.parametrize("name", ALL, ids=ALL_IDS)
@pytest.mark.parametrize("query", [None, "Which flight was cancelled?"], ids=["no-query", "query"])
def test_shape_range_and_fit(transcript: Transcript, name: str, query: str | None) -> None:
    scorer = make_baseline(name)
    assert scorer.fit([transcript]) is scorer
    scores = scorer.score(transcript, query)
    assert isinstance(scores, np.ndarray) and scores.dtype == np.float64
    assert scores.shape == (len(transcript.entries),)
    assert np.all((scores >= 0) & (scores <= 1))
    assert scores.max() > 0
    np.testing.assert_array_equal(scorer.score(transcript, query), scores)  # deterministic
    assert scorer.score(EMPTY, query).shape == (0,)


@pytest.mark.parametrize("name", FAST, ids=FAST)
def test_sklearn_clone_and_pickle(name: str) -> None:
    scorer = make_baseline(name)
    assert type(clone(scorer)) is type(scorer)
    assert pickle.loads(pickle.dumps(scorer)).get_params() == scorer.get_params()


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (([],), r"RecencyScorer.score: 'transcript' must be a Transcript \(got list\)"),
        ((EMPTY, 42), r"'query' must be a str or None \(got int: 42\)"),
    ],
    ids=["list-transcript", "int-query"],
)
def test_bad_input_is_named(args: tuple, match: str) -> None:
    with pytest.raises(ScorerError, match=match):
        RecencyScorer().score(*args)


def test_make_baseline_errors_list_the_choices() -> None:
    with pytest.raises(ScorerError, match=r"unknown baseline 'bm26'; expected one of 'bm25', 'embedding', .*'recency'"):
        make_baseline("bm26")
    with pytest.raises(ScorerError, match=r"baseline 'random': bad parameters \['sead'\] \(accepted: seed\)"):
        make_baseline("random", sead=1)
    assert make_baseline("bm25", k1=1.2).k1 == 1.2


# -- each baseline ----------------------------------------------------------------


def test_recency_is_monotone_with_system_on_top(transcript: Transcript) -> None:
    scores = RecencyScorer().score(transcript, "ignored")
    assert scores[0] == 1.0
    assert np.all(np.diff(scores[1:]) > 0)
    assert scores[-1] == 1.0 and scores[1] == pytest.approx(1 / 7)


def test_keyword_rules(transcript: Transcript) -> None:
    s = dict(zip([e.id for e in transcript.entries], KeywordScorer().score(transcript)))
    assert s["u2"] > s["u1"] > s["a2"]  # user + decision words > user > plain assistant
    assert s["a3"] > s["t0"] == 0.0  # an error marker counts, plain chatter does not
    with_query = dict(zip(s, KeywordScorer().score(transcript, "weather in Paris")))
    assert with_query["t0"] > s["t0"] and with_query["t0"] > with_query["a2"]


def test_keyword_bad_parameter() -> None:
    t = Transcript.from_openai([{"role": "user", "content": "hi"}])
    with pytest.raises(ScorerError, match=r"'error_weight' must be a number >= 0 \(got -1\)"):
        KeywordScorer(error_weight=-1).score(t)


def test_bm25_ranks_the_matching_entry_first(transcript: Transcript) -> None:
    scores = BM25Scorer().score(transcript, "weather Paris")
    assert int(np.argmax(scores)) == 5 and scores[5] == 1.0
    assert np.count_nonzero(scores) == 1


def test_bm25_without_query_uses_last_user_turn(transcript: Transcript) -> None:
    scores = BM25Scorer().score(transcript)
    ids = [e.id for e in transcript.entries]
    assert ids[int(np.argmax(scores))] == "u2"
    s = dict(zip(ids, scores))
    assert min(s["u1"], s["a2"]) > s["t0"]  # they share "refund" and "my"; t0 only "the"
    no_user = Transcript.from_openai([{"role": "assistant", "content": "hello"}, {"role": "assistant", "content": "x"}])
    np.testing.assert_array_equal(BM25Scorer().score(no_user), [0.0, 0.0])


@pytest.mark.parametrize(
    "contents",
    [["refund please", "hello there"], ["refund please"], ["refund please", "refund now", "refund it"]],
    ids=["two-entries", "one-entry", "term-everywhere"],
)
def test_bm25_short_transcripts_still_rank(contents: list[str]) -> None:
    t = Transcript.from_openai([{"role": "assistant", "content": c} for c in contents])
    scores = BM25Scorer().score(t, "refund")
    assert scores[0] == 1.0
    assert all(s > 0 for c, s in zip(contents, scores) if "refund" in c)


def test_bm25_blank_query_and_blank_entries_score_zero() -> None:
    t = Transcript.from_openai([{"role": "user", "content": ""}, {"role": "assistant", "content": "  "}])
    np.testing.assert_array_equal(BM25Scorer().score(t, "refund"), [0.0, 0.0])
    t2 = Transcript.from_openai([{"role": "user", "content": "refund"}])
    np.testing.assert_array_equal(BM25Scorer().score(t2, "   "), [0.0])


@pytest.mark.slow
def test_embedding_similarity_orders_by_topic(transcript: Transcript) -> None:
    scorer = EmbeddingScorer(embedder=Embedder())
    scores = scorer.score(transcript, "forecast for the French capital")
    assert int(np.argmax(scores)) == 5
    no_user = Transcript.from_openai([{"role": "assistant", "content": "hello"}])
    np.testing.assert_array_equal(EmbeddingScorer().score(no_user), [0.0])
    blank = Transcript.from_openai([{"role": "assistant", "content": ""}, {"role": "user", "content": "refund"}])
    assert EmbeddingScorer().score(blank)[0] == 0.0


@pytest.mark.slow
def test_embedding_scorer_saves_small_with_joblib(transcript: Transcript, tmp_path) -> None:
    scorer = EmbeddingScorer(embedder=Embedder(batch_size=8))
    scores = scorer.score(transcript, "refund")
    path = tmp_path / "scorer.joblib"
    joblib.dump(scorer, path)
    assert path.stat().st_size < 2_000
    np.testing.assert_allclose(joblib.load(path).score(transcript, "refund"), scores, atol=1e-6)


class _Fixed(BaselineScorer):
    name = "fixed"

    def __init__(self, *, values: tuple[float, ...] = ()) -> None:
        self.values = values

    def _score(self, transcript: Transcript, query: str | None) -> np.ndarray:
        return np.array(self.values)


def test_fusion_reciprocal_rank_arithmetic() -> None:
    t = Transcript.from_openai([{"role": "user", "content": str(i)} for i in range(3)])
    a, b = _Fixed(values=(0.9, 0.5, 0.1)), _Fixed(values=(0.1, 0.5, 0.9))
    fused = FusionScorer(scorers=[a, b], k=60).score(t)
    raw = np.array([1 / 61 + 1 / 63, 2 / 62, 1 / 63 + 1 / 61])
    np.testing.assert_allclose(fused, raw / raw.max())
    tied = FusionScorer(scorers=[_Fixed(values=(1.0, 0.0, 0.0))], k=0).score(t)
    np.testing.assert_allclose(tied, [1.0, 1 / 2.5, 1 / 2.5])  # ties share the average rank 2.5


def test_fusion_follows_a_single_scorer(transcript: Transcript) -> None:
    fused = FusionScorer(scorers=[BM25Scorer()]).score(transcript, "weather Paris")
    assert int(np.argmax(fused)) == 5 and fused[5] == 1.0


@pytest.mark.parametrize(
    ("params", "match"),
    [({"scorers": []}, "at least one scorer"), ({"scorers": [RecencyScorer()], "k": -1}, r"'k' must be .*\(got -1\)")],
    ids=["no-scorers", "negative-k"],
)
def test_fusion_bad_parameters(transcript: Transcript, params: dict, match: str) -> None:
    with pytest.raises(ScorerError, match=match):
        FusionScorer(**params).score(transcript)


def test_random_is_deterministic_per_seed_and_transcript(transcript: Transcript) -> None:
    base = RandomScorer(seed=0).score(transcript)
    np.testing.assert_array_equal(RandomScorer(seed=0).score(transcript, "any query"), base)
    assert not np.array_equal(RandomScorer(seed=1).score(transcript), base)
    assert not np.array_equal(RandomScorer(seed=0).score(transcript.replace(id="airline-2")), base)


def test_oracle_reads_labels_and_evidence(transcript: Transcript) -> None:
    ids = [e.id for e in transcript.entries]
    by_label = OracleScorer().score(transcript)
    assert dict(zip(ids, by_label)) == {i: {"u1": 1.0, "t1": 1.0, "a2": 0.5}.get(i, 0.0) for i in ids}
    by_query = OracleScorer().score(transcript, "  Which flight was cancelled? ")
    assert [i for i, s in zip(ids, by_query) if s] == ["t1"]
    np.testing.assert_array_equal(OracleScorer().score(transcript, "another question"), by_label)


def test_oracle_without_labels_raises() -> None:
    t = Transcript.from_openai([{"role": "user", "content": "hi"}], id="bare")
    with pytest.raises(ScorerError, match=r"transcript 'bare' has no labels to read: no query of it has the text 'x'"):
        OracleScorer().score(t, "x")


# -- text helpers ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "tokens"),
    [
        ("Refund order #W123", ["refund", "order", "w123"]),
        ("user mia_li_3668 don’t", ["user", "mia_li_3668", "don't"]),
        ("预算", ["预", "算", "预算"]),
        ("ok 确认 yes", ["ok", "确", "认", "yes", "确认"]),
        ("", []),
    ],
    ids=["ids", "snake-and-curly-apostrophe", "cjk", "mixed", "empty"],
)
def test_tokenize(raw: str, tokens: list[str]) -> None:
    assert text.tokenize(raw) == tokens


@pytest.mark.parametrize(
    ("raw", "count"),
    [
        ("We DECIDED it; you must not.", 2),
        ("Do  not book; don’t call", 2),
        ("mustard budgetary", 0),
        ("已否决。必须", 2),
    ],
    ids=["case", "phrases", "whole-words", "chinese"],
)
def test_count_decision_words(raw: str, count: int) -> None:
    assert text.count_decision_words(raw) == count


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("Traceback (most recent call last):", True),
        ("KeyError: 'x'", True),
        ("3 tests FAILED", True),
        ("command exited, exit code 2", True),
        ("exit code 0", False),
        ("the error of my ways", False),
    ],
    ids=["traceback", "error-name", "failed", "exit-2", "exit-0", "prose"],
)
def test_has_error_marker(raw: str, expected: bool) -> None:
    assert text.has_error_marker(raw) is expected


def test_entry_text_and_last_user(transcript: Transcript) -> None:
    by_id = {e.id: e for e in transcript.entries}
    assert text.entry_text(by_id["a1"]) == 'get_reservation({"id": "8JX2YL"})'
    assert text.entry_text(by_id["t1"]).startswith('get_reservation: {"reservation_id"')
    assert text.entry_text(Entry(id="x", role="user", content="hi")) == "hi"
    assert text.last_user_text(transcript) == by_id["u2"].content
    assert text.truncate("abcdef", 3) == "abc" and text.truncate("ab", 3) == "ab"


def test_keyword_constants_are_tuples_of_str() -> None:
    assert isinstance(DECISION_WORDS, tuple) and "必须" in DECISION_WORDS and "don't" in DECISION_WORDS
    assert isinstance(ERROR_PATTERNS, tuple) and all(isinstance(p, str) for p in ERROR_PATTERNS)
