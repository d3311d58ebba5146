"""Moved to :mod:`salience.datasets.tooltalk`; this module re-exports its names for one release.

``salience.formats.tooltalk`` is the old import path: import from ``salience.datasets.tooltalk`` instead.
"""

from __future__ import annotations

from salience.datasets.tooltalk import DOMAIN, NAME, conversation_to_transcript, load, sniff

__all__ = ["DOMAIN", "NAME", "conversation_to_transcript", "load", "sniff"]
