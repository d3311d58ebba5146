"""Where a trimmed entry's cuts fall (:func:`salience.selector.render._snap`), against its definition;
what a stub says and what it costs; the ids :func:`~salience.selector.render.marker_ids` reads back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from salience.selector.render import SIZE_MIN, _snap, marker_ids, quote_value, stub_text, trim_text
from salience.tokens import TokenCounter

SAMPLES = Path(__file__).resolve().parents[1] / "data"


def snap_by_definition(text: str, pos: int, span: int, *, after: bool) -> int:
    """The nearest line start within ``span`` characters, else the nearest word start within
    40, else ``pos``; a tie goes to the side ``after`` names (the later start when True)."""
    n = len(text)
    if pos <= 0 or pos >= n:
        return max(0, min(pos, n))
    for sep, width in (("\n", max(1, span)), (" ", min(40, max(1, span)))):
        starts = [c + 1 for c in range(max(0, pos - width), min(n, pos + width)) if text[c] == sep]
        before = [s for s in starts if s <= pos]
        later = [s for s in starts if s > pos]
        cands = ([max(before)] if before else []) + ([min(later)] if later else [])
        if cands:
            return min(cands, key=lambda c: (abs(c - pos), -c if after else c))
    return pos


@settings(max_examples=500, deadline=None)
@given(text=st.text(alphabet="ab \n", max_size=60), pos=st.integers(-2, 62), span=st.integers(-1, 70),
       after=st.booleans())
def test_snap_follows_its_definition(text: str, pos: int, span: int, after: bool) -> None:
    assert _snap(text, pos, span, after=after) == snap_by_definition(text, pos, span, after=after)


def test_a_stub_names_the_entry_its_values_and_its_size_from_size_min_and_costs_little() -> None:
    counter = TokenCounter()
    values = ["ZFA04Y", "HAT136", "2024-05-20", "mia_li_3668"]
    stub = stub_text("m12", tokens=812, values=values, max_values=3)
    assert stub == "[salience: archived m12: ZFA04Y, HAT136, 2024-05-20]"
    # the line it replaced (45 tokens here) named the role, the tool and the restore tool; the one
    # after it (33) the tool; the one after that (28) the size: the call kept beside a result's stub names
    # the tool, and an entry under SIZE_MIN tokens costs little to restore
    old = ("[salience: archived tool result m12 from get_reservation_details (812 tokens); values: ZFA04Y, HAT136, "
           "2024-05-20; restore id m12 via salience_restore]")
    assert counter.count(stub) <= 0.6 * counter.count(old)
    # the size from SIZE_MIN tokens: what restoring the entry would cost
    big = stub_text("m12", tokens=SIZE_MIN, values=values[:1])
    assert big == f"[salience: archived m12 ({SIZE_MIN} tokens): ZFA04Y]"
    assert stub_text("m12", tokens=SIZE_MIN - 1, values=values[:1]) == "[salience: archived m12: ZFA04Y]"
    # no values, no list
    assert stub_text("m3", tokens=40) == "[salience: archived m3]"
    # values are one line each, cut to 40 characters
    long = stub_text("m4", tokens=9, values=["a\nb   c", "x" * 60])
    assert long == "[salience: archived m4: a b c, " + "x" * 37 + "...]"


def test_a_stubbed_result_s_call_is_kept_beside_it_and_names_the_tool() -> None:
    """What lets a stub leave the tool's name out: in every compaction of the samples, a stubbed
    tool result's call is in the output (in some form, with its tool calls), and names the tool."""
    from salience import BudgetError, Compactor, load_transcripts
    from salience.scorer.baselines import RecencyScorer

    compactor, counter = Compactor(scorer=RecencyScorer()), TokenCounter()
    seen = 0
    for t in load_transcripts(SAMPLES):
        parents = t.parents()
        for share in (0.1, 0.25, 0.5):
            try:
                result = compactor.compact(t, budget=int(share * sum(counter.count_entries(t.entries))))
            except BudgetError:
                continue
            out = {e.id: e for e in result.messages.entries}
            for i, e in enumerate(t.entries):
                if e.role != "tool" or e.id not in result.stubbed:
                    continue
                seen += 1
                call = t.entries[parents[i]]
                assert call.id in out, (t.id, share, e.id)
                assert [c.name for c in out[call.id].tool_calls if c.id == e.tool_call_id] == [e.name], (t.id, e.id)
                size = counter.count_entry(e)
                assert out[e.id].content.startswith(f"[salience: archived {e.id}"
                                                    + (f" ({size} tokens)" if size >= SIZE_MIN else ""))
    assert seen > 0


