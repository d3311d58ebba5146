"""What the independent benchmark measured (issue #14): recall under one definition
(:class:`Recall`), per-transcript counts (:class:`TranscriptCounts`), every figure of one
method at one budget (:class:`MethodResult`), and a paired bootstrap interval on one
method minus another (:func:`paired_bootstrap`, :class:`PairedDifference`).

:mod:`salience.bench.independent` runs the benchmark and re-exports these names.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from salience.errors import ParameterError

__all__ = ["MethodResult", "PairedDifference", "Recall", "TranscriptCounts", "paired_bootstrap"]


@dataclass(frozen=True, slots=True)
class Recall:
    """Recall of one method at one budget under one definition.

    ``seen`` of ``refs`` references were visible over ``steps`` steps; ``micro`` pools
    them (``seen / refs``), ``macro`` averages the per-step recalls. ``nan`` where
    there is no step.
    """

    seen: int = 0
    refs: int = 0
    steps: int = 0
    macro_sum: float = 0.0

    @property
    def micro(self) -> float:
        return self.seen / self.refs if self.refs else math.nan

    @property
    def macro(self) -> float:
        return self.macro_sum / self.steps if self.steps else math.nan

    def add(self, seen: int, refs: int) -> Recall:
        """This recall with one more step of ``refs`` references (``seen`` visible)."""
        if refs <= 0:
            return self
        return Recall(self.seen + seen, self.refs + refs, self.steps + 1, self.macro_sum + seen / refs)

    def to_dict(self) -> dict[str, Any]:
        return {"micro": json_float(self.micro), "macro": json_float(self.macro), "seen": self.seen,
                "refs": self.refs, "steps": self.steps}


def json_float(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


@dataclass(frozen=True, slots=True)
class TranscriptCounts:
    """One method's references under one definition, per transcript (in the order of
    :attr:`IndependentReport.transcript_ids`): ``seen`` of ``refs`` visible, summed over
    the transcript's measured steps (0 and 0 where it has none)."""

    seen: tuple[int, ...] = ()
    refs: tuple[int, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"seen": list(self.seen), "refs": list(self.refs)}


@dataclass(frozen=True, slots=True)
class PairedDifference:
    """One method's micro recall minus another's on the same references, with a percentile
    bootstrap interval over transcripts (:func:`paired_bootstrap`). ``low`` and ``high`` are
    ``nan`` with fewer than two transcripts that have references (no spread to measure)."""

    difference: float
    low: float
    high: float
    confidence: float
    resamples: int
    transcripts: int

    def __str__(self) -> str:
        def signed(x: float) -> str:
            return f"{x:+.3f}" if math.isfinite(x) else "-"

        return f"{signed(self.difference)} [{signed(self.low)}, {signed(self.high)}]"

    def to_dict(self) -> dict[str, Any]:
        return {"difference": json_float(self.difference), "low": json_float(self.low),
                "high": json_float(self.high), "confidence": self.confidence, "resamples": self.resamples,
                "transcripts": self.transcripts}


def paired_bootstrap(seen: Sequence[int], baseline_seen: Sequence[int], refs: Sequence[int], *,
                     confidence: float = 0.95, resamples: int = 2000, seed: int = 0) -> PairedDifference:
    """Micro recall of a method minus a baseline's, and its percentile bootstrap interval.

    Each sequence holds one count per transcript: the references the method saw, those the
    baseline saw, and the references (the same for both: :func:`evaluate` scores every
    method on the same steps). The difference is ``(sum(seen) - sum(baseline_seen)) /
    sum(refs)``. The interval resamples *transcripts* with replacement (the unit of
    independence: the steps of one transcript are correlated), the same ones for both
    methods (paired), and takes the percentiles of the difference over ``resamples``
    resamples (:func:`scipy.stats.bootstrap`, ``method="percentile"``); ``seed`` fixes them.
    Transcripts without references carry no information and are left out.

    >>> d = paired_bootstrap([3, 2, 4, 1], [1, 2, 2, 1], [4, 4, 5, 2])
    >>> round(d.difference, 3), d.transcripts  # (10 - 6) / 15
    (0.267, 4)
    >>> d.low <= d.difference <= d.high
    True
    >>> str(paired_bootstrap([1, 2, 0], [1, 2, 0], [2, 3, 0]))  # the same method: no difference, no spread
    '+0.000 [+0.000, +0.000]'
    """
    s, b, r = (np.asarray(x, dtype=np.int64) for x in (seen, baseline_seen, refs))
    if not s.shape == b.shape == r.shape or s.ndim != 1:
        raise ParameterError(f"paired_bootstrap: seen, baseline_seen and refs must be three sequences of one "
                             f"count per transcript (got lengths {len(s)}, {len(b)}, {len(r)})")
    if (s < 0).any() or (b < 0).any() or (s > r).any() or (b > r).any():
        raise ParameterError("paired_bootstrap: counts must satisfy 0 <= seen <= refs per transcript")
    if not 0.0 < confidence < 1.0 or isinstance(resamples, bool) or not isinstance(resamples, int) or resamples < 1:
        raise ParameterError(f"paired_bootstrap: confidence must be in (0, 1) and resamples a positive int "
                             f"(got {confidence!r}, {resamples!r})")
    keep = r > 0
    s, b, r = s[keep], b[keep], r[keep]
    n = int(keep.sum())
    point = float((s.sum() - b.sum()) / r.sum()) if n else math.nan
    low = high = math.nan
    if n >= 2:
        from scipy.stats import bootstrap

        def diff(s: np.ndarray, b: np.ndarray, r: np.ndarray, axis: int = -1) -> np.ndarray:
            return (s.sum(axis=axis) - b.sum(axis=axis)) / r.sum(axis=axis)

        ci = bootstrap((s, b, r), diff, n_resamples=resamples, vectorized=True, paired=True,
                       confidence_level=confidence, method="percentile", rng=np.random.default_rng(seed))
        low, high = float(ci.confidence_interval.low), float(ci.confidence_interval.high)
    return PairedDifference(point, low, high, confidence, resamples, n)


