"""``salience compact``: compact messages or transcripts to a token budget, with an archive.

Usage::

    salience compact FILE --budget N [--query Q] [--phase P] [--policy NAME] [--scorer S]
                     [--format openai|anthropic|jsonl] [--out FILE] [--archive FILE] [--transcript ID]
                     [--profile FILE] [--keep-pins]

What ``FILE`` may hold and what the options mean: :mod:`salience.cli.compaction`
(shared with ``salience inspect``). The output has the input's format (JSONL for any
transcript layout); a one-line summary goes to stderr.

The archive (``--archive FILE``, :func:`archive_document`) is JSON: for each
transcript, every entry that was trimmed, stubbed or dropped, whole, with its id,
its index, what happened to it and its original message; plus what
:func:`restore_archive` needs to put the input back exactly from the compacted
output.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from salience.cli.compaction import (
    add_common_arguments,
    check_phase,
    compact_one,
    counts_text,
    make_compactor,
    parse_budget,
    policy_for,
    read_input,
    read_profile,
    resolve_scorer,
    select_transcripts,
    transcript_tokens,
    warn_fallback,
)
from salience.cli.scorers import parse_scorer
from salience.errors import SalienceError

if TYPE_CHECKING:
    from salience.selector.compactor import Compaction
    from salience.transcript import Entry

__all__ = ["ARCHIVE_VERSION", "add_parser", "archive_document", "restore_archive", "run"]

#: The ``"salience_archive"`` version written by :func:`archive_document`.
ARCHIVE_VERSION = 1


def _message_index(loaded_format: str, messages: Sequence[Any] | None) -> Any:
    """A function from a source entry (and its position) to the index of the input message it came from."""
    if loaded_format != "anthropic":
        return lambda entry, position: position
    assert messages is not None
    base: dict[str, int] = {}
    for j, m in enumerate(messages):
        mid = m.get("id") if isinstance(m, Mapping) else None
        base[mid if isinstance(mid, str) and mid else f"m{j}"] = j

    def index(entry: Entry, position: int) -> int | None:
        if entry.role == "system" and entry.id == "system":
            return None
        if entry.id in base:
            return base[entry.id]
        return base.get(entry.id.rsplit(".", 1)[0])

    return index


def _archive_record(result: Compaction, *, kind: str, source_messages: list[Any], output_messages: list[Any],
                    system: Any = None) -> dict[str, Any]:
    """The archive of one compaction (see :func:`archive_document`)."""
    from salience.datasets.jsonl import dump_transcript
    from salience.tokens import default_counter

    counter = default_counter()
    source = result.source
    index_of = _message_index(kind, source_messages)
    canonical = {m["id"]: m for m in dump_transcript(source)["messages"]} if result.archive else {}
    entries = []
    originals: dict[str, Any] = {}
    restore: dict[str, Any] = {"count": len(source_messages)}
    for i, e in enumerate(source.entries):
        if e.id not in result.archive:
            continue
        entries.append({
            "id": e.id,
            "index": i,
            "option": str(result.choices[e.id]),
            "role": e.role,
            "name": e.name,
            "tokens": counter.count_entry(e),
            "message": canonical[e.id],
        })
        j = index_of(e, i)
        if j is None:
            restore["system"] = system
        else:
            originals[str(j)] = source_messages[j]
    sources: list[int] = []
    for i, e in enumerate(source.entries):
        if e.id in result.choices and str(result.choices[e.id]) == "drop":
            continue
        j = index_of(e, i)
        if j is not None and (not sources or sources[-1] != j):
            sources.append(j)
    restore["sources"] = sources
    restore["messages"] = originals
    record: dict[str, Any] = {
        "id": source.id,
        "budget": result.budget,
        "tokens_before": result.source_tokens,
        "tokens_after": result.tokens,
        "entries": entries,
        "restore": restore,
    }
    if len(sources) != len(output_messages):  # pragma: no cover - a rendering this module does not foresee
        record["restore"] = None
    return record


def archive_document(kind: str, records: list[dict[str, Any]]) -> dict[str, Any]:
    """The JSON document ``--archive`` writes.

    ``{"salience_archive": 1, "format": kind, "transcripts": [record, ...]}``; each
    record has ``id``, ``budget``, ``tokens_before``, ``tokens_after``, ``entries``
    (each archived entry: ``id``, ``index`` in the input transcript, ``option``
    ``trim``/``stub``/``drop``, ``role``, ``name``, ``tokens``, and ``message``: the
    entry whole as a canonical message, see :mod:`salience.datasets.jsonl`), and
    ``restore`` (``count`` of input messages, ``sources``: the input index of each
    output message, ``messages``: the original input messages that changed, by
    index, ``system`` when the Anthropic system prompt changed, ``queries`` of a
    JSONL transcript) for :func:`restore_archive`.
    """
    return {"salience_archive": ARCHIVE_VERSION, "format": kind, "transcripts": records}


def _restore_messages(output: Sequence[Any], restore: Mapping[str, Any]) -> list[Any]:
    by_source = dict(zip(restore["sources"], output, strict=True))
    originals = restore["messages"]
    out = []
    for j in range(restore["count"]):
        key = str(j)
        if key in originals:
            out.append(originals[key])
        elif j in by_source:
            out.append(by_source[j])
        else:
            raise SalienceError(f"archive: input message {j} is neither archived nor in the compacted output")
    return out


def restore_archive(output: Any, archive: Mapping[str, Any]) -> Any:
    """The input of ``salience compact`` from its output and its ``--archive`` document.

    ``output``: what ``compact`` wrote, parsed: the JSON value (a message list or an
    object with ``messages``) for OpenAI and Anthropic input; for JSONL, the list of
    the output lines' objects. Returns the same shape with every trimmed, stubbed or
    dropped entry put back whole (JSONL: the canonical form of the input transcripts,
    queries included).
    """
    if not isinstance(archive, Mapping) or archive.get("salience_archive") != ARCHIVE_VERSION:
        raise SalienceError("archive: not a salience archive (no 'salience_archive': 1)")
    records = archive["transcripts"]
    if archive["format"] == "jsonl":
        by_id = {r["id"]: r for r in records}
        out = []
        for obj in output:
            record = by_id.get(obj.get("id"))
            if record is None:
                out.append(obj)
                continue
            if record["restore"] is None:
                raise SalienceError(f"archive: transcript {record['id']!r} cannot be restored exactly "
                                    "(see its 'entries')")
            restored = dict(obj)
            restored["messages"] = _restore_messages(obj["messages"], record["restore"])
            if record["restore"].get("queries"):
                restored["queries"] = record["restore"]["queries"]
            out.append(restored)
        return out
    (record,) = records
    restore = record["restore"]
    if restore is None:
        raise SalienceError("archive: this archive cannot restore the input exactly (see its 'entries')")
    if isinstance(output, Mapping):
        restored_doc = dict(output)
        restored_doc["messages"] = _restore_messages(output["messages"], restore)
        if "system" in restore:
            restored_doc["system"] = restore["system"]
        return restored_doc
    return _restore_messages(output, restore)


def _summary(results: Sequence[Compaction], budget_text: str) -> str:
    before = sum(r.source_tokens for r in results)
    after = sum(r.tokens for r in results)
    what = "" if len(results) == 1 else f"{len(results):,} transcripts, "
    each = "" if len(results) == 1 else " each"
    phases = {r.phase.value for r in results if r.phase is not None}
    phase = f", phase {', '.join(sorted(phases))}" if phases else ""
    over = sum(r.over_budget for r in results)
    flag = "" if not over else f"; OVER BUDGET (pins only): {over:,} transcript{'s' if over > 1 else ''}"
    return (f"compacted {what}{before:,} -> {after:,} tokens (budget {budget_text}{each}{phase}): "
            f"{counts_text(results)}{flag}")


def _write(path: str | None, text: str) -> None:
    if path is None:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise SalienceError(f"cannot write {path}: {exc.strerror or exc}") from None


def _json_line(obj: Any, indent: int | None = None) -> str:
    """``obj`` as JSON text, UTF-8 as it is, or with ``\\u`` escapes when it holds lone
    surrogates (which UTF-8 cannot carry; JSON readers read the escapes back as they were)."""
    text = json.dumps(obj, ensure_ascii=False, indent=indent)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(obj, ensure_ascii=True, indent=indent)
    return text


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "compact",
        help="compact messages or transcripts to a token budget",
        description="Keep, trim, stub or drop each entry so that the most important ones fit the budget, "
        "tool calls and results stay paired, and the output has the input's format. A one-line summary goes "
        "to stderr.",
    )
    add_common_arguments(parser, budget_required=True)
    parser.add_argument("-o", "--out", metavar="FILE", help="where to write the result (default: stdout)")
    parser.add_argument("--archive", metavar="FILE",
                        help="write what was trimmed, stubbed or dropped, whole, as JSON (restorable)")
    parser.add_argument("--keep-pins", action="store_true",
                        help="when the pinned entries alone exceed the budget, keep them (the result is over "
                        "budget, and the summary says so) instead of failing")
    parser.set_defaults(handler=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """``salience compact``: see the module doc."""
    from salience.datasets.jsonl import dump_transcript

    parse_budget(args.budget)  # a bad budget is reported before any work
    phase = check_phase(args.phase)
    scorer, note = resolve_scorer(args.scorer)
    profile = read_profile(args.profile)
    loaded = read_input(args.file, args.format)
    over = "keep_pins" if args.keep_pins else "raise"
    results: list[Compaction] = []
    records: list[dict[str, Any]] = []
    if loaded.format == "jsonl":
        lines = []
        for t in select_transcripts(loaded, args.transcript):
            budget = parse_budget(args.budget, transcript_tokens(t))
            compactor = make_compactor(scorer, policy=policy_for(t.domain, phase, args.policy, profile),
                                       on_over_budget=over, profile=profile)
            result = compact_one(compactor, t, budget=budget, query=args.query, phase=phase)
            obj = dump_transcript(result.transcript)
            lines.append(_json_line(obj))
            results.append(result)
            if args.archive:
                source_messages = dump_transcript(t)["messages"]
                record = _archive_record(result, kind="jsonl", source_messages=source_messages,
                                         output_messages=obj["messages"])
                if t.queries and record["restore"] is not None:
                    record["restore"]["queries"] = dump_transcript(t)["queries"]
                records.append(record)
        text = "".join(line + "\n" for line in lines)
    else:
        if args.transcript is not None:
            raise SalienceError(f"--transcript picks a transcript from a JSONL file; {loaded.path} holds one "
                                f"{loaded.format} message list")
        assert loaded.messages is not None
        source = loaded.transcript()
        budget = parse_budget(args.budget, transcript_tokens(source))
        compactor = make_compactor(scorer, policy=policy_for(None, phase, args.policy, profile),
                                   on_over_budget=over, profile=profile)
        # the Transcript (named after the file) rendered back in the input's format
        result = compact_one(compactor, source, budget=budget, query=args.query, phase=phase, format=loaded.format)
        results.append(result)
        doc: Any = result.messages
        if loaded.container is not None:
            doc = dict(loaded.container)
            doc["messages"] = result.messages
            if loaded.format == "anthropic" and ("system" in loaded.container or result.system is not None):
                doc["system"] = result.system
        if args.archive:
            records.append(_archive_record(result, kind=loaded.format, source_messages=list(loaded.messages),
                                           output_messages=list(result.messages), system=loaded.system))
        text = _json_line(doc, indent=2) + "\n"
    for record in records:
        if record["restore"] is None:  # pragma: no cover - a rendering this module does not foresee
            print(f"salience: warning: the archive of transcript {record['id']!r} lists what left but cannot "
                  "restore the input exactly", file=sys.stderr)
    if args.archive:
        _write(args.archive, _json_line(archive_document(loaded.format, records), indent=1) + "\n")
    _write(args.out, text)
    warn_fallback(note, results)
    budget_text = args.budget.strip() if "%" in args.budget else f"{parse_budget(args.budget):,}"
    print(_summary(results, budget_text), file=sys.stderr)
    parse_scorer(args.scorer).warn_if_deprecated()
    return 0


# --------------------------------------------------------------------------
