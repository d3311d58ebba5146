"""Training targets: which entries a transcript's later steps actually needed.

Two sources of labels:

* **Hindsight** (any agent log, no annotation): an entry is *needed at step t* when
  assistant step t uses a value (an id, a number, a path, a name; see
  :mod:`salience.values`) that first appeared in that entry. The values a step uses
  are those in its tool calls' arguments (:func:`~salience.values.call_values`) and
  in its text (:func:`~salience.values.extract_values`, looking inside multi-word
  values too, so a quoted command gives the path in it). A value whose first
  appearance is the step itself does not count; the system prompt is an entry like
  any other. Values match case-insensitively. A step's calls also use the *handles*
  their arguments copy (:mod:`salience.scorer.handles`: ``justinkool``, a password, a
  city, none of them a value), from the entry that first held them (exactly, in its
  text or its JSON leaves; never a JSON key): what hindsight by values alone misses,
  such as the user turn that gave the handle. And a call's argument strings
  (:func:`~salience.values.call_values`) credit the first entry whose text holds one as
  it stands, when that entry is a user turn (:func:`_phrase_scan`): a slot-filling answer
  (``"Call mom"``, ``"The topic is New Employee Orientation"``) holds neither a value nor
  a handle, and the next call copies it. :func:`step_references`, what ``salience bench``
  counts, stays by values alone.
* **Evidence** (transcripts with queries, such as LoCoMo): an entry is needed when
  some query lists it as evidence. How much it is needed is its *question share*
  (:func:`question_shares`): what keeping it adds to the recall summed over the
  questions, which is what a conversation's prior is weighted by in training.

>>> from salience import Transcript
>>> t = Transcript.from_openai([
...     {"role": "user", "content": "My user id is mia_li_3668."},
...     {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function",
...      "function": {"name": "get_user_details", "arguments": '{"user_id": "mia_li_3668"}'}}]},
...     {"role": "tool", "tool_call_id": "c1", "content": '{"reservations": ["ZFA04Y"]}'},
...     {"role": "assistant", "content": "You have one reservation, ZFA04Y."},
... ], id="demo")
>>> [(lab.needed, lab.needed_in, lab.used_by) for lab in hindsight_labels(t)]
[(True, 1, ('m1',)), (False, None, ()), (True, 1, ('m3',)), (False, None, ())]
>>> step_references(t)[1]
StepRefs(step=3, step_id='m3', refs=(('ZFA04Y', 'm2'),))
>>> [e.label for e in label_transcript(t).entries]
[1.0, 0.0, 1.0, 0.0]
"""

from __future__ import annotations

import bisect
import enum
import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import overload

from salience.errors import ParameterError, TranscriptError
from salience.scorer.handles import call_text, entry_handles, tokens
from salience.transcript import Entry, Transcript
from salience.values import call_values, extract_values

__all__ = [
    "EntryLabel",
    "LabelMode",
    "StepRefs",
    "entry_values",
    "evidence_labels",
    "hindsight_labels",
    "label",
    "label_transcript",
    "question_shares",
    "resolve_mode",
    "step_references",
    "step_values",
]


class LabelMode(enum.StrEnum):
    """Where labels come from: ``auto`` picks ``evidence`` for transcripts whose
    queries list evidence, ``hindsight`` for the others."""

    AUTO = "auto"
    HINDSIGHT = "hindsight"
    EVIDENCE = "evidence"

    @classmethod
    def parse(cls, mode: str | LabelMode) -> LabelMode:
        """``mode`` as a :class:`LabelMode`; ``ValueError`` naming the allowed values otherwise."""
        if isinstance(mode, LabelMode):
            return mode
        try:
            return cls(mode)
        except ValueError:
            allowed = ", ".join(repr(m.value) for m in cls)
            raise ParameterError(f"label mode must be one of {allowed} (got {mode!r})") from None


