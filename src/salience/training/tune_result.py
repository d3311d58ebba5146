"""What :func:`salience.training.tune.tune_profile` returns: each candidate's scores and the
chosen profile (:class:`TuneResult`: the profile file, MLflow metrics, rich tables), and the
Compactor defaults the tuning starts from (:data:`DEFAULT_PARAMS`).

:mod:`salience.training.tune` re-exports :data:`DEFAULT_PARAMS`, :class:`CandidateScore`
and :class:`TuneResult`.
"""

from __future__ import annotations

import inspect
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import numpy as np

from salience._version import __version__

if TYPE_CHECKING:
    from rich.table import Table

__all__ = ["DEFAULT_PARAMS", "TUNED", "CandidateScore", "TuneResult", "frozen_params", "plain_params"]

#: Compactor parameters a profile written by tune sets.
TUNED = ("pin_last", "pin_last_user", "critical", "max_entry_tokens", "trim_keep", "stub_values", "retain", "digest")


def _compactor_defaults() -> dict[str, Any]:
    from salience.selector.compactor import Compactor
    from salience.selector.params import DEFAULT_RETAIN

    sig = inspect.signature(Compactor.__init__)
    out = {name: sig.parameters[name].default for name in TUNED}
    out["retain"] = dict(DEFAULT_RETAIN) if out["retain"] is None else dict(out["retain"])
    return out


#: The Compactor's own defaults for the tuned parameters (the "before" candidate).
DEFAULT_PARAMS: Mapping[str, Any] = MappingProxyType(_compactor_defaults())


def frozen_params(params: Mapping[str, Any]) -> Mapping[str, Any]:
    """Read-only copy of candidate parameters (nested mappings read-only too)."""
    return MappingProxyType({k: (MappingProxyType(dict(v)) if isinstance(v, Mapping) else v)
                             for k, v in params.items()})


def plain_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """JSON-ready copy of candidate parameters (nested mappings as dicts)."""
    return {k: (dict(v) if isinstance(v, Mapping) else v) for k, v in params.items()}


@dataclass(frozen=True, slots=True)
class CandidateScore:
    """One candidate's recall on every fold.

    ``name``: ``"default"``, ``"bench"`` or ``"trial <i>"``. ``params``: the Compactor
    parameters. ``folds``: recall per fold. ``over_budget``: per fold, the steps or
    queries where its pins alone exceeded the budget (scored 0). ``units``: per fold,
    how many steps or queries were scored.
    """

    name: str
    params: Mapping[str, Any]
    folds: tuple[float, ...]
    over_budget: tuple[int, ...]
    units: tuple[int, ...]

    @property
    def mean(self) -> float:
        """Mean recall over the folds."""
        return float(np.mean(self.folds)) if self.folds else math.nan

    @property
    def std(self) -> float:
        """Standard deviation of the fold recalls (``ddof=1``; 0 for a single fold)."""
        return float(np.std(self.folds, ddof=1)) if len(self.folds) > 1 else 0.0

    @property
    def over_budget_share(self) -> float:
        """Share of the scored steps or queries that were over budget."""
        total = sum(self.units)
        return sum(self.over_budget) / total if total else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "params": plain_params(self.params), "folds": [round(f, 6) for f in self.folds],
                "mean": round(self.mean, 6), "std": round(self.std, 6), "over_budget": list(self.over_budget),
                "units": list(self.units)}


