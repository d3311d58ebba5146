"""Multiple-choice knapsack with tool-call group constraints.

An agent's context is a list of ``n`` entries. Each entry has up to four
options, one column each in this fixed order: ``FULL=0``, ``TRIM=1``,
``STUB=2``, ``DROP=3``. Option ``o`` of entry ``i`` costs ``costs[i, o]``
tokens (a non-negative integer) and is worth ``values[i, o]`` (a
non-negative float). ``DROP`` always costs 0 and is worth 0. ``allowed[i, o]``
says whether the option may be chosen at all (a pinned entry allows only
``FULL``; an entry with no trimmed form disallows ``TRIM``).

The solvers pick one option per entry so that the total value is maximal and
the total cost is at most ``budget``, subject to the *group constraint* of
tool calls: ``parent[i] = p >= 0`` means entry ``i`` is a tool result that
answers the call made by assistant entry ``p``, and then::

    choices[i] == DROP  <=>  choices[p] == DROP

so a kept (or trimmed, or stubbed) result needs its call kept, a kept call
needs every result at least as a stub, and a dropped call drops its results.
Parents come before their children (``p < i``) and have no parent themselves
(groups are one level deep); the children of one parent need not be
contiguous.

Everything here is a pure function over numpy arrays; inputs are never
mutated.

* :func:`solve_exact` -- dynamic programming over the budget. Exact when
  ``n * (budget + 1) <= max_cells``; otherwise costs are scaled down (rounded
  up, budget rounded down, so the answer is always feasible), the scaled
  answer is topped up greedily, and the better of it and :func:`solve_greedy`
  is returned.
* :func:`solve_greedy` -- start from the cheapest assignment and apply the
  upgrade with the best value gained per extra token that still fits;
  ``O(n log n)``.
* :func:`solve` -- picks one of the above (or the trivial answer when the
  most valuable assignment already fits).
* :func:`brute_force` -- enumerates every assignment; a reference for tests.

Ties are broken deterministically: among equally valuable answers the exact
solver returns one of least cost, and between options of equal cost and value
the lower column index wins.
"""

from __future__ import annotations

import heapq
import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from salience.errors import ParameterError, ParameterTypeError, SalienceError

__all__ = [
    "DROP",
    "FULL",
    "METHODS",
    "STUB",
    "TRIM",
    "InfeasibleError",
    "Solution",
    "brute_force",
    "solve",
    "solve_exact",
    "solve_greedy",
]

FULL, TRIM, STUB, DROP = 0, 1, 2, 3
N_OPTIONS = 4
METHODS: tuple[str, ...] = ("auto", "exact", "greedy")
#: ``solve(method="auto")`` switches to the greedy solver above this many entries.
GREEDY_ABOVE = 20_000
#: :func:`brute_force` refuses to enumerate more assignments than this.
BRUTE_FORCE_LIMIT = 1 << 20

_OPTION_NAMES = ("FULL", "TRIM", "STUB", "DROP")
_NON_DROP = np.array([True, True, True, False])
_INT64_MAX = np.iinfo(np.int64).max

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
class Solution:
    """One option per entry, with its total cost and value.

    Attributes:
        choices: ``(n,)`` int8 array (read-only), the option column chosen for
            each entry, in the original entry order.
        cost: total token cost of the choices (always ``<= budget``).
        value: total value of the choices.
        exact: True when the answer is provably optimal (unscaled DP,
            trivial case, or brute force).
        method: ``"dp"``, ``"dp-scaled"``, ``"greedy"``, ``"trivial"`` or
            ``"brute-force"``.
    """

    choices: np.ndarray
    cost: int
    value: float
    exact: bool
    method: str


# --------------------------------------------------------------------------
# Validation and problem set-up
# --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Unit:
    """A root entry (``parent == -1``) and its children, processed together."""

    root: int
    children: tuple[int, ...]
    keep_ok: bool  # every member has a non-DROP option allowed
    drop_ok: bool  # every member allows DROP

    @property
    def members(self) -> tuple[int, ...]:
        return (self.root, *self.children)


