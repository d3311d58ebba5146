"""The helpers of benchmarks/bench_locomo_splits.py (the figures themselves are not tested)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from salience.transcript import Entry, Query, Transcript

_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_locomo_splits.py"
_spec = importlib.util.spec_from_file_location("bench_locomo_splits", _PATH)
assert _spec is not None and _spec.loader is not None
splits = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(splits)


def conversation() -> Transcript:
    entries = tuple(
        Entry(id=f"D1:{i}", role="user" if i % 2 else "assistant", name="Ann" if i % 2 else "Bob",
              content=f"turn {i}: " + " ".join(["word"] * (5 + i)), meta={"session": 1})
        for i in range(1, 13)
    )
    queries = (Query(text="What did Ann say first?", evidence=("D1:1", "D1:3")),
               Query(text="And Bob?", evidence=("D1:2",)))
    return Transcript(id="c", entries=entries, queries=queries)


class Fixed:
    """Scores the evidence turns ``hi`` and the others ``lo``."""

    def __init__(self, hi: float, lo: float) -> None:
        self.hi, self.lo = hi, lo

    def score(self, transcript: Transcript, query: str | None = None) -> np.ndarray:
        evidence = {"D1:1", "D1:2", "D1:3"}
        return np.array([self.hi if e.id in evidence else self.lo for e in transcript.entries])


def test_evidence_labels_mark_cited_turns_and_drop_questions() -> None:
    t = splits.evidence_labels(conversation())
    assert t.queries == ()
    assert [e.id for e in t.entries if e.label == 1.0] == ["D1:1", "D1:2", "D1:3"]
    assert all(e.label == 0.0 for e in t.entries if e.id not in {"D1:1", "D1:2", "D1:3"})


@pytest.mark.parametrize(("scorer", "fraction", "expected"), [
    (Fixed(0.9, 0.1), 1.0, 1.0),  # everything fits
    (Fixed(0.9, 0.1), 0.45, 1.0),  # the evidence turns are short and score highest (the last two are pinned)
    (Fixed(0.0, 1.0), 0.45, 0.0),  # the budget goes to the others (the evidence is old, so unpinned)
], ids=["all-fits", "evidence-first", "evidence-last"])
def test_compacted_recall_counts_evidence_kept_whole(scorer: Fixed, fraction: float, expected: float) -> None:
    assert splits.compacted_recall(scorer, [conversation()], fraction) == pytest.approx(expected)


def test_compacted_recall_pools_the_questions_of_each_conversation() -> None:
    """Two conversations, one all kept and one with none of its evidence kept: the pooled
    recall weighs each by its number of questions (2 and 1), not each conversation alike."""
    whole = conversation()
    one = whole.replace(id="d", queries=whole.queries[1:])  # one question, about D1:2
    scorer = Fixed(0.0, 1.0)
    assert splits.compacted_hits(scorer, whole, 1.0) == (pytest.approx(2.0), 2)
    assert splits.compacted_hits(scorer, one, 0.45) == (pytest.approx(0.0), 1)

    class Both:
        def score(self, transcript: Transcript, query: str | None = None) -> np.ndarray:
            return Fixed(0.9, 0.1).score(transcript) if transcript.id == "c" else Fixed(0.0, 1.0).score(transcript)

    # "c" keeps its evidence at 45% (2 questions, recall 1), "d" does not (1 question, recall 0)
    assert splits.compacted_recall(Both(), [whole, one], 0.45) == pytest.approx(2 / 3)


def test_by_conversation_averages_each_conversation_over_its_splits_worst_first() -> None:
    lines = splits.by_conversation({
        "a": [(0.60, 0.55, 0.25), (0.50, 0.45, 0.25)],  # 0.55 / 0.25 = 2.20x
        "b": [(0.45, 0.50, 0.30), (0.39, 0.48, 0.30)],  # 0.42 / 0.30 = 1.40x
    })
    assert lines == [
        "b: Compactor 0.420 (0.390 to 0.450 over 2 splits), 1.40x recency 0.300; the figure 0.490",
        "a: Compactor 0.550 (0.500 to 0.600 over 2 splits), 2.20x recency 0.250; the figure 0.500",
    ]


def test_evidence_labels_keep_the_question_shares_without_the_questions() -> None:
    # "What did Ann say first?" cites D1:1 and D1:3 (half each); "And Bob?" cites D1:2 alone
    out = splits.evidence_labels(conversation())
    assert out.queries == ()
    assert [e.id for e in out.entries if e.label == 1.0] == ["D1:1", "D1:2", "D1:3"]
    assert {e.id: e.meta["question_share"] for e in out.entries if e.meta["question_share"]} == {
        "D1:1": 0.5, "D1:2": 1.0, "D1:3": 0.5}


def test_ceilings_feed_the_compactor_the_answers() -> None:
    # at 45% the three short evidence turns fit whatever the values: both ceilings keep them all
    assert splits.ceilings(conversation(), 0.45) == (pytest.approx(1.0), pytest.approx(1.0))
    # D1:2 (27 tokens) now answers two questions alone and costs about what D1:1 and D1:3
    # (14 + 16) cost together; the budget holds one side. The labels count turns and keep the
    # pair (one question of three answered); the shares count questions and keep D1:2 (two).
    t = conversation()
    entries = tuple(e.replace(content=e.content + " pad" * 12) if e.id == "D1:2" else e for e in t.entries)
    t = t.replace(entries=entries, queries=(*t.queries, Query(text="Where did Bob go?", evidence=("D1:2",))))
    assert splits.ceilings(t, 0.25) == (pytest.approx(1 / 3), pytest.approx(2 / 3))


def test_by_conversation_adds_the_ceilings_when_given() -> None:
    lines = splits.by_conversation({"a": [(0.5, 0.5, 0.25)]}, bounds={"a": (0.75, 1.0)})
    assert lines == ["a: Compactor 0.500 (0.500 to 0.500 over 1 splits), 2.00x recency 0.250; the figure 0.500; "
                     "fed the labels 0.750 (3.00x), fed the question shares 1.000 (4.00x)"]


@pytest.mark.parametrize("wanted", ["c+nope", "c", "c+d+e"], ids=["unknown", "one", "three"])
def test_splits_that_name_no_pair_of_conversations_exit_2(tmp_path: Path, wanted: str,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    from salience import save_transcripts

    (tmp_path / "locomo").mkdir()
    base = conversation()
    save_transcripts([base, Transcript(id="d", entries=base.entries, queries=base.queries)],
                     tmp_path / "locomo" / "two.jsonl")
    with pytest.raises(SystemExit) as raised:
        splits.main(["--data", str(tmp_path), "--splits", wanted])
    assert raised.value.code == 2
    assert "--splits: pairs of two of c, d" in capsys.readouterr().err
