"""The feature extractor: columns, reference counts, query features, caching."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from salience import Entry, ToolCall, Transcript
from salience.scorer.features import BASE_FEATURES, QUERY_FEATURES, FeatureExtractor


def _col(name: str) -> int:
    return (BASE_FEATURES + QUERY_FEATURES).index(name)


@pytest.fixture
def transcript() -> Transcript:
    return Transcript(
        id="t",
        entries=(
            Entry(id="s", role="system", content="You are an airline agent. You must confirm before booking."),
            Entry(id="u", role="user", content="Hi, I am mia_li_3668 and want to change reservation ZFA04Y."),
            Entry(id="a1", role="assistant",
                  tool_calls=(ToolCall("c1", "get_user_details", '{"user_id": "mia_li_3668"}'),)),
            Entry(id="r1", role="tool", name="get_user_details", tool_call_id="c1",
                  content='{"reservations": ["ZFA04Y", "K1NW8N"], "card": "credit_card_4421486"}'),
            Entry(id="a2", role="assistant",
                  tool_calls=(ToolCall("c2", "get_reservation_details", '{"reservation_id": "ZFA04Y"}'),)),
            Entry(id="r2", role="tool", name="get_reservation_details", tool_call_id="c2",
                  content='{"flights": [{"flight_number": "HAT136"}], "payment": "credit_card_4421486"}'),
            Entry(id="a3", role="assistant",
                  tool_calls=(ToolCall("c3", "get_reservation_details", '{"reservation_id": "ZFA04Y"}'),)),
            Entry(id="r3", role="tool", name="get_reservation_details", tool_call_id="c3",
                  content='{"flights": [{"flight_number": "HAT136"}], "payment": "credit_card_4421486"}'),
            Entry(id="a4", role="assistant", content="Your flight HAT136 is paid with credit_card_4421486."),
        ),
    )


def test_shape_and_names(transcript: Transcript) -> None:
    fe = FeatureExtractor(use_embeddings=False).fit()
    base = fe.transform_one(transcript)
    both = fe.transform_one(transcript, "flight HAT136")
    assert base.shape == (9, len(BASE_FEATURES))
    assert both.shape == (9, len(BASE_FEATURES) + len(QUERY_FEATURES))
    assert list(fe.get_feature_names_out()) == list(BASE_FEATURES + QUERY_FEATURES)
    assert np.isfinite(both).all()


def test_roles_tool_types_and_task(transcript: Transcript) -> None:
    X = FeatureExtractor(use_embeddings=False).fit().transform_one(transcript)
    assert X[0, _col("role_system")] == 1 and X[3, _col("role_tool")] == 1
    assert X[3, _col("tooltype_database")] == 1
    assert X[1, _col("is_task")] == 1 and X[1, _col("is_last_user")] == 1
    assert X[0, _col("decision_words")] > 0  # "must", "confirm"


def test_references_forward_and_superseded(transcript: Transcript) -> None:
    X = FeatureExtractor(use_embeddings=False).fit().transform_one(transcript)
    # the user's turn introduces mia_li_3668 and ZFA04Y, reused by the calls
    assert X[1, _col("fwd_ref_steps")] > 0
    # r1 introduces credit_card_4421486, which a4 uses
    assert X[3, _col("fwd_ref_steps")] > 0
    # r2 is the same read as r3 later: superseded; r3 is not
    assert X[5, _col("superseded")] == 1 and X[7, _col("superseded")] == 0
    # the final answer reuses earlier values
    assert X[8, _col("bwd_ref_values")] > 0
    assert X[8, _col("log_entries_after")] == 0


def test_query_features_rank_the_matching_entry(transcript: Transcript) -> None:
    fe = FeatureExtractor(use_embeddings=False).fit()
    X = fe.transform_one(transcript, "which card is credit_card_4421486")
    bm25 = X[:, _col("bm25")]
    assert bm25.argmax() in (3, 5, 7, 8)
    assert X[bm25.argmax(), _col("bm25_rank")] == 1.0
    assert X[3, _col("value_overlap")] == 1


def test_base_features_are_cached_and_input_untouched(transcript: Transcript) -> None:
    before = copy.deepcopy(transcript)
    fe = FeatureExtractor(use_embeddings=False).fit()
    first = fe.base(transcript)
    assert fe.base(transcript) is first
    fe.transform_one(transcript, "q")
    assert transcript == before


def test_empty_transcript() -> None:
    fe = FeatureExtractor(use_embeddings=False).fit()
    assert fe.transform_one(Transcript(id="e")).shape == (0, len(BASE_FEATURES))
    assert fe.transform_one(Transcript(id="e"), "q").shape == (0, len(BASE_FEATURES) + len(QUERY_FEATURES))


def test_bad_window() -> None:
    with pytest.raises(ValueError, match="recent_window must be a positive int"):
        FeatureExtractor(recent_window=0).fit()


@pytest.mark.slow
def test_embedding_features_with_the_real_model(transcript: Transcript) -> None:
    fe = FeatureExtractor().fit()
    X = fe.transform_one(transcript, "What flight is on the reservation?")
    assert X[:, _col("sim_task")].max() > 0.3  # the task turn is similar to itself
    assert np.isclose(X[1, _col("sim_task")], 1.0, atol=1e-4)
    cos = X[:, _col("cos_query")]
    assert cos[5] > cos[2] and cos[5] > cos[1]  # the reservation's flights, not the user lookup


def _conversation() -> Transcript:
    turns = [
        (1, "Ann", "Hey Bo! Good to see you! How have you been?"),
        (1, "Bo", "I went to a pottery class in Lisbon yesterday and made a bowl."),
        (1, "Ann", "Wow, that's cool! What did you paint on the bowl?"),
        (1, "Bo", "Thanks! Just some blue waves."),
        (2, "Bo", "Since we last chatted, I finished the pottery bowl and gave it to my sister."),
        (2, "Ann", "That's so sweet of you!"),
        (2, "Bo", "Here it is. [shares a photo: a photo of a blue bowl on a table]"),
    ]
    return Transcript(id="c", entries=tuple(
        Entry(id=f"D{s}:{k}", role="user" if name == "Ann" else "assistant", name=name, content=text,
              meta={"session": s})
        for k, (s, name, text) in enumerate(turns, start=1)))


def test_conversation_features() -> None:
    t = _conversation()
    X = FeatureExtractor(use_embeddings=False).fit().transform_one(t)

    def col(name: str) -> list[float]:
        return X[:, _col(name)].round(3).tolist()

    assert col("session_first") == [1, 0, 0, 0, 1, 0, 0]
    assert col("turn_in_session")[:5] == [0.0, 0.693, 1.099, 1.386, 0.0]
    assert col("session_share") == [0, 0.333, 0.667, 1, 0, 0.5, 1]
    assert col("session_turns_after")[:4] == [1.386, 1.099, 0.693, 0]
    assert col("asks") == [1, 0, 1, 0, 0, 0, 0]
    assert col("after_question") == [0, 1, 0, 1, 0, 0, 0]
    assert col("before_question") == [0, 1, 0, 0, 0, 0, 0]
    assert col("before_reaction") == [0, 1, 0, 0, 1, 0, 0]  # "Wow, ...", "That's so sweet ..."
    assert col("shares_media") == [0, 0, 0, 0, 0, 0, 1]
    assert X[1, _col("proper_nouns")] > 0  # Lisbon
    assert X[1, _col("first_person")] > X[2, _col("first_person")]
    assert X[2, _col("second_person")] > 0 and X[2, _col("phatic_words")] > 0
    assert X[1, _col("past_tense")] > 0  # went, made
    assert X[0, _col("novel_share")] == 1.0
    # "pottery" and "bowl" come back later: the turn that introduced them is referenced
    assert X[1, _col("later_word_refs")] > 0 and X[6, _col("later_word_refs")] == 0
    # within each session, the longest turn ranks first
    rank = X[:, _col("length_rank_session")]
    assert rank[1] == 0.0 and rank[5] == 1.0


def test_conversation_features_grow_like_a_cold_computation() -> None:
    t = _conversation()
    fe = FeatureExtractor(use_embeddings=False).fit()
    for k in range(1, len(t.entries) + 1):
        sub = Transcript(id="c", entries=t.entries[:k])
        warm = fe.transform_one(sub)
        cold = FeatureExtractor(use_embeddings=False).fit().transform_one(sub)
        np.testing.assert_array_equal(warm, cold)


def test_rare_word_references_stop_counting_when_the_word_is_common() -> None:
    from salience.scorer import prefix

    limit = prefix._RARE_WORD_DF
    entries = [Entry(id="e0", role="user", content="zebra crossing")]
    entries += [Entry(id=f"e{i}", role="assistant", content=f"zebra {i}") for i in range(1, limit + 3)]
    fe = FeatureExtractor(use_embeddings=False).fit()
    refs = []
    for k in (limit - 1, limit, limit + 1, limit + 2):
        X = fe.transform_one(Transcript(id="z", entries=tuple(entries[:k])))
        refs.append(round(float(np.expm1(X[0, _col("later_word_refs")]))))
    assert refs == [limit - 2, limit - 1, 0, 0]


def test_a_users_handle_is_pending_until_a_call_copies_it() -> None:
    # "justinkool" and "decture" are handles (not values: no digit, no capital); the call
    # copies the first, so one stays pending in the user's turn.
    t = Transcript.from_openai([
        {"role": "user", "content": "Invite Justin (justinkool) and Virginia (decture) to the sync."},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "invite", "arguments": '{"user": "justinkool"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": '{"invited": true}'},
    ], id="pending")
    fe = FeatureExtractor(use_embeddings=False).fit()
    before = fe.transform_one(Transcript(id="p1", entries=t.entries[:1]))
    after = fe.transform_one(t)

    def count(X: np.ndarray, name: str) -> int:
        return round(float(np.expm1(X[0, _col(name)])))

    assert count(before, "new_handles") == 4  # Justin, justinkool, Virginia, decture
    assert count(before, "pending_handles") == 4 and count(before, "acted_handles") == 0
    assert count(after, "pending_handles") == 3 and count(after, "acted_handles") == 1
    assert after[0, _col("pending_share")] == pytest.approx(0.75)
    # the call's own arguments are acted on where they appear: nothing pending there
    assert count(after[1:], "pending_handles") == 0


def test_time_words_counted_by_groups_as_one_by_one() -> None:
    """The time-word count reads each group of time words only when the text holds the group's
    needle: the same count as looking for every word, and every word still looked for."""
    from salience.scorer import features as F

    assert sorted(w for _, words in F._TIME_GROUPS for w in words) == sorted(F._TIME_WORDS)
    assert all(needle is None or all(needle in w for w in words) for needle, words in F._TIME_GROUPS)
    texts = ["Yesterday, Monday 2024-05-01, or next WEEKEND?", "since when: today and today", "no time here",
             "December 2019, a month ago; last month and last year", "may", ""]
    texts += [" ".join(F._TIME_WORDS), "sundaysunday 2020202020 novemberber"]
    for text in texts:
        assert F._count_grouped(text, F._TIME_GROUPS) == F._count_any(text, F._TIME_WORDS), text
