"""The Compactor as an MLflow pyfunc model, loaded with ``mlflow.pyfunc.load_model`` from a local folder.

No tracking store: :func:`save_compactor_model` writes the model folder that
``log_training_run`` registers, and MLflow loads it the way ``models serve`` would.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from conftest import SAMPLES
from salience import load_transcripts
from salience.errors import SalienceError, TrackingError
from salience.scorer.features import FeatureExtractor
from salience.scorer.model import ImportanceScorer
from salience.selector.compactor import Compactor
from salience.training.pyfunc import compact_frame, score_frame
from salience.training.tracking import read_scorer_model, save_compactor_model
from salience.transcript import Transcript

pytestmark = pytest.mark.slow

pd = pytest.importorskip("pandas")


@pytest.fixture(scope="module", autouse=True)
def _one_thread() -> Iterator[None]:
    """One OpenMP thread for the gradient boosting: on a busy 2-core machine, its threads
    spin against each other and a 2 s fit takes a minute or more."""
    with threadpool_limits(1):
        yield


@pytest.fixture(scope="module")
def transcripts() -> dict[str, Transcript]:
    return {t.id: t for t in load_transcripts(SAMPLES)}


@pytest.fixture(scope="module")
def scorer(transcripts: dict) -> ImportanceScorer:
    return ImportanceScorer(features=FeatureExtractor(use_embeddings=False)).fit(list(transcripts.values()))


@pytest.fixture(scope="module")
def model_dir(scorer: ImportanceScorer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_compactor_model(scorer, tmp_path_factory.mktemp("pyfunc") / "model")


@pytest.fixture(scope="module")
def model(model_dir: Path) -> Any:
    import mlflow.pyfunc

    return mlflow.pyfunc.load_model(str(model_dir))


@pytest.fixture(scope="module")
def direct(scorer: ImportanceScorer) -> Compactor:
    """What the model should delegate to."""
    return Compactor(scorer=scorer, on_over_budget="keep_pins")


@pytest.fixture(scope="module")
def two(transcripts: dict, direct: Compactor) -> list[tuple[list[dict], int]]:
    """Two OpenAI transcripts (an airline agent, a coding agent) and a budget of 45% of each one's tokens."""
    chosen = [next(t for t in transcripts.values() if t.domain == d) for d in ("airline", "coding")]
    out = []
    for t in chosen:
        messages = t.to_openai()
        full = direct.compact(messages, budget=10**9).tokens
        out.append((messages, int(full * 0.45)))
    return out


def _paired(messages: list[dict]) -> bool:
    """Every tool message answers a call of an earlier assistant message, and every call is answered."""
    calls: set[str] = set()
    answered: set[str] = set()
    for m in messages:
        for c in m.get("tool_calls") or ():
            calls.add(c["id"])
        if m["role"] == "tool":
            if m["tool_call_id"] not in calls:
                return False
            answered.add(m["tool_call_id"])
    return calls == answered


def test_compacts_two_openai_transcripts_within_budget(model: Any, direct: Compactor, two: list) -> None:
    frame = pd.DataFrame({"messages": [json.dumps(m) for m, _ in two], "budget": [b for _, b in two]})
    out = model.predict(frame)
    assert list(out.columns) == ["messages", "tokens", "budget", "kept", "trimmed", "stubbed", "dropped",
                                 "over_budget"]
    assert len(out) == 2
    for i, (messages, budget) in enumerate(two):
        row = out.iloc[i]
        compacted = json.loads(row["messages"])
        assert row["budget"] == budget
        assert row["tokens"] <= budget
        assert not row["over_budget"]
        assert len(compacted) < len(messages)
        assert _paired(compacted)
        expected = direct.compact(messages, budget=budget)
        assert compacted == expected.messages
        assert row["tokens"] == expected.tokens
        assert json.loads(row["dropped"]) == list(expected.dropped)
        assert json.loads(row["stubbed"]) == list(expected.stubbed)
        assert json.loads(row["kept"]) == list(expected.kept)
        removed = set(json.loads(row["dropped"])) | set(json.loads(row["stubbed"])) | set(json.loads(row["trimmed"]))
        assert removed, "a 45% budget must remove something"


def test_params_budget_and_query_apply_to_rows_without_them(model: Any, direct: Compactor, two: list) -> None:
    messages, budget = two[0]
    query = "which reservation has flight HAT136?"
    frame = pd.DataFrame({"messages": [messages, json.dumps(messages)], "budget": [None, budget + 200]})
    out = model.predict(frame, params={"budget": budget, "query": query})
    assert out["budget"].tolist() == [budget, budget + 200]
    assert json.loads(out["messages"][0]) == direct.compact(messages, budget=budget, query=query).messages
    assert json.loads(out["messages"][1]) == direct.compact(messages, budget=budget + 200, query=query).messages
    assert out["tokens"][0] <= budget


def test_row_query_column_wins_over_the_param(model: Any, direct: Compactor, two: list) -> None:
    messages, budget = two[1]
    frame = pd.DataFrame({"messages": [json.dumps(messages)], "budget": [budget], "query": ["the rounding bug"]})
    out = model.predict(frame, params={"query": "something else"})
    assert json.loads(out["messages"][0]) == direct.compact(messages, budget=budget, query="the rounding bug").messages


def test_default_budget_is_the_signature_default(model: Any) -> None:
    schema = model.metadata.get_params_schema()
    defaults = {p.name: p.default for p in schema.params}
    assert defaults == {"mode": "compact", "budget": 8000, "query": ""}
    assert model.metadata.get_input_schema().input_names() == ["messages", "budget", "query"]
    small = [{"role": "user", "content": "hello"}]
    out = model.predict(pd.DataFrame({"messages": [json.dumps(small)]}))
    assert out["budget"][0] == 8000
    assert json.loads(out["messages"][0]) == small


