"""Moved to :mod:`salience.messages.validate`; this module re-exports its names for one release.

``salience.selector.validate`` is the old import path: import from ``salience.messages.validate`` instead.
"""

from __future__ import annotations

from salience.messages.validate import ANTHROPIC_ID, check_anthropic, check_openai, pending_calls

__all__ = ["ANTHROPIC_ID", "check_anthropic", "check_openai", "pending_calls"]
