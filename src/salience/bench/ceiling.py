"""The ceiling of whole-message selection (issue #14): how many of a step's references
the best choice of whole messages keeps in sight, knowing the references beforehand.

A target such as "sliding window + 0.10" is only worth chasing where a selection can
reach it. :func:`best_whole_messages` answers that for one step exactly, as a 0-1 integer
program (:func:`scipy.optimize.milp`, HiGHS): pick whole non-system messages that fit
beside the system messages, keep every tool call with its results and every result with
its call (what a provider accepts), and see as many references as possible, a reference
being seen when it is a substring of a picked message's text (:func:`message_text`).
:func:`ceilings` does it over the steps :func:`salience.bench.independent.evaluate`
measures, for each definition of references and each way of counting:

* ``billed``: each message costs its text plus what the default counter adds per
  message and per call (what :class:`salience.Compactor` counts by default); ``text``:
  its text only (what the baselines are counted by);
* ``latest``: the latest message must be kept (with the call it answers), as a compactor
  must; without it the ceiling may drop it.

The ceiling is of *whole* messages: a compactor that trims, stubs or lists values
(:meth:`salience.selector.run.Run.digest`) can see more than it, so it bounds the
selection of whole messages, not every selection. It uses hindsight no selector has.

>>> history = [
...     {"role": "system", "content": "Be brief."},
...     {"role": "user", "content": "Book with code ZX81 for Ada."},
...     {"role": "assistant", "content": "Sure, one moment while I check everything for you."},
...     {"role": "user", "content": "thanks"},
... ]
>>> best_whole_messages(history, ("ZX81", "Ada"), budget=12)  # the window keeps only "thanks"
(1,)
>>> best_whole_messages(history, ("ZX81", "Ada"), budget=12, keep_latest=True)
(1, 3)
>>> best_whole_messages(history, ("ZX81", "Ada"), budget=12, billed=True, keep_latest=True)  # +3 a message
(3,)
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from salience.bench.references import Message, history_budget, message_cost, message_text, visible
from salience.bench.results import Recall
from salience.errors import ParameterError
from salience.tokens import CounterLike, as_counter

if TYPE_CHECKING:
    from salience.transcript import Transcript

__all__ = ["DEFINITIONS", "VARIANTS", "Ceiling", "best_whole_messages", "ceilings", "message_cost"]

#: The ways of counting :func:`ceilings` measures: (name, billed, latest kept).
VARIANTS: tuple[tuple[str, bool, bool], ...] = (
    ("billed, latest kept", True, True),
    ("billed", True, False),
    ("text, latest kept", False, True),
    ("text", False, False),
)
#: The definitions of references :func:`ceilings` measures (``evaluate``'s names).
DEFINITIONS: tuple[str, ...] = ("independent", "ours", "code")


def best_whole_messages(history: Sequence[Message], refs: Iterable[str], budget: int, *,
                        counter: CounterLike = None, billed: bool = False, keep_latest: bool = False,
                        casefold: bool = False, pairing: bool = True) -> tuple[int, ...]:
    """Indices of the non-system messages of ``history`` that, whole and beside every
    system message, fit ``budget`` and keep the most of ``refs`` in sight (fewest tokens
    among equals); ``()`` when no message fits. A tool call and its results go together
    (a result whose call is not in ``history`` may go alone); ``keep_latest``: the
    latest message must be among them (``()`` when it cannot be). ``casefold``: a
    reference is seen case-insensitively (our definition's way). ``pairing=False`` lets
    calls and results go apart (a looser bound, valid for no provider). See the module's
    docstring."""
    from scipy.optimize import Bounds, LinearConstraint, milp

    tc = as_counter(counter)
    refs = tuple(dict.fromkeys(refs))
    idx = [i for i, m in enumerate(history) if m.get("role") != "system"]
    if not idx:
        return ()
    room = budget - sum(message_cost(m, tc, billed) for m in history if m.get("role") == "system")
    cost = np.array([message_cost(history[i], tc, billed) for i in idx], dtype=float)
    n, r = len(idx), len(refs)
    texts = [message_text(history[i]) for i in idx]
    if casefold:
        texts = [t.casefold() for t in texts]
    rows: list[np.ndarray] = [np.concatenate([cost, np.zeros(r)])]
    lower: list[float] = [-np.inf]
    upper: list[float] = [float(room)]
    for k, ref in enumerate(refs):  # seen only through a picked message that holds it
        row = np.zeros(n + r)
        row[n + k] = 1.0
        needle = ref.casefold() if casefold else ref
        row[[j for j, t in enumerate(texts) if needle in t]] = -1.0
        rows.append(row)
        lower.append(-np.inf)
        upper.append(0.0)
    at = {i: j for j, i in enumerate(idx)}
    calls = {c.get("id"): at[i] for i in idx for c in (history[i].get("tool_calls") or []) if c.get("id")}
    for i in idx if pairing else ():  # a call and each of its results: both or neither
        m = history[i]
        if m.get("role") == "tool" and m.get("tool_call_id") in calls:
            row = np.zeros(n + r)
            row[at[i]], row[calls[m["tool_call_id"]]] = 1.0, -1.0
            rows.append(row)
            lower.append(0.0)
            upper.append(0.0)
    if keep_latest:
        if history[-1].get("role") == "system":
            raise ParameterError("best_whole_messages: keep_latest needs a latest message that is not a system one")
        row = np.zeros(n + r)
        row[n - 1] = 1.0
        rows.append(row)
        lower.append(1.0)
        upper.append(1.0)
    # Most references first; among equals, fewest tokens (a tie-break worth less than one reference).
    objective = np.concatenate([cost / (cost.sum() + 1.0), -np.ones(r)])
    res = milp(objective, constraints=LinearConstraint(np.vstack(rows), lower, upper),
               integrality=np.ones(n + r), bounds=Bounds(0, 1))
    if res.x is None:  # infeasible: the latest (or nothing) does not fit
        return ()
    return tuple(idx[j] for j in range(n) if res.x[j] > 0.5)


def _seen(history: Sequence[Message], picked: Sequence[int], refs: Sequence[str], casefold: bool) -> int:
    kept = [history[i] for i in picked]
    if not casefold:
        return visible(refs, kept)
    text = "\n".join(message_text(m) for m in kept).casefold()
    return sum(ref.casefold() in text for ref in refs)


@dataclass(frozen=True, slots=True)
class Ceiling:
    """:func:`ceilings`' answer: ``recall[(definition, variant, fraction)]``."""

    recall: Mapping[tuple[str, str, float], Recall]
    steps: int

    def metrics(self, prefix: str = "") -> dict[str, float]:
        """Flat MLflow-safe metrics, ``<prefix><definition>_micro_<pct>pct_ceiling_<variant>``
        (``independent_micro_10pct_ceiling_billed_latest_kept``), ``nan`` left out."""
        from salience.bench.independent import _pct, _safe

        return {f"{prefix}{d}_micro_{_pct(f)}pct_ceiling_{_safe(v)}": rec.micro
                for (d, v, f), rec in self.recall.items() if math.isfinite(rec.micro)}

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"steps": self.steps}
        for (definition, variant, fraction), rec in self.recall.items():
            out.setdefault(definition, {}).setdefault(variant, {})[f"{fraction:g}"] = rec.to_dict()
        return out


