"""The knapsack's input, checked: costs, values, allowed options and tool groups as arrays.

:func:`prepare` validates what :func:`salience.selector.knapsack.solve` is given (the
message names the argument, the entry and the value) and returns an :class:`Instance`:
private copies of the matrices plus the group structure, worked out with array
operations (no Python loop over the entries). The helpers below are shared by the
solvers (:mod:`salience.selector.knapsack`, :mod:`salience.selector.lp`): the cheapest
and the most valuable assignment, totals, the budget check.

Option columns: ``FULL=0``, ``TRIM=1``, ``STUB=2``, ``DROP=3``; a *unit* is a root
entry (``parent == -1``) with the tool results that answer it (none for a plain entry).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from salience.errors import ParameterError, ParameterTypeError, SalienceError

__all__ = ["DROP", "FULL", "N_OPTIONS", "STUB", "TRIM", "WHOLE_ONLY", "InfeasibleError", "Instance", "Unit", "prepare"]

FULL, TRIM, STUB, DROP = 0, 1, 2, 3
N_OPTIONS = 4
NON_DROP = np.array([True, True, True, False])
#: A row of allowed options with the whole form alone (a pin, an entry held whole); read-only.
WHOLE_ONLY = np.array([True, False, False, False])
WHOLE_ONLY.setflags(write=False)
INT64_MAX = np.iinfo(np.int64).max

ArrayLike = npt.ArrayLike


class InfeasibleError(SalienceError, ValueError):
    """No assignment satisfies the constraints within the budget.

    Raised when even the cheapest allowed assignment costs more than the
    budget (the message gives both numbers; they are also available as
    :attr:`min_cost` and :attr:`budget`), or when a tool group can be neither
    kept nor dropped with the options it allows (then ``min_cost`` is None).
    """

    def __init__(self, message: str, *, min_cost: int | None = None, budget: int | None = None):
        super().__init__(message)
        self.min_cost = min_cost
        self.budget = budget


@dataclass(frozen=True, slots=True)
class Unit:
    """A root entry (``parent == -1``) and its children, processed together."""

    root: int
    children: tuple[int, ...]
    keep_ok: bool  # every member has a non-DROP option allowed
    drop_ok: bool  # every member allows DROP

    @property
    def members(self) -> tuple[int, ...]:
        return (self.root, *self.children)


@dataclass(frozen=True, slots=True)
class Instance:
    """A checked problem. Arrays per entry (``n``) and per unit (``U``, in root order)."""

    costs: np.ndarray  # (n, 4) int64
    values: np.ndarray  # (n, 4) float64
    allowed: np.ndarray  # (n, 4) bool
    parent: np.ndarray  # (n,) int64
    budget: int
    unit_of: np.ndarray = field(repr=False)  # (n,) the unit of each entry
    roots: np.ndarray = field(repr=False)  # (U,) the root entry of each unit
    grouped: np.ndarray = field(repr=False)  # (U,) the unit has children
    keep_ok: np.ndarray = field(repr=False)  # (U,) every member has a non-DROP option
    drop_ok: np.ndarray = field(repr=False)  # (U,) every member allows DROP
    _memo: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def n(self) -> int:
        return int(self.costs.shape[0])

    @property
    def units(self) -> tuple[Unit, ...]:
        """The units as objects (for the dynamic programme and the greedy), built on first use."""
        if "units" not in self._memo:
            kids: list[list[int]] = [[] for _ in range(self.roots.shape[0])]
            for i in np.flatnonzero(self.parent >= 0).tolist():
                kids[int(self.unit_of[i])].append(i)
            self._memo["units"] = tuple(
                Unit(r, tuple(k), bool(a), bool(b))
                for r, k, a, b in zip(self.roots.tolist(), kids, self.keep_ok.tolist(), self.drop_ok.tolist())
            )
        units: tuple[Unit, ...] = self._memo["units"]
        return units


def _as_matrix(x: ArrayLike, name: str, n: int | None) -> np.ndarray:
    try:
        a = np.asarray(x)
    except Exception as exc:  # ragged lists and the like
        raise ParameterError(f"{name} must be an array of shape (n, 4) (got {type(x).__name__}: {exc})") from exc
    want = "(n, 4)" if n is None else f"({n}, 4)"
    if a.ndim != 2 or a.shape[1] != N_OPTIONS or (n is not None and a.shape[0] != n):
        raise ParameterError(f"{name} must have shape {want} (got {a.shape})")
    return a


def as_int(x: Any, name: str, *, minimum: int) -> int:
    """``x`` as an int of at least ``minimum`` (a whole float is accepted, a bool is not)."""
    if isinstance(x, (bool, np.bool_)):
        raise ParameterTypeError(f"{name} must be an integer (got bool {x!r})")
    if isinstance(x, numbers.Integral):
        v = int(x)
    elif isinstance(x, numbers.Real) and math.isfinite(float(x)) and float(x).is_integer():
        v = int(float(x))
    else:
        raise ParameterTypeError(f"{name} must be an integer (got {type(x).__name__} {x!r})")
    if v < minimum:
        raise ParameterError(f"{name} must be >= {minimum} (got {v})")
    return v


def prepare(
    costs: ArrayLike,
    values: ArrayLike,
    budget: Any,
    allowed: ArrayLike | None,
    parent: ArrayLike | None,
) -> Instance:
    """Validate the inputs and return private copies plus the group structure."""
    c = _as_matrix(costs, "costs", None)
    n = c.shape[0]
    if c.dtype.kind in "iu":
        c = c.astype(np.int64, copy=True)
    elif c.dtype.kind == "f":
        if not np.all(np.isfinite(c)) or not np.all(c == np.round(c)):
            raise ParameterError("costs must be whole numbers of tokens (got non-integral or non-finite floats)")
        c = c.astype(np.int64)
    else:
        raise ParameterError(f"costs must be an integer array (got dtype {c.dtype})")
    if (c < 0).any():
        i, o = np.argwhere(c < 0)[0]
        raise ParameterError(f"costs must be non-negative (got costs[{i}, {o}] = {c[i, o]})")

    v = _as_matrix(values, "values", n)
    if v.dtype.kind not in "iuf":
        raise ParameterError(f"values must be a real-valued array (got dtype {v.dtype})")
    v = v.astype(np.float64, copy=True)
    if not np.all(np.isfinite(v)):
        i, o = np.argwhere(~np.isfinite(v))[0]
        raise ParameterError(f"values must be finite (got values[{i}, {o}] = {v[i, o]})")
    if (v < 0).any():
        i, o = np.argwhere(v < 0)[0]
        raise ParameterError(f"values must be non-negative (got values[{i}, {o}] = {v[i, o]})")

    if (c[:, DROP] != 0).any():
        i = int(np.flatnonzero(c[:, DROP] != 0)[0])
        raise ParameterError(f"the DROP column of costs must be 0 (got costs[{i}, {DROP}] = {c[i, DROP]})")
    if (v[:, DROP] != 0).any():
        i = int(np.flatnonzero(v[:, DROP] != 0)[0])
        raise ParameterError(f"the DROP column of values must be 0 (got values[{i}, {DROP}] = {v[i, DROP]})")

    if allowed is None:
        al = np.ones((n, N_OPTIONS), dtype=bool)
    else:
        al = _as_matrix(allowed, "allowed", n)
        if al.dtype != np.bool_:
            raise ParameterError(f"allowed must be a boolean array (got dtype {al.dtype})")
        al = al.copy()
        empty = ~al.any(axis=1)
        if empty.any():
            first = int(np.flatnonzero(empty)[0])
            raise ParameterError(f"allowed must permit at least one option per entry (entry {first} allows none)")

    if parent is None:
        par = np.full(n, -1, dtype=np.int64)
    else:
        par = np.asarray(parent)
        if par.shape != (n,):
            raise ParameterError(f"parent must have shape ({n},) (got {par.shape})")
        if n and par.dtype.kind not in "iu":
            raise ParameterError(f"parent must be an integer array (got dtype {par.dtype})")
        par = par.astype(np.int64, copy=True)

    b = as_int(budget, "budget", minimum=0)

    index = np.arange(n)
    child = par != -1
    bad = child & ~((par >= 0) & (par < index))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ParameterError(f"parent[{i}] must be -1 or the index of an earlier entry 0 <= p < {i} (got {par[i]})")
    deep = child & (par[np.where(child, par, 0)] != -1)
    if deep.any():
        i = int(np.flatnonzero(deep)[0])
        p = int(par[i])
        raise ParameterError(
            f"parent[{i}] = {p} points at an entry with parent {int(par[p])}; tool groups must be one level deep"
        )

    roots = np.flatnonzero(~child)
    rank = np.cumsum(~child) - 1  # unit index of each root
    unit_of = np.where(child, rank[np.where(child, par, 0)], rank) if n else np.zeros(0, dtype=np.int64)
    n_units = roots.shape[0]
    grouped = np.bincount(unit_of[child], minlength=n_units) > 0
    no_keep = ~(al & NON_DROP).any(axis=1)
    keep_ok = np.bincount(unit_of, weights=no_keep, minlength=n_units) == 0
    drop_ok = np.bincount(unit_of, weights=~al[:, DROP], minlength=n_units) == 0
    stuck = ~keep_ok & ~drop_ok
    if stuck.any():
        u = int(np.flatnonzero(stuck)[0])
        kids = np.flatnonzero(child & (unit_of == u)).tolist()
        raise InfeasibleError(
            f"infeasible: tool group of entry {int(roots[u])} with results {kids} can be neither kept "
            "(every member needs a non-DROP option allowed) nor dropped (every member must allow DROP)"
        )
    return Instance(c, v, al, par, b, unit_of.astype(np.int64), roots, grouped, keep_ok, drop_ok)


# --------------------------------------------------------------------------
# Helpers shared by the solvers
# --------------------------------------------------------------------------


def cheapest(costs: np.ndarray, values: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Per row, the allowed column of least cost (then most value, then lowest index); -1 if none."""
    cm = np.where(mask, costs, INT64_MAX)
    cmin = cm.min(axis=1)
    tie = mask & (costs == cmin[:, None])
    out = np.where(tie, values, -np.inf).argmax(axis=1)
    out[~mask.any(axis=1)] = -1
    return out