def test_marker_ids_reads_back_what_stubs_and_trims_name() -> None:
    counter = TokenCounter()
    text = "\n".join(f"line {i} of a long log with some words" for i in range(60))
    trimmed = trim_text(text, 40, counter, entry_id="call_7")
    assert trimmed is not None
    stub = stub_text("m12", tokens=812, values=["HAT136 (1)", "x;y"])
    assert marker_ids(trimmed) == ["call_7"]
    assert marker_ids(stub) == ["m12"]
    for eid, tokens in (("D1:3", 40), ("D1:3", 4000), ("toolu_01A", 40)):  # ids with a colon; with a size or not
        assert marker_ids(stub_text(eid, tokens=tokens)) == [eid]
        assert marker_ids(stub_text(eid, tokens=tokens, values=["a: b", "c]"])) == [eid]
    assert marker_ids(f"{stub} and then {trimmed}") == ["m12", "call_7"]
    assert marker_ids("archived m12 (no marker)") == [] and marker_ids("[salience: restored m12]") == []


def test_a_trimmed_tool_result_lists_the_values_its_middle_held() -> None:
    """Trimmed in a compaction, a tool result's marker lists the ids only its cut middle held
    (a user turn's does not), the marker still names the entry, and restoring gives it back."""
    from salience import Compactor, Transcript

    rows = "\n".join(f"row {i}: flight HAT{100 + i} seat {i}A economy" for i in range(40))
    messages = [
        {"role": "user",
         "content": "Find flights.\n" + "\n".join(f"note {i} about booking ZX{i:02d}Q" for i in range(40))},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c0", "type": "function", "function": {"name": "search_flights", "arguments": '{"to": "LAX"}'}}]},
        {"role": "tool", "tool_call_id": "c0", "content": rows},
    ]
    compactor = Compactor(counter=TokenCounter(lambda text: len(text.split())), digest=0)
    source = Transcript.from_openai(messages)
    full = sum(compactor.counter.count_entry(e) for e in source.entries)
    # a third: the request cannot stay beside the result in any form (at half it stays whole, beside
    # the result's stub, which fits where the trim does not)
    result = compactor.compact(messages, budget=full // 3)
    trimmed = {e.id: e.content for e in result.transcript.entries if e.id in result.trimmed}
    assert "m2" in trimmed, (result.choices, trimmed)
    marker = next(line for line in trimmed["m2"].splitlines() if line.startswith("[salience: trimmed"))
    assert "; cut: HAT1" in marker and marker_ids(marker) == ["m2"]
    assert result.restore(list(result.archive)) == messages
    # the user turn, trimmed (as the newest entry here), lists none of its ids
    alone = compactor.compact(messages[:1], budget=compactor.counter.count_entry(source.entries[0]) // 2)
    assert "m0" in alone.trimmed and "cut:" not in alone.transcript.entries[0].content
    assert "ZX" in alone.transcript.entries[0].content  # it holds some ids, and its marker lists none of the cut ones


@pytest.mark.parametrize("max_values", [-1, 0, 1, 2, 3, 7])
def test_trim_lists_the_first_cut_values_in_order(max_values: int) -> None:
    """The marker lists the first ``max_values`` of the values that only the cut middle held, in
    the order given (values in the head or the tail, or in none of the text, are passed over):
    what listing all of them and keeping the first ``max_values`` gives."""
    words = TokenCounter(lambda t: len(t.split()))
    rows = [f"row {i} id{i:03d}X" for i in range(30)]
    text = "\n".join(rows)
    values = ["id000X", "nothere1", *[f"id{i:03d}X" for i in range(1, 30)], "id029X"]
    out = trim_text(text, 12, words, entry_id="m5", values=values, max_values=max_values)
    assert out is not None
    head, _, rest = out.partition("[salience:")
    marker, _, tail = rest.partition("]")
    middle_ids = [v for v in values if v in text and v not in head and v not in tail]
    want = [quote_value(v) for v in middle_ids][: max(0, max_values)]
    got = marker.partition("; cut: ")[2].split(", ") if "; cut: " in marker else []
    assert got == want
    assert len(middle_ids) > 7  # more cut values than any max_values here lists


def test_a_user_turn_s_stub_lists_the_handles_it_gave() -> None:
    """A username or a password is seldom a value (salience.values), and the stub of a user turn
    that gave them listed nothing; it lists the turn's handles now (a tool result's stub, its values)."""
    from salience import Compactor
    from salience.selector.options import entry_options, work_out
    from salience.transcript import Entry

    cfg = Compactor()._config(1000)
    text = ("Sure: Justin (justinkool), Virginia (decture) and Michael (mstein), all of them at 10 tomorrow, "
            "in the big room on the second floor of the office, as usual for our weekly sync")
    user = entry_options(cfg, None, Entry(id="m4", role="user", content=text))
    work_out(cfg, user)
    assert user.stub is not None and user.stub_cost < user.full_cost
    assert user.stub.content == "[salience: archived m4: Justin, justinkool, Virginia, decture, mstein]"
    assert user.stub_cover == 1.0
    # a handle inside a value it already lists is not listed again
    text = ("Please write to lara.jean@fmail.com and to lara.jean about the offsite that we planned for the "
            "whole team next week in the office")
    mail = entry_options(cfg, None, Entry(id="m7", role="user", content=text))
    work_out(cfg, mail)
    assert mail.stub is not None
    assert mail.stub.content == "[salience: archived m7: lara.jean@fmail.com, offsite]"
    tool = entry_options(cfg, None, Entry(id="m6", role="tool", content=text.replace("lara.jean@fmail.com", "her"),
                                          tool_call_id="c1", name="team"))
    work_out(cfg, tool)
    assert tool.stub is not None and tool.stub.content == "[salience: archived m6]"  # a result lists values alone


def test_the_latest_result_over_the_budget_keeps_as_much_as_fits() -> None:
    """The newest entry (a soft pin) that cannot stay whole is trimmed to what fits beside what
    must stay, not to ``trim_keep`` of it: a traceback a little over the budget keeps most of
    its lines, the output fits, and restoring gives the history back."""
    from salience import Compactor

    trace = "\n".join(f"    {i} total_{i} = price_{i} * qty_{i}" for i in range(40))
    messages = [
        {"role": "user", "content": "fix the totals"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c0", "type": "function", "function": {"name": "run", "arguments": '{"cmd": "pytest"}'}}]},
        {"role": "tool", "tool_call_id": "c0", "content": "Traceback (most recent call last):\n" + trace},
    ]
    words = TokenCounter(lambda text: len(text.split()))
    compactor = Compactor(counter=words, digest=0)
    full = sum(words.count_entry(e) for e in compactor.compact(messages, budget=10_000).transcript.entries)
    budget = full - 20  # the result cannot stay whole
    result = compactor.compact(messages, budget=budget)
    assert result.tokens <= budget
    assert "m2" in result.trimmed
    kept = next(e.content for e in result.transcript.entries if e.id == "m2")
    lines = sum(f"total_{i} = " in kept for i in range(40))
    assert lines >= 30, kept  # trim_keep (a quarter) would keep about 10 of the 40
    assert result.restore(list(result.archive)) == messages


@pytest.mark.parametrize("written", ["reply", "call"])
def test_the_latest_result_keeps_the_lines_that_quote_the_action_it_answers(written: str) -> None:
    """A traceback over the budget shows the agent's own code after its first frames, then the library's:
    the grown trim cuts the run of lines that quotes the fewest lines of the action the result
    answers, so the frame with the failing line stays, where a middle cut lost it; the output
    fits, and restoring gives the history back. The action may be written in the reply (MINT)
    or passed as a call's argument."""
    from salience import Compactor

    code = "def total(price, qty):\n    subtotal = price * qty\n    return subtotal + shipping_cost(qty)"
    frames = [f'  File "/usr/lib/python3/site-packages/lib_{i}.py", line {i}, in helper_{i}' for i in range(50)]
    trace = "\n".join(["Traceback (most recent call last):", *frames[:22], '  File "cell.py", line 3, in total',
                       "    return subtotal + shipping_cost(qty)", *frames[22:],
                       "NameError: name 'shipping_cost' is not defined"])
    if written == "reply":
        action: dict = {"role": "assistant", "content": f"<execute>\n{code}\n</execute>"}
        result_message: dict = {"role": "user", "content": "Observation:\n" + trace}
    else:
        args = json.dumps({"path": "cell.py", "content": code})
        action = {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c0", "type": "function", "function": {"name": "run_code", "arguments": args}}]}
        result_message = {"role": "tool", "tool_call_id": "c0", "content": trace}
    messages = [{"role": "user", "content": "make total() work"}, action, result_message]
    words = TokenCounter(lambda text: len(text.split()))
    compactor = Compactor(counter=words, digest=0)
    full = sum(words.count_entry(e) for e in compactor.compact(messages, budget=10_000).transcript.entries)
    result = compactor.compact(messages, budget=full - 120)  # the result cannot stay whole beside its action
    assert result.tokens <= full - 120
    assert "m2" in result.trimmed
    kept = next(e.content for e in result.transcript.entries if e.id == "m2")
    assert "return subtotal + shipping_cost(qty)" in kept, kept  # the middle cut loses it
    assert "NameError" in kept and kept.startswith(result_message["content"][:20])
    assert result.restore(list(result.archive)) == messages


def test_every_result_s_trim_keeps_the_lines_that_quote_the_action_it_answers() -> None:
    """Not only the newest result's: an older traceback's trimmed form (the trim_keep share) spares the
    frame that quotes the code of the action it answers, where a middle cut of the same size loses it."""
    from salience import Compactor
    from salience.selector.options import entry_options, rows, work_out
    from salience.selector.problem import TRIM
    from salience.transcript import Transcript

    code = "def total(price, qty):\n    subtotal = price * qty\n    return subtotal + shipping_cost(qty)"
    frames = [f'  File "/usr/lib/python3/site-packages/lib_{i}.py", line {i}, in helper_{i}' for i in range(100)]
    trace = "\n".join(["Traceback (most recent call last):", *frames[:15], '  File "cell.py", line 3, in total',
                       "    return subtotal + shipping_cost(qty)", *frames[15:],
                       "NameError: name 'shipping_cost' is not defined"])
    messages = [{"role": "user", "content": "make total() work"},
                {"role": "assistant", "content": f"<execute>\n{code}\n</execute>"},
                {"role": "user", "content": "Observation:\n" + trace},
                {"role": "assistant", "content": "shipping_cost is missing; shall I define it?"},
                {"role": "user", "content": "yes, a flat 5 per order"}]
    cfg = Compactor()._config(1000)
    source = Transcript.from_openai(messages, id="t")
    renders = rows(cfg, None, source).arrays(cfg)[0]
    trimmed = renders[2][TRIM]
    assert trimmed is not None and "[salience: trimmed" in trimmed.content
    assert "return subtotal + shipping_cost(qty)" in trimmed.content, trimmed.content
    plain = entry_options(cfg, None, source.entries[2])
    work_out(cfg, plain)  # the middle cut, quoting nothing
    assert plain.trim is not None and "return subtotal + shipping_cost(qty)" not in plain.trim.content
    assert len(trimmed.content.split()) <= len(plain.trim.content.split()) + 10  # about the same size


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet="ab\0.-", min_size=1, max_size=4), max_size=8),
       st.lists(st.text(alphabet="ab\0.-", min_size=1, max_size=6), max_size=8))
def test_outside_is_inside_no_value(strings: list[str], values: list[str]) -> None:
    """The one-search form of "inside none of the values" (a user turn's handles its stub adds) is
    the test against each value, NULs included."""
    from salience.selector.options import outside

    assert outside(strings, values) == [s for s in strings if not any(s in v for v in values)]


def test_an_observation_reused_after_another_action_is_trimmed_for_the_action_now_before_it() -> None:
    """An entry's forms are cached by the entry: the same observation object in a history whose
    action before it differs (the agent's code edited, the history rewritten) is trimmed for that
    action, as a cold compactor trims it, not for the one the cache first saw."""
    from salience import Compactor

    code = "def total(price, qty):\n    subtotal = price * qty\n    return subtotal + shipping_cost(qty)"
    frames = [f'  File "/usr/lib/python3/site-packages/lib_{i}.py", line {i}, in helper_{i}' for i in range(100)]
    trace = "\n".join(["Traceback (most recent call last):", *frames[:15], '  File "cell.py", line 3, in total',
                       "    return subtotal + shipping_cost(qty)", *frames[15:],
                       "NameError: name 'shipping_cost' is not defined"])
    observation = {"role": "user", "content": "Observation:\n" + trace}
    tail = [{"role": "assistant", "content": "shipping_cost is missing; shall I define it?"},
            {"role": "user", "content": "yes, a flat 5 per order"}]

    def history(action: str) -> list[dict]:
        return [{"role": "user", "content": "make total() work"},
                {"role": "assistant", "content": f"<execute>\n{action}\n</execute>"}, observation, *tail]

    words = TokenCounter(lambda text: len(text.split()))
    warm = Compactor(counter=words, digest=0)
    first = warm.compact(history("print('hello there world')"), budget=300)
    assert "return subtotal + shipping_cost(qty)" not in str(first.messages[2]["content"])  # nothing to spare
    again = warm.compact(history(code), budget=300)
    cold = Compactor(counter=words, digest=0).compact(history(code), budget=300)
    assert again.messages == cold.messages
    assert "return subtotal + shipping_cost(qty)" in str(again.messages[2]["content"])
