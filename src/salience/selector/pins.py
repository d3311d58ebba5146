"""What the soft pins are worth, and the pins held to their forms for the greedy solver.

Soft pins (the last ``pin_last`` entries, the last user turn with ``pin_last_user``) stay
whole whenever the budget allows and degrade, oldest first, before anything raises.
:func:`pin_worth` makes that the solver's objective: each step down of a pin outweighs
everything older. The exact and LP solvers keep that order; a greedy fill by efficiency
does not (a pin that costs much beside cheap entries goes first), so for it
:func:`strict_pins` holds each pin, newest first, to the best of its forms that still fits
before the rest is filled.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING

import numpy as np

from salience.errors import BudgetError
from salience.selector.problem import DROP, FULL, STUB, TRIM, WHOLE_ONLY

if TYPE_CHECKING:
    from salience.transcript import Entry

__all__ = ["PIN_FORMS", "PIN_RANKS", "empty_error", "grow_stub", "grow_trim", "hold_first_turn", "must_stay_error",
           "opens_with_user", "pin_worth", "strict_pins", "window_actions"]

#: What a soft pin's forms are worth, as shares of the pin's weight (see :func:`pin_worth`).
PIN_FORMS = np.array([1.0, 0.5, 0.25, 0.0])
#: How many of the newest soft pins degrade in strict order (see :func:`pin_worth`).
PIN_RANKS = 12


def pin_worth(values: np.ndarray, soft: np.ndarray) -> np.ndarray:
    """Extra worth that keeps soft pins as whole as the budget allows, newest first.

    Each step down of a soft pin (whole, trimmed, stubbed, dropped) costs more worth
    than everything else in the problem and every older pin are worth put together, so
    the solver gives up any amount of other entries before it degrades a pin, and
    degrades every older pin, down to dropping it, before a newer one: the newest pin
    (the result the agent answers) stays in its best form that fits, and the last user
    turn before it gives way first. (With weights that only grew with the rank, dropping
    the latest result whole could cost less than stubbing the user turn and trimming the
    result: ToolTalk, perfect scores, 25%: the latest result was dropped.) A pin's whole
    form gets its full weight, its trimmed form half, its stub a quarter, dropping it
    nothing. The order is strict among the newest :data:`PIN_RANKS` pins (each weighs about
    five times the one before it); older ones, below those, only weigh more the newer they
    are (each step down of one still costs more than every other entry), so that float sums
    keep the other entries' worths distinct however many pins there are.
    """
    base = float(values[~soft].max(axis=1).sum()) + 1.0
    idx = np.flatnonzero(soft)
    older, ranked = idx[: max(len(idx) - PIN_RANKS, 0)], idx[-PIN_RANKS:]
    weight = np.zeros(len(soft))
    # The unranked pins: each step down still costs more than every other entry is worth.
    weight[older] = base / PIN_FORMS[STUB] * (1.0 + np.arange(1, len(older) + 1) / max(len(older), 1))
    total = base + float(weight.sum())
    for i in ranked:
        weight[i] = total / PIN_FORMS[STUB] * (1.0 + 1e-9)  # its least step outweighs all before it
        total += weight[i]
    return weight[:, None] * PIN_FORMS[None, :]


def grow_trim(costs: np.ndarray, allowed: np.ndarray, soft: np.ndarray, budget: int,
              least: Callable[[np.ndarray], float],
              trim_to: Callable[[int, int], tuple[Entry, int] | None], spare: int = 0) -> dict[tuple[int, int], Entry]:
    """The newest soft pin, where it cannot stay whole beside what must stay, trimmed to keep
    as much as fits beside that instead of the ``trim_keep`` share: ``{(index, TRIM): trimmed entry}``,
    with its TRIM cost in ``costs`` raised to match; empty (``costs`` untouched) where there is
    no soft pin, it stays whole, no trim fits, the grown trim would keep no more, or the request
    fits beside the stub alone (below).

    ``spare``: what the newest user turn costs whole, where it is no pin and comes before the
    newest one (0 otherwise); the trim grows into what is left beside it too, wherever that
    leaves it room. A result of thousands of tokens took all the room, and the request it
    answers went: on BFCL's long-context set (``benchmarks/bench_bfcl.py``, never trained on),
    a 4,000-token stock list kept 2,400 tokens and dropped the 42-token question about it;
    there, system + 10%: 0.472 -> 0.485 of the independent references. Held out (leave one data
    set out, every step): airline's user turns kept whole 0.220 / 0.369 -> 0.230 / 0.380 at 10% /
    25%, its references 0.559 / 0.779 -> 0.557 / 0.780; the other four sets unchanged.

    Where even the trim's least form leaves the request no room and the stub does, the trim is
    not allowed (``allowed`` is changed): the result is stubbed (:func:`grow_stub` lists what
    fits) and the request it answers stays. A transaction list trimmed to 160 tokens took the
    room of "Spotify sent me a note that their prices increased 10% this month. Please send them
    the difference..." (AgentDojo's banking suite, never trained on): there, 25%, 0.571 -> 0.600
    of the independent references (AgentDojo 0.449 / 0.661 -> 0.452 / 0.673); held out, every
    figure the same or higher (airline 0.457 -> 0.460, by ours 0.559 / 0.779 -> 0.565 / 0.782;
    SWE-agent's copied code lines 0.824 -> 0.843 at 10%); BFCL the same to the digit.

    The newest pin is what the agent answers, and :func:`pin_worth` gives up every other
    entry before it degrades that pin, so its trimmed form is all it keeps of it: at a quarter,
    a traceback a few tokens over the budget kept its head and its last line and lost the
    code lines between them that the next action copies. Held out (leave one data set out,
    system + 10%): the code lines MINT's actions copy +0.001 -> +0.079 over the window,
    SWE-agent +0.318 -> +0.364 of the independent references; what the room went to before:
    airline's user turns kept whole 0.286 -> 0.272, MINT by our own definition +0.388 -> +0.369.
    ``least``: the cheapest selection's cost under an ``allowed`` matrix; ``trim_to(i, limit)``:
    entry ``i`` trimmed to at most ``limit`` tokens and what it costs, or ``None`` (the compactor's
    spares the lines that quote the action the entry answers: :func:`salience.selector.render.quoted_cut`).
    """
    if not soft.any():
        return {}
    i = int(np.flatnonzero(soft)[-1])
    if not (allowed[i, TRIM] and allowed[i, FULL]):
        return {}
    trial = allowed.copy()
    trial[i] = False
    trial[i, FULL] = True
    if least(trial) <= budget:
        return {}  # whole fits
    trial[i, FULL] = False
    trial[i, TRIM] = True
    slack = budget - least(trial)
    if 0 < spare and slack < spare and allowed[i, STUB]:  # no room for the request beside the trim: the stub?
        trial[i, TRIM], trial[i, STUB] = False, True
        if spare <= budget - least(trial):
            allowed[i, TRIM] = False  # the result is stubbed (grow_stub lists what fits), the request stays
            return {}
        trial[i, TRIM], trial[i, STUB] = True, False
    if 0 < spare <= slack:
        slack -= spare
    room = int(costs[i, TRIM] + slack)
    grown = trim_to(i, room) if slack > 0 else None
    if grown is None or not costs[i, TRIM] < grown[1] < costs[i, FULL] or grown[1] > room:
        return {}
    costs[i, TRIM] = grown[1]
    return {(i, TRIM): grown[0]}


def grow_stub(costs: np.ndarray, allowed: np.ndarray, soft: np.ndarray, budget: int,
              least: Callable[[np.ndarray], float],
              stub_to: Callable[[int, int], tuple[Entry, int] | None],
              request: int | None = None) -> dict[tuple[int, int], Entry]:
    """The newest soft pin, where neither its whole form nor its trim fits beside what must stay,
    stubbed with as many of its values as fit beside that (and beside the ``request``, the newest
    user turn where it is no pin and comes before the pin: whole where that fits, else in its least
    form kept) instead of ``stub_values``: ``{(index, STUB): stub}``, with
    its STUB cost in ``costs`` raised to match; empty (``costs`` untouched) otherwise.

    The newest pin is the result the agent answers; where the budget holds it only as a stub, its
    values are all that stays of it, and ``stub_values`` (8) of them were, the rest of the room
    left to older entries. Held out (leave one data set out), 10%: airline 0.537 -> 0.559 of our
    own references (independent 0.458 -> 0.457; its user turns whole 0.235 -> 0.222), SWE-agent
    0.545 -> 0.591 (one reference of 22); never trained on, AgentDojo 0.437 -> 0.449 (workspace
    0.420 -> 0.440, banking 0.286 -> 0.314), BFCL the same; 25% within 0.003 everywhere.
    ``stub_to(i, limit)``: entry ``i``'s stub listing as many values as ``limit`` tokens hold, and
    its cost, or ``None`` (:func:`salience.selector.options.stub_to`).
    """
    if not soft.any():
        return {}
    i = int(np.flatnonzero(soft)[-1])
    if not allowed[i, STUB]:
        return {}
    trial = allowed.copy()
    trial[i] = False
    for form in (FULL, TRIM):
        trial[i, form] = bool(allowed[i, form])
        if trial[i, form] and least(trial) <= budget:
            return {}  # a better form fits
        trial[i, form] = False
    trial[i, STUB] = True
    slack = budget - least(trial)
    if request is not None:  # room for the request: whole where that fits, else in its least form kept
        need = [c for c in costs[request, :DROP][allowed[request, :DROP]] if 0 < c <= slack]
        slack -= int(costs[request, FULL]) if costs[request, FULL] in need else min(need, default=0)
    if slack <= 0:
        return {}
    grown = stub_to(i, int(costs[i, STUB] + slack))
    if grown is None or not costs[i, STUB] < grown[1] <= costs[i, STUB] + slack:
        return {}
    costs[i, STUB] = grown[1]
    return {(i, STUB): grown[0]}


def strict_pins(allowed: np.ndarray, soft: np.ndarray, least: Callable[[np.ndarray], float],
                budget: int) -> np.ndarray:
    """``allowed`` with each soft pin, newest first, held to the best of its allowed forms
    (whole, trimmed, stubbed, dropped) with which the cheapest selection (``least``) still
    fits ``budget``, the newer pins held as chosen; a pin none of whose forms fits is left as
    it is (the solver then raises, or keeps the pins over budget). What :func:`pin_worth` asks
    of an exact solver, made sure of before a greedy one fills the rest."""
    held = allowed.copy()
    for i in np.flatnonzero(soft)[::-1].tolist():
        for form in (FULL, TRIM, STUB, DROP):
            if not held[i, form]:
                continue
            trial = held.copy()
            trial[i] = False
            trial[i, form] = True
            if least(trial) <= budget:
                held = trial
                break
    return held


def window_actions(sizes: np.ndarray, allowed: np.ndarray, system: np.ndarray, acting: np.ndarray,
                   least: Callable[[np.ndarray], float], budget: int) -> np.ndarray:
    """The acting entries (``acting``: the agent's calls and code actions, and the request it
    works on, its newest user turn) that a sliding window keeps whole at ``budget``, newest
    first, as many of them as can be held whole (``allowed`` left with only their whole form)
    while the cheapest selection (``least``) still fits; their indices.

    The window is the longest run of the newest non-system entries whose whole ``sizes`` fit
    beside the system entries' (observation masking keeps every action the same way and masks
    only observations). Held whole, they make sure a compaction never keeps fewer of the
    agent's own actions than the window does, wherever what must stay beside them allows.

    >>> costs = np.array([[50, 20, 5, 0], [30, 10, 5, 0], [40, 15, 5, 0], [20, 8, 5, 0]])
    >>> allowed = np.ones((4, 4), dtype=bool)
    >>> system = np.array([True, False, False, False])
    >>> acting = np.array([False, True, True, False])
    >>> least = lambda a: float(np.where(a, costs, 10**9).min(axis=1).sum())
    >>> window_actions(costs[:, 0], allowed, system, acting, least, budget=115).tolist()  # the window: 2, 3
    [2]
    >>> window_actions(costs[:, 0], allowed, system, acting, least, budget=140).tolist()  # every entry fits
    [2, 1]
    """
    rest = np.flatnonzero(~system)[::-1]  # newest first
    left = budget - float(sizes[system].sum())
    inside = int(np.searchsorted(np.cumsum(sizes[rest]), left, side="right"))
    window = rest[:inside]
    held = window[acting[window] & allowed[window, FULL]]

    def fits(k: int) -> bool:
        trial = allowed.copy()
        trial[held[:k]] = WHOLE_ONLY
        return least(trial) <= budget

    if not len(held) or fits(len(held)):
        return held
    lo, hi = 0, len(held)  # fits(lo), not fits(hi): holding more whole only costs more
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return held[:lo]


def empty_error(transcript_id: str, budget: int, need: float) -> BudgetError:
    """The error for a budget that holds no message, not even the latest in its cheapest form (``need``)."""
    required = int(math.ceil(need)) if np.isfinite(need) else 0
    cheapest = f" ({required} tokens)" if required else ""
    return BudgetError(
        f"budget of {budget} tokens is too small for transcript {transcript_id!r}: it holds no message, not "
        f"even the latest in its cheapest form{cheapest}, and providers refuse an empty list; raise the budget, "
        "or pass on_over_budget='keep_pins' to get the latest message, over budget",
        budget=budget, required=required)


def must_stay_error(transcript_id: str, budget: int, required: int | None, pins: int, *, system: bool,
                    anthropic: bool) -> BudgetError:
    """The error for a budget below what may not give way: system entries kept whole (``system``: with
    ``pin_system``), Anthropic's opening user turn (at least a stub), and the calls their results need.
    Every other pin may be trimmed, stubbed or dropped; ``pins`` is set on the error."""
    must = []
    if system:
        must.append("its system prompt, kept whole with pin_system=True")
    if anthropic:
        must.append("a user turn to open the messages, which Anthropic requires (the first, at least as a stub, "
                    "or a later one with none of what comes before it)")
    what = "; ".join(must) or "the tool calls and results that must stay together"
    need = f"would need {required} tokens" if required is not None else "cannot be kept with its tool groups"
    err = BudgetError(
        f"budget of {budget} tokens is too small for transcript {transcript_id!r}: what must stay ({what}) "
        f"{need}; every other entry, pinned or not, already gives way; raise the budget, shorten the system "
        "prompt, pass pin_system=False, or pass on_over_budget='keep_pins' to get that much, over budget",
        budget=budget, required=required or 0)
    err.pins = pins  # type: ignore[attr-defined]
    return err


def hold_first_turn(entries: Sequence[Entry], fixed: Collection[int], allowed: np.ndarray) -> None:
    """Anthropic wants the first message from the user: the first user turn (the first entry after
    the system's that ``allowed`` may keep: a session's settled drops go before it) may be trimmed
    or stubbed in ``allowed``, never dropped. Only where a selection chosen without it opens with
    something else (:func:`opens_with_user`): held always, it cost the newest request its place at
    small budgets (its stub or trim took the room)."""
    first = next((i for i, e in enumerate(entries) if e.role != "system" and allowed[i, :DROP].any()), None)
    if first is not None and first not in fixed and entries[first].role == "user":
        allowed[first, DROP] = False


def opens_with_user(entries: Sequence[Entry], choices: np.ndarray) -> bool:
    """Whether the first entry ``choices`` keeps after the system's is a user turn: the message
    Anthropic wants first (and some message it must have: the system prompt rides beside). A
    tool result is no user turn (it needs its call before it)."""
    kept = (i for i, c in enumerate(choices.tolist()) if c != DROP and entries[i].role != "system")
    first = next(kept, None)
    return first is not None and entries[first].role == "user"
