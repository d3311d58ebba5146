"""The independent reference definition (issue #14) over OpenAI chat messages: what
a step's references are, and when they are visible; code support for coding agents.

The overview, and the runner that uses these definitions, are
:mod:`salience.bench.independent` (which re-exports every public name here).

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

**Validity** (:func:`tool_pairing_errors`): what breaks the pairing of tool results
with their calls, as the OpenAI API requires it; :func:`call_parents` pairs them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from salience.errors import ParameterError
from salience.messages.openai import entry_from_openai
from salience.tokens import CounterLike, as_counter

__all__ = [
    "MIN_CODE_CHARS",
    "CodeStep",
    "IndependentStep",
    "Message",
    "actions",
    "actions_kept",
    "call_parents",
    "code_references",
    "content_text",
    "history_budget",
    "independent_references",
    "is_action",
    "is_observation",
    "is_step",
    "message_cost",
    "message_text",
    "message_tokens",
    "messages_tokens",
    "reference_strings",
    "tool_pairing_errors",
    "visible",
]

#: Non-space characters a code line needs to count as a copied line.
MIN_CODE_CHARS = 10

#: An OpenAI chat message.
Message = Mapping[str, Any]


# --------------------------------------------------------------------------
# text and tokens
# --------------------------------------------------------------------------


def content_text(content: Any) -> str:
    """The text of a message's ``content``: a string, or the ``text`` of its parts, joined by newlines."""
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
    parts = [content_text(message.get("content"))]
    for _, name, args in _calls(message):
        parts.extend((name, args))
    return "\n".join(p for p in parts if p)


def message_tokens(message: Message, counter: CounterLike = None) -> int:
    """cl100k tokens (or ``counter``'s) of :func:`message_text`, no overhead added."""
    return as_counter(counter).count(message_text(message))


def message_cost(message: Message, counter: CounterLike = None, billed: bool = False) -> int:
    """What ``message`` costs: the tokens of its :func:`message_text`; if ``billed``, what
    the compactor counts for it instead (:meth:`~salience.TokenCounter.count_entry`): its
    content, a ``name`` field, each call's name and arguments, and the counter's overhead
    per message and per tool call (``message_overhead`` and ``call_overhead``: 3 and 3 for
    the default, what a provider adds).

    >>> from salience.tokens import TokenCounter
    >>> words = TokenCounter(lambda text: len(text.split()))
    >>> call = {"role": "assistant", "content": "let me look",
    ...         "tool_calls": [{"id": "c", "function": {"name": "find", "arguments": '{"q": 1}'}}]}
    >>> message_cost(call, words), message_cost(call, words, billed=True)
    (6, 12)
    >>> result = {"role": "tool", "tool_call_id": "c", "name": "find", "content": "found it"}
    >>> message_cost(result, words), message_cost(result, words, billed=True)  # the name is billed
    (2, 6)
    """
    tc = as_counter(counter)
    if billed:
        return tc.count_entry(entry_from_openai(message, 0))
    return tc.count(message_text(message))


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


def _leaves(obj: Any) -> Iterator[Any]:
    """The values of a parsed JSON document that are neither objects nor arrays, at any
    depth, in order. (Deliberately not :func:`salience.values.call_values`: the
    independent definition shares no code with the labels it checks.)"""
    if isinstance(obj, dict):
        for value in obj.values():
            yield from _leaves(value)
    elif isinstance(obj, list):
        for value in obj:
            yield from _leaves(value)
    else:
        yield obj


def _leaf_values(obj: Any, out: dict[str, None]) -> None:
    for leaf in _leaves(obj):
        if isinstance(leaf, _Number):
            if sum(ch.isdigit() for ch in leaf) >= 3:
                out.setdefault(str(leaf), None)
        elif isinstance(leaf, str):
            s = leaf.strip()
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
    return _BLOCK.search(content_text(message.get("content"))) is not None


def is_observation(message: Message) -> bool:
    """A tool result, or a ``user`` turn that reports an observation (MINT's ``Observation:``)."""
    role = message.get("role")
    if role == "tool":
        return True
    return role == "user" and content_text(message.get("content")).lstrip().startswith("Observation")


def _strings(obj: Any, out: list[str]) -> None:
    out.extend(leaf for leaf in _leaves(obj) if isinstance(leaf, str))


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
    content = content_text(message.get("content"))
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


def call_parents(messages: Sequence[Message]) -> list[int]:
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
