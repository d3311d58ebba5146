"""The ``salience`` command line.

Usage::

    salience stats PATH... [--json] [--top N]
    salience label PATH... --out FILE [--mode auto|hindsight|evidence] [--overwrite]
    salience --version

Inputs are files or folders in any layout :func:`salience.load_transcripts` knows.
Exit codes: 0 on success; 2 on bad input (a missing file, a malformed one, a bad
argument), with one line on stderr, ``salience: error: <message>``; 1 on an internal
error (a bug: ``--verbose`` shows its traceback); 130 when interrupted.

Adding a command
----------------
Each command is registered by a function ``add_parser(subparsers)`` that calls
``subparsers.add_parser(NAME, help=..., description=...)``, adds its arguments,
sets ``parser.set_defaults(handler=run)`` where ``run(args) -> int`` does the work,
and returns the parser. List it in :data:`COMMANDS` as ``(NAME, "module:function")``.
Modules are imported only when the parser is built and a command whose module does
not exist (yet) is left out, so keep heavy imports (torch, mlflow) inside ``run``.
Errors for bad input should be raised as :class:`~salience.errors.SalienceError`;
:func:`main` turns them into the one-line message. Helpers for commands:
:func:`add_paths_argument`, :func:`load_inputs`, :func:`progress_bar`, :func:`stdout`.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from salience._version import __version__
from salience.errors import SalienceError

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress

    from salience.stats import Stats
    from salience.transcript import Transcript

__all__ = ["COMMANDS", "add_paths_argument", "build_parser", "load_inputs", "main", "progress_bar", "stdout"]

PROG = "salience"

#: ``(command name, "module:function")``: the function registers the command's parser.
COMMANDS: list[tuple[str, str]] = [
    ("stats", "salience.cli:add_stats_parser"),
    ("label", "salience.cli:add_label_parser"),
    ("train", "salience.training.commands:add_train_parser"),
    ("bench", "salience.training.bench_command:add_bench_parser"),
    ("tune", "salience.training.tune_command:add_tune_parser"),
    ("versions", "salience.training.registry_commands:add_versions_parser"),
    ("promote", "salience.training.registry_commands:add_promote_parser"),
    ("compact", "salience.selector.commands:add_compact_parser"),
    ("demo", "salience.demo:add_demo_parser"),
    ("inspect", "salience.selector.commands:add_inspect_parser"),
]

# --------------------------------------------------------------------------
# helpers for commands
# --------------------------------------------------------------------------


def stdout() -> Console:
    """A rich console on the current ``sys.stdout``.

    Written to a pipe or a file (no terminal to measure), tables get 160 columns
    rather than rich's 80, so wide benchmark tables are not cut; ``COLUMNS`` wins.
    """
    import os

    from rich.console import Console

    width = None if sys.stdout.isatty() or os.environ.get("COLUMNS") else 160
    return Console(file=sys.stdout, highlight=False, soft_wrap=False, width=width)


def progress_bar(*, transient: bool = True) -> Progress:
    """A rich progress bar on stderr (silent when stderr is not a terminal)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(file=sys.stderr)
    return Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=transient,
        disable=not console.is_terminal,
    )


