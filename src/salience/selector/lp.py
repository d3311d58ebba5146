"""The LP relaxation of the multiple-choice knapsack, its rounding, and a certified bound.

Everything here works on a checked :class:`~salience.selector.problem.Instance` with
array operations; the only Python loops run over the few segments that may still fit
after rounding, and over the units of a small core.

**Units and their hulls.** A plain entry is a unit whose states are its allowed options.
A tool group (a call and its results) is one unit whose states are "all dropped" or
"all kept", each member in any of its non-DROP options. Each unit starts at its least
cost state (a plain entry: its cheapest option; a group: dropped if it may be, else each
member at its cheapest non-DROP option) and climbs the *upper convex hull* of its states:

* a plain entry: the hull of its (cost, value) options from the cheapest one, by largest
  value gained per extra token, at most three steps;
* a kept group: the base (every member at its cheapest non-DROP option) plus the hull
  steps of every member, merged by decreasing value per token (a sum of concave
  functions is the merge of their slopes);
* a group that may be dropped: a first step from "dropped" (0, 0) to the point of the
  kept curve that the line from the origin touches (the best value per token of
  turning the group on), then the kept curve's remaining steps.

**The relaxation.** Every step of every unit, sorted by value per token, is taken while
the budget lasts; the first step that does not fit (the *critical* one) is taken in part.
Its value per token ``lam`` prices a token. That is the LP optimum over the hulls, an
upper bound on every feasible assignment.

**Rounding.** The whole steps taken are an assignment (each unit at a hull vertex, the
critical unit at the vertex below); the steps after the critical one that still fit are
then taken in order (:func:`fill`).

**The bound** is Lagrangian, worked out from the option matrices themselves (so it holds
whatever the hulls are): for a token price ``lam >= 0`` and any feasible assignment ``x``,
``value(x) <= lam * budget + sum over units of max over states (value - lam * cost)``;
each unit's *penalty* at a state is how far below its best it is, and
``value(x) <= bound - sum of x's penalties``. So a unit whose every other state costs a
penalty of at least ``d`` is, in any assignment better than ``bound - d``, at its best
state. :func:`penalties` gives each unit's best state at ``lam`` and the least penalty of
its other states; :class:`salience.selector.knapsack` fixes the units with large ones,
solves the rest (the *core*) exactly, and states the gap that is left.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from salience.selector.problem import DROP, INT64_MAX, NON_DROP, Instance, cheapest

__all__ = ["Hulls", "Prices", "Relaxation", "bound", "decode", "fill", "hulls", "penalties", "relax"]


@dataclass(frozen=True, slots=True)
class Hulls:
    """Every unit's hull steps, as flat arrays (``S`` steps, ``U`` units, ``n`` entries).

    A step ``s`` belongs to unit ``unit[s]``, is its ``order[s]``-th, adds ``dc[s]`` tokens
    and ``dv[s]`` value. An *atom* is one entry's hull step (``atom_entry``); a group's
    kept-curve position of its atoms is ``atom_pos``. ``vertex[i, k]`` is entry ``i``'s
    option after ``k`` of its own steps.
    """

    unit: np.ndarray  # (S,) int64
    order: np.ndarray  # (S,) int64
    dc: np.ndarray  # (S,) int64, >= 1
    dv: np.ndarray  # (S,) float64, > 0
    base_cost: int  # the least cost assignment's cost
    base_value: float
    vertex: np.ndarray  # (n, 4) int8, entry options along its hull
    atom_entry: np.ndarray  # (A,) the entry of each atom
    atom_pos: np.ndarray  # (A,) in a group: the atom's place on the group's kept curve; else its step
    bundle: np.ndarray  # (U,) bool: the unit starts dropped and its first step turns it on
    kstar: np.ndarray  # (U,) atoms of the kept curve that the first step of a bundle includes
    forced_drop: np.ndarray  # (U,) the group can only be dropped
    starts_kept: np.ndarray  # (U,) a group that starts kept (it may not be dropped, or keeping it is free)
    in_group: np.ndarray  # (n,) the entry's unit is a group


@dataclass(frozen=True, slots=True)
class Relaxation:
    """The LP optimum (``upper``), the token price at the margin (``lam``) and the steps
    taken whole (``taken``: per unit), in the order they were taken (``sequence``)."""

    upper: float
    lam: float
    taken: np.ndarray  # (U,) int64
    sequence: np.ndarray  # (S,) step indices by decreasing value per token
    critical: int  # position in ``sequence`` of the first step that does not fit; S if all fit
    left: int  # tokens left after the whole steps


def _entry_hulls(costs: np.ndarray, values: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row: the hull vertices (option per step, padded by repeating the last) and the step count."""
    n = costs.shape[0]
    rows = np.arange(n)
    cur = cheapest(costs, values, mask)
    has = cur >= 0
    cur = np.where(has, cur, DROP)
    vertex = np.empty((n, 4), dtype=np.int8)
    vertex[:, 0] = cur
    steps = np.zeros(n, dtype=np.int64)
    cf = costs.astype(np.float64)
    for k in range(1, 4):
        c0 = cf[rows, cur][:, None]
        v0 = values[rows, cur][:, None]
        up = mask & (cf > c0) & (values > v0)
        slope = np.where(up, (values - v0) / np.where(up, cf - c0, 1.0), -np.inf)
        best = slope.max(axis=1)
        ok = np.isfinite(best)
        near = np.where(up & (slope == best[:, None]), costs, INT64_MAX).argmin(axis=1)
        cur = np.where(ok, near, cur)
        vertex[:, k] = cur
        steps += ok
        if not ok.any():
            vertex[:, k + 1:] = cur[:, None]
            break
    return vertex, steps