@dataclass(frozen=True, slots=True)
class MethodResult:
    """Every figure of one method at one budget ``fraction``.

    ``independent``, ``ours``, ``user_given`` and ``code`` are :class:`Recall`\\ s, and so is
    ``user_turns``: of the history's user messages, those whose whole text is still visible
    (what the user asked, not only the values it gave: a list of values is no credit here),
    and ``assistant_words``: of the assistant's own plain messages (neither a call nor a code
    action: what it told the user, asked or concluded), those still whole;
    ``actions_kept`` / ``actions_total`` pool the history actions still whole over
    ``action_steps`` steps, and ``fewer_actions`` counts the steps where this method
    kept fewer whole actions than the reference method (the window), ``fewer_actions_second``
    the same against a second reference (the window charged as billed), if any. ``calls`` is how
    many times the selector ran; ``budget_errors`` how many raised
    :class:`~salience.BudgetError`, ``budget_errors_fitting`` how many of those at a
    budget that holds the system messages and the latest message (``fitting`` counts
    such calls), ``budget_errors_billed`` how many at a budget that holds them as the
    default :class:`~salience.TokenCounter` bills them (what the compactor's contract
    promises: its overhead per message and per call, and the call a latest tool result
    answers), ``empty_fitting`` how many returned an empty list at a budget that holds them
    in text tokens (no answer either: providers refuse an empty list), ``over_budget`` how
    many returned more tokens than the budget, ``invalid`` how many broke tool pairing (:func:`tool_pairing_errors`)
    where the input did not. ``seconds`` is the time spent inside the selector.
    ``independent_by_transcript`` and ``ours_by_transcript`` split ``independent`` and
    ``ours`` by transcript (:class:`TranscriptCounts`), for :func:`paired_bootstrap`.
    ``fewer_references`` counts the steps where this method showed fewer independent references
    than the reference method (the window) at the same step and budget, and
    ``fewer_references_lost`` how many it showed fewer there in all; ``fewer_ours`` and
    ``fewer_ours_lost`` the same by our definition: a pooled recall above the window's can
    still hide steps where the window did better, which these count (``more_references`` and
    ``more_ours``: the steps where this method showed more).
    """

    method: str
    fraction: float
    independent: Recall = field(default_factory=Recall)
    ours: Recall = field(default_factory=Recall)
    user_given: Recall = field(default_factory=Recall)
    code: Recall = field(default_factory=Recall)
    user_turns: Recall = field(default_factory=Recall)
    assistant_words: Recall = field(default_factory=Recall)
    actions_kept: int = 0
    actions_total: int = 0
    action_steps: int = 0
    fewer_actions: int = 0
    fewer_actions_second: int = 0
    calls: int = 0
    budget_errors: int = 0
    fitting: int = 0
    budget_errors_fitting: int = 0
    budget_errors_billed: int = 0
    empty_fitting: int = 0
    over_budget: int = 0
    invalid: int = 0
    seconds: float = 0.0
    independent_by_transcript: TranscriptCounts = field(default_factory=TranscriptCounts)
    ours_by_transcript: TranscriptCounts = field(default_factory=TranscriptCounts)
    fewer_references: int = 0
    fewer_references_lost: int = 0
    fewer_ours: int = 0
    fewer_ours_lost: int = 0
    more_references: int = 0
    more_ours: int = 0

    @property
    def actions_share(self) -> float:
        return self.actions_kept / self.actions_total if self.actions_total else math.nan

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": self.method, "fraction": self.fraction,
            "independent": self.independent.to_dict(), "ours": self.ours.to_dict(),
            "user_given": self.user_given.to_dict(), "code": self.code.to_dict(),
            "user_turns": self.user_turns.to_dict(), "assistant_words": self.assistant_words.to_dict(),
            "actions": {"kept": self.actions_kept, "total": self.actions_total,
                        "share": json_float(self.actions_share), "steps": self.action_steps,
                        "fewer_than_reference": self.fewer_actions,
                        "fewer_than_second": self.fewer_actions_second},
            "calls": self.calls, "budget_errors": self.budget_errors, "fitting": self.fitting,
            "budget_errors_fitting": self.budget_errors_fitting, "budget_errors_billed": self.budget_errors_billed,
            "empty_fitting": self.empty_fitting,
            "over_budget": self.over_budget,
            "invalid": self.invalid, "seconds": round(self.seconds, 3),
            "by_transcript": {"independent": self.independent_by_transcript.to_dict(),
                              "ours": self.ours_by_transcript.to_dict()},
            "fewer_than_reference": {
                "independent": {"steps": self.fewer_references, "references": self.fewer_references_lost,
                                "more_steps": self.more_references},
                "ours": {"steps": self.fewer_ours, "references": self.fewer_ours_lost, "more_steps": self.more_ours}},
        }
