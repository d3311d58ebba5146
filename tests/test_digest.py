"""The digest (issue #14): one archived entry's stub that also lists the values of the
other archived entries that nothing kept whole shows, when that is worth more."""

from __future__ import annotations

import copy
import json
from typing import Any

import numpy as np
import pytest

from salience import Compactor
from salience.bench.references import tool_pairing_errors
from salience.errors import ParameterError
from salience.selector import run
from salience.selector.render import digest_part, marker_ids
from salience.selector.run import DIGEST_JOIN
from salience.tokens import TokenCounter
from salience.transcript import Transcript
from salience.values import extract_values

WORDS = TokenCounter(lambda text: len(text.split()))
DIGEST = DIGEST_JOIN


class Recent:
    """Scores that rise with position (the newest entry scores 1)."""

    def score(self, transcript: Transcript, query: str | None = None) -> np.ndarray:
        n = len(transcript.entries)
        return np.linspace(0.1, 1.0, n) if n else np.zeros(0)


def _call(i: int, name: str, args: str) -> dict[str, Any]:
    return {"role": "assistant", "content": None,
            "tool_calls": [{"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": args}}]}


def history() -> list[dict[str, Any]]:
    """A booking agent's history: four lookups, each result long and holding its own ids."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a booking agent."},
        {"role": "user", "content": "Hi, I am mia_li_3668 and I want to change my flights."},
    ]
    for i, (code, flight) in enumerate([("ZFA04Y", "HAT136"), ("K9P2QX", "HAT201"), ("T7M3ZR", "HAT045"),
                                        ("B2C8DE", "HAT290")]):
        messages.append({"role": "assistant", "content": f"Let me look up reservation number {i + 1}."})
        messages.append(_call(i, "get_reservation_details", f'{{"reservation_id": "{code}"}}'))
        messages.append({"role": "tool", "tool_call_id": f"c{i}",
                         "content": f"reservation {code} flight {flight} cabin economy " + "seat details " * 60})
    messages.append({"role": "user", "content": "Change the first one to business please."})
    return messages


def _values(entry: Any) -> set[str]:
    """An entry's values: its content's and its calls' arguments'."""
    return set(extract_values(entry.content or "")) | {v for c in entry.tool_calls for v in extract_values(c.arguments)}


def _digest(result: Any) -> tuple[int, str] | None:
    found = [(i, m["content"]) for i, m in enumerate(result.messages) if DIGEST in str(m.get("content"))]
    assert len(found) <= 1, "at most one digest"
    return found[0] if found else None


def test_digest_lists_archived_values_by_entry_within_the_budget() -> None:
    messages = history()
    before = copy.deepcopy(messages)
    compactor = Compactor(scorer=Recent(), counter=WORDS)
    result = compactor.compact(messages, budget=140)
    assert messages == before
    assert result.tokens <= 140 and not tool_pairing_errors(result.messages)
    found = _digest(result)
    assert found is not None, [m.get("content") for m in result.messages]
    _, text = found
    host = marker_ids(text)[0]
    assert host in result.stubbed and result.restore(list(result.archive)) == messages
    back = {e.id: e for e in result.restore_transcript([host]).entries}
    assert back[host] == result.archive[host] and DIGEST not in str(back[host].content)
    # every listed part names an archived entry, and lists only values that entry holds
    entries = {e.id: e for e in result.source.entries}
    listed = text.split(DIGEST, 1)[1].rstrip("]").split("; ")
    assert listed
    kept_values = set().union(*(_values(e) for e in result.transcript.entries if e.id in result.kept))
    for part in listed:
        ident, _, values = part.partition(": ")
        ident = ident.split(" ")[0]
        assert ident in result.archive and ident != host
        have = _values(entries[ident])
        for v in values.split(", "):
            assert v in have and v not in kept_values, (ident, v)
    # the oldest reservation code, out of sight without the digest, is in sight with it
    plain = Compactor(scorer=Recent(), counter=WORDS, digest=0).compact(messages, budget=140)
    assert _digest(plain) is None
    text_plain = "\n".join(str(m.get("content")) for m in plain.messages)
    text_digest = "\n".join(str(m.get("content")) for m in result.messages)
    assert "ZFA04Y" not in text_plain and "ZFA04Y" in text_digest


def test_no_digest_where_it_cannot_help() -> None:
    messages = history()
    # a budget that holds everything: nothing to digest
    assert _digest(Compactor(scorer=Recent(), counter=WORDS).compact(messages, budget=10_000)) is None
    # the pins whole (the system prompt, the last user turn: 18 tokens) leave under 16 tokens
    assert _digest(Compactor(scorer=Recent(), counter=WORDS).compact(messages, budget=30)) is None
    # a conversation: no tool call, no code action
    chat = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} about HAT{100 + i} " + "words " * 40}
            for i in range(12)]
    result = Compactor(scorer=Recent(), counter=WORDS).compact(chat, budget=150)
    assert result.stubbed or result.dropped
    assert _digest(result) is None


def test_a_digest_grows_into_the_room_the_pins_leave() -> None:
    """At 70 tokens the pins whole (18 tokens) leave 52, and the digest takes up to half the
    budget (35): every reservation code is in sight, the three that no kept entry shows in it."""
    messages = history()
    result = Compactor(scorer=Recent(), counter=WORDS).compact(messages, budget=70)
    assert result.tokens <= 70 and not tool_pairing_errors(result.messages)
    assert {"m0", "m14"} <= set(result.kept)  # the pins stay whole
    found = _digest(result)
    assert found is not None
    assert all(code in found[1] for code in ("ZFA04Y", "K9P2QX", "T7M3ZR"))
    assert "B2C8DE" in json.dumps(result.messages)


def test_a_session_lists_archived_values_too_and_keeps_what_it_settled() -> None:
    """A session's compaction lists archived values as a plain one does; the digest's host is then
    settled like any stub, so the next compaction keeps it as it was (a new list goes in a newer stub)."""
    messages = history()
    session = Compactor(scorer=Recent(), counter=WORDS).session(budget=200, trigger=1.0, min_removal=0, cache_min=0)
    first = session.compact(messages)
    found = _digest(first)
    assert found is not None and first.tokens <= 200 and not tool_pairing_errors(first.messages)
    assert _digest(Compactor(scorer=Recent(), counter=WORDS, digest=0).session(budget=200).compact(messages)) is None
    host = first.transcript.entries[found[0]]
    more = [*messages, {"role": "assistant", "content": "Which cabin for the return flight " + "please " * 90},
            {"role": "user", "content": "Business too, and keep seat 12A."}]
    second = session.compact(more)
    assert session.triggered and not session.recompacted and second.tokens <= 200
    assert {e.id: e for e in second.transcript.entries}[host.id] == host  # settled: the same rendering
    # at most one list more, in a newer entry's stub (the old one stands, settled)
    hosts = [e.id for e in second.transcript.entries if DIGEST in str(e.content)]
    assert hosts[0] == host.id and len(hosts) <= 2


@pytest.mark.parametrize("bad", [-0.1, 0.6, "0.2", True, None])
def test_digest_parameter_is_checked(bad: Any) -> None:
    with pytest.raises(ParameterError, match=r"parameter 'digest' must be a number in \[0, 0.5\]"):
        Compactor(scorer=Recent(), counter=WORDS, digest=bad).compact(history(), budget=150)


def test_a_digest_keeps_the_actions_the_answer_kept() -> None:
    """The agent's state-changing calls that the plain answer keeps stay in a digest's answer."""
    messages = history()
    edit = _call(9, "update_reservation_flights", '{"reservation_id": "K9P2QX", "cabin": "business"}')
    messages[8:8] = [edit, {"role": "tool", "tool_call_id": "c9", "content": "updated K9P2QX " + "ok " * 30}]
    seen = 0
    for budget in range(120, 260, 10):
        plain = Compactor(scorer=Recent(), counter=WORDS, digest=0).compact(messages, budget=budget)
        result = Compactor(scorer=Recent(), counter=WORDS, digest=0.5).compact(messages, budget=budget)
        assert result.tokens <= budget and not tool_pairing_errors(result.messages)
        if _digest(result) is None:
            continue
        seen += 1
        ids = {e.id for e in plain.transcript.entries if e.tool_calls and e.tool_calls[0].name.startswith("update")}
        assert ids <= {e.id for e in result.transcript.entries}, budget
    assert seen, "no budget gave a digest"


def test_a_digest_keeps_the_user_turns_the_answer_kept() -> None:
    """What the user said that the plain answer keeps stays, in the same form or a fuller one:
    a list of values is no stand-in for a request."""
    messages = history()
    messages[5:5] = [{"role": "user", "content": "Also keep my window seat and use the same card as last time."}]
    seen = 0
    for budget in range(60, 400, 5):
        plain = Compactor(scorer=Recent(), counter=WORDS, digest=0).compact(messages, budget=budget)
        result = Compactor(scorer=Recent(), counter=WORDS, digest=0.5).compact(messages, budget=budget)
        assert result.tokens <= budget and not tool_pairing_errors(result.messages)
        users = {e.id for e in plain.source.entries if e.role == "user"}
        if _digest(result) is None or not users & set(plain.kept):
            continue
        seen += 1
        assert users & set(plain.kept) <= set(result.kept), budget
        assert users & set(plain.trimmed) <= set(result.kept) | set(result.trimmed), budget
    assert seen, "no budget gave a digest beside a kept user turn"


def test_the_solver_gap_is_the_answer_s_own() -> None:
    """A digest solves a second problem; the gap reported is that of the answer returned."""
    seen = set()
    for budget in range(30, 700, 7):  # up to a budget that holds everything
        plain = Compactor(scorer=Recent(), counter=WORDS, solver="lp", digest=0).compact(history(), budget=budget)
        result = Compactor(scorer=Recent(), counter=WORDS, solver="lp").compact(history(), budget=budget)
        if _digest(result) is None:
            assert result.messages == plain.messages and result.solver_gap == plain.solver_gap, budget
            seen.add("plain")
        else:
            seen.add("digest")
    assert seen == {"plain", "digest"}


TOKEN = "e149636f-d9ca-0792"


def session_history() -> list[dict[str, Any]]:
    """An agent that logs in, then passes the session token to every call; the searches'
    results are long and hold many values of their own."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are an assistant with account tools."},
        {"role": "user", "content": "Log me in as kim_lee_42 with password Hx9kLm2pQ please."},
        _call(0, "UserLogin", '{"username": "kim_lee_42", "password": "Hx9kLm2pQ"}'),
        {"role": "tool", "tool_call_id": "c0", "content": f'{{"session_token": "{TOKEN}"}}'},
    ]
    for i in range(1, 4):
        messages.append(_call(i, "SearchEvents", f'{{"session_token": "{TOKEN}", "query": "meeting week {i}"}}'))
        messages.append({"role": "tool", "tool_call_id": f"c{i}",
                         "content": " ".join(f"event EV{i}{k:02d}X at room R{i}{k:02d}" for k in range(12))})
    messages.append({"role": "user", "content": "Now delete the second event of the first week."})
    return messages


