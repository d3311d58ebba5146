"""Incremental work: a call after one new message does the per-entry work of that message only.

Spies count the expensive per-entry steps (value extraction, tokenising, embedding,
trim and stub rendering, message conversion); every warm result is compared with a cold
computation by a fresh extractor or compactor, which must give exactly the same.
"""

from __future__ import annotations

import copy
import itertools
import json
import pickle
import random
from collections import Counter
from typing import Any

import numpy as np
import pytest

from salience.errors import TranscriptError
from salience.scorer import features as features_module
from salience.scorer.baselines import RecencyScorer
from salience.scorer.features import FeatureExtractor
from salience.selector import options as options_module
from salience.selector import run as run_module
from salience.selector.compactor import Compaction, Compactor
from salience.tokens import TokenCounter
from salience.transcript import Transcript

WORDS = ["flight", "HAT136", "ZFA04Y", "/src/app.py", "12345", "user", "mia_li_3668", "error", "ok", "Mia Li",
         "refund", "budget", "must", "2024-05-20", "economy", "order #W2378156", "line", "total", "$1,250"]
TOOLS = ["get_reservation_details", "search_direct_flight", "read_file", "run_tests", "grep"]


def history(n: int, seed: int = 0) -> list[dict[str, Any]]:
    """``n`` OpenAI messages of agent work: turns, tool calls and long results, repeated values."""
    rng = random.Random(seed)

    def text(k: int) -> str:
        return " ".join(rng.choice(WORDS) + (str(rng.randint(0, 99)) if rng.random() < 0.3 else "")
                        for _ in range(k))

    out: list[dict[str, Any]] = [{"role": "system", "content": "You are an agent. " + text(20)}]
    c = 0
    while len(out) < n:
        r = rng.random()
        if r < 0.2:
            out.append({"role": "user", "content": text(rng.randint(5, 30)) + "?"})
        elif r < 0.35:
            out.append({"role": "assistant", "content": text(rng.randint(5, 40))})
        else:
            tool = rng.choice(TOOLS)
            c += 1
            out.append({"role": "assistant", "content": None, "tool_calls": [{
                "id": f"call{c}", "type": "function",
                "function": {"name": tool, "arguments": json.dumps({"q": text(3)})}}]})
            if len(out) < n:
                content = "\n".join(text(12) for _ in range(rng.randint(2, 30)))
                out.append({"role": "tool", "tool_call_id": f"call{c}", "name": tool, "content": content})
    return out[:n]


class SpyEmbedder:
    """Deterministic unit vectors from the text's words; counts the texts it embeds."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def encode(self, texts: list[str]) -> np.ndarray:
        self.texts.extend(texts)
        out = np.zeros((len(texts), 16), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in text.split():
                out[i, sum(map(ord, word)) % 16] += 1.0
            norm = np.linalg.norm(out[i])
            if norm:
                out[i] /= norm
        return out


class Counting:
    """A token counter callable that records the texts it counts."""

    def __init__(self) -> None:
        self.seen: Counter[str] = Counter()

    def __call__(self, text: str) -> int:
        self.seen[text] += 1
        return len(text.split())


@pytest.fixture
def spy_reads(monkeypatch: pytest.MonkeyPatch) -> Counter[int]:
    """How often each message index was read from an OpenAI message into an entry."""
    import salience.messages.openai as openai_format

    read = Counter[int]()
    real_entry = openai_format.entry_from_openai

    def counting_entry(message: Any, index: int, **kw: Any) -> Any:
        read[index] += 1
        return real_entry(message, index, **kw)

    # the reader the compactor calls (nothing in salience imports it from the old salience.formats path:
    # tests/test_import_graph.py)
    monkeypatch.setattr(openai_format, "entry_from_openai", counting_entry)
    return read


@pytest.fixture
def spy_values(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Texts passed to extract_values by the feature extractor and the compactor."""
    calls: list[str] = []
    original = features_module.extract_values

    def spy(text: str, *args: Any, **kwargs: Any) -> list[str]:
        calls.append(text)
        return original(text, *args, **kwargs)

    monkeypatch.setattr(features_module, "extract_values", spy)
    monkeypatch.setattr(options_module, "extract_values", spy)
    return calls


