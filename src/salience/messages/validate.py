"""What the providers' chat APIs require of a message list, as checks that list the problems.

:func:`check_openai` and :func:`check_anthropic` return a list of problems, one
line each (empty when the provider would accept the messages, as far as these
rules go). They check structure, not content: tool calls paired with their
results, roles, empty content, ids. The rules are the ones the providers enforce
with a 400 error; each problem names the message index, the field and what came.

OpenAI (Chat Completions):

* ``messages`` is a non-empty list of mappings; ``role`` is ``system``,
  ``developer``, ``user``, ``assistant``, ``tool`` (or the legacy ``function``);
* ``system``, ``developer`` and ``user`` messages have ``content`` (a string or a
  non-empty list of parts); an ``assistant`` message has ``content`` or
  ``tool_calls`` (``content`` may be ``None`` only beside calls);
* ``tool_calls``, when present and not ``None``, is a non-empty list of
  ``{"id": str, "type": "function", "function": {"name": str, "arguments": str}}``
  with ids unique within the message;
* every ``tool`` message has a ``tool_call_id`` and ``content``, and sits in the
  run of ``tool`` messages right after the assistant message whose ``tool_calls``
  contain that id; each call is answered once, and all of a message's calls are
  answered before the next message that is not a ``tool`` message.

Anthropic (Messages):

* ``system`` is ``None``, a string, or a list of non-empty ``text`` blocks;
* ``messages`` is a non-empty list; roles are ``user`` and ``assistant`` only,
  alternating, starting with ``user`` (the API has come to merge consecutive
  messages of one role into one turn; ``alternation=False`` checks that looser
  rule);
* ``content`` is a string or a non-empty list of blocks (mappings with a string
  ``type``); it may be empty only in a final assistant message; ``text`` blocks
  hold non-whitespace text;
* ``tool_use`` blocks appear only in assistant messages; their ids are unique in
  the conversation and match ``^[a-zA-Z0-9_-]+$``; ``input`` is an object;
* ``tool_result`` blocks appear only in user messages, first in the content
  (before any text or image), and answer a ``tool_use`` of the assistant message
  right before, once; every ``tool_use`` is answered in the very next message.

Pending calls (a decision, documented here): an agent loop's history may end with
an assistant message whose calls are not all answered yet (the agent is waiting on
the tool; a transcript cut in the middle of a call group looks like that). Neither
provider accepts such a request, so by default a trailing unanswered call is a
problem. With ``allow_pending=True`` the calls of the *last* assistant message are
allowed to be unanswered when nothing but their own results follows it (for
OpenAI: the run of ``tool`` messages after it reaches the end of the list; for
Anthropic: it is the last message, or the last message is a user message holding
only ``tool_result`` blocks for some of its calls). That is the right check for a compactor's
output when its input had such a call: the compactor keeps the history valid; it
cannot answer the call.

>>> check_openai([{"role": "user", "content": "hi"},
...               {"role": "assistant", "content": None, "tool_calls": [
...                   {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
...               {"role": "user", "content": "well?"}])
["message 1 (assistant): tool call 'c1' is not answered by a tool message before message 2 (user)"]
>>> check_anthropic([{"role": "user", "content": "hi"}], system="Be brief.")
[]
>>> check_anthropic([{"role": "assistant", "content": "hello"}])
["message 0: the first message must have role 'user' (got 'assistant')"]
"""

from __future__ import annotations

import operator
import re
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any, TypeGuard

from salience.errors import ParameterError, TranscriptError, describe
from salience.limits import Limits, check_size
from salience.transcript import Entry, Growth, Query, Transcript

__all__ = [
    "ANTHROPIC_ID",
    "Checked",
    "check_anthropic",
    "check_openai",
    "checked_transcript",
    "checked_growing",
    "pending_calls",
    "require_answered",
    "unanswered_before",
]

#: What Anthropic accepts as a ``tool_use`` id.
ANTHROPIC_ID = re.compile(r"^[a-zA-Z0-9_-]+$")

_OPENAI_ROLES = ("system", "developer", "user", "assistant", "tool", "function")
_ANTHROPIC_ROLES = ("user", "assistant")


_got = partial(describe, none_typed=False)


def _is_list(value: Any) -> TypeGuard[Sequence[Any]]:
    return isinstance(value, Sequence) and not isinstance(value, (str, bytes, Mapping))


def _messages_problem(messages: Any) -> str | None:
    if not _is_list(messages):
        return f"messages must be a list of message mappings (got {_got(messages)})"
    if len(messages) == 0:
        return "messages must not be empty"
    return None


