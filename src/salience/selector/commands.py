"""``salience compact`` and ``salience inspect``: the compactor on files.

Usage::

    salience compact FILE --budget N [--query Q] [--phase P] [--policy NAME] [--scorer S]
                     [--format openai|anthropic|jsonl] [--out FILE] [--archive FILE] [--transcript ID]
                     [--profile FILE] [--keep-pins]
    salience inspect FILE [--budget N] [--query Q] [--phase P] [--policy NAME] [--scorer S]
                     [--format ...] [--transcript ID] [--profile FILE] [--limit N]

What ``FILE`` may hold (:func:`read_input`; ``--format`` forces the choice):

* a JSON list of messages: OpenAI's or Anthropic's, told apart by
  :func:`salience.selector.compactor.detect_format` (Anthropic when a message has
  ``tool_use``, ``tool_result`` or other Anthropic blocks);
* a JSON object with a ``messages`` list (a request body): Anthropic's when it has a
  ``system`` key or Anthropic blocks, else OpenAI's. Its other keys (``model``,
  ``tools``...) are written back unchanged around the compacted messages;
* canonical JSONL (one transcript per line; a one-line file holding an object with
  OpenAI-style ``messages`` and no ``system`` key is read as JSONL), or any other
  layout :func:`salience.load_transcripts` knows (tau-bench, SWE-agent, ...): each
  transcript is compacted (``--transcript ID`` picks one) and the output is
  canonical JSONL.

``--budget`` is a number of tokens, or a percentage of each transcript's tokens
(``25%``). ``--scorer`` is a scorer file written by ``salience train``, an MLflow
``models:/`` or ``runs:/`` URI, a baseline name (``recency``, ``keyword``, ``bm25``,
``embedding``, ``fusion``, ``random``, ``oracle``) or ``default`` (the bundled
scorer; when it is missing the compactor falls back to a recency and role prior,
and says so on stderr). ``--policy`` names the phase policy (``coding``,
``customer_service``, ``chat`` or a domain name such as ``airline``); without it each
transcript's domain decides, and a ``--phase`` that policy does not have picks the
policy that has it (so ``--phase edit`` on a bare message list masks as a coding
agent). ``--profile FILE`` applies a profile ``salience tune`` wrote (a policy it holds
comes before the domain's); ``--budget``, ``--policy`` and ``--keep-pins`` win over it.

The archive (``--archive FILE``, :func:`archive_document`) is JSON: for each
transcript, every entry that was trimmed, stubbed or dropped, whole, with its id,
its index, what happened to it and its original message; plus what
:func:`restore_archive` needs to put the input back exactly from the compacted
output.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from salience.errors import SalienceError, ScorerError

if TYPE_CHECKING:
    from rich.console import Console

    from salience.selector.compactor import Compaction, Compactor
    from salience.transcript import Entry, Transcript

__all__ = [
    "ARCHIVE_VERSION",
    "INPUT_FORMATS",
    "LoadedInput",
    "add_compact_parser",
    "add_inspect_parser",
    "archive_document",
    "parse_budget",
    "read_input",
    "resolve_scorer",
    "restore_archive",
    "run_compact",
    "run_inspect",
]

#: What ``--format`` accepts.
INPUT_FORMATS: tuple[str, ...] = ("openai", "anthropic", "jsonl")
#: The ``"salience_archive"`` version written by :func:`archive_document`.
ARCHIVE_VERSION = 1
#: Share of the transcript's tokens ``salience inspect`` uses when no budget is given.
INSPECT_SHARE = 0.25

_PERCENT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*%\s*$")
_COLOURS = {"full": "green", "trim": "yellow", "stub": "magenta", "drop": "red"}
_DEFAULT_WARNING = "salience: the default scorer is unavailable"


def _phases() -> list[str]:
    from salience.selector.masking import Phase

    return [p.value for p in Phase]


# --------------------------------------------------------------------------
# input
# --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LoadedInput:
    """What a ``FILE`` argument holds.

    ``format``: ``"openai"`` or ``"anthropic"`` (a message list: ``messages``, the
    Anthropic ``system`` prompt, and ``container``, the JSON object around the
    messages or None for a bare list), or ``"jsonl"`` (``transcripts``).
    """

    path: str
    format: str
    messages: list[Any] | None = None
    system: Any = None
    container: dict[str, Any] | None = None
    transcripts: tuple[Transcript, ...] = field(default=())

    def transcript(self) -> Transcript:
        """The message list as a :class:`Transcript` (message formats only)."""
        from salience.transcript import Transcript

        assert self.messages is not None
        tid = Path(self.path).stem or "transcript"
        if self.format == "anthropic":
            return Transcript.from_anthropic(self.messages, system=self.system, id=tid)
        return Transcript.from_openai(self.messages, id=tid)


def _looks_like_messages(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(m, Mapping) and "role" in m for m in value)


def read_input(path: str | Path, format: str | None = None) -> LoadedInput:
    """Read ``path`` (rules in the module doc); ``format`` forces ``"openai"``, ``"anthropic"`` or ``"jsonl"``.

    Raises :class:`~salience.errors.SalienceError` (one line, naming the file) for a
    file that cannot be read or holds nothing compactable.
    """
    from salience.formats import load_transcripts
    from salience.selector.compactor import detect_format

    name = str(path)
    if format is not None and format not in INPUT_FORMATS:
        raise SalienceError(f"--format must be one of {', '.join(INPUT_FORMATS)} (got {format!r})")
    p = Path(path)
    if not p.is_file():
        raise SalienceError(f"{name}: no such file" if not p.exists() else f"{name}: not a file")
    if format == "jsonl":
        return LoadedInput(name, "jsonl", transcripts=tuple(load_transcripts(p)))
    try:
        text = p.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SalienceError(f"{name}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise SalienceError(f"{name}: cannot read ({exc.strerror or exc})") from None
    try:
        doc: Any = json.loads(text)
    except json.JSONDecodeError as exc:
        if format is not None:
            raise SalienceError(f"{name}: not a JSON file of {format} messages ({exc.msg} at line {exc.lineno}, "
                                f"column {exc.colno})") from None
        return LoadedInput(name, "jsonl", transcripts=tuple(load_transcripts(p)))
    if _looks_like_messages(doc):
        fmt = format or detect_format(doc)
        return LoadedInput(name, fmt, messages=doc)
    if isinstance(doc, dict) and isinstance(doc.get("messages"), list) and _looks_like_messages(doc["messages"]):
        messages = doc["messages"]
        if format is None:
            if "system" in doc:
                fmt = "anthropic"
            else:
                fmt = detect_format(messages)
                one_line = len([line for line in text.splitlines() if line.strip()]) == 1
                if fmt == "openai" and one_line:
                    return LoadedInput(name, "jsonl", transcripts=tuple(load_transcripts(p)))
        else:
            fmt = format
        system = doc.get("system") if fmt == "anthropic" else None
        return LoadedInput(name, fmt, messages=messages, system=system, container=doc)
    if format is not None:
        raise SalienceError(f"{name}: expected a JSON list of {format} messages or an object with a 'messages' list "
                            f"(got a JSON {type(doc).__name__})")
    return LoadedInput(name, "jsonl", transcripts=tuple(load_transcripts(p)))


def _select(loaded: LoadedInput, transcript_id: str | None, *, first: bool = False) -> list[Transcript]:
    """The transcripts to work on (``--transcript``), for a JSONL input."""
    transcripts = list(loaded.transcripts)
    if not transcripts:
        raise SalienceError(f"{loaded.path}: no transcripts")
    if transcript_id is not None:
        chosen = [t for t in transcripts if t.id == transcript_id]
        if not chosen:
            ids = ", ".join(repr(t.id) for t in transcripts[:5])
            more = f" and {len(transcripts) - 5} more" if len(transcripts) > 5 else ""
            raise SalienceError(f"{loaded.path}: no transcript with id {transcript_id!r} (it has {ids}{more})")
        return chosen[:1]
    return transcripts[:1] if first else transcripts


# --------------------------------------------------------------------------
# arguments
# --------------------------------------------------------------------------


def parse_budget(text: str | None, tokens: int | None = None) -> int | None:
    """``--budget`` as tokens: a positive int, or ``P%`` of ``tokens``; ``None`` stays None.

    >>> parse_budget("2000"), parse_budget("25%", tokens=1000), parse_budget(None)
    (2000, 250, None)
    >>> parse_budget("0")
    Traceback (most recent call last):
    ...
    salience.errors.SalienceError: --budget must be a positive number of tokens or a percentage such as 25% (got '0')
    """
    if text is None:
        return None
    bad = SalienceError(f"--budget must be a positive number of tokens or a percentage such as 25% (got {text!r})")
    match = _PERCENT.match(text)
    if match:
        share = float(match.group(1)) / 100
        if not 0 < share:
            raise bad
        if tokens is None:
            return None
        return max(1, int(tokens * share))
    try:
        value = int(text.strip().replace("_", "").replace(",", ""))
    except ValueError:
        raise bad from None
    if value < 1:
        raise bad
    return value


def _check_phase(text: str | None) -> str | None:
    if text is None:
        return None
    phases = _phases()
    if text.lower() not in phases:
        raise SalienceError(f"--phase must be one of {', '.join(phases)} (got {text!r})")
    return text.lower()


def resolve_scorer(spec: str | None) -> tuple[Any, str | None]:
    """``(scorer, note)`` for ``--scorer``: ``scorer`` is None for the compactor's default
    (the note then says why it is a fallback, or is None when the bundled scorer loads).

    Raises :class:`~salience.errors.SalienceError` for a spec that names nothing.
    """
    from salience.scorer.baselines import BASELINES, make_baseline

    if spec is None or spec == "default":
        try:
            from salience.scorer.model import default_scorer

            return default_scorer(), None
        except (ScorerError, ImportError) as exc:
            return None, f"the default scorer is unavailable ({exc}); using a recency and role prior instead"
    if spec in BASELINES:
        return make_baseline(spec), None
    if spec.startswith(("models:/", "runs:/")) or Path(spec).is_file():
        from salience.scorer.model import ImportanceScorer

        return ImportanceScorer.load(spec), None
    names = ", ".join(sorted(BASELINES))
    raise SalienceError(f"--scorer must be a scorer file, a models:/ or runs:/ URI, a baseline name ({names}) or "
                        f"'default' (got {spec!r}: no such file)")


def _policy(domain: str | None, phase: str | None, name: str | None, profile: dict[str, Any] | None = None) -> Any:
    """The policy for a transcript: ``--policy``, else the profile's, else the domain's, else
    (for a ``--phase`` the domain's policy lacks) the first default policy that has the phase."""
    from salience.selector.masking import Phase, PhasePolicy

    if name is not None:
        return PhasePolicy.for_domain(name)
    if phase is None or (profile is not None and profile.get("policy") is not None):
        return None
    own = PhasePolicy.for_domain(domain)
    if Phase(phase) in own.rules:
        return None
    for candidate in (PhasePolicy.coding(), PhasePolicy.customer_service(), PhasePolicy.chat()):
        if Phase(phase) in candidate.rules:
            return candidate
    return None


def _add_common(parser: argparse.ArgumentParser, *, budget_required: bool) -> None:
    parser.add_argument("file", metavar="FILE",
                        help="OpenAI or Anthropic messages (JSON), canonical JSONL, or any layout salience knows")
    parser.add_argument("--budget", required=budget_required, metavar="N",
                        help="token budget: a number of tokens, or a percentage of each transcript's tokens (25%%)"
                        + ("" if budget_required else f" (default: {INSPECT_SHARE:.0%} of the transcript's tokens)"))
    parser.add_argument("--query", metavar="Q", help="what the next step is about (a query-aware selection)")
    parser.add_argument("--phase", metavar="P",
                        help=f"the agent's phase for masking old tool outputs: one of {', '.join(_phases())} "
                        "(default: detected from the latest tool calls)")
    parser.add_argument("--policy", metavar="NAME",
                        help="phase policy: coding, customer_service, chat or a domain name (default: the "
                        "transcript's domain)")
    parser.add_argument("--scorer", metavar="S",
                        help="a scorer file, a models:/ URI, a baseline name (recency, keyword, bm25, embedding, "
                        "fusion, random, oracle) or 'default' (default: default)")
    parser.add_argument("--format", choices=INPUT_FORMATS, default=None,
                        help="force the input format (default: detected from the content)")
    parser.add_argument("--transcript", metavar="ID", help="the transcript to use from a JSONL or other layout file")
    parser.add_argument("--profile", metavar="FILE",
                        help="a profile JSON file as 'salience tune' writes it: its tuned parameters (pins, "
                        "thresholds, trim and stub settings, a policy of your own) apply; --policy and --keep-pins "
                        "still win")


# --------------------------------------------------------------------------
# compaction
# --------------------------------------------------------------------------


def _profile(path: str | None) -> dict[str, Any] | None:
    """The Compactor parameters of ``--profile``, read and checked before any work."""
    if path is None:
        return None
    from salience.selector.compactor import load_profile

    try:
        return dict(load_profile(path))
    except ValueError as exc:
        raise SalienceError(f"--profile: {exc}") from None


def _compactor(scorer: Any, *, policy: Any = None, on_over_budget: str = "raise",
               profile: dict[str, Any] | None = None) -> Compactor:
    from salience.selector.compactor import Compactor

    return Compactor(scorer=scorer, policy=policy, on_over_budget=on_over_budget, profile=profile)


def _compact(compactor: Compactor, messages: Any, **kwargs: Any) -> Compaction:
    from salience.errors import BudgetError

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=re.escape(_DEFAULT_WARNING))
        try:
            return compactor.compact(messages, **kwargs)
        except BudgetError as exc:
            raise BudgetError(f"{exc} (on the command line: --keep-pins)", budget=exc.budget,
                              required=exc.required) from None


