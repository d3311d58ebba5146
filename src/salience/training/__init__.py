"""Training, tuning and experiment tracking: the layer above the scorer and the selector.

* :mod:`salience.training.split`: the held-out split by task or transcript that
  ``salience train``, ``tune`` and ``bench`` share;
* :mod:`salience.training.train`: label, split, cross-validate, fit, benchmark and save
  a scorer (``salience train``);
* :mod:`salience.training.tune`: per-domain tuning of the Compactor's thresholds
  (``salience tune``), and :mod:`salience.training.tune_result`, what it returns (the
  profile, its metrics and tables);
* :mod:`salience.training.tracking`: MLflow runs and the model registry (the only
  module that imports mlflow, lazily), and :mod:`salience.training.pyfunc`, the
  Compactor as an MLflow ``pyfunc`` model (imported only by MLflow's model loader and
  by tracking).

The recall benchmarks that ``train`` and ``tune`` run live in :mod:`salience.bench`
(``salience.training.bench`` re-exports them for one release).

Importing this package registers the MLflow loader for ``models:/`` and ``runs:/``
URIs with :mod:`salience.scorer.loaders`, so ``ImportanceScorer.load("models:/NAME@champion")``
works while the scorer layer imports nothing from training; ``import salience`` imports
this package, so the registration is always there. It is cheap: this package imports
nothing but the registry at import time, :mod:`~salience.training.tracking` is imported
when a URI is first loaded, and mlflow inside it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from salience.scorer.loaders import MLFLOW_PREFIXES, register_loader

if TYPE_CHECKING:
    from salience.scorer.model import ImportanceScorer


def _load_from_mlflow(uri: str) -> ImportanceScorer:
    """:func:`salience.training.tracking.load_scorer`, imported and looked up at each call."""
    from salience.training import tracking

    return tracking.load_scorer(uri)


for _prefix in MLFLOW_PREFIXES:
    register_loader(_prefix, _load_from_mlflow)
