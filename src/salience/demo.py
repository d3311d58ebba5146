"""Deprecated: ``salience demo`` moved to :mod:`salience.cli.demo`; re-exported for one release."""

from __future__ import annotations

from salience.cli.demo import add_parser as add_demo_parser
from salience.cli.demo import run as run_demo

__all__ = ["add_demo_parser", "run_demo"]