def transcript(messages: list[dict[str, Any]]) -> Transcript:
    return Transcript.from_openai(messages, id="t")


# -- features -----------------------------------------------------------------------------


@pytest.mark.parametrize("use_embeddings", [False, True], ids=["no-embeddings", "embeddings"])
def test_one_new_message_costs_one_entry_of_feature_work(use_embeddings: bool, spy_values: list[str]) -> None:
    messages = history(120)
    spy = SpyEmbedder()
    fe = FeatureExtractor(embedder=spy, use_embeddings=use_embeddings).fit()
    fe.transform_one(transcript(messages[:100]))
    assert len(spy_values) >= 100 and len(spy.texts) == (100 if use_embeddings else 0)
    for k in range(101, 121):
        spy_values.clear()
        spy.texts.clear()
        warm = fe.transform_one(transcript(messages[:k]))
        assert spy_values == [messages[k - 1].get("content") or ""], "values extracted again for old entries"
        assert len(spy.texts) == (1 if use_embeddings else 0)
        cold = FeatureExtractor(embedder=SpyEmbedder(), use_embeddings=use_embeddings).fit().transform_one(
            transcript(messages[:k]))
        np.testing.assert_array_equal(warm, cold)


def test_query_features_after_growth_match_a_cold_extractor() -> None:
    messages = history(80, seed=3)
    fe = FeatureExtractor(embedder=SpyEmbedder()).fit()
    for k in (40, 41, 60, 80):
        t = transcript(messages[:k])
        warm = fe.transform_one(t, "refund for ZFA04Y flight HAT136?")
        cold = FeatureExtractor(embedder=SpyEmbedder()).fit().transform_one(t, "refund for ZFA04Y flight HAT136?")
        np.testing.assert_array_equal(warm, cold)


def test_branching_and_shrinking_histories_match_cold(spy_values: list[str]) -> None:
    """A history that is not an extension of the cached one (a branch, an edit, a shorter
    one) is computed afresh; per-entry data of unchanged entries still comes from the cache."""
    base = history(60, seed=5)
    fe = FeatureExtractor(embedder=SpyEmbedder()).fit()
    fe.transform_one(transcript(base))
    edited = copy.deepcopy(base)
    edited[10]["content"] = "an edited turn about order #W9999999"
    variants = [base[:30], edited, base[:45] + [{"role": "user", "content": "a branch ZFA04Y?"}], base]
    for messages in variants:
        spy_values.clear()
        warm = fe.transform_one(transcript(messages))
        assert len(spy_values) <= 1, "entries seen before had their values extracted again"
        cold = FeatureExtractor(embedder=SpyEmbedder()).fit().transform_one(transcript(messages))
        np.testing.assert_array_equal(warm, cold)


def test_same_transcript_object_gives_the_cached_base() -> None:
    t = transcript(history(30))
    fe = FeatureExtractor(use_embeddings=False).fit()
    assert fe.base(t) is fe.base(t)
    assert fe.base(Transcript(id="other", entries=t.entries)) is fe.base(t)


def test_changed_parameters_empty_the_cache() -> None:
    t = transcript(history(40, seed=2))
    fe = FeatureExtractor(use_embeddings=False).fit()
    before = fe.transform_one(t)
    fe.set_params(domain_words=("refund", "flight"))
    after = fe.transform_one(t)
    fresh = FeatureExtractor(use_embeddings=False, domain_words=("refund", "flight")).fit().transform_one(t)
    np.testing.assert_array_equal(after, fresh)
    assert not np.array_equal(before, after)


def test_extractor_pickles_without_its_caches() -> None:
    fe = FeatureExtractor(use_embeddings=False).fit()
    fe.transform_one(transcript(history(20)))
    clone = pickle.loads(pickle.dumps(fe))
    assert not hasattr(clone, "_runtime")
    np.testing.assert_array_equal(clone.transform_one(transcript(history(20))),
                                  fe.transform_one(transcript(history(20))))