@dataclass(frozen=True, slots=True)
class TuneResult:
    """What :func:`tune_profile` found.

    ``params``: the chosen Compactor parameters (JSON-ready). ``before``: the defaults'
    scores; ``after``: the chosen candidate's. ``heldout``: per fold, the recall of the
    candidate chosen on the other folds (``nan`` with a single fold), and
    ``heldout_choice`` its name. ``candidates``: every candidate in search order.
    ``policy``: the phase policy the candidates were scored with, by domain name, when
    all the transcripts share one domain (each transcript's own domain decided it, as the
    Compactor's default does); :meth:`profile` writes it so that message lists without a
    domain get the same policy.
    """

    domain: str | None
    metric: str
    target: float
    params: Mapping[str, Any]
    before: CandidateScore
    after: CandidateScore
    heldout: tuple[float, ...]
    heldout_choice: tuple[str, ...]
    candidates: tuple[CandidateScore, ...]
    seed: int = 0
    max_steps: int | None = None
    transcripts: int = 0
    seconds: float = 0.0
    policy: str | None = None

    @property
    def trials(self) -> int:
        """How many candidates were scored (the defaults included)."""
        return len(self.candidates)

    @property
    def folds(self) -> int:
        return len(self.before.folds)

    @property
    def heldout_after(self) -> float:
        """Nested-CV recall of the tuning procedure (``nan`` with a single fold)."""
        finite = [h for h in self.heldout if math.isfinite(h)]
        return float(np.mean(finite)) if finite else math.nan

    @property
    def heldout_before(self) -> float:
        """The defaults' recall on the same folds (nothing is chosen for them)."""
        return self.before.mean

    @property
    def changed(self) -> dict[str, tuple[Any, Any]]:
        """``{parameter: (default, tuned)}`` for the parameters the tuning changed."""
        return {k: (plain_params(DEFAULT_PARAMS)[k], v) for k, v in plain_params(self.params).items()
                if plain_params(DEFAULT_PARAMS).get(k) != v}

    def profile(self, *, scorer: str | None = None) -> dict[str, Any]:
        """The profile file's content: ``Compactor(profile=...)`` reads its ``"compactor"`` key."""
        return {
            "domain": self.domain,
            "compactor": {**plain_params(self.params), **({"policy": self.policy} if self.policy else {})},
            "target": self.target,
            "metric": f"{self.metric}_recall",
            "before": round(self.before.mean, 6),
            "after": round(self.after.mean, 6),
            "before_std": round(self.before.std, 6),
            "after_std": round(self.after.std, 6),
            "heldout_before": _round(self.heldout_before),
            "heldout_after": _round(self.heldout_after),
            "folds": self.folds,
            "trials": self.trials,
            "seed": self.seed,
            "max_steps": self.max_steps,
            "scorer": scorer if scorer is not None else "unknown",
            "salience_version": __version__,
        }

    def write(self, path: str | Path, *, scorer: str | None = None) -> Path:
        """Write :meth:`profile` as JSON to ``path`` (folders created); returns the path."""
        path = Path(path)
        if path.parent != Path():
            path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.profile(scorer=scorer), indent=2) + "\n", encoding="utf-8")
        return path

    def metrics(self) -> dict[str, float]:
        """MLflow-safe metrics: recall before and after (mean, std, held-out, per fold)."""
        out = {
            "recall_before": self.before.mean,
            "recall_after": self.after.mean,
            "recall_before_std": self.before.std,
            "recall_after_std": self.after.std,
            "heldout_recall_before": self.heldout_before,
            "heldout_recall_after": self.heldout_after,
            "over_budget_share_before": self.before.over_budget_share,
            "over_budget_share_after": self.after.over_budget_share,
            "folds": float(self.folds),
            "trials": float(self.trials),
            "units": float(sum(self.before.units)),
            "seconds": self.seconds,
        }
        for i, (b, a) in enumerate(zip(self.before.folds, self.after.folds), 1):
            out[f"recall_before_fold{i}"] = b
            out[f"recall_after_fold{i}"] = a
        return {k: float(v) for k, v in out.items() if math.isfinite(v)}

    def table(self) -> Table:
        """Before (defaults) and after (tuned): recall per fold, mean ± std, held-out, over budget."""
        from rich.table import Table

        unit = "steps" if self.metric == "reference" else "queries"
        sizes = ", ".join(f"{n:,}" for n in self.before.units)
        caption = (f"{unit} per fold: {sizes}; {self.trials} candidates; held-out: each fold scored with the "
                   f"candidate chosen on the other folds; over budget: pins alone over the budget (scored 0)")
        title = (f"{self.metric} recall at {_pct(self.target)} of the tokens"
                 f"{f', domain {self.domain}' if self.domain else ''}")
        table = Table(title=title, caption=caption, title_justify="left", caption_justify="left")
        table.add_column("params", no_wrap=True)
        for i in range(1, self.folds + 1):
            table.add_column(f"fold {i}", justify="right", no_wrap=True)
        table.add_column("mean ± std", justify="right", no_wrap=True)
        table.add_column("held-out", justify="right", no_wrap=True)
        table.add_column("over budget", justify="right", no_wrap=True)
        rows = [("default", self.before, self.heldout_before), ("tuned", self.after, self.heldout_after)]
        for label, c, held in rows:
            table.add_row(label, *(f"{f:.3f}" for f in c.folds), f"{c.mean:.3f} ± {c.std:.3f}",
                          "-" if not math.isfinite(held) else f"{held:.3f}", _pct(c.over_budget_share),
                          style="bold" if label == "tuned" else None)
        return table

    def params_table(self) -> Table:
        """Each tuned parameter: default and tuned value (changed ones bold)."""
        from rich.table import Table

        table = Table(title="Compactor parameters", title_justify="left")
        for col in ("parameter", "default", "tuned"):
            table.add_column(col)
        default = plain_params(DEFAULT_PARAMS)
        for key, value in plain_params(self.params).items():
            same = default.get(key) == value
            table.add_row(key, _show(default.get(key)), _show(value), style=None if same else "bold")
        return table


def _round(x: float) -> float | None:
    return round(x, 6) if math.isfinite(x) else None


def _pct(x: float) -> str:
    text = f"{100 * x:.1f}".rstrip("0").rstrip(".")
    return f"{text}%"


def _show(value: Any) -> str:
    if isinstance(value, Mapping):
        return ", ".join(f"{k} {v}" for k, v in value.items())
    return "None" if value is None else str(value)