def test_score_mode_returns_every_entry_score(model: Any, scorer: ImportanceScorer, two: list) -> None:
    frame = pd.DataFrame({"messages": [json.dumps(m) for m, _ in two], "query": [None, "the rounding bug"]})
    out = model.predict(frame, params={"mode": "score"})
    assert list(out.columns) == ["ids", "scores"]
    for i, (messages, _) in enumerate(two):
        t = Transcript.from_openai(messages)
        assert json.loads(out["ids"][i]) == [e.id for e in t.entries]
        expected = scorer.score(t, None if i == 0 else "the rounding bug")
        np.testing.assert_allclose(json.loads(out["scores"][i]), expected, atol=1e-6)


def test_anthropic_messages_with_a_system_prompt(model: Any, direct: Compactor, transcripts: dict) -> None:
    t = next(t for t in transcripts.values() if t.domain == "retail")
    payload = {"messages": t.to_anthropic(), "system": t.anthropic_system()}
    full = direct.compact(payload["messages"], system=payload["system"], budget=10**9).tokens
    budget = int(full * 0.5)
    out = model.predict(pd.DataFrame({"messages": [json.dumps(payload)], "budget": [budget]}))
    result = json.loads(out["messages"][0])
    expected = direct.compact(payload["messages"], system=payload["system"], budget=budget)
    assert result == {"messages": expected.messages, "system": expected.system}
    assert out["tokens"][0] <= budget


def test_pins_over_budget_are_flagged_not_raised(model: Any, two: list) -> None:
    messages, _ = two[0]
    out = model.predict(pd.DataFrame({"messages": [json.dumps(messages)], "budget": [20]}))
    assert bool(out["over_budget"][0]) is True


@pytest.mark.parametrize(
    ("frame", "params", "message"),
    [
        ({"messages": ['[{"role": "user", "content": "hi"}]', "[not json"]}, None,
         r"row 1: column 'messages' is not valid JSON"),
        ({"messages": ['{"role": "user"}']}, None, r"row 0: column 'messages' must be a list of messages or an object"),
        ({"messages": ["42"]}, None, r"row 0: column 'messages' must be a JSON list of messages \(got a int\)"),
        ({"messages": ['[{"role": "user", "content": "hi"}]'], "budget": [-5]}, None,
         r"row 0: budget must be a positive integer \(got -5\)"),
        ({"messages": ['[{"role": "wizard", "content": "hi"}]']}, {"budget": 10}, r"row 0: .*wizard"),
        ({"messages": ['[{"role": "user", "content": "hi"}]']}, {"mode": "summarise"},
         r"mode must be one of 'compact', 'score' \(got 'summarise'\)"),
    ],
    ids=["bad-json", "object-without-messages", "number", "negative-budget", "bad-role", "bad-mode"],
)
def test_bad_rows_name_the_row(model: Any, frame: dict, params: dict | None, message: str) -> None:
    with pytest.raises(SalienceError, match=message):
        model.predict(pd.DataFrame(frame), params=params)


def test_frame_helpers_accept_mappings_and_need_a_messages_column(direct: Compactor, scorer: Any) -> None:
    one = [{"role": "user", "content": "hello there"}]
    by_row = compact_frame(direct, {"messages": one, "budget": 100})
    by_columns = compact_frame(direct, {"messages": [json.dumps(one), json.dumps(one)]})
    assert json.loads(by_row["messages"][0]) == one
    assert len(by_columns) == 2
    assert json.loads(score_frame(scorer, [{"messages": one}])["ids"][0]) == ["m0"]
    with pytest.raises(SalienceError, match=r"input needs a 'messages' column \(got columns \['text'\]\)"):
        compact_frame(direct, pd.DataFrame({"text": ["x"]}))


def test_model_folder_holds_a_sklearn_scorer(model_dir: Path, scorer: ImportanceScorer, transcripts: dict) -> None:
    import mlflow.sklearn

    inner = mlflow.sklearn.load_model(str(model_dir / "artifacts" / "scorer"))
    assert isinstance(inner, ImportanceScorer)
    t = next(iter(transcripts.values()))
    np.testing.assert_allclose(inner.score(t), scorer.score(t))
    np.testing.assert_allclose(read_scorer_model(model_dir).score(t), scorer.score(t))
    assert (model_dir / "compactor_model.py").exists()
    assert "salience==" in (model_dir / "requirements.txt").read_text()


def test_save_refuses_an_existing_folder_and_an_unfitted_scorer(model_dir: Path, scorer: ImportanceScorer,
                                                               tmp_path: Path) -> None:
    with pytest.raises(TrackingError, match=r"already exists"):
        save_compactor_model(scorer, model_dir)
    with pytest.raises(SalienceError, match=r"not fitted yet"):
        save_compactor_model(ImportanceScorer(), tmp_path / "m")
    with pytest.raises(SalienceError, match=r"not an MLflow model folder"):
        read_scorer_model(tmp_path)


def test_compactor_params_reach_the_model(scorer: ImportanceScorer, tmp_path: Path, two: list) -> None:
    import mlflow.pyfunc

    path = save_compactor_model(scorer, tmp_path / "m", compactor={"budget": 1234, "pin_last": 1})
    loaded = mlflow.pyfunc.load_model(str(path))
    assert {p.name: p.default for p in loaded.metadata.get_params_schema().params}["budget"] == 1234
    messages, budget = two[0]
    out = loaded.predict(pd.DataFrame({"messages": [json.dumps(messages)], "budget": [budget]}))
    expected = Compactor(scorer=scorer, pin_last=1, on_over_budget="keep_pins").compact(messages, budget=budget)
    assert json.loads(out["messages"][0]) == expected.messages