class Results:
    """The searches' results score high, everything else low."""

    def score(self, transcript: Transcript, query: str | None = None) -> np.ndarray:
        return np.array([0.9 if e.role == "tool" and "event" in (e.content or "") else 0.05
                         for e in transcript.entries])


def test_digest_lists_the_values_calls_keep_passing_first() -> None:
    """A value that two or more of the agent's calls passed (a session token) is what the
    next call most likely passes again: the digest lists it first, under its newest archived
    holder (with that entry's other values), before better-scored entries' values."""
    messages = session_history()
    result = Compactor(scorer=Results(), counter=WORDS).compact(messages, budget=60)
    assert result.tokens <= 60 and not tool_pairing_errors(result.messages)
    found = _digest(result)
    assert found is not None, [m.get("content") for m in result.messages]
    listed = found[1].split(DIGEST, 1)[1].rstrip("]").split("; ")
    assert listed[0] == f"m8 (SearchEvents): {TOKEN}, meeting week 3"  # the newest holder, its values merged
    assert sum(part.startswith("m8 ") for part in listed) == 1
    assert result.restore(list(result.archive)) == messages


def creating_history() -> list[dict[str, Any]]:
    """An agent that logs in, looks at the calendar, then creates the same event twice: each
    create call passes seven values that an earlier call passed too, the session token last."""
    args = ('{{"name": "Weekly team sync", "event_type": "meeting", "location": "online room four", '
            '"attendees": ["justinkool", "salcano", "ahhchiu", "decture"], "start": "2023-09-{day} 09:00", '
            f'"session_token": "{TOKEN}"}}}}')
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are an assistant with calendar tools."},
        {"role": "user", "content": "Log me in as kim_lee_42 with password Hx9kLm2pQ please."},
        _call(0, "UserLogin", '{"username": "kim_lee_42", "password": "Hx9kLm2pQ"}'),
        {"role": "tool", "tool_call_id": "c0", "content": f'{{"session_token": "{TOKEN}"}}'},
        _call(1, "GetCalendar", f'{{"session_token": "{TOKEN}"}}'),
        {"role": "tool", "tool_call_id": "c1", "content": '{"events": []}'},
        {"role": "user", "content": "Set up the weekly team sync for the next two weeks."},
    ]
    for i, day in ((2, 17), (3, 24)):
        messages.append(_call(i, "CreateEvent", args.format(day=day)))
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": f'{{"event_id": "EV{i}7Q2"}}'})
    messages.append({"role": "user", "content": "Thanks. Now make it three weeks."})
    return messages