def test_reused_call_ids_follow_the_latest_earlier_call() -> None:
    """``superseded`` reads the call each result answers (call ids may be reused once answered)."""
    def call(cid: str, args: str) -> dict[str, Any]:
        return {"role": "assistant", "content": None,
                "tool_calls": [{"id": cid, "type": "function", "function": {"name": "read_file", "arguments": args}}]}

    messages = [
        {"role": "user", "content": "read the files"},
        call("c1", '{"path": "a.py"}'), {"role": "tool", "tool_call_id": "c1", "content": "A"},
        call("c1", '{"path": "b.py"}'), {"role": "tool", "tool_call_id": "c1", "content": "B"},
        call("c1", '{"path": "a.py"}'), {"role": "tool", "tool_call_id": "c1", "content": "A again"},
    ]
    X = FeatureExtractor(use_embeddings=False).fit().transform_one(transcript(messages))
    col = features_module.BASE_FEATURES.index("superseded")
    assert X[:, col].tolist() == [0, 0, 1, 0, 0, 0, 0]  # the first read of a.py, re-read later


# -- the compactor --------------------------------------------------------------------------


class RoleScorer:
    """Scores by role and position; deterministic, cheap."""

    def score(self, t: Transcript, query: str | None = None) -> np.ndarray:
        n = len(t.entries)
        base = np.array([{"system": 0.9, "user": 0.7, "assistant": 0.4, "tool": 0.3}[e.role] for e in t.entries])
        return np.clip(base * (0.5 + 0.5 * (np.arange(n) + 1) / max(n, 1)), 0, 1)


def same(a: Compaction, b: Compaction) -> None:
    assert a.messages == b.messages
    assert (a.kept, a.trimmed, a.stubbed, a.dropped, a.tokens, a.method) == (
        b.kept, b.trimmed, b.stubbed, b.dropped, b.tokens, b.method)
    assert dict(a.archive) == dict(b.archive)


def make(**kwargs: Any) -> Compactor:
    kwargs.setdefault("scorer", RoleScorer())
    kwargs.setdefault("budget", 900)
    kwargs.setdefault("counter", TokenCounter(lambda text: len(text.split())))
    return Compactor(**kwargs)


