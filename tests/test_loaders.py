"""Loaders for the public data set layouts: LoCoMo, tau-bench, MINT, SWE-agent, ToolTalk, API-Bank.

Each layout has a small excerpt written for these tests under ``tests/fixtures/layouts``
(invented content in the real files' structure); the real data sets in ../shared/data are
loaded too when present (those tests skip otherwise).
"""

from __future__ import annotations

import copy
import doctest
import json
import math
import re
import time
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest

from salience.datasets import apibank, detect_layout, load_transcripts, locomo, mint, sweagent, taubench, tooltalk
from salience.errors import FormatError, TranscriptError
from salience.transcript import Transcript

LAYOUTS = Path(__file__).resolve().parent / "fixtures" / "layouts"

FIXTURES = {
    "locomo": LAYOUTS / "locomo" / "conv-ana-ben.json",
    "taubench": LAYOUTS / "taubench" / "gpt-4o-airline-excerpt.json",
    "mint": LAYOUTS / "mint" / "tiny-model" / "reasoning" / "gsm8k" / "results.jsonl",
    "sweagent": LAYOUTS / "sweagent" / "classic__tiny-run" / "tiny__calc-1.traj",
    "sweagent-fc": LAYOUTS / "sweagent" / "fc__tiny-run" / "tiny__greet-2.traj",
    "tooltalk": LAYOUTS / "tooltalk" / "data" / "tooltalk" / "Alarm-Weather-AddAlarm-0.json",
    "apibank": LAYOUTS / "apibank" / "lv1-lv2-samples" / "level-1-given-desc" / "AddAlarm-GetUserToken-level-2-1.jsonl",
}

NOT_TRANSCRIPTS = {
    "tooltalk-database": LAYOUTS / "tooltalk" / "data" / "databases" / "Alarm.json",
    "apibank-all-apis-csv": LAYOUTS / "apibank" / "data" / "all_apis.csv",
    "apibank-exceptions": LAYOUTS / "apibank" / "data" / "exceptions.json",
    "apibank-lv3-scenario": LAYOUTS / "apibank" / "lv3-samples" / "Alarm.txt",
}


def roles(t: Transcript) -> list[str]:
    return [e.role for e in t.entries]


def ids(t: Transcript) -> list[str]:
    return [e.id for e in t.entries]


# --------------------------------------------------------------------------
# detection
# --------------------------------------------------------------------------


@pytest.mark.parametrize("key", sorted(FIXTURES), ids=sorted(FIXTURES))
def test_each_fixture_is_detected_as_its_own_layout(key: str) -> None:
    assert detect_layout(FIXTURES[key]) == key.split("-")[0]


@pytest.mark.parametrize("key", sorted(FIXTURES), ids=sorted(FIXTURES))
def test_sniffers_do_not_cross_claim(key: str) -> None:
    path = FIXTURES[key]
    head = path.read_text(encoding="utf-8")[:65_536]
    modules = (locomo, taubench, mint, sweagent, tooltalk, apibank)
    claimed = [m.NAME for m in modules if m.sniff(path, head)]
    assert claimed == [key.split("-")[0]]


@pytest.mark.parametrize("key", sorted(NOT_TRANSCRIPTS), ids=sorted(NOT_TRANSCRIPTS))
def test_files_that_are_not_transcripts_are_not_claimed(key: str) -> None:
    assert detect_layout(NOT_TRANSCRIPTS[key]) is None


def test_folder_load_passes_over_databases_and_api_lists() -> None:
    loaded = load_transcripts([LAYOUTS / "tooltalk", LAYOUTS / "apibank"])
    assert [t.id for t in loaded] == ["tooltalk-Alarm-Weather-AddAlarm-0", "api-bank-AddAlarm-GetUserToken-level-2-1"]


def test_whole_fixture_tree_loads_each_layout() -> None:
    loaded = load_transcripts(LAYOUTS)
    assert Counter(t.domain for t in loaded) == Counter(
        {"conversation": 1, "airline": 2, "reasoning": 2, "coding": 2, "tooltalk": 1, "api-bank": 1}
    )


def test_unknown_layout_named_directly_lists_known_layouts(tmp_path: Path) -> None:
    path = tmp_path / "notes.json"
    path.write_text('{"hello": "world"}\n', encoding="utf-8")
    with pytest.raises(FormatError, match=r"notes\.json: not in a layout salience knows \(known: jsonl, locomo, "
                                          r"taubench, mint, sweagent, tooltalk, apibank\)"):
        load_transcripts(path)


