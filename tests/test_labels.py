"""Tests for salience.scorer.labels: hindsight and evidence labels, step references."""

from __future__ import annotations

import copy
import dataclasses
import json
import time

import pytest

from salience import Query, Transcript, TranscriptError
from salience.scorer.labels import (
    EntryLabel,
    LabelMode,
    StepRefs,
    evidence_labels,
    hindsight_labels,
    label,
    label_transcript,
    question_shares,
    step_references,
)


def call(cid: str, name: str, **args: object) -> dict:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


def airline_messages() -> list[dict]:
    """User gives an id; a tool result gives a reservation id used by the next call, and
    a flight number used two steps later; the last call invents a value of its own."""
    return [
        {"role": "system", "content": "You are an airline agent. Be brief."},                         # m0
        {"role": "user", "content": "Hi, my user id is mia_li_3668, please check my trip."},          # m1
        {"role": "assistant", "content": None, "tool_calls": [call("c1", "get_user_details",
                                                                    user_id="mia_li_3668")]},          # m2
        {"role": "tool", "tool_call_id": "c1", "name": "get_user_details",
         "content": json.dumps({"reservations": ["ZFA04Y"], "membership": "gold"})},                   # m3
        {"role": "assistant", "content": None, "tool_calls": [call("c2", "get_reservation_details",
                                                                    reservation_id="ZFA04Y")]},        # m4
        {"role": "tool", "tool_call_id": "c2", "name": "get_reservation_details",
         "content": json.dumps({"flights": [{"flight_number": "HAT136", "date": "2024-05-20"}]})},      # m5
        {"role": "assistant", "content": "Your reservation has one flight. Change it?"},              # m6
        {"role": "user", "content": "Yes, move it to the next day please."},                          # m7
        {"role": "assistant", "content": None, "tool_calls": [call("c3", "update_reservation_flights",
                                                                    reservation_id="ZFA04Y",
                                                                    flight_number="HAT136",
                                                                    note="ticket TKT98765")]},         # m8
        {"role": "tool", "tool_call_id": "c3", "name": "update_reservation_flights", "content": "ok"},   # m9
        {"role": "assistant", "content": "Done: HAT136 now flies on the next day."},                   # m10
    ]


@pytest.fixture
def airline() -> Transcript:
    return Transcript.from_openai(airline_messages(), id="airline", domain="airline")


# --------------------------------------------------------------------------
# hindsight labels
# --------------------------------------------------------------------------


def test_id_from_tool_result_used_by_next_call_is_needed_in_one(airline: Transcript) -> None:
    labels = hindsight_labels(airline)
    assert len(labels) == len(airline.entries)
    assert labels[3] == EntryLabel(needed=True, needed_in=1, used_by=("m4", "m8"), values=("ZFA04Y",))


def test_needed_in_counts_assistant_steps(airline: Transcript) -> None:
    # HAT136 first appears in m5; the next assistant step m6 does not use it, m8 does.
    lab = hindsight_labels(airline)[5]
    assert lab.needed and lab.needed_in == 2
    assert lab.used_by == ("m8", "m10")
    assert lab.values == ("HAT136",)


def test_user_message_with_the_user_id_is_needed(airline: Transcript) -> None:
    lab = hindsight_labels(airline)[1]
    assert lab.needed and lab.needed_in == 1 and lab.used_by == ("m2",) and lab.values == ("mia_li_3668",)


def test_value_first_appearing_in_the_step_itself_does_not_count(airline: Transcript) -> None:
    labels = hindsight_labels(airline)
    refs = step_references(airline)
    step8 = next(r for r in refs if r.step_id == "m8")
    assert "TKT98765" not in [v for v, _ in step8.refs]
    assert all("TKT98765" not in lab.values for lab in labels)
    # ... and a later step using it credits the step where it first appeared.
    t = Transcript.from_openai(
        [*airline_messages(), {"role": "user", "content": "ok"},
         {"role": "assistant", "content": "Your ticket is TKT98765."}], id="t2")
    assert hindsight_labels(t)[8].values == ("TKT98765",)


@pytest.mark.parametrize(
    ("index", "needed"),
    [(0, False), (6, False), (7, False), (9, False), (10, False)],
    ids=["system-unused", "assistant-text-unused", "user-no-values", "tool-ok", "last-step"],
)
def test_entries_whose_values_are_never_reused_are_not_needed(airline: Transcript, index: int, needed: bool) -> None:
    assert hindsight_labels(airline)[index] == EntryLabel(needed=needed)


