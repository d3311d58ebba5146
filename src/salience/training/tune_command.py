"""Deprecated: ``salience tune`` moved to :mod:`salience.cli.tune`; re-exported for one release."""

from __future__ import annotations

from salience.cli.tune import add_parser as add_tune_parser
from salience.cli.tune import resolve_tune_scorer
from salience.cli.tune import run as run_tune

__all__ = ["add_tune_parser", "resolve_tune_scorer", "run_tune"]
