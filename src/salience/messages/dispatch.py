"""Which format a list of messages is in, and the way to and from a Transcript for each.

:meth:`salience.Compactor.compact` reads its input and writes its result through
this module; the converters themselves live in the format modules (OpenAI chat in
:mod:`salience.messages.openai`, Anthropic in :mod:`salience.messages.anthropic`,
LangChain in :mod:`salience.messages.langchain`, OpenAI Responses API items in
:mod:`salience.messages.responses`).

Detection (:func:`detect_format`): a :class:`Transcript` is taken as is. A list of
LangChain messages (``langchain_core.messages.BaseMessage``) is LangChain's (a list
mixing them with other items is a :class:`~salience.errors.FormatError`). A list with
a Responses API item (a top-level ``type`` such as ``function_call`` or ``reasoning``, or
``input_text``/``output_text`` parts; :func:`salience.messages.responses.is_responses_item`)
is Responses input. A list of messages is Anthropic's when ``system=`` is passed or a message has list content with
a ``tool_use``, ``tool_result``, ``thinking``, ``redacted_thinking`` or ``document``
block, or an ``image`` block with a ``source``; otherwise it is OpenAI's (plain user
and assistant turns with string content read the same either way). ``format="openai"
| "anthropic" | "responses" | "langchain" | "transcript"`` (:data:`FORMATS`) forces the choice
(``"transcript"``: give a Transcript back whatever came in).

Reading applies :mod:`salience.limits` (depth, size and number of messages, the limits
:func:`salience.limits.current` gives) and refuses a history whose tool calls the
provider would refuse (:func:`salience.messages.validate.require_answered`), each with a
:class:`~salience.errors.TranscriptError` naming the message.

Writing Anthropic messages merges adjacent same-role messages
(:func:`merge_same_role`): dropping a whole message can leave two user turns side by
side, which Anthropic's API does not accept.

A :class:`MessageCache` keeps, across calls, the entry read from each OpenAI or
LangChain message (reused while the same message object, at the same index, still
equals the copy its entry holds) and each entry's rendering (callers get copies), so a
call after one new message reads and renders that message alone.

>>> detect_format([{"role": "user", "content": "hi"}])
'openai'
>>> transcript, fmt = to_transcript([{"role": "user", "content": "hi"}], system="Be brief.", format=None)
>>> fmt, [e.role for e in transcript.entries]
('anthropic', ['system', 'user'])
>>> render(transcript, fmt)
([{'role': 'user', 'content': 'hi'}], 'Be brief.')
"""

from __future__ import annotations

import itertools
import operator
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from salience.errors import FormatError, ParameterError, describe
from salience.limits import check_count
from salience.messages._common import LANGCHAIN_KEY, OPENAI_KEY, CopyPlan, copy_by_plan, copy_json, copy_plan
from salience.messages.validate import Checked, checked_growing
from salience.transcript import Entry, Transcript

__all__ = [
    "FORMATS",
    "MEMO_SIZE",
    "IdCache",
    "MessageCache",
    "copy_json",
    "copy_langchain",
    "detect_format",
    "is_langchain_list",
    "is_openai_message",
    "merge_same_role",
    "reader",
    "render",
    "renderer",
    "same_format",
    "to_transcript",
]

#: Message formats :meth:`salience.Compactor.compact` reads and writes.
FORMATS: tuple[str, ...] = ("openai", "anthropic", "responses", "langchain", "transcript")
#: How many items each of a compactor's caches keeps (the oldest go first).
MEMO_SIZE = 50_000

_ANTHROPIC_BLOCKS = frozenset({"tool_use", "tool_result", "thinking", "redacted_thinking", "document"})
_OPENAI_ROLES = frozenset({"system", "developer", "tool", "function"})
#: The ``Entry.meta`` key under which each one-message-one-entry reader keeps its copy.
_READ_KEYS = {"openai": OPENAI_KEY, "langchain": LANGCHAIN_KEY}

_got = describe
#: The copy plan of a dict that holds atoms alone (see :func:`~salience.messages._common.copy_plan`).
_FLAT: CopyPlan = (0, ())


# -- detection ------------------------------------------------------------------------------


def _is_anthropic_message(m: Any) -> bool:
    content = m.get("content") if isinstance(m, Mapping) else None
    if not isinstance(content, list):
        return False
    for block in content:
        if isinstance(block, Mapping):
            kind = block.get("type")
            if isinstance(kind, str) and (kind in _ANTHROPIC_BLOCKS or (kind == "image" and "source" in block)):
                return True
    return False