@dataclass(frozen=True, slots=True)
class EntryLabel:
    """The hindsight label of one entry.

    ``needed_in`` counts assistant steps from the entry to the first step that used
    one of its values (1 = the next assistant step); ``None`` when never used.
    ``used_by`` are the ids of every step that used one of its values, in order;
    ``values`` the values those steps reused, in order of first use.
    """

    needed: bool
    needed_in: int | None = None
    used_by: tuple[str, ...] = ()
    values: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class StepRefs:
    """The references of one assistant step: ``refs`` are ``(value, source entry id)``
    pairs for the values the step uses that first appeared in an earlier entry.
    ``step`` is the step's index in the transcript's entries."""

    step: int
    step_id: str
    refs: tuple[tuple[str, str], ...] = ()


# -- values ------------------------------------------------------------------


def _text_values(text: str) -> dict[str, None]:
    """:func:`extract_values` of ``text``, plus the values inside multi-word values
    (a quoted command names the path in it: ``"run --config a/b.toml"`` gives
    ``a/b.toml`` too)."""
    out: dict[str, None] = {}
    for value in extract_values(text):
        out[value] = None
        if " " in value:
            out.update(dict.fromkeys(extract_values(value)))
    return out


def entry_values(entry: Entry) -> list[str]:
    """Every value that appears in ``entry``: in its content (JSON content is read
    leaf by leaf as well as as text) and in its tool calls' arguments."""
    out = _text_values(entry.content)
    stripped = entry.content.lstrip()
    if stripped[:1] in ("{", "["):
        out.update(dict.fromkeys(call_values(entry.content)))
    for call in entry.tool_calls:
        out.update(dict.fromkeys(call_values(call.arguments)))
    return list(out)


def step_values(entry: Entry) -> list[str]:
    """The values an assistant step *uses*: its calls' arguments and its text."""
    out: dict[str, None] = {}
    for call in entry.tool_calls:
        out.update(dict.fromkeys(call_values(call.arguments)))
    out.update(_text_values(entry.content))
    return list(out)


def _key(value: str) -> str:
    return value.casefold()


def _scan(transcript: Transcript) -> Iterator[tuple[int, Entry, list[tuple[str, int]]]]:
    """One pass: for each assistant step, its index, entry and ``(value, source index)``."""
    first: dict[str, int] = {}
    for i, entry in enumerate(transcript.entries):
        if entry.role == "assistant":
            used = step_values(entry)
            refs = [(v, first[k]) for v in used if (k := _key(v)) in first]
            yield i, entry, refs
        for v in entry_values(entry):
            first.setdefault(_key(v), i)


def step_references(transcript: Transcript) -> list[StepRefs]:
    """For each assistant step, the values it uses that first appeared in an earlier
    entry, with that entry's id (one pass over the transcript)."""
    entries = transcript.entries
    return [
        StepRefs(step=i, step_id=entry.id, refs=tuple((v, entries[j].id) for v, j in refs))
        for i, entry, refs in _scan(transcript)
    ]


def _handle_scan(transcript: Transcript) -> Iterator[tuple[int, Entry, list[tuple[str, int]]]]:
    """Like :func:`_scan`, for the handles (:mod:`salience.scorer.handles`) a step's calls
    copy: per assistant step with calls, ``(handle, source index)`` of each handle of its
    arguments that an earlier entry introduced (its content or its calls' arguments)."""
    first: dict[str, int] = {}
    for i, entry in enumerate(transcript.entries):
        args = call_text(entry)
        if entry.role == "assistant" and args:
            yield i, entry, [(t, first[t]) for t in tokens(args) if t in first]
        for h in entry_handles(entry, args):
            first.setdefault(h, i)


#: Argument strings longer than this are not looked for as phrases (a file's content is
#: not a copied phrase, and the look-up stays linear in the transcript's text).
_PHRASE_MAX = 200


