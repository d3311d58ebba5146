"""LoCoMo long conversations (snap-research/locomo) -> :class:`~salience.transcript.Transcript`.

A LoCoMo file holds one conversation (``{"speaker_a": ..., "session_1": [...], "qa": [...]}``),
one sample wrapping it (``{"sample_id": ..., "conversation": {...}, "qa": [...]}``) or a list
of such samples (the upstream ``locomo10.json``). Each becomes one transcript:

* id ``locomo-<sample_id>`` (``locomo-<file stem>`` when there is none, ``-<k>`` appended
  for the k-th sample of a list without ids); domain ``"conversation"``;
* every turn of ``session_1``, ``session_2``, ... (in session order) is one entry whose
  id is the turn's ``dia_id`` (``"D3:4"``) and whose ``name`` is the speaker. The two
  speakers are mapped onto chat roles: ``speaker_a`` -> ``"user"``, ``speaker_b`` ->
  ``"assistant"`` (LoCoMo has two people talking, not a user and an agent; the mapping only
  keeps turns alternating the way chat APIs expect). Entry meta: ``session`` (int),
  ``date`` (the session's date-time text), ``speaker``, and ``extra`` with the turn's
  other raw keys (``img_url``, ``blip_caption``, ``query``, ...). A shared photo's caption
  is appended to the content as ``"[shares a photo: <caption>]"``;
* every ``qa`` item becomes a :class:`~salience.transcript.Query` with ``at=None`` and
  meta ``category`` (1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop, 5 adversarial),
  ``answer`` (and ``adversarial_answer`` when given);
* transcript meta: ``speaker_a``, ``speaker_b``, ``sessions`` (``[{"session": n, "date": ...}]``
  for sessions with turns) and ``evidence_issues`` (counts, see below).

Evidence ids are checked against the conversation's ``dia_id`` s. The upstream data has
malformed ones; the rules, applied per listed item:

* an item naming several ids (``"D8:6; D9:17"``) is split on ``;``, ``,`` and spaces;
* an id that differs from an existing one only by a stray colon or leading zeros
  (``"D:11:26"`` -> ``"D11:26"``, ``"D30:05"`` -> ``"D30:5"``) is normalised; query meta
  ``normalised_evidence`` maps each such raw item to the ids it became;
* anything else that names no turn (``"D"``, ``"D10:19"`` in a session of 18 turns) is
  dropped and listed in query meta ``dropped_evidence``;
* a query left with no evidence (none listed, or all dropped) is kept, with meta
  ``no_evidence: True``: it still tests recall of the whole conversation.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from salience.datasets._io import read_json as _read_json
from salience.errors import FormatError, TranscriptError
from salience.errors import describe as _got
from salience.transcript import Entry, Query, Transcript

__all__ = ["NAME", "load", "normalise_evidence", "sniff"]

NAME = "locomo"
DOMAIN = "conversation"

_SESSION = re.compile(r"session_(\d+)")
_EVIDENCE_ID = re.compile(r"D\s*:?\s*0*(\d+)\s*:\s*0*(\d+)", re.IGNORECASE)
_SPLIT = re.compile(r"[;,\s]+")
_OWN_TURN_KEYS = ("speaker", "dia_id", "text")


def sniff(path: Path, head: str) -> bool:
    """True for a LoCoMo conversation file: JSON with ``speaker_a`` or ``qa`` + ``evidence``."""
    start = head.lstrip()[:1]
    if start not in ("{", "["):
        return False
    if re.search(r'"speaker_a"\s*:', head) and re.search(r'"session_\d+', head):
        return True
    return bool(
        re.search(r'"qa"\s*:\s*\[', head)
        and re.search(r'"evidence"\s*:\s*\[', head)
        and re.search(r'"category"\s*:', head)
    )


def normalise_evidence(raw: Any, ids: set[str] | frozenset[str]) -> tuple[list[str], dict[str, list[str]], list[str]]:
    """Split, normalise and check one query's raw evidence list against ``ids``.

    Returns ``(kept, normalised, dropped)``: the valid ids in order without repeats, the
    raw items that were rewritten (with what they became), and the raw items dropped.

    >>> normalise_evidence(["D1:3", "D:2:7", "D30:05; D1:3", "D"], {"D1:3", "D2:7", "D30:5"})
    (['D1:3', 'D2:7', 'D30:5'], {'D:2:7': ['D2:7'], 'D30:05; D1:3': ['D30:5', 'D1:3']}, ['D'])
    """
    items = raw if isinstance(raw, list) else [raw]
    kept: list[str] = []
    normalised: dict[str, list[str]] = {}
    dropped: list[str] = []

    def keep(eid: str) -> None:
        if eid not in kept:
            kept.append(eid)

    for item in items:
        if isinstance(item, str) and item in ids:
            keep(item)
            continue
        text = item if isinstance(item, str) else str(item)
        parts = [p for p in _SPLIT.split(text.strip()) if p] or [text]
        found: list[str] = []
        for part in parts:
            if part in ids:
                found.append(part)
                continue
            match = _EVIDENCE_ID.fullmatch(part)
            candidate = f"D{int(match.group(1))}:{int(match.group(2))}" if match else None
            if candidate is not None and candidate in ids:
                found.append(candidate)
            else:
                dropped.append(part)
        if found:
            for eid in found:
                keep(eid)
            normalised[text] = found
    return kept, normalised, dropped


def _samples(data: Any, path: Path) -> list[tuple[str, Mapping[str, Any], list[Any]]]:
    """(id, conversation mapping, qa list) for each sample in a file."""
    if isinstance(data, list):
        raw = list(enumerate(data))
        many = True
    elif isinstance(data, Mapping):
        raw = [(0, data)]
        many = False
    else:
        raise FormatError(f"{path}: expected a JSON object (one conversation) or a list of them (got {_got(data)})")
    out = []
    for k, sample in raw:
        where = f"{path}: sample {k}" if many else f"{path}"
        if not isinstance(sample, Mapping):
            raise FormatError(f"{where}: expected a JSON object with the conversation (got {_got(sample)})")
        conversation = sample.get("conversation", sample)
        if not isinstance(conversation, Mapping):
            raise FormatError(f"{where}: field 'conversation' must be an object (got {_got(conversation)})")
        qa = sample.get("qa", [])
        if not isinstance(qa, list):
            raise FormatError(f"{where}: field 'qa' must be a list of questions (got {_got(qa)})")
        sample_id = sample.get("sample_id")
        if sample_id is not None and not isinstance(sample_id, (str, int)):
            raise FormatError(f"{where}: field 'sample_id' must be a str (got {_got(sample_id)})")
        if sample_id is not None and str(sample_id):
            tid = f"locomo-{sample_id}"
        else:
            tid = f"locomo-{path.stem}-{k}" if many else f"locomo-{path.stem}"
        out.append((tid, conversation, qa))
    return out


def _entries(conv: Mapping[str, Any], where: str) -> tuple[list[Entry], list[dict[str, Any]]]:
    speakers: dict[str, str] = {}
    for key, role in (("speaker_a", "user"), ("speaker_b", "assistant")):
        name = conv.get(key)
        if not isinstance(name, str) or not name:
            raise FormatError(f"{where}: field {key!r} must be the speaker's name, a non-empty str (got {_got(name)})")
        speakers[name] = role
    numbers = sorted(int(m.group(1)) for k in conv if (m := _SESSION.fullmatch(k)))
    if not numbers:
        raise FormatError(f"{where}: no 'session_<n>' lists of turns found")
    entries: list[Entry] = []
    sessions: list[dict[str, Any]] = []
    for n in numbers:
        key = f"session_{n}"
        turns = conv[key]
        if not isinstance(turns, list):
            raise FormatError(f"{where}: field {key!r} must be a list of turns (got {_got(turns)})")
        date = conv.get(f"{key}_date_time")
        if date is not None and not isinstance(date, str):
            raise FormatError(f"{where}: field '{key}_date_time' must be a str (got {_got(date)})")
        if turns:
            sessions.append({"session": n, "date": date})
        for j, turn in enumerate(turns):
            at = f"{where}: {key}[{j}]"
            if not isinstance(turn, Mapping):
                raise FormatError(f"{at}: expected a turn object with 'speaker', 'dia_id', 'text' (got {_got(turn)})")
            for fname in _OWN_TURN_KEYS:
                if fname not in turn:
                    raise FormatError(f"{at}: field {fname!r} is missing")
                if not isinstance(turn[fname], str):
                    raise FormatError(f"{at}: field {fname!r} must be a str (got {_got(turn[fname])})")
            speaker, dia_id, text = turn["speaker"], turn["dia_id"], turn["text"]
            if speaker not in speakers:
                known = " or ".join(repr(s) for s in speakers)
                raise FormatError(f"{at} (dia_id {dia_id!r}): field 'speaker' must be {known} (got {speaker!r})")
            extra = {k: v for k, v in turn.items() if k not in _OWN_TURN_KEYS}
            caption = extra.get("blip_caption")
            content = text
            if isinstance(caption, str) and caption:
                photo = f"[shares a photo: {caption}]"
                content = f"{text} {photo}" if text else photo
            meta: dict[str, Any] = {"session": n, "date": date, "speaker": speaker}
            if extra:
                meta["extra"] = extra
            try:
                entries.append(Entry(id=dia_id, role=speakers[speaker], content=content, name=speaker, meta=meta))
            except TranscriptError as exc:
                raise FormatError(f"{at}: {exc}") from None
    return entries, sessions


def _queries(qa: list[Any], ids: set[str], where: str) -> tuple[list[Query], dict[str, int]]:
    queries: list[Query] = []
    issues = {"normalised": 0, "dropped": 0, "no_evidence": 0}
    for q, item in enumerate(qa):
        at = f"{where}: qa[{q}]"
        if not isinstance(item, Mapping):
            raise FormatError(f"{at}: expected a question object (got {_got(item)})")
        question = item.get("question")
        if not isinstance(question, str):
            raise FormatError(f"{at}: field 'question' must be a str (got {_got(question)})")
        raw = item.get("evidence", [])
        if not isinstance(raw, (list, str)):
            raise FormatError(f"{at}: field 'evidence' must be a list of dia_ids (got {_got(raw)})")
        kept, normalised, dropped = normalise_evidence(raw, ids)
        meta: dict[str, Any] = {"category": item.get("category")}
        for key in ("answer", "adversarial_answer"):
            if key in item:
                meta[key] = item[key]
        if normalised:
            meta["normalised_evidence"] = normalised
            issues["normalised"] += 1
        if dropped:
            meta["dropped_evidence"] = dropped
            issues["dropped"] += 1
        if not kept:
            meta["no_evidence"] = True
            issues["no_evidence"] += 1
        queries.append(Query(text=question, evidence=tuple(kept), at=None, meta=meta))
    return queries, issues


def load(path: str | os.PathLike[str]) -> list[Transcript]:
    """Every conversation in LoCoMo file ``path``, as transcripts with queries."""
    path = Path(path)
    out = []
    data = _read_json(path)
    for k, (tid, conv, qa) in enumerate(_samples(data, path)):
        where = f"{path}: sample {k}" if isinstance(data, list) else str(path)
        entries, sessions = _entries(conv, where)
        queries, issues = _queries(qa, {e.id for e in entries}, where)
        meta = {"speaker_a": conv["speaker_a"], "speaker_b": conv["speaker_b"], "sessions": sessions,
                "evidence_issues": issues}
        try:
            out.append(Transcript(id=tid, entries=tuple(entries), domain=DOMAIN, queries=tuple(queries), meta=meta))
        except TranscriptError as exc:
            raise FormatError(f"{where}: {exc}") from None
    return out
