"""Moved to :mod:`salience.datasets.apibank`; this module re-exports its names for one release.

``salience.formats.apibank`` is the old import path: import from ``salience.datasets.apibank`` instead.
"""

from __future__ import annotations

from salience.datasets.apibank import DOMAIN, NAME, load, sniff

__all__ = ["DOMAIN", "NAME", "load", "sniff"]