def test_system_prompt_counts_like_any_entry() -> None:
    t = Transcript.from_openai([
        {"role": "system", "content": "Store id is store_4410; always pass it."},
        {"role": "user", "content": "list orders"},
        {"role": "assistant", "content": None, "tool_calls": [call("c1", "list_orders", store="store_4410")]},
    ], id="sys")
    assert hindsight_labels(t)[0] == EntryLabel(needed=True, needed_in=1, used_by=("m2",), values=("store_4410",))


def test_value_in_an_earlier_assistant_answer_credits_that_answer() -> None:
    t = Transcript.from_openai([
        {"role": "user", "content": "book something"},
        {"role": "assistant", "content": "I can offer flight HAT290."},
        {"role": "user", "content": "yes"},
        {"role": "assistant", "content": None, "tool_calls": [call("c1", "book", flight="HAT290")]},
    ], id="asst")
    assert hindsight_labels(t)[1] == EntryLabel(needed=True, needed_in=1, used_by=("m3",), values=("HAT290",))


def test_first_appearance_wins_and_matching_ignores_case() -> None:
    t = Transcript.from_openai([
        {"role": "user", "content": "order W4827113 please"},
        {"role": "assistant", "content": None, "tool_calls": [call("c1", "get", order="w4827113")]},
        {"role": "tool", "tool_call_id": "c1", "content": json.dumps({"order": "W4827113"})},
        {"role": "assistant", "content": "Order W4827113 is delivered."},
    ], id="case")
    labels = hindsight_labels(t)
    assert labels[0].used_by == ("m1", "m3")
    assert not labels[2].needed


def test_quoted_command_gives_the_path_inside_it() -> None:
    t = Transcript.from_openai([
        {"role": "user", "content": "`tool run --config configs/minimal.toml` crashes"},
        {"role": "assistant", "content": None, "tool_calls": [call("c1", "read_file", path="configs/minimal.toml")]},
    ], id="quoted")
    assert hindsight_labels(t)[0].values == ("configs/minimal.toml", "minimal.toml")  # the value, then the handle


def test_a_handle_the_user_gave_labels_the_users_turn() -> None:
    # "justinkool" is no value (salience.values), but the call copies it from the user's
    # turn: hindsight labels that turn needed, by the step that copied it; JSON keys
    # ("session_token") are never what a call copies.
    t = Transcript.from_openai([
        {"role": "user", "content": "Send it to Justin (justinkool), please."},
        {"role": "assistant", "content": None, "tool_calls": [call("c1", "login")]},
        {"role": "tool", "tool_call_id": "c1", "content": '{"session_token": "ok"}'},
        {"role": "assistant", "content": None, "tool_calls": [call("c2", "send", session_token="x", to="justinkool")]},
    ], id="handles")
    labels = hindsight_labels(t)
    assert labels[0].needed and labels[0].used_by == ("m3",) and labels[0].values == ("justinkool",)
    assert labels[0].needed_in == 2
    assert not labels[2].needed  # the tool result's key is not copied


def test_a_phrase_the_call_copies_labels_the_turn_that_gave_it() -> None:
    # "Team sync" and "the blue room" are neither values nor handles, yet the call copies
    # them as they stand from the user's slot-filling answers: each answer is needed, by
    # that call; the question the agent asked, and a turn the call copies nothing from, not.
    t = Transcript.from_openai([
        {"role": "user", "content": "Book a meeting for me."},
        {"role": "assistant", "content": "What is the topic?"},
        {"role": "user", "content": "Team sync"},
        {"role": "assistant", "content": "And where?"},
        {"role": "user", "content": "In the blue room."},
        {"role": "assistant", "content": None,
         "tool_calls": [call("c1", "AddMeeting", topic="Team sync", room="the blue room")]},
    ], id="slots")
    labels = hindsight_labels(t)
    assert [lab.needed for lab in labels] == [False, False, True, False, True, False]
    assert labels[2].values == ("Team sync",) and labels[2].used_by == ("m5",)
    assert labels[4].values == ("the blue room",) and labels[4].needed_in == 1
    assert step_references(t)[-1].refs == ()  # salience bench's definition stays by values alone


