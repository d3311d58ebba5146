"""Tests for the ``salience`` command line: stats, label, errors and exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from salience import __version__, load_transcripts
from salience.cli import COMMANDS, build_parser, main
from salience.errors import ParameterError, ParameterKeyError, ParameterTypeError

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "data"


def one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("salience: error: "), err
    assert "Traceback" not in err
    return lines[0]


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    """A canonical JSONL file with one small agent transcript and no labels."""
    t = {
        "id": "tiny", "domain": "retail",
        "messages": [
            {"role": "user", "content": "Where is order #W4827113?"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function",
                 "function": {"name": "get_order_details", "arguments": "{\"order_id\": \"#W4827113\"}"}}]},
            {"role": "tool", "tool_call_id": "c1", "name": "get_order_details",
             "content": "{\"status\": \"shipped\", \"tracking_id\": \"517034992265\"}"},
            {"role": "assistant", "content": "It shipped; tracking number 517034992265."},
        ],
    }
    path = tmp_path / "tiny.jsonl"
    path.write_text(json.dumps(t) + "\n", encoding="utf-8")
    return path


# --------------------------------------------------------------------------
# basics
# --------------------------------------------------------------------------


def test_version(capsys) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"salience {__version__}"


@pytest.mark.parametrize("argv", [["--help"], ["stats", "--help"], ["label", "--help"]], ids=["main", "stats", "label"])
def test_help(argv: list[str], capsys) -> None:
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: salience")


def test_commands_registered() -> None:
    names = [name for name, _ in COMMANDS]
    assert names[:2] == ["stats", "label"]
    parser = build_parser()
    help_text = parser.format_help()
    assert "stats" in help_text and "label" in help_text


def test_missing_modules_are_left_out(monkeypatch) -> None:
    import salience.cli.dispatch as cli

    monkeypatch.setattr(cli, "COMMANDS", [*cli.COMMANDS, ("frobnicate", "salience.no_such_module:add_parser")])
    assert "frobnicate" not in build_parser().format_help()


def test_python_dash_m(tiny: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "salience", "stats", str(tiny), "--json"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["entries"] == 4


# --------------------------------------------------------------------------
# stats
# --------------------------------------------------------------------------


def test_stats_on_the_samples(capsys) -> None:
    assert main(["stats", str(SAMPLES)]) == 0
    out = capsys.readouterr().out
    for title in ("Transcripts", "By domain", "By role", "tools by result tokens"):
        assert title in out
    for domain in ("airline", "coding", "conversation", "retail"):
        assert domain in out


def test_stats_json(capsys) -> None:
    assert main(["stats", str(SAMPLES), "--json", "--top", "3"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["transcripts"] == 8
    assert data["labeled"] == data["entries"] > 200
    assert 0 < data["needed_share"] < 1
    assert data["queries"] > 0 and data["evidence"] >= data["queries"]
    assert len(data["by_tool"]) == 3
    assert set(data["by_role"]) == {"system", "user", "assistant", "tool"}
    assert set(data["by_domain"]) == {"airline", "coding", "conversation", "retail"}
    assert sum(d["entries"] for d in data["by_domain"].values()) == data["entries"]


# --------------------------------------------------------------------------
# label
# --------------------------------------------------------------------------


def test_label_writes_labelled_jsonl(tiny: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "out" / "labelled.jsonl"
    assert main(["label", str(tiny), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "labelled 1 transcripts (1 hindsight, 0 evidence)" in printed
    assert "needed: 2 of 4 entries (50.0%)" in printed
    assert "needed tool entries: 1 of 1 (100.0%)" in printed
    (t,) = load_transcripts(out)
    assert t.labels == [1.0, 0.0, 1.0, 0.0]
    assert t.entries[2].meta["used_by"] == ["m3"]


def test_label_keeps_labels_unless_overwrite(tmp_path: Path, capsys) -> None:
    out = tmp_path / "x.jsonl"
    assert main(["label", str(SAMPLES / "long_chat.jsonl"), "--mode", "hindsight", "--out", str(out)]) == 0
    assert "0 evidence" in capsys.readouterr().out
    kept = load_transcripts(out)
    assert kept[0].labels == load_transcripts(SAMPLES / "long_chat.jsonl")[0].labels
    assert main(["label", str(SAMPLES / "long_chat.jsonl"), "--mode", "hindsight", "--overwrite",
                 "--out", str(out)]) == 0
    relabelled = load_transcripts(out)
    assert "needed_in" in relabelled[0].entries[0].meta


def test_label_evidence_mode_without_queries(tiny: Path, tmp_path: Path, capsys) -> None:
    assert main(["label", str(tiny), "--mode", "evidence", "--out", str(tmp_path / "x.jsonl")]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "transcript 'tiny': evidence labels need queries with evidence" in line
    assert not (tmp_path / "x.jsonl").exists()


# --------------------------------------------------------------------------
# errors: exit 2, one line, no traceback
# --------------------------------------------------------------------------


def test_missing_file(tmp_path: Path, capsys) -> None:
    missing = tmp_path / "nope.jsonl"
    assert main(["stats", str(missing)]) == 2
    assert one_error_line(capsys.readouterr().err) == f"salience: error: {missing}: no such file or folder"


def test_malformed_json_names_file_and_line(tiny: Path, capsys) -> None:
    with tiny.open("a", encoding="utf-8") as fh:
        fh.write("\n{\"id\": \"broken\", \"messages\": [\n")
    assert main(["label", str(tiny), "--out", str(tiny.with_name("o.jsonl"))]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert f"{tiny}:3: malformed JSON" in line


def test_unknown_layout(tmp_path: Path, capsys) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("just some notes\nnothing to see\n", encoding="utf-8")
    assert main(["stats", str(path)]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert f"{path}: not in a layout salience knows" in line


def test_invalid_transcript_content(tmp_path: Path, capsys) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"id": "b", "messages": [{"role": "robot", "content": "beep"}]}) + "\n")
    assert main(["stats", str(path)]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "field 'role'" in line and "robot" in line


def test_unwritable_output(tiny: Path, tmp_path: Path, capsys) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert main(["label", str(tiny), "--out", str(blocker / "out.jsonl")]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert line.startswith(f"salience: error: cannot write {blocker / 'out.jsonl'}: ")


@pytest.mark.parametrize(
    "argv",
    [[], ["frobnicate"], ["stats"], ["label", "x.jsonl"], ["label", "x", "--out", "y", "--mode", "oracle"],
     ["stats", "x", "--top", "-1"]],
    ids=["no-command", "unknown-command", "stats-no-path", "label-no-out", "bad-mode", "bad-top"],
)
def test_bad_arguments_exit_2(argv: list[str], capsys) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "error:" in err and "Traceback" not in err


def test_internal_errors_exit_1_in_one_line_and_verbose_shows_traceback(tiny: Path, monkeypatch, capsys) -> None:
    import salience.stats

    def boom(*args, **kwargs):
        raise RuntimeError("kaboom")

    monkeypatch.setattr(salience.stats, "transcript_stats", boom)
    assert main(["stats", str(tiny)]) == 1
    line = one_error_line(capsys.readouterr().err)
    assert "internal error: RuntimeError: kaboom" in line and "--verbose" in line
    assert main(["stats", str(tiny), "--verbose"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" in err and err.rstrip().endswith("internal error: RuntimeError: kaboom")
    assert main(["-v", "stats", str(tiny)]) == 1
    assert "Traceback" in capsys.readouterr().err


@pytest.mark.parametrize(("error", "code"), [
    (ValueError("an invariant broke"), 1),
    (TypeError("an invariant broke"), 1),
    (KeyError("an invariant broke"), 1),
    (ParameterError("top must be a non-negative int or None (got -1)"), 2),
    (ParameterTypeError("query must be a str or None (got 3 that is a int)"), 2),
    (ParameterKeyError("restore: no entry with id 'nope'"), 2),
], ids=["bare-value-error", "bare-type-error", "bare-key-error", "parameter-error", "parameter-type-error",
        "parameter-key-error"])
def test_only_salience_errors_are_bad_input(tiny: Path, monkeypatch, capsys, error: Exception, code: int) -> None:
    """A bare ValueError is a bug inside salience (exit 1, internal error); what the library
    raises on bad input is a SalienceError (exit 2, the message alone)."""
    import salience.stats

    def fail(*args, **kwargs):
        raise error

    monkeypatch.setattr(salience.stats, "transcript_stats", fail)
    assert main(["stats", str(tiny)]) == code
    line = one_error_line(capsys.readouterr().err)
    if code == 1:
        assert line.startswith(f"salience: error: internal error: {type(error).__name__}: ")
    else:
        assert line == f"salience: error: {error.args[0]}"


def test_verbose_shows_traceback_for_bad_input(tmp_path: Path, capsys) -> None:
    assert main(["--verbose", "stats", str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" in err and err.rstrip().splitlines()[-1].startswith("salience: error: ")


def test_stats_doctests() -> None:
    import doctest

    import salience.stats as module

    result = doctest.testmod(module)
    assert result.attempted >= 3 and result.failed == 0


def test_stats_counts_by_role_tool_and_domain() -> None:
    from salience import Transcript
    from salience.stats import NO_DOMAIN, transcript_stats
    from salience.tokens import MESSAGE_OVERHEAD

    a = Transcript.from_openai([
        {"role": "system", "content": "be kind", "label": 1},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "grep", "arguments": "{}"}},
            {"id": "c2", "type": "function", "function": {"name": "read", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "name": "grep", "content": "a b c", "label": 0},
        {"role": "tool", "tool_call_id": "c2", "name": "read", "content": "a b c d e f", "label": 0.75},
    ], id="a", domain="coding")
    b = Transcript.from_openai([{"role": "user", "content": "hello there"}], id="b")
    words = lambda text: len(text.split())  # noqa: E731
    s = transcript_stats([a, b], counter=words, top=1)
    # tokens: MESSAGE_OVERHEAD per message + words (+ tool names, + 3 and the name per call)
    assert s.entries == 5 and s.tool_calls == 2
    assert s.labeled == 3 and s.needed == 2 and s.needed_share == pytest.approx(2 / 3)
    assert list(s.by_tool) == ["read"]  # the largest by tokens only
    assert s.by_tool["read"].entries == 1 and s.by_tool["read"].needed == 1
    assert s.by_role["tool"].entries == 2 and s.by_role["tool"].needed_share == 0.5
    assert list(s.by_role) == ["system", "user", "assistant", "tool"]
    assert set(s.by_domain) == {"coding", NO_DOMAIN}
    assert s.by_domain[NO_DOMAIN].entries == 1 and s.by_domain[NO_DOMAIN].tokens == MESSAGE_OVERHEAD + 2
    assert s.by_domain["coding"].tokens + s.by_domain[NO_DOMAIN].tokens == s.tokens
    assert s.by_domain["coding"].by_domain == {}
    assert transcript_stats([]).needed_share is None
    with pytest.raises(ValueError, match=r"top must be a non-negative int or None \(got -1\)"):
        transcript_stats([a], top=-1)
