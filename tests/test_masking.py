"""Phase masking: policies, phase detection, and how limits reach the option matrix."""

from __future__ import annotations

import copy
import json
import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from salience.selector.masking import (
    Limit,
    Option,
    Phase,
    PhasePolicy,
    detect_phase,
    mask_options,
    tool_names,
    tool_types,
)
from salience.tooltypes import ToolType
from salience.transcript import Entry, ToolCall, Transcript

FULL, TRIM, STUB, DROP = 0, 1, 2, 3


def calls_then_results(*steps: tuple[str, ...] | str, user_after: bool = False) -> Transcript:
    """A transcript: a user turn, then per step an assistant calling the named tools and their results.

    A plain string step is a user turn.
    """
    entries = [Entry(id="u0", role="user", content="please help")]
    k = 0
    for s, step in enumerate(steps):
        if isinstance(step, str):
            entries.append(Entry(id=f"u{s + 1}", role="user", content=step))
            continue
        calls = []
        for name in step:
            calls.append(ToolCall(id=f"c{k}", name=name))
            k += 1
        entries.append(Entry(id=f"a{s}", role="assistant", tool_calls=tuple(calls)))
        for call in calls:
            entries.append(Entry(id=f"r{call.id}", role="tool", tool_call_id=call.id, content=f"output of {call.name}"))
    if user_after:
        entries.append(Entry(id="done", role="assistant", content="Done."))
        entries.append(Entry(id="thanks", role="user", content="Thanks"))
    return Transcript(id="t", entries=tuple(entries))


# -- Limit and PhasePolicy validation ------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"best": Option.DROP}, "field 'best' must be Option.FULL, Option.TRIM or Option.STUB"),
        ({"best": "keep"}, "field 'best'.*got 'keep'"),
        ({"best": 7}, "field 'best'"),
        ({"share": 0.0}, r"field 'share' must be a number in \(0, 1\]"),
        ({"share": 1.5}, "field 'share'.*got 1.5"),
        ({"share": True}, "field 'share'"),
    ],
    ids=["drop", "unknown-name", "int-out-of-range", "share-zero", "share-above-one", "share-bool"],
)
def test_limit_rejects_bad_values(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        Limit(**kwargs)


@pytest.mark.parametrize(
    ("value", "expected"),
    [("stub", Limit(Option.STUB)), (1, Limit(Option.TRIM)), ("FULL", Limit())],
    ids=["name", "int", "upper-name"],
)
def test_limit_accepts_option_names_and_ints(value: object, expected: Limit) -> None:
    assert Limit(value) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"rules": {}}, "field 'rules' must be a non-empty mapping"),
        ({"rules": {"sleep": {"read": "full"}}}, "a key of 'rules' must be a Phase.*got 'sleep'"),
        ({"rules": {"edit": {"teleport": "full"}}}, r"a key of rules\['edit'\] must be a ToolType.*got 'teleport'"),
        ({"rules": {"edit": {"read": "drop"}}}, r"rules\['edit'\]\['read'\] must be a Limit"),
        ({"rules": {"edit": {"read": "full"}}, "default": "verify"}, "field 'default' must be one of its phases"),
        ({"rules": {"edit": {"read": "full"}}, "default": "edit", "signals": {"verify": ["execute"]}},
         "signals name phase 'verify', which has no rules"),
        ({"rules": {"edit": {"read": "full"}}, "default": "edit", "window": 0}, "field 'window' must be an int >= 1"),
        ({"rules": {"edit": {"read": "full"}}, "default": "edit", "after_user": {"edit": "act"}},
         "after_user maps 'edit' to 'act'; both need rules"),
    ],
    ids=["empty-rules", "bad-phase", "bad-tool-type", "bad-limit", "default-not-a-phase", "signal-without-rules",
         "window-zero", "after-user-unknown"],
)
def test_policy_validation_names_the_field(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        PhasePolicy(name="mine", **kwargs)


def test_policy_is_frozen_hashable_and_comparable() -> None:
    a, b = PhasePolicy.coding(), PhasePolicy.coding()
    assert a == b and hash(a) == hash(b)
    assert a != PhasePolicy.customer_service()
    with pytest.raises(AttributeError):
        a.window = 3  # type: ignore[misc]
    with pytest.raises(TypeError):
        a.rules[Phase.EDIT] = {}  # type: ignore[index]
    assert a.replace(window=3).window == 3 and a.window == 6


def test_policy_normalises_shorthand_limits() -> None:
    policy = PhasePolicy(name="mine", rules={"edit": {"search": ("trim", 0.5), "read": "stub"}}, default="edit")
    assert policy.limit("edit", "search") == Limit(Option.TRIM, 0.5)
    assert policy.limit(Phase.EDIT, ToolType.READ) == Limit(Option.STUB)
    assert policy.limit(Phase.EDIT, ToolType.WEB) == Limit()  # no rule, no OTHER rule: FULL


# -- default policies ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("phase", "kind", "best", "share"),
    [
        (Phase.EDIT, ToolType.SEARCH, Option.STUB, None),
        (Phase.EDIT, ToolType.READ, Option.FULL, 0.6),
        (Phase.VERIFY, ToolType.EXECUTE, Option.FULL, 0.6),
        (Phase.VERIFY, ToolType.READ, Option.TRIM, 0.4),
        (Phase.EXPLORE, ToolType.SEARCH, Option.FULL, None),
        (Phase.EXPLORE, ToolType.EXECUTE, Option.TRIM, 0.3),
    ],
    ids=["edit-search", "edit-read", "verify-exec", "verify-read", "explore-search", "explore-exec"],
)
def test_coding_defaults(phase: Phase, kind: ToolType, best: Option, share: float | None) -> None:
    assert PhasePolicy.coding().limit(phase, kind) == Limit(best, share)