def test_a_copied_phrase_credits_its_first_holder_only() -> None:
    # the phrase first appears in the user's turn; the agent's echo of it is not credited
    t = Transcript.from_openai([
        {"role": "user", "content": "Remind me to water the ferns."},
        {"role": "assistant", "content": "I will remind you to water the ferns."},
        {"role": "assistant", "content": None, "tool_calls": [call("c1", "AddReminder", content="water the ferns")]},
    ], id="first")
    assert [lab.needed for lab in hindsight_labels(t)] == [True, False, False]


def test_a_plain_string_first_written_by_the_system_or_the_agent_is_not_a_phrase_reference() -> None:
    # "economy class" is the policy's and the agent's wording, not something the user typed
    t = Transcript.from_openai([
        {"role": "system", "content": "Cabins: basic economy, economy class, business."},
        {"role": "user", "content": "The cheapest seat, please."},
        {"role": "assistant", "content": "That would be plain economy seating, then."},
        {"role": "assistant", "content": None, "tool_calls": [call("c1", "book", cabin="economy class",
                                                                    seating="plain economy seating")]},
    ], id="vocabulary")
    assert not any(lab.needed for lab in hindsight_labels(t))


def test_step_references(airline: Transcript) -> None:
    refs = step_references(airline)
    assert [r.step for r in refs] == [2, 4, 6, 8, 10]
    assert refs[0] == StepRefs(step=2, step_id="m2", refs=(("mia_li_3668", "m1"),))
    assert refs[3] == StepRefs(step=8, step_id="m8", refs=(("ZFA04Y", "m3"), ("HAT136", "m5")))
    assert refs[2].refs == ()


def test_empty_transcript_and_no_assistant() -> None:
    assert hindsight_labels(Transcript(id="empty")) == []
    t = Transcript.from_openai([{"role": "user", "content": "id user_123"}], id="u")
    assert hindsight_labels(t) == [EntryLabel(needed=False)]
    assert step_references(t) == []


def test_entry_label_is_frozen_and_slotted() -> None:
    lab = EntryLabel(needed=False)
    with pytest.raises(dataclasses.FrozenInstanceError):
        lab.needed = True  # type: ignore[misc]
    assert not hasattr(lab, "__dict__")


# --------------------------------------------------------------------------
# labelled transcripts
# --------------------------------------------------------------------------


