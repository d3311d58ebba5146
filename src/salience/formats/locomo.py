"""Moved to :mod:`salience.datasets.locomo`; this module re-exports its names for one release.

``salience.formats.locomo`` is the old import path: import from ``salience.datasets.locomo`` instead.
"""

from __future__ import annotations

from salience.datasets.locomo import DOMAIN, NAME, load, normalise_evidence, sniff

__all__ = ["DOMAIN", "NAME", "load", "normalise_evidence", "sniff"]
