"""Deprecated: ``salience compact`` and ``salience inspect`` moved to :mod:`salience.cli.compact`,
:mod:`salience.cli.inspect` and :mod:`salience.cli.compaction`; these names are re-exported
for one release."""

from __future__ import annotations

from salience.cli.compact import (
    ARCHIVE_VERSION,
    archive_document,
    restore_archive,
)
from salience.cli.compact import add_parser as add_compact_parser
from salience.cli.compact import run as run_compact
from salience.cli.compaction import INPUT_FORMATS, INSPECT_SHARE, LoadedInput, parse_budget, read_input, resolve_scorer
from salience.cli.inspect import add_parser as add_inspect_parser
from salience.cli.inspect import print_inspection
from salience.cli.inspect import run as run_inspect

__all__ = [
    "ARCHIVE_VERSION",
    "INPUT_FORMATS",
    "INSPECT_SHARE",
    "LoadedInput",
    "add_compact_parser",
    "add_inspect_parser",
    "archive_document",
    "parse_budget",
    "print_inspection",
    "read_input",
    "resolve_scorer",
    "restore_archive",
    "run_compact",
    "run_inspect",
]
