"""Moved to :mod:`salience.messages.anthropic`; this module re-exports its names for one release.

``salience.formats.anthropic`` is the old import path: import from ``salience.messages.anthropic`` instead.
"""

from __future__ import annotations

from salience.messages.anthropic import (
    KEY,
    Reader,
    from_anthropic,
    render_appended,
    source_messages,
    system_of,
    to_anthropic,
)

__all__ = ["KEY", "Reader", "from_anthropic", "render_appended", "source_messages", "system_of", "to_anthropic"]
