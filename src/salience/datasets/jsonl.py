"""Canonical JSONL: one transcript per line.

Each line is an object::

    {"id": "t1", "domain": "airline",
     "messages": [{"id": "m0", "role": "system", "content": "...", "label": 0.0,
                   "meta": {"needed_in": 3}}, ...],
     "queries": [{"text": "...", "evidence": ["m3"], "at": 12}],
     "meta": {...}}

``messages`` are OpenAI chat messages (see :mod:`salience.messages.openai`) plus
salience's keys ``id``, ``label`` and ``meta`` (an object, becomes
:attr:`Entry.meta`); other message keys are carried through. The transcript's ``id``
is optional (default ``<file stem>:<line number>``), and so are ``domain``,
``queries`` (each an object with ``text``, ``evidence``: a list of entry ids, and
``at``; other keys become :attr:`Query.meta`) and ``meta``. Any other top-level key
is kept and written back by :func:`save`.

>>> t = parse_transcript({"id": "t1", "messages": [{"role": "user", "content": "hi", "label": 1}]},
...                      default_id="x")
>>> (t.id, t.entries[0].id, t.entries[0].label)
('t1', 'm0', 1.0)
>>> dump_transcript(t)
{'id': 't1', 'messages': [{'id': 'm0', 'role': 'user', 'content': 'hi', 'label': 1}]}

Documented behaviour for odd input (each tested in ``tests/test_bad_input.py``):

* blank lines are skipped; a UTF-8 byte-order mark at the start is ignored;
* a line that is not valid JSON: :class:`~salience.errors.FormatError`
  ``<file>:<line>: malformed JSON: <reason> at column <n>`` (the character of the
  line, counting from 1);
* bytes that are not UTF-8: ``FormatError`` ``<file>:<line>: not UTF-8 text
  (byte <n> of the line: <reason>)`` (counting from 1) -- nothing is replaced
  or guessed;
* any problem inside a transcript (unknown role, a tool result whose call is
  missing, content that is not text, an evidence id that names no entry, ...): a
  :class:`~salience.errors.TranscriptError` that starts with ``<file>:<line>:`` and
  names the transcript, the message index and id, and the field;
* ``meta`` keys starting with ``_`` are reserved for salience's own round-trip
  data: an error in a file, and left out by :func:`save`;
* a single ``str`` as ``evidence`` is an error (write a list);
* very long lines (a 5 MB tool output) load as they are, up to the limits of
  :mod:`salience.limits` (a line of at most 64 MiB, nested at most 64 deep, at most
  100,000 messages by default): past them, a :class:`~salience.errors.LimitError`
  ``<file>:<line>: ...`` naming the limit and its value;
* a tool call not answered before the next message that is not one of its results
  is refused, as :func:`salience.messages.openai.from_openai` refuses it.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from functools import partial
from pathlib import Path
from typing import Any

from salience.datasets._io import json_lines
from salience.errors import LimitError, TranscriptError, describe
from salience.limits import check_count
from salience.messages.openai import entry_from_openai, entry_to_openai
from salience.messages.validate import require_answered
from salience.transcript import Query, Transcript

__all__ = ["NAME", "dump_transcript", "load", "parse_transcript", "save", "sniff"]

NAME = "jsonl"

_TOP_KEYS = ("id", "domain", "messages", "queries", "meta")
_EXTRA = "_jsonl"  # Transcript.meta key holding unknown top-level keys
_SNIFF = re.compile(r'^\s*\{.*"messages"\s*:')


def sniff(path: Path, head: str) -> bool:
    """True if ``head`` (the start of ``path``) looks like canonical JSONL.

    The first non-blank line must be a JSON object with a ``"messages"`` key (a line
    cut off by the head, or malformed, still counts, so that :func:`load` can say
    where it is broken).
    """
    first = next((line for line in head.lstrip("\ufeff").splitlines() if line.strip()), "")
    return bool(_SNIFF.match(first))


_short = partial(describe, typed=False)


def _check_meta(meta: Any, where: str) -> dict[str, Any]:
    if not isinstance(meta, Mapping):
        raise TranscriptError(f"{where}: field 'meta' must be an object (got {_short(meta)})")
    reserved = [k for k in meta if not isinstance(k, str) or k.startswith("_")]
    if reserved:
        raise TranscriptError(
            f"{where}: field 'meta' has keys starting with '_', which salience reserves (got {reserved[:5]!r})"
        )
    return dict(meta)


def parse_transcript(obj: Any, *, default_id: str, where: str = "") -> Transcript:
    """One canonical transcript object as a :class:`Transcript` (``obj`` is not modified).

    ``where`` (say ``"file.jsonl:3"``) starts every error message.
    """
    prefix = f"{where}: " if where else ""
    try:
        return _parse(obj, default_id)
    except LimitError as exc:
        raise LimitError(f"{prefix}{exc}", limit=exc.limit, maximum=exc.maximum, value=exc.value) from None
    except TranscriptError as exc:
        raise type(exc)(f"{prefix}{exc}") from None


def _parse(obj: Any, default_id: str) -> Transcript:
    if not isinstance(obj, Mapping):
        raise TranscriptError(f"expected a JSON object with 'messages' (got {_short(obj)})")
    tid = obj.get("id", default_id)
    if not isinstance(tid, str) or not tid:
        raise TranscriptError(f"transcript: field 'id' must be a non-empty str (got {_short(tid)})")
    here = f"transcript {tid!r}"
    messages = obj.get("messages")
    if not isinstance(messages, list):
        raise TranscriptError(f"{here}: field 'messages' must be a list (got {_short(messages)})")
    check_count(len(messages), where=here)
    entries = []
    for i, message in enumerate(messages):
        meta = None
        if isinstance(message, Mapping) and "meta" in message:
            meta = _check_meta(message["meta"], f"{here}, message {i}")
            message = {k: v for k, v in message.items() if k != "meta"}
        entry = entry_from_openai(message, i, transcript_id=tid)
        if meta:
            entry = entry.replace(meta={**meta, **entry.meta})
        entries.append(entry)
    raw_queries = obj.get("queries", [])
    if not isinstance(raw_queries, list):
        raise TranscriptError(f"{here}: field 'queries' must be a list (got {_short(raw_queries)})")
    queries = []
    for q, raw in enumerate(raw_queries):
        if not isinstance(raw, Mapping) or not isinstance(raw.get("text"), str):
            raise TranscriptError(f"{here}, query {q}: expected an object with a str 'text' (got {_short(raw)})")
        evidence = raw.get("evidence", [])
        if not isinstance(evidence, list):
            raise TranscriptError(
                f"{here}, query {q}: field 'evidence' must be a list of entry ids (got {_short(evidence)})"
            )
        try:
            queries.append(Query(text=raw["text"], evidence=tuple(evidence), at=raw.get("at"),
                                 meta={k: v for k, v in raw.items() if k not in ("text", "evidence", "at")}))
        except TranscriptError as exc:
            raise TranscriptError(f"{here}, query {q}: {exc}") from None
    meta = _check_meta(obj.get("meta", {}), here)
    extra = {k: v for k, v in obj.items() if k not in _TOP_KEYS}
    if extra:
        meta[_EXTRA] = extra
    transcript = Transcript(id=tid, entries=tuple(entries), domain=obj.get("domain"), queries=tuple(queries),
                            meta=meta)
    require_answered(transcript)
    return transcript


def load(path: str | os.PathLike[str]) -> list[Transcript]:
    """All transcripts in a canonical JSONL file, in file order."""
    path = Path(path)
    return [parse_transcript(obj, default_id=f"{path.stem}:{lineno}", where=where)
            for lineno, where, obj in json_lines(path)]


def dump_transcript(transcript: Transcript) -> dict[str, Any]:
    """The canonical JSON object for one transcript (every message gets its ``id``)."""
    messages = []
    for entry in transcript.entries:
        rendered = entry_to_openai(entry, with_id=True, with_label=True)
        message = {"id": rendered.pop("id"), **rendered}
        public = entry.public_meta
        if public:
            message["meta"] = public
        messages.append(message)
    obj: dict[str, Any] = {"id": transcript.id}
    if transcript.domain is not None:
        obj["domain"] = transcript.domain
    obj["messages"] = messages
    if transcript.queries:
        obj["queries"] = [
            {"text": q.text, "evidence": list(q.evidence), **({"at": q.at} if q.at is not None else {}), **q.meta}
            for q in transcript.queries
        ]
    meta = {k: v for k, v in transcript.meta.items() if not k.startswith("_")}
    if meta:
        obj["meta"] = meta
    extra = transcript.meta.get(_EXTRA)
    if isinstance(extra, Mapping):
        obj.update({k: v for k, v in extra.items() if k not in obj})
    return obj


def _default(value: Any) -> Any:
    if hasattr(value, "tolist"):  # numpy scalars and arrays
        return value.tolist()
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    # internal: json.dumps's default= hook must raise TypeError; _line turns it into a TranscriptError
    raise TypeError(f"a {type(value).__name__} is not JSON-serialisable")


def _line(transcript: Transcript) -> str:
    obj = dump_transcript(transcript)
    try:
        text = json.dumps(obj, ensure_ascii=False, default=_default)
    except (TypeError, ValueError) as exc:
        raise TranscriptError(f"transcript {transcript.id!r}: cannot be written as JSON ({exc})") from None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: escape them, json reads them back as they were
        text = json.dumps(obj, ensure_ascii=True, default=_default)
    return text


def save(transcripts: Iterable[Transcript], path: str | os.PathLike[str]) -> Path:
    """Write ``transcripts`` to ``path`` as canonical JSONL (atomically); returns the path.

    Values in ``meta`` must be JSON-serialisable (numpy scalars and arrays are
    written as numbers and lists, sets as sorted lists); anything else is a
    :class:`~salience.errors.TranscriptError` naming the transcript, and the file
    is left as it was.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with tmp.open("w", encoding="utf-8") as fh:
            for t in transcripts:
                fh.write(_line(t))
                fh.write("\n")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path
