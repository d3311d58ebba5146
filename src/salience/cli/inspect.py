"""``salience inspect``: each entry's tokens, score and what compaction would do with it.

Usage::

    salience inspect FILE [--budget N] [--query Q] [--phase P] [--policy NAME] [--scorer S]
                     [--format ...] [--transcript ID] [--profile FILE] [--limit N]

What ``FILE`` may hold and what the options mean: :mod:`salience.cli.compaction`
(shared with ``salience compact``). Without ``--budget`` the budget is
:data:`~salience.cli.compaction.INSPECT_SHARE` of the transcript's tokens.
:func:`print_inspection` draws the table (``salience demo`` shows it too).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from salience.cli.common import stdout
from salience.cli.compaction import (
    INSPECT_SHARE,
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
    from rich.console import Console

    from salience.selector.compactor import Compaction
    from salience.transcript import Entry

__all__ = ["add_parser", "print_inspection", "run"]

_COLOURS = {"full": "green", "trim": "yellow", "stub": "magenta", "drop": "red"}


def _preview(entry: Entry, width: int = 80) -> str:
    text = " ".join(entry.content.split())
    if not text and entry.tool_calls:
        text = "; ".join(f"{c.name}({' '.join(c.arguments.split())})" for c in entry.tool_calls)
    return text if len(text) <= width else text[: width - 1] + "…"


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "inspect",
        help="show each entry's tokens, score and what compaction would do with it",
        description="A table of the transcript's entries: tokens, score, and the option the compactor picks "
        "(full, trim, stub, drop) at the budget. Without --budget, the budget is "
        f"{INSPECT_SHARE:.0%} of the transcript's tokens. When the pinned entries alone exceed the budget, "
        "the cheapest valid selection is shown, flagged over budget.",
    )
    add_common_arguments(parser, budget_required=False)
    parser.add_argument("--limit", type=int, metavar="N", help="show at most N entries (totals cover all)")
    parser.set_defaults(handler=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """``salience inspect``: see the module doc."""
    parse_budget(args.budget)
    phase = check_phase(args.phase)
    if args.limit is not None and args.limit < 1:
        raise SalienceError(f"--limit must be a positive number of entries (got {args.limit})")
    scorer, note = resolve_scorer(args.scorer)
    profile = read_profile(args.profile)
    loaded = read_input(args.file, args.format)
    notes: list[str] = []
    if loaded.format == "jsonl":
        chosen = select_transcripts(loaded, args.transcript, first=True)
        transcript = chosen[0]
        if args.transcript is None and len(loaded.transcripts) > 1:
            notes.append(f"showing transcript {transcript.id!r}, the first of {len(loaded.transcripts):,} "
                         "(choose one with --transcript ID)")
    else:
        if args.transcript is not None:
            raise SalienceError(f"--transcript picks a transcript from a JSONL file; {loaded.path} holds one "
                                f"{loaded.format} message list")
        transcript = loaded.transcript()
    total = transcript_tokens(transcript)
    budget = parse_budget(args.budget, total)
    if budget is None:
        budget = max(1, int(total * INSPECT_SHARE))
        notes.append(f"budget {budget:,} tokens: {INSPECT_SHARE:.0%} of the transcript's {total:,} "
                     "(no --budget given)")
    compactor = make_compactor(scorer, policy=policy_for(transcript.domain, phase, args.policy, profile),
                           on_over_budget="keep_pins", profile=profile)
    result = compact_one(compactor, transcript, budget=budget, query=args.query, phase=phase)
    scores = result.scores
    if scores is None and scorer is not None and transcript.entries:
        scores = scorer.score(transcript) if args.query is None else scorer.score(transcript, query=args.query)
    print_inspection(result, scores=scores, limit=args.limit, notes=notes)
    warn_fallback(note, [result])
    parse_scorer(args.scorer).warn_if_deprecated()
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
            f"{counts_text([result])}")
    console.print(Text(line))
    if result.over_budget:
        console.print(Text(f"over budget: the pinned entries alone need {result.tokens:,} tokens", style="bold red"))
    for note in notes:
        console.print(Text(note, style="dim"))
