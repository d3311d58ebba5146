"""Tests for the LP-relaxation solver (salience.selector.lp, knapsack.solve_lp) and its certified gap.

The reference is the brute force on small instances and the unscaled DP on larger ones;
the properties are the solver's contract: feasible (budget, allowed options, tool groups),
inputs untouched, the bound above the optimum, the answer within its stated gap of it,
exact when the core is allowed to prove it (tol=0), and never worse than the greedy then.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from salience.errors import ParameterError
from salience.selector import lp
from salience.selector.knapsack import (
    DROP,
    FULL,
    GAP_TOLERANCE,
    STUB,
    TRIM,
    InfeasibleError,
    Solution,
    brute_force,
    solve,
    solve_exact,
    solve_greedy,
    solve_lp,
)
from salience.selector.problem import prepare

TOL = 1e-9


def assert_feasible(sol: Solution, costs, values, budget, allowed, parent) -> None:
    costs, allowed, parent = np.asarray(costs), np.asarray(allowed), np.asarray(parent)
    ch = sol.choices
    rows = np.arange(costs.shape[0])
    assert ch.dtype == np.int8 and ch.shape == (costs.shape[0],)
    assert sol.cost == int(costs[rows, ch].sum()) <= budget
    assert sol.value == pytest.approx(float(np.asarray(values)[rows, ch].sum()), abs=1e-9)
    assert allowed[rows, ch].all(), "chose a disallowed option"
    kids = np.flatnonzero(parent >= 0)
    assert ((ch[kids] == DROP) == (ch[parent[kids]] == DROP)).all(), "a tool group was split"


@st.composite
def instances(draw, max_n: int = 8, max_cost: int = 40):
    """Random valid instances with depth-1 tool groups; small integer values provoke ties."""
    n = draw(st.integers(1, max_n))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    costs = rng.integers(0, max_cost, (n, 4))
    costs[:, DROP] = 0
    if draw(st.booleans()):
        values = rng.integers(0, 4, (n, 4)).astype(float)
    else:
        values = rng.random((n, 4)) * 10 * (rng.random((n, 4)) < 0.9)
    values[:, DROP] = 0.0
    allowed = rng.random((n, 4)) < draw(st.sampled_from([0.6, 0.85, 1.0]))
    allowed[~allowed.any(axis=1), DROP] = True
    parent = np.full(n, -1, dtype=np.int64)
    share = draw(st.sampled_from([0.0, 0.4, 0.8]))
    for i in range(1, n):
        if rng.random() < share:
            p = int(rng.integers(0, i))
            if parent[p] == -1:
                parent[i] = p
    budget = draw(st.integers(0, int(costs.max(axis=1).sum()) + 2))
    return costs, values, allowed, parent, budget


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instances(), st.sampled_from([0.0, GAP_TOLERANCE, 0.05, 0.5]), st.sampled_from([1, 50, 2_000_000]))
def test_lp_is_feasible_and_within_its_gap_of_the_brute_force(inst, tol, core_cells):
    costs, values, allowed, parent, budget = inst
    before = [a.copy() for a in (costs, values, allowed, parent)]
    kw = dict(allowed=allowed, parent=parent)
    try:
        ref = brute_force(costs, values, budget, **kw)
    except InfeasibleError:
        with pytest.raises(InfeasibleError, match="infeasible"):
            solve_lp(costs, values, budget, tol=tol, core_cells=core_cells, **kw)
        return
    sol = solve_lp(costs, values, budget, tol=tol, core_cells=core_cells, **kw)
    assert_feasible(sol, costs, values, budget, allowed, parent)
    assert sol.method in ("lp", "lp-core")
    assert sol.bound >= ref.value - TOL * max(1.0, ref.value), "the bound is below the optimum"
    assert sol.value <= ref.value + TOL
    assert ref.value - sol.value <= sol.gap * sol.bound + TOL, "further from the optimum than the stated gap"
    assert 0.0 <= sol.gap < 1.0 or sol.value == 0.0
    if sol.gap > tol:
        assert core_cells < 2_000_000, "the core fits and still left a gap above the tolerance"
    if tol == 0.0 and core_cells == 2_000_000:  # the whole core fits: proven optimal
        assert sol.value == pytest.approx(ref.value, abs=1e-9) and sol.exact and sol.gap == 0.0
        assert sol.value >= solve_greedy(costs, values, budget, **kw).value - TOL
    for a, b in zip(before, (costs, values, allowed, parent)):
        np.testing.assert_array_equal(a, b)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instances(max_n=60, max_cost=400))
def test_the_default_solver_on_larger_instances(inst):
    """Instances past the small-DP limit go through the LP: within the tolerance of the
    unscaled DP, and never further below the greedy than the stated gap."""
    costs, values, allowed, parent, budget = inst
    kw = dict(allowed=allowed, parent=parent)
    try:
        exact = solve_exact(costs, values, budget, max_cells=10**9, **kw)
    except InfeasibleError:
        return
    sol = solve(costs, values, budget, **kw)
    assert_feasible(sol, costs, values, budget, allowed, parent)
    assert sol.gap <= GAP_TOLERANCE
    assert exact.value - sol.value <= sol.gap * sol.bound + TOL
    assert sol.bound >= exact.value - TOL * max(1.0, exact.value)
    greedy = solve_greedy(costs, values, budget, **kw)
    assert sol.value >= greedy.value - sol.gap * sol.bound - TOL
    assert greedy.bound >= exact.value - TOL * max(1.0, exact.value)  # every method states a valid bound
    assert greedy.value >= (1 - greedy.gap) * exact.value - TOL


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instances(max_n=10), st.floats(0.0, 3.0))
def test_the_lagrangian_bound_holds_at_every_price(inst, lam):
    """The certificate does not depend on the hulls: any token price gives a bound."""
    costs, values, allowed, parent, budget = inst
    try:
        ref = brute_force(costs, values, budget, allowed=allowed, parent=parent)
    except InfeasibleError:
        return
    prob = prepare(costs, values, budget, allowed, parent)
    assert lp.bound(prob, lam) >= ref.value - 1e-9
    prices = lp.penalties(prob, lam)
    # the optimum pays its units' penalties out of the bound
    ch = ref.choices
    best = prices.best
    assert prices.upper - ref.value >= -1e-9
    moved = np.bincount(prob.unit_of, weights=(ch != best), minlength=prob.roots.shape[0]) > 0
    if moved.any():
        assert ref.value <= prices.upper - prices.unit_pen[moved].max() + 1e-9


def test_hulls_relaxation_and_rounding_on_a_known_case():
    # entry 0: FULL 10 tokens for 5, TRIM 4 tokens for 3, STUB 1 token for 1 (all on the hull)
    # entry 1: a call (2 tokens, worth 1) answered by entry 2 (FULL 20 for 6, STUB 2 for 0.5)
    costs = np.array([[10, 4, 1, 0], [2, 2, 2, 0], [20, 20, 2, 0]])
    values = np.array([[5.0, 3, 1, 0], [1.0, 1, 1, 0], [6.0, 6, 0.5, 0]])
    allowed = np.array([[1, 1, 1, 1], [1, 0, 0, 1], [1, 0, 1, 1]], dtype=bool)
    parent = np.array([-1, -1, 1])
    prob = prepare(costs, values, 9, allowed, parent)
    h = lp.hulls(prob)
    assert h.base_cost == 0 and h.base_value == 0.0
    assert h.vertex[0].tolist()[:4] == [DROP, STUB, TRIM, FULL]
    rel = lp.relax(h, 9, prob.roots.shape[0])
    # by value per token: STUB of 0 (1.0), TRIM of 0 (2/3), the group on (1.5/4), FULL of 0 (2/6), FULL of 2 (5.5/18)
    assert rel.taken.tolist() == [2, 1]
    assert rel.upper == pytest.approx(1 + 2 + 1.5 + 1 * (2 / 6))
    assert lp.decode(prob, h, rel.taken).tolist() == [TRIM, FULL, STUB]
    sol = solve_lp(costs, values, 9, allowed=allowed, parent=parent, tol=0.0)
    assert sol.exact and sol.value == pytest.approx(4.5) and sol.cost == 8


def test_a_group_that_may_not_be_dropped_starts_kept():
    costs = np.array([[3, 3, 3, 0], [9, 9, 1, 0]])
    values = np.array([[1.0, 1, 1, 0], [4.0, 4, 0.1, 0]])
    allowed = np.array([[1, 0, 0, 0], [1, 0, 1, 1]], dtype=bool)  # the call is pinned whole
    parent = np.array([-1, 0])
    prob = prepare(costs, values, 4, allowed, parent)
    h = lp.hulls(prob)
    assert h.base_cost == 4 and bool(h.starts_kept[0])
    sol = solve_lp(costs, values, 4, allowed=allowed, parent=parent)
    assert sol.choices.tolist() == [FULL, STUB] and sol.gap <= 1e-12
    with pytest.raises(InfeasibleError, match=r"costs 4 tokens but the budget is 3"):
        solve_lp(costs, values, 3, allowed=allowed, parent=parent)


def test_everything_fits_is_exact():
    costs = np.array([[5, 2, 1, 0], [7, 3, 1, 0]])
    values = np.array([[2.0, 1, 0.5, 0], [3.0, 1, 0.5, 0]])
    sol = solve_lp(costs, values, 100)
    assert sol.choices.tolist() == [FULL, FULL] and sol.exact and sol.gap == 0.0 and sol.bound == sol.value


def test_large_instance_goes_through_the_lp_with_a_small_gap():
    rng = np.random.default_rng(0)
    n = 5_000
    full = rng.integers(20, 3000, n)
    costs = np.stack([full, full // 3, np.minimum(full, 25), np.zeros(n, int)], axis=1)
    imp = rng.random(n)
    values = np.stack([imp, 0.6 * imp, 0.15 * imp, np.zeros(n)], axis=1)
    parent = np.full(n, -1)
    parent[1::7] = np.arange(0, n, 7)[: parent[1::7].shape[0]]
    sol = solve(costs, values, 200_000, parent=parent)
    assert sol.method in ("lp", "lp-core") and sol.gap <= GAP_TOLERANCE
    assert_feasible(sol, costs, values, 200_000, np.ones((n, 4), bool), parent)
    assert sol.value >= solve_greedy(costs, values, 200_000, parent=parent).value - sol.gap * sol.bound


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"tol": -0.1}, r"tol must be a number in \[0, 1\)"), ({"tol": 1.0}, r"tol must be a number in \[0, 1\)"),
     ({"tol": True}, "tol must be a number"), ({"core_cells": 0}, "core_cells must be >= 1")],
    ids=["negative-tol", "tol-one", "bool-tol", "no-core"],
)
def test_bad_parameters_name_themselves(kwargs, match):
    with pytest.raises(ParameterError, match=match):
        solve_lp(np.array([[3, 2, 1, 0]]), np.array([[3.0, 2, 1, 0]]), 2, **kwargs)


def test_solve_rejects_a_bad_tolerance():
    with pytest.raises(ParameterError, match="tol must be"):
        solve(np.array([[3, 2, 1, 0]]), np.array([[3.0, 2, 1, 0]]), 2, tol="small")


# -- through the Compactor ----------------------------------------------------------------------


class _Scores:
    """A deterministic scorer: a different score per entry position."""

    def score(self, transcript, query=None):
        n = len(transcript.entries)
        return (np.arange(n) * 0.618) % 1.0


def _history(turns: int) -> list[dict]:
    messages: list[dict] = [{"role": "system", "content": "You are a careful agent."}]
    for t in range(turns):
        messages.append({"role": "user", "content": f"step {t}: look up order W{1000 + t}"})
        messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": f"c{t}", "type": "function", "function": {"name": "get_order", "arguments": f'{{"id": "W{t}"}}'}}]})
        body = "\n".join(f"line {k} of order W{1000 + t}: item {t * 31 + k} costs {k * 7 + t}" for k in range(30))
        messages.append({"role": "tool", "tool_call_id": f"c{t}", "content": body})
    return messages


def test_compaction_states_the_solver_gap():
    from salience import Compactor

    messages = _history(40)
    compactor = Compactor(scorer=_Scores())
    total = compactor.compact(messages, budget=10**9).tokens
    fits = compactor.compact(messages, budget=total)
    assert fits.method == "fits" and fits.solver_gap is None
    budget = total // 4
    result = compactor.compact(messages, budget=budget)
    assert result.method in ("lp", "lp-core")  # past the small-DP limit: the LP ran
    assert result.tokens <= budget
    assert result.solver_gap is not None and 0.0 <= result.solver_gap <= GAP_TOLERANCE
    exact = Compactor(scorer=_Scores(), solver="exact").compact(messages, budget=budget)
    assert exact.method == "dp" and exact.solver_gap == 0.0 and exact.tokens <= budget


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instances(max_n=12), st.floats(0.0, 3.0))
def test_the_bound_alone_is_the_penalties_bound_bit_for_bit(inst, lam):
    """lp.bound, which a solve within its tolerance uses instead of lp.penalties, gives the same float."""
    costs, values, allowed, parent, budget = inst
    try:
        prob = prepare(costs, values, budget, allowed, parent)
    except InfeasibleError:  # a group that can be neither kept nor dropped
        return
    assert lp.bound(prob, lam) == lp.penalties(prob, lam).upper