# --------------------------------------------------------------------------
# OpenAI
# --------------------------------------------------------------------------


def _openai_calls(i: int, m: Mapping[str, Any], problems: list[str]) -> list[str]:
    """The call ids of message ``i`` (problems with the calls appended)."""
    calls = m.get("tool_calls")
    if calls is None:
        return []
    where = f"message {i} ({m.get('role')})"
    if not _is_list(calls):
        problems.append(f"{where}: field 'tool_calls' must be a list (got {_got(calls)})")
        return []
    if not calls:
        problems.append(f"{where}: field 'tool_calls' must not be an empty list (leave it out instead)")
        return []
    if m.get("role") != "assistant":
        problems.append(f"{where}: only assistant messages may have 'tool_calls'")
    ids: list[str] = []
    for j, call in enumerate(calls):
        here = f"{where}: tool_calls[{j}]"
        if not isinstance(call, Mapping):
            problems.append(f"{here} must be a mapping (got {_got(call)})")
            continue
        cid = call.get("id")
        if not isinstance(cid, str) or not cid:
            problems.append(f"{here}.id must be a non-empty str (got {_got(cid)})")
        elif cid in ids:
            problems.append(f"{here}.id {cid!r} is used twice in the message")
        else:
            ids.append(cid)
        if call.get("type") != "function":
            problems.append(f"{here}.type must be 'function' (got {_got(call.get('type'))})")
        fn = call.get("function")
        if not isinstance(fn, Mapping):
            problems.append(f"{here}.function must be a mapping with 'name' and 'arguments' (got {_got(fn)})")
            continue
        if not isinstance(fn.get("name"), str) or not fn.get("name"):
            problems.append(f"{here}.function.name must be a non-empty str (got {_got(fn.get('name'))})")
        if not isinstance(fn.get("arguments"), str):
            problems.append(f"{here}.function.arguments must be a str (got {_got(fn.get('arguments'))})")
    return ids


def _openai_content(i: int, m: Mapping[str, Any], problems: list[str]) -> None:
    role = m.get("role")
    where = f"message {i} ({role})"
    content = m.get("content")
    if content is None:
        if role == "assistant":
            if not m.get("tool_calls") and not m.get("function_call") and not m.get("refusal"):
                problems.append(f"{where}: an assistant message needs 'content' or 'tool_calls' (got neither)")
        elif role != "function":
            problems.append(f"{where}: field 'content' is required (got {_got(content)})")
        return
    if isinstance(content, str):
        return
    if not _is_list(content):
        problems.append(f"{where}: field 'content' must be a str or a list of parts (got {_got(content)})")
        return
    if not content:
        problems.append(f"{where}: field 'content' must not be an empty list")
        return
    for j, part in enumerate(content):
        if not isinstance(part, Mapping) or not isinstance(part.get("type"), str):
            problems.append(f"{where}: content[{j}] must be a mapping with a 'type' (got {_got(part)})")
        elif part["type"] == "text" and not isinstance(part.get("text"), str):
            problems.append(f"{where}: content[{j}].text must be a str (got {_got(part.get('text'))})")


def check_openai(messages: Sequence[Mapping[str, Any]], *, allow_pending: bool = False) -> list[str]:
    """Problems OpenAI's Chat Completions API would reject ``messages`` for (rules in the module doc).

    ``allow_pending``: the calls of a trailing assistant message may be unanswered
    (see the module doc). Never modifies ``messages``.

    >>> call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    >>> check_openai([{"role": "user", "content": "go"}, {"role": "assistant", "tool_calls": [call]}])
    ["message 1 (assistant): tool call 'c1' is not answered by a tool message before the end of the list"]
    >>> check_openai([{"role": "user", "content": "go"}, {"role": "assistant", "tool_calls": [call]}],
    ...              allow_pending=True)
    []
    >>> check_openai([{"role": "tool", "tool_call_id": "c1", "content": "1"}])
    ["message 0 (tool): answers call 'c1', but no assistant message with tool_calls comes right before it"]
    """
    problem = _messages_problem(messages)
    if problem is not None:
        return [problem]
    problems: list[str] = []
    open_calls: list[str] = []  # calls of the current assistant message not answered yet
    owner = -1  # index of the assistant message whose results may follow
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping):
            problems.append(f"message {i}: must be a mapping with 'role' and 'content' (got {_got(m)})")
            owner, open_calls = -1, []
            continue
        role = m.get("role")
        if role not in _OPENAI_ROLES:
            problems.append(f"message {i}: field 'role' must be one of {', '.join(_OPENAI_ROLES)} (got {_got(role)})")
        if role == "tool":
            cid = m.get("tool_call_id")
            if not isinstance(cid, str) or not cid:
                problems.append(f"message {i} (tool): field 'tool_call_id' must be a non-empty str (got {_got(cid)})")
            elif owner < 0:
                problems.append(f"message {i} (tool): answers call {cid!r}, but no assistant message with "
                                "tool_calls comes right before it")
            elif cid not in open_calls:
                owner_ids = _openai_calls(owner, messages[owner], [])
                why = "a second time" if cid in owner_ids else f"which is not a call of message {owner}"
                problems.append(f"message {i} (tool): answers call {cid!r} {why}")
            else:
                open_calls.remove(cid)
            _openai_content(i, m, problems)
            continue
        # a message that is not a tool result closes the previous call group
        if open_calls:
            problems.append(_unanswered(owner, messages[owner], open_calls, f"message {i} ({role})"))
        _openai_content(i, m, problems)
        open_calls = _openai_calls(i, m, problems)
        owner = i if open_calls else -1
    if open_calls and not allow_pending:
        problems.append(_unanswered(owner, messages[owner], open_calls, "the end of the list"))
    return problems


