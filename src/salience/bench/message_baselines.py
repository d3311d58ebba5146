"""The real baselines of the independent benchmark (issue #14), each running as itself
on an OpenAI message list and within budget by the same count
(:func:`~salience.bench.references.messages_tokens`), or counted as over.

The four: :func:`sliding_window` (also charged as billed, ``billed=True``: the counter's
overhead per message and call, as the compactor counts), :func:`observation_masking` (keep
the last 10 tool results), :func:`keep_last_tool_results` (the last 3) and
:func:`value_stub_masking`. :func:`baseline_selectors` gives them by name; :func:`compactor_selector` wraps a
:class:`~salience.Compactor`, and :func:`anthropic_compactor_selector` wraps one that is handed the same history as
Anthropic messages, as a Claude agent holds it.

:mod:`salience.bench.independent` re-exports every public name here.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from salience.bench.references import (
    Message,
    call_parents,
    content_text,
    message_cost,
    message_text,
    messages_tokens,
)
from salience.errors import ParameterError
from salience.tokens import CounterLike, as_counter
from salience.values import extract_values

__all__ = [
    "CLEARED",
    "OMITTED",
    "Selector",
    "anthropic_as_openai",
    "anthropic_compactor_selector",
    "baseline_selectors",
    "compactor_selector",
    "keep_last_tool_results",
    "observation_masking",
    "sliding_window",
    "value_stub_masking",
]

#: Placeholders the masking baselines put in place of a tool result's content.
OMITTED = "[observation omitted]"
CLEARED = "[tool result cleared]"

#: A selector: ``selector(messages, budget) -> messages`` (OpenAI chat messages).
Selector = Callable[[Sequence[Message], int], Sequence[Message]]


# --------------------------------------------------------------------------
# baselines
# --------------------------------------------------------------------------


def _check_budget(name: str, budget: Any) -> int:
    if isinstance(budget, bool) or not isinstance(budget, (int, np.integer)):
        raise ParameterError(f"{name}: budget must be an int number of tokens (got {budget!r:.40} that is a "
                             f"{type(budget).__name__})")
    return int(budget)


def _window_keep(messages: Sequence[Message], budget: int, costs: Sequence[int]) -> list[int]:
    """Indices the sliding window keeps (see :func:`sliding_window`)."""
    n = len(messages)
    parents = call_parents(messages)
    children: dict[int, list[int]] = {}
    for i, p in enumerate(parents):
        if p >= 0:
            children.setdefault(p, []).append(i)
    system = [i for i, m in enumerate(messages) if m.get("role") == "system"]
    left = budget - sum(costs[i] for i in system)
    start = n  # the kept suffix is messages[start:] (system messages aside)
    while start > 0:
        lo = start - 1
        # extend the block back until every tool result in it has its call in it, and
        # every call in it has all its results inside the block or the kept suffix
        changed = True
        while changed:
            changed = False
            for i in range(lo, start):
                p = parents[i]
                if 0 <= p < lo:
                    lo, changed = p, True
                    break
        cost = sum(costs[i] for i in range(lo, start) if messages[i].get("role") != "system")
        if cost > left:
            break
        left -= cost
        start = lo
    keep = set(system) | {i for i in range(start, n) if messages[i].get("role") != "system"}
    # a call whose results are not all kept goes too (results before their call, malformed input)
    for p, kids in children.items():
        if p in keep and not all(k in keep for k in kids):
            keep.discard(p)
            keep.difference_update(kids)
    return sorted(keep)


def sliding_window(messages: Sequence[Message], budget: int, *, counter: CounterLike = None,
                   billed: bool = False) -> list[Message]:
    """The plain sliding window: every system message, then whole messages contiguous
    from the end, as many as fit ``budget`` (by :func:`messages_tokens`; with ``billed``,
    each message also charged the counter's overhead per message and per call, as the
    compactor counts it: :func:`~salience.bench.references.message_cost`).

    Walking back, a tool result brings its call and everything between them, as one
    block; the walk stops at the first block that does not fit. So a result whose
    call fell out goes too, a call is kept only with all its results, and the output
    is valid for the OpenAI API whenever the input was. Returns the same message
    objects (never copies, never mutates). When the system messages alone exceed the
    budget, they are returned alone (over budget: callers count that).

    >>> words = lambda text: len(text.split())
    >>> msgs = [{"role": "system", "content": "be brief"}] + [{"role": "user", "content": f"turn {i}"}
    ...                                                         for i in range(4)]
    >>> [m["content"] for m in sliding_window(msgs, 6, counter=words)]
    ['be brief', 'turn 2', 'turn 3']
    >>> [m["content"] for m in sliding_window(msgs, 11, counter=words, billed=True)]  # 3 more a message
    ['be brief', 'turn 3']
    """
    budget = _check_budget("sliding_window", budget)
    tc = as_counter(counter)
    costs = [message_cost(m, tc, billed) for m in messages]
    return [messages[i] for i in _window_keep(messages, budget, costs)]


def _tool_indices(messages: Sequence[Message]) -> list[int]:
    return [i for i, m in enumerate(messages) if m.get("role") == "tool"]


def _masked(messages: Sequence[Message], keep: int, placeholder: str) -> list[Message]:
    tools = _tool_indices(messages)
    old = set(tools[: max(0, len(tools) - keep)])
    return [{**m, "content": placeholder} if i in old else m for i, m in enumerate(messages)]


def _mask_then_window(name: str, messages: Sequence[Message], budget: int, keep: int, placeholder: str,
                      counter: CounterLike) -> list[Message]:
    budget = _check_budget(name, budget)
    if isinstance(keep, bool) or not isinstance(keep, int) or keep < 0:
        raise ParameterError(f"{name}: keep must be an int >= 0 (got {keep!r})")
    tc = as_counter(counter)
    if messages_tokens(messages, tc) <= budget:
        return list(messages)
    masked = _masked(messages, keep, placeholder)
    if messages_tokens(masked, tc) <= budget:
        return masked
    return sliding_window(masked, budget, counter=tc)


def observation_masking(messages: Sequence[Message], budget: int, *, keep: int = 10,
                        counter: CounterLike = None) -> list[Message]:
    """Keep-last-M observation masking (M = ``keep``, 10): when ``messages`` do not fit,
    the content of every tool result but the last ``keep`` becomes ``[observation omitted]``
    (calls, user and assistant messages untouched); if that still does not fit,
    the sliding window over the masked messages."""
    return _mask_then_window("observation_masking", messages, budget, keep, OMITTED, counter)


def keep_last_tool_results(messages: Sequence[Message], budget: int, *, keep: int = 3,
                           counter: CounterLike = None) -> list[Message]:
    """Keep the last ``keep`` (3) tool results and clear the rest (``[tool result cleared]``)
    when ``messages`` do not fit; then, if still over, the sliding window."""
    return _mask_then_window("keep_last_tool_results", messages, budget, keep, CLEARED, counter)


def _stub(message: Message, max_values: int | None) -> str:
    values = extract_values(content_text(message.get("content")))
    if max_values is not None:
        values = values[:max_values]
    return "[tool result stubbed; values: " + ", ".join(v.replace("\n", " ") for v in values) + "]"


def value_stub_masking(messages: Sequence[Message], budget: int, *, max_values: int | None = None,
                       counter: CounterLike = None) -> list[Message]:
    """Value-stub masking: keep every user and assistant message; turn the oldest tool
    results, one at a time, into one-line stubs listing their values
    (:func:`salience.values.extract_values`: ids, numbers, names, paths; the first
    ``max_values``, or all) until the messages fit ``budget``; if they still do not
    when every tool result is a stub, the sliding window over the stubbed messages.

    A stub that would cost more than its result leaves the result as it was.
    """
    budget = _check_budget("value_stub_masking", budget)
    if max_values is not None and (isinstance(max_values, bool) or not isinstance(max_values, int)
                                   or max_values < 0):
        raise ParameterError(f"value_stub_masking: max_values must be None or an int >= 0 (got {max_values!r})")
    tc = as_counter(counter)
    out = list(messages)
    costs = [tc.count(message_text(m)) for m in out]
    total = sum(costs)
    for i in _tool_indices(out):
        if total <= budget:
            return out
        stubbed = {**out[i], "content": _stub(out[i], max_values)}
        cost = tc.count(message_text(stubbed))
        if cost < costs[i]:
            out[i] = stubbed
            total += cost - costs[i]
            costs[i] = cost
    if total <= budget:
        return out
    return [out[i] for i in _window_keep(out, budget, costs)]


def baseline_selectors(counter: CounterLike = None) -> dict[str, Selector]:
    """The baselines as selectors, by the names the benchmarks print: ``window``,
    ``window_billed`` (the same charged as billed: ``sliding_window(..., billed=True)``, so that
    a compactor counting a provider's overheads can be compared in its own unit),
    ``observation_masking`` (M = 10), ``last3_tool_results`` and ``value_stubs``."""
    tc = as_counter(counter)

    def window(messages: Sequence[Message], budget: int) -> list[Message]:
        return sliding_window(messages, budget, counter=tc)

    def window_billed(messages: Sequence[Message], budget: int) -> list[Message]:
        return sliding_window(messages, budget, counter=tc, billed=True)

    def masking(messages: Sequence[Message], budget: int) -> list[Message]:
        return observation_masking(messages, budget, counter=tc)

    def last3(messages: Sequence[Message], budget: int) -> list[Message]:
        return keep_last_tool_results(messages, budget, counter=tc)

    def stubs(messages: Sequence[Message], budget: int) -> list[Message]:
        return value_stub_masking(messages, budget, counter=tc)

    return {"window": window, "window_billed": window_billed, "observation_masking": masking,
            "last3_tool_results": last3, "value_stubs": stubs}


def compactor_selector(compactor: Any) -> Selector:
    """``compactor`` (a :class:`salience.Compactor`) as a selector:
    ``compactor.compact(messages, budget=budget).messages``. A :class:`~salience.BudgetError`
    propagates: :func:`evaluate` counts it and scores the step as nothing visible."""

    def select(messages: Sequence[Message], budget: int) -> Sequence[Message]:
        return compactor.compact(list(messages), budget=budget).messages  # type: ignore[no-any-return]

    select.__name__ = f"compactor_selector({type(compactor).__name__})"
    return select


def anthropic_compactor_selector(compactor: Any) -> Selector:
    """``compactor`` handed each history as Anthropic messages, as a Claude agent holds it: the
    OpenAI messages as a :class:`~salience.Transcript` (``Transcript.from_openai``), then
    ``compactor.compact(t.to_anthropic(), system=t.anthropic_system(), budget=budget)``; the
    compacted transcript comes back as OpenAI messages, so the benchmark measures it as it
    measures every other selector (its text, its tokens, its tool pairs); an entry kept whole
    comes back as the very message it was (the round trip writes a call's arguments anew,
    ``{"a":1}`` as ``{"a": 1}``, which would count a whole action as lost). The message
    structure differs (tool results ride in user messages, the first message must be the
    user's); the words are the same. A :class:`~salience.BudgetError` propagates."""
    from salience.transcript import Transcript

    def select(messages: Sequence[Message], budget: int) -> Sequence[Message]:
        t = Transcript.from_openai(list(messages))
        out = compactor.compact(t.to_anthropic(), system=t.anthropic_system(), budget=budget, format="anthropic")
        return anthropic_as_openai(messages, out)

    select.__name__ = f"anthropic_compactor_selector({type(compactor).__name__})"
    return select


def anthropic_as_openai(messages: Sequence[Message], out: Any) -> list[Message]:
    """The compaction ``out`` of ``messages`` handed over as Anthropic messages
    (:func:`anthropic_compactor_selector`; a session's too), as OpenAI messages: an entry
    kept whole is the message it was, the others as rendered, with each call's id and
    arguments as the caller wrote them."""
    source = out.source.entries
    # each call as the caller wrote it, by its place among all calls (Anthropic renames ids it refuses)
    written = [c for m in messages for c in (m.get("tool_calls") or ())]
    ids = [c.id for e in source for c in e.tool_calls]
    calls = dict(zip(ids, written)) if len(ids) == len(written) else {}
    rendered: list[Message] = [_as_written(m, calls) for m in out.transcript.to_openai()]
    # a tool message that answers no call (MINT's observations) rides in a user message
    roles = ["user" if m.get("role") == "tool" and not m.get("tool_call_id") else m.get("role") for m in messages]
    if len(source) != len(messages) or any(e.role != r for e, r in zip(source, roles)):
        return rendered  # the round trip did not keep one entry per message (it merges two in a row): as rendered
    at = {e.id: i for i, e in enumerate(source)}
    kept = set(out.kept)
    return [messages[at[e.id]] if e.id in kept else m for e, m in zip(out.transcript.entries, rendered)]


def _as_written(message: Message, calls: dict[str, Any]) -> Message:
    """``message`` with each call's id and arguments as the caller wrote them (``calls``: the
    caller's call by the id the round trip gave it), where the arguments hold the same JSON,
    and a tool result's ``tool_call_id`` the caller's: the Anthropic round trip renames ids
    Anthropic refuses (``call.2`` as ``call_2``) and writes arguments anew."""
    if message.get("role") == "tool":
        call = calls.get(message.get("tool_call_id"))  # type: ignore[arg-type]
        return {**message, "tool_call_id": call["id"]} if isinstance(call, dict) and "id" in call else message
    if not message.get("tool_calls"):
        return message
    fixed = []
    for call in message["tool_calls"]:
        old = calls.get(call.get("id"))
        if isinstance(old, dict):
            args = call.get("function", {}).get("arguments")
            was = old.get("function", {}).get("arguments")
            if isinstance(args, str) and isinstance(was, str) and _same_json(args, was):
                args = was
            call = {**call, "id": old.get("id", call.get("id")), "function": {**call["function"], "arguments": args}}
        fixed.append(call)
    return {**message, "tool_calls": fixed}


def _same_json(a: str, b: str) -> bool:
    try:
        return bool(json.loads(a) == json.loads(b))
    except ValueError:
        return False
