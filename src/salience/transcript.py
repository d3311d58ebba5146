"""The data model: entries of an agent's context, queries about them, transcripts.

Everything here is a frozen, slotted dataclass, validated on construction. A bad
value raises :class:`~salience.errors.TranscriptError` whose message names the
transcript, the entry (index and id), the field, what was expected and what came.

What a :class:`Transcript` accepts, and what it refuses:

* ``content`` must be a ``str`` (``""`` is fine); the format readers turn
  ``None`` and lists of parts into text and keep the original for rendering.
* a ``tool`` entry whose ``tool_call_id`` names no call of an *earlier*
  assistant entry is refused (a result without its call cannot be sent to any
  provider), and so is a call answered twice;
* a call id may be used again once its call has been answered (tau-bench's logs
  do this); a result answers the latest earlier call with its id
  (:meth:`Transcript.parents`); reusing the id of a call still waiting for its
  result is refused;
* a call that no entry answers is accepted (an agent may still be waiting on it):
  :meth:`Transcript.unanswered_calls` lists them;
* a ``tool`` entry with ``tool_call_id=None`` is a free-standing observation
  (legacy ``function`` messages, observations some agents log as tool output);
* text is stored as given: lone surrogates or control characters are neither
  refused nor cleaned, and there is no size limit.

This module is at the bottom of the imports: it imports nothing of salience but
:mod:`salience.errors`. The provider formats live in :mod:`salience.messages`,
above it; :meth:`Transcript.from_openai`, :meth:`~Transcript.to_openai`,
:meth:`~Transcript.from_anthropic`, :meth:`~Transcript.to_anthropic` and
:meth:`~Transcript.anthropic_system` call the converters those modules register
here when imported (:func:`register_converter`; ``import salience`` imports them).

>>> t = Transcript.from_openai([
...     {"role": "system", "content": "You are terse."},
...     {"role": "user", "content": "Hi"},
... ], id="demo")
>>> [e.id for e in t.entries]
['m0', 'm1']
>>> t.to_openai()
[{'role': 'system', 'content': 'You are terse.'}, {'role': 'user', 'content': 'Hi'}]
>>> Entry(id="x", role="robot", content="beep")
Traceback (most recent call last):
...
salience.errors.TranscriptError: entry 'x': field 'role' must be one of 'system', 'user', 'assistant', \
'tool' (got 'robot')
"""

from __future__ import annotations

import enum
import json
import math
import numbers
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

from salience.errors import ParameterKeyError, SalienceError, TranscriptError, describe

__all__ = ["ACTION_BLOCK", "Entry", "Growth", "Query", "Role", "ToolCall", "Transcript"]

#: An action written in an assistant reply's text: a fenced code block, ``<execute>`` or
#: ``<solution>`` (the agents that run code from the reply, MINT- and SWE-agent-style).
ACTION_BLOCK = re.compile(r"```|<execute>|<solution>")


class Role(enum.StrEnum):
    """Who wrote an entry (``Role.USER == "user"``)."""

    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


_ROLES = tuple(r.value for r in Role)