def richest(costs: np.ndarray, values: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Per row, the allowed column of most value (then least cost, then lowest index); -1 if none."""
    vm = np.where(mask, values, -np.inf)
    vmax = vm.max(axis=1)
    tie = mask & (values == vmax[:, None])
    out = np.where(tie, costs, INT64_MAX).argmin(axis=1)
    out[~mask.any(axis=1)] = -1
    return out


def min_cost_choices(prob: Instance, costs: np.ndarray) -> np.ndarray:
    """The cheapest feasible assignment: groups dropped when allowed, else cheapest options."""
    ch = cheapest(costs, prob.values, prob.allowed)
    nd = cheapest(costs, prob.values, prob.allowed & NON_DROP)
    in_group = prob.grouped[prob.unit_of]
    drop = prob.drop_ok[prob.unit_of]
    ch = np.where(in_group, np.where(drop, DROP, nd), ch)
    return ch.astype(np.int8)


def max_value_choices(prob: Instance) -> np.ndarray:
    """The most valuable feasible assignment, ignoring the budget (least cost among ties)."""
    ch = richest(prob.costs, prob.values, prob.allowed)
    nd = richest(prob.costs, prob.values, prob.allowed & NON_DROP)
    u = prob.unit_of
    kept_value = np.bincount(u, weights=prob.values[np.arange(prob.n), np.maximum(nd, 0)],
                             minlength=prob.roots.shape[0])
    keep = prob.keep_ok & (~prob.drop_ok | (kept_value > 0))
    ch = np.where(prob.grouped[u], np.where(keep[u], nd, DROP), ch)
    return ch.astype(np.int8)


def total(matrix: np.ndarray, choices: np.ndarray) -> Any:
    return matrix[np.arange(choices.shape[0]), choices].sum()


def check_budget(prob: Instance) -> np.ndarray:
    """Return the cheapest assignment, or raise InfeasibleError if it exceeds the budget."""
    start = min_cost_choices(prob, prob.costs)
    least = int(total(prob.costs, start))
    if least > prob.budget:
        raise InfeasibleError(
            f"infeasible: the cheapest allowed assignment costs {least} tokens but the budget is {prob.budget}",
            min_cost=least,
            budget=prob.budget,
        )
    return start


def pareto(cost_row: np.ndarray, value_row: np.ndarray, mask: np.ndarray) -> list[int]:
    """Allowed options that are not dominated, by increasing cost."""
    opts = sorted(np.flatnonzero(mask).tolist(), key=lambda o: (cost_row[o], -value_row[o], o))
    out: list[int] = []
    best = -math.inf
    for o in opts:
        if value_row[o] > best:
            out.append(o)
            best = value_row[o]
    return out