# --------------------------------------------------------------------------
# LoCoMo
# --------------------------------------------------------------------------


def test_locomo_entries() -> None:
    [t] = locomo.load(FIXTURES["locomo"])
    assert t.id == "locomo-conv-ana-ben"
    assert t.domain == "conversation"
    assert ids(t) == ["D1:1", "D1:2", "D1:3", "D2:1", "D2:2"]
    assert roles(t) == ["user", "assistant", "user", "assistant", "user"]
    assert [e.name for e in t.entries] == ["Ana", "Ben", "Ana", "Ben", "Ana"]
    photo = t.entries[2]
    assert photo.content == "Her name is Pickle. Here she is. [shares a photo: a photo of a grey cat on a sofa]"
    assert photo.meta["extra"] == {
        "img_url": ["https://example.invalid/pickle.jpg"],
        "blip_caption": "a photo of a grey cat on a sofa",
        "query": "grey cat sofa",
    }
    assert t.entries[3].meta == {"session": 2, "date": "6:40 pm on 20 March, 2023", "speaker": "Ben"}
    assert t.meta["sessions"] == [
        {"session": 1, "date": "9:15 am on 2 March, 2023"},
        {"session": 2, "date": "6:40 pm on 20 March, 2023"},
    ]
    assert (t.meta["speaker_a"], t.meta["speaker_b"]) == ("Ana", "Ben")


def test_locomo_queries_and_evidence_repairs() -> None:
    [t] = locomo.load(FIXTURES["locomo"])
    q = t.queries
    assert [x.evidence for x in q] == [("D1:3",), ("D1:1",), ("D2:2", "D1:3"), ("D1:3",), (), ("D1:3",)]
    assert all(x.at is None for x in q)
    assert q[0].meta == {"category": 4, "answer": "Pickle"}
    assert q[1].meta["normalised_evidence"] == {"D1:01": ["D1:1"]}
    assert q[2].meta["normalised_evidence"] == {"D:2:2": ["D2:2"], "D1:3; D2:2": ["D1:3", "D2:2"]}
    assert q[3].meta["dropped_evidence"] == ["D9:9", "D"]
    assert q[4].meta["no_evidence"] is True
    assert q[5].meta == {"category": 5, "adversarial_answer": "Pickle"}
    assert t.meta["evidence_issues"] == {"normalised": 2, "dropped": 1, "no_evidence": 1}


def test_locomo_list_of_samples(tmp_path: Path) -> None:
    conv = json.loads(FIXTURES["locomo"].read_text(encoding="utf-8"))
    qa = conv.pop("qa")
    path = tmp_path / "locomo10.json"
    path.write_text(json.dumps([{"sample_id": "conv-1", "qa": qa, "conversation": conv},
                                {"qa": [], "conversation": conv}]), encoding="utf-8")
    assert detect_layout(path) == "locomo"
    first, second = locomo.load(path)
    assert (first.id, second.id) == ("locomo-conv-1", "locomo-locomo10-1")
    assert len(first.queries) == 6 and len(second.queries) == 0


def test_locomo_doctests() -> None:
    assert doctest.testmod(locomo).failed == 0


# --------------------------------------------------------------------------
# tau-bench
# --------------------------------------------------------------------------


def test_taubench_runs() -> None:
    first, second = taubench.load(FIXTURES["taubench"])
    assert (first.id, second.id) == ("tau-airline-7-0", "tau-airline-7-1")
    assert first.domain == "airline"
    assert roles(first) == ["system", "user", "assistant", "tool", "assistant"]
    assert ids(first) == ["m0", "m1", "m2", "m3", "m4"]
    assert first.entries[3].tool_call_id == "call_aaa111"
    assert first.entries[3].name == "get_reservation_details"
    assert first.meta["reward"] == 1.0
    assert first.meta["actions"] == [{"name": "get_reservation_details", "kwargs": {"reservation_id": "ZX81QP"}}]
    assert first.meta["instruction"].startswith("You are ava_lee_123.")
    assert (first.meta["task_id"], first.meta["trial"], first.meta["user_id"]) == (7, 0, "ava_lee_123")


