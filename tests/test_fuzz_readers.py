"""Fuzz every reader and both entry points (the library and the command line) with
mutated real transcripts (hypothesis).

Seeds: the project's samples (``data/*.jsonl``) rendered as OpenAI and Anthropic messages,
and the layout fixtures of every data set loader (``tests/fixtures/layouts``). Mutations:
dropped, duplicated and reordered messages; fields given wrong types; huge strings; deep
nesting; NaN and infinities; lone surrogates and control characters; duplicate ids;
for files, also truncation, flipped bytes and stray commas. Those edits almost always
break a history (an Anthropic one above all: a dropped, moved or copied message strands a
``tool_result``), so that ``Compactor.compact`` saw no valid Anthropic input (0 of 38 cases):
half its cases get edits that keep the history valid instead (:func:`kept_valid`: odd and
huge text, odd arguments, a cut), and an input the provider takes must come out as one
it takes, by every check of :mod:`salience.messages.validate`.

The property, for every input:

* either a valid result (a transcript whose tool calls pair up as the providers want,
  or an exit code 0 with JSON output) or a :class:`~salience.errors.SalienceError`
  (exit 2) whose message names where (a transcript, message, file or field);
* never another exception (exit 1 on the command line);
* never a mutated input;
* never a hang (each case has a time limit).

``SALIENCE_FUZZ_EXAMPLES`` scales the number of cases per reader (default 100, a few
seconds each); ``benchmarks/bench_fuzz.py --readers N`` runs them longer and prints the
counts that :data:`COUNTS` collects.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import math
import os
import re
import signal
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from salience import load_transcripts
from salience.errors import SalienceError
from salience.messages.validate import check_openai
from salience.transcript import Transcript

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).parent / "fixtures" / "layouts"
EXAMPLES = int(os.environ.get("SALIENCE_FUZZ_EXAMPLES", "100"))
#: Seconds one case may take before it counts as a hang.
HANG_SECONDS = float(os.environ.get("SALIENCE_FUZZ_HANG_SECONDS", "20"))

#: Per reader: cases, valid, refused (SalienceError), internal (any other exception),
#: mutated (input changed), hangs, and provider problems beside tool pairing (counted, not failed).
COUNTS: dict[str, Counter[str]] = {}

FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])

#: What a SalienceError's message must contain to say where.
WHERE = re.compile(r"transcript|message|entry|field|line|column|\.json|\.jsonl|\.traj|system|nested|"
                   r"limit|layout|messages|file", re.IGNORECASE)


@pytest.fixture(scope="module", autouse=True)
def report() -> Iterator[None]:
    """Write :data:`COUNTS` as JSON to ``$SALIENCE_FUZZ_REPORT`` once the module is done (the benchmark reads it)."""
    yield
    target = os.environ.get("SALIENCE_FUZZ_REPORT")
    if target:
        Path(target).write_text(json.dumps({k: dict(v) for k, v in COUNTS.items()}, indent=1), encoding="utf-8")


# --------------------------------------------------------------------------
# seeds
# --------------------------------------------------------------------------


def _seed_transcripts() -> list[Transcript]:
    return load_transcripts(sorted((ROOT / "data").glob("*.jsonl")))


SEEDS = _seed_transcripts()
OPENAI_SEEDS = [t.to_openai() for t in SEEDS]
ANTHROPIC_SEEDS = [(t.to_anthropic(), t.anthropic_system()) for t in SEEDS]
LAYOUT_FILES = sorted(p for p in FIXTURES.rglob("*") if p.suffix in (".json", ".jsonl", ".traj")
                      and "databases" not in p.parts and p.name != "exceptions.json")


# --------------------------------------------------------------------------
# odd values and mutations
# --------------------------------------------------------------------------


def nested(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = [value] if depth % 2 else {"k": value}
    return value


ODD_STRINGS = st.sampled_from([
    "", " ", "\x00", "nul\x00bell\x07esc\x1b", "lone \udc80 surrogate", "\ud83d", "pair \U0001f600", "\u202e rtl",
    "\ufeffbom", "line\r\nbreak", '{"broken": ', "NaN", "-Infinity", "a" * 5_000,
])
ODD_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([math.nan, math.inf, -math.inf, -0.0, 1e308]),
    ODD_STRINGS, st.text(max_size=30),
    st.builds(lambda n: "z" * n, st.integers(min_value=100_000, max_value=300_000)),
    st.builds(nested, st.sampled_from([2, 63, 64, 65, 70, 200])),
    st.lists(st.integers(), max_size=3), st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
    st.just([{"type": "text"}]), st.just([{"type": "tool_result", "tool_use_id": "nope"}]),
    st.just([{"type": "tool_use", "id": "dup", "name": "f", "input": {}}]),
)
FIELDS = st.sampled_from(["role", "content", "tool_calls", "tool_call_id", "name", "id", "label", "meta",
                          "function", "arguments", "text", "type", "extra"])


#: The fields of Responses API items.
RESPONSES_FIELDS = st.sampled_from(["type", "role", "content", "call_id", "output", "arguments", "name", "summary",
                                    "id", "text", "status", "extra"])


@st.composite
def mutations(draw: st.DrawFn, fields: st.SearchStrategy[str] = FIELDS) -> list[tuple[Any, ...]]:
    """A short list of edits, each ``(kind, ...)`` with positions as fractions (the list's length varies)."""
    ops = []
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        kind = draw(st.sampled_from(["drop", "duplicate", "swap", "field", "deep-field", "same-id", "truncate",
                                     "wrap", "call-id"]))
        ops.append((kind, draw(st.floats(0, 1)), draw(st.floats(0, 1)), draw(fields), draw(ODD_VALUES)))
    return ops


#: Text a provider takes: control characters, lone surrogates, bidi marks, huge and adversarial strings.
PROVIDER_TEXTS = st.one_of(
    st.sampled_from(["nul\x00bell\x07esc\x1b", "lone \udc80 surrogate", "\ud83d", "pair \U0001f600", "\u202e rtl",
                     "\ufeffbom", "line\r\nbreak", '{"broken": ', "NaN", "-Infinity", "a" * 5_000, "a-" * 10_000,
                     "see src/app/main.py#L12 HAT136 " * 500]),
    st.text(min_size=1, max_size=30).filter(str.strip),
    st.builds(lambda n: "z" * n, st.integers(min_value=100_000, max_value=300_000)),
)
#: Odd tool call arguments that stay within the readers' limits.
ARGUMENTS = st.one_of(
    st.sampled_from([math.nan, math.inf, -math.inf, -0.0, 1e308, None, True, "[" * 5_000, '{"broken": ', "\udc80"]),
    st.integers(min_value=-(2**70), max_value=2**70), PROVIDER_TEXTS, st.builds(nested, st.sampled_from([2, 20])),
)


@st.composite
def kept_valid(draw: st.DrawFn) -> list[tuple[Any, ...]]:
    """Up to three edits after which a history is still one the provider takes (none: the seed as it is):
    a message's text made odd, a tool call's arguments made odd, the history cut after any message
    (a call left last is pending, which the checks allow)."""
    ops = []
    for _ in range(draw(st.integers(min_value=0, max_value=3))):
        kind = draw(st.sampled_from(["text", "arguments", "truncate"]))
        value = draw(ARGUMENTS if kind == "arguments" else PROVIDER_TEXTS)
        ops.append((kind, draw(st.floats(0.05, 1)), draw(st.floats(0, 1)), draw(st.sampled_from(["q", "n", "id"])),
                    value))
    return ops


def _pick(n: int, fraction: float) -> int:
    return min(n - 1, int(fraction * n))


def _deep_set(value: Any, fraction: float, key: str, new: Any) -> None:
    """Set ``key`` (or an index) of some mapping or list nested inside ``value`` to ``new``."""
    containers: list[Any] = []
    stack = [value]
    while stack and len(containers) < 200:
        item = stack.pop()
        if isinstance(item, (dict, list)):
            containers.append(item)
            stack.extend(item.values() if isinstance(item, dict) else item)
    if not containers:
        return
    target = containers[_pick(len(containers), fraction)]
    if isinstance(target, dict):
        keys = list(target)
        target[keys[_pick(len(keys), fraction)] if keys and fraction < 0.7 else key] = new
    elif target:
        target[_pick(len(target), fraction)] = new


def mutate(messages: list[Any], ops: list[tuple[Any, ...]], call_keys: tuple[str, str] = ("tool_call_id",
                                                                                          "tool_use_id")) -> list[Any]:
    """``messages`` (deep-copied) with ``ops`` applied; ``call-id`` edits set one of ``call_keys``."""
    out = copy.deepcopy(messages)
    for kind, a, b, key, value in ops:
        if not out:
            out.append(copy.deepcopy(value))
            continue
        i, j = _pick(len(out), a), _pick(len(out), b)
        if kind == "drop":
            del out[i]
        elif kind == "duplicate":
            out.insert(j, copy.deepcopy(out[i]))
        elif kind == "swap":
            out[i], out[j] = out[j], out[i]
        elif kind == "field" and isinstance(out[i], dict):
            out[i][key] = copy.deepcopy(value)
        elif kind == "deep-field":
            _deep_set(out[i], b, key, copy.deepcopy(value))
        elif kind == "same-id" and isinstance(out[i], dict) and isinstance(out[j], dict):
            out[i]["id"] = out[j]["id"] = "same"
        elif kind == "truncate":
            del out[i:]
        elif kind == "wrap":
            out[i] = copy.deepcopy(value) if b < 0.5 else [out[i]]
        elif kind == "call-id":
            _deep_set(out[i], b, call_keys[0] if a < 0.5 else call_keys[1], "shared-id")
        elif kind == "text" and isinstance(out[i], dict):
            _set_text(out[i], value)
        elif kind == "arguments" and isinstance(out[i], dict):
            _set_arguments(out[i], key, value)
    return out


def _set_text(message: dict[str, Any], text: str) -> None:
    """The text of ``message`` (a string content, or its first text block) becomes ``text``."""
    content = message.get("content")
    if isinstance(content, str) and content.strip():
        message["content"] = text
    elif isinstance(content, list):
        for block in content:
            if isinstance(block, dict) and block.get("type") == "text" and str(block.get("text", "")).strip():
                block["text"] = text
                return


def _set_arguments(message: dict[str, Any], key: str, value: Any) -> None:
    """One tool call of ``message`` gets ``value`` as an argument: an Anthropic ``tool_use`` block's
    ``input[key]``, or an OpenAI call's ``arguments`` string (``value`` as JSON, NaN included)."""
    for call in message.get("tool_calls") or []:
        if isinstance(call, dict) and isinstance(call.get("function"), dict):
            call["function"]["arguments"] = value if isinstance(value, str) else json.dumps({key: value})
            return
    content = message.get("content")
    for block in content if isinstance(content, list) else []:
        if isinstance(block, dict) and block.get("type") == "tool_use" and isinstance(block.get("input"), dict):
            block["input"][key] = value
            return


# --------------------------------------------------------------------------
# the property
# --------------------------------------------------------------------------


class Hang(BaseException):
    """A case ran past HANG_SECONDS."""


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    def expire(signum: int, frame: Any) -> None:
        raise Hang(f"no answer after {seconds:.0f}s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def fingerprint(value: Any) -> list[Any]:
    """A flat, comparable picture of ``value`` (no recursion: safe at any depth; NaN equals NaN)."""
    out: list[Any] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            out.append(("{", len(item)))
            for k, v in item.items():
                out.append(("k", repr(k)))
                stack.append(v)
        elif isinstance(item, (list, tuple)):
            out.append(("[", len(item), type(item).__name__))
            stack.extend(reversed(item))
        elif isinstance(item, float):
            out.append(("f", repr(item)))
        else:
            out.append((type(item).__name__, repr(item) if not isinstance(item, (str, bytes)) else item))
    return out


def _pairing_problems(transcript: Transcript) -> list[str]:
    problems = check_openai(transcript.to_openai(), allow_pending=True) if transcript.entries else []
    return [p for p in problems if "tool call" in p or "answers call" in p]


def check(reader: str, run: Callable[[], Any], inputs: Any, valid: Callable[[Any], list[str]] | None = None,
          where: re.Pattern[str] = WHERE) -> None:
    """Run one case of ``reader`` and hold it to the property (module doc); count what happened.
    ``where``: what a refusal's message must contain."""
    counts = COUNTS.setdefault(reader, Counter())
    counts["cases"] += 1
    before = fingerprint(inputs)
    start = time.perf_counter()
    try:
        with time_limit(HANG_SECONDS):
            result = run()
    except Hang:
        counts["hangs"] += 1
        raise AssertionError(f"{reader}: hang (more than {HANG_SECONDS}s)") from None
    except SalienceError as exc:
        counts["refused"] += 1
        message = str(exc)
        assert message.strip() and where.search(message), f"{reader}: an error that does not say where: {message!r}"
    except Exception as exc:
        counts["internal"] += 1
        raise AssertionError(f"{reader}: internal error {type(exc).__name__}: {exc}") from exc
    else:
        counts["valid"] += 1
        problems = valid(result) if valid is not None else []
        assert not problems, f"{reader}: accepted a history the provider refuses: {problems[:3]}"
    finally:
        counts["seconds_x1000"] += int(1000 * (time.perf_counter() - start))
    if fingerprint(inputs) != before:
        counts["mutated"] += 1
        raise AssertionError(f"{reader}: the input was modified")


def _transcript_valid(result: Any) -> list[str]:
    return _pairing_problems(result) if isinstance(result, Transcript) else []


# --------------------------------------------------------------------------
# the library: message readers and Compactor.compact
# --------------------------------------------------------------------------


@FUZZ
@given(seed=st.sampled_from(range(len(OPENAI_SEEDS))), ops=mutations())
def test_fuzz_from_openai(seed: int, ops: list[tuple[Any, ...]]) -> None:
    messages = mutate(OPENAI_SEEDS[seed], ops)
    check("from_openai", lambda: Transcript.from_openai(messages, id="fuzz"), messages, _transcript_valid)


@FUZZ
@given(seed=st.sampled_from(range(len(ANTHROPIC_SEEDS))), ops=mutations(), system=st.one_of(st.none(), ODD_VALUES))
def test_fuzz_from_anthropic(seed: int, ops: list[tuple[Any, ...]], system: Any) -> None:
    base, base_system = ANTHROPIC_SEEDS[seed]
    messages = mutate(base, ops)
    given_system = base_system if system is None else system
    check("from_anthropic", lambda: Transcript.from_anthropic(messages, system=given_system, id="fuzz"),
          [messages, given_system], _transcript_valid)


def _langchain_messages(messages: list[Any]) -> list[Any] | None:
    from langchain_core.messages import convert_to_messages

    try:
        return list(convert_to_messages(messages))
    except Exception:  # the fuzzer's input is not a LangChain message list: nothing to read
        return None


@FUZZ
@given(seed=st.sampled_from(range(len(OPENAI_SEEDS))), ops=mutations(), extra=ODD_VALUES)
def test_fuzz_from_langchain(seed: int, ops: list[tuple[Any, ...]], extra: Any) -> None:
    pytest.importorskip("langchain_core")
    from salience.messages.langchain import from_langchain

    clean = [{k: v for k, v in m.items() if k in ("role", "content", "tool_calls", "tool_call_id", "name", "id")}
             for m in OPENAI_SEEDS[seed]]
    messages = _langchain_messages(mutate(clean, [op for op in ops if op[0] in ("drop", "duplicate", "swap",
                                                                                 "truncate", "same-id")]))
    if not messages:
        return
    k = len(messages) // 2
    messages[k] = messages[k].model_copy(update={"additional_kwargs": {"odd": extra}})
    check("from_langchain", lambda: from_langchain(messages, id="fuzz"), messages, _transcript_valid)


def _compact_valid(result: Any) -> list[str]:
    return _pairing_problems(result.source) + _pairing_problems(result.transcript)


def _provider_checked(messages: Any, system: Any = None, *, anthropic: bool = False) -> Callable[[Any], list[str]]:
    """:func:`_compact_valid`, and, when ``messages`` (with ``system``) are a history the provider
    takes (by :mod:`salience.messages.validate`, a pending last call allowed), every problem it
    finds in the result's messages: what went in valid comes out valid."""
    from salience.messages.validate import check_anthropic

    def problems(found: Any, system: Any) -> list[str]:
        try:
            if anthropic:
                return check_anthropic(found, system=system, allow_pending=True, alternation=False)
            return check_openai(found, allow_pending=True)
        except Exception as exc:  # the check cannot read it: not a history the provider takes
            return [f"{type(exc).__name__}: {exc}"]

    valid_in = not problems(messages, system)

    def valid(result: Any) -> list[str]:
        found = _compact_valid(result)
        if valid_in and not found:
            counts = COUNTS[f"Compactor.compact ({'anthropic' if anthropic else 'openai'})"]
            counts["valid in, checked out"] += 1
            found = problems(result.messages, result.system)
        return found

    return valid


@pytest.fixture(scope="module")
def compactor() -> Any:
    from salience.scorer.baselines import RecencyScorer
    from salience.selector.compactor import Compactor

    return Compactor(scorer=RecencyScorer())


@FUZZ
@given(seed=st.sampled_from(range(len(OPENAI_SEEDS))), ops=st.one_of(kept_valid(), mutations()),
       anthropic=st.booleans(), budget=st.integers(min_value=1, max_value=5_000))
def test_fuzz_compact(compactor: Any, seed: int, ops: list[tuple[Any, ...]], anthropic: bool, budget: int) -> None:
    """Half the edits keep the history valid (:func:`kept_valid`; the others, :func:`mutations`, rarely
    do): so that valid input is compacted too, and held to come out valid."""
    if anthropic:
        base, system = ANTHROPIC_SEEDS[seed]
        messages = mutate(base, ops)
        check("Compactor.compact (anthropic)", lambda: compactor.compact(messages, budget=budget, system=system),
              messages, _provider_checked(messages, system, anthropic=True))
    else:
        messages = mutate(OPENAI_SEEDS[seed], ops)
        check("Compactor.compact (openai)", lambda: compactor.compact(messages, budget=budget), messages,
              _provider_checked(messages))


# --------------------------------------------------------------------------
# files: canonical JSONL, every data set loader
# --------------------------------------------------------------------------


def _json_text(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=True)
    except (RecursionError, ValueError, TypeError):
        return "[]"


BYTE_OPS = st.lists(st.tuples(st.sampled_from(["cut", "flip", "comma", "nan", "deep"]), st.floats(0, 1)),
                    max_size=2)


def mutate_bytes(raw: bytes, ops: list[tuple[str, float]]) -> bytes:
    for kind, at in ops:
        if not raw:
            break
        i = _pick(len(raw), at)
        if kind == "cut":
            raw = raw[:i]
        elif kind == "flip":
            raw = raw[:i] + bytes([raw[i] ^ (1 << int(at * 7))]) + raw[i + 1:]
        elif kind == "comma":
            raw = raw[:i] + b"," + raw[i:]
        elif kind == "nan":
            raw = raw[:i] + b"NaN" + raw[i:]
        else:
            raw = raw[:i] + b"[" * 3_000 + raw[i:]
    return raw


def _load_file(path: Path) -> Callable[[], Any]:
    def run() -> Any:
        for t in load_transcripts(path):
            problems = _pairing_problems(t)
            assert not problems, f"{path.name}: accepted a history the provider refuses: {problems[:3]}"
        return None

    return run


@FUZZ
@given(seed=st.sampled_from(range(len(SEEDS))), ops=mutations(), byte_ops=BYTE_OPS)
def test_fuzz_jsonl(tmp_path_factory: pytest.TempPathFactory, seed: int, ops: list[tuple[Any, ...]],
                    byte_ops: list[tuple[str, float]]) -> None:
    from salience.datasets.jsonl import dump_transcript

    obj = dump_transcript(SEEDS[seed])
    obj["messages"] = mutate(obj["messages"], ops)
    raw = mutate_bytes((_json_text(obj) + "\n").encode(), byte_ops)
    path = tmp_path_factory.mktemp("jsonl") / "fuzz.jsonl"
    path.write_bytes(raw)
    check("jsonl", _load_file(path), raw)
    assert path.read_bytes() == raw


def _fixture_doc(path: Path) -> tuple[str, Any]:
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".jsonl":
        return "lines", [json.loads(line) for line in text.splitlines() if line.strip()]
    return "doc", json.loads(text)


@pytest.mark.parametrize("layout_file", LAYOUT_FILES, ids=[p.parent.name + "/" + p.name for p in LAYOUT_FILES])
def test_fuzz_every_data_set_loader(layout_file: Path, tmp_path: Path) -> None:
    kind, doc = _fixture_doc(layout_file)
    name = f"loader {layout_file.relative_to(FIXTURES).parts[0]}"

    @settings(FUZZ, max_examples=max(10, EXAMPLES // 2))
    @given(where=st.floats(0, 1), key=FIELDS, value=ODD_VALUES, structural=st.sampled_from(["set", "drop", "none"]),
           byte_ops=BYTE_OPS)
    def case(where: float, key: str, value: Any, structural: str, byte_ops: list[tuple[str, float]]) -> None:
        mutated = copy.deepcopy(doc)
        if structural == "set":
            _deep_set(mutated, where, key, value)
        elif structural == "drop":
            _deep_set(mutated, where, key, None)
        if kind == "lines":
            text = "".join(_json_text(line) + "\n" for line in mutated)
        else:
            text = _json_text(mutated)
        raw = mutate_bytes(text.encode(), byte_ops)
        out = tmp_path / layout_file.relative_to(FIXTURES)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(raw)
        check(name, _load_file(out), raw)

    case()


# --------------------------------------------------------------------------
# OpenAI Responses API items
# --------------------------------------------------------------------------


def _responses_seed(transcript: Transcript) -> list[Any]:
    """``transcript`` as Responses items, with what real input has beside messages and calls:
    easy-form messages, content parts, reasoning before the calls, parallel calls, a hosted call."""
    from salience.messages.responses import to_responses

    out: list[Any] = []
    for n, item in enumerate(to_responses(transcript)):
        if item.get("type") == "function_call":
            out.append({"type": "reasoning", "id": f"rs_{n}", "summary": [{"type": "summary_text",
                                                                          "text": f"step {n}"}],
                        "encrypted_content": "opaque"})
        elif item.get("type") == "message" and item.get("role") == "user" and n % 2:
            item = {"role": "user", "content": [{"type": "input_text", "text": item["content"]}]}
        out.append(item)
    out.insert(min(2, len(out)), {"type": "web_search_call", "id": "ws_1", "status": "completed",
                                  "action": {"type": "search", "query": "HAT136 delays"}})
    # two calls made together, then both outputs
    out += [{"type": "function_call", "call_id": "par_a", "name": "get", "arguments": '{"k": "A1"}'},
            {"type": "function_call", "call_id": "par_b", "name": "get", "arguments": '{"k": "B2"}'},
            {"type": "function_call_output", "call_id": "par_a", "output": [{"type": "input_text", "text": "A1 ok"}]},
            {"type": "function_call_output", "call_id": "par_b", "output": "B2 ok"},
            {"role": "user", "content": "and now?"}]
    return out


RESPONSES_SEEDS = [_responses_seed(t) for t in SEEDS]
_CALL_PROBLEM = re.compile(r"call_id|answered|no call before")


def _responses_valid(result: Any) -> list[str]:
    """A read transcript: pairs as the providers want, gives its items back exactly, and those items
    pass :func:`check_responses` as far as calls go."""
    from salience.messages.responses import check_responses, to_responses

    items = to_responses(result)
    return _pairing_problems(result) + [p for p in check_responses(items, allow_pending=True)
                                        if _CALL_PROBLEM.search(p)]


@FUZZ
@given(seed=st.sampled_from(range(len(RESPONSES_SEEDS))), ops=mutations(RESPONSES_FIELDS))
def test_fuzz_from_responses(seed: int, ops: list[tuple[Any, ...]]) -> None:
    from salience.messages.responses import from_responses, to_responses

    items = mutate(RESPONSES_SEEDS[seed], ops, call_keys=("call_id", "call_id"))

    def run() -> Any:
        transcript = from_responses(items, id="fuzz")
        assert fingerprint(to_responses(transcript)) == fingerprint(items), "not given back exactly"
        return transcript

    check("from_responses", run, items, _responses_valid)


@FUZZ
@given(seed=st.sampled_from(range(len(RESPONSES_SEEDS))), ops=mutations(RESPONSES_FIELDS),
       budget=st.integers(min_value=1, max_value=5_000))
def test_fuzz_compact_responses(compactor: Any, seed: int, ops: list[tuple[Any, ...]], budget: int) -> None:
    from salience.messages.responses import check_responses

    items = mutate(RESPONSES_SEEDS[seed], ops, call_keys=("call_id", "call_id"))

    def valid(result: Any) -> list[str]:
        return _compact_valid(result) + [p for p in check_responses(result.messages, allow_pending=True)
                                         if _CALL_PROBLEM.search(p)]

    check("Compactor.compact (responses)", lambda: compactor.compact(items, budget=budget, format="responses"),
          items, valid)


# --------------------------------------------------------------------------
# the proxy: request bodies, through the real Starlette app, to a fake upstream
# --------------------------------------------------------------------------

#: The proxy's limits in the fuzz: a 1 MB body, so that huge strings reach the size limit too.
PROXY_LIMIT_BYTES = 1_000_000
#: What a proxy's refusal must contain to say where.
PROXY_WHERE = re.compile(WHERE.pattern + r"|request body|item|byte|budget", re.IGNORECASE)
PROXY_PATHS = {"chat": "/v1/chat/completions", "messages": "/v1/messages", "responses": "/v1/responses"}


class FakeUpstream:
    """The network edge: an ``httpx.MockTransport`` handler that records each request and answers 200;
    given the restore tool, its model calls it once (for ``m1``), so the proxy's answer is fuzzed too."""

    def __init__(self) -> None:
        self.received: list[tuple[str, bytes]] = []

    def __call__(self, request: Any) -> Any:
        import httpx

        self.received.append((request.url.path, request.content))
        if len(self.received) > 100_000:
            raise RuntimeError("the fake upstream got more requests than the fuzz makes")
        body = json.loads(request.content)
        tools = body.get("tools") if isinstance(body.get("tools"), list) else []
        asked = "salience_restore" in json.dumps(tools) and "rs_fuzz" not in request.content.decode()
        path = request.url.path
        if path.endswith("/messages"):
            content: list[Any] = [{"type": "tool_use", "id": "rs_fuzz", "name": "salience_restore",
                                   "input": {"ids": ["m1"]}}] if asked else [{"type": "text", "text": "ok"}]
            return httpx.Response(200, json={"type": "message", "role": "assistant", "content": content})
        if path.endswith("/responses"):
            output = [{"type": "function_call", "call_id": "rs_fuzz", "name": "salience_restore",
                       "arguments": '{"ids": ["m1"]}'}] if asked else []
            return httpx.Response(200, json={"object": "response", "output": output})
        message: dict[str, Any] = {"role": "assistant", "content": "ok"}
        if asked:
            message = {"role": "assistant", "content": None, "tool_calls": [
                {"id": "rs_fuzz", "type": "function", "function": {"name": "salience_restore",
                                                                   "arguments": '{"ids": ["m1"]}'}}]}
        return httpx.Response(200, json={"object": "chat.completion", "choices": [{"index": 0, "message": message}]})


@pytest.fixture(scope="module")
def proxy_client() -> Iterator[tuple[Any, FakeUpstream]]:
    pytest.importorskip("starlette")
    import httpx
    from starlette.testclient import TestClient

    from salience.adapters.proxy import ProxyConfig, build_app
    from salience.limits import Limits
    from salience.scorer.baselines import RecencyScorer
    from salience.selector.compactor import Compactor

    upstream = FakeUpstream()
    config = ProxyConfig(upstream="http://upstream.test", compactor=Compactor(scorer=RecencyScorer()), budget=400,
                         transport=httpx.MockTransport(upstream), limits=Limits(max_bytes=PROXY_LIMIT_BYTES),
                         timeout=30, restore_tool=True)
    with TestClient(build_app(config), raise_server_exceptions=False) as client:
        yield client, upstream


def _strict_json(data: bytes) -> Any:
    def refuse(constant: str) -> Any:
        raise ValueError(f"{constant} forwarded")

    return json.loads(data, parse_constant=refuse)


def _forwarded_problems(endpoint: str, sent: bytes) -> list[str]:
    """What the provider would refuse in a body the proxy forwarded."""
    from salience.messages.responses import check_responses
    from salience.messages.validate import check_anthropic

    body = _strict_json(sent)
    if endpoint == "chat":
        return check_openai(body["messages"])
    if endpoint == "messages":
        return check_anthropic(body["messages"], system=body.get("system"), alternation=False)
    return check_responses(body["input"]) if isinstance(body["input"], list) else []


def _proxy_body(endpoint: str, seed: int, ops: list[tuple[Any, ...]]) -> dict[str, Any]:
    if endpoint == "chat":
        return {"model": "gpt-4o", "messages": mutate(OPENAI_SEEDS[seed], ops)}
    if endpoint == "messages":
        base, system = ANTHROPIC_SEEDS[seed]
        body: dict[str, Any] = {"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": mutate(base, ops)}
        if system is not None:
            body["system"] = system
        return body
    items = mutate(RESPONSES_SEEDS[seed], ops, call_keys=("call_id", "call_id"))
    return {"model": "gpt-4o", "instructions": "You are a booking agent.", "input": items}


BODY_FIELDS = st.sampled_from(["model", "messages", "input", "system", "instructions", "stream", "tools"])


@pytest.mark.parametrize("endpoint", sorted(PROXY_PATHS))
def test_fuzz_proxy(proxy_client: tuple[Any, FakeUpstream], endpoint: str) -> None:
    client, upstream = proxy_client

    @settings(FUZZ, max_examples=max(10, EXAMPLES // 2))
    @given(seed=st.sampled_from(range(len(OPENAI_SEEDS))),
           ops=st.one_of(st.just([]), mutations(RESPONSES_FIELDS if endpoint == "responses" else FIELDS)),
           top=st.one_of(st.none(), st.none(), st.tuples(BODY_FIELDS, ODD_VALUES)),
           byte_ops=st.one_of(st.just([]), BYTE_OPS),
           budget=st.one_of(st.none(), st.sampled_from(["300", "50%", "0", "-1", "lots", "1" * 30])))
    def case(seed: int, ops: list[tuple[Any, ...]], top: tuple[str, Any] | None, byte_ops: list[tuple[str, float]],
             budget: str | None) -> None:
        body = _proxy_body(endpoint, seed, ops)
        if top is not None:
            body[top[0]] = top[1]
        raw = mutate_bytes(_json_text(body).encode(), byte_ops)
        headers = {"content-type": "application/json", "authorization": "Bearer sk-fuzz"}
        if budget is not None:
            headers["x-salience-budget"] = budget

        def run() -> Any:
            before = len(upstream.received)
            response = client.post(PROXY_PATHS[endpoint], content=raw, headers=headers)
            forwarded = upstream.received[before:]
            if response.status_code == 200:  # forwarded once, or twice when the model asked to restore
                assert len(forwarded) in (1, 2), f"{len(forwarded)} requests upstream for one"
                assert all(path == PROXY_PATHS[endpoint] for path, _ in forwarded)
                assert "rs_fuzz" not in response.text, "the client got the restore call"
                COUNTS[f"proxy {PROXY_PATHS[endpoint]}"]["restore_answered"] += len(forwarded) - 1
                return [sent for _, sent in forwarded]
            if response.status_code in (400, 413):
                assert not forwarded, "a refused body was forwarded"
                error = response.json()["error"]
                raise SalienceError(f"{response.status_code}: {error['message']}")
            raise RuntimeError(f"the proxy answered {response.status_code}: {response.text[:300]}")

        check(f"proxy {PROXY_PATHS[endpoint]}", run, raw,
              lambda sent: [p for body in sent for p in _forwarded_problems(endpoint, body)], where=PROXY_WHERE)

    case()


# --------------------------------------------------------------------------
# the command line
# --------------------------------------------------------------------------


@settings(FUZZ, max_examples=max(10, EXAMPLES // 2))
@given(seed=st.sampled_from(range(len(OPENAI_SEEDS))), ops=mutations(), byte_ops=BYTE_OPS,
       anthropic=st.booleans(), command=st.sampled_from(["compact", "inspect"]))
def test_fuzz_cli(tmp_path_factory: pytest.TempPathFactory, seed: int, ops: list[tuple[Any, ...]],
                  byte_ops: list[tuple[str, float]], anthropic: bool, command: str) -> None:
    from salience.cli import main

    if anthropic:
        base, system = ANTHROPIC_SEEDS[seed]
        doc: Any = {"system": system, "messages": mutate(base, ops)}
    else:
        doc = mutate(OPENAI_SEEDS[seed], ops)
    raw = mutate_bytes(_json_text(doc).encode(), byte_ops)
    folder = tmp_path_factory.mktemp("cli")
    path = folder / "in.json"
    path.write_bytes(raw)
    args = [command, str(path), "--budget", "500", "--scorer", "recency"]
    if command == "compact":
        args += ["--out", str(folder / "out.json")]

    def run() -> int:
        # strict UTF-8, as a terminal or a pipe is: a lone surrogate written as it is would fail here
        out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict")
        err_bytes = io.BytesIO()
        err = io.TextIOWrapper(err_bytes, encoding="utf-8", errors="strict", write_through=True)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(args)
        errors = [line for line in err_bytes.getvalue().decode("utf-8").splitlines()
                  if line.startswith("salience: error:")]
        if code not in (0, 2):
            raise RuntimeError(f"salience {command} exited {code}: {errors}")
        if code == 2:
            assert len(errors) == 1, err_bytes.getvalue()
            raise SalienceError(errors[0].removeprefix("salience: error: "))
        if command == "compact":
            json.loads((folder / "out.json").read_text(encoding="utf-8"))  # the output is JSON
        return code

    check(f"cli {command}", run, raw)
    assert path.read_bytes() == raw


# --------------------------------------------------------------------------
# what the fuzzing found, kept as plain tests
# --------------------------------------------------------------------------


@pytest.mark.parametrize("messages", [
    [{"role": [{"type": "text"}], "content": "x"}],
    [{"role": "user", "content": [{"type": ["tool_use"], "text": "x"}]}],
], ids=["role-a-list", "block-type-a-list"])
def test_unhashable_roles_and_block_types_are_refused_not_crashed_on(compactor: Any, messages: list[Any]) -> None:
    for system in (None, "s"):  # a TypeError (unhashable type: 'list') in format detection before
        check("regression", lambda s=system: compactor.compact(messages, budget=100, system=s), messages,
              _compact_valid)


def test_an_apibank_like_line_with_a_list_role_is_no_layout(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text('{"role": ["User"], "text": "hi"}\n{"role": "AI", "text": "yo"}\n', encoding="utf-8")
    with pytest.raises(SalienceError, match=r"x\.jsonl: not in a layout salience knows"):
        load_transcripts(path)
