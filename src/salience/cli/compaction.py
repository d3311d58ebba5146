"""What ``salience compact`` and ``salience inspect`` share: the input file, ``--budget``,
``--phase``, ``--policy``, ``--profile`` and ``--scorer``, and one compaction of one transcript.

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
(``25%``). ``--scorer`` follows :mod:`salience.cli.scorers` (a scorer file, a
``models:/`` or ``runs:/`` URI, a baseline name or ``default``); when the bundled
default scorer is missing the compactor falls back to a recency and role prior, and
says so on stderr. ``--policy`` names the phase policy (``coding``,
``customer_service``, ``chat`` or a domain name such as ``airline``); without it each
transcript's domain decides, and a ``--phase`` that policy does not have picks the
policy that has it (so ``--phase edit`` on a bare message list masks as a coding
agent). ``--profile FILE`` applies a profile ``salience tune`` wrote (a policy it holds
comes before the domain's); ``--budget``, ``--policy`` and ``--keep-pins`` win over it.
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

from salience.cli.scorers import ScorerKind, add_scorer_argument, parse_scorer
from salience.errors import FormatError, LimitError, SalienceError, ScorerError
from salience.limits import check_size, loads

if TYPE_CHECKING:
    from salience.selector.compactor import Compaction, Compactor
    from salience.transcript import Transcript

__all__ = [
    "INPUT_FORMATS",
    "INSPECT_SHARE",
    "LoadedInput",
    "add_common_arguments",
    "check_phase",
    "compact_one",
    "counts_text",
    "make_compactor",
    "parse_budget",
    "policy_for",
    "read_input",
    "read_profile",
    "resolve_scorer",
    "select_transcripts",
    "transcript_tokens",
    "warn_fallback",
]

#: What ``--format`` accepts.
INPUT_FORMATS: tuple[str, ...] = ("openai", "anthropic", "jsonl")
#: Share of the transcript's tokens ``salience inspect`` uses when no budget is given.
INSPECT_SHARE = 0.25

_PERCENT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*%\s*$")
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


def _json_lines(text: str) -> bool:
    """Whether ``text`` has more than one line and its first line is JSON on its own (JSON lines)."""
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) < 2:
        return False
    try:
        json.loads(lines[0])
    except (json.JSONDecodeError, RecursionError):
        return False
    return True


def _looks_like_messages(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(m, Mapping) and "role" in m for m in value)


def read_input(path: str | Path, format: str | None = None) -> LoadedInput:
    """Read ``path`` (rules in the module doc); ``format`` forces ``"openai"``, ``"anthropic"`` or ``"jsonl"``.

    Raises :class:`~salience.errors.SalienceError` (one line, naming the file) for a
    file that cannot be read or holds nothing compactable: ``<file>: not valid JSON:
    line L, column C: <reason>`` for a file that starts as one JSON document (``[`` or
    ``{``) and breaks off, has a trailing comma, or holds ``NaN`` or ``Infinity`` (not
    JSON, and the output must be); a :class:`~salience.errors.LimitError` for a file
    larger or nested deeper than :mod:`salience.limits` allows.
    """
    from salience.datasets import load_transcripts
    from salience.messages.dispatch import detect_format

    name = str(path)
    if format is not None and format not in INPUT_FORMATS:
        raise SalienceError(f"--format must be one of {', '.join(INPUT_FORMATS)} (got {format!r})")
    p = Path(path)
    if not p.is_file():
        raise SalienceError(f"{name}: no such file" if not p.exists() else f"{name}: not a file")
    if format == "jsonl":
        return LoadedInput(name, "jsonl", transcripts=tuple(load_transcripts(p)))
    try:
        check_size(p.stat().st_size, where=name)
        text = p.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SalienceError(f"{name}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise SalienceError(f"{name}: cannot read ({exc.strerror or exc})") from None
    try:
        doc: Any = loads(text, where=name, strict=True)
    except LimitError:
        raise
    except FormatError as exc:
        if format is not None:
            raise SalienceError(f"{name}: not a JSON file of {format} messages ({str(exc).split(': ', 1)[1]})"
                                ) from None
        if _json_lines(text):
            return LoadedInput(name, "jsonl", transcripts=tuple(load_transcripts(p)))
        if text.lstrip()[:1] in ("[", "{"):
            raise  # meant as one JSON document: say where it breaks
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


def select_transcripts(loaded: LoadedInput, transcript_id: str | None, *, first: bool = False) -> list[Transcript]:
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


def check_phase(text: str | None) -> str | None:
    if text is None:
        return None
    phases = _phases()
    if text.lower() not in phases:
        raise SalienceError(f"--phase must be one of {', '.join(phases)} (got {text!r})")
    return text.lower()


def resolve_scorer(spec: str | None) -> tuple[Any, str | None]:
    """``(scorer, note)`` for ``--scorer`` (:mod:`salience.cli.scorers`; None is ``default``):
    ``scorer`` is None for the compactor's own fallback when the bundled scorer is missing
    (the note then says why), else the note is None.

    Raises :class:`~salience.errors.SalienceError` for a value that names nothing.
    """
    parsed = parse_scorer(spec)
    if parsed.kind is ScorerKind.DEFAULT:
        try:
            return parsed.load(), None
        except (ScorerError, ImportError) as exc:
            return None, f"the default scorer is unavailable ({exc}); using a recency and role prior instead"
    return parsed.load(), None


def policy_for(domain: str | None, phase: str | None, name: str | None, profile: dict[str, Any] | None = None) -> Any:
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


def add_common_arguments(parser: argparse.ArgumentParser, *, budget_required: bool) -> None:
    parser.add_argument("file", metavar="FILE",
                        help="OpenAI or Anthropic messages (JSON), canonical JSONL, or any layout salience knows")
    parser.add_argument("--budget", required=budget_required, metavar="N",
                        help="token budget: a number of tokens, or a percentage of each transcript's tokens (25%%)"
                        + ("" if budget_required else f" (default: {INSPECT_SHARE:.0%}% of the transcript's tokens)"))
    parser.add_argument("--query", metavar="Q", help="what the next step is about (a query-aware selection)")
    parser.add_argument("--phase", metavar="P",
                        help=f"the agent's phase for masking old tool outputs: one of {', '.join(_phases())} "
                        "(default: detected from the latest tool calls)")
    parser.add_argument("--policy", metavar="NAME",
                        help="phase policy: coding, customer_service, chat or a domain name (default: the "
                        "transcript's domain)")
    add_scorer_argument(parser)
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


def read_profile(path: str | None) -> dict[str, Any] | None:
    """The Compactor parameters of ``--profile``, read and checked before any work."""
    if path is None:
        return None
    from salience.selector.params import load_profile

    try:
        return dict(load_profile(path))
    except ValueError as exc:
        raise SalienceError(f"--profile: {exc}") from None


def make_compactor(scorer: Any, *, policy: Any = None, on_over_budget: str = "raise",
               profile: dict[str, Any] | None = None) -> Compactor:
    from salience.selector.compactor import Compactor

    return Compactor(scorer=scorer, policy=policy, on_over_budget=on_over_budget, profile=profile)


def compact_one(compactor: Compactor, messages: Any, **kwargs: Any) -> Compaction:
    from salience.errors import BudgetError

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=re.escape(_DEFAULT_WARNING))
        try:
            return compactor.compact(messages, **kwargs)
        except BudgetError as exc:
            raise BudgetError(f"{exc} (on the command line: --keep-pins)", budget=exc.budget,
                              required=exc.required) from None


def transcript_tokens(transcript: Transcript) -> int:
    from salience.tokens import default_counter

    counter = default_counter()
    return sum(counter.count_entry(e) for e in transcript.entries)


def counts_text(results: Sequence[Compaction]) -> str:
    parts = [f"{sum(len(r.kept) for r in results):,} kept"]
    for name in ("trimmed", "stubbed", "dropped"):
        parts.append(f"{sum(len(getattr(r, name)) for r in results):,} {name}")
    return ", ".join(parts)


def warn_fallback(note: str | None, results: Sequence[Compaction]) -> None:
    """The scorer's fallback note on stderr, once the work is done, if any entry was scored."""
    if note and any(r.scores is not None for r in results):
        print(f"salience: warning: {note}", file=sys.stderr)
