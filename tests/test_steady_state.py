"""The steady-state call's cached and batched paths (issue #12, tenth session): each gives what
the one-by-one code it replaces gives, and none serves a result that a change of the caller's
messages made stale.

* :func:`salience.messages.dispatch._read_known`: the known start of a list tested at once;
* :meth:`salience.messages.dispatch.MessageCache.rendered_copies`;
* :meth:`salience.selector.options.Rows.passed_by_calls` (:meth:`Run.recurring`'s counts);
* :meth:`salience.selector.result.Ledger.of_outcomes` (:meth:`Run.assemble`'s ledger);
* :func:`salience.selector.lp._entry_hulls_again` (the rows the last call did not have).
"""

from __future__ import annotations

import copy
import random
from collections import Counter
from typing import Any

import numpy as np
import pytest

from salience.errors import FormatError
from salience.messages import dispatch
from salience.messages._common import copy_json
from salience.messages.dispatch import MessageCache, renderer, to_transcript
from salience.selector import lp
from salience.selector.compactor import Compactor
from salience.selector.options import OptionsCache
from salience.selector.result import Ledger
from salience.selector.run import RECURRING_MIN, Run
from salience.tokens import TokenCounter
from salience.transcript import Entry
from test_incremental import history

WORDS = TokenCounter(lambda text: len(text.split()))


