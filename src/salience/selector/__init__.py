"""Selecting: which entries stay, in what form, within a token budget.

* :mod:`salience.selector.knapsack`: the pure solver (one option per entry, tool groups atomic).
* :mod:`salience.selector.masking`: phases and per-domain policies on tool outputs.
* :mod:`salience.selector.render`: the text of trimmed entries and stubs.
* :mod:`salience.selector.compactor`: the glue, :class:`Compactor` and its :class:`Compaction`.

Names load on first use, so importing the package stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from salience.selector.compactor import Compaction, CompactionSession, Compactor, PrefixReuse
    from salience.selector.masking import Limit, Option, Phase, PhasePolicy, detect_phase, mask_options

__all__ = [
    "Compaction",
    "CompactionSession",
    "Compactor",
    "Limit",
    "Option",
    "Phase",
    "PhasePolicy",
    "PrefixReuse",
    "detect_phase",
    "mask_options",
]

_LAZY = {
    "Compaction": "salience.selector.compactor",
    "CompactionSession": "salience.selector.compactor",
    "Compactor": "salience.selector.compactor",
    "PrefixReuse": "salience.selector.compactor",
    "Limit": "salience.selector.masking",
    "Option": "salience.selector.masking",
    "Phase": "salience.selector.masking",
    "PhasePolicy": "salience.selector.masking",
    "detect_phase": "salience.selector.masking",
    "mask_options": "salience.selector.masking",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'salience.selector' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
