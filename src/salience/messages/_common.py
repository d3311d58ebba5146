"""What the OpenAI and Anthropic converters share, so that neither imports the other.

* the :attr:`Entry.meta <salience.transcript.Entry.meta>` keys under which each
  reader keeps its copy of the source message (each writer looks at the other's
  copy for parts it can carry over, images say);
* the error helpers their messages are built with;
* :func:`copy_json`, the deep copy of a message they keep and give out.
"""

from __future__ import annotations

import copy
from functools import partial
from typing import Any

from salience.errors import TranscriptError, describe

__all__ = ["ANTHROPIC_KEY", "LANGCHAIN_KEY", "OPENAI_KEY", "copy_by_plan", "copy_json", "copy_plan", "fail", "short"]

#: ``Entry.meta`` key of an entry's source OpenAI message (``salience.messages.openai.KEY``).
OPENAI_KEY = "_openai"
#: ``Entry.meta`` key of an entry's source Anthropic message (``salience.messages.anthropic.KEY``).
ANTHROPIC_KEY = "_anthropic"
#: ``Entry.meta`` key of an entry's source LangChain message (``salience.messages.langchain.KEY``).
LANGCHAIN_KEY = "_langchain"

#: A value as error messages show it (``3 that is a int``), ``None`` without its type.
short = partial(describe, none_typed=False)


def fail(where: str, field: str, expected: str, got: object) -> TranscriptError:
    """``<where>: field '<field>' must be <expected> (got <got>)``."""
    return TranscriptError(f"{where}: field {field!r} must be {expected} (got {short(got)})")


_ATOMS = (str, int, float, bool, type(None))


def copy_json(value: Any) -> Any:
    """A deep copy of JSON-like ``value`` (dicts, lists, atoms), faster than ``copy.deepcopy``;
    anything else inside is ``copy.deepcopy``'d. Shared sub-objects become separate copies and a
    cycle is not detected: the readers bound a message's depth first (:mod:`salience.limits`).

    >>> m = {"role": "user", "content": [{"type": "text", "text": "hi"}]}
    >>> c = copy_json(m)
    >>> c == m, c["content"][0] is m["content"][0]
    (True, False)
    """
    kind = type(value)
    if kind is dict:
        return {k: v if type(v) in _ATOMS else copy_json(v) for k, v in value.items()}
    if kind is list:
        return [v if type(v) in _ATOMS else copy_json(v) for v in value]
    if kind in _ATOMS:
        return value
    return copy.deepcopy(value)


#: How :func:`copy_by_plan` copies a value: ``None`` (an atom: shared), ``(0, ((key, plan), ...))``
#: (a dict: copied, then the keys listed, those holding more than an atom, copied by their
#: plans), ``(1, (plan, ...))`` (a list, item by item) or ``(2, None)`` (``copy.deepcopy``).
CopyPlan = tuple[int, Any] | None


def copy_plan(value: Any) -> CopyPlan:
    """The plan by which :func:`copy_by_plan` makes :func:`copy_json`'s copy of ``value``, for a
    value that will not change (a cached rendering): the walk over its atoms done once."""
    kind = type(value)
    if kind in _ATOMS:
        return None
    if kind is dict:
        return 0, tuple((k, p) for k, v in value.items() if (p := copy_plan(v)) is not None)
    if kind is list:
        return 1, tuple(copy_plan(v) for v in value)
    return 2, None


def copy_by_plan(value: Any, plan: CopyPlan) -> Any:
    """:func:`copy_json` of ``value``, by its :func:`copy_plan` (the same copy, for less work).

    >>> m = {"role": "assistant", "tool_calls": [{"id": "c1", "function": {"name": "f"}}]}
    >>> c = copy_by_plan(m, copy_plan(m))
    >>> c == m == copy_json(m), c["tool_calls"][0]["function"] is m["tool_calls"][0]["function"]
    (True, False)
    """
    if plan is None:
        return value
    kind, sub = plan
    if kind == 0:
        out = value.copy()
        for k, p in sub:
            out[k] = copy_by_plan(value[k], p)
        return out
    if kind == 1:
        return [v if p is None else copy_by_plan(v, p) for v, p in zip(value, sub)]
    return copy.deepcopy(value)
