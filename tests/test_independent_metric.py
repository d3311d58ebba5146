"""The independent reference definition, code support, the baselines and the runner
(salience.bench.independent) on small hand-written OpenAI message lists."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from salience import BudgetError, Transcript
from salience.bench.independent import (
    CLEARED,
    OMITTED,
    actions_kept,
    anthropic_compactor_selector,
    baseline_selectors,
    code_references,
    compactor_selector,
    evaluate,
    history_budget,
    independent_references,
    is_action,
    keep_last_tool_results,
    message_text,
    messages_tokens,
    observation_masking,
    paired_bootstrap,
    reference_strings,
    sliding_window,
    tool_pairing_errors,
    value_stub_masking,
    visible,
)
from salience.errors import ParameterError


def words(text: str) -> int:
    return len(text.split())


def call(call_id: str, name: str, args: dict[str, Any] | str, content: str = "") -> dict[str, Any]:
    arguments = args if isinstance(args, str) else json.dumps(args)
    return {"role": "assistant", "content": content,
            "tool_calls": [{"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}]}


def result(call_id: str, content: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


SYSTEM = {"role": "system", "content": "You are the agent of Acme Air. Policy code POL-7781 applies."}
AIRLINE = [
    SYSTEM,
    {"role": "user", "content": "Please move my booking ZFA04Y to Boston; my name is Mia Li."},
    call("c1", "get_reservation", {"reservation_id": "ZFA04Y"}),
    result("c1", json.dumps({"reservation_id": "ZFA04Y", "flights": [{"number": "HAT136", "price": 1250}],
                             "payment": "credit_card_4421486"})),
    {"role": "assistant", "content": "I found it. Which date?"},
    {"role": "user", "content": "The 2024-05-17 please."},
    call("c2", "update_reservation", {
        "reservation_id": "ZFA04Y",
        "passenger": {"name": "Mia Li", "city": "Boston"},
        "flights": [{"number": "HAT136", "date": "2024-05-17", "price": 1250, "seats": 12}],
        "policy": "POL-7781",
        "payment": "credit_card_4421486",
        "notify": True,
        "fresh": "never-seen-before",
        "ab": "xy",
    }),
]


# --------------------------------------------------------------------------
# the reference definition
# --------------------------------------------------------------------------


def test_reference_strings_walk_every_level_and_skip_keys_and_short_values() -> None:
    args = '{"a": {"deep": [{"deeper": ["HAT136"]}], "n": 12, "m": 12345, "f": 1.25, "b": true}, "long_key_name": "ok"}'
    assert reference_strings(args) == ["HAT136", "12345", "1.25"]


def test_reference_strings_keep_number_literals_as_written() -> None:
    assert reference_strings('{"x": 1250.0, "y": -100, "z": 99}') == ["1250.0", "-100"]


@pytest.mark.parametrize("arguments", ["not json", "", "{unclosed"], ids=["text", "empty", "broken"])
def test_reference_strings_of_non_json_are_empty(arguments: str) -> None:
    assert reference_strings(arguments) == []


def test_independent_references_of_the_update_step() -> None:
    step = independent_references(AIRLINE, 6)
    # POL-7781 is in the system prompt; "never-seen-before" occurs nowhere earlier; "xy" and 12 are too short;
    # True is not a value
    assert step.refs == ("ZFA04Y", "Mia Li", "Boston", "HAT136", "2024-05-17", "1250", "credit_card_4421486")
    assert step.sources == (1, 1, 1, 3, 5, 3, 3)
    assert step.user_given == ("ZFA04Y", "Mia Li", "Boston", "2024-05-17")


def test_a_reference_first_seen_in_a_tool_result_is_not_user_given_even_if_a_user_repeats_it() -> None:
    messages = [
        {"role": "user", "content": "find my order"},
        call("c1", "find", {"q": "mine"}),
        result("c1", "order W8812"),
        {"role": "user", "content": "yes, W8812"},
        call("c2", "cancel", {"order": "W8812"}),
    ]
    step = independent_references(messages, 4)
    assert step.refs == ("W8812",)
    assert step.sources == (2,)
    assert step.user_given == ()


def test_a_reference_in_the_system_prompt_is_left_out_even_when_a_user_says_it() -> None:
    messages = [{"role": "system", "content": "Store id S-4410."}, {"role": "user", "content": "store S-4410"},
                call("c1", "open_store", {"store": "S-4410"})]
    assert independent_references(messages, 2).refs == ()


def test_earlier_tool_call_arguments_count_as_text() -> None:
    messages = [{"role": "user", "content": "go"}, call("c1", "lookup", {"sku": "SKU-99871"}),
                result("c1", "not found"), call("c2", "lookup_again", {"sku": "SKU-99871"})]
    step = independent_references(messages, 3)
    assert step.refs == ("SKU-99871",) and step.sources == (1,)


def test_a_message_that_calls_no_tool_is_not_a_step() -> None:
    assert independent_references(AIRLINE, 4).refs == ()


def test_message_text_and_budget() -> None:
    assert message_text(AIRLINE[2]) == 'get_reservation\n{"reservation_id": "ZFA04Y"}'
    assert message_text({"role": "tool", "name": "lookup", "content": "ok"}) == "ok"
    history = AIRLINE[:6]
    system = words(message_text(SYSTEM))
    other = sum(words(message_text(m)) for m in history[1:])
    assert history_budget(history, 0.25, words) == system + int(0.25 * other)
    assert history_budget([{"role": "user", "content": "hi"}], 0.1, words) == 1


# --------------------------------------------------------------------------
# code support
# --------------------------------------------------------------------------

CODING = [
    {"role": "system", "content": "You edit files. Shared helper: import numpy as np_helper_module"},
    {"role": "user", "content": "Fix the division bug in tests/missing_colon.py"},
    {"role": "assistant", "content": "Let me look.\n```\nopen tests/missing_colon.py\n```"},
    {"role": "tool", "content": "[File: tests/missing_colon.py]\n1:import numpy as np_helper_module\n"
                                "4:def division(a: float, b: float) -> float\n5:    return a/b\n6:)))))))))))))"},
    {"role": "assistant", "content": "```\nedit 4:5\ndef division(a: float, b: float) -> float\n"
                                     "    return a/b\n)))))))))))))\nimport numpy as np_helper_module\n"
                                     "    print('a brand new line')\nend_of_edit\n```"},
]


def test_code_references_are_copied_lines_and_paths() -> None:
    step = code_references(CODING, 4)
    # "return a/b" has 9 non-space characters, the parentheses are punctuation only,
    # the numpy import is in the system prompt, the print line was never observed
    assert step.lines == ("def division(a: float, b: float) -> float",)
    assert step.paths == ()  # the edit names no path
    assert code_references(CODING, 2).paths == ()  # the path was in the user's words, not an observation


def test_code_references_of_a_tool_call_read_its_decoded_strings() -> None:
    messages = [*CODING[:4], call("c9", "edit", {"path": "tests/missing_colon.py",
                                                 "search": "def division(a: float, b: float) -> float"})]
    step = code_references(messages, 4)
    assert step.lines == ("def division(a: float, b: float) -> float",)
    assert step.paths == ("tests/missing_colon.py",)


def test_mint_code_in_execute_tags_acts() -> None:
    messages = [{"role": "user", "content": "task"},
                {"role": "tool", "name": "python", "content": "Observation:\nresult_value = compute(31337)"},
                {"role": "assistant", "content": "<thought>x</thought>\n<execute>\nresult_value = compute(31337)\n"
                                                 "</execute>"}]
    assert code_references(messages, 2).lines == ("result_value = compute(31337)",)


def test_actions_kept_counts_whole_actions_only() -> None:
    history = CODING[:4]
    assert actions_kept(history, history) == (1, 1)
    cut = [*history[:2], {**history[2], "content": "Let me look."}, history[3]]
    assert actions_kept(history, cut) == (0, 1)


# --------------------------------------------------------------------------
# baselines
# --------------------------------------------------------------------------

LONG = [
    {"role": "system", "content": "be brief"},
    {"role": "user", "content": "book flight HAT136 for Mia Li"},
    call("a", "search", {"q": "HAT136"}),
    result("a", "HAT136 " + "seat " * 40 + "price 1250"),
    call("b", "user", {"name": "Mia Li"}),
    result("b", "user mia_li_3668 " + "detail " * 40),
    {"role": "assistant", "content": "Shall I book it?"},
    {"role": "user", "content": "yes please"},
]


def _ids(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**m, "id": f"m{i}"} for i, m in enumerate(messages)]


BASELINES = {
    "window": sliding_window,
    "observation_masking": observation_masking,
    "last3_tool_results": keep_last_tool_results,
    "value_stubs": value_stub_masking,
}


@pytest.mark.parametrize("name", list(BASELINES), ids=list(BASELINES))
@pytest.mark.parametrize("fraction", [0.05, 0.3, 0.6, 1.0], ids=["5%", "30%", "60%", "100%"])
def test_baselines_fit_keep_order_and_pairs(name: str, fraction: float) -> None:
    messages = _ids(LONG)
    budget = history_budget(messages, fraction, words)
    out = BASELINES[name](messages, budget, counter=words)
    assert messages_tokens(out, words) <= budget
    positions = [int(m["id"][1:]) for m in out]
    assert positions == sorted(set(positions))
    assert tool_pairing_errors(out) == []
    assert out[0]["role"] == "system"
    assert messages == _ids(LONG)  # the input is not touched


def test_window_is_contiguous_from_the_end_and_drops_an_orphan_result() -> None:
    messages = _ids(LONG)
    costs = [words(message_text(m)) for m in messages]
    # room for the last two messages and the tool result at index 5, but not its call: the result goes too
    budget = costs[0] + costs[7] + costs[6] + costs[5]
    out = sliding_window(messages, budget, counter=words)
    assert [m["id"] for m in out] == ["m0", "m6", "m7"]
    out = sliding_window(messages, budget + costs[4], counter=words)
    assert [m["id"] for m in out] == ["m0", "m4", "m5", "m6", "m7"]


def test_billed_window_charges_each_message_and_call_what_the_compactor_does() -> None:
    from salience import TokenCounter

    counter = TokenCounter(words)  # 3 a message and 3 a call beside the words, the defaults
    messages = _ids(LONG)
    # the same messages with those tokens written out: the text window over them is the billed one
    padded = [{**m, "content": (m.get("content") or "") + " x" * (3 + 3 * len(m.get("tool_calls") or []))}
              for m in messages]
    total = sum(words(message_text(m)) for m in padded)
    picked = set()
    for budget in range(1, total + 2):
        billed = [m["id"] for m in sliding_window(messages, budget, counter=counter, billed=True)]
        assert billed == [m["id"] for m in sliding_window(padded, budget, counter=words)]
        plain = [m["id"] for m in sliding_window(messages, budget, counter=counter)]
        assert set(billed) <= set(plain)  # charged more, it never keeps more
        picked.add(len(billed))
    assert len(picked) > 3  # the budgets cover several windows


def test_window_keeps_the_system_prompt_alone_when_nothing_else_fits() -> None:
    assert sliding_window(LONG, 1, counter=words) == [LONG[0]]


def test_observation_masking_masks_old_results_first() -> None:
    budget = history_budget(LONG, 0.6, words)
    out = keep_last_tool_results(LONG, budget, keep=1, counter=words)
    assert [m["content"] for m in out if m["role"] == "tool"] == [CLEARED, LONG[5]["content"]]
    out = observation_masking(LONG, budget, keep=0, counter=words)
    assert [m["content"] for m in out if m["role"] == "tool"] == [OMITTED, OMITTED]
    assert len(out) == len(LONG)


def test_value_stubs_keep_every_user_and_assistant_message_when_stubs_suffice() -> None:
    total = messages_tokens(LONG, words)
    budget = total - 30  # stubbing the older result (about 40 words saved) is enough
    out = value_stub_masking(LONG, budget, counter=words)
    assert len(out) == len(LONG)
    assert [m for m in out if m["role"] != "tool"] == [m for m in LONG if m["role"] != "tool"]
    first, second = (m["content"] for m in out if m["role"] == "tool")
    assert first.startswith("[tool result stubbed; values: ") and "HAT136" in first and "1250" in first
    assert "\n" not in first
    assert second == LONG[5]["content"]  # the newest result is left whole


def test_value_stubs_fall_back_to_the_window() -> None:
    budget = history_budget(LONG, 0.05, words)
    out = value_stub_masking(LONG, budget, counter=words)
    assert messages_tokens(out, words) <= budget
    assert len(out) < len(LONG)


@pytest.mark.parametrize("budget", [2.5, "10", True], ids=["float", "str", "bool"])
def test_baselines_refuse_a_budget_that_is_no_int(budget: Any) -> None:
    with pytest.raises(ValueError, match="budget must be an int"):
        sliding_window(LONG, budget)


def test_tool_pairing_errors_find_both_faults() -> None:
    assert tool_pairing_errors(LONG) == []
    assert tool_pairing_errors([LONG[0], LONG[3]]) == ["message 1: tool result for 'a' answers no earlier call"]
    assert tool_pairing_errors([LONG[0], LONG[2]]) == ["message 1: call 'a' has no result"]


# --------------------------------------------------------------------------
# property tests over generated histories
# --------------------------------------------------------------------------

_word = st.sampled_from(["alpha", "HAT136", "1250", "Mia", "Li", "seat", "ok", "W8812", "x"])
_text = st.lists(_word, min_size=0, max_size=12).map(" ".join)


@st.composite
def histories(draw: st.DrawFn) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if draw(st.booleans()):
        out.append({"role": "system", "content": draw(_text)})
    n_calls = 0
    for _ in range(draw(st.integers(0, 10))):
        kind = draw(st.sampled_from(["user", "assistant", "calls", "observation"]))
        if kind in ("user", "assistant"):
            out.append({"role": kind, "content": draw(_text)})
        elif kind == "observation":  # MINT: a tool turn answering no call
            out.append({"role": "tool", "name": "python", "content": draw(_text)})
        else:
            k = draw(st.integers(1, 3))
            ids = [f"c{n_calls + j}" for j in range(k)]
            n_calls += k
            out.append({"role": "assistant", "content": draw(_text), "tool_calls": [
                {"id": i, "type": "function", "function": {"name": "f", "arguments": json.dumps({"v": draw(_text)})}}
                for i in ids]})
            out.extend(result(i, draw(_text)) for i in ids)
    return _ids(out)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories(), st.sampled_from(list(BASELINES)), st.floats(0.0, 1.0))
def test_property_baselines_are_valid_ordered_and_within_budget(messages: list[dict[str, Any]], name: str,
                                                                 fraction: float) -> None:
    system = sum(words(message_text(m)) for m in messages if m["role"] == "system")
    budget = system + int(fraction * (messages_tokens(messages, words) - system))
    snapshot = json.dumps(messages)
    out = BASELINES[name](messages, budget, counter=words)
    assert messages_tokens(out, words) <= max(budget, system)
    positions = [int(m["id"][1:]) for m in out]
    assert positions == sorted(set(positions))
    assert tool_pairing_errors(out) == []
    assert [m for m in messages if m["role"] == "system"] == [m for m in out if m["role"] == "system"]
    assert json.dumps(messages) == snapshot
    if name == "window":  # the same message objects, contiguous from the end once the system prompt is set aside
        assert out == [messages[p] for p in positions]
        rest = [p for p, m in zip(positions, out) if m["role"] != "system"]
        others = [i for i, m in enumerate(messages) if m["role"] != "system"]
        assert rest == others[len(others) - len(rest):]
    if name == "value_stubs" and len(out) == len(messages):
        assert [m for m in out if m["role"] != "tool"] == [m for m in messages if m["role"] != "tool"]


# --------------------------------------------------------------------------
# the runner
# --------------------------------------------------------------------------


def _transcripts() -> list[Transcript]:
    return [Transcript.from_openai(AIRLINE, id="air"), Transcript.from_openai(CODING, id="code")]


def test_a_selector_raising_budget_error_scores_nothing_and_is_counted() -> None:
    def refuses(messages: Any, budget: int) -> Any:
        raise BudgetError("pins do not fit", budget=budget, required=budget + 1)

    def everything(messages: Any, budget: int) -> Any:
        return messages

    report = evaluate(_transcripts(), {"refuses": refuses, "everything": everything}, (1.0,), counter=words,
                      reference=None)
    refused = report.result("refuses", 1.0)
    kept = report.result("everything", 1.0)
    assert refused.budget_errors == refused.calls == report.steps > 0
    assert refused.independent.refs == kept.independent.refs == 1 + 7  # ZFA04Y at the first call, 7 at the second
    assert refused.independent.micro == 0.0 and refused.user_given.micro == 0.0
    assert refused.code.refs > 0 and refused.code.micro == 0.0 and refused.actions_kept == 0
    assert kept.independent.micro == kept.independent.macro == kept.user_given.micro == 1.0
    assert kept.code.micro == 1.0 and kept.ours.micro == 1.0 and kept.budget_errors == 0


def test_budget_errors_are_counted_apart_where_the_system_prompt_and_latest_message_fit() -> None:
    def refuses(messages: Any, budget: int) -> Any:
        raise BudgetError("pins do not fit", budget=budget, required=budget + 1)

    transcripts = [Transcript.from_openai(AIRLINE, id="air")]
    history = AIRLINE[:6]  # the last step's history: its latest message is the user's short answer
    floor = words(message_text(SYSTEM)) + words(message_text(history[-1]))
    assert history_budget(history, 0.05, words) < floor <= history_budget(history, 0.5, words)
    report = evaluate(transcripts, {"refuses": refuses}, (0.05, 0.5, 1.0), counter=words, reference=None)
    tight, half, whole = (report.result("refuses", f) for f in (0.05, 0.5, 1.0))
    assert tight.budget_errors == half.budget_errors == whole.budget_errors == report.steps == 2
    assert (tight.fitting, half.fitting, whole.fitting) == (0, 1, 2)  # at the first step the latest is the long ask
    assert (tight.budget_errors_fitting, half.budget_errors_fitting, whole.budget_errors_fitting) == (0, 1, 2)


def test_budget_errors_are_also_counted_where_the_floor_fits_as_billed() -> None:
    """``budget_errors_billed``: the BudgetErrors at a budget that holds the system entries, the
    latest entry and the call a latest result answers as the default counter bills them (with
    its overheads): what the compactor promises; the text-token floor is looser."""
    from salience.tokens import default_counter

    calls: list[tuple[int, int]] = []

    def refuses(messages: Any, budget: int) -> Any:
        calls.append((len(messages), budget))
        raise BudgetError("pins do not fit", budget=budget, required=budget + 1)

    t = Transcript.from_openai(AIRLINE, id="air")
    fractions = tuple(round(0.05 * k, 2) for k in range(1, 21))
    report = evaluate([t], {"refuses": refuses}, fractions, reference=None)  # cl100k over the text
    tc, parents = default_counter(), t.parents()
    expected = dict.fromkeys(fractions, 0)
    for k, (n, budget) in enumerate(calls):
        keep = {i for i, e in enumerate(t.entries[:n]) if e.role == "system"} | {n - 1}
        if parents[n - 1] >= 0:
            keep.add(parents[n - 1])
        expected[fractions[k % len(fractions)]] += sum(tc.count_entry(t.entries[i]) for i in keep) <= budget
    got = {f: report.result("refuses", f).budget_errors_billed for f in fractions}
    assert got == expected
    assert report.result("refuses", 1.0).to_dict()["budget_errors_billed"] == expected[1.0] > 0
    text = sum(report.result("refuses", f).budget_errors_fitting for f in fractions)
    assert sum(got.values()) < text  # some budgets hold the floor in text tokens but not as billed


def test_empty_lists_are_counted_where_the_system_prompt_and_latest_message_fit() -> None:
    # An empty list is no answer either (providers refuse it): counted beside the BudgetErrors.
    def nothing(messages: Any, budget: int) -> Any:
        return []

    report = evaluate([Transcript.from_openai(AIRLINE, id="air")], {"nothing": nothing}, (0.05, 0.5, 1.0),
                      counter=words, reference=None)
    tight, half, whole = (report.result("nothing", f) for f in (0.05, 0.5, 1.0))
    assert (tight.empty_fitting, half.empty_fitting, whole.empty_fitting) == (0, 1, 2)
    assert whole.budget_errors == 0 and whole.to_dict()["empty_fitting"] == 2


def test_an_output_over_budget_scores_nothing_and_is_counted() -> None:
    def everything(messages: Any, budget: int) -> Any:
        return messages

    report = evaluate(_transcripts(), {"everything": everything}, (0.1,), counter=words, reference=None)
    r = report.result("everything", 0.1)
    assert r.over_budget == r.calls == report.steps
    assert r.independent.seen == r.ours.seen == r.code.seen == 0


def test_compactor_selector_lets_budget_error_through_to_the_runner() -> None:
    class Refusing:
        def compact(self, messages: Any, *, budget: int) -> Any:
            raise BudgetError("no", budget=budget, required=budget + 1)

    report = evaluate(_transcripts(), {"salience": compactor_selector(Refusing()), **baseline_selectors(words)},
                      counter=words)
    assert report.result("salience", 0.1).budget_errors == report.steps
    assert report.result("window", 0.1).budget_errors == 0


def test_the_anthropic_selector_hands_over_anthropic_messages_and_is_measured_like_the_others() -> None:
    from salience import Compactor
    from salience.scorer.baselines import RecencyScorer

    seen: list[Any] = []

    class Recording(Compactor):
        def compact(self, messages: Any, **kw: Any) -> Any:
            seen.append((messages, kw))
            return super().compact(messages, **kw)

    select = anthropic_compactor_selector(Recording(scorer=RecencyScorer(), counter=words))
    for messages in (AIRLINE, CODING):
        # where everything fits, every message comes back as written, a call's arguments and ids too
        # (the round trip writes '{"a":1}' as '{"a": 1}', and 'c1.x' as 'c1_x', which Anthropic wants),
        # so a whole action counts as whole and a call keeps its result
        compact_args = [{**m, "tool_calls": [{**c, "id": c["id"] + ".x", "function": {**c["function"], "arguments":
            json.dumps(json.loads(c["function"]["arguments"]), separators=(",", ":"))}} for c in m["tool_calls"]]}
            if m.get("tool_calls") else {**m, "tool_call_id": m["tool_call_id"] + ".x"} if m.get("tool_call_id")
            else m for m in messages]
        assert select(compact_args, 10**6) == compact_args
        assert actions_kept(compact_args, select(compact_args, 10**6)) == actions_kept(compact_args, compact_args)
        tight = select(compact_args, history_budget(compact_args, 0.5, words))
        assert not tool_pairing_errors(tight) and all(m in compact_args for m in tight if m.get("tool_calls"))
    assert seen and all(kw["format"] == "anthropic" and all(m["role"] in ("user", "assistant") for m in messages)
                        for messages, kw in seen)
    assert all(kw["system"] for _, kw in seen)  # the system prompt rides beside, as Anthropic takes it
    report = evaluate(_transcripts(), {"anthropic": select}, (0.3, 0.6, 1.0), counter=words, reference=None)
    for f in (0.3, 0.6, 1.0):
        r = report.result("anthropic", f)
        assert r.over_budget == r.invalid == 0 and r.calls == report.steps > 0


def test_the_runner_is_deterministic_and_compares_actions_with_the_window() -> None:
    def drop_actions(messages: Any, budget: int) -> Any:
        return [m for m in sliding_window(messages, budget, counter=words) if not is_action(m)
                and m["role"] != "tool"]

    selectors = {**baseline_selectors(words), "drop_actions": drop_actions}
    first = evaluate(_transcripts(), selectors, (0.5, 1.0), counter=words)
    second = evaluate(_transcripts(), selectors, (0.5, 1.0), counter=words)
    assert [r.to_dict() | {"seconds": 0} for r in first.results] == \
        [r.to_dict() | {"seconds": 0} for r in second.results]
    window = first.result("window", 1.0)
    dropped = first.result("drop_actions", 1.0)
    assert window.actions_kept == window.actions_total > 0
    assert dropped.actions_kept == 0 and dropped.fewer_actions == dropped.action_steps > 0
    assert "independent_micro_100pct_window" in first.metrics()


def test_a_second_reference_counts_its_own_fewer_actions() -> None:
    def drop_actions(messages: Any, budget: int) -> Any:
        return [m for m in sliding_window(messages, budget, counter=words) if not is_action(m)
                and m["role"] != "tool"]

    selectors = {**baseline_selectors(words), "drop_actions": drop_actions}
    report = evaluate(_transcripts(), selectors, (1.0,), counter=words, second_reference="drop_actions")
    dropped = report.result("drop_actions", 1.0)
    assert dropped.fewer_actions == dropped.action_steps > 0  # against the window
    assert dropped.fewer_actions_second == 0  # against itself
    assert dropped.to_dict()["actions"]["fewer_than_second"] == 0
    assert report.result("window", 1.0).fewer_actions_second == 0
    with pytest.raises(ParameterError, match="nope"):
        evaluate(_transcripts(), selectors, (1.0,), counter=words, second_reference="nope")
    with pytest.raises(ParameterError, match="needs a reference"):
        evaluate(_transcripts(), selectors, (1.0,), counter=words, reference=None, second_reference="window")


def test_user_turns_count_whole_user_messages_and_no_list_of_their_values() -> None:
    def values_only(messages: Any, budget: int) -> Any:
        """Each user message replaced by its words one per line: its one-word values visible, no turn whole."""
        return [{**m, "content": "\n".join(str(m["content"]).split())} if m["role"] == "user" else m
                for m in messages]

    def no_users(messages: Any, budget: int) -> Any:
        return [m for m in messages if m["role"] != "user"]

    report = evaluate(_transcripts(), {"all": lambda m, b: list(m), "values_only": values_only, "no_users": no_users},
                      (1.0,), counter=words, reference=None)
    everything, listed, none = (report.result(name, 1.0) for name in ("all", "values_only", "no_users"))
    assert everything.user_turns.seen == everything.user_turns.refs > 0
    assert listed.user_turns.refs == everything.user_turns.refs and listed.user_turns.seen == 0
    assert listed.user_given.seen >= everything.user_given.seen - 1 > 0  # its values still seen (not "Mia Li")
    assert none.user_turns.seen == 0
    assert everything.to_dict()["user_turns"]["micro"] == 1.0
    assert report.metrics()["user_turns_kept_100pct_all"] == 1.0


def test_assistant_words_count_its_plain_messages_whole_and_not_its_actions() -> None:
    def no_plain_text(messages: Any, budget: int) -> Any:
        return [m for m in messages if m["role"] != "assistant" or is_action(m)]

    def half_of_each(messages: Any, budget: int) -> Any:
        return [{**m, "content": str(m["content"])[: len(str(m["content"])) // 2]}
                if m["role"] == "assistant" and not is_action(m) else m for m in messages]

    report = evaluate(_transcripts(), {"all": lambda m, b: list(m), "no_plain_text": no_plain_text,
                                       "half_of_each": half_of_each}, (1.0,), counter=words, reference=None)
    everything, dropped, halved = (report.result(name, 1.0) for name in ("all", "no_plain_text", "half_of_each"))
    assert everything.assistant_words.seen == everything.assistant_words.refs > 0
    assert dropped.assistant_words.seen == halved.assistant_words.seen == 0
    assert dropped.assistant_words.refs == everything.assistant_words.refs
    assert dropped.actions_kept == everything.actions_kept > 0  # its actions are another figure
    assert report.metrics()["assistant_words_kept_100pct_all"] == 1.0


MINT_LIKE = [  # observations without a call, as MINT's and SWE-agent's older runs log them
    {"role": "user", "content": "Compute the answer for case 31337 and print it."},
    {"role": "assistant", "content": "<execute>\nresult_value = compute(31337)\nprint(result_value)\n</execute>"},
    {"role": "tool", "name": "python", "content": "Observation:\nresult_value = compute(31337) -> 918273"},
    {"role": "assistant", "content": "<execute>\nresult_value = compute(31337)\ncheck(918273)\n</execute>"},
    {"role": "tool", "name": "python", "content": "Observation:\nok"},
    {"role": "assistant", "content": "<execute>\nfinal = check(918273)\n</execute>"},
]


def test_observations_can_reach_the_selectors_as_the_user_turns_raw_logs_carry() -> None:
    handed: dict[str, list[list[str]]] = {"tool": [], "user": []}

    def recorder(mode: str) -> Any:
        def select(messages: Any, budget: int) -> Any:
            handed[mode].append([m["role"] for m in messages])
            return list(messages)
        return select

    def no_users(messages: Any, budget: int) -> Any:
        return [m for m in messages if m["role"] != "user"]

    transcripts = [Transcript.from_openai(MINT_LIKE, id="mint")]
    reports = {mode: evaluate(transcripts, {"all": recorder(mode), "no_users": no_users}, (1.0,), counter=words,
                              reference=None, observations=mode) for mode in ("tool", "user")}
    assert handed["tool"] and all("tool" in roles for roles in handed["tool"] if len(roles) > 2)
    assert handed["user"] and not any("tool" in roles for roles in handed["user"])
    assert [r.count("user") for r in handed["user"]] == [1 + r.count("tool") for r in handed["tool"]]
    tool, user = (reports[m] for m in ("tool", "user"))
    # the same steps and references either way; only what the selectors were handed differs
    assert tool.steps == user.steps > 0
    for name in ("all", "no_users"):
        a, b = tool.result(name, 1.0), user.result(name, 1.0)
        assert (a.ours.refs, a.code.refs, a.user_turns.refs) == (b.ours.refs, b.code.refs, b.user_turns.refs)
    assert tool.result("all", 1.0).ours.seen == user.result("all", 1.0).ours.seen > 0
    assert user.result("no_users", 1.0).ours.seen < tool.result("no_users", 1.0).ours.seen  # 918273 went with them
    with pytest.raises(ParameterError, match="observations"):
        evaluate(transcripts, {"all": recorder("tool")}, (1.0,), counter=words, reference=None, observations="system")


def test_the_runner_spreads_at_most_max_steps_per_transcript() -> None:
    report = evaluate(_transcripts(), baseline_selectors(words), counter=words, max_steps=1)
    assert report.steps == 2
    with pytest.raises(ValueError, match="max_steps"):
        evaluate(_transcripts(), baseline_selectors(words), max_steps=0)
    with pytest.raises(ValueError, match="fraction"):
        evaluate(_transcripts(), baseline_selectors(words), (0.0,))


def test_visible_is_a_plain_substring_test() -> None:
    assert visible(["ZFA04Y", "zfa04y", "Boston"], AIRLINE[:2]) == 2


# --------------------------------------------------------------------------
# paired bootstrap over transcripts
# --------------------------------------------------------------------------


def test_the_runner_keeps_per_transcript_counts_that_add_up_to_the_totals() -> None:
    def refuses(messages: Any, budget: int) -> Any:
        raise BudgetError("no", budget=budget, required=budget + 1)

    def everything(messages: Any, budget: int) -> Any:
        return messages

    report = evaluate(_transcripts(), {"everything": everything, "refuses": refuses}, (1.0,), counter=words,
                      reference=None)
    assert report.transcript_ids == ("air", "code")
    for method in ("everything", "refuses"):
        r = report.result(method, 1.0)
        for recall, counts in ((r.independent, r.independent_by_transcript), (r.ours, r.ours_by_transcript)):
            assert len(counts.seen) == len(counts.refs) == 2
            assert (sum(counts.seen), sum(counts.refs)) == (recall.seen, recall.refs)
        assert r.independent_by_transcript.refs == (8, 0)  # the coding transcript calls no tool with a reference
        assert r.to_dict()["by_transcript"]["independent"] == {"seen": list(r.independent_by_transcript.seen),
                                                                "refs": [8, 0]}
    assert report.to_dict()["transcript_ids"] == ["air", "code"]
    d = report.difference("everything", "refuses", 1.0, "ours")
    assert math.isclose(d.difference, report.result("everything", 1.0).ours.micro)  # 1.0 - 0.0 ... over ours' refs
    assert d.transcripts == 2 and d.low <= d.difference <= d.high
    single = report.difference("everything", "refuses", 1.0)  # one transcript has independent references
    assert single.difference == 1.0 and single.transcripts == 1 and math.isnan(single.low)
    with pytest.raises(ValueError, match="definition"):
        report.difference("everything", "refuses", 1.0, "code")


def test_bootstrap_of_a_method_against_itself_is_zero_with_a_degenerate_interval() -> None:
    seen, refs = [3, 0, 5, 2, 7], [4, 2, 5, 6, 9]
    d = paired_bootstrap(seen, seen, refs)
    assert (d.difference, d.low, d.high) == (0.0, 0.0, 0.0)
    assert str(d) == "+0.000 [+0.000, +0.000]" and d.transcripts == 5 and d.resamples == 2000


def test_bootstrap_of_a_method_that_sees_everything_is_the_baselines_miss_share() -> None:
    refs = [4, 2, 5, 6, 9, 3]
    baseline = [3, 0, 5, 2, 7, 1]
    d = paired_bootstrap(refs, baseline, refs)
    assert math.isclose(d.difference, 1 - sum(baseline) / sum(refs))  # 11 of 29 missed
    assert 0.0 < d.low <= d.difference <= d.high <= 1.0
    assert d.to_dict()["difference"] == d.difference


def test_bootstrap_interval_contains_the_estimate_narrows_with_more_transcripts_and_is_seeded() -> None:
    import numpy as np

    rng = np.random.default_rng(7)
    refs = rng.integers(1, 12, 400)
    seen, baseline = rng.binomial(refs, 0.6), rng.binomial(refs, 0.45)
    few = paired_bootstrap(seen[:40], baseline[:40], refs[:40])
    many = paired_bootstrap(seen, baseline, refs)
    for d in (few, many):
        assert d.low < d.difference < d.high
    assert many.high - many.low < few.high - few.low
    assert paired_bootstrap(seen, baseline, refs) == many  # a fixed seed
    assert paired_bootstrap(seen, baseline, refs, seed=1) != many
    assert paired_bootstrap(seen, baseline, refs, confidence=0.5).high < many.high


def test_bootstrap_resamples_transcripts_not_steps() -> None:
    # One transcript carries the whole difference: resamples without it show none, so the
    # interval is wide, though it pools as many references as the even case below.
    dominated = paired_bootstrap([100] + [5] * 9, [0] + [5] * 9, [100] + [10] * 9)
    assert math.isclose(dominated.difference, 100 / 190)
    assert dominated.low <= 0.0 and dominated.high - dominated.low > 0.5
    # The same totals spread evenly over the transcripts: every resample agrees.
    even = paired_bootstrap([15] * 10, [5] * 10, [19] * 10)
    assert math.isclose(even.difference, dominated.difference)
    assert even.high - even.low < 1e-9


def test_bootstrap_leaves_out_transcripts_without_references_and_checks_its_input() -> None:
    assert paired_bootstrap([2, 0, 1], [1, 0, 1], [2, 0, 3]).transcripts == 2
    empty = paired_bootstrap([0, 0], [0, 0], [0, 0])
    assert empty.transcripts == 0 and math.isnan(empty.difference) and str(empty) == "- [-, -]"
    assert empty.to_dict()["low"] is None
    with pytest.raises(ValueError, match="lengths"):
        paired_bootstrap([1, 2], [1], [2, 2])
    with pytest.raises(ValueError, match="seen <= refs"):
        paired_bootstrap([3], [1], [2])
    with pytest.raises(ValueError, match="confidence"):
        paired_bootstrap([1, 1], [1, 1], [2, 2], confidence=95)
    with pytest.raises(ValueError, match="resamples"):
        paired_bootstrap([1, 1], [1, 1], [2, 2], resamples=0)


def test_the_runner_counts_the_steps_where_a_method_shows_fewer_references_than_the_window() -> None:
    def nothing_but_the_latest(messages: Any, budget: int) -> Any:
        return sliding_window(messages, budget, counter=words)[-1:]

    selectors = {**baseline_selectors(words), "latest": nothing_but_the_latest}
    report = evaluate(_transcripts(), selectors, (1.0,), counter=words)
    window, latest = report.result("window", 1.0), report.result("latest", 1.0)
    assert window.fewer_references == window.fewer_ours == 0  # against itself
    # at the whole budget the window shows every reference; the latest message alone shows fewer
    assert window.independent.seen == window.independent.refs > latest.independent.seen
    assert 0 < latest.fewer_references <= latest.independent.steps
    assert latest.fewer_references_lost == window.independent.seen - latest.independent.seen
    assert latest.fewer_ours_lost == window.ours.seen - latest.ours.seen > 0
    assert latest.more_references == latest.more_ours == window.more_references == 0
    assert latest.to_dict()["fewer_than_reference"]["independent"] == {
        "steps": latest.fewer_references, "references": latest.fewer_references_lost, "more_steps": 0}
    flipped = evaluate(_transcripts(), selectors, (1.0,), counter=words, reference="latest")
    assert flipped.result("window", 1.0).more_references == latest.fewer_references  # the same steps, seen from
    assert flipped.result("window", 1.0).fewer_references == 0                       # the other side
    unpaired = evaluate(_transcripts(), selectors, (1.0,), counter=words, reference=None)
    assert unpaired.result("latest", 1.0).fewer_references == 0  # nothing to compare with
    from rich.console import Console

    console = Console(record=True, width=300)
    console.print(report.table())
    console.print(unpaired.table())
    paired_text, unpaired_text = console.export_text().split("recall by the independent definition")[1:]
    assert "steps below window" in paired_text and "steps below" not in unpaired_text
    share = f"{latest.fewer_references / latest.independent.steps:.3f}"
    assert any(line.split("│")[1].strip() == "latest" and line.split("│")[3].strip() == share
               for line in paired_text.splitlines() if line.count("│") > 3)
