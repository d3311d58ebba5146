"""Moved to :mod:`salience.datasets._io`; this module re-exports its names for one release.

``salience.formats._io`` is the old import path: import from ``salience.datasets._io`` instead.
"""

from __future__ import annotations

from salience.datasets._io import json_lines, read_json

__all__ = ["json_lines", "read_json"]
