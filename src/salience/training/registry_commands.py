"""Deprecated: ``salience versions`` and ``salience promote`` moved to :mod:`salience.cli.registry`;
re-exported for one release."""

from __future__ import annotations

from salience.cli.registry import add_promote_parser, add_versions_parser, metric_columns, print_versions

__all__ = ["add_promote_parser", "add_versions_parser", "metric_columns", "print_versions"]