def test_customer_service_defaults() -> None:
    cs = PhasePolicy.customer_service()
    assert cs.phases == (Phase.IDENTIFY, Phase.LOOKUP, Phase.ACT, Phase.CONFIRM)
    assert cs.limit(Phase.ACT, ToolType.DATABASE).best is Option.FULL
    assert cs.limit(Phase.CONFIRM, ToolType.SEARCH).best is Option.STUB
    assert cs.limit(Phase.IDENTIFY, ToolType.SEARCH).best is Option.FULL  # OTHER rule applies
    assert cs.masks


def test_chat_policy_never_masks() -> None:
    chat = PhasePolicy.chat()
    assert chat.phases == (Phase.CHAT,) and not chat.masks
    assert all(chat.limit(Phase.CHAT, k) == Limit() for k in ToolType)


@pytest.mark.parametrize(
    ("domain", "name"),
    [
        ("airline", "customer_service"), ("retail", "customer_service"), ("tau-bench", "customer_service"),
        ("tooltalk", "customer_service"), ("api-bank", "customer_service"),
        ("coding", "coding"), ("swe", "coding"), ("swe-agent", "coding"), ("code_generation", "coding"),
        ("conversation", "chat"), ("locomo", "chat"), ("reasoning", "chat"), (None, "chat"),
    ],
    ids=lambda v: str(v),
)
def test_for_domain(domain: str | None, name: str) -> None:
    assert PhasePolicy.for_domain(domain).name == name


def test_check_phase_rejects_phases_of_other_domains() -> None:
    with pytest.raises(ValueError, match="phase must be one of policy 'coding'.*got 'confirm'"):
        PhasePolicy.coding().check_phase("confirm")
    with pytest.raises(ValueError, match="phase must be a Phase.*got 'lunch'"):
        PhasePolicy.coding().check_phase("lunch")


# -- tool names and types ----------------------------------------------------------------


