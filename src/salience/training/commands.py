"""Deprecated: ``salience train`` moved to :mod:`salience.cli.train`; re-exported for one release."""

from __future__ import annotations

from salience.cli.train import add_parser as add_train_parser
from salience.cli.train import run as run_train

__all__ = ["add_train_parser", "run_train"]
