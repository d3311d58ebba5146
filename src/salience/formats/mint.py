"""Moved to :mod:`salience.datasets.mint`; this module re-exports its names for one release.

``salience.formats.mint`` is the old import path: import from ``salience.datasets.mint`` instead.
"""

from __future__ import annotations

from salience.datasets.mint import CATEGORIES, NAME, load, run_to_transcript, sniff

__all__ = ["CATEGORIES", "NAME", "load", "run_to_transcript", "sniff"]