@contextlib.contextmanager
def stage_progress() -> Iterator[Callable[[str, int, int], None]]:
    """A :func:`progress_bar` with one bar per stage, and the ``progress(stage, done, total)``
    callback that fills them (what :func:`~salience.training.train.train_scorer` takes)."""
    with progress_bar() as bar:
        tasks: dict[str, Any] = {}

        def progress(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = bar.add_task(stage, total=max(total, 1))
            bar.update(tasks[stage], completed=done, total=max(total, 1))

        yield progress


def add_paths_argument(parser: argparse.ArgumentParser) -> None:
    """Add the positional ``PATH...`` argument (files or folders of transcripts)."""
    parser.add_argument(
        "paths", nargs="+", metavar="PATH",
        help="transcript files or folders, in any layout salience knows (detected from content)",
    )


def load_inputs(paths: Sequence[str]) -> list[Transcript]:
    """Every transcript in ``paths``; a :class:`SalienceError` if there is none."""
    from salience.formats import load_transcripts

    transcripts = load_transcripts(list(paths))
    if not transcripts:
        raise SalienceError(f"no transcripts in {', '.join(paths)}")
    return transcripts


def _pct(share: float | None) -> str:
    return "-" if share is None else f"{100 * share:.1f}%"


# --------------------------------------------------------------------------
# salience stats
# --------------------------------------------------------------------------


def add_stats_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "stats",
        help="count transcripts, entries, tokens, roles, tools, labels and queries",
        description="Count transcripts, entries and tokens (cl100k_base) overall, by domain, by role "
        "and by tool, with the share of labelled entries that are needed.",
    )
    add_paths_argument(parser)
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON instead of tables")
    parser.add_argument("--top", type=_non_negative, default=10, metavar="N",
                        help="how many tools to list, the largest by tokens (default: 10)")
    parser.set_defaults(handler=run_stats)
    return parser


def _non_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer (got {text!r})") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer (got {text!r})")
    return value


def run_stats(args: argparse.Namespace) -> int:
    from salience.stats import transcript_stats

    stats = transcript_stats(load_inputs(args.paths), top=args.top)
    if args.json:
        print(json.dumps(stats.to_dict(), indent=2))
    else:
        print_stats(stats)
    return 0


def print_stats(stats: Stats, console: Console | None = None) -> None:
    """Rich tables: overall, by domain, by role, top tools."""
    from rich.table import Table

    console = console or stdout()
    overall = Table(title="Transcripts", show_header=False, title_justify="left")
    overall.add_column("what")
    overall.add_column("count", justify="right")
    for name, value in (
        ("transcripts", f"{stats.transcripts:,}"),
        ("entries", f"{stats.entries:,}"),
        ("tokens", f"{stats.tokens:,}"),
        ("tool calls", f"{stats.tool_calls:,}"),
        ("labelled entries", f"{stats.labeled:,}"),
        ("needed (of labelled)", _pct(stats.needed_share)),
        ("queries", f"{stats.queries:,}"),
        ("evidence ids", f"{stats.evidence:,}"),
    ):
        overall.add_row(name, value)
    console.print(overall)

    domains = Table(title="By domain", title_justify="left")
    for col in ("domain", "transcripts", "entries", "tokens", "labelled", "needed", "queries"):
        domains.add_column(col, justify="left" if col == "domain" else "right")
    for name, d in stats.by_domain.items():
        domains.add_row(name, f"{d.transcripts:,}", f"{d.entries:,}", f"{d.tokens:,}", f"{d.labeled:,}",
                        _pct(d.needed_share), f"{d.queries:,}")
    console.print(domains)

    roles = Table(title="By role", title_justify="left")
    for col in ("role", "entries", "tokens", "token share", "needed"):
        roles.add_column(col, justify="left" if col == "role" else "right")
    for name, r in stats.by_role.items():
        roles.add_row(name, f"{r.entries:,}", f"{r.tokens:,}", _pct(r.tokens / stats.tokens if stats.tokens else None),
                      _pct(r.needed_share))
    console.print(roles)

    if stats.by_tool:
        tools = Table(title=f"Top {len(stats.by_tool)} tools by result tokens", title_justify="left")
        for col in ("tool", "results", "tokens", "needed"):
            tools.add_column(col, justify="left" if col == "tool" else "right")
        for name, tl in stats.by_tool.items():
            tools.add_row(name, f"{tl.entries:,}", f"{tl.tokens:,}", _pct(tl.needed_share))
        console.print(tools)


# --------------------------------------------------------------------------
# salience label
# --------------------------------------------------------------------------


def add_label_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "label",
        help="label which entries later steps needed, and write canonical JSONL",
        description="Label every entry 1.0 (needed later) or 0.0 and write canonical JSONL. "
        "hindsight: an entry is needed when a later assistant step uses a value (id, number, path, name) "
        "that first appeared in it; evidence: an entry is needed when a query lists it as evidence; "
        "auto: evidence where queries list evidence, hindsight elsewhere.",
    )
    add_paths_argument(parser)
    parser.add_argument("-o", "--out", required=True, metavar="FILE", help="the JSONL file to write")
    parser.add_argument("--mode", choices=("auto", "hindsight", "evidence"), default="auto",
                        help="where labels come from (default: auto)")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace labels the input already has (default: keep them)")
    parser.set_defaults(handler=run_label)
    return parser