#: The last :func:`_entry_hulls` call's inputs and answer: a compaction solves twice (its answer,
#: then the digest's, whose allowed options differ in a few rows), over the same costs and values.
_LAST_HULLS: list[tuple[np.ndarray, ...] | None] = [None]


def _entry_hulls_again(costs: np.ndarray, values: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_entry_hulls`, worked out for the rows that differ from the last call's alone.

    A row's hull is its own (every operation there is per row; a row without a further step keeps
    its vertex, whichever rows go on), so the rows equal bit for bit to the last call's (costs,
    values and mask) keep their answer. Compared by content (the values bitwise), so no caller can
    be served another's rows; the cached arrays are never handed out."""
    last = _LAST_HULLS[0]  # read once: another thread may replace it
    if last is not None and last[0].shape == costs.shape:
        pc, pv, pm, pvertex, psteps = last
        diff = ((costs != pc).any(axis=1) | (values.view(np.int64) != pv.view(np.int64)).any(axis=1)
                | (mask != pm).any(axis=1))
        rows = np.flatnonzero(diff)
        vertex, steps = pvertex.copy(), psteps.copy()
        if rows.size:
            vertex[rows], steps[rows] = _entry_hulls(costs[rows], values[rows], mask[rows])
    else:
        vertex, steps = _entry_hulls(costs, values, mask)
    _LAST_HULLS[0] = (costs.copy(), values.copy(), mask.copy(), vertex.copy(), steps.copy())
    return vertex, steps


def hulls(prob: Instance) -> Hulls:
    """The hull steps of every unit (module doc)."""
    n, U = prob.n, prob.roots.shape[0]
    costs, values, allowed = prob.costs, prob.values, prob.allowed
    unit_of = prob.unit_of
    in_group = prob.grouped[unit_of]
    mask = np.where(in_group[:, None], allowed & NON_DROP, allowed)
    vertex, steps = _entry_hulls_again(costs, values, mask)
    rows = np.arange(n)
    start_c = costs[rows, vertex[:, 0]]
    start_v = values[rows, vertex[:, 0]]

    # atoms: entry i's k-th step, k = 0..steps[i]-1
    atom_entry = np.repeat(rows, steps)
    first = np.cumsum(steps) - steps
    atom_k = np.arange(atom_entry.shape[0]) - np.repeat(first, steps)
    a_c = costs[atom_entry, vertex[atom_entry, atom_k + 1]] - costs[atom_entry, vertex[atom_entry, atom_k]]
    a_v = values[atom_entry, vertex[atom_entry, atom_k + 1]] - values[atom_entry, vertex[atom_entry, atom_k]]
    a_unit = unit_of[atom_entry]

    forced_drop = prob.grouped & ~prob.keep_ok
    g_base_c = np.bincount(unit_of, weights=np.where(in_group, start_c, 0), minlength=U).astype(np.int64)
    g_base_v = np.bincount(unit_of, weights=np.where(in_group, start_v, 0.0), minlength=U)
    bundle = prob.grouped & prob.keep_ok & prob.drop_ok & (g_base_c > 0)

    # the kept curve of each group: its atoms by decreasing value per token
    a_group = prob.grouped[a_unit] & ~forced_drop[a_unit]
    gi = np.flatnonzero(a_group)
    eff = a_v / a_c
    for k in (1, 2):  # an entry's own steps stay in their order, whatever the rounding of equal slopes
        at = np.flatnonzero(atom_k == k)
        eff[at] = np.minimum(eff[at], eff[at - 1])
    gi = gi[np.lexsort((atom_k[gi], atom_entry[gi], -eff[gi], a_unit[gi]))]
    g_unit = a_unit[gi]
    g_first = np.searchsorted(g_unit, np.arange(U))
    g_pos = np.arange(gi.shape[0]) - g_first[g_unit]
    atom_pos = atom_k.copy()
    atom_pos[gi] = g_pos

    # a bundle's first step: to the kept curve's vertex of best value per token from (0, 0)
    kstar = np.zeros(U, dtype=np.int64)
    bc = g_base_c.astype(np.float64)
    bv = g_base_v.copy()
    bun = np.flatnonzero(bundle)
    if bun.size:
        cum_c = np.cumsum(a_c[gi])
        cum_v = np.cumsum(a_v[gi])
        before_c = np.concatenate([[0], cum_c])[g_first]  # cumulative sums before each group's atoms
        before_v = np.concatenate([[0.0], cum_v])[g_first]
        vc = g_base_c[g_unit] + cum_c - before_c[g_unit]  # kept curve vertices after each atom
        vv = g_base_v[g_unit] + cum_v - before_v[g_unit]
        ratio = vv / vc
        ratio0 = g_base_v / np.maximum(g_base_c, 1)
        on = bundle[g_unit]
        cand_u = np.concatenate([bun, g_unit[on]])
        cand_r = np.concatenate([ratio0[bun], ratio[on]])
        cand_k = np.concatenate([np.zeros(bun.size, dtype=np.int64), g_pos[on] + 1])
        cand_c = np.concatenate([g_base_c[bun], vc[on]])
        cand_v = np.concatenate([g_base_v[bun], vv[on]])
        pick = np.lexsort((cand_k, -cand_r, cand_u))
        firsts = pick[np.searchsorted(cand_u[pick], bun)]
        kstar[bun] = cand_k[firsts]
        bc[bun] = cand_c[firsts]
        bv[bun] = cand_v[firsts]
    bundle &= bv > 0  # a group worth nothing stays dropped

    # the steps: plain atoms, the bundles, then kept-curve atoms past the bundle's
    plain = ~a_group
    starts_kept = prob.grouped & prob.keep_ok & ~(prob.drop_ok & (g_base_c > 0))
    keep_after = a_group & ((bundle[a_unit] & (atom_pos >= kstar[a_unit])) | starts_kept[a_unit])
    b_idx = np.flatnonzero(bundle)
    unit = np.concatenate([a_unit[plain], b_idx, a_unit[keep_after]])
    order = np.concatenate([atom_k[plain], np.zeros(b_idx.size, dtype=np.int64),
                            atom_pos[keep_after] - kstar[a_unit[keep_after]] + bundle[a_unit[keep_after]]])
    dc = np.concatenate([a_c[plain], bc[b_idx].astype(np.int64), a_c[keep_after]])
    dv = np.concatenate([a_v[plain], bv[b_idx], a_v[keep_after]])

    base_cost = int(start_c[~in_group].sum() + g_base_c[starts_kept].sum())
    base_value = float(start_v[~in_group].sum() + g_base_v[starts_kept].sum())
    return Hulls(unit=unit, order=order, dc=dc, dv=dv, base_cost=base_cost, base_value=base_value,
                 vertex=vertex, atom_entry=atom_entry, atom_pos=atom_pos, bundle=bundle, kstar=kstar,
                 forced_drop=forced_drop, starts_kept=starts_kept, in_group=in_group)


def relax(h: Hulls, budget: int, n_units: int) -> Relaxation:
    """Take the steps by decreasing value per token while they fit (module doc)."""
    S = h.unit.shape[0]
    eff = h.dv / h.dc
    seq = np.lexsort((h.order, h.unit, -eff))
    # a unit's steps must be taken in their order: where rounding breaks the order of
    # equal slopes, each step is moved behind its unit's earlier ones
    rank = np.empty(S, dtype=np.int64)
    rank[seq] = np.arange(S)
    by_unit = np.lexsort((h.order, h.unit))
    shifted = rank[by_unit] + h.unit[by_unit] * (S + 1)
    rank[by_unit] = np.maximum.accumulate(shifted) - h.unit[by_unit] * (S + 1) if S else shifted
    seq = np.lexsort((h.order, h.unit, rank))
    room = budget - h.base_cost
    cum = np.cumsum(h.dc[seq])
    q = int(np.searchsorted(cum, room, side="right"))
    gained = float(h.dv[seq[:q]].sum())
    left = room - (int(cum[q - 1]) if q else 0)
    if q < S:
        s = int(seq[q])
        lam = float(eff[s])
        upper = h.base_value + gained + left * lam
    else:
        lam = 0.0
        upper = h.base_value + gained
    taken = np.bincount(h.unit[seq[:q]], minlength=n_units).astype(np.int64)
    return Relaxation(upper=upper, lam=lam, taken=taken, sequence=seq, critical=q, left=left)


def fill(h: Hulls, rel: Relaxation) -> np.ndarray:
    """The whole steps, then every later step that still fits and is its unit's next, in order."""
    taken = rel.taken.copy()
    left = rel.left
    seq = rel.sequence[rel.critical + 1:]
    seq = seq[h.dc[seq] <= left]
    unit, order, dc = h.unit[seq].tolist(), h.order[seq].tolist(), h.dc[seq].tolist()
    for u, o, c in zip(unit, order, dc):
        if c <= left and taken[u] == o:
            taken[u] += 1
            left -= c
    return taken


def decode(prob: Instance, h: Hulls, taken: np.ndarray) -> np.ndarray:
    """The assignment with ``taken[u]`` steps of every unit ``u`` (int8 choices per entry)."""
    n = prob.n
    unit_of = prob.unit_of
    # kept-curve atoms of each group: how far along it is (-1: dropped)
    along = np.where(h.starts_kept, taken, np.where(h.bundle & (taken > 0), h.kstar + taken - 1, -1))
    a_unit = unit_of[h.atom_entry]
    grouped_atom = h.in_group[h.atom_entry]
    on = np.where(grouped_atom, h.atom_pos < along[a_unit], h.atom_pos < taken[a_unit])
    steps = np.bincount(h.atom_entry[on], minlength=n)
    choices = h.vertex[np.arange(n), np.minimum(steps, 3)]
    dropped = h.in_group & (along[unit_of] < 0)
    return np.where(dropped, DROP, choices).astype(np.int8)


@dataclass(frozen=True, slots=True)
class Prices:
    """What the token price ``lam`` says about every unit and option (module doc).

    ``upper``: the Lagrangian bound. ``unit_pen``: per unit, the least penalty of any
    state but its best (0 on ties). ``best``: the best states (int8 choices per entry).
    ``option_pen``: per entry and option, a lower bound on the penalty of every state of
    its unit that gives the entry that option (inf where not allowed).
    """

    upper: float
    unit_pen: np.ndarray
    best: np.ndarray
    option_pen: np.ndarray


def penalties(prob: Instance, lam: float) -> Prices:
    """The bound, penalties and best states at token price ``lam`` (:class:`Prices`)."""
    n, U = prob.n, prob.roots.shape[0]
    unit_of = prob.unit_of
    in_group = prob.grouped[unit_of]
    reduced = prob.values - lam * prob.costs
    rows = np.arange(n)

    def top_two(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        r = np.where(mask, reduced, -np.inf)
        order = np.argsort(-r, axis=1, kind="stable")
        return r[rows, order[:, 0]], r[rows, order[:, 1]], order[:, 0]

    nd_mask = prob.allowed & NON_DROP
    best_all, second_all, arg_all = top_two(prob.allowed)
    best_nd, second_nd, arg_nd = top_two(nd_mask)
    with np.errstate(invalid="ignore"):  # -inf - -inf where a row has fewer than two options: no other state
        gap_all = np.nan_to_num(best_all - second_all, nan=np.inf)
        gap_nd = np.nan_to_num(best_nd - second_nd, nan=np.inf)
    keep_ok, drop_ok = prob.keep_ok, prob.drop_ok
    kept, dropped, g_best, total = _unit_bests(prob, best_all, best_nd, in_group)
    keep_wins = kept > dropped
    member_gap = np.full(U, np.inf)
    np.minimum.at(member_gap, unit_of[in_group], gap_nd[in_group])
    on_off = np.where(keep_ok & drop_ok, np.abs(kept - dropped), np.inf)
    g_pen = np.where(keep_wins | ~drop_ok, np.minimum(on_off, member_gap), on_off)
    g_pen = np.where(keep_ok & drop_ok & (kept == dropped), 0.0, g_pen)

    plain_pen = np.zeros(U)
    plain = ~in_group
    plain_pen[unit_of[plain]] = gap_all[plain]
    pen = np.where(prob.grouped, g_pen, plain_pen)
    upper = lam * prob.budget + total
    best = np.where(in_group, np.where(keep_wins[unit_of], arg_nd, DROP), arg_all).astype(np.int8)

    with np.errstate(invalid="ignore"):  # inf - inf where keeping is impossible: stays inf below
        keep_pen = np.nan_to_num((g_best - kept)[unit_of], nan=np.inf)
        option_pen = np.where(in_group[:, None], keep_pen[:, None] + best_nd[:, None] - reduced,
                              best_all[:, None] - reduced)
    drop_pen = np.where(in_group, np.where(drop_ok[unit_of], g_best[unit_of], np.inf), best_all - reduced[:, DROP])
    option_pen = np.where(nd_mask, option_pen, np.inf)
    option_pen[:, DROP] = np.where(prob.allowed[:, DROP], drop_pen, np.inf)
    return Prices(upper=upper, unit_pen=pen, best=best, option_pen=np.maximum(option_pen, 0.0))


def _unit_bests(prob: Instance, best_all: np.ndarray, best_nd: np.ndarray,
                in_group: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """Per unit, given each entry's best reduced value (``best_all``; ``best_nd`` without
    dropping): a tool group's best kept (-inf where it may not be kept) and dropped (0, or
    -inf) values and the better of the two; and the sum over units of each one's best (a
    plain entry's ``best_all``), which is the Lagrangian bound less ``lam * budget``."""
    U, unit_of = prob.roots.shape[0], prob.unit_of
    keep_ok, drop_ok = prob.keep_ok, prob.drop_ok
    kept = np.bincount(unit_of, weights=np.where(in_group & keep_ok[unit_of], best_nd, 0.0), minlength=U)
    kept = np.where(keep_ok, kept, -np.inf)
    dropped = np.where(drop_ok, 0.0, -np.inf)
    g_best = np.maximum(kept, dropped)
    plain_best = np.zeros(U)
    plain = ~in_group
    plain_best[unit_of[plain]] = best_all[plain]
    return kept, dropped, g_best, float(np.where(prob.grouped, g_best, plain_best).sum())


def bound(prob: Instance, lam: float) -> float:
    """The Lagrangian upper bound at token price ``lam`` (valid for every ``lam >= 0``): the
    :attr:`Prices.upper` of :func:`penalties`, without the penalties (what a solve whose gap
    is already small needs alone)."""
    in_group = prob.grouped[prob.unit_of]
    reduced = prob.values - lam * prob.costs
    n = prob.n
    best_all = np.where(prob.allowed, reduced, -np.inf).max(axis=1) if n else np.zeros(0)
    best_nd = np.where(prob.allowed & NON_DROP, reduced, -np.inf).max(axis=1) if n else np.zeros(0)
    return lam * prob.budget + _unit_bests(prob, best_all, best_nd, in_group)[3]
