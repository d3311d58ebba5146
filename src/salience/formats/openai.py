"""Moved to :mod:`salience.messages.openai`; this module re-exports its names for one release.

``salience.formats.openai`` is the old import path: import from ``salience.messages.openai`` instead.
"""

from __future__ import annotations

from salience.messages.openai import (
    KEY,
    entry_from_openai,
    entry_to_openai,
    from_openai,
    message_where,
    to_openai,
)

__all__ = ["KEY", "entry_from_openai", "entry_to_openai", "from_openai", "message_where", "to_openai"]
