"""Deprecated: ``salience bench`` moved to :mod:`salience.cli.bench`; re-exported for one release."""

from __future__ import annotations

from salience.cli.bench import add_parser as add_bench_parser
from salience.cli.bench import parse_budgets, parse_names, resolve_scorer
from salience.cli.bench import run as run_bench

__all__ = ["add_bench_parser", "parse_budgets", "parse_names", "resolve_scorer", "run_bench"]
