"""How deep, how large and how long an input salience reads may be.

Every reader bounds what it is given, so that no input (a file, a JSON line, a
request body, a message list in memory) can exhaust the stack, the memory or the
time of the process reading it:

* ``max_depth`` (default :data:`MAX_DEPTH`, 64): how deeply JSON values may nest,
  counted from the document, the message list or the message checked (``[]`` is 1
  deep, ``[{"a": []}]`` 3). Real transcripts nest 4 to 9 deep (a tool_use
  ``input`` adds its own levels); 5,000 nested brackets would otherwise end in a
  ``RecursionError`` in the JSON parser or in ``copy.deepcopy``;
* ``max_bytes`` (default :data:`MAX_BYTES`, 64 MiB): the size of one document: a
  JSON file, one line of a JSON-lines file (one transcript), or a message list
  given in memory (there measured as the characters of its strings and keys, plus
  8 for every other value: about the size of its JSON);
* ``max_entries`` (default :data:`MAX_ENTRIES`, 100,000): the messages of one
  message list or transcript.

Going past a limit is a :class:`~salience.errors.LimitError` (a
:class:`~salience.errors.TranscriptError`, so the command line exits 2) naming
where, the limit, its value and what came. The readers that apply them:
:func:`salience.messages.openai.from_openai`, :func:`~salience.messages.anthropic.from_anthropic`,
:func:`~salience.messages.langchain.from_langchain` (and the one-message readers
they use), :meth:`salience.Compactor.compact` through
:mod:`salience.messages.dispatch`, :func:`salience.load_transcripts` with every
data set loader, and the files ``salience compact`` and ``salience inspect`` read.

The limits in force are :func:`current`: :data:`DEFAULT_LIMITS` unless a
:func:`limited` block says otherwise (a context variable, so each thread and each
asyncio task sees its own); the readers also take ``limits=`` directly. On the
command line, every command that reads input takes ``--max-depth N``, ``--max-bytes
N`` (a number of bytes, or with ``KiB``, ``MiB``, ``GiB``, ``KB``, ``MB``, ``GB``) and
``--max-entries N`` (:func:`from_options`; a bad value exits 2), and runs inside
:func:`limited` with them; ``salience proxy`` applies them to every request body.

>>> current().max_depth
64
>>> with limited(max_depth=3):
...     check_value([[[["deep"]]]], where="request")
Traceback (most recent call last):
...
salience.errors.LimitError: request: nested 4 deep at [0][0][0], deeper than the limit max_depth=3 \
(salience.limits)
>>> check_value({"role": "user", "content": "hi"}, where="message 0")
29
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

from salience.errors import FormatError, LimitError, ParameterError, ParameterTypeError, describe

__all__ = [
    "DEFAULT_LIMITS",
    "MAX_BYTES",
    "MAX_DEPTH",
    "MAX_ENTRIES",
    "Limits",
    "check_count",
    "check_size",
    "check_value",
    "current",
    "deeper_than",
    "from_options",
    "limited",
    "loads",
    "parse_limit",
]

#: How deeply JSON values may nest (see the module doc).
MAX_DEPTH = 64
#: The largest document, in bytes (64 MiB).
MAX_BYTES = 64 * 1024 * 1024
#: The most messages in one message list or transcript.
MAX_ENTRIES = 100_000

_HINT = "salience.limits"


@dataclass(frozen=True, slots=True)
class Limits:
    """The three limits (see the module doc); each a positive int.

    >>> Limits(max_depth=0)
    Traceback (most recent call last):
    ...
    salience.errors.ParameterError: Limits: max_depth must be a positive int (got 0 that is a int)
    """

    max_depth: int = MAX_DEPTH
    max_bytes: int = MAX_BYTES
    max_entries: int = MAX_ENTRIES

    def __post_init__(self) -> None:
        for name in ("max_depth", "max_bytes", "max_entries"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ParameterTypeError(f"Limits: {name} must be a positive int (got {describe(value)})")
            if value < 1:
                raise ParameterError(f"Limits: {name} must be a positive int (got {describe(value)})")


#: The limits when nothing says otherwise.
DEFAULT_LIMITS = Limits()

_current: contextvars.ContextVar[Limits] = contextvars.ContextVar("salience_limits", default=DEFAULT_LIMITS)


def current() -> Limits:
    """The limits in force here (:data:`DEFAULT_LIMITS` outside any :func:`limited` block)."""
    return _current.get()


@contextlib.contextmanager
def limited(limits: Limits | None = None, **changes: int) -> Iterator[Limits]:
    """Apply ``limits`` (or the current ones with ``changes``) to every reader inside the block.

    >>> with limited(max_entries=10) as inner:
    ...     inner.max_entries, current().max_entries
    (10, 10)
    >>> current().max_entries
    100000
    """
    chosen = replace(limits or current(), **changes) if changes else (limits or current())
    token = _current.set(chosen)
    try:
        yield chosen
    finally:
        _current.reset(token)


_UNITS = {"": 1, "b": 1, "kb": 1000, "mb": 1000**2, "gb": 1000**3, "kib": 1024, "mib": 1024**2, "gib": 1024**3}
_AMOUNT = re.compile(r"^\s*(\d+)\s*([a-z]*)\s*$", re.IGNORECASE)


def parse_limit(name: str, text: Any, *, label: str | None = None) -> int:
    """The value of limit ``name`` given as ``text`` (``"128"``; ``max_bytes`` also takes
    ``"256MiB"``, ``"1GB"``...); ``label`` (say ``--max-bytes``) names it in the error.

    >>> parse_limit("max_bytes", "256MiB"), parse_limit("max_depth", "128")
    (268435456, 128)
    >>> parse_limit("max_entries", "lots", label="--max-entries")
    Traceback (most recent call last):
    ...
    salience.errors.ParameterError: --max-entries must be a positive whole number (got 'lots')
    """
    if name not in ("max_depth", "max_bytes", "max_entries"):
        raise ParameterError(f"no limit named {describe(name)} (known: max_depth, max_bytes, max_entries)")
    label = label or name
    units = name == "max_bytes"
    expected = ("a positive whole number of bytes, or one with KiB, MiB, GiB, KB, MB or GB" if units
                else "a positive whole number")
    match = _AMOUNT.match(text) if isinstance(text, str) else None
    unit = match.group(2).lower() if match else ""
    if match is None or unit not in (_UNITS if units else ("",)):
        raise ParameterError(f"{label} must be {expected} (got {describe(text)})")
    value = int(match.group(1)) * _UNITS[unit]
    if value < 1:
        raise ParameterError(f"{label} must be {expected} (got {describe(text)})")
    return value


def from_options(*, max_depth: Any = None, max_bytes: Any = None, max_entries: Any = None,
                 base: Limits | None = None) -> Limits:
    """``base`` (default: :func:`current`) with the limits given as text replaced
    (:func:`parse_limit`; ``None`` leaves one as it is), as the command line's
    ``--max-depth``, ``--max-bytes`` and ``--max-entries`` give them.

    >>> from_options(max_bytes="1KiB", max_depth="8")
    Limits(max_depth=8, max_bytes=1024, max_entries=100000)
    """
    given = {"max_depth": max_depth, "max_bytes": max_bytes, "max_entries": max_entries}
    changes = {name: parse_limit(name, text, label="--" + name.replace("_", "-"))
               for name, text in given.items() if text is not None}
    chosen = base or current()
    return replace(chosen, **changes) if changes else chosen


def _resolve(limits: Limits | None) -> Limits:
    if limits is None:
        return _current.get()
    if not isinstance(limits, Limits):
        raise ParameterTypeError(f"limits must be a salience.limits.Limits or None (got {describe(limits)})")
    return limits


def check_count(count: int, *, where: str, what: str = "messages", limits: Limits | None = None) -> None:
    """A :class:`LimitError` if ``count`` ``what`` are more than ``max_entries``."""
    maximum = _resolve(limits).max_entries
    if count > maximum:
        raise LimitError(f"{where}: {count:,} {what}, more than the limit max_entries={maximum:,} ({_HINT})",
                         limit="max_entries", maximum=maximum, value=count)


def check_size(size: int, *, where: str, limits: Limits | None = None, unit: str = "bytes") -> None:
    """A :class:`LimitError` if ``size`` is more than ``max_bytes``."""
    maximum = _resolve(limits).max_bytes
    if size > maximum:
        raise LimitError(f"{where}: {size:,} {unit}, more than the limit max_bytes={maximum:,} ({_HINT})",
                         limit="max_bytes", maximum=maximum, value=size)


def _path(link: tuple[Any, ...] | None) -> str:
    keys: list[Any] = []
    while link is not None:
        link, key = link
        keys.append(key)
    keys.reverse()
    shown = keys if len(keys) <= 8 else [*keys[:4], "...", *keys[-3:]]
    out = []
    for key in shown:
        if key == "...":
            out.append("...")
        elif isinstance(key, int):
            out.append(f"[{key}]")
        else:
            out.append(f"[{describe(key, typed=False)}]")
    return "".join(out) or "the top"


def check_value(value: Any, *, where: str, limits: Limits | None = None, depth: int = 0) -> int:
    """The size of ``value`` (about its JSON length) after checking it against the limits.

    Walks mappings, lists and tuples without recursion, so that it is safe on input of
    any depth, and stops at the first container deeper than ``max_depth`` (a cycle
    ends there too), or as soon as the size passes ``max_bytes``; ``depth`` is the
    depth of the container holding ``value``. Strings count their length, other
    values 8. Never modifies ``value``.
    """
    chosen = _resolve(limits)
    max_depth, max_bytes = chosen.max_depth, chosen.max_bytes
    size = 0
    stack: list[tuple[Any, int, tuple[Any, ...] | None]] = [(value, depth + 1, None)]
    pop, push = stack.pop, stack.append
    while stack:
        item, level, link = pop()
        kind = type(item)
        if kind is str:
            size += len(item) + 2
        elif kind is dict or kind is list or kind is tuple or isinstance(item, (Mapping, list, tuple)):
            if level > max_depth:
                raise LimitError(
                    f"{where}: nested {level} deep at {_path(link)}, deeper than the limit max_depth={max_depth} "
                    f"({_HINT})", limit="max_depth", maximum=max_depth, value=level)
            size += 2
            if isinstance(item, Mapping):
                for key, child in item.items():
                    size += len(key) + 3 if type(key) is str else 8
                    if type(child) is str:
                        size += len(child) + 2
                    else:
                        push((child, level + 1, (link, key)))
            else:
                for index, child in enumerate(item):
                    if type(child) is str:
                        size += len(child) + 3
                    else:
                        push((child, level + 1, (link, index)))
            if size > max_bytes:
                break
        else:
            size += 8
    check_size(size, where=where, limits=chosen, unit="bytes of JSON (about)")
    return size


# -- JSON text ---------------------------------------------------------------------------

_BRACKETS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)


def _line_column(text: str, pos: int) -> tuple[int, int]:
    line = text.count("\n", 0, pos) + 1
    return line, pos - (text.rfind("\n", 0, pos) + 1) + 1


def _too_deep_at(text: str, max_depth: int) -> tuple[int, int] | None:
    """(position, depth) of the first bracket of ``text`` nested deeper than ``max_depth``."""
    level = 0
    for match in _BRACKETS.finditer(text):
        token = match.group()
        if token in "[{":
            level += 1
            if level > max_depth:
                return match.start(), level
        elif token in "]}":
            level -= 1
    return None


class _NotJSON(Exception):
    def __init__(self, constant: str) -> None:
        super().__init__(constant)
        self.constant = constant


def _refuse_constant(constant: str) -> Any:
    raise _NotJSON(constant)


def _constant_at(text: str, constant: str) -> int:
    """Where ``constant`` (NaN, Infinity, -Infinity) first stands outside a string in ``text``."""
    bare = re.compile(r'"(?:[^"\\]|\\.)*"|' + re.escape(constant), re.DOTALL)
    for match in bare.finditer(text):
        if match.group() == constant:
            return match.start()
    return 0


def _non_finite_path(text: str) -> str:
    """Where (``at [messages][2][label]``) the first NaN or infinity of ``text`` stands, as
    Python's parser reads it; empty when that cannot be told."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return ""
    stack: list[tuple[Any, tuple[Any, ...] | None]] = [(value, None)]
    while stack:
        item, link = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return f", at {_path(link)}" if link is not None else ""
        if isinstance(item, dict):
            stack.extend((v, (link, k)) for k, v in reversed(list(item.items())))
        elif isinstance(item, list):
            stack.extend((v, (link, i)) for i, v in reversed(list(enumerate(item))))
    return ""


