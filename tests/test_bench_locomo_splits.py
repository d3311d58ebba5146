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
