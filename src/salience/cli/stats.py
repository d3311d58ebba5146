"""``salience stats``: count transcripts, entries, tokens, roles, tools, labels and queries.

Usage::

    salience stats PATH... [--json] [--top N]

The counting is :func:`salience.stats.transcript_stats`; the tables are
:func:`salience.cli.common.print_stats`.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from salience.cli.common import add_paths_argument, load_inputs, non_negative, print_stats

__all__ = ["add_parser", "run"]


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "stats",
        help="count transcripts, entries, tokens, roles, tools, labels and queries",
        description="Count transcripts, entries and tokens (cl100k_base) overall, by domain, by role "
        "and by tool, with the share of labelled entries that are needed.",
    )
    add_paths_argument(parser)
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON instead of tables")
    parser.add_argument("--top", type=non_negative, default=10, metavar="N",
                        help="how many tools to list, the largest by tokens (default: 10)")
    parser.set_defaults(handler=run)
    return parser


def run(args: argparse.Namespace) -> int:
    from salience.stats import transcript_stats

    stats = transcript_stats(load_inputs(args.paths), top=args.top)
    if args.json:
        print(json.dumps(stats.to_dict(), indent=2))
    else:
        print_stats(stats)
    return 0
