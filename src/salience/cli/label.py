"""``salience label``: label which entries later steps needed, and write canonical JSONL.

Usage::

    salience label PATH... --out FILE [--mode auto|hindsight|evidence] [--overwrite]

The labelling is :func:`salience.scorer.labels.label`.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from salience.cli.common import add_paths_argument, load_inputs, pct, progress_bar, stdout
from salience.errors import SalienceError

__all__ = ["add_parser", "run"]


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
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
    parser.set_defaults(handler=run)
    return parser


def run(args: argparse.Namespace) -> int:
    from salience.datasets import save_transcripts
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
    out.print(f"needed: {needed:,} of {total:,} entries ({pct(needed / total if total else None)})")
    out.print(
        f"needed tool entries: {tool_needed:,} of {tool_total:,} "
        f"({pct(tool_needed / tool_total if tool_total else None)})"
    )
    return 0