@dataclass(frozen=True, slots=True)
class _Problem:
    costs: np.ndarray  # (n, 4) int64
    values: np.ndarray  # (n, 4) float64
    allowed: np.ndarray  # (n, 4) bool
    parent: np.ndarray  # (n,) int64
    budget: int
    units: tuple[_Unit, ...] = field(repr=False)

    @property
    def n(self) -> int:
        return int(self.costs.shape[0])


def _describe(a: np.ndarray) -> str:
    return f"shape {a.shape}, dtype {a.dtype}"


def _as_matrix(x: ArrayLike, name: str, n: int | None) -> np.ndarray:
    try:
        a = np.asarray(x)
    except Exception as exc:  # ragged lists and the like
        raise ParameterError(f"{name} must be an array of shape (n, 4) (got {type(x).__name__}: {exc})") from exc
    want = "(n, 4)" if n is None else f"({n}, 4)"
    if a.ndim != 2 or a.shape[1] != N_OPTIONS or (n is not None and a.shape[0] != n):
        raise ParameterError(f"{name} must have shape {want} (got {a.shape})")
    return a


def _as_int(x: Any, name: str, *, minimum: int) -> int:
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


def _prepare(
    costs: ArrayLike,
    values: ArrayLike,
    budget: Any,
    allowed: ArrayLike | None,
    parent: ArrayLike | None,
) -> _Problem:
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

    b = _as_int(budget, "budget", minimum=0)

    children: dict[int, list[int]] = {}
    for i, p in enumerate(par.tolist()):
        if p == -1:
            continue
        if not 0 <= p < i:
            raise ParameterError(f"parent[{i}] must be -1 or the index of an earlier entry 0 <= p < {i} (got {p})")
        if par[p] != -1:
            raise ParameterError(
                f"parent[{i}] = {p} points at an entry with parent {int(par[p])}; tool groups must be one level deep"
            )
        children.setdefault(p, []).append(i)

    non_drop_ok = (al & _NON_DROP).any(axis=1)
    units: list[_Unit] = []
    for r in np.flatnonzero(par == -1).tolist():
        kids = tuple(children.get(r, ()))
        members = [r, *kids]
        keep_ok = bool(non_drop_ok[members].all())
        drop_ok = bool(al[members, DROP].all())
        if not keep_ok and not drop_ok:
            raise InfeasibleError(
                f"infeasible: tool group of entry {r} with results {list(kids)} can be neither kept "
                "(every member needs a non-DROP option allowed) nor dropped (every member must allow DROP)"
            )
        units.append(_Unit(r, kids, keep_ok, drop_ok))
    return _Problem(c, v, al, par, b, tuple(units))


# --------------------------------------------------------------------------
# Helpers shared by the solvers
# --------------------------------------------------------------------------