def test_tool_names_come_from_the_call_when_the_entry_has_none() -> None:
    t = calls_then_results(("search_code", "read_file"))
    assert tool_names(t) == [None, None, "search_code", "read_file"]
    assert tool_types(t) == [None, None, ToolType.SEARCH, ToolType.READ]
    custom = PhasePolicy.coding().replace(tool_types={"search_code": "edit"})
    assert tool_types(t, custom)[2] is ToolType.EDIT


# -- phase detection -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("steps", "user_after", "expected"),
    [
        ((), False, Phase.EXPLORE),
        ((("read_file",), ("search_code",)), False, Phase.EXPLORE),
        ((("read_file",), ("edit_file",)), False, Phase.EDIT),
        ((("read_file",), ("edit_file",), ("run_tests",)), False, Phase.VERIFY),
        ((("run_tests",), ("read_file",)), False, Phase.EXPLORE),
        ((("edit_file", "run_tests"),), False, Phase.EDIT),  # a tie goes to the policy's earlier phase
    ],
    ids=["no-tools", "reads", "edit-last", "run-last", "read-after-run", "tie-in-one-turn"],
)
def test_detect_phase_coding(steps: tuple, user_after: bool, expected: Phase) -> None:
    assert detect_phase(calls_then_results(*steps, user_after=user_after), PhasePolicy.coding()) is expected


@pytest.mark.parametrize(
    ("steps", "user_after", "expected"),
    [
        ((), False, Phase.IDENTIFY),
        ((("think",),), False, Phase.IDENTIFY),
        ((("get_user_details",),), False, Phase.LOOKUP),
        ((("get_user_details",), ("book_reservation",)), False, Phase.ACT),
        ((("get_user_details",), ("book_reservation",)), True, Phase.CONFIRM),
        ((("get_user_details",), ("book_reservation",), ("think",)), False, Phase.ACT),
        ((("book_reservation",), "and one more thing", ("get_order_details",)), False, Phase.LOOKUP),
    ],
    ids=["no-tools", "scratch-only", "lookup", "act", "confirm-after-user", "think-is-neutral", "lookup-after-act"],
)
def test_detect_phase_customer_service(steps: tuple, user_after: bool, expected: Phase) -> None:
    t = calls_then_results(*steps, user_after=user_after)
    assert detect_phase(t, PhasePolicy.customer_service()) is expected


def test_detect_phase_reads_only_the_window() -> None:
    steps = [("edit_file",)] + [("frobnicate",)] * 6
    policy = PhasePolicy.coding()
    assert detect_phase(calls_then_results(*steps), policy) is Phase.EXPLORE  # the edit is out of the window
    assert detect_phase(calls_then_results(*steps), policy.replace(window=7)) is Phase.EDIT


def test_detect_phase_chat_is_always_chat() -> None:
    assert detect_phase(calls_then_results(("edit_file",)), PhasePolicy.chat()) is Phase.CHAT


# -- mask_options --------------------------------------------------------------------------