@pytest.mark.parametrize("with_model", [False, True], ids=["role-scorer", "importance-scorer"])
def test_compactor_does_new_work_for_the_new_message_only(
    with_model: bool, spy_values: list[str], spy_reads: Counter[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    read = spy_reads
    renders = Counter[str]()
    for name in ("trim_text", "stub_text"):
        real = getattr(options_module, name)

        def counted(*args: Any, _real: Any = real, _name: str = name, **kw: Any) -> Any:
            renders[_name] += 1
            return _real(*args, **kw)

        monkeypatch.setattr(options_module, name, counted)
    counting = Counting()
    scorer: Any = RoleScorer()
    if with_model:
        from salience.scorer.model import ImportanceScorer

        scorer = ImportanceScorer(features=FeatureExtractor(use_embeddings=False, counter=counting), cv=2)
        labelled = transcript(history(60, seed=9))
        labelled = labelled.replace(entries=tuple(
            e.replace(label=float(e.role in ("user", "tool") and i % 3 == 0)) for i, e in enumerate(labelled.entries)))
        scorer.fit([labelled])
    messages = history(140, seed=1)
    compactor = make(scorer=scorer, counter=counting)
    compactor.compact(messages[:120])
    for k in range(121, 141):
        read.clear()
        renders.clear()
        spy_values.clear()
        counting.seen.clear()
        warm = compactor.compact(messages[:k])
        assert list(read) == [k - 1], f"messages read again: {sorted(read)}"
        assert sum(renders.values()) <= 2, f"renderings made again: {renders}"
        # the new message's text, and for a tool result the arguments of the call it answers (its
        # stub leaves out what the call shows): nothing of an older message
        new = messages[k - 1]
        calls = [c["function"]["arguments"] for m in messages[: k - 1] for c in m.get("tool_calls") or ()
                 if c["id"] == new.get("tool_call_id")]
        assert len(spy_values) <= 2 + len(calls)
        assert all(v in (new.get("content") or "", *calls) for v in spy_values), spy_values
        old_texts = {m.get("content") for m in messages[: k - 1] if m.get("content")}
        assert not (old_texts - {messages[k - 1].get("content")}) & set(counting.seen), "old texts counted again"
        cold = make(scorer=scorer, counter=TokenCounter(lambda text: len(text.split()))).compact(
            copy.deepcopy(messages[:k]))
        same(warm, cold)
        assert warm.tokens <= 900


def test_session_with_caches_matches_a_session_without() -> None:
    messages = history(160, seed=4)
    warm_session = make().session()
    cold_compactor = make()
    cold_session = cold_compactor.session()
    for k in range(40, 161, 3):
        warm = warm_session.compact(messages[:k])
        cold_compactor.clear_cache()
        cold = cold_session.compact(copy.deepcopy(messages[:k]))
        same(warm, cold)
        assert warm_session.prefix_reuse == cold_session.prefix_reuse
        assert warm_session.triggered == cold_session.triggered
    assert warm_session.compactions >= 2


def test_a_message_changed_in_place_is_read_again() -> None:
    messages = history(50, seed=6)
    compactor = make(budget=10**6)
    compactor.compact(messages)
    messages[7]["content"] = "changed in place: order #W0000001"
    result = compactor.compact(messages)
    assert result.messages[7]["content"] == "changed in place: order #W0000001"
    same(result, make(budget=10**6).compact(copy.deepcopy(messages)))


def test_anthropic_messages_seen_before_are_not_read_again() -> None:
    t = Transcript.from_openai(history(120, seed=9))
    messages, system = t.to_anthropic(), t.anthropic_system()
    compactor = make()
    for k in range(30, len(messages) + 1, 7):
        warm = compactor.compact(messages[:k], system=system, format="anthropic")
        cold = make().compact(copy.deepcopy(messages[:k]), system=system, format="anthropic")
        same(warm, cold)
    # the second read of the same list gives the very entries of the first
    first = compactor.compact(messages, system=system, format="anthropic").source.entries
    again = compactor.compact(messages, system=system, format="anthropic").source.entries
    assert all(a is b for a, b in zip(first[1:], again[1:])) and len(first) == len(again)
    # a message changed in place is read again
    changed = next(i for i, m in enumerate(messages) if any(b.get("type") == "text" for b in m["content"]))
    j = next(k for k, b in enumerate(messages[changed]["content"]) if b.get("type") == "text")
    messages[changed] = copy.deepcopy(messages[changed])  # a new object ...
    messages[changed]["content"][j]["text"] = "changed: order #W0000002"
    assert compactor.compact(messages, system=system, format="anthropic", budget=10**6).messages == messages
    messages[changed]["content"][j]["text"] = "changed in place: order #W0000003"  # ... then the same one, changed
    assert compactor.compact(messages, system=system, format="anthropic", budget=10**6).messages == messages
    # a result read before still has to answer a call before it: without its call, the cold read's error
    results = next(i for i, m in enumerate(messages) if isinstance(m["content"], list)
                   and any(b.get("type") == "tool_result" for b in m["content"]))
    broken = messages[: results - 1] + messages[results:]
    with pytest.raises(TranscriptError, match="tool_use_id") as warm_error:
        compactor.compact(broken, system=system, format="anthropic")
    with pytest.raises(TranscriptError, match="tool_use_id") as cold_error:
        make().compact(copy.deepcopy(broken), system=system, format="anthropic")
    assert str(warm_error.value) == str(cold_error.value)


def test_outputs_share_nothing_with_the_cache() -> None:
    messages = history(30, seed=8)
    compactor = make(budget=10**6)
    first = compactor.compact(messages)
    first.messages[3]["content"] = "scribbled over by the caller"
    first.messages[2].setdefault("tool_calls", []).append({"id": "x"})
    again = compactor.compact(messages)
    assert again.messages == messages
    assert first.restore([]) == messages


def test_changed_parameters_are_honoured() -> None:
    messages = history(80, seed=7)
    compactor = make()
    previous = compactor.compact(messages)
    params: dict[str, Any] = {}
    for changes in ({"trim_keep": 0.5}, {"stub_values": 2}, {"max_entry_tokens": 40},
                    {"counter": TokenCounter(lambda text: len(text))}):
        params.update(changes)
        compactor.set_params(**changes)
        budget = 4000 if "counter" in params else 1000
        result = compactor.compact(messages, budget=budget)
        same(result, make(**params).compact(messages, budget=budget))
        assert result.messages != previous.messages, changes  # each change shows in the output
        previous = result


def test_compactor_pickles_without_its_caches() -> None:
    compactor = Compactor(scorer=RoleScorer(), budget=3000)
    compactor.compact(history(40))
    clone = pickle.loads(pickle.dumps(compactor))
    assert "_cache" not in clone.__dict__
    same(clone.compact(history(40)), compactor.compact(history(40)))


# -- sessions: calls that only append ---------------------------------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from salience.selector.compactor import CompactionSession  # noqa: E402


def without_fast_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(CompactionSession, "_append", lambda self, *args: None)


def same_session_result(a: Compaction, b: Compaction) -> None:
    same(a, b)
    assert dict(a.choices) == dict(b.choices)
    assert a.source.entries == b.source.entries
    assert a.transcript.entries == b.transcript.entries
    assert (a.source_tokens, a.budget, a.format, a.over_budget, a.system) == (
        b.source_tokens, b.budget, b.format, b.over_budget, b.system)


def run_session(
    messages: list[Any], cuts: list[int], budget: int, trigger: float, convert: Any, **kwargs: Any
) -> list[Any]:
    session = make(pin_last=2, on_over_budget="keep_pins").session(budget=budget, trigger=trigger, min_removal=0.2)
    out = []
    for k in cuts:
        result = session.compact(convert(messages[:k]), **kwargs)
        out.append((result, session.triggered, session.recompacted, session.prefix_reuse, session.compactions,
                    session.resets, dict(session._settled)))
    return out


def compare_runs(fast: list[Any], slow: list[Any]) -> None:
    assert len(fast) == len(slow)
    for (a, *rest_a), (b, *rest_b) in zip(fast, slow):
        same_session_result(a, b)
        assert rest_a == rest_b


def as_transcript(messages: list[dict[str, Any]]) -> Transcript:
    return Transcript.from_openai(messages)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), budget=st.integers(300, 3000), trigger=st.sampled_from([0.6, 0.9, 1.0]),
       steps=st.lists(st.integers(0, 4), min_size=5, max_size=40), anthropic=st.booleans())