def test_taubench_round_trips_exactly_without_reused_ids() -> None:
    raw = json.loads(FIXTURES["taubench"].read_text(encoding="utf-8"))
    first, _ = taubench.load(FIXTURES["taubench"])
    assert first.to_openai() == raw[0]["traj"]


def test_taubench_reused_call_id_is_renamed() -> None:
    _, second = taubench.load(FIXTURES["taubench"])
    calls = [c.id for e in second.entries for c in e.tool_calls]
    assert calls == ["call_dup", "call_dup.2"]
    assert [e.tool_call_id for e in second.entries if e.role == "tool"] == ["call_dup", "call_dup.2"]
    assert second.parents() == [-1, -1, -1, 2, -1, 4, -1]
    assert second.entries[4].meta["original_call_ids"] == {"call_dup.2": "call_dup"}
    assert second.entries[5].meta["original_tool_call_id"] == "call_dup"


# --------------------------------------------------------------------------
# MINT
# --------------------------------------------------------------------------


def test_mint_runs() -> None:
    first, second = mint.load(FIXTURES["mint"])
    assert (first.id, second.id) == ("mint-tiny-model-gsm8k-1", "mint-tiny-model-gsm8k-2")
    assert first.domain == "reasoning"
    assert roles(first) == ["user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert [e.name for e in first.entries if e.role == "tool"] == ["python", "solution"]
    assert all(e.tool_call_id is None for e in first.entries)
    assert "<execute>print(3 * 12)</execute>" in first.entries[1].content
    assert first.entries[0].content.endswith("How many pencils?")
    assert first.meta["success"] is True
    assert (first.meta["model"], first.meta["task"], first.meta["task_id"], first.meta["line"]) == (
        "tiny-model", "gsm8k", 0, 1)
    assert [e.name for e in second.entries if e.role == "tool"] == ["environment"]


# --------------------------------------------------------------------------
# SWE-agent
# --------------------------------------------------------------------------


def test_sweagent_classic_history() -> None:
    [t] = sweagent.load(FIXTURES["sweagent"])
    assert t.id == "swe-classic__tiny-run-tiny__calc-1"
    assert t.domain == "coding"
    assert roles(t) == ["system", "user", "user", "assistant", "tool", "assistant", "tool", "assistant", "tool"]
    assert t.entries[1].meta["is_demo"] is True
    assert t.meta["demos"] == 1
    assert [e.name for e in t.entries if e.role == "tool"] == ["open", "edit", "submit"]
    assert all(e.tool_call_id is None for e in t.entries)
    assert t.entries[3].meta["action"] == "open calc.py\n"
    assert t.meta["exit_status"] == "submitted"


def test_sweagent_function_calling_history() -> None:
    [t] = sweagent.load(FIXTURES["sweagent-fc"])
    assert roles(t) == ["system", "user", "assistant", "tool", "assistant", "tool"]
    assert [c.id for e in t.entries for c in e.tool_calls] == ["call_x1", "call_x1.2"]
    assert [(e.tool_call_id, e.name) for e in t.entries if e.role == "tool"] == [
        ("call_x1", "find_file"), ("call_x1.2", "edit")]
    assert t.entries[5].meta["original_tool_call_id"] == "call_x1"
    assert t.entries[2].tool_calls[0].arguments == '{"file_name": "greet.py"}'


# --------------------------------------------------------------------------
# ToolTalk and API-Bank
# --------------------------------------------------------------------------


def test_tooltalk_conversation() -> None:
    [t] = tooltalk.load(FIXTURES["tooltalk"])
    assert t.id == "tooltalk-Alarm-Weather-AddAlarm-0"
    assert t.domain == "tooltalk"
    assert ids(t) == ["t0", "t1.call0", "t1.result0", "t1.call1", "t1.result1", "t1", "t2"]
    assert roles(t) == ["user", "assistant", "tool", "assistant", "tool", "assistant", "user"]
    call = t.entries[3].tool_calls[0]
    assert (call.id, call.name, json.loads(call.arguments)) == (
        "call_1_1", "AddAlarm", {"session_token": "abcd-1234", "time": "06:15:00"})
    assert (t.entries[4].name, t.entries[4].tool_call_id, json.loads(t.entries[4].content)) == (
        "AddAlarm", "call_1_1", {"alarm_id": "a1b2-c3d4"})
    assert json.loads(t.entries[2].content) == {"exception": "The password is incorrect."}
    assert t.entries[2].meta["exception"] == "The password is incorrect."
    assert t.entries[5].content == "Your alarm is set for 06:15."
    assert t.meta["suites"] == ["Alarm", "Weather"]
    assert t.meta["conversation_id"] == "0c1d2e3f-0000-4000-8000-000000000001"


def test_apibank_dialogue() -> None:
    [t] = apibank.load(FIXTURES["apibank"])
    assert t.id == "api-bank-AddAlarm-GetUserToken-level-2-1"
    assert t.domain == "api-bank"
    assert ids(t) == ["l1", "l2", "l3.call", "l3.result", "l4.call", "l4.result", "l5"]
    assert roles(t) == ["user", "assistant", "assistant", "tool", "assistant", "tool", "assistant"]
    assert json.loads(t.entries[3].content) == {"token": "t0k3n-kim"}
    assert t.entries[5].content == "success"
    assert t.parents() == [-1, -1, -1, 2, -1, 4, -1]
    assert t.meta == {"level": "level-1-given-desc", "apis": ["GetUserToken", "AddAlarm"]}


# --------------------------------------------------------------------------
# malformed input: FormatError naming the file (and line), never a KeyError
# --------------------------------------------------------------------------


def _edit_json(key: str, change) -> tuple[str, str]:
    data = json.loads(FIXTURES[key].read_text(encoding="utf-8"))
    change(data)
    return FIXTURES[key].name, json.dumps(data, indent=1)


def _edit_lines(key: str, lineno: int, text: str) -> tuple[str, str]:
    lines = FIXTURES[key].read_text(encoding="utf-8").splitlines()
    lines[lineno - 1] = text
    return FIXTURES[key].name, "\n".join(lines) + "\n"


BROKEN = {
    "locomo-missing-dia-id": (lambda: _edit_json("locomo", lambda d: d["session_2"][1].pop("dia_id")),
                              locomo, r"session_2\[1\]: field 'dia_id' is missing"),
    "locomo-stranger": (lambda: _edit_json("locomo", lambda d: d["session_1"][0].update(speaker="Zed")),
                        locomo, r"dia_id 'D1:1'.*field 'speaker' must be 'Ana' or 'Ben' \(got 'Zed'\)"),
    "locomo-truncated": (lambda: ("conv.json", FIXTURES["locomo"].read_text(encoding="utf-8")[:300]),
                         locomo, r"conv\.json: not valid JSON: line \d+, column \d+: "),
    "taubench-traj-not-list": (lambda: _edit_json("taubench", lambda d: d[1].update(traj="oops")),
                               taubench, r"run 1: field 'traj' must be a list"),
    "taubench-unknown-call": (lambda: _edit_json("taubench", lambda d: d[0]["traj"][3].update(tool_call_id="nope")),
                              taubench, r"run 0: .*'tool_call_id' must name a call"),
    "taubench-no-task-id": (lambda: _edit_json("taubench", lambda d: d[0].pop("task_id")),
                            taubench, r"run 0: field 'task_id' is missing"),
    "mint-bad-json-line": (lambda: _edit_lines("mint", 2, '{"state": {"history": ['),
                           mint, r"results\.jsonl:2: malformed JSON"),
    "mint-bad-role": (lambda: _edit_lines("mint", 1, json.dumps(
        {"state": {"history": [{"role": "robot", "content": "beep"}]}, "task": {"task_name": "reasoning"}})),
                      mint, r"results\.jsonl:1: state\.history\[0\]: field 'role' must be"),
    "mint-no-state": (lambda: _edit_lines("mint", 2, '{"task": {"task_name": "reasoning"}}'),
                      mint, r"results\.jsonl:2: field 'state' must be an object"),
    "sweagent-no-history": (lambda: _edit_json("sweagent", lambda d: d.pop("history")),
                            sweagent, r"tiny__calc-1\.traj: field 'history' must be a list"),
    "sweagent-bad-call": (lambda: _edit_json("sweagent-fc", lambda d: d["history"][2]["tool_calls"][0].pop("id")),
                          sweagent, r"history\[2\]: field 'tool_calls\[0\]\.id' must be a non-empty str"),
    "tooltalk-no-api-name": (lambda: _edit_json(
        "tooltalk", lambda d: d["conversation"][1]["apis"][1]["request"].pop("api_name")),
                             tooltalk, r"conversation\[1\]\.apis\[1\]: field 'request\.api_name'"),
    "tooltalk-no-turns": (lambda: _edit_json("tooltalk", lambda d: d.pop("conversation")),
                          tooltalk, r"field 'conversation' must be a list of turns"),
    "apibank-bad-role": (lambda: _edit_lines("apibank", 2, '{"role": "Bot", "text": "hi"}'),
                         apibank, r"level-2-1\.jsonl:2: field 'role' must be one of 'User', 'AI', 'API' \(got 'Bot'\)"),
    "apibank-no-result": (lambda: _edit_lines("apibank", 4, '{"role": "API", "api_name": "AddAlarm"}'),
                          apibank, r"level-2-1\.jsonl:4: field 'result' must be an object"),
    "apibank-bad-json-line": (lambda: _edit_lines("apibank", 3, '{"role": "AI", "text": '),
                              apibank, r"level-2-1\.jsonl:3: malformed JSON: Expecting value at column 24$"),
}


@pytest.mark.parametrize("case", sorted(BROKEN), ids=sorted(BROKEN))
def test_malformed_files_raise_format_error_naming_the_file(case: str, tmp_path: Path) -> None:
    make, module, pattern = BROKEN[case]
    name, text = make()
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(FormatError, match=pattern) as info:
        module.load(path)
    assert str(path) in str(info.value)


@pytest.mark.parametrize("module", [mint, apibank], ids=["mint", "apibank"])
def test_json_lines_that_are_not_utf8_name_the_file(module: ModuleType, tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    path.write_bytes(b'{"role": "User", "text": "caf\xe9"}\n')
    pattern = rf"{path}:1: not UTF-8 text \(byte \d+ of the line: invalid continuation byte\)"
    with pytest.raises(FormatError, match=pattern):
        module.load(path)


def test_malformed_file_through_load_transcripts(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    path.write_text(FIXTURES["mint"].read_text(encoding="utf-8") + '{"state": {"history": [\n', encoding="utf-8")
    with pytest.raises(TranscriptError, match=rf"{path}:3: malformed JSON"):
        load_transcripts(path)


# --------------------------------------------------------------------------
# the real data sets (skipped when ../shared/data is absent)
# --------------------------------------------------------------------------

#: folder -> (transcripts, entries, tool entries, queries)
EXPECTED = {
    "locomo": (6, 3435, 0, 1157),
    "tau-bench-airline": (200, 5308, 1164, 0),
    "mint": (1758, 9904, 3194, 0),
    "swe-agent": (22, 489, 213, 0),
    "tooltalk": (78, 1035, 266, 0),
    "api-bank": (263, 3090, 508, 0),
}


@pytest.mark.shared
@pytest.mark.parametrize("folder", sorted(EXPECTED), ids=sorted(EXPECTED))
def test_shared_folder_loads(folder: str, shared) -> None:
    path = shared(folder)
    start = time.perf_counter()
    loaded = load_transcripts(path)
    elapsed = time.perf_counter() - start
    n, entries, tools, queries = EXPECTED[folder]
    assert len(loaded) == n
    assert sum(len(t) for t in loaded) == entries
    assert sum(e.role == "tool" for t in loaded for e in t.entries) == tools
    assert sum(len(t.queries) for t in loaded) == queries
    assert len({t.id for t in loaded}) == n
    assert elapsed < 10.0


@pytest.mark.shared
def test_shared_locomo_evidence_issues(shared) -> None:
    loaded = load_transcripts(shared("locomo"))
    totals = Counter()
    for t in loaded:
        totals.update(t.meta["evidence_issues"])
    assert totals == Counter({"normalised": 2, "dropped": 2, "no_evidence": 2})
    assert sum(len(q.evidence) for t in loaded for q in t.queries) > 1157


@pytest.fixture
def tau_path(shared) -> Path:
    return shared("tau-bench-airline") / "gpt-4o-airline.json"


@pytest.fixture
def tau_runs(tau_path: Path) -> list[dict]:
    return json.loads(tau_path.read_text(encoding="utf-8"))


def _reuses_call_ids(traj: list[dict]) -> bool:
    calls = [c["id"] for m in traj for c in m.get("tool_calls") or []]
    return len(calls) != len(set(calls))


@pytest.mark.shared
def test_shared_taubench_loads_fast_and_every_call_is_answered(tau_path: Path) -> None:
    start = time.perf_counter()
    loaded = taubench.load(tau_path)
    assert time.perf_counter() - start < 5.0
    assert len(loaded) == 200
    assert Counter((t.meta["task_id"], t.meta["trial"]) for t in loaded).most_common(1)[0][1] == 1
    assert all(t.unanswered_calls() == [] for t in loaded)
    assert sum(len(e.tool_calls) for t in loaded for e in t.entries) == 1164


@pytest.mark.shared
def test_shared_taubench_loader_round_trip_up_to_renamed_ids(tau_path: Path, tau_runs: list[dict]) -> None:
    loaded = taubench.load(tau_path)
    for t, run in zip(loaded, tau_runs, strict=True):
        messages = t.to_openai()
        for entry, message in zip(t.entries, messages, strict=True):
            if "original_tool_call_id" in entry.meta:
                message["tool_call_id"] = entry.meta["original_tool_call_id"]
            for call in message.get("tool_calls") or []:
                call["id"] = entry.meta.get("original_call_ids", {}).get(call["id"], call["id"])
        assert messages == run["traj"], t.id


@pytest.mark.shared
def test_shared_taubench_openai_round_trip(tau_runs: list[dict]) -> None:
    plain = [run["traj"] for run in tau_runs if not _reuses_call_ids(run["traj"])]
    assert len(plain) == 151
    for traj in plain:
        original = copy.deepcopy(traj)
        assert Transcript.from_openai(traj).to_openai() == traj
        assert traj == original


@pytest.mark.shared
def test_shared_taubench_openai_round_trip_with_reused_call_ids(tau_runs: list[dict]) -> None:
    reused = [run["traj"] for run in tau_runs if _reuses_call_ids(run["traj"])]
    assert len(reused) == 49
    for traj in reused:
        assert Transcript.from_openai(traj).to_openai() == traj


@pytest.mark.shared
def test_shared_taubench_anthropic_round_trip(tau_path: Path) -> None:
    loaded = taubench.load(tau_path)
    picked = loaded[:4] + [t for t in loaded if any("original_call_ids" in e.meta for e in t.entries)][:2]
    assert len(picked) == 6
    for t in picked:
        messages, system = t.to_anthropic(), t.anthropic_system()
        assert isinstance(system, str) and system.startswith("# Airline Agent Policy")
        assert messages[0]["role"] == "user"
        uses = [b for m in messages if isinstance(m["content"], list) for b in m["content"] if b["type"] == "tool_use"]
        assert len(uses) == sum(len(e.tool_calls) for e in t.entries)
        back = Transcript.from_anthropic(messages, system=system)
        assert back.to_anthropic() == messages
        assert back.anthropic_system() == system


# --------------------------------------------------------------------------
# NaN and Infinity: JSON has neither; every loader refuses them, naming the file, line and field
# --------------------------------------------------------------------------


def _probe(value: object, constant: float) -> None:
    """Add ``"probe": constant`` to the first object in ``value`` (a list's first item, else the object)."""
    target = value[0] if isinstance(value, list) else value
    assert isinstance(target, dict)
    target["probe"] = constant


@pytest.mark.parametrize("key", sorted(FIXTURES) + ["jsonl"], ids=sorted(FIXTURES) + ["jsonl"])
@pytest.mark.parametrize("constant, text", [(math.nan, "NaN"), (-math.inf, "-Infinity")], ids=["nan", "-inf"])
def test_nan_and_infinity_are_refused_naming_file_line_and_field(key: str, constant: float, text: str,
                                                                 tmp_path: Path) -> None:
    sample = Path(__file__).resolve().parents[1] / "data" / "customer_service.jsonl"
    source = sample if key == "jsonl" else FIXTURES[key]
    path = tmp_path / source.name
    if source.suffix == ".jsonl":
        lines = [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines() if line.strip()]
        _probe(lines[-1], constant)
        path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
        where = rf"{re.escape(str(path))}:{len(lines)}: not valid JSON: column \d+"
        field = r"\['probe'\]"
    else:
        doc = json.loads(source.read_text(encoding="utf-8"))
        _probe(doc, constant)
        path.write_text(json.dumps(doc, indent=1), encoding="utf-8")
        where = rf"{re.escape(str(path))}: not valid JSON: line \d+, column \d+"
        field = r"\[0\]\['probe'\]" if isinstance(doc, list) else r"at \['probe'\]"
    with pytest.raises(FormatError, match=rf"{where}: {re.escape(text)} is not a JSON value .*{field}"):
        load_transcripts(path)
