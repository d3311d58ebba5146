"""Resource bounds (salience.limits): every reader bounds nesting depth, size and entries,
with a LimitError (a SalienceError, exit 2 on the command line) naming where, the limit
and its value; never a RecursionError, whatever the depth."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from salience import Transcript, load_transcripts
from salience.cli import main
from salience.datasets import jsonl
from salience.errors import FormatError, LimitError, ParameterError, SalienceError, TranscriptError
from salience.limits import DEFAULT_LIMITS, MAX_BYTES, MAX_DEPTH, MAX_ENTRIES, Limits, check_value, current, limited
from salience.limits import loads as limited_loads
from salience.scorer.baselines import RecencyScorer
from salience.selector.compactor import Compactor

FIXTURES = Path(__file__).parent / "fixtures" / "layouts"
LAYOUT_FILES = sorted(p for p in FIXTURES.rglob("*") if p.suffix in (".json", ".jsonl", ".traj")
                      and "databases" not in p.parts and p.name != "exceptions.json")


def nested(depth: int) -> Any:
    """A JSON value ``depth`` lists deep (built without recursion)."""
    value: Any = "bottom"
    for _ in range(depth):
        value = [value]
    return value


def deep_text(depth: int) -> str:
    return "[" * depth + '"bottom"' + "]" * depth


USER = {"role": "user", "content": "hi"}


def _call(cid: str) -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": "f", "arguments": "{}"}}


# --------------------------------------------------------------------------
# the limits themselves
# --------------------------------------------------------------------------


def test_defaults_are_documented_constants() -> None:
    assert (MAX_DEPTH, MAX_BYTES, MAX_ENTRIES) == (64, 64 * 1024 * 1024, 100_000)
    assert current() == DEFAULT_LIMITS == Limits()


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "64"], ids=["zero", "negative", "float", "bool", "str"])
def test_limits_refuse_what_is_not_a_positive_int(bad: Any) -> None:
    with pytest.raises(ParameterError, match=r"Limits: max_depth must be a positive int"):
        Limits(max_depth=bad)


def test_limited_applies_inside_the_block_only() -> None:
    with limited(max_depth=5, max_entries=2) as inner:
        assert current() is inner and (inner.max_depth, inner.max_entries, inner.max_bytes) == (5, 2, MAX_BYTES)
        with limited(Limits(max_bytes=10)):
            assert current().max_bytes == 10 and current().max_depth == MAX_DEPTH
        assert current() is inner
    assert current() is DEFAULT_LIMITS


def test_check_value_names_the_path_and_survives_cycles() -> None:
    with pytest.raises(LimitError, match=r"^here: nested 65 deep at \['a'\]\[0\]\[0\]\[0\]\.\.\.\[0\]\[0\]\[0\], "
                                         r"deeper than the limit max_depth=64 \(salience.limits\)$") as info:
        check_value({"a": nested(70)}, where="here")
    assert (info.value.limit, info.value.maximum, info.value.value) == ("max_depth", 64, 65)
    cycle: dict[str, Any] = {"role": "user"}
    cycle["self"] = cycle
    with pytest.raises(LimitError, match=r"deeper than the limit max_depth=64"):
        check_value(cycle, where="cycle")


def test_loads_says_where_json_breaks_and_how_deep_it_goes() -> None:
    with pytest.raises(FormatError, match=r"^f: not valid JSON: line 2, column 1: Expecting value$"):
        limited_loads('[1,\n]', where="f")
    with pytest.raises(FormatError, match=r"^f: not valid JSON: line 1, column 9: NaN is not a JSON value"):
        limited_loads('[1, 2,  NaN]', where="f", strict=True)
    assert limited_loads('["NaN", NaN]', where="f")[0] == "NaN"  # not strict: Python's reading
    with pytest.raises(LimitError, match=r"^f: line 1, column 65: nested 65 deep, deeper than the limit max_depth=64"):
        limited_loads(deep_text(100), where="f")
    with pytest.raises(LimitError, match=r"^f: line 1, column 65: nested 65 deep"):
        limited_loads(deep_text(100_000), where="f")  # past Python's own recursion limit
    with limited(max_bytes=10), pytest.raises(LimitError, match=r"^f: 12 characters, more than the limit max_bytes=10"):
        limited_loads('"0123456789"', where="f")


# --------------------------------------------------------------------------
# every reader: depth
# --------------------------------------------------------------------------


def _langchain(messages: list[Any]) -> Transcript:
    pytest.importorskip("langchain_core")
    from langchain_core.messages import HumanMessage

    from salience.messages.langchain import from_langchain

    return from_langchain([HumanMessage("hi", additional_kwargs=m.get("extra", {})) for m in messages])


def _compact(fmt: str) -> Callable[[list[Any]], Any]:
    def run(messages: list[Any]) -> Any:
        return Compactor(scorer=RecencyScorer()).compact(messages, budget=100, format=fmt)

    return run


READERS: dict[str, Callable[[list[Any]], Any]] = {
    "from_openai": lambda m: Transcript.from_openai(m, id="t"),
    "from_anthropic": lambda m: Transcript.from_anthropic(m, id="t"),
    "from_langchain": _langchain,
    "compact-openai": _compact("openai"),
    "compact-anthropic": _compact("anthropic"),
}


@pytest.mark.parametrize("depth", [70, 5_000], ids=["70", "5000"])
@pytest.mark.parametrize("read", list(READERS.values()), ids=list(READERS))
def test_every_message_reader_bounds_depth(read: Callable[[list[Any]], Any], depth: int) -> None:
    messages = [USER, {"role": "user", "content": "x", "extra": {"k": nested(depth)}}]
    if read is _langchain:
        messages = [USER, {"extra": {"k": nested(depth)}}]
    with pytest.raises(LimitError, match=r"message 1.*: nested 6[45] deep at .*deeper than the limit max_depth=64"):
        read(messages)


def test_compactor_cache_path_bounds_depth_and_entries() -> None:
    compactor = Compactor(scorer=RecencyScorer())
    messages = [USER, {"role": "user", "content": "x"}]
    compactor.compact(messages, budget=100)
    deep = [*messages, {"role": "user", "content": "x", "extra": nested(100)}]
    with pytest.raises(LimitError, match=r"message 2: nested 65 deep"):
        compactor.compact(deep, budget=100)
    with limited(max_entries=2), pytest.raises(LimitError, match=r"3 messages, more than the limit max_entries=2"):
        compactor.compact([*messages, USER], budget=100)


def test_anthropic_system_is_bounded_too() -> None:
    with pytest.raises(LimitError, match=r"transcript 't', system: nested 65 deep"):
        Transcript.from_anthropic([USER], system=[{"type": "text", "text": "s", "x": nested(100)}], id="t")


def _deepen(path: Path, tmp_path: Path, depth: int) -> Path:
    """A copy of the layout file ``path`` with a key nested ``depth`` deep added to its first object."""
    out = tmp_path / path.relative_to(FIXTURES)
    out.parent.mkdir(parents=True, exist_ok=True)
    deep = deep_text(depth)
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".jsonl":
        first, rest = text.split("\n", 1)
        assert first.rstrip().endswith("}")
        out.write_text(first.rstrip()[:-1] + f', "zz_deep": {deep}}}\n' + rest, encoding="utf-8")
    else:
        end = text.rstrip()
        closing = end[-1]
        body = end[:-1].rstrip()
        if closing == "]":  # a list of runs: deepen the last one
            assert body.endswith("}")
            out.write_text(body[:-1] + f', "zz_deep": {deep}}}]\n', encoding="utf-8")
        else:
            out.write_text(body + f', "zz_deep": {deep}}}\n', encoding="utf-8")
    return out


@pytest.mark.parametrize("depth", [70, 5_000], ids=["70", "5000"])
@pytest.mark.parametrize("path", LAYOUT_FILES, ids=[p.parent.name + "/" + p.name for p in LAYOUT_FILES])
def test_every_data_set_loader_bounds_depth(path: Path, depth: int, tmp_path: Path) -> None:
    load_transcripts(path)  # the fixture itself loads
    deep = _deepen(path, tmp_path, depth)
    with pytest.raises(LimitError, match=rf"{deep.name}(:\d+)?: (line \d+, )?column \d+: nested 65 deep, deeper "
                                         r"than the limit max_depth=64"):
        load_transcripts(deep)


# --------------------------------------------------------------------------
# size and entries
# --------------------------------------------------------------------------


SIZED: dict[str, Callable[[list[Any]], Any]] = {
    "from_openai": READERS["from_openai"],
    "from_anthropic": READERS["from_anthropic"],
    "compact-openai": READERS["compact-openai"],
}


def test_files_and_lines_are_bounded_in_size_and_entries(tmp_path: Path) -> None:
    line = json.dumps({"id": "t", "messages": [USER, {"role": "assistant", "content": "x" * 500}]})
    path = tmp_path / "a.jsonl"
    path.write_text(line + "\n" + line.replace('"t"', '"u"') + "\n", encoding="utf-8")
    assert len(load_transcripts(path)) == 2
    with limited(max_bytes=300), pytest.raises(LimitError, match=r"a\.jsonl:1: 301 bytes or more in the line, more "
                                                                 r"than the limit max_bytes=300"):
        jsonl.load(path)
    with limited(max_entries=1), pytest.raises(LimitError, match=r"a\.jsonl:1: transcript 't': 2 messages, more "
                                                                 r"than the limit max_entries=1"):
        load_transcripts(path)
    runs = FIXTURES / "taubench" / "gpt-4o-airline-excerpt.json"
    with limited(max_bytes=1_000), pytest.raises(LimitError, match=r"excerpt\.json: [\d,]+ bytes, more than the limit"):
        load_transcripts(runs)
    with limited(max_entries=3), pytest.raises(LimitError, match=r"excerpt\.json: transcript '[\w-]+': \d+ entries, "
                                                                 r"more than the limit max_entries=3"):
        load_transcripts(runs)


def test_a_five_megabyte_message_is_within_the_default_limits() -> None:
    t = Transcript.from_openai([USER, {"role": "assistant", "content": "x" * 5_000_000}])
    assert len(t.entries[1].content) == 5_000_000


# --------------------------------------------------------------------------
# the command line: exit 2, one line
# --------------------------------------------------------------------------


def _err(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    lines = [line for line in err if line.startswith("salience: error:")]
    assert len(lines) == 1, err
    return lines[0]


CLI_CASES: dict[str, tuple[str, str]] = {
    "deep-5000": ('{"messages": [{"role": "user", "content": "x", "extra": ' + deep_text(5_000) + "}]}",
                  r"x\.json: line 1, column \d+: nested 65 deep, deeper than the limit max_depth=64"),
    "deep-list-70": ('[{"role": "user", "content": "x", "extra": ' + deep_text(70) + "}]",
                     r"x\.json: line 1, column \d+: nested 65 deep"),
    "truncated": ('[{"role": "user", "content": "hi"}', r"x\.json: not valid JSON: line 1, column 35: Expecting ','"),
    "trailing-comma": ('[{"role": "user", "content": "hi"},]',
                       r"x\.json: not valid JSON: line 1, column 36: Expecting value"),
    "trailing-comma-in-object": ('{"messages": [{"role": "user", "content": "hi",}]}',
                                 r"x\.json: not valid JSON: line 1, column 48: Expecting property name"),
    "truncated-multiline": ('[\n  {"role": "user",\n  "content": "h', r"x\.json: not valid JSON: line 3, column 14: "
                                                                       r"Unterminated string"),
    "nan": ('[{"role": "user", "content": "hi", "x": NaN}]',
            r"x\.json: not valid JSON: line 1, column 41: NaN is not a JSON value"),
    "orphan-call": (json.dumps([USER, {"role": "assistant", "content": None, "tool_calls": [_call("c1")]},
                                {"role": "user", "content": "well?"}]),
                    r"message 1 \(id 'm1', assistant\): tool call 'c1' is not answered before message 2 "
                    r"\(id 'm2', user\)"),
}


@pytest.mark.parametrize(("text", "match"), list(CLI_CASES.values()), ids=list(CLI_CASES))
@pytest.mark.parametrize("command", ["compact", "inspect"])
def test_cli_bad_json_is_one_line_and_exit_2(command: str, text: str, match: str, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "x.json"
    path.write_text(text, encoding="utf-8")
    before = path.read_bytes()
    assert main([command, str(path), "--budget", "100", "--scorer", "recency"]) == 2
    line = _err(capsys)
    assert "internal error" not in line
    import re

    assert re.search(match, line), line
    assert path.read_bytes() == before


def test_cli_stats_and_train_inputs_are_bounded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "x.json"
    path.write_text('{"task_id": 1, "traj": [' + deep_text(5_000) + "]}", encoding="utf-8")
    assert main(["stats", str(path)]) == 2
    assert "nested 65 deep" in _err(capsys)
    path.write_text('[{"task_id": 1, "traj": []},]', encoding="utf-8")
    assert main(["stats", str(path)]) == 2
    assert "not valid JSON: line 1, column 29: Expecting value" in _err(capsys)


def test_limit_errors_are_transcript_errors() -> None:
    assert issubclass(LimitError, TranscriptError) and issubclass(LimitError, SalienceError)
    assert issubclass(LimitError, ValueError)


def test_readers_do_not_touch_what_they_refuse() -> None:
    messages = [USER, {"role": "user", "content": "x", "extra": nested(100)}]
    snapshot = copy.deepcopy(messages)
    with pytest.raises(LimitError):
        Transcript.from_openai(messages)
    assert messages == snapshot


# -- the Responses items reader ---------------------------------------------------------------------------


def _responses(items: list[Any]) -> Any:
    from salience.messages.responses import from_responses

    return from_responses(items, id="t")


RESPONSES_READERS: dict[str, Callable[[list[Any]], Any]] = {
    "from_responses": _responses,
    "compact-responses": _compact("responses"),
}


@pytest.mark.parametrize("depth", [70, 5_000], ids=["70", "5000"])
@pytest.mark.parametrize("read", list(RESPONSES_READERS.values()), ids=list(RESPONSES_READERS))
def test_the_responses_reader_bounds_depth(read: Callable[[list[Any]], Any], depth: int) -> None:
    items = [USER, {"type": "function_call", "call_id": "c1", "name": "f", "arguments": {"k": nested(depth)}}]
    snapshot = copy.deepcopy(items[:1])
    with pytest.raises(LimitError, match=r"item 1: nested 6[45] deep at \['arguments'\]\['k'\].*deeper than the "
                                         r"limit max_depth=64"):
        read(items)
    assert items[:1] == snapshot


#: Each reader bounded by size and entries, with the word its errors use for an entry.
BY_SIZE = [(read, "message") for read in SIZED.values()] + [(read, "item") for read in RESPONSES_READERS.values()]


@pytest.mark.parametrize(("read", "unit"), BY_SIZE, ids=[*SIZED, *RESPONSES_READERS])
def test_readers_bound_size_and_entries(read: Callable[[list[Any]], Any], unit: str) -> None:
    with limited(max_bytes=1_000), pytest.raises(LimitError, match=rf"{unit} 0: 2,0\d\d bytes of JSON \(about\), "
                                                                   r"more than the limit max_bytes=1,000"):
        read([{"role": "user", "content": "x" * 2_000}])
    with limited(max_bytes=1_000), pytest.raises(LimitError, match=r"transcript '\w+': 1,\d\d\d bytes of JSON"):
        read([{"role": "user", "content": "x" * 300}, {"role": "assistant", "content": "y" * 300},
              {"role": "user", "content": "z" * 300}, {"role": "assistant", "content": "w" * 300}])
    with limited(max_entries=3), pytest.raises(LimitError, match=rf"transcript '\w+': 4 {unit}s, more than the "
                                                                 r"limit max_entries=3"):
        read([USER, {"role": "assistant", "content": "a"}, USER, {"role": "assistant", "content": "b"}])
    assert read([USER]) is not None  # within the limits


def test_the_responses_reader_takes_limits_directly() -> None:
    with pytest.raises(LimitError, match="max_entries=1"):
        _responses_with([USER, USER], Limits(max_entries=1))
    assert len(_responses_with([USER, USER], Limits(max_entries=2)).entries) == 2


def _responses_with(items: list[Any], limits: Limits) -> Any:
    from salience.messages.responses import from_responses

    return from_responses(items, limits=limits)


# -- the limits on the command line ----------------------------------------------------------------------


def _write(path: Path, value: Any) -> Path:
    path.write_text(json.dumps(value), encoding="utf-8")
    return path


@pytest.mark.parametrize("flags, code, message", [
    ([], 2, "nested 65 deep, deeper than the limit max_depth=64"),
    (["--max-depth", "100"], 0, None),
    (["--max-depth", "100", "--max-entries", "2"], 2, "3 messages, more than the limit max_entries=2"),
    (["--max-depth", "100", "--max-bytes", "1KiB"], 2, "more than the limit max_bytes=1,024"),
    (["--max-depth", "0"], 2, "--max-depth must be a positive whole number (got '0')"),
    (["--max-bytes", "12 parsecs"], 2, "--max-bytes must be a positive whole number of bytes, or one with KiB"),
    (["--max-entries", "-3"], 2, "--max-entries must be a positive whole number (got '-3')"),
], ids=["default", "deeper-allowed", "entries", "bytes", "bad-depth", "bad-bytes", "bad-entries"])
@pytest.mark.parametrize("command", ["inspect", "compact"])
def test_limits_from_the_command_line(command: str, flags: list[str], code: int, message: str | None,
                                      tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    messages = [USER, {"role": "assistant", "content": "y" * 800, "extra": {"k": nested(62)}}, USER]
    path = _write(tmp_path / "deep.json", messages)
    args = [command, str(path), "--scorer", "recency", "--budget", "500", *flags]
    if command == "compact":
        args += ["--out", str(tmp_path / "out.json")]
    assert main(args) == code
    err = capsys.readouterr().err
    if message is None:
        assert "error" not in err
    else:
        lines = [line for line in err.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("salience: error: ") and message in lines[0], err
    assert current() == DEFAULT_LIMITS  # the block ends with the command


def test_limits_reach_the_data_set_loaders_and_the_proxy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "t.jsonl"
    jsonl.save([Transcript.from_openai([USER, {"role": "assistant", "content": "hello"}], id="t")], path)
    assert main(["stats", str(path), "--max-entries", "1"]) == 2
    assert "t.jsonl:1: transcript 't': 2 messages, more than the limit max_entries=1" in capsys.readouterr().err
    assert main(["stats", str(path), "--max-entries", "2"]) == 0
    pytest.importorskip("uvicorn")
    import uvicorn

    served: list[Any] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: served.append(app))
    assert main(["proxy", "--upstream", "http://127.0.0.1:9", "--scorer", "recency", "--max-bytes", "2MiB",
                 "--max-depth", "32"]) == 0
    assert served[0].state.proxy.config.limits == Limits(max_depth=32, max_bytes=2 * 2**20)