def _unanswered(owner: int, m: Mapping[str, Any], calls: list[str], before: str) -> str:
    what = f"tool call {calls[0]!r}" if len(calls) == 1 else f"tool calls {', '.join(repr(c) for c in calls)}"
    verb = "is" if len(calls) == 1 else "are"
    return f"message {owner} ({m.get('role')}): {what} {verb} not answered by a tool message before {before}"


# --------------------------------------------------------------------------
# Anthropic
# --------------------------------------------------------------------------


def _text_problem(block: Mapping[str, Any]) -> str | None:
    text = block.get("text")
    if not isinstance(text, str):
        return f"text must be a str (got {_got(text)})"
    if not text.strip():
        return f"text must hold non-whitespace text (got {_got(text)})"
    return None


def _check_system(system: Any, problems: list[str]) -> None:
    if system is None or isinstance(system, str):
        return
    if not _is_list(system):
        problems.append(f"system: must be None, a str or a list of text blocks (got {_got(system)})")
        return
    for j, block in enumerate(system):
        if not isinstance(block, Mapping) or block.get("type") != "text":
            problems.append(f"system[{j}]: must be a text block (got {_got(block)})")
            continue
        bad = _text_problem(block)
        if bad:
            problems.append(f"system[{j}]: {bad}")


def _tool_result_content(where: str, block: Mapping[str, Any], problems: list[str]) -> None:
    content = block.get("content")
    if content is None or isinstance(content, str):
        return
    if not _is_list(content):
        problems.append(f"{where}.content must be a str or a list of blocks (got {_got(content)})")
        return
    for k, inner in enumerate(content):
        if not isinstance(inner, Mapping) or not isinstance(inner.get("type"), str):
            problems.append(f"{where}.content[{k}] must be a mapping with a 'type' (got {_got(inner)})")
        elif inner["type"] == "text":
            bad = _text_problem(inner)
            if bad:
                problems.append(f"{where}.content[{k}].{bad}")