def answered(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` without a trailing call (a turn after an unanswered call is refused)."""
    while messages and messages[-1].get("tool_calls"):
        messages = messages[:-1]
    return messages


def read(messages: Any, cache: MessageCache | None) -> Any:
    return to_transcript(messages, system=None, format=None, cache=cache)[0]


def cold(messages: Any) -> Any:
    return read(copy.deepcopy(messages), None)


def test_a_growing_list_reads_its_new_messages_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    messages = history(60, seed=1)
    cache = MessageCache()
    read(messages[:40], cache)
    assert cache.known is not None and len(cache.known[0]) == 40
    looked_up: list[int] = []
    real = dispatch.IdCache.get
    store_get = cache.read._store.get

    class Spy(dict):  # type: ignore[type-arg]
        def get(self, key: Any, default: Any = None) -> Any:
            looked_up.append(key)
            return store_get(key, default)

    monkeypatch.setattr(cache.read, "_store", Spy(cache.read._store))
    monkeypatch.setattr(dispatch.IdCache, "get", real)
    for k in range(41, 61):
        assert read(messages[:k], cache).entries == cold(messages[:k]).entries
    assert len(looked_up) == 20  # one lookup per new message, none for the known start


@pytest.mark.parametrize("where", ["content", "arguments", "key", "replaced", "shorter"])
def test_a_change_to_the_known_start_is_read_again(where: str) -> None:
    messages = answered(history(50, seed=2))
    cache = MessageCache()
    read(messages, cache)
    i = next(j for j in range(10, 50) if messages[j].get("tool_calls"))
    if where == "content":
        messages[5]["content"] = (messages[5]["content"] or "") + " changed 777"
    elif where == "arguments":
        messages[i]["tool_calls"][0]["function"]["arguments"] = '{"q": "changed 888"}'
    elif where == "key":
        messages[7]["name"] = "someone"
    elif where == "replaced":
        messages[5] = dict(messages[5], content="a new object 999")
    else:
        messages = answered(messages[:30])
    messages.append({"role": "user", "content": "and now?"})
    warm = read(messages, cache)
    assert warm.entries == cold(messages).entries
    # and back: the first reading is right again, not the changed one
    if where == "content":
        messages[5]["content"] = messages[5]["content"][: -len(" changed 777")] or None
        assert read(messages, cache).entries == cold(messages).entries


@pytest.mark.parametrize("then_dict", [False, True], ids=["one", "then-a-dict"])
def test_a_langchain_message_after_a_known_start_fails_as_cold(then_dict: bool) -> None:
    lc = pytest.importorskip("langchain_core.messages")
    messages: list[Any] = answered(history(20, seed=3))
    cache = MessageCache()
    read(messages, cache)
    messages.append(lc.HumanMessage(content="hi"))
    if then_dict:  # the error names the list's own indices, not the new messages'
        messages.append({"role": "user", "content": "x"})
    with pytest.raises(FormatError) as warm:
        read(messages, cache)
    with pytest.raises(FormatError) as fresh:
        read(messages, None)
    assert str(warm.value) == str(fresh.value)


def test_a_failed_read_leaves_the_known_list_as_it_was() -> None:
    messages = answered(history(30, seed=4))
    cache = MessageCache()
    read(messages, cache)
    known = cache.known
    bad = messages + [{"role": "tool", "tool_call_id": "nobody", "content": "x"}]
    with pytest.raises(Exception):  # noqa: B017 - whatever a cold read raises
        read(bad, cache)
    assert cache.known is known
    assert read(messages + [{"role": "user", "content": "ok"}], cache).entries == \
        cold(messages + [{"role": "user", "content": "ok"}]).entries


def test_rendered_copies_equal_one_copy_at_a_time() -> None:
    transcript = cold(history(40, seed=5))
    cache = MessageCache()
    render = renderer("openai")
    one = [cache.rendered_copy(e, render) for e in transcript.entries]
    batch = cache.rendered_copies(transcript.entries, render)
    assert batch == one == [copy_json(render(e)) for e in transcript.entries]
    for a, b in zip(batch, one):
        assert a is not b
        for key in a:
            if isinstance(a[key], (dict, list)):
                assert a[key] is not b[key]
    batch[1]["content"] = "mutated"
    assert cache.rendered_copies(transcript.entries, render)[1] == one[1]


def count_from_nothing(run: Run) -> frozenset[str]:
    count: Counter[str] = Counter()
    for j, e in enumerate(run.source.entries):
        if e.tool_calls and e.role != "system":
            count.update(run._passed(j))
    return frozenset(v for v, k in count.items() if k >= RECURRING_MIN)


def test_recurring_values_counted_on_a_growing_history_equal_a_count_from_nothing() -> None:
    messages = history(120, seed=6)
    for m in messages[::7]:  # values that calls pass again
        for call in m.get("tool_calls") or []:
            call["function"]["arguments"] = '{"q": "session-1234 user-42"}'
    compactor = Compactor(counter=WORDS)
    cfg = compactor._config(400)
    options = OptionsCache()
    reads = MessageCache()
    branch = copy.deepcopy(messages[:70])
    for variant in (messages[:50], messages[:51], messages[:90], branch, messages[:120], messages[:40]):
        source, fmt = to_transcript(variant, system=None, format=None, cache=reads)
        run = Run(cfg, source, fmt, options=options, messages=reads)
        assert run.recurring() == count_from_nothing(run)
        assert run.rows.passed_by_calls(run._passed, 1) == frozenset(
            v for j, e in enumerate(source.entries) if e.tool_calls and e.role != "system" for v in run._passed(j))


def test_ledger_of_outcomes_equals_record_entry_by_entry() -> None:
    rng = random.Random(7)
    entries = [Entry(id=f"e{i}", role="user", content=f"text {i}") for i in range(200)]
    for _ in range(20):
        outcome = np.array([rng.randrange(4) for _ in entries])
        expected = Ledger()
        for e, o in zip(entries, outcome.tolist()):
            # record's outcome: FULL for an entry kept as it came; a changed one by its option
            expected.record(e, o, None if o == 3 else (e if o == 0 else e.replace(content="other")))
        got = Ledger.of_outcomes([e.id for e in entries], entries, outcome)
        for name in ("kept", "trimmed", "stubbed", "dropped", "archive", "choices"):
            assert getattr(got, name) == getattr(expected, name), name
        assert list(got.archive) == list(expected.archive) and list(got.choices) == list(expected.choices)


def test_entry_hulls_again_equal_the_hulls_from_nothing() -> None:
    rng = np.random.default_rng(9)
    lp._LAST_HULLS[0] = None
    n = 400
    costs = np.sort(rng.integers(1, 300, (n, 4)), axis=1)[:, ::-1].copy()
    costs[:, 3] = 0
    values = rng.random((n, 4))
    values[:, 3] = 0.0
    mask = rng.random((n, 4)) < 0.8
    mask[:, 3] = True
    for step in range(12):
        got = lp._entry_hulls_again(costs, values, mask)
        want = lp._entry_hulls(costs, values, mask)
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
        got[0][:] = 0  # the caller's arrays are its own
        rows_ = rng.choice(n, size=int(rng.integers(0, 30)), replace=False)
        if step % 3 == 0:
            values = values * 0.999  # every row
        elif step % 3 == 1:
            mask = mask.copy()
            mask[rows_, 0] = ~mask[rows_, 0]
        else:
            costs = costs.copy()
            costs[rows_, 1] += 1
    assert np.array_equal(lp._entry_hulls_again(costs[:50], values[:50], mask[:50])[0],
                          lp._entry_hulls(costs[:50], values[:50], mask[:50])[0])


def test_a_growing_history_compacts_as_a_fresh_compactor_does() -> None:
    messages = history(160, seed=10)
    warm = Compactor(counter=WORDS, budget=900)
    for k in range(120, 161, 4):
        got = warm.compact(messages[:k])
        want = Compactor(counter=WORDS, budget=900).compact(copy.deepcopy(messages[:k]))
        assert (got.kept, got.trimmed, got.stubbed, got.dropped, got.tokens) == \
            (want.kept, want.trimmed, want.stubbed, want.dropped, want.tokens)
        assert got.messages == want.messages and list(got.choices.items()) == list(want.choices.items())
        assert got.method != "fits" and got.dropped
        for m in got.messages:  # the caller's to change: the next call must not see it
            m["content"] = "changed by the caller"
        messages[k // 2]["content"] = f"changed in place {k}"  # an old message, in place
