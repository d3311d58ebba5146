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

* :func:`solve_lp` -- the LP relaxation over each entry's options (their upper
  convex hull; a tool group as one unit), taken by value per token, rounded and
  filled (:mod:`salience.selector.lp`); when its gap to the Lagrangian bound is above
  a tolerance, the units that could still do better (the *core*) are solved exactly
  by the DP and the bound tightened. ``O(n log n)`` array operations.
* :func:`solve_exact` -- dynamic programming over the budget. Exact when
  ``n * (budget + 1) <= max_cells``; otherwise costs are scaled down (rounded
  up, budget rounded down, so the answer is always feasible), the scaled
  answer is topped up greedily, and the better of it and :func:`solve_greedy`
  is returned.
* :func:`solve_greedy` -- start from the cheapest assignment and apply the
  upgrade with the best value gained per extra token that still fits;
  ``O(n log n)``.
* :func:`solve` -- the default: the trivial answer when the most valuable
  assignment already fits, the exact DP when it is small, else :func:`solve_lp`,
  with :func:`solve_exact` only when the certified gap stays above ``tol``.
* :func:`brute_force` -- enumerates every assignment; a reference for tests.

Every :class:`Solution` states an upper bound on the optimum (``bound``) and so its
certified ``gap``. Input checks and the shared set-up live in
:mod:`salience.selector.problem`.

Ties are broken deterministically: among equally valuable answers the exact
solver returns one of least cost, and between options of equal cost and value
the lower column index wins.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from salience.errors import ParameterError
from salience.selector import lp
from salience.selector.problem import (
    DROP,
    FULL,
    INT64_MAX,
    N_OPTIONS,
    NON_DROP,
    STUB,
    TRIM,
    InfeasibleError,
    Instance,
    Unit,
    as_int,
    cheapest,
    check_budget,
    max_value_choices,
    min_cost_choices,
    pareto,
    prepare,
    richest,
    total,
)

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
    "solve_lp",
]

METHODS: tuple[str, ...] = ("auto", "exact", "greedy", "lp")
#: ``solve(method="auto")`` runs the exact DP outright when it has at most this many cells.
EXACT_CELLS = 200_000
#: The certified gap (a share of the bound) above which ``solve`` tries harder.
GAP_TOLERANCE = 1e-4
#: Cells of the DP that :func:`solve_lp` may spend on the core.
CORE_CELLS = 2_000_000
#: :func:`brute_force` refuses to enumerate more assignments than this.
BRUTE_FORCE_LIMIT = 1 << 20

