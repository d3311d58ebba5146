"""Tests for salience.selector.knapsack: exact DP vs brute force, greedy, validation."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from salience.selector.knapsack import (
    DROP,
    FULL,
    STUB,
    TRIM,
    InfeasibleError,
    Solution,
    brute_force,
    solve,
    solve_exact,
    solve_greedy,
)

# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------


def assert_feasible(sol: Solution, costs, values, budget, allowed=None, parent=None) -> None:
    """The solution respects the budget, ``allowed`` and the tool-group constraint."""
    costs = np.asarray(costs)
    values = np.asarray(values, dtype=float)
    n = costs.shape[0]
    ch = sol.choices
    assert ch.shape == (n,)
    assert ch.dtype == np.int8
    assert ((ch >= 0) & (ch <= DROP)).all()
    rows = np.arange(n)
    assert sol.cost == int(costs[rows, ch].sum())
    assert sol.value == pytest.approx(float(values[rows, ch].sum()), abs=1e-9)
    assert sol.cost <= budget
    if allowed is not None:
        assert np.asarray(allowed)[rows, ch].all(), "chose a disallowed option"
    if parent is not None:
        for i, p in enumerate(np.asarray(parent).tolist()):
            if p >= 0:
                assert (ch[i] == DROP) == (ch[p] == DROP), f"group constraint broken at {i} -> {p}"


@st.composite
def problems(draw, max_n: int = 7):
    """Random valid instances: integer costs, float values, allowed masks, depth-1 groups."""
    n = draw(st.integers(1, max_n))
    costs = np.zeros((n, 4), dtype=np.int64)
    values = np.zeros((n, 4))
    allowed = np.zeros((n, 4), dtype=bool)
    parent = np.full(n, -1, dtype=np.int64)
    small_values = draw(st.booleans())  # small integers provoke ties
    for i in range(n):
        for o in (FULL, TRIM, STUB):
            costs[i, o] = draw(st.integers(0, 30))
            values[i, o] = (
                draw(st.integers(0, 3))
                if small_values
                else draw(st.floats(0, 10, allow_nan=False, allow_infinity=False))
            )
        row = draw(st.lists(st.booleans(), min_size=4, max_size=4))
        row[DROP] = row[DROP] or draw(st.integers(0, 4)) > 0  # DROP usually allowed
        if not any(row):
            row[draw(st.integers(0, 3))] = True
        allowed[i] = row
        roots = [j for j in range(i) if parent[j] == -1]
        if roots and draw(st.integers(0, 2)) > 0:
            parent[i] = draw(st.sampled_from(roots))
    budget = draw(st.integers(0, int(costs.max(axis=1).sum()) + 2))
    return costs, values, allowed, parent, budget


def copies(*arrays):
    return [np.array(a, copy=True) for a in arrays]


# --------------------------------------------------------------------------
# property tests
# --------------------------------------------------------------------------


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems())
def test_exact_matches_brute_force(prob):
    costs, values, allowed, parent, budget = prob
    before = copies(costs, values, allowed, parent)
    kw = dict(allowed=allowed, parent=parent)
    try:
        ref = brute_force(costs, values, budget, **kw)
    except InfeasibleError:
        for solver in (solve_exact, solve_greedy, solve):
            with pytest.raises(InfeasibleError, match="infeasible"):
                solver(costs, values, budget, **kw)
        return
    exact = solve_exact(costs, values, budget, **kw)
    greedy = solve_greedy(costs, values, budget, **kw)
    auto = solve(costs, values, budget, **kw)
    unscaled = solve_exact(costs, values, budget, max_cells=10**12, **kw)

    for sol in (ref, exact, greedy, auto, unscaled):
        assert_feasible(sol, costs, values, budget, allowed, parent)
    assert exact.exact and exact.method == "dp"
    assert exact.value == pytest.approx(ref.value, abs=1e-9)
    assert auto.value == pytest.approx(ref.value, abs=1e-9)
    assert exact.value >= greedy.value - 1e-9
    assert not greedy.exact and greedy.method == "greedy"
    # without scaling the answer does not depend on max_cells
    np.testing.assert_array_equal(exact.choices, unscaled.choices)
    # least cost among the optimal answers, like the brute force; values within 1e-12 of each other
    # are one (an entry worth 2.2e-16 more made the brute force pay a token the dp did not)
    if abs(exact.value - ref.value) < 1e-12:
        assert exact.cost <= ref.cost
    for a, b in zip(before, (costs, values, allowed, parent)):
        np.testing.assert_array_equal(a, b)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems(), st.integers(1, 40))
def test_scaled_dp_is_feasible_and_not_worse_than_greedy(prob, max_cells):
    costs, values, allowed, parent, budget = prob
    kw = dict(allowed=allowed, parent=parent)
    try:
        greedy = solve_greedy(costs, values, budget, **kw)
    except InfeasibleError:
        return
    sol = solve_exact(costs, values, budget, max_cells=max_cells, **kw)
    assert_feasible(sol, costs, values, budget, allowed, parent)
    assert sol.value >= greedy.value - 1e-12
    if sol.method != "dp":
        assert not sol.exact
        assert sol.method in ("dp-scaled", "greedy")


# --------------------------------------------------------------------------
# examples
# --------------------------------------------------------------------------


def test_interleaved_children_are_grouped():
    # entry 0 is a call whose results are 2 and 4; 1 and 3 are unrelated.
    costs = np.array([[10, 0, 0, 0], [5, 0, 0, 0], [50, 15, 2, 0], [5, 0, 0, 0], [60, 20, 2, 0]])
    values = np.array([[1.0, 0, 0, 0], [2.0, 0, 0, 0], [9.0, 5.0, 0.5, 0], [2.0, 0, 0, 0], [9.0, 6.0, 0.5, 0]])
    allowed = np.array([[1, 0, 0, 1], [1, 0, 0, 1], [1, 1, 1, 1], [1, 0, 0, 1], [1, 1, 1, 1]], dtype=bool)
    parent = np.array([-1, -1, 0, -1, 0])
    for budget in range(0, 140, 7):
        ref = brute_force(costs, values, budget, allowed=allowed, parent=parent)
        sol = solve_exact(costs, values, budget, allowed=allowed, parent=parent)
        assert_feasible(sol, costs, values, budget, allowed, parent)
        assert sol.value == pytest.approx(ref.value)
    sol = solve_exact(costs, values, 45, allowed=allowed, parent=parent)
    # dropping both unrelated entries pays for trimming both results
    assert sol.choices.tolist() == [FULL, DROP, TRIM, DROP, TRIM]
    assert sol.value == pytest.approx(12.0)


def test_pinned_parent_forces_results_kept():
    costs = np.array([[10, 0, 0, 0], [100, 30, 5, 0], [100, 30, 5, 0]])
    values = np.array([[1.0, 0, 0, 0], [0.1, 0.05, 0.01, 0], [0.1, 0.05, 0.01, 0]])
    allowed = np.array([[1, 0, 0, 0], [1, 1, 1, 1], [1, 1, 1, 1]], dtype=bool)
    parent = np.array([-1, 0, 0])
    for solver in (solve_exact, solve_greedy):
        sol = solver(costs, values, 20, allowed=allowed, parent=parent)
        assert sol.choices.tolist() == [FULL, STUB, STUB]
    with pytest.raises(InfeasibleError, match=r"costs 20 tokens but the budget is 19"):
        solve(costs, values, 19, allowed=allowed, parent=parent)


def test_result_only_droppable_forces_call_dropped():
    costs = np.array([[10, 0, 0, 0], [5, 0, 0, 0]])
    values = np.array([[5.0, 0, 0, 0], [5.0, 0, 0, 0]])
    allowed = np.array([[1, 0, 0, 1], [0, 0, 0, 1]], dtype=bool)
    sol = solve_exact(costs, values, 100, allowed=allowed, parent=[-1, 0])
    assert sol.choices.tolist() == [DROP, DROP]


def test_group_that_can_be_neither_kept_nor_dropped():
    costs = np.zeros((2, 4), dtype=int)
    values = np.zeros((2, 4))
    allowed = np.array([[1, 0, 0, 0], [0, 0, 0, 1]], dtype=bool)
    with pytest.raises(InfeasibleError, match="neither kept"):
        solve(costs, values, 10, allowed=allowed, parent=[-1, 0])


def test_infeasible_budget_message_has_numbers():
    costs = np.array([[7, 0, 0, 0], [4, 3, 0, 0]])
    values = np.array([[1.0, 0, 0, 0], [1.0, 0.5, 0, 0]])
    allowed = np.array([[1, 0, 0, 0], [1, 1, 0, 0]], dtype=bool)
    with pytest.raises(InfeasibleError, match=r"costs 10 tokens but the budget is 9") as info:
        solve_exact(costs, values, 9, allowed=allowed)
    assert isinstance(info.value, ValueError)
    assert (info.value.min_cost, info.value.budget) == (10, 9)


@pytest.mark.parametrize("method", ["auto", "exact", "greedy"], ids=lambda m: m)
def test_trivial_when_everything_fits(method):
    costs = np.array([[10, 5, 1, 0], [20, 5, 1, 0]])
    values = np.array([[3.0, 2, 1, 0], [4.0, 2, 1, 0]])
    sol = solve(costs, values, 30, method=method)
    assert sol.choices.tolist() == [FULL, FULL]
    assert sol.cost == 30 and sol.value == 7.0
    if method == "auto":
        assert sol.method == "trivial" and sol.exact


def test_empty_input():
    sol = solve(np.zeros((0, 4), dtype=int), np.zeros((0, 4)), 0)
    assert sol.choices.shape == (0,) and sol.cost == 0 and sol.value == 0.0
    assert solve_exact(np.zeros((0, 4), dtype=int), np.zeros((0, 4)), 5).cost == 0


def test_choices_are_read_only():
    sol = solve_exact(np.array([[3, 2, 1, 0]]), np.array([[3.0, 2, 1, 0]]), 2)
    assert sol.choices.tolist() == [TRIM]
    with pytest.raises(ValueError):
        sol.choices[0] = FULL


def test_large_problem_auto_uses_the_lp_and_scaling_kicks_in():
    rng = np.random.default_rng(0)
    n = 20_001
    full = rng.integers(1, 200, n)
    costs = np.stack([full, full // 3, np.minimum(full, 5), np.zeros(n, int)], axis=1)
    imp = rng.random(n)
    values = np.stack([imp, 0.6 * imp, 0.1 * imp, np.zeros(n)], axis=1)
    sol = solve(costs, values, 50_000)
    assert sol.method in ("lp", "lp-core") and sol.gap <= 1e-4
    assert_feasible(sol, costs, values, 50_000)
    small = solve_exact(costs[:500], values[:500], 5_000, max_cells=100_000)
    assert small.method in ("dp-scaled", "greedy") and not small.exact
    assert small.value >= solve_greedy(costs[:500], values[:500], 5_000).value


def test_scaled_close_to_exact():
    rng = np.random.default_rng(1)
    n = 200
    full = rng.integers(20, 2000, n)
    costs = np.stack([full, (full * 0.3).astype(int), np.full(n, 25), np.zeros(n, int)], axis=1)
    imp = rng.random(n)
    values = np.stack([imp, 0.7 * imp, 0.15 * imp, np.zeros(n)], axis=1)
    exact = solve_exact(costs, values, 20_000)
    scaled = solve_exact(costs, values, 20_000, max_cells=200_000)
    assert exact.method == "dp" and scaled.method in ("dp-scaled", "greedy")
    assert scaled.value <= exact.value + 1e-9
    assert scaled.value >= 0.97 * exact.value


# --------------------------------------------------------------------------
# validation
# --------------------------------------------------------------------------

GOOD_C = np.array([[3, 2, 1, 0], [4, 2, 1, 0]])
GOOD_V = np.array([[3.0, 2, 1, 0], [4.0, 2, 1, 0]])


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"costs": np.zeros((3, 2), int)}, r"costs must have shape \(n, 4\) \(got \(3, 2\)\)"),
        ({"costs": np.zeros(4, int)}, r"costs must have shape"),
        ({"values": np.zeros((3, 4))}, r"values must have shape \(2, 4\) \(got \(3, 4\)\)"),
        ({"costs": GOOD_C.astype(float) + 0.5}, r"costs must be whole numbers"),
        ({"costs": GOOD_C.astype(str)}, r"costs must be an integer array"),
        ({"costs": -GOOD_C}, r"costs must be non-negative"),
        ({"values": -GOOD_V}, r"values must be non-negative"),
        ({"values": GOOD_V * np.nan}, r"values must be finite"),
        ({"costs": GOOD_C + 1}, r"DROP column of costs must be 0"),
        ({"values": GOOD_V + 1}, r"DROP column of values must be 0"),
        ({"allowed": np.ones((2, 4), int)}, r"allowed must be a boolean array"),
        ({"allowed": np.ones((2, 3), bool)}, r"allowed must have shape \(2, 4\)"),
        ({"allowed": np.array([[1, 1, 1, 1], [0, 0, 0, 0]], bool)}, r"entry 1 allows none"),
        ({"parent": [-1]}, r"parent must have shape \(2,\)"),
        ({"parent": [-1, 1]}, r"parent\[1\] must be -1 or the index of an earlier entry"),
        ({"parent": [-1, -2]}, r"parent\[1\] must be -1"),
        ({"parent": [-1.0, 0.0]}, r"parent must be an integer array"),
        ({"budget": -1}, r"budget must be >= 0 \(got -1\)"),
        ({"budget": 2.5}, r"budget must be an integer"),
        ({"budget": True}, r"budget must be an integer"),
    ],
    ids=[
        "costs-shape",
        "costs-1d",
        "values-shape",
        "costs-fractional",
        "costs-dtype",
        "costs-negative",
        "values-negative",
        "values-nan",
        "drop-cost",
        "drop-value",
        "allowed-dtype",
        "allowed-shape",
        "allowed-empty-row",
        "parent-shape",
        "parent-forward",
        "parent-below-minus-one",
        "parent-dtype",
        "budget-negative",
        "budget-fraction",
        "budget-bool",
    ],
)
@pytest.mark.parametrize("solver", [solve, solve_exact, solve_greedy, brute_force], ids=lambda f: f.__name__)
def test_validation(solver, kwargs, match):
    args = {"costs": GOOD_C, "values": GOOD_V, "budget": 5, **kwargs}
    with pytest.raises(ValueError, match=match):
        solver(args.pop("costs"), args.pop("values"), args.pop("budget"), **args)


def test_nested_groups_rejected():
    costs = np.zeros((3, 4), int)
    values = np.zeros((3, 4))
    with pytest.raises(ValueError, match="one level deep"):
        solve(costs, values, 1, parent=[-1, 0, 1])


@pytest.mark.parametrize("method", ["dp", "", "EXACT"], ids=["dp", "empty", "upper"])
def test_unknown_method(method):
    with pytest.raises(ValueError, match=r"method must be one of 'auto', 'exact', 'greedy'"):
        solve(GOOD_C, GOOD_V, 5, method=method)


@pytest.mark.parametrize("max_cells", [0, -5, 1.5], ids=["zero", "negative", "fraction"])
def test_bad_max_cells(max_cells):
    with pytest.raises(ValueError, match="max_cells"):
        solve_exact(GOOD_C, GOOD_V, 5, max_cells=max_cells)


def test_int_like_inputs_accepted():
    sol = solve_exact(
        GOOD_C.astype(float).tolist(), GOOD_V.astype(int).tolist(), np.int64(5), parent=np.array([-1, 0], np.int32)
    )
    assert sol.cost <= 5
    assert sol.value == 5.0


def test_brute_force_refuses_large_n():
    with pytest.raises(ValueError, match="brute_force enumerates at most"):
        brute_force(np.zeros((12, 4), int), np.zeros((12, 4)), 5)
