"""Benchmarks that cannot flatter us (issue #14): an independent reference definition,
code support for coding agents, real baselines over OpenAI message lists, and a runner.

Everything here works on OpenAI chat messages (``transcript.to_openai()``), the
format a user hands to :class:`salience.Compactor`, and shares no code with the
scorer's training labels or with ``salience bench``'s value extractor: the point is
a second, equally reasonable measure, so that a figure does not hold only because
the benchmark and the labels agree with each other.

**Text and tokens.** A message's *text* (:func:`message_text`) is its content (a
string, or the ``text`` of its text parts) plus each tool call's name and
arguments, joined by newlines. Its tokens (:func:`message_tokens`) are cl100k
tokens of that text (:mod:`salience.tokens`, offline), with no per-message
overhead. The budget of a step at fraction ``f`` (:func:`history_budget`) is the
history's system tokens plus ``f`` times its other tokens (at least 1).

**The independent references** (:func:`independent_references`). A step is an
assistant message that carries tool calls; its history is the messages before it.
Its references are every string (3+ characters once stripped) found at any depth
among the values of its calls' JSON arguments (object keys are not values), and
every JSON number whose literal has 3+ digits, each counted once, if it occurs as a
substring of the text of an earlier non-system message and not in the text of any
system message of the history. A reference's *source* is the earliest such
message; the references whose source is a ``user`` message are *user-given*. A
reference is *visible* when it is a substring of the compacted messages' text.

**Code support** (:func:`code_references`). A step *acts* when it is an assistant
message with tool calls, or whose content holds an action block (a fenced code
block, ``<execute>`` or ``<solution>``: SWE-agent's text actions, MINT's code).
Its supported references are the code lines of the action (stripped, at least
:data:`MIN_CODE_CHARS` non-space characters, not only punctuation) and the file
paths in it that occur in an earlier observation (a ``tool`` message, or a
``user`` message that starts with ``Observation``) and not in the system text.
*Actions kept* (:func:`actions_kept`) counts the history's acting messages whose
whole text is still a substring of the compacted text.

**Baselines**, each running as itself on the message list, and each within budget
by the same count or counted as over: :func:`sliding_window`,
:func:`observation_masking` (keep the last 10 tool results),
:func:`keep_last_tool_results` (the last 3) and :func:`value_stub_masking`.
:func:`baseline_selectors` gives them by name; :func:`compactor_selector` wraps a
:class:`~salience.Compactor`.

**The runner** (:func:`evaluate`) replays transcripts, calls every selector at every
measured step and fraction, and returns an :class:`IndependentReport`: per method
and fraction, recall by both definitions (ours: :func:`salience.scorer.labels.step_references`,
as ``salience bench`` counts it), user-given recall, code support, actions kept
(against the window), ``BudgetError`` and over-budget counts.

>>> history = [
...     {"role": "system", "content": "You are an airline agent."},
...     {"role": "user", "content": "Cancel reservation ZFA04Y for Mia Li."},
...     {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function",
...         "function": {"name": "get_reservation", "arguments": '{"id": "ZFA04Y"}'}}]},
...     {"role": "tool", "tool_call_id": "c1", "content": '{"id": "ZFA04Y", "total": 1250}'},
...     {"role": "assistant", "content": "", "tool_calls": [{"id": "c2", "type": "function",
...         "function": {"name": "cancel", "arguments": '{"id": "ZFA04Y", "user": "Mia Li", "amount": 1250}'}}]},
... ]
>>> refs = independent_references(history, 4)
>>> refs.refs, refs.user_given
(('ZFA04Y', 'Mia Li', '1250'), ('ZFA04Y', 'Mia Li'))
>>> window = sliding_window(history[:4], history_budget(history[:4], 0.9))
>>> [m["role"] for m in window], visible(refs.refs, window)  # the user's turn, and "Mia Li", fell out
(['system', 'assistant', 'tool'], 2)
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from salience.errors import BudgetError, ParameterError, ParameterKeyError, SalienceError
from salience.tokens import CounterLike, TokenCounter, as_counter
from salience.values import extract_values

if TYPE_CHECKING:
    from salience.transcript import Transcript

__all__ = [
    "DEFAULT_FRACTIONS",
    "MIN_CODE_CHARS",
    "OMITTED",
    "CLEARED",
    "CodeStep",
    "IndependentReport",
    "IndependentStep",
    "MethodResult",
    "Recall",
    "Selector",
    "actions",
    "actions_kept",
    "baseline_selectors",
    "code_references",
    "compactor_selector",
    "evaluate",
    "history_budget",
    "independent_references",
    "is_action",
    "is_observation",
    "is_step",
    "keep_last_tool_results",
    "message_text",
    "message_tokens",
    "messages_tokens",
    "observation_masking",
    "reference_strings",
    "sliding_window",
    "tool_pairing_errors",
    "value_stub_masking",
    "visible",
]

#: Budget fractions (shares of the non-system tokens, over the system prompt).
DEFAULT_FRACTIONS: tuple[float, ...] = (0.10, 0.25)
#: Non-space characters a code line needs to count as a copied line.
MIN_CODE_CHARS = 10
#: Placeholders the masking baselines put in place of a tool result's content.
OMITTED = "[observation omitted]"
CLEARED = "[tool result cleared]"

Message = Mapping[str, Any]
#: A selector: ``selector(messages, budget) -> messages`` (OpenAI chat messages).
Selector = Callable[[Sequence[Message], int], Sequence[Message]]


# --------------------------------------------------------------------------
# text and tokens
# --------------------------------------------------------------------------


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        parts = []
        for part in content:
            if isinstance(part, Mapping) and isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif isinstance(part, str):
                parts.append(part)
        return "\n".join(parts)
    return ""


def _calls(message: Message) -> list[tuple[str, str, str]]:
    """``(id, name, arguments)`` of each tool call of ``message``."""
    out = []
    for call in message.get("tool_calls") or ():
        if not isinstance(call, Mapping):
            continue
        fn = call.get("function")
        fn = fn if isinstance(fn, Mapping) else {}
        name = fn.get("name")
        args = fn.get("arguments")
        out.append((str(call.get("id") or ""), name if isinstance(name, str) else "",
                    args if isinstance(args, str) else "" if args is None else json.dumps(args)))
    return out


def message_text(message: Message) -> str:
    """The text of one OpenAI message: its content (a string, or the ``text`` of its
    parts) and each tool call's name and arguments, joined by newlines (empty parts
    left out). A tool message's ``name`` is not part of it.

    >>> message_text({"role": "assistant", "content": "let me look",
    ...               "tool_calls": [{"id": "c", "function": {"name": "find", "arguments": '{"q": 1}'}}]})
    'let me look\\nfind\\n{"q": 1}'
    >>> message_text({"role": "user", "content": [{"type": "text", "text": "hi"}, {"type": "image_url"}]})
    'hi'
    """
    parts = [_content_text(message.get("content"))]
    for _, name, args in _calls(message):
        parts.extend((name, args))
    return "\n".join(p for p in parts if p)


def message_tokens(message: Message, counter: CounterLike = None) -> int:
    """cl100k tokens (or ``counter``'s) of :func:`message_text`, no overhead added."""
    return as_counter(counter).count(message_text(message))


def messages_tokens(messages: Iterable[Message], counter: CounterLike = None) -> int:
    """The sum of :func:`message_tokens` over ``messages``: the count every budget is checked by."""
    tc = as_counter(counter)
    return sum(tc.count(message_text(m)) for m in messages)


def history_budget(history: Sequence[Message], fraction: float, counter: CounterLike = None) -> int:
    """The system tokens of ``history`` plus ``fraction`` times its other tokens
    (rounded down), and at least 1.

    >>> words = lambda text: len(text.split())
    >>> history_budget([{"role": "system", "content": "a b"}, {"role": "user", "content": "c d e f"}], 0.5, words)
    4
    """
    tc = as_counter(counter)
    system = other = 0
    for m in history:
        n = tc.count(message_text(m))
        if m.get("role") == "system":
            system += n
        else:
            other += n
    return max(1, system + int(fraction * other))


def visible(refs: Iterable[str], messages: Sequence[Message]) -> int:
    """How many of ``refs`` are substrings of the text of ``messages`` (case-sensitive)."""
    text = "\n".join(message_text(m) for m in messages)
    return sum(r in text for r in refs)


# --------------------------------------------------------------------------
# the independent reference definition
# --------------------------------------------------------------------------


class _Number(str):
    """A JSON number's literal text (what the arguments actually wrote)."""

    __slots__ = ()


def _leaf_values(obj: Any, out: dict[str, None]) -> None:
    if isinstance(obj, dict):
        for value in obj.values():
            _leaf_values(value, out)
    elif isinstance(obj, list):
        for value in obj:
            _leaf_values(value, out)
    elif isinstance(obj, _Number):
        if sum(ch.isdigit() for ch in obj) >= 3:
            out.setdefault(str(obj), None)
    elif isinstance(obj, str):
        s = obj.strip()
        if len(s) >= 3:
            out.setdefault(s, None)


def reference_strings(arguments: str) -> list[str]:
    """The candidate references of one call's JSON ``arguments``, in order, each once:
    every string value at any depth with 3+ characters (stripped) and every number
    whose literal has 3+ digits (as written: ``1250.0`` stays ``1250.0``). Object keys,
    booleans and ``null`` are not values; arguments that are not JSON give none.

    >>> reference_strings('{"a": {"b": ["xyz", " ab ", 12, 345, 1.25]}, "long_key": "ok", "c": "HAT136"}')
    ['xyz', '345', '1.25', 'HAT136']
    >>> reference_strings('not json')
    []
    """
    try:
        obj = json.loads(arguments, parse_int=_Number, parse_float=_Number)
    except (json.JSONDecodeError, TypeError, ValueError):
        return []
    out: dict[str, None] = {}
    _leaf_values(obj, out)
    return list(out)


def is_step(message: Message) -> bool:
    """An independent-reference step: an assistant message that carries tool calls."""
    return message.get("role") == "assistant" and bool(message.get("tool_calls"))


@dataclass(frozen=True, slots=True)
class IndependentStep:
    """The independent references of the step at ``index``: ``refs`` in order of
    appearance in the calls, ``sources`` the index of each one's earliest non-system
    message, ``user_given`` those whose source is a user message."""

    index: int
    refs: tuple[str, ...]
    sources: tuple[int, ...]
    user_given: tuple[str, ...]


def _system_text(history: Sequence[Message]) -> str:
    return "\n".join(message_text(m) for m in history if m.get("role") == "system")


def independent_references(messages: Sequence[Message], index: int,
                           _texts: Sequence[str] | None = None) -> IndependentStep:
    """The independent references of ``messages[index]`` against ``messages[:index]``
    (empty when the message is not a step; see the module docstring for the rules).
    """
    if not 0 <= index < len(messages):
        raise ParameterError(f"independent_references: index must be in [0, {len(messages)}) (got {index!r})")
    step = messages[index]
    if not is_step(step):
        return IndependentStep(index=index, refs=(), sources=(), user_given=())
    texts = _texts if _texts is not None else [message_text(m) for m in messages[:index]]
    history = messages[:index]
    system = "\n".join(t for m, t in zip(history, texts) if m.get("role") == "system")
    candidates: dict[str, None] = {}
    for _, _, args in _calls(step):
        candidates.update(dict.fromkeys(reference_strings(args)))
    refs: list[str] = []
    sources: list[int] = []
    user: list[str] = []
    for ref in candidates:
        if ref in system:
            continue
        source = next((j for j, (m, t) in enumerate(zip(history, texts))
                       if m.get("role") != "system" and ref in t), None)
        if source is None:
            continue
        refs.append(ref)
        sources.append(source)
        if history[source].get("role") == "user":
            user.append(ref)
    return IndependentStep(index=index, refs=tuple(refs), sources=tuple(sources), user_given=tuple(user))


# --------------------------------------------------------------------------
# code support
# --------------------------------------------------------------------------

_BLOCK = re.compile(
    r"```[^\n`]*\n?(.*?)```|<execute>(.*?)</execute>|<solution>(.*?)</solution>",
    re.DOTALL,
)
_PATH = re.compile(
    r"(?<![\w./-])(?:~|\.{1,2})?/?(?:[\w.\-]+/)+[\w.\-]+"  # a/b, /a/b.c, ./x/y
    r"|(?<![\w./-])[\w\-]+\.(?:py|pyi|js|ts|tsx|jsx|rs|go|java|c|h|cc|cpp|hpp|md|rst|json|yaml|yml|toml|txt|"
    r"csv|html|css|sh|cfg|ini|sql|rb|php|ipynb|xml)\b"
)


def is_action(message: Message) -> bool:
    """An acting step: an assistant message with tool calls, or whose content holds an
    action block (a fenced code block, ``<execute>...</execute>`` or ``<solution>...</solution>``)."""
    if message.get("role") != "assistant":
        return False
    if message.get("tool_calls"):
        return True
    return _BLOCK.search(_content_text(message.get("content"))) is not None


def is_observation(message: Message) -> bool:
    """A tool result, or a ``user`` turn that reports an observation (MINT's ``Observation:``)."""
    role = message.get("role")
    if role == "tool":
        return True
    return role == "user" and _content_text(message.get("content")).lstrip().startswith("Observation")


def _strings(obj: Any, out: list[str]) -> None:
    if isinstance(obj, dict):
        for value in obj.values():
            _strings(value, out)
    elif isinstance(obj, list):
        for value in obj:
            _strings(value, out)
    elif isinstance(obj, str):
        out.append(obj)


def _action_text(message: Message) -> str:
    """What an action does: its calls' argument strings (decoded, so code keeps its
    lines), or the contents of its action blocks."""
    calls = _calls(message)
    if calls:
        parts: list[str] = []
        for _, _, args in calls:
            try:
                obj = json.loads(args)
            except (json.JSONDecodeError, TypeError, ValueError):
                parts.append(args)
                continue
            _strings(obj, parts)
        return "\n".join(parts)
    content = _content_text(message.get("content"))
    return "\n".join(next(g for g in m.groups() if g is not None) for m in _BLOCK.finditer(content))


def _code_lines(text: str) -> list[str]:
    out: dict[str, None] = {}
    for line in text.splitlines():
        s = line.strip()
        if sum(not ch.isspace() for ch in s) >= MIN_CODE_CHARS and any(ch.isalnum() for ch in s):
            out.setdefault(s, None)
    return list(out)


@dataclass(frozen=True, slots=True)
class CodeStep:
    """The code support references of the acting step at ``index``: ``lines`` and
    ``paths`` copied from earlier observations (a line that is only a path counts
    once, as a path); ``refs`` is both, lines first."""

    index: int
    lines: tuple[str, ...]
    paths: tuple[str, ...]

    @property
    def refs(self) -> tuple[str, ...]:
        return self.lines + self.paths


def code_references(messages: Sequence[Message], index: int,
                    _texts: Sequence[str] | None = None) -> CodeStep:
    """The code lines and file paths that the action ``messages[index]`` copies from
    earlier observations (:func:`is_observation`) and that no system message of the
    history holds; empty when the message does not act (:func:`is_action`).

    >>> history = [{"role": "user", "content": "fix it"},
    ...            {"role": "assistant", "content": "```\\nopen src/app.py\\n```"},
    ...            {"role": "tool", "content": "[File: src/app.py]\\n1:def total(a, b):\\n2:    return a - b"},
    ...            {"role": "assistant", "content": "```\\nedit src/app.py 1:2\\ndef total(a, b):\\n"
    ...                                             "    return a + b\\n```"}]
    >>> code_references(history, 3).refs
    ('def total(a, b):', 'src/app.py')
    >>> code_references(history, 1).refs  # the path was only in the user's words, not an observation
    ()
    """
    if not 0 <= index < len(messages):
        raise ParameterError(f"code_references: index must be in [0, {len(messages)}) (got {index!r})")
    step = messages[index]
    if not is_action(step):
        return CodeStep(index=index, lines=(), paths=())
    history = messages[:index]
    texts = _texts if _texts is not None else [message_text(m) for m in history]
    observed = "\n".join(t for m, t in zip(history, texts) if is_observation(m))
    if not observed:
        return CodeStep(index=index, lines=(), paths=())
    system = "\n".join(t for m, t in zip(history, texts) if m.get("role") == "system")
    action = _action_text(step)
    paths = tuple(dict.fromkeys(p for p in (m.group(0).rstrip(".") for m in _PATH.finditer(action))
                                if len(p) >= 4 and p in observed and p not in system))
    lines = tuple(s for s in _code_lines(action) if s in observed and s not in system and s not in paths)
    return CodeStep(index=index, lines=lines, paths=paths)


def actions(messages: Sequence[Message]) -> list[int]:
    """Indices of the acting messages (:func:`is_action`) of ``messages``."""
    return [i for i, m in enumerate(messages) if is_action(m)]


def actions_kept(history: Sequence[Message], compacted: Sequence[Message]) -> tuple[int, int]:
    """``(kept, total)``: of the acting messages of ``history``, how many have their whole
    text still visible (a substring of the text of ``compacted``)."""
    acts = actions(history)
    if not acts:
        return 0, 0
    text = "\n".join(message_text(m) for m in compacted)
    return sum(message_text(history[i]) in text for i in acts), len(acts)


# --------------------------------------------------------------------------
# validity
# --------------------------------------------------------------------------


def _parents(messages: Sequence[Message]) -> list[int]:
    """For each message, the index of the latest earlier assistant message whose calls
    include its ``tool_call_id``, or -1."""
    latest: dict[str, int] = {}
    out = []
    for i, m in enumerate(messages):
        tcid = m.get("tool_call_id") if m.get("role") == "tool" else None
        out.append(latest.get(tcid, -1) if isinstance(tcid, str) else -1)
        if m.get("role") == "assistant":
            for call_id, _, _ in _calls(m):
                latest[call_id] = i
    return out


def tool_pairing_errors(messages: Sequence[Message]) -> list[str]:
    """What makes ``messages`` invalid for the OpenAI API as to tool pairing, one line each:
    a tool result that answers no earlier call, or a call that no later result answers.
    Tool messages with no ``tool_call_id`` at all (MINT's observations) are left alone.

    >>> call = {"role": "assistant", "tool_calls": [{"id": "c1", "function": {"name": "f", "arguments": "{}"}}]}
    >>> tool_pairing_errors([call])
    ["message 0: call 'c1' has no result"]
    >>> tool_pairing_errors([{"role": "tool", "tool_call_id": "c1", "content": "ok"}])
    ["message 0: tool result for 'c1' answers no earlier call"]
    """
    errors = []
    open_calls: dict[str, int] = {}
    for i, m in enumerate(messages):
        tcid = m.get("tool_call_id")
        if m.get("role") == "tool" and isinstance(tcid, str):
            if tcid in open_calls:
                open_calls.pop(tcid)
            elif not any(tcid == c for j in range(i) for c, _, _ in _calls(messages[j])):
                errors.append(f"message {i}: tool result for {tcid!r} answers no earlier call")
        if m.get("role") == "assistant":
            for call_id, _, _ in _calls(m):
                open_calls[call_id] = i
    errors.extend(f"message {i}: call {c!r} has no result" for c, i in open_calls.items())
    return errors


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
    parents = _parents(messages)
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


def sliding_window(messages: Sequence[Message], budget: int, *, counter: CounterLike = None) -> list[Message]:
    """The plain sliding window: every system message, then whole messages contiguous
    from the end, as many as fit ``budget`` (by :func:`messages_tokens`).

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
    """
    budget = _check_budget("sliding_window", budget)
    tc = as_counter(counter)
    costs = [tc.count(message_text(m)) for m in messages]
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
    values = extract_values(_content_text(message.get("content")))
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
    """The four baselines as selectors, by the names the benchmarks print: ``window``,
    ``observation_masking`` (M = 10), ``last3_tool_results`` and ``value_stubs``."""
    tc = as_counter(counter)

    def window(messages: Sequence[Message], budget: int) -> list[Message]:
        return sliding_window(messages, budget, counter=tc)

    def masking(messages: Sequence[Message], budget: int) -> list[Message]:
        return observation_masking(messages, budget, counter=tc)

    def last3(messages: Sequence[Message], budget: int) -> list[Message]:
        return keep_last_tool_results(messages, budget, counter=tc)

    def stubs(messages: Sequence[Message], budget: int) -> list[Message]:
        return value_stub_masking(messages, budget, counter=tc)

    return {"window": window, "observation_masking": masking, "last3_tool_results": last3, "value_stubs": stubs}


def compactor_selector(compactor: Any) -> Selector:
    """``compactor`` (a :class:`salience.Compactor`) as a selector:
    ``compactor.compact(messages, budget=budget).messages``. A :class:`~salience.BudgetError`
    propagates: :func:`evaluate` counts it and scores the step as nothing visible."""

    def select(messages: Sequence[Message], budget: int) -> Sequence[Message]:
        return compactor.compact(list(messages), budget=budget).messages  # type: ignore[no-any-return]

    select.__name__ = f"compactor_selector({type(compactor).__name__})"
    return select


# --------------------------------------------------------------------------
# results
# --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Recall:
    """Recall of one method at one budget under one definition.

    ``seen`` of ``refs`` references were visible over ``steps`` steps; ``micro`` pools
    them (``seen / refs``), ``macro`` averages the per-step recalls. ``nan`` where
    there is no step.
    """

    seen: int = 0
    refs: int = 0
    steps: int = 0
    macro_sum: float = 0.0

    @property
    def micro(self) -> float:
        return self.seen / self.refs if self.refs else math.nan

    @property
    def macro(self) -> float:
        return self.macro_sum / self.steps if self.steps else math.nan

    def add(self, seen: int, refs: int) -> Recall:
        """This recall with one more step of ``refs`` references (``seen`` visible)."""
        if refs <= 0:
            return self
        return Recall(self.seen + seen, self.refs + refs, self.steps + 1, self.macro_sum + seen / refs)

    def to_dict(self) -> dict[str, Any]:
        return {"micro": _json_float(self.micro), "macro": _json_float(self.macro), "seen": self.seen,
                "refs": self.refs, "steps": self.steps}


def _json_float(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


@dataclass(frozen=True, slots=True)
class MethodResult:
    """Every figure of one method at one budget ``fraction``.

    ``independent``, ``ours``, ``user_given`` and ``code`` are :class:`Recall`\\ s;
    ``actions_kept`` / ``actions_total`` pool the history actions still whole over
    ``action_steps`` steps, and ``fewer_actions`` counts the steps where this method
    kept fewer whole actions than the reference method (the window). ``calls`` is how
    many times the selector ran; ``budget_errors`` how many raised
    :class:`~salience.BudgetError`, ``budget_errors_fitting`` how many of those at a
    budget that holds the system messages and the latest message (``fitting`` counts
    such calls), ``over_budget`` how many returned more tokens than
    the budget, ``invalid`` how many broke tool pairing (:func:`tool_pairing_errors`)
    where the input did not. ``seconds`` is the time spent inside the selector.
    """

    method: str
    fraction: float
    independent: Recall = field(default_factory=Recall)
    ours: Recall = field(default_factory=Recall)
    user_given: Recall = field(default_factory=Recall)
    code: Recall = field(default_factory=Recall)
    actions_kept: int = 0
    actions_total: int = 0
    action_steps: int = 0
    fewer_actions: int = 0
    calls: int = 0
    budget_errors: int = 0
    fitting: int = 0
    budget_errors_fitting: int = 0
    over_budget: int = 0
    invalid: int = 0
    seconds: float = 0.0

    @property
    def actions_share(self) -> float:
        return self.actions_kept / self.actions_total if self.actions_total else math.nan

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": self.method, "fraction": self.fraction,
            "independent": self.independent.to_dict(), "ours": self.ours.to_dict(),
            "user_given": self.user_given.to_dict(), "code": self.code.to_dict(),
            "actions": {"kept": self.actions_kept, "total": self.actions_total,
                        "share": _json_float(self.actions_share), "steps": self.action_steps,
                        "fewer_than_reference": self.fewer_actions},
            "calls": self.calls, "budget_errors": self.budget_errors, "fitting": self.fitting,
            "budget_errors_fitting": self.budget_errors_fitting, "over_budget": self.over_budget,
            "invalid": self.invalid, "seconds": round(self.seconds, 3),
        }


def _pct(fraction: float) -> str:
    pct = round(100 * fraction, 4)
    return str(int(pct)) if pct == int(pct) else str(pct).replace(".", "p")


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]+", "_", name).strip("_") or "method"