def _tokens(transcript: Transcript) -> int:
    from salience.tokens import default_counter

    counter = default_counter()
    return sum(counter.count_entry(e) for e in transcript.entries)


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
    from salience.formats.jsonl import dump_transcript
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
    entry whole as a canonical message, see :mod:`salience.formats.jsonl`), and
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


def _counts(results: Sequence[Compaction]) -> str:
    parts = [f"{sum(len(r.kept) for r in results):,} kept"]
    for name in ("trimmed", "stubbed", "dropped"):
        parts.append(f"{sum(len(getattr(r, name)) for r in results):,} {name}")
    return ", ".join(parts)


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
            f"{_counts(results)}{flag}")


def _warn(note: str | None, results: Sequence[Compaction]) -> None:
    """The scorer's fallback note on stderr, once the work is done, if any entry was scored."""
    if note and any(r.scores is not None for r in results):
        print(f"salience: warning: {note}", file=sys.stderr)


def _write(path: str | None, text: str) -> None:
    if path is None:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise SalienceError(f"cannot write {path}: {exc.strerror or exc}") from None


def _json_line(obj: Any) -> str:
    text = json.dumps(obj, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(obj, ensure_ascii=True)
    return text


def add_compact_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "compact",
        help="compact messages or transcripts to a token budget",
        description="Keep, trim, stub or drop each entry so that the most important ones fit the budget, "
        "tool calls and results stay paired, and the output has the input's format. A one-line summary goes "
        "to stderr.",
    )
    _add_common(parser, budget_required=True)
    parser.add_argument("-o", "--out", metavar="FILE", help="where to write the result (default: stdout)")
    parser.add_argument("--archive", metavar="FILE",
                        help="write what was trimmed, stubbed or dropped, whole, as JSON (restorable)")
    parser.add_argument("--keep-pins", action="store_true",
                        help="when the pinned entries alone exceed the budget, keep them (the result is over "
                        "budget, and the summary says so) instead of failing")
    parser.set_defaults(handler=run_compact)
    return parser


