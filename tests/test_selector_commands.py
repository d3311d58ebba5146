"""``salience compact`` and ``salience inspect`` through :func:`salience.cli.main`."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from conftest import SAMPLES
from salience import load_transcripts
from salience.cli import main
from salience.cli.compact import restore_archive
from salience.cli.compaction import parse_budget, read_input, resolve_scorer
from salience.datasets.jsonl import dump_transcript
from salience.messages.validate import check_anthropic, check_openai
from salience.selector.masking import Phase
from salience.tokens import default_counter
from salience.transcript import Transcript

CODING = SAMPLES / "coding_agent.jsonl"
SERVICE = SAMPLES / "customer_service.jsonl"


def tokens_of(t: Transcript) -> int:
    counter = default_counter()
    return sum(counter.count_entry(e) for e in t.entries)


def sample(path: Path, index: int = 0) -> Transcript:
    return load_transcripts(path)[index]


def write_json(path: Path, doc: Any) -> Path:
    path.write_text(json.dumps(doc, indent=2), encoding="utf-8")
    return path


def one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("salience: error: "), err
    return lines[0]


def summary_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.startswith("compacted ")]
    assert len(lines) == 1, err
    return lines[0]


@pytest.fixture
def openai_file(tmp_path: Path) -> tuple[Path, list[dict[str, Any]], int]:
    t = sample(SERVICE)
    messages = t.to_openai()
    return write_json(tmp_path / "openai.json", messages), messages, tokens_of(Transcript.from_openai(messages))


@pytest.fixture
def anthropic_file(tmp_path: Path) -> tuple[Path, dict[str, Any], int]:
    t = sample(CODING)
    doc = {"model": "claude-sonnet", "max_tokens": 512, "system": t.anthropic_system(), "messages": t.to_anthropic()}
    full = tokens_of(Transcript.from_anthropic(doc["messages"], system=doc["system"]))
    return write_json(tmp_path / "anthropic.json", doc), doc, full


# --------------------------------------------------------------------------
# compact
# --------------------------------------------------------------------------


def test_compact_openai_json(openai_file: tuple[Path, list[dict[str, Any]], int], tmp_path: Path, capsys) -> None:
    path, messages, full = openai_file
    budget = full * 4 // 10
    out, archive = tmp_path / "out.json", tmp_path / "archive.json"
    assert main(["compact", str(path), "--budget", str(budget), "--scorer", "recency", "--out", str(out),
                 "--archive", str(archive)]) == 0
    err = capsys.readouterr().err
    line = summary_line(err)
    assert f"{full:,} -> " in line and f"(budget {budget:,}" in line
    assert "kept" in line and "dropped" in line
    result = json.loads(out.read_text(encoding="utf-8"))
    assert isinstance(result, list) and len(result) < len(messages)
    assert check_openai(result) == []
    assert tokens_of(Transcript.from_openai(result)) <= budget
    assert json.loads(path.read_text(encoding="utf-8")) == messages  # the input file is left alone
    saved = json.loads(archive.read_text(encoding="utf-8"))
    assert saved["format"] == "openai"
    entries = saved["transcripts"][0]["entries"]
    assert entries and {e["option"] for e in entries} <= {"trim", "stub", "drop"}
    ids = {m["id"] for m in messages}
    assert all(e["id"] in ids and e["message"]["id"] == e["id"] for e in entries)
    assert restore_archive(result, saved) == messages


def test_compact_openai_to_stdout(openai_file: tuple[Path, list[dict[str, Any]], int], capsys) -> None:
    path, messages, full = openai_file
    assert main(["compact", str(path), "--budget", "50%", "--scorer", "keyword"]) == 0
    captured = capsys.readouterr()
    result = json.loads(captured.out)
    assert check_openai(result) == []
    assert tokens_of(Transcript.from_openai(result)) <= full // 2
    assert "(budget 50%" in summary_line(captured.err)


def test_compact_anthropic_object(anthropic_file: tuple[Path, dict[str, Any], int], tmp_path: Path, capsys) -> None:
    path, doc, full = anthropic_file
    budget = full // 2
    out, archive = tmp_path / "out.json", tmp_path / "archive.json"
    assert main(["compact", str(path), "--budget", str(budget), "--scorer", "recency", "-o", str(out),
                 "--archive", str(archive)]) == 0
    summary_line(capsys.readouterr().err)
    result = json.loads(out.read_text(encoding="utf-8"))
    assert result["model"] == "claude-sonnet" and result["max_tokens"] == 512  # the request's other keys stay
    assert result["system"] == doc["system"]
    assert result["messages"] != doc["messages"]  # something was trimmed, stubbed or dropped
    assert check_anthropic(result["messages"], result["system"]) == []
    assert tokens_of(Transcript.from_anthropic(result["messages"], system=result["system"])) <= budget
    saved = json.loads(archive.read_text(encoding="utf-8"))
    assert saved["format"] == "anthropic" and saved["transcripts"][0]["entries"]
    assert restore_archive(result, saved) == doc


def test_compact_anthropic_bare_list_is_detected(tmp_path: Path, capsys) -> None:
    t = sample(CODING)
    messages = t.to_anthropic()  # no system prompt: a bare list with tool_use blocks
    path = write_json(tmp_path / "msgs.json", messages)
    archive = tmp_path / "archive.json"
    assert main(["compact", str(path), "--budget", "60%", "--scorer", "recency", "--archive", str(archive)]) == 0
    result = json.loads(capsys.readouterr().out)
    assert isinstance(result, list)
    assert any(isinstance(m["content"], list) and any(b.get("type") == "tool_use" for b in m["content"])
               for m in result)
    assert check_anthropic(result) == []
    assert restore_archive(result, json.loads(archive.read_text(encoding="utf-8"))) == messages


def test_compact_canonical_jsonl(tmp_path: Path, capsys) -> None:
    sources = load_transcripts(SERVICE)
    out, archive = tmp_path / "out.jsonl", tmp_path / "archive.json"
    assert main(["compact", str(SERVICE), "--budget", "45%", "--scorer", "recency", "-o", str(out),
                 "--archive", str(archive)]) == 0
    line = summary_line(capsys.readouterr().err)
    assert line.startswith(f"compacted {len(sources)} transcripts, ")
    compacted = load_transcripts(out)
    assert [t.id for t in compacted] == [t.id for t in sources]
    for source, t in zip(sources, compacted, strict=True):
        assert t.domain == source.domain
        assert tokens_of(t) <= max(1, int(tokens_of(source) * 0.45))
        assert len(t.entries) < len(source.entries)
        assert check_openai(t.to_openai()) == []
    lines = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    restored = restore_archive(lines, json.loads(archive.read_text(encoding="utf-8")))
    assert restored == [dump_transcript(t) for t in sources]


def test_compact_picks_one_transcript(tmp_path: Path, capsys) -> None:
    wanted = load_transcripts(SERVICE)[1].id
    assert main(["compact", str(SERVICE), "--budget", "100000", "--transcript", wanted, "--scorer", "recency"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["id"] == wanted


def test_compact_other_layouts_become_canonical_jsonl(tmp_path: Path, capsys) -> None:
    """A JSON list that is not a message list goes to the loaders (here: a tau-bench-like file)."""
    run = {"traj": [{"role": "system", "content": "You are an airline agent."},
                    {"role": "user", "content": "Cancel reservation ZFA04Y."},
                    {"role": "assistant", "content": "Done: ZFA04Y is cancelled."}],
           "info": {"task": {"user_id": "u1", "actions": []}}, "reward": 1.0, "task_id": 0, "trial": 0}
    path = write_json(tmp_path / "runs.json", [run])
    loaded = load_transcripts(path)
    assert main(["compact", str(path), "--budget", "100000", "--scorer", "recency"]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert json.loads(line)["id"] == loaded[0].id


@pytest.mark.parametrize("phase", ["lookup", "act"], ids=["lookup", "act"])
def test_compact_with_a_phase(phase: str, tmp_path: Path, capsys) -> None:
    assert main(["compact", str(SERVICE), "--budget", "45%", "--phase", phase, "--scorer", "recency"]) == 0
    assert f"phase {phase}" in summary_line(capsys.readouterr().err)


def test_a_phase_the_domain_lacks_picks_the_policy_that_has_it(
    openai_file: tuple[Path, list[dict[str, Any]], int], capsys
) -> None:
    path, _, full = openai_file  # a bare message list has no domain (chat policy: no 'lookup' phase)
    assert main(["compact", str(path), "--budget", str(full // 2), "--phase", "lookup", "--scorer", "recency"]) == 0
    assert "phase lookup" in summary_line(capsys.readouterr().err)
    assert main(["compact", str(path), "--budget", str(full // 2), "--phase", "lookup", "--policy", "chat",
                 "--scorer", "recency"]) == 2
    assert "policy 'chat'" in one_error_line(capsys.readouterr().err)


def test_keep_pins_returns_the_pins_over_budget(openai_file: tuple[Path, list[dict[str, Any]], int],
                                                capsys) -> None:
    path, _, full = openai_file
    assert main(["compact", str(path), "--budget", "20", "--keep-pins", "--scorer", "recency"]) == 0
    captured = capsys.readouterr()
    result = json.loads(captured.out)
    assert check_openai(result) == []
    after = tokens_of(Transcript.from_openai(result))
    assert 20 < after < full
    line = summary_line(captured.err)
    assert line.endswith("OVER BUDGET (pins only): 1 transcript") and f"-> {after:,} tokens" in line


def test_a_profile_applies_and_explicit_options_win(openai_file: tuple[Path, list[dict[str, Any]], int],
                                                   tmp_path: Path, capsys) -> None:
    from salience.selector.masking import PhasePolicy

    path, _, full = openai_file
    base = ["compact", str(path), "--budget", "20", "--scorer", "recency"]
    assert main(base) == 2  # the default pins alone need more than 20 tokens
    assert "too small" in one_error_line(capsys.readouterr().err)
    # as 'salience tune' writes it, with a policy of one's own beside the tuned parameters
    mine = PhasePolicy(name="mine", rules={"act": {"other": "full"}}, default="act")
    profile = write_json(tmp_path / "p.json", {"domain": "x", "compactor": {
        "pin_last": 0, "pin_system": False, "pin_last_user": False, "policy": mine.as_dict()}})
    assert main([*base, "--profile", str(profile)]) == 0
    captured = capsys.readouterr()
    assert tokens_of(Transcript.from_openai(json.loads(captured.out))) <= 20
    assert "phase act" in summary_line(captured.err)
    assert main([*base, "--profile", str(profile), "--phase", "lookup"]) == 2  # the profile's policy has no lookup
    assert "policy 'mine'" in one_error_line(capsys.readouterr().err)
    assert main([*base, "--profile", str(profile), "--phase", "lookup", "--policy", "airline"]) == 0  # --policy wins
    assert "phase lookup" in summary_line(capsys.readouterr().err)
    assert main(["inspect", str(path), "--budget", "20", "--scorer", "recency", "--profile", str(profile)]) == 0
    assert "over budget" not in capsys.readouterr().out


@pytest.mark.parametrize(
    ("doc", "pattern"),
    [(None, r"--profile: .*missing\.json.* not a readable JSON file"),
     ({"compactor": {"pinlast": 1}}, r"--profile: .*unknown keys \['pinlast'\]"),
     ({"compactor": {"pin_last": -1}}, r"parameter 'pin_last' must be an int >= 0"),
     ({"compactor": {"policy": {"name": "x"}}}, r"parameter 'policy': .*missing 'rules'")],
    ids=["missing", "unknown-key", "bad-value", "bad-policy"],
)
def test_a_bad_profile_exits_2(doc: Any, pattern: str, openai_file: tuple[Path, list[dict[str, Any]], int],
                               tmp_path: Path, capsys) -> None:
    path, _, _ = openai_file
    profile = tmp_path / "missing.json" if doc is None else write_json(tmp_path / "p.json", doc)
    assert main(["compact", str(path), "--budget", "500", "--scorer", "recency", "--profile", str(profile)]) == 2
    captured = capsys.readouterr()
    assert re.search(pattern, one_error_line(captured.err)), captured.err
    assert captured.out == ""


def test_help_lists_every_phase(capsys) -> None:
    assert main(["compact", "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    for phase in Phase:
        assert phase.value in out


def test_the_default_scorer_works_or_falls_back_with_one_warning(
    openai_file: tuple[Path, list[dict[str, Any]], int], capsys
) -> None:
    path, _, full = openai_file
    scorer, note = resolve_scorer("default")
    assert main(["compact", str(path), "--budget", str(full // 2)]) == 0
    captured = capsys.readouterr()
    assert check_openai(json.loads(captured.out)) == []
    warnings = [line for line in captured.err.splitlines() if "warning" in line]
    if scorer is None:
        assert note is not None and warnings == [f"salience: warning: {note}"]
    else:
        assert warnings == []


@pytest.mark.parametrize(
    ("argv", "pattern"),
    [
        (["--budget", "0"], r"--budget must be a positive number of tokens or a percentage .*got '0'"),
        (["--budget", "lots"], r"--budget must be .*got 'lots'"),
        (["--budget", "-5"], r"--budget must be .*got '-5'"),
        (["--budget", "0%"], r"--budget must be .*got '0%'"),
        (["--budget", "500", "--phase", "dance"], r"--phase must be one of explore, edit, .*chat \(got 'dance'\)"),
        (["--budget", "500", "--scorer", "nope"], r"--scorer must be a scorer file, .*got 'nope': no such file"),
        (["--budget", "20"], r"budget of 20 tokens is too small for transcript 'openai'.* need \d+ tokens.*"
                             r"--keep-pins"),
        (["--budget", "500", "--transcript", "x"], r"--transcript picks a transcript from a JSONL file"),
    ],
    ids=["zero", "word", "negative", "zero-percent", "phase", "scorer", "budget-error", "transcript-on-list"],
)
def test_compact_bad_input_exits_2_with_one_line(
    argv: list[str], pattern: str, openai_file: tuple[Path, list[dict[str, Any]], int], capsys
) -> None:
    path, _, _ = openai_file
    assert main(["compact", str(path), *argv]) == 2
    captured = capsys.readouterr()
    assert re.search(pattern, one_error_line(captured.err)), captured.err
    assert captured.out == ""


def test_compact_unreadable_inputs_exit_2(tmp_path: Path, capsys) -> None:
    cases = {
        "missing": (tmp_path / "nope.json", [], r"nope\.json: no such file"),
        "not-json-forced": (tmp_path / "x.txt", ["--format", "openai"], r"x\.txt: not a JSON file of openai messages"),
        "unknown-layout": (tmp_path / "y.txt", [], r"y\.txt: not in a layout salience knows"),
        "not-messages": (tmp_path / "z.json", ["--format", "anthropic"], r"expected a JSON list of anthropic messages"),
        "bad-message": (tmp_path / "w.json", [], r"role"),
        "unknown-transcript": (SERVICE, ["--transcript", "nope"], r"no transcript with id 'nope' \(it has "),
        "binary": (tmp_path / "b.json", [], r"not UTF-8"),
    }
    (tmp_path / "x.txt").write_text("hello", encoding="utf-8")
    (tmp_path / "y.txt").write_text("just some notes\n", encoding="utf-8")
    write_json(tmp_path / "z.json", {"a": 1})
    write_json(tmp_path / "w.json", [{"role": "robot", "content": "beep"}])
    (tmp_path / "b.json").write_bytes(b"\xff\xfe\x00[")
    for name, (path, extra, pattern) in cases.items():
        assert main(["compact", str(path), "--budget", "500", *extra]) == 2, name
        line = one_error_line(capsys.readouterr().err)
        assert re.search(pattern, line), (name, line)


def test_unwritable_output_exits_2(openai_file: tuple[Path, list[dict[str, Any]], int], tmp_path: Path,
                                   capsys) -> None:
    path, _, _ = openai_file
    assert main(["compact", str(path), "--budget", "100000", "--out", str(tmp_path / "no" / "such" / "dir.json"),
                 "--scorer", "recency"]) == 2
    assert "cannot write" in one_error_line(capsys.readouterr().err)


# --------------------------------------------------------------------------
# read_input and parse_budget
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("doc", "one_line", "forced", "expected"),
    [
        ([{"role": "user", "content": "hi"}], False, None, "openai"),
        ([{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "x"}]}], False, None,
         "anthropic"),
        ({"system": "s", "messages": [{"role": "user", "content": "hi"}]}, False, None, "anthropic"),
        ({"model": "gpt", "messages": [{"role": "user", "content": "hi"}]}, False, None, "openai"),
        ({"id": "t1", "messages": [{"role": "user", "content": "hi"}]}, True, None, "jsonl"),
        ({"id": "t1", "messages": [{"role": "user", "content": "hi"}]}, True, "openai", "openai"),
        ([{"role": "user", "content": "hi"}], False, "anthropic", "anthropic"),
    ],
    ids=["openai-list", "anthropic-list", "anthropic-object", "openai-object", "one-line-jsonl", "forced-openai",
         "forced-anthropic"],
)
def test_read_input_detects_the_format(doc: Any, one_line: bool, forced: str | None, expected: str,
                                       tmp_path: Path) -> None:
    path = tmp_path / "input.json"
    path.write_text(json.dumps(doc) if one_line else json.dumps(doc, indent=2), encoding="utf-8")
    loaded = read_input(path, forced)
    assert loaded.format == expected
    if expected == "jsonl":
        assert [t.id for t in loaded.transcripts] == ["t1"]
    else:
        assert loaded.messages == doc["messages"] if isinstance(doc, dict) else doc


@pytest.mark.parametrize(
    ("text", "tokens", "expected"),
    [("2000", None, 2000), ("2_000", None, 2000), ("25%", 1000, 250), ("0.5%", 1000, 5), ("1%", 10, 1)],
    ids=["int", "underscore", "percent", "fraction-percent", "at-least-one"],
)
def test_parse_budget(text: str, tokens: int | None, expected: int) -> None:
    assert parse_budget(text, tokens) == expected


# --------------------------------------------------------------------------
# inspect
# --------------------------------------------------------------------------


def test_inspect_shows_every_entry(capsys) -> None:
    t = sample(SERVICE)
    assert main(["inspect", str(SERVICE), "--transcript", t.id, "--budget", "1200", "--scorer", "recency"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("│")]
    for i, e in enumerate(t.entries):
        assert any(f" {i} │ {e.id} " in row for row in rows), e.id
    for word in ("tokens", "score", "option", "content", "total"):
        assert word in out
    assert f"{tokens_of(t):,}" in out  # the total before, in the footer
    assert "budget 1,200 tokens" in out
    body = [row for row in rows if " │ m" in row]
    assert len(body) == len(t.entries)
    assert {"full", "drop"} <= {option for row in body for option in ("full", "trim", "stub", "drop")
                                if f"│ {option} " in row}


def test_inspect_defaults_to_a_quarter_of_the_tokens(capsys) -> None:
    t = sample(CODING)
    assert main(["inspect", str(CODING), "--scorer", "recency"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    quarter = max(1, int(tokens_of(t) * 0.25))
    assert f"budget {quarter:,} tokens: 25% of the transcript's {tokens_of(t):,} (no --budget given)" in out
    assert f"showing transcript '{t.id}'" in out


def test_inspect_messages_with_a_limit(anthropic_file: tuple[Path, dict[str, Any], int], capsys) -> None:
    path, doc, full = anthropic_file
    t = Transcript.from_anthropic(doc["messages"], system=doc["system"])
    assert main(["inspect", str(path), "--limit", "5", "--budget", str(full // 2), "--scorer", "recency"]) == 0
    out = capsys.readouterr().out
    assert f"{len(t.entries) - 5} more entries not shown (--limit 5)" in out
    assert "│ system " in out and f"│ {t.entries[4].id} " in out and f"│ {t.entries[5].id} " not in out


def test_inspect_over_budget_is_shown_not_refused(openai_file: tuple[Path, list[dict[str, Any]], int],
                                                  capsys) -> None:
    path, _, _ = openai_file
    assert main(["inspect", str(path), "--budget", "20", "--scorer", "recency"]) == 0
    assert "over budget: the pinned entries alone need" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "pattern"),
    [(["--budget", "x"], r"--budget must be"), (["--phase", "nap"], r"--phase must be one of"),
     (["--limit", "0"], r"--limit must be a positive number"), (["--transcript", "t9"], r"no transcript with id")],
    ids=["budget", "phase", "limit", "transcript"],
)
def test_inspect_bad_input_exits_2(argv: list[str], pattern: str, capsys) -> None:
    assert main(["inspect", str(SERVICE), *argv]) == 2
    assert re.search(pattern, one_error_line(capsys.readouterr().err))