def _phrase_scan(transcript: Transcript) -> Iterator[tuple[int, Entry, list[tuple[str, int]]]]:
    """Like :func:`_scan`, for the argument strings a step's calls copy as they stand: per
    assistant step with calls, ``(string, source index)`` of each of its calls' values
    (:func:`~salience.values.call_values`, up to ``_PHRASE_MAX`` characters) that occurs in
    an earlier entry's content or calls' argument leaves, where the first such entry is a
    user turn: what the user typed. A string first written in the system prompt (a policy's
    cabin classes) or the agent's own prose is its vocabulary, not something to keep for the
    call; a result's JSON leaves, ids and handles are credited by :func:`_scan` and
    :func:`_handle_scan` already (crediting every first holder cost held-out airline 0.014 /
    0.012 of its recall)."""
    texts: list[str] = []
    starts: list[int] = []  # where each entry's text starts in the joined text
    joined, joined_n, end = "", 0, 0  # the texts joined by NUL (built when a step needs it)
    for i, entry in enumerate(transcript.entries):
        args = call_text(entry)
        if entry.role == "assistant" and args and texts:
            if joined_n != len(texts):
                joined, joined_n = "\0".join(texts), len(texts)
            refs: list[tuple[str, int]] = []
            for call in entry.tool_calls:
                for value in call_values(call.arguments):
                    if len(value) <= _PHRASE_MAX and (at := joined.find(value)) >= 0:
                        j = bisect.bisect_right(starts, at) - 1
                        if transcript.entries[j].role == "user":
                            refs.append((value, j))
            yield i, entry, refs
        text = f"{entry.content}\n{args}" if args else entry.content
        starts.append(end)
        end += len(text) + 1  # and its separator
        texts.append(text)


def hindsight_labels(transcript: Transcript) -> list[EntryLabel]:
    """The hindsight label of every entry of ``transcript``, in order."""
    entries = transcript.entries
    # Assistant entries at indices <= j, so that needed_in = step ordinal - upto[j].
    upto: list[int] = []
    count = 0
    for entry in entries:
        count += entry.role == "assistant"
        upto.append(count)
    needed_in: dict[int, int] = {}
    used_by: dict[int, dict[str, None]] = {}
    values: dict[int, dict[str, None]] = {}
    steps = sorted(itertools.chain(_scan(transcript), _handle_scan(transcript), _phrase_scan(transcript)),
                   key=lambda step: step[0])
    for i, entry, refs in steps:  # a step's values, then its handles, then its phrases
        for value, j in refs:
            needed_in.setdefault(j, upto[i] - upto[j])
            used_by.setdefault(j, {})[entry.id] = None
            values.setdefault(j, {})[value] = None
    return [
        EntryLabel(needed=True, needed_in=needed_in[j], used_by=tuple(used_by[j]), values=tuple(values[j]))
        if j in needed_in
        else EntryLabel(needed=False)
        for j in range(len(entries))
    ]


# -- labelled transcripts ------------------------------------------------------


def label_transcript(transcript: Transcript, *, overwrite: bool = False) -> Transcript:
    """A copy of ``transcript`` with hindsight labels: ``label`` 1.0 (needed) or 0.0,
    ``meta["needed_in"]`` and ``meta["used_by"]`` (a list of step ids).

    Entries that already have a label are left as they are unless ``overwrite``.
    The input is never modified.
    """
    new = []
    for entry, lab in zip(transcript.entries, hindsight_labels(transcript)):
        if entry.label is not None and not overwrite:
            new.append(entry)
            continue
        meta = {**entry.meta, "needed_in": lab.needed_in, "used_by": list(lab.used_by)}
        new.append(entry.replace(label=1.0 if lab.needed else 0.0, meta=meta))
    return transcript.replace(entries=tuple(new))


def _has_evidence(transcript: Transcript) -> bool:
    return any(q.evidence for q in transcript.queries)


def question_shares(transcript: Transcript) -> dict[str, float]:
    """Each evidence entry's *question share*: the sum, over the queries that list it as
    evidence, of one over the number of that query's evidence entries (ids that name no
    entry of ``transcript`` are not counted). A query's evidence recall is the share of
    its evidence entries kept, so this is what keeping the entry adds to the recall summed
    over the queries; entries no query cites are absent.

    >>> from salience import Query
    >>> t = Transcript(id="c", entries=(Entry(id="a", role="user", content="x"),
    ...     Entry(id="b", role="assistant", content="y"), Entry(id="c", role="user", content="z")),
    ...     queries=(Query(text="q1", evidence=("a", "b")), Query(text="q2", evidence=("a",))))
    >>> question_shares(t)
    {'a': 1.5, 'b': 0.5}
    """
    ids = {e.id for e in transcript.entries}
    shares: dict[str, float] = {}
    for query in transcript.queries:
        evidence = [eid for eid in dict.fromkeys(query.evidence) if eid in ids]
        for eid in evidence:
            shares[eid] = shares.get(eid, 0.0) + 1.0 / len(evidence)
    return shares


