"""Moved to :mod:`salience.datasets.sweagent`; this module re-exports its names for one release.

``salience.formats.sweagent`` is the old import path: import from ``salience.datasets.sweagent`` instead.
"""

from __future__ import annotations

from salience.datasets.sweagent import DOMAIN, NAME, history_to_transcript, load, sniff

__all__ = ["DOMAIN", "NAME", "history_to_transcript", "load", "sniff"]