def run_compact(args: argparse.Namespace) -> int:
    """``salience compact``: see the module doc."""
    from salience.formats.jsonl import dump_transcript

    parse_budget(args.budget)  # a bad budget is reported before any work
    phase = _check_phase(args.phase)
    scorer, note = resolve_scorer(args.scorer)
    profile = _profile(args.profile)
    loaded = read_input(args.file, args.format)
    over = "keep_pins" if args.keep_pins else "raise"
    results: list[Compaction] = []
    records: list[dict[str, Any]] = []
    if loaded.format == "jsonl":
        lines = []
        for t in _select(loaded, args.transcript):
            budget = parse_budget(args.budget, _tokens(t))
            compactor = _compactor(scorer, policy=_policy(t.domain, phase, args.policy, profile), on_over_budget=over,
                                   profile=profile)
            result = _compact(compactor, t, budget=budget, query=args.query, phase=phase)
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
        budget = parse_budget(args.budget, _tokens(source))
        compactor = _compactor(scorer, policy=_policy(None, phase, args.policy, profile), on_over_budget=over,
                               profile=profile)
        # the Transcript (named after the file) rendered back in the input's format
        result = _compact(compactor, source, budget=budget, query=args.query, phase=phase, format=loaded.format)
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
        text = json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
    for record in records:
        if record["restore"] is None:  # pragma: no cover - a rendering this module does not foresee
            print(f"salience: warning: the archive of transcript {record['id']!r} lists what left but cannot "
                  "restore the input exactly", file=sys.stderr)
    if args.archive:
        _write(args.archive, json.dumps(archive_document(loaded.format, records), indent=1, ensure_ascii=False)
               + "\n")
    _write(args.out, text)
    _warn(note, results)
    budget_text = args.budget.strip() if "%" in args.budget else f"{parse_budget(args.budget):,}"
    print(_summary(results, budget_text), file=sys.stderr)
    return 0


