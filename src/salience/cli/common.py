"""What the ``salience`` commands share: consoles, progress, input loading, stats tables,
and the one place where an exception becomes an exit code.

Every command module imports its helpers from here (never from :mod:`salience.cli` or
:mod:`salience.cli.dispatch`):

* :func:`stdout`: a rich console on ``sys.stdout``; :func:`progress_bar` and
  :func:`stage_progress`: rich progress on stderr (silent off a terminal).
* :func:`add_paths_argument` and :func:`load_inputs`: the ``PATH...`` argument, read with
  :func:`salience.load_transcripts`.
* :func:`print_stats`: the tables of ``salience stats`` (also shown by ``salience demo``).
* :func:`exit_code`: what :func:`salience.cli.main` returns for an exception: 2 on bad
  input (a :class:`~salience.errors.SalienceError` or an ``OSError``) with one line on
  stderr, ``salience: error: <message>``; 1 on an internal error, a bare ``ValueError``
  included (the library raises a :class:`~salience.errors.ParameterError` for a bad
  value, so a plain one is a bug: ``--verbose`` shows its traceback); 130 when interrupted.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import traceback
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from salience.errors import SalienceError

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress

    from salience.stats import Stats
    from salience.transcript import Transcript

__all__ = [
    "PROG",
    "add_paths_argument",
    "exit_code",
    "load_inputs",
    "non_negative",
    "pct",
    "print_stats",
    "progress_bar",
    "stage_progress",
    "stdout",
]

PROG = "salience"


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
    from salience.datasets import load_transcripts

    transcripts = load_transcripts(list(paths))
    if not transcripts:
        raise SalienceError(f"no transcripts in {', '.join(paths)}")
    return transcripts


def pct(share: float | None) -> str:
    """``0.125`` as ``"12.5%"``; ``None`` as ``"-"``."""
    return "-" if share is None else f"{100 * share:.1f}%"


def non_negative(text: str) -> int:
    """An argparse ``type``: a non-negative integer."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer (got {text!r})") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer (got {text!r})")
    return value


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
        ("needed (of labelled)", pct(stats.needed_share)),
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
                        pct(d.needed_share), f"{d.queries:,}")
    console.print(domains)

    roles = Table(title="By role", title_justify="left")
    for col in ("role", "entries", "tokens", "token share", "needed"):
        roles.add_column(col, justify="left" if col == "role" else "right")
    for name, r in stats.by_role.items():
        roles.add_row(name, f"{r.entries:,}", f"{r.tokens:,}", pct(r.tokens / stats.tokens if stats.tokens else None),
                      pct(r.needed_share))
    console.print(roles)

    if stats.by_tool:
        tools = Table(title=f"Top {len(stats.by_tool)} tools by result tokens", title_justify="left")
        for col in ("tool", "results", "tokens", "needed"):
            tools.add_column(col, justify="left" if col == "tool" else "right")
        for name, tl in stats.by_tool.items():
            tools.add_row(name, f"{tl.entries:,}", f"{tl.tokens:,}", pct(tl.needed_share))
        console.print(tools)


# --------------------------------------------------------------------------
# exceptions -> exit codes
# --------------------------------------------------------------------------


def _one_line(text: str) -> str:
    return " ".join(part.strip() for part in text.splitlines() if part.strip())


def _fail(message: str, code: int, verbose: bool) -> int:
    if verbose:
        traceback.print_exc(file=sys.stderr)
    print(f"{PROG}: error: {_one_line(message)}", file=sys.stderr)
    return code


def exit_code(exc: BaseException, *, verbose: bool = False) -> int:
    """The exit code for ``exc`` raised by a command, after saying why on stderr (call it
    inside the ``except`` block, so that ``verbose`` can print the traceback).

    2 for bad input (:class:`SalienceError`, ``OSError``), 130 for an interrupt, 1 for
    anything else: a bug, a bare ``ValueError`` or ``TypeError`` too (whatever salience
    raises on bad input is a :class:`SalienceError`). ``SystemExit`` and other
    ``BaseException`` that are not ``Exception`` are raised again.
    """
    if isinstance(exc, KeyboardInterrupt):
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    if isinstance(exc, SalienceError):
        return _fail(str(exc), 2, verbose)
    if isinstance(exc, OSError):
        where = f"{exc.filename}: " if exc.filename else ""
        return _fail(f"{where}{exc.strerror or exc}", 2, verbose)
    if not isinstance(exc, Exception):
        raise exc
    hint = "" if verbose else " (run with --verbose for the traceback)"
    return _fail(f"internal error: {type(exc).__name__}: {exc}{hint}", 1, verbose)
