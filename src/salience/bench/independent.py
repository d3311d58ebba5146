"""Benchmarks that cannot flatter us (issue #14): an independent reference definition,
code support for coding agents, real baselines over OpenAI message lists, and a runner.

* :mod:`salience.bench.references`: a message's text and tokens, the budget of a step,
  the independent references (:func:`independent_references`), code support
  (:func:`code_references`, :func:`actions_kept`) and tool pairing
  (:func:`tool_pairing_errors`): the definitions, stated there in full;
* :mod:`salience.bench.message_baselines`: the real baselines, each running as itself
  on the message list (:func:`sliding_window`, :func:`observation_masking`,
  :func:`keep_last_tool_results`, :func:`value_stub_masking`, by name
  :func:`baseline_selectors`; :func:`compactor_selector` wraps a Compactor);
* :mod:`salience.bench.results`: what one method measured at one budget
  (:class:`MethodResult`, :class:`Recall`, :class:`TranscriptCounts`) and a paired
  bootstrap over transcripts (:func:`paired_bootstrap`, :class:`PairedDifference`);
* here: the report (:class:`IndependentReport`) and the runner (:func:`evaluate`).

This module re-exports every public name of the other three, so
``from salience.bench.independent import sliding_window`` keeps working.

Everything here works on OpenAI chat messages (``transcript.to_openai()``), the
format a user hands to :class:`salience.Compactor`, and shares no code with the
scorer's training labels or with ``salience bench``'s value extractor: the point is
a second, equally reasonable measure, so that a figure does not hold only because
the benchmark and the labels agree with each other.

**The runner** (:func:`evaluate`) replays transcripts, calls every selector at every
measured step and fraction, and returns an :class:`IndependentReport`: per method
and fraction, recall by both definitions (ours: :func:`salience.scorer.labels.step_references`,
as ``salience bench`` counts it), user-given recall, code support, actions kept
(against the window), ``BudgetError`` and over-budget counts; and per transcript, the
references seen of both definitions, from which :meth:`IndependentReport.difference` puts a
paired bootstrap interval on one method minus another (:func:`paired_bootstrap`).

>>> history = [
...     {"role": "system", "content": "You are an airline agent."},
...     {"role": "user", "content": "Cancel reservation ZFA04Y for Mia Li."},
...     {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function",
...         "function": {"name": "get_reservation", "arguments": '{"id": "ZFA04Y"}'}}]},
...     {"role": "tool", "tool_call_id": "c1", "content": '{"id": "ZFA04Y", "total": 1250}'},
...     {"role": "assistant", "content": "", "tool_calls": [{"id": "c2", "type": "function",
...         "function": {"name": "cancel", "arguments": '{"id": "ZFA04Y", "user": "Mia Li", "amount": 1250}'}}]},
... ]
>>> refs = independent_references(history, 4)
>>> refs.refs, refs.user_given
(('ZFA04Y', 'Mia Li', '1250'), ('ZFA04Y', 'Mia Li'))
>>> window = sliding_window(history[:4], history_budget(history[:4], 0.9))
>>> [m["role"] for m in window], visible(refs.refs, window)  # the user's turn, and "Mia Li", fell out
(['system', 'assistant', 'tool'], 2)
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from salience.bench.message_baselines import (
    CLEARED,
    OMITTED,
    Selector,
    anthropic_compactor_selector,
    baseline_selectors,
    compactor_selector,
    keep_last_tool_results,
    observation_masking,
    sliding_window,
    value_stub_masking,
)
from salience.bench.references import (
    MIN_CODE_CHARS,
    CodeStep,
    IndependentStep,
    Message,
    actions,
    actions_kept,
    code_references,
    history_budget,
    independent_references,
    is_action,
    is_observation,
    is_step,
    message_text,
    message_tokens,
    messages_tokens,
    reference_strings,
    tool_pairing_errors,
    visible,
)
from salience.bench.results import (
    MethodResult,
    PairedDifference,
    Recall,
    TranscriptCounts,
    paired_bootstrap,
)
from salience.errors import BudgetError, ParameterError, ParameterKeyError, SalienceError
from salience.tokens import CounterLike, TokenCounter, as_counter

if TYPE_CHECKING:
    from rich.table import Table

    from salience.transcript import Transcript

__all__ = [
    "DEFAULT_FRACTIONS",
    "MIN_CODE_CHARS",
    "OBSERVATIONS",
    "OMITTED",
    "CLEARED",
    "CodeStep",
    "IndependentReport",
    "IndependentStep",
    "MethodResult",
    "PairedDifference",
    "Recall",
    "Selector",
    "TranscriptCounts",
    "actions",
    "actions_kept",
    "anthropic_compactor_selector",
    "baseline_selectors",
    "code_references",
    "compactor_selector",
    "evaluate",
    "history_budget",
    "independent_references",
    "is_action",
    "is_observation",
    "is_step",
    "keep_last_tool_results",
    "message_text",
    "message_tokens",
    "messages_tokens",
    "observation_masking",
    "paired_bootstrap",
    "reference_strings",
    "sliding_window",
    "tool_pairing_errors",
    "value_stub_masking",
    "visible",
]

#: Budget fractions (shares of the non-system tokens, over the system prompt).
DEFAULT_FRACTIONS: tuple[float, ...] = (0.10, 0.25)
#: How :func:`evaluate` hands free-standing observations to the selectors: as ``tool`` messages
#: (the loaders' form) or as the ``user`` turns raw logs carry them as.
OBSERVATIONS: tuple[str, ...] = ("tool", "user")


def _pct(fraction: float) -> str:
    pct = round(100 * fraction, 4)
    return str(int(pct)) if pct == int(pct) else str(pct).replace(".", "p")


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]+", "_", name).strip("_") or "method"


@dataclass(frozen=True, slots=True)
class IndependentReport:
    """What :func:`evaluate` measured: one :class:`MethodResult` per (method, fraction),
    in the order of the selectors given, then of the fractions; ``steps`` counts the
    measured steps; ``meta`` says how (transcripts, ``max_steps``, reference method);
    ``transcript_ids`` orders the per-transcript counts of each result."""

    results: tuple[MethodResult, ...]
    fractions: tuple[float, ...]
    steps: int
    seconds: float = 0.0
    meta: Mapping[str, Any] = field(default_factory=dict)
    transcript_ids: tuple[str, ...] = ()

    @property
    def methods(self) -> list[str]:
        return list(dict.fromkeys(r.method for r in self.results))

    def result(self, method: str, fraction: float) -> MethodResult:
        """The result of ``method`` at ``fraction``; a ``ParameterKeyError`` (a ``KeyError``)
        naming what exists otherwise."""
        for r in self.results:
            if r.method == method and math.isclose(r.fraction, fraction):
                return r
        raise ParameterKeyError(f"no result for method {method!r} at {fraction} (methods: {self.methods}, "
                                f"fractions: {list(self.fractions)})")

    def difference(self, method: str, baseline: str, fraction: float, definition: str = "independent", *,
                   confidence: float = 0.95, resamples: int = 2000, seed: int = 0) -> PairedDifference:
        """``method``'s micro recall minus ``baseline``'s at ``fraction`` under ``definition``
        (``"independent"`` or ``"ours"``), with a paired bootstrap interval over transcripts
        (:func:`paired_bootstrap`)."""
        if definition not in ("independent", "ours"):
            raise ParameterError(f"difference: definition must be 'independent' or 'ours' (got {definition!r})")
        a, b = (getattr(self.result(m, fraction), f"{definition}_by_transcript") for m in (method, baseline))
        if a.refs != b.refs:
            raise SalienceError(f"difference: {method!r} and {baseline!r} were not scored on the same references")
        return paired_bootstrap(a.seen, b.seen, a.refs, confidence=confidence, resamples=resamples, seed=seed)

    def metrics(self, prefix: str = "") -> dict[str, float]:
        """Flat MLflow-safe metrics, ``<prefix><figure>_<pct>pct_<method>``
        (``independent_micro_10pct_window``, ``budget_errors_25pct_salience``), ``nan`` left out."""
        out: dict[str, float] = {}
        for r in self.results:
            tail = f"_{_pct(r.fraction)}pct_{_safe(r.method)}"
            values = {
                "independent_micro": r.independent.micro, "independent_macro": r.independent.macro,
                "ours_micro": r.ours.micro, "ours_macro": r.ours.macro,
                "user_given_micro": r.user_given.micro, "code_micro": r.code.micro, "code_macro": r.code.macro,
                "user_turns_kept": r.user_turns.micro, "assistant_words_kept": r.assistant_words.micro,
                "actions_kept": r.actions_share, "fewer_actions": float(r.fewer_actions),
                "fewer_actions_second": float(r.fewer_actions_second),
                "fewer_references": float(r.fewer_references), "fewer_ours": float(r.fewer_ours),
                "budget_errors": float(r.budget_errors), "budget_errors_fitting": float(r.budget_errors_fitting),
                "over_budget": float(r.over_budget),
            }
            for key, value in values.items():
                if math.isfinite(value):
                    out[f"{prefix}{key}{tail}"] = float(value)
        return out

    def table(self, title: str = "recall by the independent definition (issue #14) and beside it") -> Table:
        """A rich table: one row per method, one column per figure that has references here
        (independent, the share of its steps where fewer were visible than in the reference
        method's output, user-given, ours, code support, actions kept whole, BudgetErrors), each
        cell its values at :attr:`fractions` joined by `` / ``."""
        from rich.table import Table

        figures: list[tuple[str, Callable[[MethodResult], float], bool]] = [
            ("independent", lambda r: r.independent.micro, False),
            ("user-given", lambda r: r.user_given.micro, False),
            ("ours", lambda r: r.ours.micro, False),
            ("code", lambda r: r.code.micro, False),
            ("user turns", lambda r: r.user_turns.micro, False),
            ("assistant's words", lambda r: r.assistant_words.micro, False),
            ("actions kept", lambda r: r.actions_share, False),
            ("BudgetErrors", lambda r: float(r.budget_errors), True),
        ]
        reference = self.meta.get("reference")
        if reference is not None:
            figures.insert(1, (f"steps below {reference}", lambda r: r.fewer_references / r.independent.steps
                               if r.independent.steps else math.nan, False))
        figures = [f for f in figures if f[2] or any(math.isfinite(f[1](r)) for r in self.results)]
        refs = {name: getattr(self.results[0], attr).refs if self.results else 0
                for name, attr in (("independent", "independent"), ("user-given", "user_given"), ("ours", "ours"),
                                   ("code", "code"))}
        table = Table(title=title, title_justify="left", caption_justify="left", caption=(
            "cells: " + " / ".join(f"{_pct(f)}%" for f in self.fractions) + f" of the non-system tokens over the "
            f"system prompt; {self.steps:,} steps; references: "
            + ", ".join(f"{name} {n:,}" for name, n in refs.items() if n)))
        table.add_column("method", no_wrap=True)
        for name, _, _ in figures:
            table.add_column(name, justify="right", no_wrap=True)

        def cell(value: float, count: bool) -> str:
            return "-" if not math.isfinite(value) else f"{value:,.0f}" if count else f"{value:.3f}"

        for method in self.methods:
            rows = [self.result(method, f) for f in self.fractions]
            table.add_row(method, *(" / ".join(cell(get(r), count) for r in rows) for _, get, count in figures))
        return table

    def to_dict(self) -> dict[str, Any]:
        return {"fractions": list(self.fractions), "steps": self.steps, "seconds": round(self.seconds, 2),
                "meta": dict(self.meta), "results": [r.to_dict() for r in self.results],
                "transcript_ids": list(self.transcript_ids)}


# --------------------------------------------------------------------------
# the runner
# --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Plan:
    """One measured step: the history, and the references of each definition there."""

    transcript: str
    position: int  # of the transcript in evaluate's input
    index: int
    history: tuple[Message, ...]
    given: tuple[Message, ...]  # what the selectors are handed: the history, or its observations as user turns
    independent: IndependentStep
    ours: tuple[str, ...]
    code: CodeStep
    actions: tuple[str, ...]  # the text of each acting message of the history
    user_turns: tuple[str, ...]  # the text of each user message of the history
    assistant_words: tuple[str, ...]  # the text of each plain assistant message (not an action) of the history
    floor: int  # tokens of the system messages and the latest message
    floor_billed: int  # the same as billed (the default counter), with the call a latest result answers
    valid_input: bool


def _floor(history: Sequence[Message], counter: CounterLike = None) -> int:
    """Tokens of the system messages and the latest message: the least a valid output holds."""
    tc = as_counter(counter)
    system = [i for i, m in enumerate(history) if m.get("role") == "system"]
    last = [len(history) - 1] if history and len(history) - 1 not in system else []
    return sum(tc.count(message_text(history[i])) for i in system + last)


def _floor_billed(transcript: Transcript, n: int) -> int:
    """What the system entries and the latest of the first ``n`` entries cost as the default
    counter bills them (overheads included), with the call the latest answers if it is a
    tool result: the least a valid output holds as the compactor counts it."""
    tc = as_counter(None)
    entries = transcript.entries[:n]
    parents = transcript.parents()
    keep = {i for i, e in enumerate(entries) if e.role == "system"}
    if n and entries[n - 1].role != "system":
        keep.add(n - 1)
        if parents[n - 1] >= 0:
            keep.add(parents[n - 1])
    return sum(tc.count_entry(entries[i]) for i in keep)


def _spread(items: list[Any], k: int | None) -> list[Any]:
    """At most ``k`` of ``items``, evenly spread (the first and the last included)."""
    if k is None or len(items) <= k:
        return items
    picks = sorted(set(np.linspace(0, len(items) - 1, k).round().astype(int).tolist()))
    return [items[i] for i in picks]


def _ours(transcript: Transcript) -> dict[int, tuple[str, ...]]:
    """Our definition (``salience bench``'s): per assistant step index, the values it uses
    that first appeared in an earlier non-system entry, each once (case-insensitively)."""
    from salience.scorer.labels import step_references

    roles = {e.id: e.role for e in transcript.entries}
    out: dict[int, tuple[str, ...]] = {}
    for sr in step_references(transcript):
        refs: dict[str, str] = {}
        for value, source in sr.refs:
            if roles.get(source) != "system":
                refs.setdefault(value.casefold(), value)
        if refs and sr.step > 0:
            out[sr.step] = tuple(refs.values())
    return out


def _as_user(message: Message) -> Message:
    """A free-standing observation (a ``tool`` message answering no call) as the ``user`` turn that
    raw logs of agents without a tool-call protocol carry it as; any other message as it is."""
    if message.get("role") == "tool" and not message.get("tool_call_id"):
        return {"role": "user", "content": message.get("content") or ""}
    return message


def _plan(transcripts: Sequence[Transcript], max_steps: int | None, counter: TokenCounter,
          observations: str = "tool") -> Iterator[list[_Plan]]:
    for position, t in enumerate(transcripts):
        messages = t.to_openai()
        given = [_as_user(m) for m in messages] if observations == "user" else messages
        if len(messages) != len(t.entries):  # entries and messages must line up for our definition
            raise SalienceError(f"transcript {t.id!r}: to_openai() gave {len(messages)} messages for "
                                f"{len(t.entries)} entries; cannot line up the two definitions")
        texts = [message_text(m) for m in messages]
        ours = _ours(t)
        candidates = []
        for i in range(1, len(messages)):
            if messages[i].get("role") != "assistant":
                continue
            ind = independent_references(messages, i, texts[:i])
            code = code_references(messages, i, texts[:i])
            if ind.refs or code.refs or i in ours:
                candidates.append((i, ind, code))
        # per message, once: an acting one, a user turn, the assistant's plain words (empty text is none)
        acting = actions(messages)
        users = [j for j, m in enumerate(messages) if m.get("role") == "user" and texts[j]]
        acts = set(acting)
        words = [j for j, m in enumerate(messages) if m.get("role") == "assistant" and texts[j] and j not in acts]
        steps = []
        for i, ind, code in _spread(candidates, max_steps):
            history = tuple(messages[:i])
            steps.append(_Plan(transcript=t.id, position=position, index=i, history=history,
                               given=tuple(given[:i]), independent=ind,
                               ours=ours.get(i, ()), code=code, actions=tuple(texts[j] for j in acting if j < i),
                               user_turns=tuple(texts[j] for j in users if j < i),
                               assistant_words=tuple(texts[j] for j in words if j < i),
                               floor=_floor(history, counter), floor_billed=_floor_billed(t, i),
                               valid_input=not tool_pairing_errors(history)))
        yield steps


def _check_fractions(fractions: Iterable[float]) -> tuple[float, ...]:
    if isinstance(fractions, (int, float)):
        fractions = (fractions,)
    out = []
    for f in fractions:
        if isinstance(f, bool) or not isinstance(f, (int, float, np.floating)) or not 0.0 < float(f) <= 1.0:
            raise ParameterError(f"evaluate: each fraction must be a share of the tokens in (0, 1] (got {f!r})")
        out.append(float(f))
    if not out:
        raise ParameterError("evaluate: at least one fraction is needed (got none)")
    return tuple(out)


class _Acc:
    """Mutable totals of one (method, fraction) while :func:`evaluate` runs."""

    __slots__ = ("action_steps", "actions_kept", "actions_total", "budget_errors", "budget_errors_billed",
                 "budget_errors_fitting", "calls",
                 "code", "empty_fitting", "fewer", "fewer_second", "fitting", "independent", "invalid", "ours", "over",
                 "seconds", "user", "user_turns", "assistant_words", "by_transcript", "fewer_refs")

    def __init__(self, transcripts: int) -> None:
        self.independent = self.ours = self.user = self.code = self.user_turns = self.assistant_words = Recall()
        #: definition -> [seen per transcript, refs per transcript]
        self.by_transcript = {d: ([0] * transcripts, [0] * transcripts) for d in ("independent", "ours")}
        self.actions_kept = self.actions_total = self.action_steps = self.fewer = self.fewer_second = 0
        self.calls = self.budget_errors = self.over = self.invalid = self.fitting = self.budget_errors_fitting = 0
        self.empty_fitting = self.budget_errors_billed = 0
        self.seconds = 0.0
        #: definition -> [steps with fewer references than the reference method, references fewer in all,
        #: steps with more]
        self.fewer_refs = {d: [0, 0, 0] for d in ("independent", "ours")}

    def result(self, method: str, fraction: float) -> MethodResult:
        return MethodResult(method=method, fraction=fraction, independent=self.independent, ours=self.ours,
                            user_given=self.user, code=self.code, user_turns=self.user_turns,
                            assistant_words=self.assistant_words,
                            actions_kept=self.actions_kept,
                            actions_total=self.actions_total, action_steps=self.action_steps,
                            fewer_actions=self.fewer, fewer_actions_second=self.fewer_second,
                            calls=self.calls, budget_errors=self.budget_errors,
                            fitting=self.fitting, budget_errors_fitting=self.budget_errors_fitting,
                            budget_errors_billed=self.budget_errors_billed, empty_fitting=self.empty_fitting,
                            over_budget=self.over, invalid=self.invalid, seconds=self.seconds,
                            independent_by_transcript=self._counts("independent"),
                            ours_by_transcript=self._counts("ours"),
                            fewer_references=self.fewer_refs["independent"][0],
                            fewer_references_lost=self.fewer_refs["independent"][1],
                            fewer_ours=self.fewer_refs["ours"][0], fewer_ours_lost=self.fewer_refs["ours"][1],
                            more_references=self.fewer_refs["independent"][2], more_ours=self.fewer_refs["ours"][2])

    def add(self, definition: str, position: int, seen: int, refs: int) -> None:
        counts = self.by_transcript[definition]
        counts[0][position] += seen
        counts[1][position] += refs

    def _counts(self, definition: str) -> TranscriptCounts:
        seen, refs = self.by_transcript[definition]
        return TranscriptCounts(tuple(seen), tuple(refs))


ProgressFn = Callable[[str, int, int], None]


def evaluate(
    transcripts: Sequence[Transcript],
    selectors: Mapping[str, Selector],
    fractions: Iterable[float] = DEFAULT_FRACTIONS,
    *,
    counter: CounterLike = None,
    max_steps: int | None = None,
    reference: str | None = "window",
    second_reference: str | None = None,
    progress: bool | ProgressFn = False,
    description: str = "steps",
    observations: str = "tool",
) -> IndependentReport:
    """Replay ``transcripts`` and measure every selector at every measured step and fraction.

    A transcript's measured steps are its assistant messages (after the first
    message) that have references under at least one definition: independent
    (:func:`independent_references`), ours (the values the step uses that first
    appeared in an earlier non-system entry,
    :func:`salience.scorer.labels.step_references`, as ``salience bench`` counts
    them, visible case-insensitively) or code support (:func:`code_references`);
    ``max_steps`` keeps at most that many per transcript, evenly spread. Each
    definition is scored on its own steps, over one call of the selector per step
    and fraction: ``selector(history, budget)`` with the budget of
    :func:`history_budget`. Actions kept are measured at every measured step whose
    history acts.

    A selector that raises :class:`~salience.BudgetError`, or returns more tokens than
    the budget (:func:`messages_tokens`), scores nothing at that step (every
    reference missed, no action kept) and is counted; BudgetErrors are also counted
    apart where the budget holds the system messages and the latest message (where
    a valid output fits, so a default should not raise). Any other exception
    propagates. ``reference`` names the selector that ``fewer_actions``, ``fewer_references``
    and ``fewer_ours`` compare against, step by step (``None``: no comparison), and
    ``fewer_actions_second`` counts the same against ``second_reference`` (the window charged as
    billed, say). ``progress``: ``True`` shows a rich progress
    bar (on stderr), a callable gets ``(description, done, total)``. Deterministic
    when the selectors are.

    ``observations="user"`` hands the selectors each free-standing observation (a ``tool``
    message that answers no call: MINT's, SWE-agent's older runs') as a ``user`` turn with
    the same content, as the raw logs of agents without a tool-call protocol carry it (the
    loaders of :mod:`salience.datasets` read such turns as observations; a user calling
    ``compact`` on the raw messages does not). Every reference, budget and measure stays
    defined on the transcript's own roles, so the two runs count the same things.
    """
    started = time.perf_counter()
    fr = _check_fractions(fractions)
    if not selectors:
        raise ParameterError("evaluate: at least one selector is needed (got none)")
    if max_steps is not None and (isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1):
        raise ParameterError(f"evaluate: max_steps must be a positive int or None (got {max_steps!r})")
    for ref in (reference, second_reference):
        if ref is not None and ref not in selectors:
            raise ParameterError(f"evaluate: reference {ref!r} is not one of the selectors ({list(selectors)})")
    if second_reference is not None and reference is None:
        raise ParameterError("evaluate: second_reference needs a reference")
    if observations not in OBSERVATIONS:
        raise ParameterError(f"evaluate: observations must be one of {OBSERVATIONS} (got {observations!r})")
    tc: TokenCounter = as_counter(counter)
    transcripts = list(transcripts)
    plan = [s for steps in _plan(transcripts, max_steps, tc, observations) for s in steps]
    acc = {(name, f): _Acc(len(transcripts)) for name in selectors for f in fr}
    report_progress, close = _progress(progress, description, len(plan))
    try:
        for done, step in enumerate(plan, 1):
            for f in fr:
                budget = history_budget(step.history, f, tc)
                kept_actions: dict[str, int] = {}
                shown: dict[str, dict[str, int]] = {"independent": {}, "ours": {}}  # definition -> method -> seen
                for name, select in selectors.items():
                    a = acc[(name, f)]
                    a.calls += 1
                    fits = step.floor <= budget
                    a.fitting += fits
                    t0 = time.perf_counter()
                    out: Sequence[Message] | None
                    try:
                        out = select(step.given, budget)
                    except BudgetError:
                        out = None
                        a.budget_errors += 1
                        a.budget_errors_fitting += fits
                        a.budget_errors_billed += step.floor_billed <= budget
                    a.seconds += time.perf_counter() - t0
                    if out is not None and fits and not out:
                        a.empty_fitting += 1
                    if out is not None and messages_tokens(out, tc) > budget:
                        a.over += 1
                        out = None
                    if out is not None and step.valid_input and tool_pairing_errors(out):
                        a.invalid += 1
                    text = "\n".join(message_text(m) for m in out) if out is not None else ""
                    ind = step.independent
                    if ind.refs:
                        seen = sum(r in text for r in ind.refs)
                        a.independent = a.independent.add(seen, len(ind.refs))
                        a.add("independent", step.position, seen, len(ind.refs))
                        shown["independent"][name] = seen
                    if ind.user_given:
                        a.user = a.user.add(sum(r in text for r in ind.user_given), len(ind.user_given))
                    if step.ours:
                        folded = text.casefold()
                        seen = sum(r.casefold() in folded for r in step.ours)
                        a.ours = a.ours.add(seen, len(step.ours))
                        a.add("ours", step.position, seen, len(step.ours))
                        shown["ours"][name] = seen
                    code = step.code.refs
                    if code:
                        a.code = a.code.add(sum(r in text for r in code), len(code))
                    if step.user_turns:
                        a.user_turns = a.user_turns.add(sum(t in text for t in step.user_turns),
                                                        len(step.user_turns))
                    if step.assistant_words:
                        a.assistant_words = a.assistant_words.add(sum(t in text for t in step.assistant_words),
                                                                  len(step.assistant_words))
                    if step.actions:
                        kept = sum(t in text for t in step.actions)
                        a.actions_kept += kept
                        a.actions_total += len(step.actions)
                        a.action_steps += 1
                        kept_actions[name] = kept
                if reference is not None:
                    for definition, seen_by in shown.items():
                        for name, seen in seen_by.items():
                            short = seen_by[reference] - seen
                            counts = acc[(name, f)].fewer_refs[definition]
                            if short > 0:
                                counts[0] += 1
                                counts[1] += short
                            elif short < 0:
                                counts[2] += 1
                if reference is not None and step.actions:
                    for name, kept in kept_actions.items():
                        if kept < kept_actions[reference]:
                            acc[(name, f)].fewer += 1
                        if second_reference is not None and kept < kept_actions[second_reference]:
                            acc[(name, f)].fewer_second += 1
            report_progress(done)
    finally:
        close()
    results = tuple(acc[(name, f)].result(name, f) for name in selectors for f in fr)
    meta = {"transcripts": len(transcripts), "max_steps": max_steps, "reference": reference,
            "independent_steps": sum(bool(s.independent.refs) for s in plan),
            "ours_steps": sum(bool(s.ours) for s in plan), "code_steps": sum(bool(s.code.refs) for s in plan)}
    return IndependentReport(results=results, fractions=fr, steps=len(plan),
                             seconds=time.perf_counter() - started, meta=meta,
                             transcript_ids=tuple(t.id for t in transcripts))


def _progress(progress: bool | ProgressFn, description: str, total: int) -> tuple[Callable[[int], None],
                                                                                  Callable[[], None]]:
    if callable(progress):
        fn = progress
        fn(description, 0, total)
        return (lambda done: fn(description, done, total)), (lambda: None)
    if not progress:
        return (lambda done: None), (lambda: None)
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                   console=Console(stderr=True), transient=True)
    task = bar.add_task(description, total=total)
    bar.start()
    return (lambda done: bar.update(task, completed=done)), bar.stop