@dataclass(frozen=True, slots=True)
class IndependentReport:
    """What :func:`evaluate` measured: one :class:`MethodResult` per (method, fraction),
    in the order of the selectors given, then of the fractions; ``steps`` counts the
    measured steps; ``meta`` says how (transcripts, ``max_steps``, reference method)."""

    results: tuple[MethodResult, ...]
    fractions: tuple[float, ...]
    steps: int
    seconds: float = 0.0
    meta: Mapping[str, Any] = field(default_factory=dict)

    @property
    def methods(self) -> list[str]:
        return list(dict.fromkeys(r.method for r in self.results))

    def result(self, method: str, fraction: float) -> MethodResult:
        """The result of ``method`` at ``fraction``; a ``ParameterKeyError`` (a ``KeyError``)
        naming what exists otherwise."""
        for r in self.results:
            if r.method == method and math.isclose(r.fraction, fraction):
                return r
        raise ParameterKeyError(f"no result for method {method!r} at {fraction} (methods: {self.methods}, "
                       f"fractions: {list(self.fractions)})")

    def metrics(self, prefix: str = "") -> dict[str, float]:
        """Flat MLflow-safe metrics, ``<prefix><figure>_<pct>pct_<method>``
        (``independent_micro_10pct_window``, ``budget_errors_25pct_salience``), ``nan`` left out."""
        out: dict[str, float] = {}
        for r in self.results:
            tail = f"_{_pct(r.fraction)}pct_{_safe(r.method)}"
            values = {
                "independent_micro": r.independent.micro, "independent_macro": r.independent.macro,
                "ours_micro": r.ours.micro, "ours_macro": r.ours.macro,
                "user_given_micro": r.user_given.micro, "code_micro": r.code.micro, "code_macro": r.code.macro,
                "actions_kept": r.actions_share, "fewer_actions": float(r.fewer_actions),
                "budget_errors": float(r.budget_errors), "budget_errors_fitting": float(r.budget_errors_fitting),
                "over_budget": float(r.over_budget),
            }
            for key, value in values.items():
                if math.isfinite(value):
                    out[f"{prefix}{key}{tail}"] = float(value)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"fractions": list(self.fractions), "steps": self.steps, "seconds": round(self.seconds, 2),
                "meta": dict(self.meta), "results": [r.to_dict() for r in self.results]}


