"""Deprecated location of the recall benchmarks: a re-export shim, kept for one release.

The code moved:

* the figures (:func:`evidence_recall`, :func:`reference_recall`, :func:`hindsight_auc`,
  :func:`pack_greedy`, :class:`RecallCurve`) to :mod:`salience.bench.metrics`;
* the baseline selectors (:func:`recency_selector`, :func:`last_k_tool_results_selector`,
  :func:`observation_masking_selector`, :func:`compactor_selector`, ...) to
  :mod:`salience.bench.selectors`;
* :class:`BenchReport` (tables and plots) to :mod:`salience.bench.report`;
* :func:`run_benchmark` to :mod:`salience.bench.runner`;
* the held-out split (:func:`group_key`, :func:`split_transcripts`) to
  :mod:`salience.training.split`.

Import them from :mod:`salience.bench` (or :mod:`salience.training.split`); this module
only re-exports them, under the same names as before (``_reference_plan`` and
``_reference_curve`` are now the public :func:`~salience.bench.metrics.reference_plan`
and :func:`~salience.bench.metrics.reference_curve`).
"""

from __future__ import annotations

from salience.bench.metrics import (
    DEFAULT_FRACTIONS,
    BenchKind,
    HindsightAUC,
    ProgressFn,
    RecallCurve,
    ReferenceStep,
    Selector,
    check_fractions,
    evidence_recall,
    hindsight_auc,
    pack_greedy,
    reference_curve,
    reference_plan,
    reference_recall,
)
from salience.bench.report import BenchReport, BenchRow
from salience.bench.runner import BASELINE_NAMES, DEFAULT_BASELINES, REFERENCE_ONLY_BASELINES, run_benchmark
from salience.bench.selectors import (
    BENCH_COMPACTOR_PARAMS,
    CLEARED,
    OMITTED,
    compactor_selector,
    last_k_tool_results_selector,
    observation_masking_selector,
    recency_selector,
    recency_window,
    scorer_selector,
)
from salience.training.split import group_key, split_transcripts

#: The old private names, for code that reached into this module.
_reference_plan = reference_plan
_reference_curve = reference_curve
_Step = ReferenceStep

__all__ = [
    "BASELINE_NAMES",
    "BENCH_COMPACTOR_PARAMS",
    "CLEARED",
    "DEFAULT_BASELINES",
    "DEFAULT_FRACTIONS",
    "OMITTED",
    "REFERENCE_ONLY_BASELINES",
    "BenchKind",
    "BenchReport",
    "BenchRow",
    "HindsightAUC",
    "ProgressFn",
    "RecallCurve",
    "Selector",
    "check_fractions",
    "compactor_selector",
    "evidence_recall",
    "group_key",
    "hindsight_auc",
    "last_k_tool_results_selector",
    "observation_masking_selector",
    "pack_greedy",
    "recency_selector",
    "recency_window",
    "reference_recall",
    "run_benchmark",
    "scorer_selector",
    "split_transcripts",
]