_got = describe


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One call an assistant entry makes: ``id``, tool ``name``, JSON ``arguments``."""

    id: str
    name: str
    arguments: str = "{}"

    def __post_init__(self) -> None:
        where = f"tool call {self.id!r}" if isinstance(self.id, str) and self.id else "tool call"
        if not isinstance(self.id, str) or not self.id:
            raise TranscriptError(f"{where}: field 'id' must be a non-empty str (got {_got(self.id)})")
        for fname in ("name", "arguments"):
            value = getattr(self, fname)
            if not isinstance(value, str):
                raise TranscriptError(f"{where}: field {fname!r} must be a str (got {_got(value)})")

    def arguments_object(self) -> dict[str, Any]:
        """The arguments as a JSON object, for formats that want one (Anthropic's
        ``input``, LangChain's ``args``): ``{}`` when empty; text that is not a JSON
        object, as ``{"_raw": arguments}``.

        >>> ToolCall("c1", "f", '{"a": 1}').arguments_object(), ToolCall("c2", "f", "[1]").arguments_object()
        ({'a': 1}, {'_raw': '[1]'})
        """
        if not self.arguments.strip():
            return {}
        try:
            value = json.loads(self.arguments)
        except json.JSONDecodeError:
            value = None
        return value if isinstance(value, dict) else {"_raw": self.arguments}


@dataclass(frozen=True, slots=True, eq=True)
class Entry:
    """One entry of an agent's context.

    ``role`` is one of ``system``, ``user``, ``assistant``, ``tool``. Assistant
    entries may carry ``tool_calls``; tool entries carry the ``tool_call_id`` they
    answer (or ``None`` for a free-standing observation) and the tool ``name``.
    ``label`` is the probability-like target in [0, 1] (1 = needed later), if known.
    ``meta`` is free-form; keys starting with ``_`` are reserved for format
    round-trip data.
    """

    id: str
    role: str
    content: str = ""
    name: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    label: float | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        where = f"entry {self.id!r}"
        if not isinstance(self.id, str) or not self.id:
            raise TranscriptError(f"entry: field 'id' must be a non-empty str (got {_got(self.id)})")
        role = self.role.value if isinstance(self.role, Role) else self.role
        if role not in _ROLES:
            allowed = ", ".join(repr(r) for r in _ROLES)
            raise TranscriptError(f"{where}: field 'role' must be one of {allowed} (got {_got(self.role)})")
        object.__setattr__(self, "role", role)
        if not isinstance(self.content, str):
            raise TranscriptError(f"{where}: field 'content' must be a str (got {_got(self.content)})")
        if self.name is not None and not isinstance(self.name, str):
            raise TranscriptError(f"{where}: field 'name' must be a str or None (got {_got(self.name)})")
        calls = self.tool_calls
        if isinstance(calls, list):
            calls = tuple(calls)
            object.__setattr__(self, "tool_calls", calls)
        if not isinstance(calls, tuple) or not all(isinstance(c, ToolCall) for c in calls):
            raise TranscriptError(f"{where}: field 'tool_calls' must be a tuple of ToolCall (got {_got(calls)})")
        if calls and role != "assistant":
            raise TranscriptError(
                f"{where}: field 'tool_calls' is only allowed on assistant entries (got role {role!r})"
            )
        if self.tool_call_id is not None:
            if not isinstance(self.tool_call_id, str) or not self.tool_call_id:
                raise TranscriptError(
                    f"{where}: field 'tool_call_id' must be a non-empty str or None (got {_got(self.tool_call_id)})"
                )
            if role != "tool":
                raise TranscriptError(
                    f"{where}: field 'tool_call_id' is only allowed on tool entries (got role {role!r})"
                )
        if self.label is not None:
            label = self.label
            if isinstance(label, bool) or not isinstance(label, numbers.Real) or not (
                math.isfinite(label) and 0.0 <= label <= 1.0
            ):
                raise TranscriptError(f"{where}: field 'label' must be a number in [0, 1] or None (got {_got(label)})")
            object.__setattr__(self, "label", float(label))
        if not isinstance(self.meta, Mapping):
            raise TranscriptError(f"{where}: field 'meta' must be a mapping (got {_got(self.meta)})")
        object.__setattr__(self, "meta", dict(self.meta))

    def __hash__(self) -> int:
        return hash((self.id, self.role, self.content, self.tool_call_id, self.tool_calls))

    @property
    def is_tool_call(self) -> bool:
        """True for an assistant entry that calls tools."""
        return bool(self.tool_calls)

    @property
    def text(self) -> str:
        """Everything a reader of this entry sees: content, tool name, call arguments."""
        parts = [self.content]
        for call in self.tool_calls:
            parts.append(f"{call.name}({call.arguments})")
        return "\n".join(p for p in parts if p)

    @property
    def public_meta(self) -> dict[str, Any]:
        """``meta`` without the reserved ``_``-prefixed round-trip keys."""
        return {k: v for k, v in self.meta.items() if not k.startswith("_")}

    def replace(self, **changes: Any) -> Entry:
        """A copy with ``changes`` applied (validated again)."""
        return replace(self, **changes)

    def with_content(self, content: str) -> Entry:
        """``self.replace(content=content)`` for a ``str`` ``content``, without validating
        again the fields that this entry's own validation already normalised (what a
        compaction's trimmed and stubbed forms are built with, a thousand per first call).

        >>> e = Entry(id="m1", role="tool", content="long", name="f", tool_call_id="c1", meta={"k": 1})
        >>> e.with_content("short") == e.replace(content="short")
        True
        """
        if not isinstance(content, str):
            return replace(self, content=content)  # raises the validation's error
        new = object.__new__(Entry)
        setattr_ = object.__setattr__
        for name in _ENTRY_FIELDS:
            setattr_(new, name, getattr(self, name))
        setattr_(new, "content", content)
        setattr_(new, "meta", dict(self.meta))  # as __post_init__ does: never shared with the source
        return new


#: Entry's fields, in order (:meth:`Entry.with_content` copies them).
_ENTRY_FIELDS = tuple(f.name for f in fields(Entry))


@dataclass(frozen=True, slots=True)
class Query:
    """A question or task about a transcript.

    ``evidence`` lists the ids of the entries the answer needs (a list is turned
    into a tuple, a single ``str`` into a 1-tuple); ``at`` is how many entries
    existed when it was asked (``None`` = after all of them).

    >>> Query("Where to?", evidence=["m3"]).evidence
    ('m3',)
    """

    text: str
    evidence: tuple[str, ...] = ()
    at: int | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.text, str):
            raise TranscriptError(f"query: field 'text' must be a str (got {_got(self.text)})")
        ev = self.evidence
        if isinstance(ev, (list, str)):
            ev = (ev,) if isinstance(ev, str) else tuple(ev)
            object.__setattr__(self, "evidence", ev)
        if not isinstance(ev, tuple) or not all(isinstance(x, str) for x in ev):
            raise TranscriptError(
                f"query {self.text[:40]!r}: field 'evidence' must be a sequence of entry ids (got {_got(ev)})"
            )
        if self.at is not None and (isinstance(self.at, bool) or not isinstance(self.at, int) or self.at < 0):
            raise TranscriptError(
                f"query {self.text[:40]!r}: field 'at' must be a non-negative int or None (got {_got(self.at)})"
            )
        if not isinstance(self.meta, Mapping):
            raise TranscriptError(f"query {self.text[:40]!r}: field 'meta' must be a mapping (got {_got(self.meta)})")
        object.__setattr__(self, "meta", dict(self.meta))

    def __hash__(self) -> int:
        return hash((self.text, self.evidence, self.at))


class Growth:
    """What validating a transcript's entries leaves behind, so that a transcript that
    extends them (the same entries first) is validated, and its parents found, for its
    new entries only: ids seen (``seen``: id -> index), calls waiting for their results
    (``open_calls``), calls answered (``answered``), and each entry's parent
    (``parents``, see :meth:`Transcript.parents`).

    ``Growth().check(t.id, t.entries)`` is the state of transcript ``t``;
    :meth:`Transcript.extended` advances it. :meth:`check` mutates the state: after
    an error, throw it away.

    >>> from salience.transcript import Entry, Growth, Transcript
    >>> t = Transcript(id="t", entries=(Entry(id="u", role="user", content="hi"),))
    >>> growth = Growth().check(t.id, t.entries)
    >>> longer = t.extended([Entry(id="a", role="assistant", content="hello")], growth)
    >>> [e.id for e in longer.entries], growth.parents
    (['u', 'a'], [-1, -1])
    """

    __slots__ = ("answered", "open_calls", "parents", "seen")

    def __init__(self) -> None:
        self.seen: dict[str, int] = {}
        self.open_calls: dict[str, int] = {}  # call id -> entry that made it, not answered yet
        self.answered: dict[str, int] = {}  # call id -> entry that last answered it
        self.parents: list[int] = []

    def check(self, tid: str, entries: Sequence[Any], start: int = 0) -> Growth:
        """Validate ``entries[start:]``, the entries before them having been checked by this state."""
        seen, open_calls, answered, parents = self.seen, self.open_calls, self.answered, self.parents
        for i in range(start, len(entries)):
            entry = entries[i]
            if not isinstance(entry, Entry):
                raise TranscriptError(f"transcript {tid!r}, entry {i}: expected an Entry (got {_got(entry)})")
            if entry.id in seen:
                raise TranscriptError(
                    f"transcript {tid!r}, entry {i} (id {entry.id!r}): field 'id' must be unique "
                    f"(entry {seen[entry.id]} has the same id)"
                )
            seen[entry.id] = i
            parent = -1
            if entry.tool_call_id is not None:
                if entry.tool_call_id in answered and entry.tool_call_id not in open_calls:
                    raise TranscriptError(
                        f"transcript {tid!r}, entry {i} (id {entry.id!r}): field 'tool_call_id' "
                        f"{entry.tool_call_id!r} is answered twice (entry {answered[entry.tool_call_id]} "
                        "answered it already)"
                    )
                if entry.tool_call_id not in open_calls:
                    later = next(
                        (j for j in range(i + 1, len(entries)) if isinstance(entries[j], Entry)
                         and any(c.id == entry.tool_call_id for c in entries[j].tool_calls)),
                        None,
                    )
                    why = "which no entry calls" if later is None else f"which only the later entry {later} calls"
                    raise TranscriptError(
                        f"transcript {tid!r}, entry {i} (id {entry.id!r}): field 'tool_call_id' "
                        f"must name a call made by an earlier assistant entry (got {entry.tool_call_id!r}, {why})"
                    )
                parent = open_calls.pop(entry.tool_call_id)
                answered[entry.tool_call_id] = i
            for call in entry.tool_calls:
                if call.id in open_calls:
                    raise TranscriptError(
                        f"transcript {tid!r}, entry {i} (id {entry.id!r}): field 'tool_calls' reuses the "
                        f"call id {call.id!r} of entry {open_calls[call.id]}, whose call is not answered yet"
                    )
                open_calls[call.id] = i
            parents.append(parent)
        return self


@dataclass(frozen=True, slots=True)
class Transcript:
    """An ordered list of entries, with optional domain and queries.

    Validation on construction: entry ids are unique; a tool entry's
    ``tool_call_id`` answers a call made by an earlier assistant entry and not
    answered yet (a call id may be used again once its call is answered, as some
    agents' logs do: the result answers the latest such call); query evidence ids
    name entries of this transcript. A call that is never answered is allowed (an
    agent may be waiting on it); :meth:`unanswered_calls` lists them.
    """

    id: str
    entries: tuple[Entry, ...] = ()
    domain: str | None = None
    queries: tuple[Query, ...] = ()
    meta: Mapping[str, Any] = field(default_factory=dict)
    _parents: tuple[int, ...] = field(default=(), init=False, repr=False, compare=False)  # see parents()

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id:
            raise TranscriptError(f"transcript: field 'id' must be a non-empty str (got {_got(self.id)})")
        entries = self.entries
        if isinstance(entries, list):
            entries = tuple(entries)
            object.__setattr__(self, "entries", entries)
        if not isinstance(entries, tuple):
            raise TranscriptError(
                f"transcript {self.id!r}: field 'entries' must be a tuple or list of Entry (got {_got(entries)})"
            )
        queries = self.queries
        if not isinstance(queries, tuple):
            if isinstance(queries, (str, bytes, Mapping, Query)) or not isinstance(queries, Iterable):
                raise TranscriptError(
                    f"transcript {self.id!r}: field 'queries' must be a sequence of Query (got {_got(queries)})"
                )
            queries = tuple(queries)
            object.__setattr__(self, "queries", queries)
        if not isinstance(self.meta, Mapping):
            raise TranscriptError(f"transcript {self.id!r}: field 'meta' must be a mapping (got {_got(self.meta)})")
        if self.domain is not None and not isinstance(self.domain, str):
            raise TranscriptError(
                f"transcript {self.id!r}: field 'domain' must be a str or None (got {_got(self.domain)})"
            )
        growth = Growth().check(self.id, entries)
        object.__setattr__(self, "_parents", tuple(growth.parents))
        seen = growth.seen
        for q, query in enumerate(queries):
            if not isinstance(query, Query):
                raise TranscriptError(f"transcript {self.id!r}, query {q}: expected a Query (got {_got(query)})")
            missing = [e for e in query.evidence if e not in seen]
            if missing:
                raise TranscriptError(
                    f"transcript {self.id!r}, query {q}: field 'evidence' names entries that do not exist "
                    f"(got {missing[:5]!r})"
                )
            if query.at is not None and query.at > len(entries):
                raise TranscriptError(
                    f"transcript {self.id!r}, query {q}: field 'at' must be at most the number of "
                    f"entries, {len(entries)} (got {query.at})"
                )
        object.__setattr__(self, "meta", dict(self.meta))

    def __hash__(self) -> int:
        return hash((self.id, self.entries))

    def __len__(self) -> int:
        return len(self.entries)

    def extended(self, entries: Sequence[Entry], growth: Growth) -> Transcript:
        """This transcript with ``entries`` appended, validated for those only.

        ``growth`` must be the state that validated this transcript's entries
        (:class:`Growth`); it is advanced to the new transcript's (and left half
        advanced by an error). Queries are not carried over.
        """
        new = (*self.entries, *entries)
        growth.check(self.id, new, len(self.entries))
        out = object.__new__(Transcript)
        for name, value in (("id", self.id), ("entries", new), ("domain", self.domain), ("queries", ()),
                            ("meta", dict(self.meta)), ("_parents", tuple(growth.parents))):
            object.__setattr__(out, name, value)
        return out

    # -- navigation ---------------------------------------------------------
    def index(self, entry_id: str) -> int:
        """Position of the entry with ``entry_id``; ``ParameterKeyError`` (a ``KeyError``) naming it if absent."""
        for i, entry in enumerate(self.entries):
            if entry.id == entry_id:
                return i
        raise ParameterKeyError(f"transcript {self.id!r} has no entry {entry_id!r}")

    def call_owner(self) -> dict[str, int]:
        """Map each tool call id to the index of the assistant entry that made it.

        Call ids may be reused once answered (some agents' logs do); for a reused
        id this names the *last* entry that made it: use :meth:`parents` to pair
        each result with its own call.
        """
        return {c.id: i for i, e in enumerate(self.entries) for c in e.tool_calls}

    def parents(self) -> list[int]:
        """For each entry, the index of the call entry it answers, or -1.

        A result answers the latest earlier call with its id, so parents always
        come before their results, reused call ids included.

        >>> from salience.transcript import Entry, ToolCall, Transcript
        >>> call = lambda i: Entry(id=f"a{i}", role="assistant", tool_calls=(ToolCall("c", "f"),))
        >>> result = lambda i: Entry(id=f"r{i}", role="tool", content="ok", tool_call_id="c")
        >>> Transcript(id="t", entries=(call(0), result(0), call(1), result(1))).parents()
        [-1, 0, -1, 2]
        """
        return list(self._parents)  # found while the entries were validated (Growth)

    def acts(self) -> bool:
        """Whether an agent acts in this transcript: some entry makes a tool call, is a tool
        result, or is an assistant reply that acts in its text (:data:`ACTION_BLOCK`). A
        transcript that does not act is a conversation.

        >>> from salience.transcript import Entry, Transcript
        >>> chat = Transcript(id="t", entries=(Entry(id="u", role="user", content="hi"),))
        >>> chat.acts()
        False
        >>> chat.replace(entries=(*chat.entries, Entry(id="a", role="assistant", content="```\\nls\\n```"))).acts()
        True
        """
        return any(e.tool_calls or e.role == "tool" or (e.role == "assistant" and ACTION_BLOCK.search(e.content))
                   for e in self.entries)

    def unanswered_calls(self) -> list[str]:
        """Ids of tool calls that no later tool entry answers, in order."""
        open_calls: dict[str, None] = {}
        for entry in self.entries:
            if entry.tool_call_id is not None:
                open_calls.pop(entry.tool_call_id, None)
            for call in entry.tool_calls:
                open_calls[call.id] = None
        return list(open_calls)

    @property
    def labels(self) -> list[float | None]:
        return [e.label for e in self.entries]

    def replace(self, **changes: Any) -> Transcript:
        """A copy with ``changes`` applied (validated again)."""
        return replace(self, **changes)

    # -- formats -----------------------------------------------------------
    # The converters live in salience.messages, which imports this module; they
    # register themselves here (register_converter) so that imports run one way.
    @classmethod
    def from_openai(
        cls,
        messages: Sequence[Mapping[str, Any]],
        *,
        id: str = "transcript",
        domain: str | None = None,
        queries: Iterable[Query] = (),
    ) -> Transcript:
        """Build from OpenAI chat messages (see :mod:`salience.messages.openai`)."""
        built: Transcript = _converter("from_openai")(messages, id=id, domain=domain, queries=queries)
        return built

    def to_openai(self, *, with_ids: bool | None = None, with_labels: bool | None = None) -> list[dict[str, Any]]:
        """OpenAI chat messages; exact inverse of :meth:`from_openai`.

        ``with_ids`` / ``with_labels``: ``None`` writes salience's ``id`` / ``label``
        keys only where the source message had them; ``True`` always; ``False`` never.
        """
        messages: list[dict[str, Any]] = _converter("to_openai")(self, with_ids=with_ids, with_labels=with_labels)
        return messages

    @classmethod
    def from_anthropic(
        cls,
        messages: Sequence[Mapping[str, Any]],
        *,
        system: str | Sequence[Mapping[str, Any]] | None = None,
        id: str = "transcript",
        domain: str | None = None,
        queries: Iterable[Query] = (),
    ) -> Transcript:
        """Build from Anthropic messages, the system prompt given separately.

        See :mod:`salience.messages.anthropic`.
        """
        built: Transcript = _converter("from_anthropic")(
            messages, system=system, id=id, domain=domain, queries=queries
        )
        return built

    def to_anthropic(self) -> list[dict[str, Any]]:
        """Anthropic messages (the system prompt is :meth:`anthropic_system`)."""
        messages: list[dict[str, Any]] = _converter("to_anthropic")(self)
        return messages

    def anthropic_system(self) -> str | list[dict[str, Any]] | None:
        """The system prompt in the form Anthropic's API takes it, or None."""
        system: str | list[dict[str, Any]] | None = _converter("anthropic_system")(self)
        return system


# -- converters ---------------------------------------------------------------

#: The :class:`Transcript` methods that convert to and from provider messages, and
#: the module that registers each one's converter when it is imported.
CONVERTERS: Mapping[str, str] = {
    "from_openai": "salience.messages.openai",
    "to_openai": "salience.messages.openai",
    "from_anthropic": "salience.messages.anthropic",
    "to_anthropic": "salience.messages.anthropic",
    "anthropic_system": "salience.messages.anthropic",
}

_converters: dict[str, Callable[..., Any]] = {}


def register_converter(method: str, function: Callable[..., Any]) -> None:
    """Make ``function`` the converter behind the :class:`Transcript` method ``method``.

    :mod:`salience.messages.openai` and :mod:`salience.messages.anthropic` call this
    when they are imported (``import salience`` imports both), so that this module,
    at the bottom of the imports, needs none of theirs. ``function`` takes the
    method's arguments (``self`` first for the ``to_`` methods).

    >>> register_converter("to_yaml", print)
    Traceback (most recent call last):
    ...
    salience.errors.SalienceError: no Transcript method 'to_yaml' takes a converter \
(known: 'from_openai', 'to_openai', 'from_anthropic', 'to_anthropic', 'anthropic_system')
    """
    if method not in CONVERTERS:
        known = ", ".join(repr(m) for m in CONVERTERS)
        raise SalienceError(f"no Transcript method {method!r} takes a converter (known: {known})")
    _converters[method] = function


def _converter(method: str) -> Callable[..., Any]:
    """The converter registered for ``method``; a :class:`SalienceError` naming its module if none is."""
    try:
        return _converters[method]
    except KeyError:
        module = CONVERTERS[method]
        raise SalienceError(
            f"Transcript.{method} has no converter: {module} registers it when imported, and it was not "
            f"(import salience, or import {module}, before calling Transcript.{method})"
        ) from None