def loads(text: str, *, where: str, limits: Limits | None = None, strict: bool = False, lines: bool = True) -> Any:
    """The JSON value in ``text``, within the limits.

    A :class:`~salience.errors.FormatError` ``<where>: not valid JSON: line L, column C:
    <reason>`` for text that is not JSON (with ``strict``, ``NaN`` and ``Infinity`` too:
    JSON has neither, though Python's parser reads them); a
    :class:`~salience.errors.LimitError` for text larger than ``max_bytes`` or nested
    deeper than ``max_depth``. ``lines=False`` (for text that is one line of a file
    ``where`` names already) gives the column alone.

    >>> loads('[{"role": "user",}]', where="f.json")
    Traceback (most recent call last):
    ...
    salience.errors.FormatError: f.json: not valid JSON: line 1, column 18: Expecting property name enclosed in \
double quotes
    """
    chosen = _resolve(limits)
    check_size(len(text), where=where, limits=chosen, unit="characters")

    def at(pos: int) -> str:
        line, column = _line_column(text, pos)
        return f"line {line}, column {column}" if lines else f"column {column}"

    try:
        if strict:
            value = json.loads(text, parse_constant=_refuse_constant)
        else:
            value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise FormatError(f"{where}: not valid JSON: {at(exc.pos)}: {exc.msg}") from None
    except _NotJSON as exc:
        raise FormatError(f"{where}: not valid JSON: {at(_constant_at(text, exc.constant))}: {exc.constant} is not "
                          f"a JSON value (JSON has no NaN or Infinity){_non_finite_path(text)}") from None
    except RecursionError:
        found = _too_deep_at(text, chosen.max_depth)
        pos, level = found if found is not None else (0, chosen.max_depth + 1)
        raise LimitError(f"{where}: {at(pos)}: nested {level} deep, deeper than the limit "
                         f"max_depth={chosen.max_depth} ({_HINT})", limit="max_depth", maximum=chosen.max_depth,
                         value=level) from None
    found = _too_deep_at(text, chosen.max_depth) if deeper_than(value, chosen.max_depth) else None
    if found is not None:
        raise LimitError(f"{where}: {at(found[0])}: nested {found[1]} deep, deeper than the limit "
                         f"max_depth={chosen.max_depth} ({_HINT})", limit="max_depth", maximum=chosen.max_depth,
                         value=found[1])
    return value


def deeper_than(value: Any, max_depth: int) -> bool:
    """Whether parsed JSON ``value`` (dicts and lists) nests deeper than ``max_depth`` (no recursion)."""
    stack = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            if level > max_depth:
                return True
            stack.extend((v, level + 1) for v in item.values() if isinstance(v, (dict, list)))
        elif isinstance(item, list):
            if level > max_depth:
                return True
            stack.extend((v, level + 1) for v in item if isinstance(v, (dict, list)))
    return False