# --------------------------------------------------------------------------
# the runner
# --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Plan:
    """One measured step: the history, and the references of each definition there."""

    transcript: str
    index: int
    history: tuple[Message, ...]
    independent: IndependentStep
    ours: tuple[str, ...]
    code: CodeStep
    actions: tuple[str, ...]  # the text of each acting message of the history
    floor: int  # tokens of the system messages and the latest message
    valid_input: bool


def _floor(history: Sequence[Message], counter: CounterLike = None) -> int:
    """Tokens of the system messages and the latest message: the least a valid output holds."""
    tc = as_counter(counter)
    system = [i for i, m in enumerate(history) if m.get("role") == "system"]
    last = [len(history) - 1] if history and len(history) - 1 not in system else []
    return sum(tc.count(message_text(history[i])) for i in system + last)


def _spread(items: list[Any], k: int | None) -> list[Any]:
    """At most ``k`` of ``items``, evenly spread (the first and the last included)."""
    if k is None or len(items) <= k:
        return items
    picks = sorted(set(np.linspace(0, len(items) - 1, k).round().astype(int).tolist()))
    return [items[i] for i in picks]


def _ours(transcript: Transcript) -> dict[int, tuple[str, ...]]:
    """Our definition (``salience bench``'s): per assistant step index, the values it uses
    that first appeared in an earlier non-system entry, each once (case-insensitively)."""
    from salience.scorer.labels import step_references

    roles = {e.id: e.role for e in transcript.entries}
    out: dict[int, tuple[str, ...]] = {}
    for sr in step_references(transcript):
        refs: dict[str, str] = {}
        for value, source in sr.refs:
            if roles.get(source) != "system":
                refs.setdefault(value.casefold(), value)
        if refs and sr.step > 0:
            out[sr.step] = tuple(refs.values())
    return out