def test_a_digest_lists_as_many_recurring_values_as_fit_the_most_passed_first() -> None:
    """Where the newest archived holder's recurring values do not all fit, the digest lists as
    many as do under it, the value the most calls passed first (the session token, passed by
    three calls), rather than the token alone under an older holder."""
    messages = creating_history()
    budget = 40
    result = Compactor(scorer=Recent(), counter=WORDS).compact(messages, budget=budget)
    assert result.tokens <= budget and not tool_pairing_errors(result.messages)
    found = _digest(result)
    assert found is not None, [m.get("content") for m in result.messages]
    listed = found[1].split(DIGEST, 1)[1].rstrip("]").split("; ")
    assert listed[0].startswith(f"m9 (CreateEvent): {TOKEN}, Weekly team sync, "), listed
    assert "decture" not in found[1]  # not every one fits
    assert result.restore(list(result.archive)) == messages


def _ends_with_a_costly_call(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` with the last turn replaced by a call of 70-odd words and its short result."""
    messages[-1] = _call(4, "DeleteEvent", f'{{"session_token": "{TOKEN}", "note": "' + "word " * 70 + '"}')
    messages.append({"role": "tool", "tool_call_id": "c4", "content": "deleted"})
    return messages


def _lists_the_token(result: Any, messages: list[dict[str, Any]], budget: int) -> str:
    """The digest's text, once checked: within the budget, tool pairs whole, the token listed, all restorable."""
    assert result.tokens <= budget and not tool_pairing_errors(result.messages)
    found = _digest(result)
    assert found is not None, [m.get("content") for m in result.messages]
    assert TOKEN in found[1]
    assert result.restore(list(result.archive)) == messages
    return found[1]


def _newest_pair_cost(compactor: Compactor, result: Any) -> int:
    """What the newest result and the call it answers cost together, as ``compactor`` counts."""
    return sum(compactor.counter.count_entry(e) for e in result.source.entries[-2:])


def test_where_the_pins_cannot_be_whole_the_digest_still_lists_the_token() -> None:
    """At a small budget the call that the newest result answers may alone cost more than
    the budget: the pins degrade anyway, and a fifth of the budget is too little for a list.
    The digest then takes up to half of it, so the session token the calls kept passing is in
    sight (ToolTalk held out, 10%: what moved its recall past the window + 0.10)."""
    messages = _ends_with_a_costly_call(session_history())
    budget = 40
    compactor = Compactor(scorer=Results(), counter=WORDS)
    result = compactor.compact(messages, budget=budget)
    assert _newest_pair_cost(compactor, result) > budget  # the newest result cannot be kept with its call
    _lists_the_token(result, messages, budget)


class UsersBelowEvents:
    """The searches' results score 0.9, the user's turns 0.5, everything else (the login's result too) 0.05."""

    def score(self, transcript: Transcript, query: str | None = None) -> np.ndarray:
        return np.array([0.9 if e.role == "tool" and "event" in (e.content or "") else 0.5 if e.role == "user"
                         else 0.05 for e in transcript.entries])


def test_where_the_pins_cannot_be_whole_a_user_turn_may_give_way_to_the_digest() -> None:
    """Where even the newest result cannot stay with its call, the user turns the plain answer keeps
    are weighed like any entry beside the digest: the login request (its values passed once, so
    held before) gives way to its own stub, which lists the session token the calls keep passing
    beside the request's own handles (held out, ToolTalk at 10%: +0.122 -> +0.157 over the window).
    Where the pins can be whole, the user's turns keep their form (the tests above)."""
    messages = _ends_with_a_costly_call(session_history())
    before = copy.deepcopy(messages)
    budget = 36
    plain = Compactor(scorer=UsersBelowEvents(), counter=WORDS, digest=0).compact(messages, budget=budget)
    assert "m1" in plain.kept and TOKEN not in json.dumps(plain.messages)
    compactor = Compactor(scorer=UsersBelowEvents(), counter=WORDS)
    result = compactor.compact(messages, budget=budget)
    assert _newest_pair_cost(compactor, result) > budget  # the newest result cannot be kept with its call
    assert "kim_lee_42" in _lists_the_token(result, messages, budget)
    assert "m1" in result.stubbed and messages[1] in result.restore(["m1"])
    assert messages == before


def test_a_digest_part_gives_up_its_tool_s_name_before_its_values(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where an archived entry's part fits only without its tool's name, the digest lists the values
    under the entry's id alone: the name is the first thing to go (held out, ToolTalk at 10%: +0.157
    -> +0.172 over the window)."""
    messages = _ends_with_a_costly_call(session_history())
    budget = 60
    result = Compactor(scorer=Results(), counter=WORDS).compact(messages, budget=budget)
    found = _digest(result)
    assert found is not None, [m.get("content") for m in result.messages]
    assert result.tokens <= budget and not tool_pairing_errors(result.messages)
    part = next(p for p in found[1].split(DIGEST, 1)[1].rstrip("]").split("; ") if p.startswith("m9"))
    assert part.startswith("m9: EV300X, R300") and "EV311X" in part, part
    assert result.restore(list(result.archive)) == messages
    # with every part named, the digest has no room for them: m9's own stub lists its first eight alone
    monkeypatch.setattr(run, "fitting_part", lambda i, label, values, more, count, limit:
                        digest_part(i, label, values, more=more))
    named = Compactor(scorer=Results(), counter=WORDS).compact(messages, budget=budget)
    assert "EV311X" not in json.dumps(named.messages)


def test_a_digest_lists_the_agent_s_newest_action_first() -> None:
    """Where the agent's newest action cannot stay beside what must (its call alone costs more than
    the budget), the digest names it first with its values: what the agent just did stays in sight,
    rather than a history that ends as if the call had not been made."""
    messages = session_history()
    messages[-1] = _call(4, "CancelBooking", '{"booking_id": "BK7Q2Z9X", "note": "' + "word " * 70 + '"}')
    messages.append({"role": "tool", "tool_call_id": "c4", "content": "cancelled"})
    budget = 40
    result = Compactor(scorer=Results(), counter=WORDS).compact(messages, budget=budget)
    assert result.tokens <= budget and not tool_pairing_errors(result.messages)
    assert "m10" not in result.kept  # the CancelBooking call, archived
    found = _digest(result)
    assert found is not None, [m.get("content") for m in result.messages]
    listed = found[1].split(DIGEST, 1)[1].rstrip("]").split("; ")
    assert listed[0] == "m10 (CancelBooking): BK7Q2Z9X", listed
    assert result.restore(list(result.archive)) == messages


def test_the_digest_takes_what_the_pins_leave() -> None:
    """A long system prompt and a long last user turn leave the pins little room beside them,
    less than a fifth of the budget: the digest takes that room, so that every pin stays whole,
    and still lists the session token. (A fifth would have stubbed the last turn, and the
    answer was then worth less: no digest.)"""
    messages = session_history()
    messages[0] = {"role": "system", "content": "You are a calendar agent. " + "Follow the policy. " * 20}
    messages[-1] = {"role": "user", "content": "Now delete the second event of the first week, "
                    + "and please be careful " * 7}
    budget = 130  # the system prompt (68) and the last turn (41) whole leave 21, a fifth is 26
    result = Compactor(scorer=Results(), counter=WORDS).compact(messages, budget=budget)
    assert {"m0", f"m{len(messages) - 1}"} <= set(result.kept)  # the pins stay whole
    _lists_the_token(result, messages, budget)


def test_the_digest_takes_no_more_than_the_cheapest_answer_leaves() -> None:
    """Where the pins cannot be whole, the digest may take half the budget, but a long system
    prompt leaves less than that beside the cheapest answer: it then takes what that leaves,
    and still lists the session token."""
    messages = _ends_with_a_costly_call(session_history())
    messages[0] = {"role": "system", "content": "You are a calendar agent. " + "Follow the policy. " * 14}
    budget = 80  # the system prompt costs 50: half the budget would leave its solve no answer
    _lists_the_token(Compactor(scorer=Results(), counter=WORDS).compact(messages, budget=budget), messages, budget)


class Users:
    """The user's turns score high, everything else low."""

    def score(self, transcript: Transcript, query: str | None = None) -> np.ndarray:
        return np.array([0.9 if e.role == "user" else 0.05 for e in transcript.entries])


def _settled_history(first_turn: str) -> list[dict[str, Any]]:
    """A user who gives their name once; two calls pass it, and their results are long."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a shop agent."},
                                      {"role": "user", "content": first_turn}]
    for i, name in enumerate(["GetUser", "ListOrders"]):
        messages.append(_call(i, name, '{"username": "kim_lee_42"}'))
        messages.append({"role": "tool", "tool_call_id": f"c{i}",
                         "content": " ".join(f"order OR{i}{k:02d}Q on day D{k:02d}" for k in range(15))})
    messages.append({"role": "user", "content": "Now cancel the second order of the first list."})
    return messages


def test_an_older_user_turn_whose_values_calls_keep_passing_may_give_way_to_the_digest() -> None:
    """A user turn that the plain answer keeps stays in its form beside a digest, but for an older
    one whose every value two or more of the agent's calls passed: the digest may take it, and
    lists those values (first, as it lists every recurring value). A value no call passed, or
    the newest turn, keeps it whole."""
    taken = 0
    for first_turn, settled in (("I am kim_lee_42.", True), ("I am kim_lee_42, with card 4417.", False)):
        messages = _settled_history(first_turn)
        before = copy.deepcopy(messages)
        for budget in range(20, 120, 2):
            plain = Compactor(scorer=Users(), counter=WORDS, digest=0).compact(messages, budget=budget)
            result = Compactor(scorer=Users(), counter=WORDS).compact(messages, budget=budget)
            assert result.tokens <= budget and not tool_pairing_errors(result.messages)
            assert messages == before
            newest = f"m{len(messages) - 1}"
            assert newest not in plain.kept or newest in result.kept, budget
            if "m1" not in plain.kept or "m1" in result.kept:
                continue
            assert settled, (first_turn, budget)  # only a settled turn gives way
            found = _digest(result)
            assert found is not None and "kim_lee_42" in found[1], (budget, found)
            assert messages[1] in result.restore(["m1"])
            taken += 1
    assert taken, "no budget let the digest take the settled turn"


class UsersEqual:
    """Every user turn scores 0.5, everything else 0.05."""

    def score(self, transcript: Transcript, query: str | None = None) -> np.ndarray:
        return np.array([0.5 if e.role == "user" else 0.05 for e in transcript.entries])


_ACTED_ON_HISTORY: list[dict[str, Any]] = [
    {"role": "system", "content": "You are a travel agent."},
    {"role": "user", "content": "Also book flight HX4411 for me."},
    {"role": "user", "content": "First, my user id is u_77."},
    _call(0, "get_user", '{"user_id": "u_77"}'),
    {"role": "tool", "tool_call_id": "c0", "content": "user u_77 gold member " + "detail " * 30},
]


@pytest.mark.parametrize("newest", [False, True], ids=["older-turn", "newest-turn"])
def test_a_user_turn_the_agent_has_acted_on_weighs_less_than_a_request_still_pending(newest: bool) -> None:
    """Two user turns score alike; the agent's call has passed the newer one's value (the user id
    the lookup took, and answered), not the older one's: where only one fits, the selection keeps
    the request still pending (recency alone would keep the newer), whether the acted-on turn is
    an older one (a "Thanks." follows it) or the newest."""
    messages = _ACTED_ON_HISTORY if newest else [*_ACTED_ON_HISTORY, {"role": "user", "content": "Thanks."}]
    seen = 0
    for budget in range(12, 60):
        result = Compactor(scorer=UsersEqual(), counter=WORDS, digest=0).compact(messages, budget=budget)
        kept = {"m1", "m2"} & set(result.kept)
        if len(kept) == 1:
            seen += 1
            assert kept == {"m1"}, (budget, result.kept)
    assert seen, "no budget kept exactly one of the two turns"


class ResultsHigh:
    """Every tool result scores 0.6, every user turn 0.5, everything else 0.05."""

    def score(self, transcript: Transcript, query: str | None = None) -> np.ndarray:
        return np.array([{"tool": 0.6, "user": 0.5}.get(e.role, 0.05) for e in transcript.entries])


def test_the_newest_user_turn_keeps_its_form_beside_a_digest_even_where_its_values_recur() -> None:
    """The user's newest request names a user id that three calls have passed (a recurring value,
    which the digest lists), and the results score higher than the user's turns: wherever the
    answer without a digest keeps that request whole, and the pins can be whole, the answer with
    one keeps it whole too (an older turn like it may give way; the newest is what the agent
    answers now). Where the newest result cannot stay whole beside its call, every user turn may
    give way to the digest (see the test above): budgets below 35 here, where no digest fits as
    it stands, and one would with ``DIGEST_MIN`` at 10."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a travel agent."},
        {"role": "user", "content": "Find my trips, I am u_77."},
        _call(0, "get_user", '{"user_id": "u_77"}'),
        {"role": "tool", "tool_call_id": "c0", "content": "user u_77 card 4417 gold " + "detail " * 40},
        _call(1, "get_trips", '{"user_id": "u_77"}'),
        {"role": "tool", "tool_call_id": "c1", "content": "trips of u_77: HX4411 ZFA04Y " + "leg " * 40},
        {"role": "user", "content": "Now cancel everything booked for u_77 please."},
        _call(2, "cancel_all", '{"user_id": "u_77"}'),
        {"role": "tool", "tool_call_id": "c2", "content": "cancelled for u_77 " + "row " * 12},
    ]
    compared = 0
    for budget in range(30, 120, 2):
        undigested = Compactor(scorer=ResultsHigh(), counter=WORDS, digest=0)
        plain = undigested.compact(messages, budget=budget)
        pins = WORDS.count_entry(plain.source.entries[0]) + _newest_pair_cost(undigested, plain)  # system, last pair
        if "m6" not in plain.kept or pins > budget:
            continue
        compared += 1
        result = Compactor(scorer=ResultsHigh(), counter=WORDS).compact(messages, budget=budget)
        assert "m6" in result.kept, (budget, dict(result.choices))
    assert compared, "no budget kept the newest user turn whole"


def test_an_anthropic_digest_is_hosted_where_the_messages_still_open_with_a_user_turn() -> None:
    """Anthropic's messages open with a user turn. Where the newest archived entry (the natural
    host) is the assistant's reply before the request kept whole, the digest goes into an
    archived user turn's stub instead, which then opens the messages: the session token stays
    in sight (at this budget the host before the request left no digest at all)."""
    from salience.messages.validate import check_anthropic

    class Replies:
        """Results score high, the assistant's plain reply in between, the rest low."""

        def score(self, transcript: Transcript, query: str | None = None) -> np.ndarray:
            return np.array([0.9 if e.role == "tool" and "event" in (e.content or "")
                             else 0.6 if e.role == "assistant" and not e.tool_calls else 0.05
                             for e in transcript.entries])

    messages = session_history()
    messages.insert(-1, {"role": "assistant", "content": "I found the events of three weeks for you."})
    t = Transcript.from_openai(messages)
    source = t.to_anthropic()
    before = copy.deepcopy(source)
    result = Compactor(scorer=Replies(), counter=WORDS).compact(source, system=t.anthropic_system(), budget=42,
                                                                format="anthropic")
    assert source == before and result.tokens <= 42
    assert check_anthropic(result.messages) == [] and result.messages[0]["role"] == "user"
    sent = json.dumps(result.messages)
    assert DIGEST in sent and TOKEN in sent
    host = next(e for e in result.transcript.entries if DIGEST in (e.content or ""))
    assert host.role == "user" and host.id in result.stubbed
    assert result.restore(list(result.archive)) == source
