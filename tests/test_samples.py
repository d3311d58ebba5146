"""The project's sample transcripts in data/: they load, validate, are labelled, and
are what data/make_samples.py writes."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from salience import Transcript, load_transcripts
from salience.datasets import detect_layout
from salience.scorer.labels import hindsight_labels
from salience.tokens import default_counter

SAMPLES = Path(__file__).resolve().parents[1] / "data"
FILES = {
    "coding_agent.jsonl": {"coding"},
    "customer_service.jsonl": {"airline", "retail"},
    "long_chat.jsonl": {"conversation"},
}


def _generator():
    spec = importlib.util.spec_from_file_location("make_samples", SAMPLES / "make_samples.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def samples() -> dict[str, list[Transcript]]:
    return {name: load_transcripts(SAMPLES / name) for name in FILES}


def test_readme_describes_the_files() -> None:
    readme = (SAMPLES / "README.md").read_text(encoding="utf-8")
    for name in FILES:
        assert name in readme
    for key in ("needed_in", "used_by", "evidence", "`at`", "`id`", "`label`", "MIT"):
        assert key in readme


@pytest.mark.parametrize("name", list(FILES), ids=list(FILES))
def test_sample_loads_as_canonical_jsonl(name: str, samples) -> None:
    assert detect_layout(SAMPLES / name) == "jsonl"
    transcripts = samples[name]
    assert 2 <= len(transcripts) <= 3
    assert {t.domain for t in transcripts} == FILES[name]
    assert len({t.id for t in transcripts}) == len(transcripts)
    counter = default_counter()
    for t in transcripts:
        tokens = sum(counter.count_entries(t.entries))
        assert 1_000 <= tokens <= 6_000, (t.id, tokens)
        assert all(e.label in (0.0, 1.0) for e in t.entries), t.id
        assert 0 < sum(e.label for e in t.entries) < len(t.entries)
        assert not t.unanswered_calls()


@pytest.mark.parametrize("name", list(FILES), ids=list(FILES))
def test_every_message_has_an_id_and_a_label_on_disk(name: str) -> None:
    for line in (SAMPLES / name).read_text(encoding="utf-8").splitlines():
        obj = json.loads(line)
        assert {"id", "domain", "messages"} <= set(obj)
        for message in obj["messages"]:
            assert isinstance(message["id"], str) and message["label"] in (0.0, 1.0)


def test_agent_samples_have_tool_calls_and_hindsight_meta(samples) -> None:
    for name in ("coding_agent.jsonl", "customer_service.jsonl"):
        for t in samples[name]:
            assert any(e.tool_calls for e in t.entries) and any(e.role == "tool" for e in t.entries)
            for entry, lab in zip(t.entries, hindsight_labels(t)):
                assert entry.label == float(lab.needed), (t.id, entry.id)
                assert entry.meta["needed_in"] == lab.needed_in
                assert entry.meta["used_by"] == list(lab.used_by)


def test_customer_service_ids_are_reused(samples) -> None:
    change = next(t for t in samples["customer_service.jsonl"] if t.id == "airline-change-flight")
    by_name = {}
    for e in change.entries:
        if e.role == "tool":
            by_name.setdefault(e.name, []).append(e)
    assert all(e.label == 1.0 for e in by_name["get_user_details"])
    assert by_name["search_direct_flight"][0].label == 1.0
    user_id_turn = next(e for e in change.entries if e.role == "user" and "olivia_chen_4512" in e.content)
    assert user_id_turn.label == 1.0 and user_id_turn.meta["needed_in"] == 1


def test_coding_sample_has_a_traceback_and_needed_test_output(samples) -> None:
    invoice = next(t for t in samples["coding_agent.jsonl"] if t.id == "coding-invoice-rounding")
    outputs = [e for e in invoice.entries if e.role == "tool" and e.name == "run"]
    assert any("AssertionError" in e.content for e in outputs)
    assert any("NameError" in e.content for e in outputs)
    assert outputs[0].label == 1.0  # the first failing run: its numbers come back in the diagnosis


def test_chat_queries_have_valid_evidence_and_evidence_labels(samples) -> None:
    for t in samples["long_chat.jsonl"]:
        assert len(t.queries) >= 5
        index = {e.id: i for i, e in enumerate(t.entries)}
        evidence = {eid for q in t.queries for eid in q.evidence}
        for q in t.queries:
            assert q.evidence
            if q.at is not None:
                assert max(index[e] for e in q.evidence) < q.at, q.text
        for e in t.entries:
            assert e.label == (1.0 if e.id in evidence else 0.0)
            assert e.meta["evidence_of"] == [k for k, q in enumerate(t.queries) if e.id in q.evidence]
            assert e.name in (t.meta["speaker_a"], t.meta["speaker_b"]) and e.meta["session"] >= 1


def test_generator_reproduces_the_files(tmp_path: Path) -> None:
    module = _generator()
    assert module.main(["--out", str(tmp_path)]) == 0
    for name in FILES:
        written = [json.loads(line) for line in (tmp_path / name).read_text(encoding="utf-8").splitlines()]
        shipped = [json.loads(line) for line in (SAMPLES / name).read_text(encoding="utf-8").splitlines()]
        assert written == shipped, (
            f"data/{name} is out of date: run python data/make_samples.py"
        )