def _matrices(n: int, full: int = 100) -> tuple[np.ndarray, np.ndarray]:
    costs = np.tile(np.array([full, full // 2, 10, 0]), (n, 1))
    return np.ones((n, 4), dtype=bool), costs


def test_cap_limits_only_tool_entries_not_exempt() -> None:
    # u0, a0, search result, read result, a1(edit), edit result
    t = calls_then_results(("search_code", "read_file"), ("edit_file",))
    allowed, costs = _matrices(len(t))
    exempt = np.zeros(len(t), dtype=bool)
    exempt[-1] = True
    before = allowed.copy()
    out = mask_options(t, PhasePolicy.coding(), Phase.EDIT, allowed=allowed, costs=costs,
                       scores=np.full(len(t), 0.5), budget=10_000, exempt=exempt)
    assert (allowed == before).all(), "input matrix must not be modified"
    assert out[2].tolist() == [False, False, True, True]  # search result: stub at most
    assert out[3].tolist() == [True, True, True, True]  # read result: full (share 0.6 of 10,000 is plenty)
    assert out[[0, 1, 4]].all()  # user and assistant entries untouched
    assert out[5].all()  # exempt


def test_cap_keeps_the_cheapest_kept_option_when_none_is_left() -> None:
    t = calls_then_results(("search_code",))
    allowed, costs = _matrices(len(t))
    allowed[2] = [True, False, False, True]  # a short result: no trim, no stub
    out = mask_options(t, PhasePolicy.coding(), Phase.EDIT, allowed=allowed, costs=costs,
                       scores=np.zeros(len(t)), budget=10_000, exempt=np.zeros(len(t), dtype=bool))
    assert out[2].tolist() == [True, False, False, True]


def test_share_demotes_lowest_scored_first_until_under_share() -> None:
    # Four run outputs of 100 tokens in VERIFY: execute may take 60% of a 400-token budget = 240.
    t = calls_then_results(("run_tests",), ("run_tests",), ("run_tests",), ("run_tests",))
    n = len(t)
    allowed, costs = _matrices(n)
    runs = [i for i, e in enumerate(t.entries) if e.role == "tool"]
    scores = np.zeros(n)
    scores[runs] = [0.9, 0.1, 0.5, 0.3]
    out = mask_options(t, PhasePolicy.coding(), Phase.VERIFY, allowed=allowed, costs=costs, scores=scores,
                       budget=400, exempt=np.zeros(n, dtype=bool))
    best = [int(np.flatnonzero(out[i, :3])[0]) for i in runs]
    # 400 > 240: the 0.1 goes to TRIM (350), the 0.3 to TRIM (300), the 0.5 to TRIM (250), the 0.9 to TRIM (200).
    assert best == [TRIM, TRIM, TRIM, TRIM]
    out = mask_options(t, PhasePolicy.coding(), Phase.VERIFY, allowed=allowed, costs=costs, scores=scores,
                       budget=500, exempt=np.zeros(n, dtype=bool))
    best = [int(np.flatnonzero(out[i, :3])[0]) for i in runs]
    # cap 300: demoting the 0.1 (350) then the 0.3 (300) is enough.
    assert best == [FULL, TRIM, FULL, TRIM]


def test_share_goes_down_to_stub_at_most_and_spares_exempt_entries() -> None:
    t = calls_then_results(("run_tests",), ("run_tests",))
    n = len(t)
    allowed, costs = _matrices(n)
    runs = [i for i, e in enumerate(t.entries) if e.role == "tool"]
    exempt = np.zeros(n, dtype=bool)
    exempt[runs[1]] = True
    out = mask_options(t, PhasePolicy.coding(), Phase.VERIFY, allowed=allowed, costs=costs,
                       scores=np.zeros(n), budget=10, exempt=exempt)
    assert out[runs[0]].tolist() == [False, False, True, True]  # at the floor, DROP still the solver's call
    assert out[runs[1]].all()


def test_mask_options_checks_shapes_and_phase() -> None:
    t = calls_then_results(("run_tests",))
    allowed, costs = _matrices(len(t))
    with pytest.raises(ValueError, match=r"must have shape \(3, 4\)"):
        mask_options(t, PhasePolicy.coding(), Phase.VERIFY, allowed=allowed[:2], costs=costs, scores=np.zeros(3),
                     budget=10, exempt=np.zeros(3, dtype=bool))
    with pytest.raises(ValueError, match="phase must be one of policy 'coding'"):
        mask_options(t, PhasePolicy.coding(), Phase.ACT, allowed=allowed, costs=costs, scores=np.zeros(3),
                     budget=10, exempt=np.zeros(3, dtype=bool))


def test_chat_policy_returns_the_matrix_unchanged() -> None:
    t = calls_then_results(("search_code",))
    allowed, costs = _matrices(len(t))
    out = mask_options(t, PhasePolicy.chat(), Phase.CHAT, allowed=allowed, costs=costs, scores=np.zeros(len(t)),
                       budget=1, exempt=np.zeros(len(t), dtype=bool))
    assert (out == allowed).all() and out is not allowed


def test_tool_names_follow_reused_call_ids_to_the_right_call() -> None:
    t = Transcript(id="t", entries=(
        Entry(id="a0", role="assistant", tool_calls=(ToolCall(id="c", name="search_code"),)),
        Entry(id="r0", role="tool", tool_call_id="c", content="hits"),
        Entry(id="a1", role="assistant", tool_calls=(ToolCall(id="c", name="run_tests"),)),
        Entry(id="r1", role="tool", tool_call_id="c", content="passed"),
    ))
    assert tool_names(t) == [None, "search_code", None, "run_tests"]


@pytest.mark.parametrize("policy", [PhasePolicy.coding(), PhasePolicy.customer_service(), PhasePolicy.chat(),
                                    PhasePolicy(name="mine", rules={"edit": {"read": (Option.TRIM, 0.2)}},
                                                default="edit", window=3, tool_types={"cat": "read"})],
                         ids=lambda p: p.name)
def test_policy_round_trips_through_json(policy: PhasePolicy) -> None:
    data = json.loads(json.dumps(policy.as_dict()))
    assert PhasePolicy.from_dict(data) == policy


@st.composite
def policies(draw: st.DrawFn) -> PhasePolicy:
    phases = draw(st.lists(st.sampled_from(list(Phase)), min_size=1, max_size=4, unique=True))
    limit = st.builds(Limit, st.sampled_from([Option.FULL, Option.TRIM, Option.STUB]),
                      st.none() | st.floats(0.01, 1.0))
    rules = {ph: draw(st.dictionaries(st.sampled_from(list(ToolType)), limit, min_size=1, max_size=4)) for ph in phases}
    types = st.sampled_from(list(ToolType))
    signals = {ph: draw(st.sets(types, max_size=3)) for ph in draw(st.sets(st.sampled_from(phases)))}
    after = {a: draw(st.sampled_from(phases)) for a in draw(st.sets(st.sampled_from(phases)))}
    names = st.text("abc_", min_size=1, max_size=6)
    return PhasePolicy(name=draw(names), rules=rules, signals=signals, default=draw(st.sampled_from(phases)),
                       after_user=after, window=draw(st.integers(1, 12)),
                       tool_types=draw(st.dictionaries(names, st.sampled_from(list(ToolType)), max_size=3)))


@settings(max_examples=150, deadline=None)
@given(policies())
def test_any_policy_round_trips_through_json_and_pickle(policy: PhasePolicy) -> None:
    assert PhasePolicy.from_dict(json.loads(json.dumps(policy.as_dict()))) == policy
    assert pickle.loads(pickle.dumps(policy)) == policy


def test_policy_pickles_and_copies() -> None:
    policy = PhasePolicy.coding()
    for again in (pickle.loads(pickle.dumps(policy)), copy.deepcopy(policy), copy.copy(policy)):
        assert again == policy and again.limit(Phase.VERIFY, ToolType.EXECUTE) == Limit(Option.FULL, 0.6)


@pytest.mark.parametrize(
    ("data", "match"),
    [
        ([1], "expected a mapping of the policy's fields"),
        ({"name": "x", "rules": {"chat": {}}, "colour": 1}, r"unknown keys \['colour'\]"),
        ({"name": "x"}, "missing 'rules'"),
        ({"rules": {"chat": {"other": "full"}}}, "missing 'name'"),
        ({"name": "x", "rules": {"edit": {"read": ["trim", 2]}}}, r"rules\['edit'\]\['read'\] must be"),
        ({"name": "x", "rules": {"nap": {"read": "full"}}}, "a key of 'rules' must be a Phase"),
    ],
    ids=["type", "unknown", "no-rules", "no-name", "share", "phase"],
)
def test_policy_from_dict_names_what_is_wrong(data: object, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        PhasePolicy.from_dict(data)  # type: ignore[arg-type]