def is_openai_message(m: Any) -> bool:
    """Whether ``m`` can only be an OpenAI message (a system, developer, tool or function role, or tool-call keys)."""
    if not isinstance(m, Mapping):
        return False
    role = m.get("role")
    return (isinstance(role, str) and role in _OPENAI_ROLES) or "tool_calls" in m or "tool_call_id" in m


#: :func:`_kind` bits: what :func:`detect_format` looks for in one message.
_RESPONSES, _ANTHROPIC = 1, 2


def _kind(m: Any) -> int:
    """Which of a Responses item (:data:`_RESPONSES`) and an Anthropic message with
    Anthropic blocks (:data:`_ANTHROPIC`) ``m`` is, as bits."""
    from salience.messages.responses import is_responses_item

    return (_RESPONSES if is_responses_item(m) else 0) | (_ANTHROPIC if _is_anthropic_message(m) else 0)


def detect_format(messages: Any, *, system: Any = None) -> str:
    """``"transcript"``, ``"langchain"``, ``"responses"``, ``"anthropic"`` or ``"openai"`` for ``messages``
    (rules in the module doc).

    >>> detect_format([{"role": "user", "content": "hi"}])
    'openai'
    >>> detect_format([{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "x"}]}])
    'anthropic'
    """
    if isinstance(messages, Transcript):
        return "transcript"
    if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Sequence):
        raise FormatError(f"messages must be a Transcript or a list of message mappings (got {_got(messages)})")
    if is_langchain_list(messages):
        return "langchain"
    if system is None:
        from salience.messages.responses import is_responses_item

        if any(is_responses_item(m) for m in messages):
            return "responses"
    anthropic = system is not None or any(_is_anthropic_message(m) for m in messages)
    if anthropic:
        clash = next((i for i, m in enumerate(messages) if is_openai_message(m)), None)
        if clash is not None:
            why = "system= was passed" if system is not None else "some messages have Anthropic content blocks"
            raise FormatError(f"messages mix formats: {why}, but message {clash} is OpenAI-style "
                              f"(role {messages[clash].get('role')!r}); pass format='openai' or 'anthropic' to choose")
        return "anthropic"
    return "openai"


def _langchain_base() -> Any:
    """LangChain's ``BaseMessage`` class if LangChain is loaded (no LangChain message can exist otherwise)."""
    module = sys.modules.get("langchain_core.messages.base")
    return getattr(module, "BaseMessage", None)


def _holds_langchain(messages: Sequence[Any]) -> bool:
    """Whether any of ``messages`` is a LangChain message (never raises)."""
    base = _langchain_base()
    return base is not None and any(isinstance(m, base) for m in messages)


def is_langchain_list(messages: Sequence[Any]) -> bool:
    """True for a list of LangChain messages; a list mixing them with other items is a ``FormatError``."""
    base = _langchain_base()
    if base is None or not _holds_langchain(messages):
        return False
    other = next((i for i, m in enumerate(messages) if not isinstance(m, base)), None)
    if other is not None:
        first = next(i for i, m in enumerate(messages) if isinstance(m, base))
        raise FormatError(f"messages mix formats: message {first} is a LangChain message, but message {other} is "
                          f"{_got(messages[other])}; convert them all to one format")
    return True


def same_format(messages: Sequence[Any], fmt: str) -> bool:
    """Whether ``messages``, appended to a history in ``fmt``, leave it in that format."""
    if fmt == "anthropic":
        return not is_langchain_list(messages) and not any(is_openai_message(m) for m in messages)
    return detect_format(messages) == fmt


# -- one message, one entry: OpenAI and LangChain ------------------------------------------------


def reader(fmt: str) -> tuple[Any, str]:
    """(read one message as an entry, the entry meta key holding the message's copy) for
    ``fmt`` (``"openai"`` or ``"langchain"``)."""
    if fmt == "openai":
        from salience.messages.openai import KEY, entry_from_openai

        return entry_from_openai, KEY
    from salience.messages.langchain import KEY as LC_KEY
    from salience.messages.langchain import entry_from_langchain

    return entry_from_langchain, LC_KEY


def renderer(fmt: str) -> Any:
    """Render an entry as a message in ``fmt`` (``"openai"`` or ``"langchain"``)."""
    if fmt == "openai":
        from salience.messages.openai import entry_to_openai

        return entry_to_openai
    from salience.messages.langchain import entry_to_langchain

    return entry_to_langchain


