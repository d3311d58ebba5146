"""The caches that let a call on a grown history do the new entries' work alone (issue #12):
each cached result equals the one computed from nothing, and each cache forgets what it must.

* :func:`salience.selector.options.rows`: a run's per-entry facts, the last transcript's reused;
* :func:`salience.messages.validate.checked_growing`: a transcript validated for its new entries;
* :meth:`salience.messages.dispatch.MessageCache.rendered_copy`: the copies handed out.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import numpy as np
import pytest

from salience.errors import TranscriptError
from salience.messages._common import copy_json
from salience.messages.dispatch import MessageCache, renderer, to_transcript
from salience.messages.validate import checked_growing, checked_transcript
from salience.selector.compactor import Compactor
from salience.selector.masking import PhasePolicy
from salience.selector.options import OptionsCache, Rows, rows, units
from salience.selector.run import Run
from salience.tokens import TokenCounter
from salience.transcript import Entry, ToolCall, Transcript
from test_incremental import history

WORDS = TokenCounter(lambda text: len(text.split()))


def config(**params: Any) -> Any:
    return Compactor(counter=WORDS, max_entry_tokens=60, **params)._config(500)


def facts(r: Rows, cfg: Any) -> dict[str, Any]:
    """Everything a run reads of ``r``, as plain values."""
    renders, costs, available, cover = r.arrays(cfg)
    return {
        "parent": r.parent.tolist(), "parents": list(r.parents), "units": [list(u) for u in r.units],
        "unit_of": r.unit_of.tolist(), "names": list(r.names), "src_cost": list(r.src_cost),
        "full_cost": list(r.full_cost), "full": [e.content for e in r.full], "pretrimmed": sorted(r.pretrimmed),
        "renders": [[None if e is None else (e.content, e.tool_calls) for e in row] for row in renders],
        "costs": costs.tolist(), "available": available.tolist(), "cover": cover.tolist(),
        "system": r.system().tolist(), "code": r.code().tolist(),
        "edits": r.edits(PhasePolicy.coding().tool_types).tolist(),
    }


def cold_facts(messages: list[dict[str, Any]], cfg: Any) -> dict[str, Any]:
    return facts(rows(cfg, None, Transcript.from_openai(copy.deepcopy(messages), id="transcript")), cfg)


def test_rows_of_a_growing_history_equal_rows_from_nothing() -> None:
    messages = history(90, seed=3)
    cfg = config()
    cache = OptionsCache()
    cache.check(cfg)
    reads = MessageCache()
    for k in range(20, 91, 7):
        source, _ = to_transcript(messages[:k], system=None, format=None, cache=reads)
        previous = cache.rows
        r = rows(cfg, cache, source)
        assert cache.rows is r
        if previous is not None:
            assert r.opts[0] is previous.opts[0]  # the shared entries' options were reused
        assert facts(r, cfg) == cold_facts(messages[:k], cfg), k


def test_rows_follow_a_branch_a_shorter_history_and_a_changed_message() -> None:
    messages = history(80, seed=5)
    cfg = config()
    cache = OptionsCache()
    cache.check(cfg)
    reads = MessageCache()
    changed = copy.deepcopy(messages)
    changed[30]["content"] = "a different turn 424242"  # a new object there: the rows after it are new
    for variant in (messages[:70], messages[:40], messages[:75], changed[:60], changed, messages[:80], messages[:20]):
        source, _ = to_transcript(variant, system=None, format=None, cache=reads)
        half = rows(cfg, cache, source)
        half.arrays(cfg)  # the next rows reuse the worked-out arrays of these
        assert facts(rows(cfg, cache, source), cfg) == cold_facts(variant, cfg)


def test_a_tool_result_joins_an_older_unit_without_changing_the_older_rows() -> None:
    call = Entry(id="a", role="assistant", tool_calls=(ToolCall("c1", "read_file", "{}"), ToolCall("c2", "grep", "{}")))
    head = (Entry(id="s", role="system", content="sys"), Entry(id="u", role="user", content="go"), call,
            Entry(id="r1", role="tool", content="one two", tool_call_id="c1"))
    tail = (Entry(id="r2", role="tool", content="three", tool_call_id="c2"),)
    cfg = config()
    cache = OptionsCache()
    cache.check(cfg)
    short = rows(cfg, cache, Transcript(id="t", entries=head))
    before = [list(u) for u in short.units]
    long = rows(cfg, cache, Transcript(id="t", entries=head + tail))
    assert [list(u) for u in short.units] == before == [[0], [1], [2, 3]]
    assert long.units == units(long.parent)[0] == [[0], [1], [2, 3, 4]]
    assert long.names[3:] == ["read_file", "grep"]


def test_rows_arrays_are_read_only() -> None:
    cfg = config()
    r = rows(cfg, None, Transcript.from_openai(history(30, seed=1), id="t"))
    _, costs, available, cover = r.arrays(cfg)
    for a in (costs, available, cover, r.parent, r.unit_of, r.system(), r.code()):
        with pytest.raises(ValueError, match="read-only"):
            a[0] = 0


def test_rows_forget_when_the_parameters_change() -> None:
    messages = history(60, seed=2)
    compactor = Compactor(counter=WORDS, budget=300)
    compactor.compact(messages)
    cache = compactor._caches().options
    assert cache.rows is not None
    for changes in ({"trim_keep": 0.5}, {"stub_values": 2}, {"max_entry_tokens": 30}):
        old = cache.rows
        compactor.set_params(**changes)
        warm = compactor.compact(messages)
        assert cache.rows is not old
        cold = Compactor(counter=WORDS, budget=300, **{k: v for k, v in compactor.get_params().items()
                                                         if k in ("trim_keep", "stub_values", "max_entry_tokens")})
        assert json.dumps(warm.messages) == json.dumps(cold.compact(copy.deepcopy(messages)).messages)
    compactor.clear_cache()
    assert compactor._caches().options.rows is None


def test_edits_follow_the_policy_tool_types() -> None:
    messages = [{"role": "user", "content": "go"},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "frobnicate", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "done"}]
    r = rows(config(), None, Transcript.from_openai(messages, id="t"))
    assert r.edits({}).tolist() == [False, False, False]
    assert r.edits({"frobnicate": "edit"}).tolist() == [False, True, False]
    assert r.edits({}).tolist() == [False, False, False]


def test_a_run_with_the_caches_equals_one_without() -> None:
    messages = history(120, seed=8)
    compactor = Compactor(counter=WORDS, budget=400)
    for k in (60, 61, 62, 90, 120):
        cfg = compactor._config(400)
        caches = compactor._caches()
        source, fmt = to_transcript(messages[:k], system=None, format=None, cache=caches.messages)
        warm = Run(cfg, source, fmt, options=caches.options, messages=caches.messages)
        cold = Run(cfg, Transcript.from_openai(copy.deepcopy(messages[:k]), id="transcript"), fmt)
        for a, b in zip(warm.options()[1:], cold.options()[1:]):
            assert np.array_equal(a, b)
        for name in ("edit_actions", "code_actions", "system_mask"):
            assert np.array_equal(getattr(warm, name)(), getattr(cold, name)())
        assert warm.units == cold.units and warm.names == cold.names and warm.pretrimmed == cold.pretrimmed
        compactor.compact(messages[:k])


# -- validation of a growing transcript --------------------------------------------------------


def entries_of(messages: list[dict[str, Any]]) -> list[Entry]:
    return list(Transcript.from_openai(messages, id="transcript").entries)


def test_checked_growing_equals_the_full_check() -> None:
    entries = entries_of(history(70, seed=4))
    last = None
    for k in (10, 11, 30, 70):
        last = checked_growing(entries[:k], id="transcript", size=0, last=last)
        full = checked_transcript(entries[:k], id="transcript", size=0)
        assert last.transcript == full and last.transcript.parents() == full.parents()
    other = checked_growing(entries[:5], id="transcript", size=0, last=last)  # shorter: checked from nothing
    assert other.transcript == checked_transcript(entries[:5], id="transcript", size=0)


def _raised(fn: Any) -> str:
    with pytest.raises(TranscriptError) as info:
        fn()
    return str(info.value)


@pytest.mark.parametrize("bad", ["duplicate id", "turn before a result", "result of no call"])
def test_checked_growing_raises_what_the_full_check_raises_and_starts_over(bad: str) -> None:
    messages = history(40, seed=2)
    while messages[-1]["role"] == "tool" or messages[-1].get("tool_calls"):
        messages.pop()
    good = entries_of(messages)
    call = Entry(id="late", role="assistant", tool_calls=(ToolCall("zz", "grep", "{}"),))
    extra = {
        "duplicate id": [good[3].replace(content="again")],
        "turn before a result": [call, Entry(id="next", role="user", content="well?")],
        "result of no call": [Entry(id="orphan", role="tool", content="x", tool_call_id="nope")],
    }[bad]
    last = checked_growing(good, id="transcript", size=0)
    grown = good + extra
    assert _raised(lambda: checked_growing(grown, id="transcript", size=0, last=last)) == _raised(
        lambda: checked_transcript(grown, id="transcript", size=0))
    cache = MessageCache()
    cache.checked(good, 0)
    with pytest.raises(TranscriptError):
        cache.checked(grown, 0)
    assert cache.last is None  # the state that failed is gone
    assert cache.checked(good, 0) == checked_transcript(good, id="transcript", size=0)


def test_a_compactor_reads_a_history_that_grows_then_branches() -> None:
    messages = history(60, seed=9)
    compactor = Compactor(counter=WORDS, budget=10**6)
    for variant in (messages[:30], messages[:45], messages[:20], messages[:60]):
        source = compactor.compact(variant).transcript
        assert source == Transcript.from_openai(copy.deepcopy(variant), id="transcript")


# -- the copies handed out ---------------------------------------------------------------------


def test_rendered_copies_equal_copy_json_and_share_nothing_mutable() -> None:
    cache = MessageCache()
    render = renderer("openai")
    for entry in Transcript.from_openai(history(40, seed=7), id="t").entries:
        first = cache.rendered_copy(entry, render)
        assert first == copy_json(cache.rendering(entry, render)) == render(entry)
        first["content"] = "changed by the caller"
        for call in first.get("tool_calls") or ():
            call["function"]["arguments"] = "{}"
        again = cache.rendered_copy(entry, render)
        assert again == render(entry) and again is not first