def _cheapest(costs: np.ndarray, values: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Per row, the allowed column of least cost (then most value, then lowest index); -1 if none."""
    cm = np.where(mask, costs, _INT64_MAX)
    cmin = cm.min(axis=1)
    tie = mask & (costs == cmin[:, None])
    out = np.where(tie, values, -np.inf).argmax(axis=1)
    out[~mask.any(axis=1)] = -1
    return out


def _richest(costs: np.ndarray, values: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Per row, the allowed column of most value (then least cost, then lowest index); -1 if none."""
    vm = np.where(mask, values, -np.inf)
    vmax = vm.max(axis=1)
    tie = mask & (values == vmax[:, None])
    out = np.where(tie, costs, _INT64_MAX).argmin(axis=1)
    out[~mask.any(axis=1)] = -1
    return out


def _min_cost_choices(prob: _Problem, costs: np.ndarray) -> np.ndarray:
    """The cheapest feasible assignment: groups dropped when allowed, else cheapest options."""
    ch = _cheapest(costs, prob.values, prob.allowed)
    nd = _cheapest(costs, prob.values, prob.allowed & _NON_DROP)
    for u in prob.units:
        if not u.children:
            continue
        members = list(u.members)
        ch[members] = DROP if u.drop_ok else nd[members]
    return ch.astype(np.int8)


def _max_value_choices(prob: _Problem) -> np.ndarray:
    """The most valuable feasible assignment, ignoring the budget (least cost among ties)."""
    ch = _richest(prob.costs, prob.values, prob.allowed)
    nd = _richest(prob.costs, prob.values, prob.allowed & _NON_DROP)
    for u in prob.units:
        if not u.children:
            continue
        members = list(u.members)
        kept_value = float(prob.values[members, nd[members]].sum()) if u.keep_ok else -1.0
        ch[members] = nd[members] if u.keep_ok and (not u.drop_ok or kept_value > 0) else DROP
    return ch.astype(np.int8)


def _total(matrix: np.ndarray, choices: np.ndarray) -> Any:
    return matrix[np.arange(choices.shape[0]), choices].sum()


def _make_solution(prob: _Problem, choices: np.ndarray, *, exact: bool, method: str) -> Solution:
    ch = np.ascontiguousarray(choices, dtype=np.int8)
    ch.setflags(write=False)
    return Solution(
        choices=ch,
        cost=int(_total(prob.costs, ch)),
        value=float(_total(prob.values, ch)),
        exact=exact,
        method=method,
    )


def _check_budget(prob: _Problem) -> np.ndarray:
    """Return the cheapest assignment, or raise InfeasibleError if it exceeds the budget."""
    start = _min_cost_choices(prob, prob.costs)
    min_cost = int(_total(prob.costs, start))
    if min_cost > prob.budget:
        raise InfeasibleError(
            f"infeasible: the cheapest allowed assignment costs {min_cost} tokens but the budget is {prob.budget}",
            min_cost=min_cost,
            budget=prob.budget,
        )
    return start


def _pareto(cost_row: np.ndarray, value_row: np.ndarray, mask: np.ndarray) -> list[int]:
    """Allowed options that are not dominated, by increasing cost."""
    opts = sorted(np.flatnonzero(mask).tolist(), key=lambda o: (cost_row[o], -value_row[o], o))
    out: list[int] = []
    best = -math.inf
    for o in opts:
        if value_row[o] > best:
            out.append(o)
            best = value_row[o]
    return out


# --------------------------------------------------------------------------
# Exact dynamic programme
# --------------------------------------------------------------------------


def _apply(
    dp: np.ndarray, cost_row: np.ndarray, value_row: np.ndarray, opts: list[int], cap: int
) -> tuple[np.ndarray, np.ndarray | int]:
    """One DP stage: ``new[c] = max_o dp[c - cost_o] + value_o`` over ``opts``.

    ``dp[c]`` is the best value at total cost ``<= c`` (``-inf`` when none).
    Returns the new table and the argmax option per capacity (an int8 array,
    or a plain int when only one option is possible). ``opts`` must be sorted
    by cost; ties go to the earlier (cheaper) option.
    """
    opts = [o for o in opts if cost_row[o] <= cap]
    if len(opts) == 1:
        o = opts[0]
        c, v = int(cost_row[o]), float(value_row[o])
        new = np.full(cap + 1, -np.inf)
        np.add(dp[: cap + 1 - c], v, out=new[c:])
        return new, o
    new = np.full(cap + 1, -np.inf)
    arg = np.full(cap + 1, -1, dtype=np.int8)
    for o in opts:
        c, v = int(cost_row[o]), float(value_row[o])
        cand = dp[: cap + 1 - c] + v
        seg = new[c:]
        better = cand > seg
        np.copyto(seg, cand, where=better)
        arg[c:][better] = o
    return new, arg


def _dp(prob: _Problem, costs: np.ndarray, cap: int) -> np.ndarray | None:
    """Exact DP over capacities ``0..cap`` with the given (possibly scaled) costs.

    Returns the choices of a best assignment of least cost, or None when no
    assignment fits.
    """
    values, allowed = prob.values, prob.allowed
    nd_mask = allowed & _NON_DROP
    dp = np.zeros(cap + 1)
    # Each record: (root, opts-arg for root, children, child args, kept flag).
    records: list[tuple[_Unit, np.ndarray | int | None, list[np.ndarray | int], np.ndarray | bool]] = []
    for u in prob.units:
        r = u.root
        if not u.children:
            new, arg = _apply(dp, costs[r], values[r], _pareto(costs[r], values[r], allowed[r]), cap)
            records.append((u, arg, [], True))
            dp = new
            continue
        if u.keep_ok:
            kept, root_arg = _apply(dp, costs[r], values[r], _pareto(costs[r], values[r], nd_mask[r]), cap)
            child_args: list[np.ndarray | int] = []
            for ch in u.children:
                kept, a = _apply(kept, costs[ch], values[ch], _pareto(costs[ch], values[ch], nd_mask[ch]), cap)
                child_args.append(a)
            if u.drop_ok:
                flag: np.ndarray | bool = kept > dp  # ties: dropping is never costlier
                dp = np.where(flag, kept, dp)
            else:
                flag = True
                dp = kept
            records.append((u, root_arg, child_args, flag))
        else:
            records.append((u, None, [], False))
    if not np.isfinite(dp[cap]):
        return None
    c = int(np.argmax(dp >= dp[cap]))  # least capacity reaching the optimum
    choices = np.full(prob.n, DROP, dtype=np.int8)
    for u, root_arg, child_args, flag in reversed(records):
        kept_here = flag if isinstance(flag, bool) else bool(flag[c])
        if not kept_here:
            continue  # whole group dropped; cost unchanged
        for ch, a in zip(reversed(u.children), reversed(child_args)):
            o = a if isinstance(a, int) else int(a[c])
            choices[ch] = o
            c -= int(costs[ch, o])
        assert root_arg is not None
        o = root_arg if isinstance(root_arg, int) else int(root_arg[c])
        choices[u.root] = o
        c -= int(costs[u.root, o])
    assert c >= 0
    return choices


# --------------------------------------------------------------------------
# Greedy
# --------------------------------------------------------------------------


def _greedy_fill(prob: _Problem, start: np.ndarray) -> np.ndarray:
    """Improve a feasible assignment by best-ratio upgrades that fit the budget.

    Entries outside groups, and members of kept groups, may move to any option
    (kept members: any non-DROP option) of higher value. A dropped group may be
    turned on as a bundle: every member at its cheapest non-DROP option, or
    every member at its most valuable one. The candidate with the highest
    value gained per extra token (then the largest gain, then the lowest
    index) is applied first; one that no longer fits is recomputed against the
    remaining budget.
    """
    n = prob.n
    cost = prob.costs.tolist()
    val = prob.values.tolist()
    ch = start.astype(np.int64).tolist()
    remaining = prob.budget - int(_total(prob.costs, start))
    masks_all = prob.allowed.tolist()
    masks_nd = (prob.allowed & _NON_DROP).tolist()
    in_group = np.zeros(n, dtype=bool)
    for u in prob.units:
        if u.children:
            in_group[list(u.members)] = True
    in_group_l = in_group.tolist()
    cheap_nd = _cheapest(prob.costs, prob.values, prob.allowed & _NON_DROP).tolist()
    rich_nd = _richest(prob.costs, prob.values, prob.allowed & _NON_DROP).tolist()
    version = [0] * n
    heap: list[tuple[float, float, int, int, int, int]] = []
    ENTRY, BUNDLE = 0, 1

    def push_entry(i: int) -> None:
        o = ch[i]
        c0, v0 = cost[i][o], val[i][o]
        mask = masks_nd[i] if in_group_l[i] else masks_all[i]
        best: tuple[float, float, int] | None = None
        for t in range(N_OPTIONS):
            if not mask[t]:
                continue
            gain = val[i][t] - v0
            extra = cost[i][t] - c0
            if gain <= 0 or extra > remaining:
                continue
            key = (-(gain / extra) if extra > 0 else -math.inf, -gain, t)
            if best is None or key < best:
                best = key
        if best is not None:
            heapq.heappush(heap, (best[0], best[1], ENTRY, i, best[2], version[i]))

    bundles: dict[int, tuple[list[int], list[list[int]], list[int], list[float]]] = {}
    for u in prob.units:
        if not u.children:
            push_entry(u.root)
        elif ch[u.root] != DROP:
            for m in u.members:
                push_entry(m)
        elif u.keep_ok:
            members = list(u.members)
            picks = [[cheap_nd[m] for m in members], [rich_nd[m] for m in members]]
            bcost = [sum(cost[m][o] for m, o in zip(members, p)) for p in picks]
            bval = [math.fsum(val[m][o] for m, o in zip(members, p)) for p in picks]
            bundles[u.root] = (members, picks, bcost, bval)
            for k in range(2):
                if bval[k] > 0 and bcost[k] <= remaining:
                    ratio = -(bval[k] / bcost[k]) if bcost[k] > 0 else -math.inf
                    heapq.heappush(heap, (ratio, -bval[k], BUNDLE, u.root, k, 0))

    while heap:
        _, _, kind, i, t, ver = heapq.heappop(heap)
        if ver != version[i]:
            continue
        if kind == ENTRY:
            extra = cost[i][t] - cost[i][ch[i]]
            if extra > remaining:
                push_entry(i)  # recompute against what is left
                continue
            ch[i] = t
            remaining -= extra
            version[i] += 1
            push_entry(i)
        else:
            members, picks, bcost, _ = bundles[i]
            if bcost[t] > remaining:
                continue
            remaining -= bcost[t]
            version[i] += 1  # invalidates the other bundle of this group
            for m, o in zip(members, picks[t]):
                ch[m] = o
            for m in members:
                push_entry(m)
    return np.asarray(ch, dtype=np.int8)


# --------------------------------------------------------------------------
# Public solvers
# --------------------------------------------------------------------------


def solve_greedy(
    costs: ArrayLike,
    values: ArrayLike,
    budget: int,
    *,
    allowed: ArrayLike | None = None,
    parent: ArrayLike | None = None,
) -> Solution:
    """Fast heuristic: cheapest assignment, then best value-per-token upgrades.

    Always feasible (cost <= budget, group constraints and ``allowed``
    respected); ``exact`` is False and ``method`` is ``"greedy"``. Runs in
    ``O(n log n)``.

    Raises:
        ParameterError: malformed inputs (the message names the argument).
        InfeasibleError: even the cheapest allowed assignment exceeds ``budget``.
    """
    return _solve_greedy(_prepare(costs, values, budget, allowed, parent))


def _solve_greedy(prob: _Problem) -> Solution:
    start = _check_budget(prob)
    return _make_solution(prob, _greedy_fill(prob, start), exact=False, method="greedy")


def solve_exact(
    costs: ArrayLike,
    values: ArrayLike,
    budget: int,
    *,
    allowed: ArrayLike | None = None,
    parent: ArrayLike | None = None,
    max_cells: int = 20_000_000,
) -> Solution:
    """Dynamic programme over the budget; optimal unless it has to scale costs.

    The effective budget is ``min(budget, sum of each entry's largest allowed
    cost)``. When ``n * (effective budget + 1) <= max_cells`` the DP is exact
    (``exact=True``, ``method="dp"``) and the answer is one of least cost among
    the optimal ones. Otherwise costs are divided by
    ``s = ceil(n * (budget + 1) / max_cells)`` rounding up (budget rounding
    down, so the true cost still fits), the DP answer is topped up greedily with
    the tokens left over, and the better of it (``method="dp-scaled"``) and
    :func:`solve_greedy` (``method="greedy"``) is returned, ``exact=False``.
    Memory is about ``max_cells`` bytes plus one byte per capacity per group.

    Raises:
        ParameterError: malformed inputs (the message names the argument).
        InfeasibleError: even the cheapest allowed assignment exceeds ``budget``.
    """
    prob = _prepare(costs, values, budget, allowed, parent)
    return _solve_exact(prob, _as_int(max_cells, "max_cells", minimum=1))


def _solve_exact(prob: _Problem, cells_limit: int) -> Solution:
    start = _check_budget(prob)
    upper = int(np.where(prob.allowed, prob.costs, 0).max(axis=1).sum()) if prob.n else 0
    cap = min(prob.budget, upper)
    cells = prob.n * (cap + 1)
    if cells <= cells_limit:
        choices = _dp(prob, prob.costs, cap)
        assert choices is not None  # the budget check guarantees a fitting assignment
        return _make_solution(prob, choices, exact=True, method="dp")

    scale = -(-cells // cells_limit)
    scaled_costs = -(-prob.costs // scale)
    scaled_cap = cap // scale
    greedy = _make_solution(prob, _greedy_fill(prob, start), exact=False, method="greedy")
    scaled_min = int(_total(scaled_costs, _min_cost_choices(prob, scaled_costs)))
    if scaled_min > scaled_cap:
        return greedy  # rounding made the scaled problem infeasible
    choices = _dp(prob, scaled_costs, scaled_cap)
    if choices is None:
        return greedy
    scaled = _make_solution(prob, _greedy_fill(prob, choices), exact=False, method="dp-scaled")
    return scaled if scaled.value >= greedy.value else greedy


def solve(
    costs: ArrayLike,
    values: ArrayLike,
    budget: int,
    *,
    allowed: ArrayLike | None = None,
    parent: ArrayLike | None = None,
    method: str = "auto",
    max_cells: int = 20_000_000,
) -> Solution:
    """Choose one option per entry maximising value within ``budget``.

    ``method``:
        * ``"auto"`` -- if the most valuable feasible assignment fits, return it
          (``method="trivial"``, exact); else for more than 20,000 entries use
          :func:`solve_greedy`, otherwise :func:`solve_exact`.
        * ``"exact"`` -- :func:`solve_exact`.
        * ``"greedy"`` -- :func:`solve_greedy`.

    Raises:
        ParameterError: malformed inputs or an unknown ``method``.
        InfeasibleError: even the cheapest allowed assignment exceeds ``budget``.
    """
    if method not in METHODS:
        raise ParameterError(f"method must be one of {', '.join(repr(m) for m in METHODS)} (got {method!r})")
    if method == "exact":
        return solve_exact(costs, values, budget, allowed=allowed, parent=parent, max_cells=max_cells)
    if method == "greedy":
        return solve_greedy(costs, values, budget, allowed=allowed, parent=parent)
    prob = _prepare(costs, values, budget, allowed, parent)
    cells_limit = _as_int(max_cells, "max_cells", minimum=1)
    best = _max_value_choices(prob)
    if int(_total(prob.costs, best)) <= prob.budget:
        return _make_solution(prob, best, exact=True, method="trivial")
    if prob.n > GREEDY_ABOVE:
        return _solve_greedy(prob)
    return _solve_exact(prob, cells_limit)


def brute_force(
    costs: ArrayLike,
    values: ArrayLike,
    budget: int,
    *,
    allowed: ArrayLike | None = None,
    parent: ArrayLike | None = None,
) -> Solution:
    """Enumerate every allowed assignment; a reference solver for tests.

    Returns a most valuable feasible assignment, of least cost among those,
    first in lexicographic order among those (``exact=True``,
    ``method="brute-force"``). Refuses (ParameterError) more than
    ``BRUTE_FORCE_LIMIT`` assignments, i.e. roughly ``n > 10``.

    Raises:
        ParameterError: malformed inputs or too many assignments.
        InfeasibleError: no allowed assignment fits the budget.
    """
    prob = _prepare(costs, values, budget, allowed, parent)
    n = prob.n
    opts: Sequence[np.ndarray] = [np.flatnonzero(prob.allowed[i]) for i in range(n)]
    total = math.prod(len(o) for o in opts)
    if total > BRUTE_FORCE_LIMIT:
        raise ParameterError(f"brute_force enumerates at most {BRUTE_FORCE_LIMIT} assignments (got {total} for n={n})")
    if n == 0:
        combos = np.zeros((1, 0), dtype=np.int64)
    else:
        grids = np.meshgrid(*opts, indexing="ij")
        combos = np.stack([g.ravel() for g in grids], axis=1)
    rows = np.arange(n)
    cost = prob.costs[rows, combos].sum(axis=1)
    value = prob.values[rows, combos].sum(axis=1)
    ok = np.ones(combos.shape[0], dtype=bool)
    for i in np.flatnonzero(prob.parent >= 0).tolist():
        p = int(prob.parent[i])
        ok &= (combos[:, i] == DROP) == (combos[:, p] == DROP)
    fits = ok & (cost <= prob.budget)
    if not fits.any():
        min_cost = int(cost[ok].min())
        raise InfeasibleError(
            f"infeasible: the cheapest allowed assignment costs {min_cost} tokens but the budget is {prob.budget}",
            min_cost=min_cost,
            budget=prob.budget,
        )
    idx = np.flatnonzero(fits)
    order = np.lexsort((idx, cost[idx], -value[idx]))
    return _make_solution(prob, combos[idx[order[0]]], exact=True, method="brute-force")