class IdCache:
    """Values by object, at most ``size`` of them (when full, the oldest tenth go).

    Keys are object ids; each value is kept with its object, so an id is never reused
    while cached and :meth:`get` only answers for the very object. :meth:`put` is
    thread-safe.
    """

    __slots__ = ("_lock", "_store", "size")

    def __init__(self, size: int = MEMO_SIZE) -> None:
        self.size = size
        self._store: dict[int, tuple[Any, Any]] = {}
        self._lock = threading.Lock()

    def get(self, obj: Any) -> Any:
        """The value cached for ``obj``, or None."""
        hit = self._store.get(id(obj))
        return hit[1] if hit is not None and hit[0] is obj else None

    def put(self, obj: Any, value: Any) -> None:
        store = self._store
        with self._lock:
            store[id(obj)] = (obj, value)
            if len(store) > self.size:  # drop the oldest tenth
                for old in list(itertools.islice(store, self.size // 10)):
                    store.pop(old, None)

    def __len__(self) -> int:
        return len(self._store)


class MessageCache:
    """What the format layer keeps between calls (see the module doc):

    * ``read``: message object -> ``(index, format, entry, the entry's copy of the message, its
      size, its kind for detection)`` (see :meth:`entry`);
    * ``rendered``: entry object -> its message in the output format (see :meth:`rendering`).

    Entries are immutable, so a rendering cached for the same entry object is always right.
    """

    __slots__ = ("_lock", "known", "last", "read", "rendered")

    def __init__(self, size: int = MEMO_SIZE) -> None:
        self.read = IdCache(size)
        self.rendered = IdCache(size)
        self.last: Checked | None = None  # the last transcript read, and its validation's state
        # The last OpenAI list read whole (see _read_known): its message objects, the copies their
        # entries keep, the entries, and the sum of their sizes.
        self.known: tuple[list[Any], list[Any], list[Any], int] | None = None
        self._lock = threading.Lock()

    def checked(self, entries: Sequence[Entry], size: int) -> Transcript:
        """The checked transcript of ``entries`` (:func:`~salience.messages.validate.checked_growing`):
        validated for the entries after the last transcript's when it extends that one."""
        with self._lock:
            last, self.last = self.last, None  # its state advances: no other call may use it
        out = checked_growing(entries, id="transcript", size=size, last=last)
        self.last = out
        return out.transcript

    def entry(self, message: Any, index: int, fmt: str) -> Entry | None:
        """The entry read before from ``message`` at ``index`` in ``fmt``, if the message
        still equals the copy its entry kept, else None."""
        hit = self.read.get(message)
        if hit is not None and hit[0] == index and hit[1] == fmt and message == hit[3]:
            entry: Entry = hit[2]
            return entry
        return None

    def remember(self, message: Any, index: int, fmt: str, entry: Entry, kind: int | None = None) -> None:
        """Keep ``entry`` as what ``message`` at ``index`` in ``fmt`` reads as (with the
        copy of the message its meta holds, its size and its :func:`_kind` for the next
        lookup)."""
        private = entry.meta[_READ_KEYS[fmt]]
        kind = _kind(message) if kind is None else kind
        self.read.put(message, (index, fmt, entry, private["message"], private.get("size", 0), kind))

    def _rendered(self, entry: Entry, render: Callable[[Entry], Any]) -> tuple[Any, CopyPlan]:
        """(``render(entry)``, its :func:`~salience.messages._common.copy_plan`), cached per entry object."""
        hit: tuple[Any, CopyPlan] | None = self.rendered.get(entry)
        if hit is None:
            message = render(entry)
            hit = (message, copy_plan(message))
            self.rendered.put(entry, hit)
        return hit

    def rendering(self, entry: Entry, render: Callable[[Entry], Any]) -> Any:
        """``render(entry)``, cached per entry object (do not hand the result out: copy it)."""
        return self._rendered(entry, render)[0]

    def rendered_copy(self, entry: Entry, render: Callable[[Entry], Any]) -> Any:
        """A :func:`copy_json` of :meth:`rendering` (a JSON-like message), made by its cached
        :func:`~salience.messages._common.copy_plan` (the same copy, for less work)."""
        message, plan = self._rendered(entry, render)
        return copy_by_plan(message, plan)

    def rendered_copies(self, entries: Sequence[Entry], render: Callable[[Entry], Any]) -> list[Any]:
        """``[rendered_copy(e, render) for e in entries]``, with the cache's lookup inlined and a
        message that holds atoms alone (a plan of ``(0, ())``: most turns) copied by ``dict.copy``:
        this runs over every message a compaction keeps, on every call."""
        store = self.rendered._store
        out: list[Any] = []
        append = out.append
        for e in entries:
            hit = store.get(id(e))
            if hit is not None and hit[0] is e:
                message, plan = hit[1]
            else:
                message, plan = self._rendered(e, render)
            append(message.copy() if plan == _FLAT else copy_by_plan(message, plan))
        return out


def _convert_each(messages: Sequence[Any], cache: MessageCache, fmt: str) -> Transcript:
    """``Transcript`` of ``messages`` in a one-message-one-entry format, reusing the entries of
    messages seen before: a hit needs the same message object, at the same index, still equal
    to the copy its entry kept (so a message changed in place is read again)."""
    check_count(len(messages), where="transcript 'transcript'")
    entries: list[Entry] = []
    size = 0
    store = cache.read._store
    read: Any = None
    for i, m in enumerate(messages):
        # MessageCache.entry, inlined: this loop runs over the whole history on every call
        hit = store.get(id(m))
        if hit is not None and hit[0] is m:
            known = hit[1]
            if known[0] == i and known[1] == fmt and m == known[3]:
                entries.append(known[2])
                size += known[4]
                continue
        if read is None:
            read = reader(fmt)[0]
        entry = read(m, i, transcript_id="transcript")
        cache.remember(m, i, fmt, entry)
        entries.append(entry)
        size += entry.meta[_READ_KEYS[fmt]].get("size", 0)
    return cache.checked(entries, size)


def _known_prefix(messages: Sequence[Any], cache: MessageCache) -> tuple[int, list[Any], list[Any], int]:
    """(m, entries, copies, size) of the start of ``messages`` that :attr:`MessageCache.known`
    vouches for (the whole last list read), or m = 0: the same message objects at the same
    indices as the last list read, each still equal to its entry's copy. The test of
    :func:`_read_known`'s loop (``m == copy`` for each message), made by C over the lists (an
    identity pass and one list comparison) instead of one Python step per message: on a
    growing history, a call reads its new messages alone."""
    known = cache.known  # read once: another call may replace it
    if known is None:
        return 0, [], [], 0
    objs, copies, entries, size = known
    m = len(objs)
    if not m or len(messages) < m:
        return 0, [], [], 0
    head = list(messages[:m])
    # the same objects, then each equal to its copy (the message on the left, as in `m == copy`)
    if not all(map(operator.is_, head, objs)) or head != copies:
        return 0, [], [], 0
    return m, list(entries), list(copies), size


def _read_known(messages: Sequence[Any], cache: MessageCache) -> Transcript | None:
    """:func:`to_transcript` of a list that :func:`detect_format` finds OpenAI's, detected and
    read in one pass that looks at the new messages alone: a message found in ``cache``
    (the same object, at the same index, equal to its entry's copy) is what it was when
    read, so its entry and its :func:`_kind` stand. None when the list is not OpenAI's (a
    Responses item, an Anthropic block, LangChain messages): the caller detects as usual.

    The start of the list that the last list read whole covers (:func:`_known_prefix`: the
    same test, made at once) is taken from it; the messages after it are looked up one by one."""
    start, entries, copies, size = _known_prefix(messages, cache)
    # The known start holds no LangChain message (it was read as OpenAI's): only the rest can make
    # the list LangChain's, or a mixed one; the whole list is then looked at, so that a mixed list
    # gets the cold read's error, with its indices.
    if _holds_langchain(messages[start:] if start else messages) and is_langchain_list(messages):
        return None
    store = cache.read._store
    misses: list[tuple[int, Any]] = []  # (index, kind) of the messages to read
    for i in range(start, len(messages)):
        m = messages[i]
        hit = store.get(id(m))
        if hit is not None and hit[0] is m:
            k = hit[1]
            if k[0] == i and k[1] == "openai" and m == k[3]:
                if k[5]:
                    return None
                entries.append(k[2])
                copies.append(k[3])
                size += k[4]
                continue
        kind = _kind(m)
        if kind:
            return None
        misses.append((i, kind))
        entries.append(None)
        copies.append(None)
    check_count(len(messages), where="transcript 'transcript'")
    if misses:
        read = reader("openai")[0]
        for i, kind in misses:
            m = messages[i]
            entry = read(m, i, transcript_id="transcript")
            cache.remember(m, i, "openai", entry, kind=kind)
            entries[i] = entry
            private = entry.meta[OPENAI_KEY]
            copies[i] = private["message"]
            size += private.get("size", 0)
    out = cache.checked(entries, size)
    cache.known = (list(messages), copies, entries, size)  # after the check: a list that failed is not known
    return out


# -- both ways --------------------------------------------------------------------------------


def to_transcript(
    messages: Any, *, system: Any, format: str | None, cache: MessageCache | None = None
) -> tuple[Transcript, str]:
    """(``messages`` as a Transcript, the format to answer in); ``format`` forces it (module doc)."""
    if format is not None and format not in FORMATS:
        raise ParameterError(
            f"format must be one of {', '.join(repr(f) for f in FORMATS)} or None (got {_got(format)})"
        )
    if isinstance(messages, Transcript):
        if system is not None:
            raise ParameterError("system= is only for Anthropic message lists; a Transcript carries its system entry")
        return messages, format or "transcript"
    if format is None and system is None and cache is not None and isinstance(messages, (list, tuple)):
        source = _read_known(messages, cache)
        if source is not None:
            return source, "openai"
    if format is None or format == "transcript":
        fmt = detect_format(messages, system=system)
    else:
        fmt = format
    if fmt == "langchain" and format == "langchain":
        base = _langchain_base()
        other = next((i for i, m in enumerate(messages) if base is None or not isinstance(m, base)), None)
        if other is not None or isinstance(messages, (str, bytes, Mapping)):
            raise ParameterError(
                "format must be one of 'openai', 'anthropic', 'transcript' or None for these messages: 'langchain' "
                f"needs LangChain messages (got {_got(messages if other is None else messages[other])}"
                f"{'' if other is None else f' as message {other}'})"
            )
    if fmt in ("openai", "langchain") and system is not None:
        where = "OpenAI" if fmt == "openai" else "LangChain"
        raise ParameterError(
            f"system= is only for Anthropic messages; {where} messages carry the system prompt in the list"
        )
    if fmt in ("openai", "langchain") and cache is not None and isinstance(messages, (list, tuple)):
        source = _convert_each(messages, cache, fmt)
    elif fmt == "openai":
        source = Transcript.from_openai(messages)
    elif fmt == "langchain":
        from salience.messages.langchain import from_langchain

        source = from_langchain(messages)
    elif fmt == "responses":
        from salience.messages.responses import from_responses

        if system is not None:
            raise ParameterError("system= is only for Anthropic messages; Responses input carries its instructions "
                             "as a system or developer message item")
        source = from_responses(messages)  # bounded (salience.limits) and checked (require_answered) there
    elif cache is not None and isinstance(messages, (list, tuple)):
        from salience.messages.anthropic import from_anthropic

        source = from_anthropic(messages, system=system, memo=cache.read)
    else:
        source = Transcript.from_anthropic(messages, system=system)
    return source, format or fmt


def render(transcript: Transcript, fmt: str, cache: MessageCache | None = None) -> tuple[Any, Any]:
    """(messages, system) of ``transcript`` in ``fmt``; ``cache`` keeps each entry's rendering
    (the caller gets copies)."""
    if fmt in ("openai", "langchain") and cache is not None:
        render_one = renderer(fmt)
        if fmt == "openai":
            return cache.rendered_copies(transcript.entries, render_one), None
        return [copy_langchain(cache.rendering(e, render_one)) for e in transcript.entries], None
    if fmt == "openai":
        return transcript.to_openai(), None
    if fmt == "langchain":
        from salience.messages.langchain import to_langchain

        return to_langchain(transcript), None
    if fmt == "anthropic":
        return merge_same_role(transcript.to_anthropic()), transcript.anthropic_system()
    if fmt == "responses":
        from salience.messages.responses import to_responses

        return to_responses(transcript), None
    return transcript, None


def copy_langchain(message: Any) -> Any:
    """A deep copy of a LangChain message."""
    return message.model_copy(deep=True)


# -- Anthropic ---------------------------------------------------------------------------------


def merge_same_role(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Anthropic messages with adjacent same-role messages merged into one.

    Dropping a whole message can leave two user (or two assistant) messages side by
    side, which Anthropic's API does not accept as given. Their content blocks are
    joined (a string becomes a text block), ``tool_result`` blocks first as the API
    requires; the first message's other keys are kept.

    >>> merge_same_role([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])
    [{'role': 'user', 'content': [{'type': 'text', 'text': 'a'}, {'type': 'text', 'text': 'b'}]}]
    """
    out: list[dict[str, Any]] = []
    for message in messages:
        if out and out[-1].get("role") == message.get("role"):
            prev = out[-1]
            blocks = _as_blocks(prev.get("content")) + _as_blocks(message.get("content"))
            results = [b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"]
            others = [b for b in blocks if not (isinstance(b, dict) and b.get("type") == "tool_result")]
            prev["content"] = results + others
        else:
            out.append(message)
    return out


def _as_blocks(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return list(content or [])