ArrayLike = npt.ArrayLike



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
        method: ``"lp"``, ``"lp-core"``, ``"dp"``, ``"dp-scaled"``, ``"greedy"``,
            ``"trivial"`` or ``"brute-force"``.
        bound: an upper bound on the value of every feasible assignment (the
            value itself when ``exact``), so the answer is within :attr:`gap` of
            the optimum.
    """

    choices: np.ndarray
    cost: int
    value: float
    exact: bool
    method: str
    bound: float = math.inf

    @property
    def gap(self) -> float:
        """How far below the optimum the value can be, as a share of the bound:
        ``value >= (1 - gap) * optimum``. 0 when ``exact``."""
        if self.exact or self.bound <= self.value:
            return 0.0
        return (self.bound - self.value) / self.bound


def _make_solution(
    prob: Instance, choices: np.ndarray, *, exact: bool, method: str, bound: float | None = None
) -> Solution:
    ch = np.ascontiguousarray(choices, dtype=np.int8)
    ch.setflags(write=False)
    value = float(total(prob.values, ch))
    if exact:
        bound = value
    elif bound is None:
        bound = _lp_bound(prob)
    return Solution(
        choices=ch,
        cost=int(total(prob.costs, ch)),
        value=value,
        exact=exact,
        method=method,
        bound=max(float(bound), value),
    )


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


def _dp(prob: Instance, costs: np.ndarray, cap: int) -> np.ndarray | None:
    """Exact DP over capacities ``0..cap`` with the given (possibly scaled) costs.

    Returns the choices of a best assignment of least cost, or None when no
    assignment fits.
    """
    values, allowed = prob.values, prob.allowed
    nd_mask = allowed & NON_DROP
    dp = np.zeros(cap + 1)
    # Each record: (root, opts-arg for root, children, child args, kept flag).
    records: list[tuple[Unit, np.ndarray | int | None, list[np.ndarray | int], np.ndarray | bool]] = []
    for u in prob.units:
        r = u.root
        if not u.children:
            new, arg = _apply(dp, costs[r], values[r], pareto(costs[r], values[r], allowed[r]), cap)
            records.append((u, arg, [], True))
            dp = new
            continue
        if u.keep_ok:
            kept, root_arg = _apply(dp, costs[r], values[r], pareto(costs[r], values[r], nd_mask[r]), cap)
            child_args: list[np.ndarray | int] = []
            for ch in u.children:
                kept, a = _apply(kept, costs[ch], values[ch], pareto(costs[ch], values[ch], nd_mask[ch]), cap)
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


def _greedy_fill(prob: Instance, start: np.ndarray) -> np.ndarray:
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
    remaining = prob.budget - int(total(prob.costs, start))
    masks_all = prob.allowed.tolist()
    masks_nd = (prob.allowed & NON_DROP).tolist()
    in_group = np.zeros(n, dtype=bool)
    for u in prob.units:
        if u.children:
            in_group[list(u.members)] = True
    in_group_l = in_group.tolist()
    cheap_nd = cheapest(prob.costs, prob.values, prob.allowed & NON_DROP).tolist()
    rich_nd = richest(prob.costs, prob.values, prob.allowed & NON_DROP).tolist()
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
# LP relaxation, a core solved exactly, and the certified gap
# --------------------------------------------------------------------------


def _lp_bound(prob: Instance) -> float:
    """The LP optimum over the hulls, stated as a Lagrangian bound (valid whatever the hulls)."""
    h = lp.hulls(prob)
    if h.base_cost > prob.budget:
        return math.inf
    rel = lp.relax(h, prob.budget, prob.roots.shape[0])
    return lp.bound(prob, rel.lam)


def _core(prob: Instance, prices: lp.Prices, gap: float, core_cells: int) -> tuple[np.ndarray | None, float]:
    """Solve exactly the units that could still beat the answer in hand, the rest fixed.

    A unit whose every other state costs a penalty of ``gap`` or more (at the margin's
    price) is at its best state in any better answer, and so is an option whose penalty
    is that large; the other units (as many as fit ``core_cells`` cells of the DP, least
    penalty first) are solved by the DP over their remaining options, the costs of a unit
    that may not be dropped counted above its cheapest option. Returns the assignment
    (None if none fits) and the least penalty of a unit left out (inf when none is).
    """
    U, rows = prob.roots.shape[0], np.arange(prob.n)
    unit_of, best = prob.unit_of, prices.best
    allowed = prob.allowed & (prices.option_pen < gap)
    allowed[rows, best] = True
    in_group = prob.grouped[unit_of]
    drop = np.bincount(unit_of, weights=~allowed[:, DROP], minlength=U) == 0  # the unit may still be dropped
    allowed[:, DROP] &= drop[unit_of]
    allowed[in_group & ~drop[unit_of], DROP] = False
    masked = np.where(allowed, prob.costs, INT64_MAX)
    shift = np.where(drop[unit_of], 0, masked.min(axis=1))
    top = np.where(allowed, prob.costs, 0).max(axis=1) - shift
    best_cost = np.bincount(unit_of, weights=prob.costs[rows, best], minlength=U)
    unit_shift = np.bincount(unit_of, weights=shift, minlength=U)
    span = np.bincount(unit_of, weights=top, minlength=U)
    size = np.bincount(unit_of, minlength=U)
    by_pen = np.argsort(prices.unit_pen, kind="stable")
    want = int(np.searchsorted(prices.unit_pen[by_pen], gap, side="left"))
    room = prob.budget - best_cost.sum() + np.cumsum(best_cost[by_pen] - unit_shift[by_pen])
    cells = np.cumsum(size[by_pen]) * (np.clip(np.minimum(room, np.cumsum(span[by_pen])), 0, None) + 1)
    k = min(want, int(np.searchsorted(cells, core_cells, side="right")))
    outside = float(prices.unit_pen[by_pen[k]]) if k < U else math.inf
    if k == 0:
        return (best if best_cost.sum() <= prob.budget else None), outside
    core = np.zeros(U, dtype=bool)
    core[by_pen[:k]] = True
    members = np.flatnonzero(core[unit_of])
    cap = int(round(room[k - 1]))
    if cap < 0:
        return None, outside
    par = prob.parent[members]
    par = np.where(par >= 0, np.searchsorted(members, np.maximum(par, 0)), -1)
    sub = prepare(prob.costs[members], prob.values[members], cap, allowed[members], par)
    costs = np.where(allowed[members], prob.costs[members] - shift[members, None], 0)
    if int(total(costs, min_cost_choices(sub, costs))) > cap:
        return None, outside
    choices = _dp(sub, costs, min(cap, int(top[members].sum())))
    if choices is None:
        return None, outside
    out = best.copy()
    out[members] = choices
    return out, outside


def _solve_lp(prob: Instance, tol: float, core_cells: int) -> Solution:
    """LP relaxation, rounded and filled; if its gap is above ``tol``, the core solved exactly."""
    h = lp.hulls(prob)
    if h.base_cost > prob.budget:
        check_budget(prob)  # raises, with the message every solver gives
    rel = lp.relax(h, prob.budget, prob.roots.shape[0])
    choices = lp.decode(prob, h, lp.fill(h, rel))
    value = float(total(prob.values, choices))
    if rel.critical == h.unit.shape[0]:  # every hull step fits: the most valuable assignment
        return _make_solution(prob, choices, exact=True, method="lp")
    upper = lp.bound(prob, rel.lam)  # the penalties' bound, without them (needed only past tol)
    if upper - value <= tol * upper:
        return _make_solution(prob, choices, exact=upper <= value, method="lp", bound=upper)
    prices = lp.penalties(prob, rel.lam)
    core, outside = _core(prob, prices, upper - value, core_cells)
    restricted = -math.inf
    method = "lp"
    if core is not None:
        restricted = float(total(prob.values, core))
        if restricted > value:
            choices, method = core, "lp-core"
    # a better answer either keeps every unit left out at its best state (then the core
    # found it) or moves one of them (then it is below upper - outside); an option
    # taken out of the core was at most worth the answer in hand
    upper = min(upper, max(restricted, upper - outside, value))
    value = max(value, restricted)
    return _make_solution(prob, choices, exact=upper <= value, method=method, bound=upper)


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
    return _solve_greedy(prepare(costs, values, budget, allowed, parent))


def _solve_greedy(prob: Instance) -> Solution:
    start = check_budget(prob)
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
    prob = prepare(costs, values, budget, allowed, parent)
    return _solve_exact(prob, as_int(max_cells, "max_cells", minimum=1))


def _solve_exact(prob: Instance, cells_limit: int) -> Solution:
    start = check_budget(prob)
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
    scaled_min = int(total(scaled_costs, min_cost_choices(prob, scaled_costs)))
    if scaled_min > scaled_cap:
        return greedy  # rounding made the scaled problem infeasible
    choices = _dp(prob, scaled_costs, scaled_cap)
    if choices is None:
        return greedy
    scaled = _make_solution(prob, _greedy_fill(prob, choices), exact=False, method="dp-scaled")
    return scaled if scaled.value >= greedy.value else greedy


def solve_lp(
    costs: ArrayLike,
    values: ArrayLike,
    budget: int,
    *,
    allowed: ArrayLike | None = None,
    parent: ArrayLike | None = None,
    tol: float = GAP_TOLERANCE,
    core_cells: int = CORE_CELLS,
) -> Solution:
    """LP relaxation over each entry's hull, rounded, with a certified gap (:mod:`salience.selector.lp`).

    The relaxation's steps are taken by value per token while they fit; the rounded
    answer is filled with the later steps that still fit. Its gap to the Lagrangian
    bound at the margin's price is checked: above ``tol`` (a share of the bound), the
    units that could still improve on it (those whose other states cost less than the
    gap) are solved exactly by the DP, as many as fit ``core_cells`` cells, the others
    fixed, and the bound is tightened by what a unit left out would have to give up.
    ``method`` is ``"lp"`` or ``"lp-core"``; ``exact`` when the bound is met. Runs in
    ``O(n log n)`` array operations plus the core's DP.

    Raises:
        ParameterError: malformed inputs (the message names the argument).
        InfeasibleError: even the cheapest allowed assignment exceeds ``budget``.
    """
    prob = prepare(costs, values, budget, allowed, parent)
    return _solve_lp(prob, _as_tol(tol), as_int(core_cells, "core_cells", minimum=1))


def _as_tol(tol: object) -> float:
    if isinstance(tol, bool) or not isinstance(tol, (int, float, np.floating)) or not 0.0 <= float(tol) < 1.0:
        raise ParameterError(f"tol must be a number in [0, 1), a share of the bound (got {tol!r})")
    return float(tol)


def solve(
    costs: ArrayLike,
    values: ArrayLike,
    budget: int,
    *,
    allowed: ArrayLike | None = None,
    parent: ArrayLike | None = None,
    method: str = "auto",
    max_cells: int = 20_000_000,
    tol: float = GAP_TOLERANCE,
) -> Solution:
    """Choose one option per entry maximising value within ``budget``.

    ``method``:
        * ``"auto"`` -- if the most valuable feasible assignment fits, return it
          (``method="trivial"``, exact); if the exact DP is small
          (``n * (budget + 1) <= EXACT_CELLS``), run it; otherwise :func:`solve_lp`,
          and only if its certified gap is still above ``tol`` also
          :func:`solve_exact` (exact within ``max_cells``, else cost-scaled), keeping
          the better answer and the tighter bound.
        * ``"lp"`` -- :func:`solve_lp` alone.
        * ``"exact"`` -- :func:`solve_exact`.
        * ``"greedy"`` -- :func:`solve_greedy`.

    Every answer states its :attr:`Solution.bound` and :attr:`Solution.gap`.

    Raises:
        ParameterError: malformed inputs, an unknown ``method`` or a ``tol`` outside [0, 1).
        InfeasibleError: even the cheapest allowed assignment exceeds ``budget``.
    """
    if method not in METHODS:
        raise ParameterError(f"method must be one of {', '.join(repr(m) for m in METHODS)} (got {method!r})")
    tolerance = _as_tol(tol)
    if method == "exact":
        return solve_exact(costs, values, budget, allowed=allowed, parent=parent, max_cells=max_cells)
    if method == "greedy":
        return solve_greedy(costs, values, budget, allowed=allowed, parent=parent)
    prob = prepare(costs, values, budget, allowed, parent)
    cells_limit = as_int(max_cells, "max_cells", minimum=1)
    if method == "lp":
        return _solve_lp(prob, tolerance, CORE_CELLS)
    best = max_value_choices(prob)
    if int(total(prob.costs, best)) <= prob.budget:
        return _make_solution(prob, best, exact=True, method="trivial")
    upper = int(np.where(prob.allowed, prob.costs, 0).max(axis=1).sum()) if prob.n else 0
    if prob.n * (min(prob.budget, upper) + 1) <= min(EXACT_CELLS, cells_limit):
        return _solve_exact(prob, cells_limit)
    sol = _solve_lp(prob, tolerance, CORE_CELLS)
    if sol.gap <= tolerance:
        return sol
    other = _solve_exact(prob, cells_limit)
    if other.exact or other.value > sol.value:
        return _make_solution(prob, other.choices, exact=other.exact, method=other.method,
                              bound=min(sol.bound, other.bound))
    return sol


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
    prob = prepare(costs, values, budget, allowed, parent)
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
