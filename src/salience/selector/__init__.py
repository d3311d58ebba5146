"""Selecting: which entries stay, in what form, within a token budget.

* :mod:`salience.selector.knapsack`: the pure solver (one option per entry, tool groups atomic).
* :mod:`salience.selector.masking`: phases and per-domain policies on tool outputs.
* :mod:`salience.selector.render`: the text of trimmed entries and stubs.
* :mod:`salience.selector.params`: the compactor's parameters, checked, and tuned profiles.
* :mod:`salience.selector.scoring`: the scorer's scores, checked, and the fallback scorer.
* :mod:`salience.selector.options`: each entry's options and their costs; tool-group units.
* :mod:`salience.selector.run`: one run over one transcript: pins, values, solve, assemble.
* :mod:`salience.selector.result`: :class:`Compaction` and :class:`PrefixReuse`.
* :mod:`salience.selector.compactor`: :class:`Compactor`, the entry point.
* :mod:`salience.selector.session`: :class:`CompactionSession`, across an agent loop's calls.

Reading and writing the messages' formats is :mod:`salience.messages.dispatch`'s.

Names load on first use, so importing the package stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from salience.selector.compactor import Compactor
    from salience.selector.masking import Limit, Option, Phase, PhasePolicy, detect_phase, mask_options
    from salience.selector.result import Compaction, PrefixReuse
    from salience.selector.session import CompactionSession

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
    "Compaction": "salience.selector.result",
    "CompactionSession": "salience.selector.session",
    "Compactor": "salience.selector.compactor",
    "PrefixReuse": "salience.selector.result",
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