# --------------------------------------------------------------------------
# inspect
# --------------------------------------------------------------------------


def _preview(entry: Entry, width: int = 80) -> str:
    text = " ".join(entry.content.split())
    if not text and entry.tool_calls:
        text = "; ".join(f"{c.name}({' '.join(c.arguments.split())})" for c in entry.tool_calls)
    return text if len(text) <= width else text[: width - 1] + "…"


def add_inspect_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "inspect",
        help="show each entry's tokens, score and what compaction would do with it",
        description="A table of the transcript's entries: tokens, score, and the option the compactor picks "
        "(full, trim, stub, drop) at the budget. Without --budget, the budget is "
        f"{INSPECT_SHARE:.0%} of the transcript's tokens. When the pinned entries alone exceed the budget, "
        "the cheapest valid selection is shown, flagged over budget.",
    )
    _add_common(parser, budget_required=False)
    parser.add_argument("--limit", type=int, metavar="N", help="show at most N entries (totals cover all)")
    parser.set_defaults(handler=run_inspect)
    return parser


def run_inspect(args: argparse.Namespace) -> int:
    """``salience inspect``: see the module doc."""
    parse_budget(args.budget)
    phase = _check_phase(args.phase)
    if args.limit is not None and args.limit < 1:
        raise SalienceError(f"--limit must be a positive number of entries (got {args.limit})")
    scorer, note = resolve_scorer(args.scorer)
    profile = _profile(args.profile)
    loaded = read_input(args.file, args.format)
    notes: list[str] = []
    if loaded.format == "jsonl":
        chosen = _select(loaded, args.transcript, first=True)
        transcript = chosen[0]
        if args.transcript is None and len(loaded.transcripts) > 1:
            notes.append(f"showing transcript {transcript.id!r}, the first of {len(loaded.transcripts):,} "
                         "(choose one with --transcript ID)")
    else:
        if args.transcript is not None:
            raise SalienceError(f"--transcript picks a transcript from a JSONL file; {loaded.path} holds one "
                                f"{loaded.format} message list")
        transcript = loaded.transcript()
    total = _tokens(transcript)
    budget = parse_budget(args.budget, total)
    if budget is None:
        budget = max(1, int(total * INSPECT_SHARE))
        notes.append(f"budget {budget:,} tokens: {INSPECT_SHARE:.0%} of the transcript's {total:,} "
                     "(no --budget given)")
    compactor = _compactor(scorer, policy=_policy(transcript.domain, phase, args.policy, profile),
                           on_over_budget="keep_pins", profile=profile)
    result = _compact(compactor, transcript, budget=budget, query=args.query, phase=phase)
    scores = result.scores
    if scores is None and scorer is not None and transcript.entries:
        scores = scorer.score(transcript) if args.query is None else scorer.score(transcript, query=args.query)
    print_inspection(result, scores=scores, limit=args.limit, notes=notes)
    _warn(note, [result])
    return 0


