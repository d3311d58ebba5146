"""Moved to :mod:`salience.datasets.jsonl`; this module re-exports its names for one release.

``salience.formats.jsonl`` is the old import path: import from ``salience.datasets.jsonl`` instead.
"""

from __future__ import annotations

from salience.datasets.jsonl import NAME, dump_transcript, load, parse_transcript, save, sniff

__all__ = ["NAME", "dump_transcript", "load", "parse_transcript", "save", "sniff"]