def test_appending_calls_match_the_full_path(
    seed: int, budget: int, trigger: float, steps: list[int], anthropic: bool
) -> None:
    messages: list[Any] = history(12 + sum(steps), seed=seed)
    kwargs: dict[str, Any] = {}
    if anthropic:
        whole = Transcript.from_openai(messages)
        messages, kwargs["system"] = whole.to_anthropic(), whole.anthropic_system()
    cuts = [min(k, len(messages)) for k in itertools.accumulate(steps, initial=12)]
    fast = run_session(messages, cuts, budget, trigger, list, **kwargs)
    with pytest.MonkeyPatch.context() as mp:
        without_fast_path(mp)
        compare_runs(fast, run_session(messages, cuts, budget, trigger, list, **kwargs))


@pytest.mark.parametrize("kind", ["openai", "tuple", "transcript", "langchain", "anthropic"])
def test_appending_calls_match_the_full_path_in_every_format(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    convert: Any = {"openai": list, "tuple": tuple, "transcript": as_transcript}.get(kind)
    messages: list[Any] = history(150, seed=11)
    kwargs: dict[str, Any] = {}
    if kind == "langchain":
        pytest.importorskip("langchain_core.messages")
        from salience.adapters.langchain import to_langchain

        convert = lambda ms: to_langchain(Transcript.from_openai(ms))  # noqa: E731
    elif kind == "anthropic":  # the whole history in Anthropic's form, cut by its messages
        whole = Transcript.from_openai(messages)
        messages, kwargs["system"] = whole.to_anthropic(), whole.anthropic_system()
        convert = list
    cuts = [20, *range(21, 90), 90, 90, *range(95, len(messages) + 1, 5)]
    hits = []
    real_append = CompactionSession._append

    def counting_append(self: Any, *args: Any) -> Any:
        result = real_append(self, *args)
        hits.append(result is not None)
        return result

    monkeypatch.setattr(CompactionSession, "_append", counting_append)
    fast = run_session(messages, cuts, 1200, 0.9, convert, **kwargs)
    assert sum(hits) > 30
    without_fast_path(monkeypatch)
    compare_runs(fast, run_session(messages, cuts, 1200, 0.9, convert, **kwargs))


def test_a_call_that_only_appends_reads_only_the_new_messages(
    spy_reads: Counter[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    read = spy_reads
    runs = []
    real_run = run_module.Run.__init__

    def counting_run(self: Any, *args: Any, **kw: Any) -> None:
        runs.append(1)
        real_run(self, *args, **kw)

    monkeypatch.setattr(run_module.Run, "__init__", counting_run)
    messages = history(300, seed=2)
    session = make().session(budget=10**6)
    session.compact(messages[:200])
    for k in range(201, 301):
        read.clear()
        runs.clear()
        result = session.compact(messages[:k])
        assert list(read) == [k - 1] and not runs and result.method == "session-noop"
        assert result.messages == messages[:k]


def test_appending_calls_hand_out_copies_the_caller_may_change() -> None:
    messages = history(60, seed=3)
    session = make().session(budget=10**6)
    first = session.compact(messages[:40])
    first.messages[5]["content"] = "scribbled over by the caller"
    first.messages.append({"role": "user", "content": "appended by the caller"})
    second = session.compact(messages[:41])
    assert second.messages == messages[:41]
    assert first.messages[5]["content"] == "scribbled over by the caller"
    second.messages[0]["content"] = "again"
    assert session.compact(messages[:42]).messages == messages[:42]
    assert messages == history(60, seed=3)


def test_a_changed_old_message_starts_the_session_over() -> None:
    messages = history(60, seed=5)
    session = make(budget=10**6).session()
    session.compact(messages[:40])
    changed = copy.deepcopy(messages)
    changed[3]["content"] = "changed"
    result = session.compact(changed[:41])
    assert session.resets == 1 and result.messages == changed[:41]


def test_a_bad_new_message_fails_as_in_the_full_path_and_the_session_goes_on() -> None:
    messages = history(60, seed=5)
    session = make().session(budget=10**6)
    session.compact(messages[:40])
    bad = [*messages[:40], {"role": "tool", "tool_call_id": "nobody-called-this", "content": "x"}]
    with pytest.raises(Exception) as fast_error:
        session.compact(bad)
    with pytest.raises(type(fast_error.value)) as full_error:
        make().compact(bad)
    assert str(fast_error.value) == str(full_error.value)
    assert "entry 40" in str(fast_error.value)
    assert session.compact(messages[:41]).messages == messages[:41]


def test_system_with_a_transcript_is_refused_on_every_call() -> None:
    messages = history(50, seed=5)
    session = make().session(budget=10**6)
    session.compact(as_transcript(messages[:40]))
    with pytest.raises(ValueError, match="system= is only for Anthropic"):
        session.compact(as_transcript(messages[:41]), system="be brief")


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
def test_a_session_refuses_a_turn_after_a_call_still_waiting(fmt: str) -> None:
    """The appending path checks provider validity as the full path does."""
    call = {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": '{"q": "x"}'}}
    waiting = [{"role": "system", "content": "You help."}, {"role": "user", "content": "Look it up."},
               {"role": "assistant", "content": None, "tool_calls": [call]}]
    then = [*waiting, {"role": "user", "content": "Well?"}]
    if fmt == "anthropic":
        t = Transcript.from_openai(waiting)
        system = t.anthropic_system()
        waiting = t.to_anthropic()
        then = [*waiting, {"role": "user", "content": "Well?"}]
        kwargs: dict[str, Any] = {"system": system}
    else:
        kwargs = {}
    session = Compactor(scorer=RecencyScorer()).session(budget=10_000)
    session.compact(waiting, **kwargs)
    with pytest.raises(TranscriptError, match="c1"):
        session.compact(then, **kwargs)
