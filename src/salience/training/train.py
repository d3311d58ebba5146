"""Training a scorer end to end: label, split, cross-validate, fit, benchmark, save.

:func:`train_scorer` is what ``salience train`` runs, without the printing:

1. transcripts without labels or queries get hindsight labels
   (:func:`salience.scorer.labels.label`), so raw agent logs train as they are;
2. a held-out split by task or transcript (:func:`~salience.training.split.split_transcripts`)
   that training never sees;
3. the scorer is fitted on the rest; the grouped out-of-fold predictions that calibrate
   it also give its cross-validated ROC AUC, average precision and Brier score;
4. the held-out split is benchmarked: recall at token budgets beside every baseline,
   and the hindsight-label AUC at history cuts;
5. the metrics go into the scorer's metadata, and the scorer is saved.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from salience.errors import ParameterError, ScorerError
from salience.scorer.model import ImportanceScorer
from salience.transcript import Transcript

__all__ = ["TrainReport", "prepare_transcripts", "train_scorer"]

Progress = Callable[[str, int, int], None]


@dataclass(slots=True)
class TrainReport:
    """What a training produced: the scorer, its file, and every figure measured."""

    scorer: ImportanceScorer
    path: Path | None
    n_train: int
    n_test: int
    labeled: int
    cv_metrics: dict[str, float] = field(default_factory=dict)
    bench: Any = None  # a salience.bench.BenchReport, or None
    hindsight: dict[str, float] = field(default_factory=dict)
    seconds: float = 0.0

    def metrics(self) -> dict[str, float]:
        """Every figure as a flat ``name -> value`` dict (MLflow-safe names)."""
        out = dict(self.cv_metrics)
        out.update(self.hindsight)
        if self.bench is not None:
            out.update(self.bench.metrics())
        return {k: float(v) for k, v in out.items() if v is not None and np.isfinite(v)}


def prepare_transcripts(
    transcripts: Sequence[Transcript], *, domain: str | None = None, mode: str = "auto"
) -> tuple[list[Transcript], int]:
    """Keep ``domain``'s transcripts (all if None) and label those that have neither
    entry labels nor query evidence. Returns the transcripts and how many were labelled.
    """
    from salience.scorer.labels import label

    kept = [t for t in transcripts if domain is None or t.domain == domain]
    if not kept:
        domains = sorted({str(t.domain) for t in transcripts})
        raise ScorerError(f"no transcript has domain {domain!r} (domains found: {', '.join(domains) or 'none'})")
    out: list[Transcript] = []
    labeled = 0
    for t in kept:
        has_labels = any(e.label is not None for e in t.entries)
        has_evidence = any(q.evidence for q in t.queries)
        if has_labels or has_evidence:
            out.append(t)
        else:
            out.append(label(t, mode=mode))
            labeled += 1
    return out, labeled


def train_scorer(
    transcripts: Sequence[Transcript],
    *,
    out: str | Path | None = None,
    domain: str | None = None,
    seed: int = 0,
    test_split: float = 0.25,
    scorer: ImportanceScorer | None = None,
    label_mode: str = "auto",
    cv: int = 3,
    bench: bool = True,
    fractions: Sequence[float] = (0.05, 0.10, 0.25),
    baselines: Sequence[str] | None = None,
    max_steps: int | None = 400,
    progress: Progress | None = None,
) -> TrainReport:
    """Label, split, cross-validate, fit, benchmark and save a scorer (see the module docstring).

    ``test_split`` is the held-out share of groups (0 keeps everything for training
    and skips the benchmark). ``progress(stage, done, total)`` is called as work goes.
    """
    from salience.bench.metrics import hindsight_auc
    from salience.bench.runner import DEFAULT_BASELINES, run_benchmark
    from salience.training.split import split_transcripts

    started = time.perf_counter()
    note = progress or (lambda stage, done, total: None)
    if not 0.0 <= test_split < 1.0:
        raise ParameterError(f"test_split must be in [0, 1) (got {test_split!r})")
    note("labelling", 0, 1)
    data, labeled = prepare_transcripts(transcripts, domain=domain, mode=label_mode)
    note("labelling", 1, 1)
    if test_split > 0 and len(data) >= 2:
        train, test = split_transcripts(data, test_split, seed=seed)
    else:
        train, test = list(data), []
    model = scorer if scorer is not None else ImportanceScorer(random_state=seed, cv=cv)
    note("fitting", 0, 1)
    model.fit(train)
    note("fitting", 1, 1)
    cv_metrics = dict(getattr(model, "cv_metrics_", {}))
    report = None
    hindsight: dict[str, float] = {}
    if bench and test:
        note("benchmarking", 0, 1)
        report = run_benchmark(
            test,
            model,
            fractions=fractions,
            baselines=tuple(baselines) if baselines is not None else DEFAULT_BASELINES,
            max_steps=max_steps,
            progress=(lambda stage, done, total: note(f"benchmark: {stage}", done, total)),
        )
        with_steps = [t for t in test if any(e.meta.get("used_by") is not None for e in t.entries)]
        if with_steps:
            from salience.scorer.baselines import RecencyScorer

            ours = hindsight_auc(model, with_steps)
            theirs = hindsight_auc(RecencyScorer(), with_steps)
            if ours.auc is not None and math.isfinite(ours.auc):
                hindsight["test_hindsight_auc"] = float(ours.auc)
            if theirs.auc is not None and math.isfinite(theirs.auc):
                hindsight["test_hindsight_auc_recency"] = float(theirs.auc)
        note("benchmarking", 1, 1)
    result = TrainReport(
        scorer=model,
        path=None,
        n_train=len(train),
        n_test=len(test),
        labeled=labeled,
        cv_metrics=cv_metrics,
        bench=report,
        hindsight=hindsight,
    )
    model.metadata_["metrics"] = result.metrics()
    model.metadata_["split"] = {"seed": seed, "test_split": test_split, "n_train": len(train), "n_test": len(test),
                                "test_ids": [t.id for t in test][:1000]}
    if domain is not None:
        model.metadata_["domain"] = domain
    if out is not None:
        result.path = model.save(out)
    result.seconds = time.perf_counter() - started
    return result