def check_anthropic(
    messages: Sequence[Mapping[str, Any]],
    system: Any = None,
    *,
    allow_pending: bool = False,
    alternation: bool = True,
) -> list[str]:
    """Problems Anthropic's Messages API would reject ``messages`` (and ``system``) for.

    Rules in the module doc; ``allow_pending``: the ``tool_use`` blocks of a final
    assistant message may be unanswered. ``alternation=False`` lets two messages of
    the same role follow each other (the API now merges consecutive turns of one
    role; the first message must still be a user message). Never modifies its
    arguments.

    >>> use = {"type": "tool_use", "id": "t.1", "name": "f", "input": {}}
    >>> check_anthropic([{"role": "user", "content": "go"}, {"role": "assistant", "content": [use]},
    ...                  {"role": "user", "content": [{"type": "text", "text": "ok"},
    ...                                               {"type": "tool_result", "tool_use_id": "t.1"}]}])
    ... # doctest: +NORMALIZE_WHITESPACE
    ["message 1: content[0] (tool_use): id 't.1' must match ^[a-zA-Z0-9_-]+$",
     'message 2: content[1] (tool_result): tool_result blocks must come before any other block in the message']
    """
    problems: list[str] = []
    _check_system(system, problems)
    problem = _messages_problem(messages)
    if problem is not None:
        return [*problems, problem]
    n = len(messages)
    seen_uses: set[str] = set()
    prev_uses: list[str] = []  # tool_use ids of the previous message (if it was an assistant message)
    prev_role: Any = None
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping):
            problems.append(f"message {i}: must be a mapping with 'role' and 'content' (got {_got(m)})")
            prev_uses, prev_role = [], None
            continue
        role = m.get("role")
        if role not in _ANTHROPIC_ROLES:
            problems.append(f"message {i}: field 'role' must be 'user' or 'assistant' (got {_got(role)}); "
                            "the system prompt goes in 'system'")
        elif i == 0 and role != "user":
            problems.append(f"message 0: the first message must have role 'user' (got {_got(role)})")
        elif alternation and prev_role is not None and role == prev_role:
            problems.append(f"message {i}: roles must alternate between user and assistant (got two {role!r} "
                            "messages in a row)")
        content = m.get("content")
        last_assistant = i == n - 1 and role == "assistant"
        uses: list[str] = []
        answered: set[str] = set()
        if isinstance(content, str):
            if not content.strip() and not (last_assistant and content == ""):
                problems.append(f"message {i}: content must not be empty (got {_got(content)}); only a final "
                                "assistant message may be empty")
        elif not _is_list(content):
            problems.append(f"message {i}: field 'content' must be a str or a list of blocks (got {_got(content)})")
        elif not content:
            if not last_assistant:
                problems.append(f"message {i}: content must not be an empty list; only a final assistant message "
                                "may be empty")
        else:
            other_seen = False
            for j, block in enumerate(content):
                if not isinstance(block, Mapping) or not isinstance(block.get("type"), str):
                    problems.append(f"message {i}: content[{j}] must be a mapping with a 'type' (got {_got(block)})")
                    continue
                kind = block["type"]
                where = f"message {i}: content[{j}] ({kind})"
                if kind == "text":
                    bad = _text_problem(block)
                    if bad:
                        problems.append(f"{where}: {bad}")
                elif kind == "tool_use":
                    if role != "assistant":
                        problems.append(f"{where}: tool_use blocks belong in assistant messages (got role {role!r})")
                    uid = block.get("id")
                    if not isinstance(uid, str) or not ANTHROPIC_ID.match(uid):
                        problems.append(f"{where}: id {_got(uid)} must match {ANTHROPIC_ID.pattern}")
                    if isinstance(uid, str) and uid in seen_uses:
                        problems.append(f"{where}: id {uid!r} is used by an earlier tool_use (ids must be unique)")
                    elif isinstance(uid, str) and uid:
                        seen_uses.add(uid)
                        uses.append(uid)
                    if not isinstance(block.get("name"), str) or not block.get("name"):
                        problems.append(f"{where}: name must be a non-empty str (got {_got(block.get('name'))})")
                    if not isinstance(block.get("input"), Mapping):
                        problems.append(f"{where}: input must be an object (got {_got(block.get('input'))})")
                elif kind == "tool_result":
                    if role != "user":
                        problems.append(f"{where}: tool_result blocks belong in user messages (got role {role!r})")
                    if other_seen:
                        problems.append(f"{where}: tool_result blocks must come before any other block in the message")
                    tid = block.get("tool_use_id")
                    if not isinstance(tid, str) or not tid:
                        problems.append(f"{where}: tool_use_id must be a non-empty str (got {_got(tid)})")
                    elif tid in answered:
                        problems.append(f"{where}: answers tool_use {tid!r} a second time")
                    elif tid not in prev_uses:
                        if tid in uses:
                            why = "it is a tool_use of this same message"
                        elif tid in seen_uses:
                            why = "it is a tool_use of an earlier message"
                        else:
                            why = "no tool_use has that id"
                        problems.append(f"{where}: answers tool_use {tid!r}, which is not a tool_use of the "
                                        f"previous (assistant) message: {why}")
                    else:
                        answered.add(tid)
                    _tool_result_content(where, block, problems)
                if kind != "tool_result":
                    other_seen = True
        missing = [u for u in prev_uses if u not in answered]
        only_results = _is_list(content) and bool(content) and all(
            isinstance(b, Mapping) and b.get("type") == "tool_result" for b in content)
        if missing and allow_pending and i == n - 1 and only_results:
            missing = []  # the rest of the calls are still running
        if missing:
            what = ", ".join(repr(u) for u in missing)
            problems.append(f"message {i - 1}: tool_use {what} not answered by a tool_result at the start of "
                            f"message {i}")
        prev_uses = uses
        prev_role = role if role in _ANTHROPIC_ROLES else None
    if prev_uses and not allow_pending:
        what = ", ".join(repr(u) for u in prev_uses)
        problems.append(f"message {n - 1}: tool_use {what} not answered (the conversation ends with it)")
    return problems


