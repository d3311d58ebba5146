"""Canonical JSONL: one transcript per line.

Each line is an object::

    {"id": "t1", "domain": "airline",
     "messages": [{"id": "m0", "role": "system", "content": "...", "label": 0.0,
                   "meta": {"needed_in": 3}}, ...],
     "queries": [{"text": "...", "evidence": ["m3"], "at": 12}],
     "meta": {...}}

``messages`` are OpenAI chat messages plus salience's keys ``id``, ``label`` and
``meta`` (free-form, becomes :attr:`Entry.meta`); other keys are carried through.
``id`` and ``domain`` of the transcript are optional (default: ``<file stem>:<line>``).
Blank lines are skipped. A malformed line is an error naming the file and line.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from salience.errors import FormatError, TranscriptError
from salience.formats.openai import entry_from_openai, entry_to_openai
from salience.transcript import Query, Transcript

__all__ = ["NAME", "dump_transcript", "load", "parse_transcript", "save", "sniff"]

NAME = "jsonl"


def sniff(path: Path, head: str) -> bool:
    """True if ``head`` (the start of ``path``) looks like canonical JSONL."""
    first = next((line for line in head.splitlines() if line.strip()), "")
    return first.lstrip().startswith("{") and '"messages"' in first and '"role"' in first


def parse_transcript(obj: Any, *, default_id: str, where: str = "") -> Transcript:
    """One canonical transcript object as a :class:`Transcript`."""
    prefix = f"{where}: " if where else ""
    if not isinstance(obj, Mapping):
        raise TranscriptError(f"{prefix}expected a JSON object with 'messages' (got a {type(obj).__name__})")
    tid = obj.get("id", default_id)
    if not isinstance(tid, str) or not tid:
        raise TranscriptError(f"{prefix}field 'id' must be a non-empty str (got {tid!r})")
    messages = obj.get("messages")
    if not isinstance(messages, list):
        raise TranscriptError(f"{prefix}transcript {tid!r}: field 'messages' must be a list (got {messages!r:.60})")
    entries = []
    for i, message in enumerate(messages):
        meta = message.get("meta") if isinstance(message, Mapping) else None
        stripped = {k: v for k, v in message.items() if k != "meta"} if isinstance(message, Mapping) else message
        entry = entry_from_openai(stripped, i, transcript_id=tid)
        if meta is not None:
            if not isinstance(meta, Mapping):
                raise TranscriptError(
                    f"{prefix}transcript {tid!r}, message {i}: field 'meta' must be an object (got {meta!r:.60})"
                )
            entry = entry.replace(meta={**meta, **entry.meta})
        entries.append(entry)
    raw_queries = obj.get("queries", [])
    if not isinstance(raw_queries, list):
        raise TranscriptError(f"{prefix}transcript {tid!r}: field 'queries' must be a list (got {raw_queries!r:.60})")
    queries = []
    for q, raw in enumerate(raw_queries):
        if not isinstance(raw, Mapping) or "text" not in raw:
            raise TranscriptError(f"{prefix}transcript {tid!r}, query {q}: expected an object with 'text' (got {raw!r:.60})")
        queries.append(
            Query(text=raw["text"], evidence=tuple(raw.get("evidence", ())), at=raw.get("at"),
                  meta={k: v for k, v in raw.items() if k not in ("text", "evidence", "at")})
        )
    meta = obj.get("meta", {})
    try:
        return Transcript(id=tid, entries=tuple(entries), domain=obj.get("domain"), queries=tuple(queries),
                          meta=meta if isinstance(meta, Mapping) else {"meta": meta})
    except TranscriptError as exc:
        raise TranscriptError(f"{prefix}{exc}") from None


def load(path: str | os.PathLike[str]) -> list[Transcript]:
    """All transcripts in a canonical JSONL file."""
    path = Path(path)
    out = []
    try:
        with path.open("r", encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise FormatError(f"{path}:{lineno}: malformed JSON: {exc.msg} at column {exc.colno}") from None
                out.append(parse_transcript(obj, default_id=f"{path.stem}:{lineno}", where=f"{path}:{lineno}"))
    except UnicodeDecodeError as exc:
        raise FormatError(f"{path}: not UTF-8 text (byte {exc.start}: {exc.reason})") from None
    return out


def dump_transcript(transcript: Transcript) -> dict[str, Any]:
    """The canonical JSON object for one transcript (every message gets its ``id``)."""
    messages = []
    for entry in transcript.entries:
        message = entry_to_openai(entry, with_id=True)
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
    if transcript.meta:
        obj["meta"] = dict(transcript.meta)
    return obj


def save(transcripts: Iterable[Transcript], path: str | os.PathLike[str]) -> Path:
    """Write ``transcripts`` to ``path`` as canonical JSONL (atomically); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        for t in transcripts:
            fh.write(json.dumps(dump_transcript(t), ensure_ascii=False, default=str))
            fh.write("\n")
    os.replace(tmp, path)
    return path