def evidence_labels(transcript: Transcript, *, overwrite: bool = False) -> Transcript:
    """A copy of ``transcript`` labelled from its queries: 1.0 for entries that are
    evidence of any query, 0.0 otherwise; ``meta["evidence_of"]`` lists the indices
    of the queries each entry is evidence of, and ``meta["question_share"]`` its
    :func:`question_shares` (0.0 for an entry no query cites), which training weights a
    conversation's prior by, also once the queries are gone.

    Entries that already have a label are left as they are unless ``overwrite``.
    A transcript without any query evidence is a :class:`TranscriptError`.
    """
    if not _has_evidence(transcript):
        raise TranscriptError(
            f"transcript {transcript.id!r}: evidence labels need queries with evidence "
            f"(got {len(transcript.queries)} queries and no evidence); use hindsight labels instead"
        )
    of: dict[str, list[int]] = {}
    for q, query in enumerate(transcript.queries):
        for eid in query.evidence:
            lst = of.setdefault(eid, [])
            if not lst or lst[-1] != q:
                lst.append(q)
    shares = question_shares(transcript)
    new = []
    for entry in transcript.entries:
        if entry.label is not None and not overwrite:
            new.append(entry)
            continue
        queries = of.get(entry.id, [])
        meta = {**entry.meta, "evidence_of": queries, "question_share": shares.get(entry.id, 0.0)}
        new.append(entry.replace(label=1.0 if queries else 0.0, meta=meta))
    return transcript.replace(entries=tuple(new))


def resolve_mode(transcript: Transcript, mode: str | LabelMode = LabelMode.AUTO) -> LabelMode:
    """The concrete mode (hindsight or evidence) that ``mode`` means for ``transcript``."""
    mode = LabelMode.parse(mode)
    if mode is LabelMode.AUTO:
        return LabelMode.EVIDENCE if _has_evidence(transcript) else LabelMode.HINDSIGHT
    return mode


def _label_one(transcript: Transcript, mode: LabelMode, overwrite: bool) -> Transcript:
    if resolve_mode(transcript, mode) is LabelMode.EVIDENCE:
        return evidence_labels(transcript, overwrite=overwrite)
    return label_transcript(transcript, overwrite=overwrite)


@overload
def label(transcripts: Transcript, *, mode: str | LabelMode = ..., overwrite: bool = ...) -> Transcript: ...
@overload
def label(
    transcripts: Iterable[Transcript], *, mode: str | LabelMode = ..., overwrite: bool = ...
) -> list[Transcript]: ...


def label(
    transcripts: Transcript | Iterable[Transcript],
    *,
    mode: str | LabelMode = LabelMode.AUTO,
    overwrite: bool = False,
) -> Transcript | list[Transcript]:
    """Labelled copies of ``transcripts`` (one transcript gives one back).

    ``mode``: ``"auto"`` (evidence labels where a transcript's queries list evidence,
    hindsight labels elsewhere), ``"hindsight"`` or ``"evidence"``; anything else is
    a ``ValueError``. ``mode="evidence"`` on a transcript without query evidence is a
    :class:`TranscriptError`.

    >>> label([], mode="oracle")
    Traceback (most recent call last):
    ...
    salience.errors.ParameterError: label mode must be one of 'auto', 'hindsight', 'evidence' (got 'oracle')
    """
    parsed = LabelMode.parse(mode)
    if isinstance(transcripts, Transcript):
        return _label_one(transcripts, parsed, overwrite)
    return [_label_one(t, parsed, overwrite) for t in transcripts]