# --------------------------------------------------------------------------
# the readers' rule: every call answered before the history moves on
# --------------------------------------------------------------------------


def unanswered_before(
    transcript: Transcript, *, start: int = 0, open_calls: dict[str, int] | None = None
) -> tuple[int, str, int] | None:
    """``(calling entry, call id, entry)`` for the first tool call of ``transcript`` that is
    not answered before ``entry``, the next entry that is not one of its call group's
    results (a user or assistant turn, a free-standing observation); None when every call
    is answered in time, or only the calls of the last calling entry are still waiting
    with nothing but their own results after them.

    Results before their calls, results of no call and calls answered twice the
    :class:`~salience.transcript.Transcript` itself refuses.

    ``start``, ``open_calls``: go on from entry ``start``, the entries before it having
    been found in time with ``open_calls`` (call id -> the entry that made it) still
    waiting; the dict is updated as the entries are read (:func:`checked_growing`).
    """
    open_calls = {} if open_calls is None else open_calls  # call id -> entry that made it
    entries = transcript.entries
    for i in range(start, len(entries)):
        entry = entries[i]
        if entry.role == "tool" and entry.tool_call_id is not None and entry.tool_call_id in open_calls:
            del open_calls[entry.tool_call_id]
            continue
        if open_calls:
            cid, owner = next(iter(open_calls.items()))
            return owner, cid, i
        for call in entry.tool_calls:
            open_calls[call.id] = i
    return None


def _where(transcript: Transcript, i: int) -> str:
    """``message 3 (id 'm3')`` for entry ``i``, in the terms of the messages it was read from."""
    from salience.messages._common import ANTHROPIC_KEY

    entry = transcript.entries[i]
    private = entry.meta.get(ANTHROPIC_KEY)
    if isinstance(private, Mapping) and isinstance(private.get("head"), Mapping):
        head = private["head"]
        mid = head["message"].get("id", f"m{head['index']}")
        part = "" if private.get("part", 0) == 0 else f", block run {private['part']}"
        return f"message {head['index']} (id {mid!r}{part}, {entry.role})"
    return f"message {i} (id {entry.id!r}, {entry.role})"


def require_answered(transcript: Transcript) -> None:
    """Refuse a history whose tool calls a provider would refuse: a :class:`~salience.errors.TranscriptError`
    naming the calling message, the call id and the message that comes before its answer.

    OpenAI wants every call of an assistant message answered by the ``tool`` messages
    right after it; Anthropic wants every ``tool_use`` answered at the start of the very
    next user message. Neither accepts a call left unanswered with more turns after it,
    so the readers (:func:`~salience.messages.openai.from_openai`,
    :func:`~salience.messages.anthropic.from_anthropic`,
    :func:`~salience.messages.langchain.from_langchain`, :meth:`salience.Compactor.compact`,
    the data set loaders) refuse it rather than compact it into a request the provider
    rejects, or repair it by guessing. The calls of the last calling message may still
    be waiting, with only some of their results after them: an agent waiting on its tools.

    >>> from salience.transcript import Transcript
    >>> call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    >>> asks = [{"role": "user", "content": "go"}, {"role": "assistant", "content": None, "tool_calls": [call]}]
    >>> len(Transcript.from_openai(asks).entries)  # waiting on c1: fine
    2
    >>> Transcript.from_openai([*asks, {"role": "user", "content": "well?"}], id="t")
    Traceback (most recent call last):
    ...
    salience.errors.TranscriptError: transcript 't', message 1 (id 'm1', assistant): tool call 'c1' is not \
answered before message 2 (id 'm2', user); providers refuse a history with an unanswered call before more \
turns: add its result right after the call, or drop the call (see README, "Bad input")
    """
    found = unanswered_before(transcript)
    if found is not None:
        raise _late_call(transcript, found)


def _late_call(transcript: Transcript, found: tuple[int, str, int]) -> TranscriptError:
    owner, cid, before = found
    return TranscriptError(
        f"transcript {transcript.id!r}, {_where(transcript, owner)}: tool call {cid!r} is not answered before "
        f"{_where(transcript, before)}; providers refuse a history with an unanswered call before more turns: "
        'add its result right after the call, or drop the call (see README, "Bad input")'
    )


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------


