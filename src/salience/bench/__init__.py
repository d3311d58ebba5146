"""Recall benchmarks: how much of what an agent needs survives a token budget.

The package follows the data flow of one benchmark run:

* :mod:`salience.bench.metrics`: the figures, each a pure function that returns
  numbers and prints nothing: evidence recall (query-aware and query-agnostic,
  :func:`evidence_recall` with :func:`pack_greedy`), agent reference recall
  (:func:`reference_recall`, and its halves :func:`reference_plan` and
  :func:`reference_curve`), the hindsight AUC of a prior (:func:`hindsight_auc`), and
  :class:`RecallCurve`, what each figure returns;
* :mod:`salience.bench.selectors`: the selectors reference recall compares (the
  recency window, the last ``k`` tool results, observation masking, and any scorer
  through the Compactor);
* :mod:`salience.bench.report`: :class:`BenchReport` (rows, MLflow-safe metrics, a
  rich table, a matplotlib plot, JSON);
* :mod:`salience.bench.runner`: :func:`run_benchmark`, every applicable figure for a
  scorer and each baseline, in one process;
* :mod:`salience.bench.independent` (issue #14, imported on its own): a second,
  independent reference definition over OpenAI messages, with its own baselines, so
  that a figure does not hold only because the benchmark and the labels agree: the
  definitions are :mod:`salience.bench.references`, the baselines
  :mod:`salience.bench.message_baselines`, and ``independent`` the results and the
  runner (it re-exports the other two).

Imports run one way: ``bench`` uses :mod:`salience.scorer`, :mod:`salience.selector`,
:mod:`salience.tokens` and :mod:`salience.transcript`; :mod:`salience.training` (train,
tune) and the command line use ``bench``, never the other way. The held-out split
lives in :mod:`salience.training.split`. ``salience.training.bench`` re-exports these
names for one release.
"""

from __future__ import annotations

from salience.bench.metrics import (
    DEFAULT_FRACTIONS,
    BenchKind,
    HindsightAUC,
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
    "RecallCurve",
    "ReferenceStep",
    "Selector",
    "check_fractions",
    "compactor_selector",
    "evidence_recall",
    "hindsight_auc",
    "last_k_tool_results_selector",
    "observation_masking_selector",
    "pack_greedy",
    "recency_selector",
    "recency_window",
    "reference_curve",
    "reference_plan",
    "reference_recall",
    "run_benchmark",
    "scorer_selector",
]
