"""Scoring: which entries of a transcript will be needed later.

Submodules:

* :mod:`salience.scorer.labels`: hindsight and evidence labels (the training targets)
  and the per-step references the agent benchmark replays.

Heavy dependencies (torch, sentence-transformers, scikit-learn) are imported by the
submodules that need them, never here, so ``import salience.scorer`` stays fast.
"""

from __future__ import annotations