def pending_calls(messages: Sequence[Mapping[str, Any]], *, format: str = "openai") -> list[str]:
    """Ids of the calls a trailing assistant message leaves unanswered (what ``allow_pending`` allows).

    ``format``: ``"openai"`` or ``"anthropic"``.

    >>> call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    >>> pending_calls([{"role": "user", "content": "go"}, {"role": "assistant", "tool_calls": [call]}])
    ['c1']
    """
    if format not in ("openai", "anthropic"):
        raise ParameterError(f"format must be 'openai' or 'anthropic' (got {_got(format)})")
    if not _is_list(messages) or not messages:
        return []
    if format == "anthropic":
        k = len(messages) - 1
        answered_ids: set[Any] = set()
        last = messages[k]
        blocks = last.get("content") if isinstance(last, Mapping) else None
        if (isinstance(last, Mapping) and last.get("role") == "user" and _is_list(blocks) and blocks
                and all(isinstance(b, Mapping) and b.get("type") == "tool_result" for b in blocks)):
            answered_ids = {b.get("tool_use_id") for b in blocks}
            k -= 1
        if k < 0 or not isinstance(messages[k], Mapping) or messages[k].get("role") != "assistant":
            return []
        content = messages[k].get("content")
        if not _is_list(content):
            return []
        return [b["id"] for b in content if isinstance(b, Mapping) and b.get("type") == "tool_use"
                and isinstance(b.get("id"), str) and b["id"] not in answered_ids]
    k = len(messages) - 1
    answered: set[Any] = set()
    while k >= 0 and isinstance(messages[k], Mapping) and messages[k].get("role") == "tool":
        answered.add(messages[k].get("tool_call_id"))
        k -= 1
    if k < 0 or not isinstance(messages[k], Mapping) or messages[k].get("role") != "assistant":
        return []
    calls = messages[k].get("tool_calls")
    if not _is_list(calls):
        return []
    return [c["id"] for c in calls if isinstance(c, Mapping) and isinstance(c.get("id"), str)
            and c["id"] not in answered]


def checked_transcript(
    entries: Sequence[Entry],
    *,
    id: str,
    size: int,
    limits: Limits | None = None,
    domain: str | None = None,
    queries: Sequence[Query] = (),
) -> Transcript:
    """The transcript the message readers return for ``entries``, read from messages of
    about ``size`` bytes of JSON: refused past ``limits.max_bytes``
    (:func:`salience.limits.check_size`) and where a provider would refuse its tool
    calls (:func:`require_answered`). One rule for every reader."""
    check_size(size, where=f"transcript {id!r}", limits=limits, unit="bytes of JSON (about)")
    transcript = Transcript(id=id, entries=tuple(entries), domain=domain, queries=tuple(queries))
    require_answered(transcript)
    return transcript


class Checked:
    """A transcript :func:`checked_growing` returned, with what validating it left behind
    (:class:`~salience.transcript.Growth`, the calls still waiting), so that one that extends
    it is checked for its new entries only. The state advances when it is extended: use
    each at most once."""

    __slots__ = ("growth", "open_calls", "transcript")

    def __init__(self, transcript: Transcript, growth: Growth, open_calls: dict[str, int]) -> None:
        self.transcript = transcript
        self.growth = growth
        self.open_calls = open_calls


def checked_growing(entries: Sequence[Entry], *, id: str, size: int, last: Checked | None = None) -> Checked:
    """:func:`checked_transcript` of ``entries`` (no domain, no queries, the default limits),
    checked for the entries after ``last``'s alone when ``entries`` extends ``last``'s transcript
    (the same entry objects first, the same id): the same transcript and the same errors as
    a check of them all. ``last`` may not be used again (its state has advanced)."""
    check_size(size, where=f"transcript {id!r}", limits=None, unit="bytes of JSON (about)")
    base = last.transcript if last is not None else None
    m = len(base.entries) if base is not None else 0
    if base is not None and last is not None and base.id == id and m <= len(entries) \
            and all(map(operator.is_, base.entries, entries[:m])):
        growth, open_calls = last.growth, last.open_calls
    else:
        base, m, growth, open_calls = Transcript(id=id), 0, Growth(), {}
    transcript = base.extended(entries[m:], growth)
    found = unanswered_before(transcript, start=m, open_calls=open_calls)
    if found is not None:
        raise _late_call(transcript, found)
    return Checked(transcript, growth, open_calls)