def _plan(transcripts: Sequence[Transcript], max_steps: int | None, counter: TokenCounter) -> Iterator[list[_Plan]]:
    for t in transcripts:
        messages = t.to_openai()
        if len(messages) != len(t.entries):  # entries and messages must line up for our definition
            raise SalienceError(f"transcript {t.id!r}: to_openai() gave {len(messages)} messages for "
                                f"{len(t.entries)} entries; cannot line up the two definitions")
        texts = [message_text(m) for m in messages]
        ours = _ours(t)
        candidates = []
        for i in range(1, len(messages)):
            if messages[i].get("role") != "assistant":
                continue
            ind = independent_references(messages, i, texts[:i])
            code = code_references(messages, i, texts[:i])
            if ind.refs or code.refs or i in ours:
                candidates.append((i, ind, code))
        steps = []
        for i, ind, code in _spread(candidates, max_steps):
            history = tuple(messages[:i])
            steps.append(_Plan(transcript=t.id, index=i, history=history, independent=ind,
                               ours=ours.get(i, ()), code=code, actions=tuple(texts[j] for j in actions(history)),
                               floor=_floor(history, counter), valid_input=not tool_pairing_errors(history)))
        yield steps


def _check_fractions(fractions: Iterable[float]) -> tuple[float, ...]:
    if isinstance(fractions, (int, float)):
        fractions = (fractions,)
    out = []
    for f in fractions:
        if isinstance(f, bool) or not isinstance(f, (int, float, np.floating)) or not 0.0 < float(f) <= 1.0:
            raise ParameterError(f"evaluate: each fraction must be a share of the tokens in (0, 1] (got {f!r})")
        out.append(float(f))
    if not out:
        raise ParameterError("evaluate: at least one fraction is needed (got none)")
    return tuple(out)


