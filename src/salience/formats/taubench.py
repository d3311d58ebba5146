"""Moved to :mod:`salience.datasets.taubench`; this module re-exports its names for one release.

``salience.formats.taubench`` is the old import path: import from ``salience.datasets.taubench`` instead.
"""

from __future__ import annotations

from salience.datasets.taubench import NAME, load, run_to_transcript, sniff

__all__ = ["NAME", "load", "run_to_transcript", "sniff"]