def test_label_transcript_sets_label_and_meta(airline: Transcript) -> None:
    out = label_transcript(airline)
    assert [e.label for e in out.entries] == [0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    assert out.entries[3].meta["needed_in"] == 1
    assert out.entries[3].meta["used_by"] == ["m4", "m8"]
    assert out.entries[0].meta["needed_in"] is None and out.entries[0].meta["used_by"] == []
    assert out.id == airline.id and out.domain == "airline"


def test_label_transcript_never_mutates_input() -> None:
    messages = airline_messages()
    before = copy.deepcopy(messages)
    t = Transcript.from_openai(messages, id="airline")
    label_transcript(t, overwrite=True)
    assert [e.label for e in t.entries] == [None] * len(t.entries)
    assert all("needed_in" not in e.meta for e in t.entries)
    assert messages == before
    assert t.to_openai() == before


def test_existing_labels_are_kept_unless_overwrite(airline: Transcript) -> None:
    given = airline.replace(entries=tuple(
        e.replace(label=0.25) if e.id == "m3" else e for e in airline.entries))
    kept = label_transcript(given)
    assert kept.entries[3].label == 0.25 and "needed_in" not in kept.entries[3].meta
    assert kept.entries[1].label == 1.0
    assert label_transcript(given, overwrite=True).entries[3].label == 1.0


def test_labelled_transcript_round_trips_through_jsonl(tmp_path, airline: Transcript) -> None:
    from salience import load_transcripts, save_transcripts

    out = label_transcript(airline)
    path = save_transcripts([out], tmp_path / "x.jsonl")
    back = load_transcripts(path)[0]
    assert back.labels == out.labels
    assert back.entries[5].meta["used_by"] == ["m8", "m10"]


# --------------------------------------------------------------------------
# evidence labels and modes
# --------------------------------------------------------------------------


@pytest.fixture
def chat() -> Transcript:
    messages = [
        {"id": "D1:1", "role": "user", "content": "I adopted a dog called Biscuit."},
        {"id": "D1:2", "role": "assistant", "content": "Lovely!"},
        {"id": "D1:3", "role": "user", "content": "I start at Northwind Bakery on March 20."},
        {"id": "D1:4", "role": "assistant", "content": "Congratulations."},
    ]
    queries = [Query("What is the dog called?", evidence=("D1:1",)),
               Query("Where and when does she start?", evidence=("D1:3", "D1:1"), at=3)]
    return Transcript.from_openai(messages, id="chat", queries=queries)


def test_evidence_labels(chat: Transcript) -> None:
    out = evidence_labels(chat)
    assert [e.label for e in out.entries] == [1.0, 0.0, 1.0, 0.0]
    assert [e.meta["evidence_of"] for e in out.entries] == [[0, 1], [], [1], []]
    # D1:1 answers the first question alone and half the second; D1:3 the other half
    assert [e.meta["question_share"] for e in out.entries] == [1.5, 0.0, 0.5, 0.0]
    assert chat.labels == [None] * 4


def test_question_shares_split_each_question_among_its_evidence(chat: Transcript) -> None:
    assert question_shares(chat) == {"D1:1": 1.5, "D1:3": 0.5}
    # an id listed twice is one evidence entry
    twice = chat.replace(queries=(Query("Where?", evidence=("D1:3", "D1:3", "D1:1")),))
    assert question_shares(twice) == {"D1:3": 0.5, "D1:1": 0.5}
    assert question_shares(chat.replace(queries=())) == {}


def test_evidence_labels_need_evidence(airline: Transcript) -> None:
    with pytest.raises(TranscriptError, match=r"transcript 'airline': evidence labels need queries with evidence"):
        evidence_labels(airline)


def test_label_auto_picks_per_transcript(chat: Transcript, airline: Transcript) -> None:
    out = label([chat, airline])
    assert "evidence_of" in out[0].entries[0].meta
    assert "needed_in" in out[1].entries[0].meta
    # hindsight on the chat: no assistant step reuses a value, so nothing is needed
    assert label(chat, mode="hindsight").labels == [0.0] * 4
    assert label(chat, mode=LabelMode.EVIDENCE).labels == [1.0, 0.0, 1.0, 0.0]


@pytest.mark.parametrize("mode", ["oracle", "", "AUTO"], ids=["unknown", "empty", "wrong-case"])
def test_label_rejects_unknown_modes(mode: str, airline: Transcript) -> None:
    with pytest.raises(ValueError, match=r"label mode must be one of 'auto', 'hindsight', 'evidence' \(got "):
        label([airline], mode=mode)


def test_label_evidence_mode_on_transcript_without_queries(airline: Transcript) -> None:
    with pytest.raises(TranscriptError, match="evidence labels need queries"):
        label([airline], mode="evidence")


# --------------------------------------------------------------------------
# the shared tau-bench airline set
# --------------------------------------------------------------------------


@pytest.mark.shared
def test_tau_bench_airline_share_of_needed_tool_entries(shared) -> None:
    from salience import load_transcripts

    transcripts = load_transcripts(shared("tau-bench-airline"))
    assert len(transcripts) == 200
    start = time.perf_counter()
    labelled = [label_transcript(t) for t in transcripts]
    seconds = time.perf_counter() - start
    tools = [e for t in labelled for e in t.entries if e.role == "tool"]
    entries = [e for t in labelled for e in t.entries]
    tool_share = sum(e.label for e in tools) / len(tools)
    share = sum(e.label for e in entries) / len(entries)
    # Measured: 42.6% of tool entries, 20.6% of all entries.
    assert 0.25 < tool_share < 0.65, tool_share
    assert 0.10 < share < 0.35, share
    assert seconds < 10, seconds
    # The user details (ids, reservations, payment methods) are nearly always needed.
    details = [e for e in tools if e.name == "get_user_details"]
    assert sum(e.label for e in details) / len(details) > 0.8
    # Step references agree with the labels: every referenced source entry is labelled needed.
    t = labelled[0]
    index = {e.id: e for e in t.entries}
    for step in step_references(t):
        for _, source in step.refs:
            assert index[source].label == 1.0


def test_module_doctests() -> None:
    import doctest

    import salience.scorer.labels as module

    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 4 and result.failed == 0
