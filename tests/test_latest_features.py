"""The columns of :mod:`salience.scorer.latest`: where an entry stands relative to the newest
request and the latest call, and how much of what it holds is its own."""

from __future__ import annotations

import json

import numpy as np

from salience import Transcript
from salience.scorer.columns import BASE_FEATURES
from salience.scorer.features import FeatureExtractor
from salience.scorer.latest import LATEST_FEATURES


def _call(cid: str, name: str, **args: str) -> dict:
    return {"role": "assistant", "content": None,
            "tool_calls": [{"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]}


def _result(cid: str, content: str) -> dict:
    return {"role": "tool", "tool_call_id": cid, "content": content}


MESSAGES = [
    {"role": "user", "content": "Log me in: justinkool, password justforkicks123."},  # 0
    _call("c1", "UserLogin", username="justinkool", password="justforkicks123"),  # 1
    _result("c1", '{"session_token": "e149636f-d9ca-0792"}'),  # 2
    {"role": "user", "content": "Message Virginia (decture) and Michael (mstein): lunch moved."},  # 3
    _call("c2", "SendMessage", session_token="e149636f-d9ca-0792", receiver="decture", message="lunch moved"),  # 4
    _result("c2", '{"message_id": "5c5373e0-ecf4712d"}'),  # 5
]


def _features(messages: list[dict]) -> np.ndarray:
    fe = FeatureExtractor(use_embeddings=False).fit()
    return fe.transform_one(Transcript.from_openai(messages, id="latest"))


def _counts(X: np.ndarray, name: str) -> list[int]:
    return [round(float(v)) for v in np.expm1(X[:, BASE_FEATURES.index(name)])]


def _flags(X: np.ndarray, name: str) -> list[int]:
    return [int(v) for v in X[:, BASE_FEATURES.index(name)]]


def test_the_columns_are_base_features() -> None:
    assert set(LATEST_FEATURES) <= set(BASE_FEATURES)


def test_user_turns_and_calls_after_each_entry() -> None:
    X = _features(MESSAGES)
    assert _counts(X, "user_turns_after") == [1, 1, 1, 0, 0, 0]
    assert _counts(X, "calls_after") == [2, 1, 1, 1, 0, 0]


def test_handles_the_latest_call_uses() -> None:
    X = _features(MESSAGES)
    # the latest call (4) copies the session token (2) and "decture" (3), and holds both itself
    assert _counts(X, "latest_call_handles") == [0, 0, 1, 1, 2, 0]
    # a later call that repeats nothing of those moves the column with it
    later = _features([*MESSAGES, _call("c3", "Weather", city="Reykjavik")])
    assert _counts(later, "latest_call_handles") == [0, 0, 0, 0, 0, 0, 1]


def test_calls_and_results_of_the_latest_calls_tool() -> None:
    X = _features([*MESSAGES, _call("c3", "UserLogin", username="mstein"), _result("c3", "{}")])
    assert _flags(X, "same_tool_latest") == [0, 1, 1, 0, 0, 0, 1, 1]
    assert _flags(_features(MESSAGES[:1]), "same_tool_latest") == [0]  # no call yet


def test_handles_no_other_entry_holds() -> None:
    X = _features(MESSAGES)
    # 0's handles all recur in the login call; 3 keeps Virginia and mstein; 5 its message id
    assert _counts(X, "unique_handles") == [0, 0, 0, 2, 0, 1]
    # one repeat of "mstein" and it is no longer 3's own
    grown = _features([*MESSAGES, _call("c3", "SendMessage", receiver="mstein")])
    assert _counts(grown, "unique_handles")[3] == 1


def test_growing_matches_a_cold_extractor() -> None:
    fe = FeatureExtractor(use_embeddings=False).fit()
    for k in range(1, len(MESSAGES) + 1):
        warm = fe.transform_one(Transcript.from_openai(MESSAGES[:k], id="grow"))
        cold = _features(MESSAGES[:k])
        np.testing.assert_array_equal(warm, cold)


SLOTS = [
    {"role": "user", "content": "Set a reminder, please."},  # 0
    {"role": "assistant", "content": "What should it say?"},  # 1
    {"role": "user", "content": "Water ferns"},  # 2
    _call("c1", "AddReminder", content="Water ferns"),  # 3
    _result("c1", "success"),  # 4
]


def test_plain_words_are_pending_until_a_call_uses_them() -> None:
    # the answer's words are pending while no call has copied them ...
    before = _features(SLOTS[:3])
    assert _counts(before, "pending_words")[2] == 2 and _counts(before, "acted_words") == [0, 0, 0]
    # ... and acted on once the call copies them; words an earlier entry introduced (and
    # stop words) never count for a later one
    after = _features(SLOTS)
    assert _counts(after, "pending_words")[2] == 0 and _counts(after, "acted_words") == [0, 0, 2, 0, 0]
    again = _features([*SLOTS, {"role": "user", "content": "Water ferns daily"}])
    assert _counts(again, "pending_words")[5] == 1 and _counts(again, "acted_words")[5] == 0


def test_a_calls_own_new_words_are_neither_pending_nor_acted_on_elsewhere() -> None:
    X = _features([_call("c1", "Weather", city="Reykjavik")])
    assert _counts(X, "acted_words") == [0]
    # its name and keys are words it introduced that no call copies: pending
    assert _counts(X, "pending_words") == [2]  # "weather" and "city"; "reykjavik" is acted on where it appears


def test_growing_slots_match_a_cold_extractor() -> None:
    fe = FeatureExtractor(use_embeddings=False).fit()
    for k in range(1, len(SLOTS) + 1):
        np.testing.assert_array_equal(fe.transform_one(Transcript.from_openai(SLOTS[:k], id="slots")),
                                      _features(SLOTS[:k]))