class _Acc:
    """Mutable totals of one (method, fraction) while :func:`evaluate` runs."""

    __slots__ = ("action_steps", "actions_kept", "actions_total", "budget_errors", "budget_errors_fitting", "calls",
                 "code", "fewer", "fitting", "independent", "invalid", "ours", "over", "seconds", "user")

    def __init__(self) -> None:
        self.independent = self.ours = self.user = self.code = Recall()
        self.actions_kept = self.actions_total = self.action_steps = self.fewer = 0
        self.calls = self.budget_errors = self.over = self.invalid = self.fitting = self.budget_errors_fitting = 0
        self.seconds = 0.0

    def result(self, method: str, fraction: float) -> MethodResult:
        return MethodResult(method=method, fraction=fraction, independent=self.independent, ours=self.ours,
                            user_given=self.user, code=self.code, actions_kept=self.actions_kept,
                            actions_total=self.actions_total, action_steps=self.action_steps,
                            fewer_actions=self.fewer, calls=self.calls, budget_errors=self.budget_errors,
                            fitting=self.fitting, budget_errors_fitting=self.budget_errors_fitting,
                            over_budget=self.over, invalid=self.invalid, seconds=self.seconds)


ProgressFn = Callable[[str, int, int], None]


def evaluate(
    transcripts: Sequence[Transcript],
    selectors: Mapping[str, Selector],
    fractions: Iterable[float] = DEFAULT_FRACTIONS,
    *,
    counter: CounterLike = None,
    max_steps: int | None = None,
    reference: str | None = "window",
    progress: bool | ProgressFn = False,
    description: str = "steps",
) -> IndependentReport:
    """Replay ``transcripts`` and measure every selector at every measured step and fraction.

    A transcript's measured steps are its assistant messages (after the first
    message) that have references under at least one definition: independent
    (:func:`independent_references`), ours (the values the step uses that first
    appeared in an earlier non-system entry,
    :func:`salience.scorer.labels.step_references`, as ``salience bench`` counts
    them, visible case-insensitively) or code support (:func:`code_references`);
    ``max_steps`` keeps at most that many per transcript, evenly spread. Each
    definition is scored on its own steps, over one call of the selector per step
    and fraction: ``selector(history, budget)`` with the budget of
    :func:`history_budget`. Actions kept are measured at every measured step whose
    history acts.

    A selector that raises :class:`~salience.BudgetError`, or returns more tokens than
    the budget (:func:`messages_tokens`), scores nothing at that step (every
    reference missed, no action kept) and is counted; BudgetErrors are also counted
    apart where the budget holds the system messages and the latest message (where
    a valid output fits, so a default should not raise). Any other exception
    propagates. ``reference`` names the selector that ``fewer_actions`` compares
    against (``None``: no comparison). ``progress``: ``True`` shows a rich progress
    bar (on stderr), a callable gets ``(description, done, total)``. Deterministic
    when the selectors are.
    """
    started = time.perf_counter()
    fr = _check_fractions(fractions)
    if not selectors:
        raise ParameterError("evaluate: at least one selector is needed (got none)")
    if max_steps is not None and (isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1):
        raise ParameterError(f"evaluate: max_steps must be a positive int or None (got {max_steps!r})")
    if reference is not None and reference not in selectors:
        raise ParameterError(f"evaluate: reference {reference!r} is not one of the selectors ({list(selectors)})")
    tc: TokenCounter = as_counter(counter)
    transcripts = list(transcripts)
    plan = [s for steps in _plan(transcripts, max_steps, tc) for s in steps]
    acc = {(name, f): _Acc() for name in selectors for f in fr}
    report_progress, close = _progress(progress, description, len(plan))
    try:
        for done, step in enumerate(plan, 1):
            for f in fr:
                budget = history_budget(step.history, f, tc)
                kept_actions: dict[str, int] = {}
                for name, select in selectors.items():
                    a = acc[(name, f)]
                    a.calls += 1
                    fits = step.floor <= budget
                    a.fitting += fits
                    t0 = time.perf_counter()
                    out: Sequence[Message] | None
                    try:
                        out = select(step.history, budget)
                    except BudgetError:
                        out = None
                        a.budget_errors += 1
                        a.budget_errors_fitting += fits
                    a.seconds += time.perf_counter() - t0
                    if out is not None and messages_tokens(out, tc) > budget:
                        a.over += 1
                        out = None
                    if out is not None and step.valid_input and tool_pairing_errors(out):
                        a.invalid += 1
                    text = "\n".join(message_text(m) for m in out) if out is not None else ""
                    ind = step.independent
                    if ind.refs:
                        a.independent = a.independent.add(sum(r in text for r in ind.refs), len(ind.refs))
                    if ind.user_given:
                        a.user = a.user.add(sum(r in text for r in ind.user_given), len(ind.user_given))
                    if step.ours:
                        folded = text.casefold()
                        a.ours = a.ours.add(sum(r.casefold() in folded for r in step.ours), len(step.ours))
                    code = step.code.refs
                    if code:
                        a.code = a.code.add(sum(r in text for r in code), len(code))
                    if step.actions:
                        kept = sum(t in text for t in step.actions)
                        a.actions_kept += kept
                        a.actions_total += len(step.actions)
                        a.action_steps += 1
                        kept_actions[name] = kept
                if reference is not None and step.actions:
                    for name, kept in kept_actions.items():
                        if kept < kept_actions[reference]:
                            acc[(name, f)].fewer += 1
            report_progress(done)
    finally:
        close()
    results = tuple(acc[(name, f)].result(name, f) for name in selectors for f in fr)
    meta = {"transcripts": len(transcripts), "max_steps": max_steps, "reference": reference,
            "independent_steps": sum(bool(s.independent.refs) for s in plan),
            "ours_steps": sum(bool(s.ours) for s in plan), "code_steps": sum(bool(s.code.refs) for s in plan)}
    return IndependentReport(results=results, fractions=fr, steps=len(plan),
                             seconds=time.perf_counter() - started, meta=meta)


def _progress(progress: bool | ProgressFn, description: str, total: int) -> tuple[Callable[[int], None],
                                                                                  Callable[[], None]]:
    if callable(progress):
        fn = progress
        fn(description, 0, total)
        return (lambda done: fn(description, done, total)), (lambda: None)
    if not progress:
        return (lambda done: None), (lambda: None)
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                   console=Console(stderr=True), transient=True)
    task = bar.add_task(description, total=total)
    bar.start()
    return (lambda done: bar.update(task, completed=done)), bar.stop