def run_label(args: argparse.Namespace) -> int:
    from salience.formats import save_transcripts
    from salience.scorer.labels import LabelMode, label, resolve_mode

    start = time.perf_counter()
    transcripts = load_inputs(args.paths)
    mode = LabelMode.parse(args.mode)
    labelled = []
    modes = {LabelMode.HINDSIGHT: 0, LabelMode.EVIDENCE: 0}
    with progress_bar() as progress:
        for transcript in progress.track(transcripts, description="labelling"):
            modes[resolve_mode(transcript, mode)] += 1
            labelled.append(label(transcript, mode=mode, overwrite=args.overwrite))
    try:
        path = save_transcripts(labelled, args.out)
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename and str(exc.filename) != str(args.out) else ""
        raise SalienceError(f"cannot write {args.out}: {where}{exc.strerror or exc}") from exc
    seconds = time.perf_counter() - start

    total = needed = tool_total = tool_needed = 0
    for t in labelled:
        for e in t.entries:
            if e.label is None:
                continue
            total += 1
            needed += e.label >= 0.5
            if e.role == "tool":
                tool_total += 1
                tool_needed += e.label >= 0.5
    out = stdout()
    out.print(
        f"labelled {len(labelled):,} transcripts ({modes[LabelMode.HINDSIGHT]:,} hindsight, "
        f"{modes[LabelMode.EVIDENCE]:,} evidence) in {seconds:.1f}s -> {path}"
    )
    out.print(f"needed: {needed:,} of {total:,} entries ({_pct(needed / total if total else None)})")
    out.print(
        f"needed tool entries: {tool_needed:,} of {tool_total:,} "
        f"({_pct(tool_needed / tool_total if tool_total else None)})"
    )
    return 0


# --------------------------------------------------------------------------
# parser and main
# --------------------------------------------------------------------------


def _registrar(spec: str) -> Callable[[Any], argparse.ArgumentParser] | None:
    """The ``add_parser`` function named by ``"module:function"``, or None if the module does not exist."""
    module_name, _, func = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if module_name == missing or module_name.startswith(missing + "."):
            return None
        raise
    return getattr(module, func)  # type: ignore[no-any-return]


def build_parser() -> argparse.ArgumentParser:
    """The ``salience`` parser with every command in :data:`COMMANDS` whose module exists."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Learn which entries of an LLM agent's context matter, and keep those inside a token budget.",
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="show tracebacks of errors")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    subparsers.required = True
    for _name, spec in COMMANDS:
        register = _registrar(spec)
        if register is None:
            continue
        sub = register(subparsers)
        if "--verbose" not in sub._option_string_actions:
            sub.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                             help="show tracebacks of errors")
    return parser


def _one_line(text: str) -> str:
    return " ".join(part.strip() for part in text.splitlines() if part.strip())


def _fail(message: str, code: int, verbose: bool) -> int:
    if verbose:
        traceback.print_exc(file=sys.stderr)
    print(f"{PROG}: error: {_one_line(message)}", file=sys.stderr)
    return code


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with ``argv`` (default ``sys.argv[1:]``); returns the exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, or a bad argument (argparse printed why)
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    verbose = bool(getattr(args, "verbose", False))
    try:
        return int(args.handler(args))
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except SalienceError as exc:
        return _fail(str(exc), 2, verbose)
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        return _fail(f"{where}{exc.strerror or exc}", 2, verbose)
    except ValueError as exc:
        return _fail(str(exc), 2, verbose)
    except Exception as exc:  # a bug: say so in one line, the traceback with --verbose
        hint = "" if verbose else " (run with --verbose for the traceback)"
        return _fail(f"internal error: {type(exc).__name__}: {exc}{hint}", 1, verbose)