def ceilings(transcripts: Sequence[Transcript], fractions: Iterable[float], *, max_steps: int | None = 6,
             definitions: Sequence[str] = DEFINITIONS, counter: CounterLike = None) -> Ceiling:
    """The ceiling of whole-message selection at every step :func:`evaluate
    <salience.bench.independent.evaluate>` measures (same ``max_steps``, same budgets:
    :func:`history_budget` with ``counter``, cl100k by default), for each of
    ``definitions`` and each of :data:`VARIANTS`. Deterministic."""
    from salience.bench.independent import _check_fractions, _plan

    unknown = [d for d in definitions if d not in DEFINITIONS]
    if unknown:
        raise ParameterError(f"ceilings: definitions must be among {list(DEFINITIONS)} (got {unknown})")
    fr = _check_fractions(fractions)
    tc = as_counter(counter)
    recall = {(d, v, f): Recall() for d in definitions for v, _, _ in VARIANTS for f in fr}
    steps = 0
    for plan in _plan(list(transcripts), max_steps, tc):
        for step in plan:
            steps += 1
            for d in definitions:
                refs = tuple(step.independent.refs if d == "independent" else step.ours if d == "ours"
                             else step.code.refs)
                if not refs:
                    continue
                fold = d == "ours"
                for f in fr:
                    budget = history_budget(step.history, f, tc)
                    for name, billed, latest in VARIANTS:
                        picked = best_whole_messages(step.history, refs, budget, counter=tc, billed=billed,
                                                     keep_latest=latest, casefold=fold)
                        key = (d, name, f)
                        recall[key] = recall[key].add(_seen(step.history, picked, refs, fold), len(refs))
    return Ceiling(recall=recall, steps=steps)
