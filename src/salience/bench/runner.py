"""The benchmark runner: every figure for a scorer and its baselines, in one process.

:func:`run_benchmark` measures the applicable figures of :mod:`salience.bench.metrics`
for the scorer under test and each baseline (:data:`BASELINE_NAMES`; scorers from
:mod:`salience.scorer.baselines`, selectors from :mod:`salience.bench.selectors`) and
returns a :class:`~salience.bench.report.BenchReport`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from salience.bench.metrics import (
    DEFAULT_FRACTIONS,
    BenchKind,
    RecallCurve,
    ReferenceStep,
    Selector,
    check_fractions,
    evidence_recall,
    reference_curve,
    reference_plan,
)
from salience.bench.report import BenchReport
from salience.bench.selectors import (
    compactor_selector,
    last_k_tool_results_selector,
    observation_masking_selector,
    recency_selector,
    scorer_selector,
)
from salience.errors import ParameterError, ScorerError
from salience.tokens import TokenCounter, as_counter
from salience.transcript import Transcript

__all__ = ["BASELINE_NAMES", "DEFAULT_BASELINES", "REFERENCE_ONLY_BASELINES", "run_benchmark"]

#: Baselines that only exist as selectors (reference recall), not as scorers.
REFERENCE_ONLY_BASELINES: tuple[str, ...] = ("last3_tool_results", "observation_masking")
#: What :func:`run_benchmark` compares against by default.
DEFAULT_BASELINES: tuple[str, ...] = (
    "recency", "keyword", "bm25", "embedding", "fusion", "random", "oracle", *REFERENCE_ONLY_BASELINES,
)
#: Every baseline name :func:`run_benchmark` knows.
BASELINE_NAMES: tuple[str, ...] = tuple(sorted(DEFAULT_BASELINES))


def _check_names(baselines: Iterable[str]) -> tuple[str, ...]:
    if isinstance(baselines, str):
        baselines = (baselines,)
    names = tuple(dict.fromkeys(baselines))
    unknown = [b for b in names if b not in BASELINE_NAMES]
    if unknown:
        raise ParameterError(f"unknown baseline {unknown[0]!r}; expected some of {', '.join(BASELINE_NAMES)}")
    return names


def _check_kinds(kinds: Iterable[str]) -> tuple[BenchKind, ...]:
    if isinstance(kinds, str):
        kinds = (kinds,)
    out = []
    for k in kinds:
        try:
            out.append(BenchKind(k))
        except ValueError:
            allowed = ", ".join(x.value for x in BenchKind)
            raise ParameterError(f"unknown benchmark kind {k!r}; expected some of {allowed}") from None
    if not out:
        raise ParameterError("at least one benchmark kind is needed (got none)")
    return tuple(dict.fromkeys(out))


def _fractions_for(fractions: Any, kind: BenchKind) -> tuple[float, ...]:
    if fractions is None:
        return DEFAULT_FRACTIONS[kind]
    if isinstance(fractions, Mapping):
        return check_fractions(fractions.get(kind, fractions.get(kind.value, DEFAULT_FRACTIONS[kind])))
    return check_fractions(fractions)


def _reference_selector(name: str, counter: TokenCounter, params: Mapping[str, Any]) -> Selector | None:
    from salience.scorer.baselines import make_baseline

    if name == "recency":
        return recency_selector(counter=counter)
    if name == "last3_tool_results":
        return last_k_tool_results_selector(3, counter=counter)
    if name == "observation_masking":
        return observation_masking_selector(10, counter=counter)
    if name == "oracle":
        return None
    return scorer_selector(make_baseline(name), counter=counter, **params)


def run_benchmark(
    transcripts: Sequence[Transcript],
    scorer: Any,
    *,
    fractions: Iterable[float] | Mapping[str, Iterable[float]] | None = None,
    baselines: Iterable[str] = DEFAULT_BASELINES,
    kinds: Iterable[str] = tuple(BenchKind),
    scorer_name: str = "salience",
    counter: Any = None,
    max_steps: int | None = None,
    compactor_params: Mapping[str, Any] | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> BenchReport:
    """Run every applicable figure for ``scorer`` and each baseline, in one process.

    ``kinds``: some of ``"query"``, ``"agnostic"``, ``"reference"``. The evidence
    figures need transcripts whose queries list evidence; the reference figure
    needs assistant steps that reuse values of earlier non-system entries; a kind
    with no such transcript is left out (and listed in ``skipped``).
    ``fractions``: one sequence for every figure, a mapping by kind, or ``None``
    for :data:`DEFAULT_FRACTIONS`. ``baselines``: names from :data:`BASELINE_NAMES`.
    For the evidence figures each is a scorer (:func:`~salience.scorer.baselines.make_baseline`;
    ``last3_tool_results`` and ``observation_masking`` do not apply); for the reference
    figure ``recency`` is the sliding window (:func:`recency_selector`), the two rule
    baselines are :func:`last_k_tool_results_selector` and
    :func:`observation_masking_selector`, the other scorers go through the Compactor,
    and the oracle has no labels to read. The scorer itself goes through the
    Compactor for references (:func:`compactor_selector`, with ``compactor_params``
    over :data:`BENCH_COMPACTOR_PARAMS`, the same for the scorer and the baselines).
    ``max_steps``: at most that many steps per transcript for references. A baseline that raises a
    :class:`ScorerError` (the oracle without labels) is skipped with its reason.

    ``progress(description, done, total)`` is called as transcripts are done.
    Unknown kinds or baselines and bad fractions are a :class:`~salience.errors.ParameterError` (a ``ValueError``).
    """
    from salience.scorer.baselines import make_baseline

    started = time.perf_counter()
    kinds_ = _check_kinds(kinds)
    names = _check_names(baselines)
    tc = as_counter(counter)
    transcripts = list(transcripts)
    skipped: list[tuple[str, str, str]] = []
    evidence_ts = [t for t in transcripts if any(q.evidence for q in t.queries)]
    jobs: list[tuple[BenchKind, str, Any, tuple[float, ...]]] = []  # kind, method, scorer/selector, fractions
    plan: list[list[ReferenceStep]] = []
    for kind in kinds_:
        fr = _fractions_for(fractions, kind)
        if kind is BenchKind.REFERENCE:
            plan = [steps for steps in reference_plan(transcripts, max_steps, tc) if steps]
            if not plan:
                skipped.append(("*", kind.value, "no assistant step reuses a value of an earlier non-system entry"))
                continue
            params = dict(compactor_params or {})
            jobs.append((kind, scorer_name, compactor_selector(scorer, name=scorer_name, counter=tc, **params), fr))
            for name in names:
                sel = _reference_selector(name, tc, params)
                if sel is None:
                    skipped.append((name, kind.value, "not defined for references (no labels to read)"))
                    continue
                jobs.append((kind, name, sel, fr))
        else:
            if not evidence_ts:
                skipped.append(("*", kind.value, "no query lists evidence"))
                continue
            jobs.append((kind, scorer_name, scorer, fr))
            jobs.extend((kind, name, make_baseline(name), fr) for name in names if name not in REFERENCE_ONLY_BASELINES)
    sizes = [len(plan) if kind is BenchKind.REFERENCE else len(evidence_ts) for kind, *_ in jobs]
    total = sum(sizes)
    done = 0
    curves: list[RecallCurve] = []
    for (kind, name, obj, fr), size in zip(jobs, sizes):
        description = f"{kind.value}: {name}"
        base = done

        def tick(description: str = description) -> None:
            nonlocal done
            done += 1
            if progress is not None:
                progress(description, done, total)

        if progress is not None:
            progress(description, done, total)
        try:
            if kind is BenchKind.REFERENCE:
                curve = reference_curve(obj, plan, fr, tc, tick)
            else:
                curve = evidence_recall(obj, evidence_ts, fr, query_aware=kind is BenchKind.QUERY, counter=tc,
                                        method=name, progress=tick)
        except ScorerError as exc:
            if name == scorer_name:
                raise
            skipped.append((name, kind.value, str(exc)))
            done = base + size
            if progress is not None:
                progress(description, done, total)
            continue
        curves.append(curve)
    meta = {"transcripts": len(transcripts), "with_evidence": len(evidence_ts),
            "with_references": len(plan), "kinds": [k.value for k in kinds_], "baselines": list(names)}
    return BenchReport(curves=tuple(curves), scorer_name=scorer_name, skipped=tuple(skipped),
                       seconds=time.perf_counter() - started, meta=meta)