def print_inspection(
    result: Compaction,
    *,
    scores: Any = None,
    limit: int | None = None,
    notes: Sequence[str] = (),
    console: Console | None = None,
) -> None:
    """The ``inspect`` table for ``result``: one row per input entry, totals in the footer."""
    from rich.table import Table
    from rich.text import Text

    from salience.cli import stdout
    from salience.tokens import default_counter

    console = console or stdout()
    counter = default_counter()
    source = result.source
    entries = source.entries
    shown = entries if limit is None else entries[:limit]
    rows = []
    for i, e in enumerate(shown):
        option = str(result.choices.get(e.id, "full"))
        tool = e.name or ", ".join(c.name for c in e.tool_calls) or ""
        if e.tool_calls and not e.name:
            tool = "-> " + tool
        score = "-" if scores is None else f"{float(scores[i]):.3f}"
        rows.append([str(i), e.id, e.role, tool, f"{counter.count_entry(e):,}", score, option, _preview(e, 200)])
    names = ["#", "id", "role", "tool/name", "tokens", "score", "option"]
    footers = ["", "total", "", "", f"{result.source_tokens:,}", "", f"-> {result.tokens:,}"]
    widths = [max([len(name), len(foot)] + [len(r[k]) for r in rows]) for k, (name, foot) in
              enumerate(zip(names, footers, strict=True))]
    # fit the console: the content column takes what is left, the tool column gives way first
    spare = console.width - (3 * (len(names) + 1) + 1) - sum(widths)
    if spare < 16:
        cut = min(16 - spare, widths[3] - len(names[3]))
        widths[3] -= cut
        spare += cut
    for r in rows:
        if len(r[3]) > widths[3]:
            r[3] = r[3][: widths[3] - 1] + "…"
    counts = Text()
    for k, name in enumerate(("full", "trim", "stub", "drop")):
        n = sum(1 for e in entries if str(result.choices.get(e.id, "full")) == name)
        counts.append(f"{', ' if k else ''}{n:,} {name}", style=_COLOURS[name])
    title = f"{source.id}: {len(entries):,} entries" + (f", domain {source.domain}" if source.domain else "")
    table = Table(title=title, title_justify="left", show_footer=True, footer_style="bold")
    for name, foot, width in zip(names, footers, widths, strict=True):
        table.add_column(name, footer=foot, no_wrap=True, width=width,
                         justify="right" if name in ("#", "tokens", "score") else "left")
    table.add_column("content", footer=counts, no_wrap=True, overflow="ellipsis", width=max(8, spare))
    for row in rows:
        *cells, option, preview = row
        table.add_row(*(Text(c) for c in cells), Text(option, style=_COLOURS[option]), Text(preview))
    console.print(table)
    if limit is not None and len(entries) > limit:
        console.print(Text(f"… {len(entries) - limit:,} more entries not shown (--limit {limit})"))
    phase = f"phase {result.phase.value}" if result.phase is not None else "nothing needed selecting"
    line = (f"budget {result.budget:,} tokens; {result.source_tokens:,} -> {result.tokens:,} tokens; {phase}; "
            f"{_counts([result])}")
    console.print(Text(line))
    if result.over_budget:
        console.print(Text(f"over budget: the pinned entries alone need {result.tokens:,} tokens", style="bold red"))
    for note in notes:
        console.print(Text(note, style="dim"))
